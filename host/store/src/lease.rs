//! Which process runs a task. A runner holds an exclusive lock
//! (`flock`) on `running/<task_id>.lock` in the data directory from before
//! it claims the task until the task's final state is written, so that a
//! host starting beside it (`hcp serve` while `hcp tasks run-queued` or
//! `hcp approvals approve` runs a task; another `hcp serve`) can tell a
//! task whose runner is alive from one whose runner stopped: the kernel
//! lets go of a dead process's lock.

use super::Store;
use anyhow::{Context as _, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;

/// The directory of the leases, under the data directory.
const DIR: &str = "running";

/// A task's lease, held while it is alive; the file is removed when it is
/// dropped.
#[derive(Debug)]
pub struct RunLease {
    path: PathBuf,
    _file: File,
}

impl Drop for RunLease {
    fn drop(&mut self) {
        // Removed while still locked: whoever opens it after sees no file.
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("{}: {e}", self.path.display());
        }
    }
}

impl Store {
    fn lease_path(&self, task_id: &str) -> Result<PathBuf> {
        // Task ids are the host's own (`task-<uuid>`); anything else is
        // refused rather than joined to a path.
        if task_id.is_empty()
            || !task_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            anyhow::bail!("{task_id:?} is not a task id");
        }
        Ok(self.dir().join(DIR).join(format!("{task_id}.lock")))
    }

    /// Takes the lease of `task_id` for this process, or `None` when
    /// another process (or another runner of this one) holds it.
    ///
    /// # Errors
    ///
    /// The lease's file cannot be created or locked.
    pub fn take_lease(&self, task_id: &str) -> Result<Option<RunLease>> {
        let path = self.lease_path(task_id)?;
        // A lock is the lease only while the file it is on is still the one
        // at the path: a holder removes the file before it unlocks, so a
        // lock taken just after is on a removed file, and the next try
        // opens the path again.
        for _ in 0..LOCK_TRIES {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .with_context(|| format!("{}", path.display()))?;
            match lock(file, &path)? {
                Locked::Lease(file) => return Ok(Some(RunLease { path, _file: file })),
                Locked::Replaced => {}
                Locked::Held => return Ok(None),
            }
        }
        anyhow::bail!(
            "{}: the lease file kept being replaced while it was taken",
            path.display()
        )
    }

    /// Whether a live process holds the lease of `task_id` (it runs the
    /// task). A lease left by a process that stopped is removed.
    ///
    /// # Errors
    ///
    /// The lease's file cannot be read or locked.
    pub fn lease_held(&self, task_id: &str) -> Result<bool> {
        let path = self.lease_path(task_id)?;
        for _ in 0..LOCK_TRIES {
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
            };
            match lock(file, &path)? {
                Locked::Lease(file) => {
                    // Nobody held it: its runner stopped.
                    drop(RunLease { path, _file: file });
                    return Ok(false);
                }
                Locked::Replaced => {}
                Locked::Held => return Ok(true),
            }
        }
        anyhow::bail!(
            "{}: the lease file kept being replaced while it was read",
            path.display()
        )
    }
}

/// Tries at a lease's file before giving up (each failed try saw its file
/// replaced underneath: a holder letting go at that very moment).
const LOCK_TRIES: usize = 16;

/// What locking a lease's file came to.
#[derive(Debug)]
enum Locked {
    /// Locked, and still the file at the path: the lease.
    Lease(File),
    /// Locked after its holder removed it (or replaced underneath): not
    /// the lease; the path is to be opened again.
    Replaced,
    /// Another holder has it.
    Held,
}

/// Locks `file`, opened at `path`.
fn lock(file: File, path: &std::path::Path) -> Result<Locked> {
    match file.try_lock() {
        Ok(()) if at_path(&file, path)? => Ok(Locked::Lease(file)),
        Ok(()) => Ok(Locked::Replaced),
        Err(TryLockError::WouldBlock) => Ok(Locked::Held),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Whether `file` is still the file at `path` (not removed, not replaced).
fn at_path(file: &File, path: &std::path::Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt as _;
    let open = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(now) => Ok(now.dev() == open.dev() && now.ino() == open.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("{}", path.display())),
    }
}

/// Creates the leases' directory of a data directory.
pub(super) fn create_dir(dir: &std::path::Path) -> Result<()> {
    crate::private_dir::create_private_dir(&dir.join(DIR))
        .with_context(|| format!("data directory {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_one_runners_and_a_dead_ones_is_let_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let other = Store::open(dir.path()).expect("open again");
        let lease = store.take_lease("task-1").expect("take").expect("free");
        assert!(other.take_lease("task-1").expect("take").is_none());
        assert!(other.lease_held("task-1").expect("held"));
        drop(lease);
        assert!(!other.lease_held("task-1").expect("held"));
        // A lease file left by a process that stopped holds nothing.
        std::fs::write(dir.path().join(DIR).join("task-2.lock"), b"").expect("write");
        assert!(!other.lease_held("task-2").expect("held"));
        assert!(!dir.path().join(DIR).join("task-2.lock").exists());
        // A runner that opened the file just before its holder let go
        // (removed it, then unlocked) gets a lock on a removed file: not
        // the lease, or a host starting now would find no lease and fail
        // the task that runner runs.
        let first = store.take_lease("task-3").expect("take").expect("free");
        let path = dir.path().join(DIR).join("task-3.lock");
        let late = File::open(&path).expect("open before the holder lets go");
        drop(first);
        assert!(matches!(lock(late, &path).expect("lock"), Locked::Replaced));
        let second = other.take_lease("task-3").expect("take").expect("free");
        assert!(store.lease_held("task-3").expect("held"));
        drop(second);
        assert!(!store.lease_held("task-3").expect("held"));
        assert!(store.take_lease("../escape").is_err());
        assert!(store.lease_held("a/b").is_err());
    }
}
