//! Opening a granted directory for one task, never trusting install.
//!
//! Each task opens each granted directory again, from `/`, one component at
//! a time, refusing a symbolic link in any component (`O_NOFOLLOW` on every
//! step, `O_PATH` for the directories on the way), and checks that what it
//! opened is the directory the install recorded (device and inode). A task
//! of one capability that replaced a directory another grant names (with a
//! link to `/etc`, or with a directory of its own) therefore redirects
//! nothing: the next task of the grant fails with `resource_unavailable`,
//! saying which component is wrong, and other capabilities run on.
//!
//! The opened handle becomes the preopen through `/proc/self/fd/<n>`: the
//! kernel resolves that magic link to the open directory itself, not by
//! walking its path again, so what the guest gets is what was checked.
//!
//! # Ambient authority
//!
//! Opens host directories by absolute path: the granted ones, and the
//! directories on their way.

use hcp_contracts::manifest::{DirIdentity, FsGrant};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// A granted directory a task cannot have. Its `Display` names the host's
/// directory, for the operator's log; the caller is told
/// [`GrantUnavailable::for_caller`], which names only the guest path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("granted directory {host} (guest {guest}) is unavailable: {why}")]
pub(crate) struct GrantUnavailable {
    /// The grant's host path.
    pub(crate) host: String,
    /// The grant's guest path.
    pub(crate) guest: String,
    /// What is wrong, naming the component.
    pub(crate) why: String,
    /// What is wrong, without a host path.
    pub(crate) brief: String,
}

impl GrantUnavailable {
    /// What the task's caller is told: the guest path and what is wrong,
    /// no path of the host's (the operator's log has those).
    pub(crate) fn for_caller(&self) -> String {
        format!(
            "granted directory {} is unavailable: {}",
            self.guest, self.brief
        )
    }
}

/// An opened granted directory: held until the preopen is built from it.
#[derive(Debug)]
pub(crate) struct OpenedGrant {
    fd: OwnedFd,
}

impl OpenedGrant {
    /// The path through which the preopen reopens exactly this directory.
    pub(crate) fn proc_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }

    /// The identity of the directory opened.
    pub(crate) fn identity(&self) -> std::io::Result<DirIdentity> {
        let st = rustix::fs::fstat(&self.fd)?;
        Ok(DirIdentity {
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }
}

/// Opens `grant`'s directory without following a symbolic link in any
/// component, and checks it is the directory recorded for it.
///
/// # Errors
///
/// A component is missing, a symbolic link or not a directory; the
/// directory is not the one recorded; or it cannot be opened.
pub(crate) fn open(grant: &FsGrant) -> Result<OpenedGrant, GrantUnavailable> {
    let unavailable = |(why, brief): (String, String)| GrantUnavailable {
        host: grant.host_path.display().to_string(),
        guest: grant.guest_path.clone(),
        why,
        brief,
    };
    let same = |why: &str| (why.to_owned(), why.to_owned());
    let path = &grant.host_path;
    let mut names: Vec<&OsStr> = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir if names.is_empty() => {}
            Component::Normal(n) => names.push(n),
            _ => return Err(unavailable(same("not an absolute, normalized path"))),
        }
    }
    if !path.is_absolute() {
        return Err(unavailable(same("not an absolute, normalized path")));
    }
    let last_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let way_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root_flags = if names.is_empty() {
        last_flags
    } else {
        way_flags
    };
    let mut dir = rustix::fs::open("/", root_flags, Mode::empty())
        .map_err(|e| unavailable((format!("/: {e}"), format!("the host's root: {e}"))))?;
    let mut walked = PathBuf::from("/");
    for (k, name) in names.iter().enumerate() {
        walked.push(name);
        let flags = if k + 1 == names.len() {
            last_flags
        } else {
            way_flags
        };
        let next = rustix::fs::openat(&dir, *name, flags, Mode::empty())
            .map_err(|e| unavailable(describe(&dir, name, &walked, e)))?;
        // O_DIRECTORY already refuses anything else; checked once more so
        // that no kernel's reading of O_PATH | O_NOFOLLOW can let a link by.
        let st = rustix::fs::fstat(&next).map_err(|e| unavailable(same(&e.to_string())))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(unavailable(describe(&dir, name, &walked, Errno::NOTDIR)));
        }
        dir = next;
    }
    let opened = OpenedGrant { fd: dir };
    if let Some(recorded) = grant.identity {
        let found = opened
            .identity()
            .map_err(|e| unavailable(same(&e.to_string())))?;
        if found != recorded {
            return Err(unavailable((
                format!(
                    "it is not the directory recorded for this grant ({recorded}); \
                     {found} is there now: reinstall the capability to grant the new directory"
                ),
                "it is not the directory recorded for this grant (the operator must \
                 reinstall the capability to grant the new one)"
                    .to_owned(),
            )));
        }
    }
    Ok(opened)
}

/// Why `name` under `dir` (reached as `walked`) could not be opened: for
/// the operator (naming the host path) and for the caller (naming none).
fn describe(dir: &OwnedFd, name: &OsStr, walked: &Path, error: Errno) -> (String, String) {
    let shown = walked.display();
    let on_its_way = "its host directory, or a directory on the way to it,";
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => (
                format!(
                    "{shown} is a symbolic link (granted directories are opened without following links)"
                ),
                format!(
                    "{on_its_way} is a symbolic link (granted directories are opened without following links)"
                ),
            ),
            FileType::Directory => (
                format!("{shown}: {error}"),
                format!("{on_its_way} cannot be opened: {error}"),
            ),
            _ => (
                format!("{shown} is not a directory"),
                format!("{on_its_way} is not a directory"),
            ),
        },
        Err(Errno::NOENT) => (
            format!("{shown} does not exist"),
            format!("{on_its_way} does not exist"),
        ),
        Err(_) => (
            format!("{shown}: {error}"),
            format!("{on_its_way} cannot be opened: {error}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_contracts::manifest::Access;
    use std::os::unix::fs::symlink;

    fn grant(path: &Path) -> FsGrant {
        FsGrant {
            host_path: path.to_owned(),
            guest_path: "/g".into(),
            access: Access::ReadOnly,
            identity: Some(hcp_contracts::manifest::dir_identity(path).expect("stat")),
        }
    }

    fn why(grant: &FsGrant) -> String {
        open(grant).expect_err("refused").why
    }

    /// `<tmp>/a/b/c`, granted; `<tmp>/elsewhere/b/c` looks the same.
    fn tree() -> (tempfile::TempDir, PathBuf, FsGrant) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(base.join("a/b/c")).expect("mkdir");
        std::fs::create_dir_all(base.join("elsewhere/b/c")).expect("mkdir");
        let g = grant(&base.join("a/b/c"));
        (tmp, base, g)
    }

    #[test]
    fn the_granted_directory_opens_and_is_the_recorded_one() {
        let (_tmp, base, g) = tree();
        let opened = open(&g).expect("opens");
        assert_eq!(opened.identity().ok(), g.identity);
        let via_proc = std::fs::metadata(opened.proc_path()).expect("proc");
        use std::os::unix::fs::MetadataExt as _;
        let recorded = g.identity.expect("recorded");
        assert_eq!(
            (via_proc.dev(), via_proc.ino()),
            (recorded.dev, recorded.ino)
        );
        // The same directory as the path names.
        assert_eq!(
            hcp_contracts::manifest::dir_identity(&base.join("a/b/c")).ok(),
            Some(recorded)
        );
    }

    #[test]
    fn a_symbolic_link_in_any_component_is_refused() {
        for component in ["a", "a/b", "a/b/c"] {
            let (_tmp, base, g) = tree();
            let at = base.join(component);
            std::fs::rename(&at, base.join("moved")).expect("move aside");
            // The link leads to a directory of the same shape: following it
            // would "work".
            let same_shape = base
                .join("elsewhere")
                .join(component.trim_start_matches('a').trim_start_matches('/'));
            symlink(same_shape, &at).expect("symlink");
            assert_eq!(
                why(&g),
                format!(
                    "{} is a symbolic link (granted directories are opened without following links)",
                    at.display()
                ),
                "{component}"
            );
        }
    }

    #[test]
    fn a_link_to_etc_is_refused_with_the_whole_message() {
        let (_tmp, base, g) = tree();
        let c = base.join("a/b/c");
        std::fs::remove_dir(&c).expect("rmdir");
        symlink("/etc", &c).expect("symlink");
        assert_eq!(
            open(&g).expect_err("refused").to_string(),
            format!(
                "granted directory {} (guest /g) is unavailable: {} is a symbolic link \
                 (granted directories are opened without following links)",
                c.display(),
                c.display()
            )
        );
    }

    #[test]
    fn a_dangling_link_and_a_missing_directory_are_refused() {
        let (_tmp, base, g) = tree();
        let c = base.join("a/b/c");
        std::fs::remove_dir(&c).expect("rmdir");
        assert_eq!(why(&g), format!("{} does not exist", c.display()));
        symlink(base.join("nowhere"), &c).expect("symlink");
        assert_eq!(
            why(&g),
            format!(
                "{} is a symbolic link (granted directories are opened without following links)",
                c.display()
            )
        );
        std::fs::remove_file(&c).expect("rm");
        std::fs::write(&c, "a file").expect("write");
        assert_eq!(why(&g), format!("{} is not a directory", c.display()));
    }

    #[test]
    fn the_caller_is_told_the_guest_path_and_never_a_host_path() {
        let (_tmp, base, g) = tree();
        let c = base.join("a/b/c");
        std::fs::remove_dir(&c).expect("rmdir");
        let e = open(&g).expect_err("refused");
        assert_eq!(
            e.for_caller(),
            "granted directory /g is unavailable: its host directory, or a directory on the \
             way to it, does not exist"
        );
        // The operator's message names the host's directory.
        assert!(e.to_string().contains(&c.display().to_string()), "{e}");
        for (make, _) in [(true, "link"), (false, "swap")] {
            let (_tmp, base, g) = tree();
            let c = base.join("a/b/c");
            std::fs::rename(&c, base.join("old-c")).expect("move aside");
            if make {
                symlink(base.join("old-c"), &c).expect("symlink");
            } else {
                std::fs::create_dir(&c).expect("mkdir");
            }
            let told = open(&g).expect_err("refused").for_caller();
            assert!(
                told.starts_with("granted directory /g is unavailable: "),
                "{told}"
            );
            assert!(!told.contains(&*base.to_string_lossy()), "{told}");
        }
    }

    #[test]
    fn a_directory_swapped_for_another_is_refused() {
        let (_tmp, base, g) = tree();
        let c = base.join("a/b/c");
        std::fs::rename(&c, base.join("old-c")).expect("move aside");
        std::fs::create_dir(&c).expect("mkdir");
        let now = hcp_contracts::manifest::dir_identity(&c).expect("stat");
        assert_eq!(
            why(&g),
            format!(
                "it is not the directory recorded for this grant ({}); {now} is there now: \
                 reinstall the capability to grant the new directory",
                g.identity.expect("recorded")
            )
        );
        // Moved back, it is the granted directory again.
        std::fs::remove_dir(&c).expect("rmdir");
        std::fs::rename(base.join("old-c"), &c).expect("move back");
        open(&g).expect("opens again");
    }

    #[test]
    fn paths_that_are_not_absolute_and_normal_are_refused() {
        for p in ["relative/dir", "/a/../b"] {
            let g = FsGrant {
                host_path: p.into(),
                guest_path: "/g".into(),
                access: Access::ReadOnly,
                identity: None,
            };
            assert_eq!(why(&g), "not an absolute, normalized path", "{p}");
        }
    }
}
