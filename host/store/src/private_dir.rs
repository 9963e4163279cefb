//! Directories only the host's user may enter, and making a directory's
//! entries durable: the one copy every part of the data directory uses.
//!
//! # Ambient authority
//!
//! Creates and opens the directories its callers name.

use std::path::Path;

/// Creates `dir` and its missing parents with mode 0700 (on Unix; plain
/// directories elsewhere). An existing directory is left as it is.
///
/// # Errors
///
/// A directory cannot be created.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Flushes `dir`'s entries (a file created or renamed in it) to disk, as
/// far as the platform allows; a directory that cannot be opened is
/// skipped (the rename it follows has happened already).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Makes a new file at `path` whole or not at all: `write` makes it under a
/// temporary name beside it (written and synced), which is then linked to
/// `path` in one step, so that no reader ever sees it half written. `false`
/// when a file is at `path` already (another process made it first): it is
/// left as it is, and this one's is dropped.
///
/// # Errors
///
/// `write` fails, or the file cannot be linked.
pub fn create_whole(
    path: &Path,
    write: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<bool> {
    use anyhow::Context as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|e| anyhow::anyhow!("random source: {e}"))?;
    let tmp = dir.join(format!(
        ".{name}.{}-{}.tmp",
        std::process::id(),
        u64::from_le_bytes(nonce)
    ));
    if let Err(e) = write(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_dir(dir);
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_context(|| format!("{}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_owner_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("a/b");
        create_private_dir(&dir).expect("create");
        create_private_dir(&dir).expect("an existing directory is fine");
        assert!(dir.is_dir());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            for d in [tmp.path().join("a"), dir] {
                let mode = std::fs::metadata(&d).expect("stat").permissions().mode();
                assert_eq!(mode & 0o777, 0o700, "{}", d.display());
            }
        }
        sync_dir(tmp.path());
    }
}
