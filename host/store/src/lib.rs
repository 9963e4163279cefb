//! The host's durable state under its data directory: `hcp.db` (SQLite, WAL)
//! for indexes and small records, `blobs/sha256/` for artifact contents,
//! content-addressed.
//!
//! The bottom layer of the host (store → evidence → engine → serve → cli):
//! it imports none of the layers above it. The schema of every table of
//! `hcp.db` is here (`schema.rs`); the rows of the receipt tables are
//! `hcp_evidence`'s. Beside the tables, the keys of what rests on disk:
//! the data key that seals messages and artifacts ([`seal`]), the digest
//! key of what the host withholds ([`withhold`]), and owner-only
//! directories ([`private_dir`]).
//!
//! Every write is durable before it is acknowledged: blobs are written to a
//! temporary file, synced and renamed; SQLite commits with `synchronous=FULL`.
//!
//! # Ambient authority
//!
//! Opens and writes files under the data directory only.
#![deny(missing_docs)]

use crate::private_dir::{create_private_dir, sync_dir};
use crate::seal::DataKey;
use anyhow::{Context as _, Result};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

mod approvals;
mod artifacts;
pub mod busy;
mod checkpoints;
pub mod durable;
mod interface_state;
mod keyfile;
pub mod operator_secrets;
pub mod private_dir;
pub mod receipt_hashes;
mod registry;
mod replies;
mod schema;
pub use replies::{Replies, ReplyRoute};
mod lease;
pub mod metrics;
mod resources;
pub mod seal;
mod settle;
mod tasks;
mod trust;
mod wal;
pub mod withhold;

pub use approvals::request_approval;
pub use approvals::{ApprovalRecord, EXPIRY_LEASE, NotPending};
pub use artifacts::{NoSuchArtifact, parse_artifact_uri};
pub use lease::RunLease;
pub use registry::{Installed, Selection, same_precedence_message};
pub use settle::SettleWrite;
pub use tasks::TaskWrite;
pub use tasks::{
    CheckedPayload, SessionIssued, SlotClaim, Submitted, TaskRecord, TaskState, TaskStatus,
    TaskUpdate,
};
pub use tasks::{StoredMessages, seals_messages, stored_messages};
pub use trust::{Added, TrustedPublisher};
pub use wal::Checkpointer;

/// How many prepared statements a connection of the store keeps: more
/// than the store and the receipt log use.
pub const STATEMENT_CACHE: usize = 128;

/// What [`Store::task_changes`] carries: how many changes there were, and
/// the last one's final status when it was a task of this process settled
/// ([`Store::task_settled`]); `None` after any other change. Only the last
/// change is kept: one a stream did not see in time is read from the
/// store, as any change is.
#[derive(Debug, Clone, Default)]
pub struct TaskChange {
    /// Changes so far (wrapping).
    pub count: u64,
    /// The status the last change settled, if it settled a task.
    pub settled: Option<Arc<TaskStatus>>,
}

/// The data directory and its database.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    db: Mutex<Connection>,
    data_key: DataKey,
    /// The keyed digests of what the host withholds (`crate::withhold`).
    withhold: Arc<crate::withhold::Withhold>,
    /// Bumped whenever a task is recorded or changes state, so that event
    /// streams wake at once instead of polling.
    changes: tokio::sync::watch::Sender<TaskChange>,
    /// Final states not yet written (see [`Store::settle`]).
    unsettled: Mutex<Vec<settle::Unsettled>>,
    /// The write-ahead log's checkpoints, when a thread makes them (see
    /// [`Store::checkpoint_in_background`]).
    wal: std::sync::OnceLock<Checkpointer>,
    /// The data directory's lock, held shared while the store is open (a
    /// snapshot's store has none of its own), so that nothing replaces the
    /// database under it (`durable::restore`, `durable::accept_loss`).
    _lock: Option<std::fs::File>,
    /// The host's metrics (`crate::metrics`), counted by every layer
    /// through its store.
    metrics: Arc<metrics::Metrics>,
}

impl Store {
    /// Opens (creating, mode 0700) the data directory and migrates its
    /// database.
    ///
    /// # Errors
    ///
    /// The directory or database cannot be created or opened, was written
    /// by a newer host, or holds less than its mark recorded
    /// ([`durable::Damaged`]).
    pub fn open(dir: &Path) -> Result<Self> {
        create_private_dir(dir).with_context(|| format!("data directory {}", dir.display()))?;
        let lock = durable::hold_shared(dir)?;
        // One process at a time from here to the end of the setup: a new
        // database turned to WAL, its mark checked, its schema migrated,
        // its key made (two processes doing it at once met SQLite's locks
        // where its busy handler does not wait).
        let setup = durable::hold_setup(dir)?;
        create_private_dir(&dir.join("blobs/sha256"))
            .with_context(|| format!("data directory {}", dir.display()))?;
        let path = dir.join("hcp.db");
        let mut db =
            Connection::open(&path).with_context(|| format!("database {}", path.display()))?;
        busy::wait_for_lock(&mut db, busy::LOCK_WAIT)?;
        // Every statement of a task's path stays compiled (SQLite's parser
        // was about a tenth of a task's CPU with the default 16).
        db.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.pragma_update(None, "foreign_keys", "ON")?;
        // Before anything is written: a store that lost acknowledged data
        // is not migrated over.
        durable::check_mark(dir, &db)?;
        migrate(&db).with_context(|| format!("database {}", path.display()))?;
        let data_key = DataKey::load_or_create(dir)?;
        let withhold = Arc::new(crate::withhold::Withhold::load_or_create(dir)?);
        create_private_dir(&dir.join("blobs/sealed"))?;
        lease::create_dir(dir)?;
        drop(setup);
        Ok(Self {
            dir: dir.to_path_buf(),
            db: Mutex::new(db),
            data_key,
            withhold,
            changes: tokio::sync::watch::Sender::new(TaskChange::default()),
            unsettled: Mutex::new(Vec::new()),
            wal: std::sync::OnceLock::new(),
            _lock: Some(lock),
            metrics: Arc::default(),
        })
    }

    /// A read-only view of the store as it is now: a connection of its own
    /// that holds one read transaction until it is dropped, so that
    /// several reads (a whole check of the receipt log) see one moment of
    /// a store that other connections go on writing to, and the store's
    /// own connection is not held meanwhile. Writing through it fails.
    ///
    /// # Errors
    ///
    /// The database cannot be opened or read.
    pub fn snapshot(&self) -> Result<Self> {
        let path = self.dir.join("hcp.db");
        let mut db = Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("database {}", path.display()))?;
        busy::wait_for_lock(&mut db, busy::LOCK_WAIT)?;
        db.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // The snapshot is taken at the transaction's first read.
        db.execute_batch("BEGIN DEFERRED")?;
        db.query_row("SELECT COUNT(*) FROM sqlite_schema", [], |_| Ok(()))?;
        Ok(Self {
            dir: self.dir.clone(),
            db: Mutex::new(db),
            data_key: DataKey::load_or_create(&self.dir)?,
            withhold: self.withhold.clone(),
            changes: tokio::sync::watch::Sender::new(TaskChange::default()),
            unsettled: Mutex::new(Vec::new()),
            wal: std::sync::OnceLock::new(),
            _lock: None,
            metrics: self.metrics.clone(),
        })
    }

    /// Checkpoints the write-ahead log in a thread of its own from now on
    /// (see `store/wal.rs`): this connection's commits, and those of the
    /// connections passed to [`Store::watch_wal`], wake it instead of
    /// checkpointing themselves, until the [`Checkpointer`] is dropped.
    /// A store that already has its thread keeps it.
    ///
    /// # Errors
    ///
    /// The thread's connection cannot be opened.
    pub fn checkpoint_in_background(&self) -> Result<()> {
        if self.wal.get().is_some() {
            return Ok(());
        }
        let checkpointer = Checkpointer::start(&self.dir.join("hcp.db"))?;
        checkpointer.watch(&mut self.db())?;
        let _ = self.wal.set(checkpointer);
        Ok(())
    }

    /// Leaves `db`'s checkpoints to the store's thread, if it runs one.
    ///
    /// # Errors
    ///
    /// SQLite refuses the hook.
    pub fn watch_wal(&self, db: &mut Connection) -> Result<()> {
        match self.wal.get() {
            Some(checkpointer) => checkpointer.watch(db),
            None => Ok(()),
        }
    }

    /// The data key (`crate::seal`): T3/T4 artifacts and the task messages
    /// that rest sealed.
    pub fn data_key(&self) -> &DataKey {
        &self.data_key
    }

    /// The keyed digests of what the host withholds from receipts, packs
    /// and answers (`crate::withhold`).
    pub fn withhold(&self) -> &Arc<crate::withhold::Withhold> {
        &self.withhold
    }

    /// The host's metrics ([`metrics`]): counted here and by the layers
    /// above, read by `/metrics`.
    pub fn metrics(&self) -> &Arc<metrics::Metrics> {
        &self.metrics
    }

    /// Bytes of `hcp.db` and its write-ahead log now (a file missing
    /// counts 0).
    pub fn size_bytes(&self) -> u64 {
        ["hcp.db", "hcp.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(self.dir.join(f)).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Whether the data directory takes a write now: a small file is
    /// created, written, synced and removed (`.ready-probe`) beside
    /// `hcp.db`. `/readyz` asks it. The database's own connection is not
    /// used: a probe never holds up the task path.
    ///
    /// # Errors
    ///
    /// What failed, naming the file.
    pub fn probe_writable(&self) -> Result<()> {
        use std::io::Write as _;
        let probe = self.dir.join(".ready-probe");
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&probe)?;
            f.write_all(b"ready\n")?;
            f.sync_all()
        })();
        let removed = std::fs::remove_file(&probe);
        written.with_context(|| format!("cannot write {}", probe.display()))?;
        removed.with_context(|| format!("cannot remove {}", probe.display()))?;
        Ok(())
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Wakes whenever a task of this process is recorded or changes state
    /// (changes by another process are seen only by reading).
    pub fn task_changes(&self) -> tokio::sync::watch::Receiver<TaskChange> {
        self.changes.subscribe()
    }

    pub(crate) fn task_changed(&self) {
        self.change(None);
    }

    /// One more change, carrying `settled` (see [`TaskChange`]).
    fn change(&self, settled: Option<Arc<TaskStatus>>) {
        self.changes.send_modify(|c| {
            c.count = c.count.wrapping_add(1);
            c.settled = settled;
        });
    }

    /// Whether anything follows [`Store::task_changes`] now (an event
    /// stream, the AMQP outbox): a task's final status is made for them
    /// only then ([`Store::task_settled`]).
    pub fn followed(&self) -> bool {
        self.changes.receiver_count() > 0
    }

    /// A task of this process reached its final state, `status`, durably
    /// (its write committed): as [`Store::task_moved`], and the status
    /// goes with the change, so that a stream waiting for it need not read
    /// back what was just written.
    pub fn task_settled(&self, status: TaskStatus) {
        log_move(&status.task_id, status.state);
        self.metrics.task_moved(status.state.as_str());
        self.change(Some(Arc::new(status)));
    }

    /// A task was recorded in, or moved to, `state`: logged (target
    /// `hcp::task`, see [`log_move`]), then `Store::task_changed`. Every write of a task's
    /// state calls it once the write is done.
    pub fn task_moved(&self, task_id: &str, state: TaskState) {
        log_move(task_id, state);
        self.metrics.task_moved(state.as_str());
        self.task_changed();
    }

    /// The store's connection. The tables are the store's, but for the
    /// receipt tables, whose rows only `hcp_evidence` reads and writes
    /// (on this connection, for its views and packs).
    pub fn db(&self) -> MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The log line of a task's move (target `hcp::task`): at info when the
/// task ends or waits for an operator, at debug for the steps between
/// (received, queued, running), so that a task is one line at info
/// besides its submission's request.
fn log_move(task_id: &str, state: TaskState) {
    if state.is_final() || state == TaskState::PendingApproval {
        tracing::info!(target: "hcp::task", task_id = %task_id, state = %state.as_str(), "task");
    } else {
        tracing::debug!(target: "hcp::task", task_id = %task_id, state = %state.as_str(), "task");
    }
}

/// Runs `f` with `synchronous=NORMAL` on `db`: its commits reach the
/// write-ahead log without an fsync of their own, and become durable with
/// the next commit that syncs the log (any connection's, `FULL` being this
/// store's setting), which `f`'s caller must make sure comes before anything
/// is acknowledged from them. `FULL` is set again whatever `f` returns.
///
/// # Errors
///
/// `f`'s error, or the setting cannot be changed.
pub(crate) fn unsynced<T>(
    db: &mut Connection,
    f: impl FnOnce(&mut Connection) -> Result<T>,
) -> Result<T> {
    // Prepared once per connection: a pragma parsed afresh twice per
    // submitted task was a sixth of its row's write.
    let set = |db: &Connection, sql: &str| db.prepare_cached(sql)?.execute([]);
    set(db, "PRAGMA synchronous = NORMAL")?;
    let out = f(db);
    set(db, "PRAGMA synchronous = FULL")
        .context("the store's commits cannot be made synchronous again")?;
    out
}

fn migrate(db: &Connection) -> Result<()> {
    let version = |db: &Connection| -> Result<usize> {
        let version: i64 = db.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let version = usize::try_from(version).unwrap_or(usize::MAX);
        if version > schema::MIGRATIONS.len() {
            anyhow::bail!(
                "schema version {version} is newer than this host knows ({}); upgrade the host",
                schema::MIGRATIONS.len()
            );
        }
        Ok(version)
    };
    if version(db)? == schema::MIGRATIONS.len() {
        return Ok(());
    }
    // Each step under the write lock, the version read again in it: two
    // processes opening a new (or upgraded) data directory at once run
    // each step once, the second finding it done.
    loop {
        let tx =
            rusqlite::Transaction::new_unchecked(db, rusqlite::TransactionBehavior::Immediate)?;
        let at = version(&tx)?;
        let Some(sql) = schema::MIGRATIONS.get(at) else {
            return Ok(());
        };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i64::try_from(at + 1)?)?;
        tx.commit()?;
    }
}

/// Now, as the store records times (RFC 3339, UTC).
pub fn now() -> String {
    hcp_contracts::message::now_rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A settled status goes with its change, and only with it: the next
    /// change (any task's) carries none, so that a stream never takes an
    /// earlier change's status for the latest.
    #[test]
    fn a_settled_status_goes_with_its_change_and_no_later_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        assert!(!store.followed(), "nothing follows yet");
        let mut changes = store.task_changes();
        assert!(store.followed());
        let status = TaskStatus {
            task_id: "task-1".into(),
            caller_id: "c".into(),
            state: TaskState::Completed,
            updated_at: "2026-12-05T17:00:00.000Z".into(),
            result: Some(tasks::tests::completed()),
            answer: None,
        };
        store.task_settled(status.clone());
        assert!(changes.has_changed().expect("open"));
        let seen = changes.borrow_and_update().clone();
        assert_eq!(seen.count, 1);
        assert_eq!(seen.settled.as_deref(), Some(&status));
        store.task_changed();
        let seen = changes.borrow_and_update().clone();
        assert_eq!((seen.count, seen.settled), (2, None));
    }

    #[test]
    fn unsynced_work_runs_unsynced_and_the_store_is_synchronous_again_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut db = Connection::open(dir.path().join("t.db")).expect("open");
        db.pragma_update(None, "synchronous", "FULL").expect("full");
        let synchronous = |db: &Connection| -> i64 {
            db.pragma_query_value(None, "synchronous", |r| r.get(0))
                .expect("read")
        };
        for fails in [false, true, false] {
            let inside = unsynced(&mut db, |db| {
                let seen = synchronous(db);
                if fails {
                    anyhow::bail!("the work failed");
                }
                Ok(seen)
            });
            match inside {
                Ok(seen) => assert_eq!(seen, 1, "NORMAL inside"),
                Err(e) => assert!(fails, "{e:#}"),
            }
            assert_eq!(synchronous(&db), 2, "FULL after (the work failed: {fails})");
        }
    }

    #[test]
    fn processes_opening_a_new_data_directory_at_once_migrate_it_once() {
        for _ in 0..10 {
            let dir = tempfile::tempdir().expect("tempdir");
            let barrier = std::sync::Barrier::new(4);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            Store::open(dir.path()).map(|_| ())
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().expect("thread").expect("opened");
                }
            });
        }
    }
}
