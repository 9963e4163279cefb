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
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("{}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(RunLease { path, _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
    }

    /// Whether a live process holds the lease of `task_id` (it runs the
    /// task). A lease left by a process that stopped is removed.
    ///
    /// # Errors
    ///
    /// The lease's file cannot be read or locked.
    pub fn lease_held(&self, task_id: &str) -> Result<bool> {
        let path = self.lease_path(task_id)?;
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
        };
        match file.try_lock() {
            Ok(()) => {
                // Nobody held it: its runner stopped.
                drop(RunLease { path, _file: file });
                Ok(false)
            }
            Err(TryLockError::WouldBlock) => Ok(true),
            Err(TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
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
        assert!(store.take_lease("../escape").is_err());
        assert!(store.lease_held("a/b").is_err());
    }
}
