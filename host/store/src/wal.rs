//! Checkpoints of `hcp.db`'s write-ahead log, off the task path.
//!
//! SQLite copies the log's pages into the database (a checkpoint, with an
//! fsync of the database file) in whichever connection's commit takes the
//! log past `wal_autocheckpoint` pages (1,000): that was a task's slot
//! claim or submission about every 25 tasks, which then waited for a few
//! hundred page copies and a database fsync of about 1 ms (measured with
//! `strace -T`, docs/benchmarks.md). A host that runs tasks
//! (`hcp::engine::Host`) starts a [`Checkpointer`] instead: a thread
//! with its own connection, which a commit of the host's connections that
//! leaves [`THRESHOLD`] pages or more in the log wakes to run a `PASSIVE`
//! checkpoint (which never waits for readers or writers). The log is
//! checkpointed at the same size as before, by another thread. A commit
//! that leaves [`SAFETY_NET`] pages (the thread fell behind) checkpoints
//! itself. Other processes (the command line) keep SQLite's own.

use anyhow::{Context as _, Result};
use rusqlite::Connection;
use rusqlite::wal::CheckpointMode;
use std::path::Path;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

/// The log's size, in pages, from which a commit wakes the thread:
/// SQLite's own `wal_autocheckpoint`.
pub(crate) const THRESHOLD: i32 = 1_000;

/// The log's size, in pages, from which a commit checkpoints it itself.
pub(crate) const SAFETY_NET: i32 = 8_192;

enum Wake {
    Checkpoint,
    Stop,
}

/// The thread that checkpoints the log; stops when dropped.
#[derive(Debug)]
pub struct Checkpointer {
    wake: SyncSender<Wake>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread for the database at `path`.
    ///
    /// # Errors
    ///
    /// The database cannot be opened, or the thread cannot be started.
    pub(crate) fn start(path: &Path) -> Result<Self> {
        let mut db =
            Connection::open(path).with_context(|| format!("database {}", path.display()))?;
        super::busy::wait_for_lock(&mut db, super::busy::LOCK_WAIT)?;
        db.pragma_update(None, "synchronous", "FULL")?;
        let (wake, woken) = sync_channel::<Wake>(1);
        let thread = std::thread::Builder::new()
            .name("hcp-wal-checkpoint".into())
            .spawn(move || {
                while let Ok(Wake::Checkpoint) = woken.recv() {
                    let done =
                        db.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(0));
                    if let Err(e) = done {
                        // The next commit past the threshold wakes it again.
                        tracing::warn!("hcp.db: a checkpoint of the write-ahead log failed: {e}");
                    }
                }
            })
            .context("starting the write-ahead log's checkpoints")?;
        Ok(Self {
            wake,
            thread: Some(thread),
        })
    }

    /// Makes `db`'s commits wake the thread instead of checkpointing
    /// themselves (below [`SAFETY_NET`]).
    ///
    /// # Errors
    ///
    /// SQLite refuses the hook.
    pub(crate) fn watch(&self, db: &mut Connection) -> Result<()> {
        let wake = self.wake.clone();
        db.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
            if pages >= SAFETY_NET {
                // A failed checkpoint fails nothing: the commit is done.
                if let Err(e) = wal.checkpoint_v2(CheckpointMode::PASSIVE) {
                    tracing::warn!("hcp.db: a checkpoint of the write-ahead log failed: {e}");
                }
            } else if pages >= THRESHOLD {
                match wake.try_send(Wake::Checkpoint) {
                    // Already woken, or stopping.
                    Ok(()) | Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {}
                }
            }
            Ok(())
        }))?;
        Ok(())
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let _ = self.wake.send(Wake::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn db_len(path: &Path) -> u64 {
        std::fs::metadata(path).expect("db").len()
    }

    /// Commits of a watched connection leave the log to the thread past
    /// the threshold, and only then.
    #[test]
    fn the_log_is_copied_into_the_database_by_the_thread_past_the_threshold() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hcp.db");
        let mut db = Connection::open(&path).expect("open");
        db.pragma_update(None, "journal_mode", "WAL").expect("wal");
        db.execute_batch("CREATE TABLE t (x BLOB)").expect("table");
        let checkpointer = Checkpointer::start(&path).expect("start");
        checkpointer.watch(&mut db).expect("watch");
        let empty = db_len(&path);
        // `n` rows of about a page each, in one commit.
        let mut pages = |n: i32| {
            let tx = db.transaction().expect("begin");
            for _ in 0..n {
                tx.execute("INSERT INTO t VALUES (zeroblob(4000))", [])
                    .expect("insert");
            }
            tx.commit().expect("commit");
        };
        // Below the threshold: all in the log.
        pages(THRESHOLD - 200);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(db_len(&path), empty, "checkpointed below the threshold");
        // Past it: the thread copies the log into the database.
        pages(400);
        let until = Instant::now() + Duration::from_secs(10);
        while db_len(&path) < 4_000_000 {
            assert!(Instant::now() < until, "the log was not checkpointed");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(checkpointer);
        // Stopped: a commit past the threshold does not checkpoint itself
        // (below the safety net), and does not fail.
        let copied = db_len(&path);
        pages(THRESHOLD + 500);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(db_len(&path), copied, "a commit checkpointed itself");
    }

    /// A store asked twice keeps its first thread: its connection's
    /// commits still wake a running checkpointer.
    #[test]
    fn a_store_asked_twice_keeps_its_checkpoints() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::Store::open(dir.path()).expect("store");
        store.checkpoint_in_background().expect("first");
        store.checkpoint_in_background().expect("second");
        let path = dir.path().join("hcp.db");
        let before = db_len(&path);
        {
            let mut db = store.db();
            db.execute_batch("CREATE TABLE scratch (x BLOB)")
                .expect("table");
            let tx = db.transaction().expect("begin");
            for _ in 0..THRESHOLD + 400 {
                tx.execute("INSERT INTO scratch VALUES (zeroblob(4000))", [])
                    .expect("insert");
            }
            tx.commit().expect("commit");
        }
        let until = Instant::now() + Duration::from_secs(10);
        while db_len(&path) < before + 4_000_000 {
            assert!(
                Instant::now() < until,
                "the store's log was not checkpointed after a second start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
