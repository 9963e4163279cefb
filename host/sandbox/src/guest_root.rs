//! The guest's `/`: an empty, removed, read-only directory preopened at
//! `/` beside the granted directories, so that a path outside them reaches
//! the PEP.
//!
//! A guest's C library (wasi-libc, under Rust's `std` and CPython) resolves
//! an absolute path against the preopens itself: with only `/data`
//! preopened, opening `/etc/passwd` failed in the guest with `ENOENT`, and
//! the host never saw the call (no note in the task log, no receipt). With
//! `/` preopened as well, the library hands such a path to the host as
//! `open-at(/, "etc/passwd")`; the governed filesystem (`crate::fs`) asks
//! the PEP, which denies it with a receipt and a note naming the granted
//! directories. A path inside a grant still goes to its own preopen (the
//! library picks the longest matching one).
//!
//! What stands behind `/` holds nothing and can hold nothing: a directory
//! made once per process under the system's temporary directory (mode
//! 0500), opened, and removed at once. Its open descriptor is what every
//! task's `/` reopens (through `/proc/self/fd/<n>`, as granted directories
//! are, see [`crate::grant_dir`]); nothing can be made in a removed
//! directory, and the preopen is read-only besides. A call the PEP allows
//! through it (a granted path named from `/`) finds nothing there.
//!
//! # Ambient authority
//!
//! Makes, opens and removes one directory in the system's temporary
//! directory, once per process.

use std::hash::{BuildHasher as _, Hasher as _};
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::sync::OnceLock;

/// The removed directory's descriptor, or why there is none.
static ROOT: OnceLock<Result<OwnedFd, String>> = OnceLock::new();

/// The path through which a task's preopen of `/` reopens the empty
/// directory; `Err` says why it could not be made (the task then runs
/// without it, as before: paths outside its grants do not exist for it).
pub(crate) fn proc_path() -> Result<String, String> {
    match ROOT.get_or_init(make) {
        Ok(fd) => Ok(format!("/proc/self/fd/{}", fd.as_raw_fd())),
        Err(e) => Err(e.clone()),
    }
}

/// Makes the directory under a fresh name (never one that exists: `mkdir`
/// fails on any entry there, a link included), opens it, removes it.
fn make() -> Result<OwnedFd, String> {
    use rustix::fs::{Mode, OFlags};
    let tmp = std::env::temp_dir();
    let mut last = String::new();
    for attempt in 0..8u32 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(attempt);
        let path = tmp.join(format!(
            "hcp-guest-root-{}-{:016x}",
            std::process::id(),
            h.finish()
        ));
        match rustix::fs::mkdir(&path, Mode::RUSR | Mode::XUSR) {
            Ok(()) => {}
            Err(e) => {
                last = format!("{}: {e}", path.display());
                continue;
            }
        }
        let opened = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let removed = std::fs::remove_dir(&path);
        return match (opened, removed) {
            (Ok(fd), Ok(())) => Ok(fd),
            (Err(e), _) => Err(format!("{}: {e}", path.display())),
            (Ok(_), Err(e)) => Err(format!("{}: cannot remove it: {e}", path.display())),
        };
    }
    Err(format!("no empty directory for the guest's /: {last}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_root_is_empty_and_cannot_be_written() {
        let path = super::proc_path().expect("made");
        assert_eq!(
            std::fs::read_dir(&path).expect("readable").count(),
            0,
            "nothing in it"
        );
        assert!(
            std::fs::write(format!("{path}/x"), "x").is_err(),
            "nothing can be made in it"
        );
        assert_eq!(super::proc_path().expect("made"), path, "made once");
    }
}
