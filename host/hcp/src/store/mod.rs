//! The host's durable state under its data directory: `hcp.db` (SQLite, WAL)
//! for indexes and small records, `blobs/sha256/` for artifact contents,
//! content-addressed.
//!
//! Every write is durable before it is acknowledged: blobs are written to a
//! temporary file, synced and renamed; SQLite commits with `synchronous=FULL`.
//!
//! # Ambient authority
//!
//! Opens and writes files under the data directory only.

use crate::seal::DataKey;
use anyhow::{Context as _, Result};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

mod approvals;
mod artifacts;
mod checkpoints;
pub mod durable;
mod registry;
mod resources;
mod settle;
mod tasks;
mod trust;

pub use approvals::ApprovalRecord;
pub use artifacts::parse_artifact_uri;
pub use registry::Installed;
pub(crate) use tasks::stored_messages;
pub use tasks::{SessionIssued, SlotClaim, Submitted, TaskRecord, TaskState, TaskUpdate};
pub use trust::{Added, TrustedPublisher};

/// Schema migrations, applied in order; `PRAGMA user_version` records how
/// many ran.
const MIGRATIONS: &[&str] = &[
    r"
    CREATE TABLE artifacts (
        session_id TEXT NOT NULL,
        name TEXT NOT NULL,
        task_id TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        checksum TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, name)
    ) STRICT;
    CREATE TABLE checkpoints (
        session_id TEXT NOT NULL,
        id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        label TEXT NOT NULL,
        state BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, id)
    ) STRICT;
",
    // Installed capabilities, tasks, approvals, resources in use.
    r"
    CREATE TABLE capabilities (
        name TEXT NOT NULL,
        version TEXT NOT NULL,
        major INTEGER NOT NULL,
        minor INTEGER NOT NULL,
        patch INTEGER NOT NULL,
        dir TEXT NOT NULL,
        digest TEXT NOT NULL,
        publisher TEXT,
        unsigned INTEGER NOT NULL,
        installed_at TEXT NOT NULL,
        PRIMARY KEY (name, version)
    ) STRICT;
    CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        caller_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        capability TEXT NOT NULL,
        version TEXT,
        session_id TEXT,
        state TEXT NOT NULL,
        risk TEXT,
        data_class TEXT,
        submit TEXT NOT NULL,
        answer TEXT,
        result TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (caller_id, message_id)
    ) STRICT;
    CREATE INDEX tasks_state ON tasks (state);
    CREATE INDEX tasks_session ON tasks (session_id);
    CREATE TABLE approvals (
        task_id TEXT PRIMARY KEY REFERENCES tasks (task_id),
        requested_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        assessment TEXT NOT NULL,
        decision TEXT,
        operator_id TEXT,
        reason TEXT,
        decided_at TEXT
    ) STRICT;
    CREATE TABLE resources (
        name TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        since TEXT NOT NULL
    ) STRICT;
    CREATE TABLE artifact_access (
        uri TEXT NOT NULL,
        accessor TEXT NOT NULL,
        purpose TEXT NOT NULL,
        at TEXT NOT NULL
    ) STRICT;
",
    // T3 and T4 artifacts are sealed at rest.
    r"
    ALTER TABLE artifacts ADD COLUMN data_class TEXT NOT NULL DEFAULT 'T1';
    ALTER TABLE artifacts ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;
",
    // What the gate decided for a task: the session runs under exactly this.
    r"
    ALTER TABLE tasks ADD COLUMN admission TEXT;
",
    // Trusted publishers of signed bundles (store/trust.rs).
    r"
    CREATE TABLE trusted_publishers (
        name TEXT PRIMARY KEY,
        public_key TEXT NOT NULL UNIQUE,
        key_id TEXT NOT NULL UNIQUE,
        added_at TEXT NOT NULL
    ) STRICT;
",
    // Receipts (append-only; see `crate::evidence`).
    crate::evidence::MIGRATION,
];

/// The data directory and its database.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    db: Mutex<Connection>,
    data_key: DataKey,
    /// Bumped whenever a task is recorded or changes state, so that event
    /// streams wake at once instead of polling.
    changes: tokio::sync::watch::Sender<u64>,
    /// Final states not yet written (see [`Store::settle`]).
    unsettled: Mutex<Vec<settle::Unsettled>>,
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
        create_private_dir(&dir.join("blobs/sha256"))
            .with_context(|| format!("data directory {}", dir.display()))?;
        let path = dir.join("hcp.db");
        let db = Connection::open(&path).with_context(|| format!("database {}", path.display()))?;
        db.busy_timeout(std::time::Duration::from_secs(10))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.pragma_update(None, "foreign_keys", "ON")?;
        // Before anything is written: a store that lost acknowledged data
        // is not migrated over.
        durable::check_mark(dir, &db)?;
        migrate(&db).with_context(|| format!("database {}", path.display()))?;
        let data_key = DataKey::load_or_create(dir)?;
        create_private_dir(&dir.join("blobs/sealed"))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            db: Mutex::new(db),
            data_key,
            changes: tokio::sync::watch::Sender::new(0),
            unsettled: Mutex::new(Vec::new()),
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Wakes whenever a task of this process is recorded or changes state
    /// (changes by another process are seen only by reading).
    pub fn task_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub(crate) fn task_changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A task was recorded in, or moved to, `state`: logged at info (target
    /// `hcp::task`), then [`Store::task_changed`]. Every write of a task's
    /// state calls it once the write is done.
    pub(crate) fn task_moved(&self, task_id: &str, state: TaskState) {
        tracing::info!(target: "hcp::task", task_id = %task_id, state = %state.as_str(), "task");
        self.task_changed();
    }

    pub(crate) fn db(&self) -> MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn migrate(db: &Connection) -> Result<()> {
    let version: i64 = db.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let version = usize::try_from(version).unwrap_or(usize::MAX);
    if version > MIGRATIONS.len() {
        anyhow::bail!(
            "schema version {version} is newer than this host knows ({}); upgrade the host",
            MIGRATIONS.len()
        );
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = db.unchecked_transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i64::try_from(i + 1)?)?;
        tx.commit()?;
    }
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
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

fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

pub(crate) fn now() -> String {
    hcp_contracts::message::now_rfc3339()
}
