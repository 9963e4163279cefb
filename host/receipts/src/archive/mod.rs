//! The tar archives of the host: the one deterministic writer, the one
//! hardened reader and the one entry-path rule behind evidence packs and
//! plugin bundles.
//!
//! Written archives are plain ustar: entries sorted by path, regular files
//! only, mode 0644, uid and gid 0, no user or group names, mtime 0, so the
//! same entries always give the same bytes. Entry paths are 1 to
//! [`MAX_PATH`] bytes of `/`-separated components from `[A-Za-z0-9._-]`,
//! none empty, `.` or `..`, never absolute (a ustar name field holds them
//! without a prefix or an extension header).

mod read;
mod write;

pub use read::{TarLimits, TarProblem, read_entries};
pub use write::{WriteProblem, write};

/// The longest entry path, in bytes.
pub const MAX_PATH: usize = 100;

/// Why an entry path breaks the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    /// An absolute path or a `..` component: it would leave the archive.
    #[error("escapes the archive (absolute path or `..`)")]
    Traversal,
    /// Any other break of the rule, with what is wrong.
    #[error("{0}")]
    Bad(&'static str),
}

/// Checks an entry path against the rule (see the module doc).
///
/// # Errors
///
/// [`PathProblem::Traversal`] for an absolute path or a `..` component
/// (also behind a `\`), [`PathProblem::Bad`] for anything else.
pub fn check_path(path: &str) -> Result<(), PathProblem> {
    if path.starts_with('/') || path.split(['/', '\\']).any(|c| c == "..") {
        return Err(PathProblem::Traversal);
    }
    if path.is_empty() || path.len() > MAX_PATH {
        return Err(PathProblem::Bad("paths are 1 to 100 bytes"));
    }
    for component in path.split('/') {
        if component.is_empty() || component == "." {
            return Err(PathProblem::Bad("empty or `.` path component"));
        }
        if !component
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(PathProblem::Bad("path components use [A-Za-z0-9._-] only"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_rule() {
        for ok in [
            "manifest.json",
            "wit/world.wit",
            "a/b/c_d.e",
            "keys/k-1.pub",
        ] {
            assert_eq!(check_path(ok), Ok(()), "{ok}");
        }
        for traversal in ["../x", "/etc/passwd", "a/../b", "a\\..\\b", "a/.."] {
            assert_eq!(
                check_path(traversal),
                Err(PathProblem::Traversal),
                "{traversal}"
            );
        }
        for bad in ["", "a//b", "./a", "a/", "sp ace", "ü", &"a".repeat(101)] {
            assert!(matches!(check_path(bad), Err(PathProblem::Bad(_))), "{bad}");
        }
        assert_eq!(check_path(&"a".repeat(100)), Ok(()));
    }
}
