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

use crate::private_dir::{create_private_dir, sync_dir};
use crate::seal::DataKey;
use anyhow::{Context as _, Result};
use hcp_sandbox::{StoredArtifact, TaskMeta, TaskStore};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest as _, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

pub mod durable;
mod registry;
mod settle;
mod tasks;
mod trust;

pub use registry::Installed;
pub use tasks::{ApprovalRecord, Submitted, TaskRecord, TaskState, TaskUpdate};
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

    fn blob_path(&self, hex: &str, sealed: bool) -> PathBuf {
        let dir = if sealed {
            "blobs/sealed"
        } else {
            "blobs/sha256"
        };
        self.dir.join(dir).join(hex)
    }

    /// Writes `content` as a blob named by its sha256 (sealed with the data
    /// key when `sealed`); returns the hex sha256 of the plaintext.
    fn put_blob(&self, content: &[u8], sealed: bool) -> Result<String> {
        let hex = hex::encode(Sha256::digest(content));
        let path = self.blob_path(&hex, sealed);
        if path.exists() {
            return Ok(hex);
        }
        let bytes = if sealed {
            self.data_key.seal(content, &format!("sha256:{hex}"))?
        } else {
            content.to_vec()
        };
        let dir = path.parent().unwrap_or(&self.dir).to_path_buf();
        let tmp = dir.join(format!(".{hex}.{}.tmp", uuid::Uuid::new_v4()));
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            // A full disk leaves no partial blob behind.
            let _ = std::fs::remove_file(&tmp);
        }
        written.with_context(|| format!("{}", tmp.display()))?;
        sync_dir(&dir);
        Ok(hex)
    }

    /// Reads an artifact by its `hcp://<session>/artifacts/<name>` URI.
    ///
    /// # Errors
    ///
    /// A malformed URI, an unknown artifact, or a blob that no longer matches
    /// its checksum.
    pub fn artifact(
        &self,
        uri: &str,
    ) -> Result<(StoredArtifact, Vec<u8>, hcp_contracts::DataClass)> {
        let (session, name) = parse_artifact_uri(uri)?;
        let row = self
            .db()
            .query_row(
                "SELECT mime_type, size_bytes, checksum, sealed, data_class
                 FROM artifacts WHERE session_id = ?1 AND name = ?2",
                params![session, name],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)? != 0,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((mime_type, size, checksum, sealed, class)) = row else {
            anyhow::bail!("{uri}: no such artifact");
        };
        let hex = checksum.trim_start_matches("sha256:");
        let stored = std::fs::read(self.blob_path(hex, sealed))
            .with_context(|| format!("{uri}: content is missing"))?;
        let bytes = if sealed {
            self.data_key
                .open(&stored, &checksum)
                .with_context(|| uri.to_owned())?
        } else {
            stored
        };
        if hex::encode(Sha256::digest(&bytes)) != hex {
            anyhow::bail!("{uri}: content does not match its checksum {checksum}");
        }
        let class = class
            .parse()
            .map_err(|e: String| anyhow::anyhow!("{uri}: stored classification: {e}"))?;
        Ok((
            StoredArtifact {
                name: name.to_owned(),
                mime_type,
                uri: uri.to_owned(),
                size_bytes: u64::try_from(size).unwrap_or(0),
                checksum,
            },
            bytes,
            class,
        ))
    }
}

/// Splits `hcp://<session>/artifacts/<name>`.
///
/// # Errors
///
/// Anything else.
pub fn parse_artifact_uri(uri: &str) -> Result<(&str, &str)> {
    let rest = uri
        .strip_prefix("hcp://")
        .with_context(|| format!("{uri:?} is not an hcp:// artifact URI"))?;
    match rest.split_once("/artifacts/") {
        Some((session, name)) if !session.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((session, name))
        }
        _ => anyhow::bail!("{uri:?} is not of the form hcp://<session>/artifacts/<name>"),
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

pub(crate) fn now() -> String {
    hcp_contracts::message::now_rfc3339()
}

impl TaskStore for Store {
    fn put_artifact(
        &self,
        task: &TaskMeta,
        name: &str,
        mime_type: &str,
        content: &[u8],
    ) -> Result<StoredArtifact, String> {
        let stored = StoredArtifact::describe(&task.session_id, name, mime_type, content);
        let sealed = task.data_classification.encrypted_at_rest();
        self.put_blob(content, sealed)
            .map_err(|e| format!("{e:#}"))?;
        self.db()
            .execute(
                "INSERT INTO artifacts (session_id, name, task_id, mime_type, size_bytes, checksum, created_at, data_class, sealed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    task.session_id,
                    name,
                    task.task_id,
                    mime_type,
                    i64::try_from(stored.size_bytes).unwrap_or(i64::MAX),
                    stored.checksum,
                    now(),
                    task.data_classification.as_str(),
                    i64::from(sealed)
                ],
            )
            .map_err(|e| e.to_string())?;
        Ok(stored)
    }

    fn save_checkpoint(
        &self,
        task: &TaskMeta,
        id: &str,
        label: &str,
        state: &[u8],
    ) -> Result<(), String> {
        self.db()
            .execute(
                "INSERT INTO checkpoints (session_id, id, task_id, label, state, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![task.session_id, id, task.task_id, label, state, now()],
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn load_checkpoint(&self, session_id: &str, id: &str) -> Result<Option<Vec<u8>>, String> {
        self.db()
            .query_row(
                "SELECT state FROM checkpoints WHERE session_id = ?1 AND id = ?2",
                params![session_id, id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TaskMeta {
        TaskMeta {
            task_id: "task-1".into(),
            session_id: "session-1".into(),
            capability: "c".into(),
            version: "1.0.0".into(),
            resume: None,
            data_classification: hcp_contracts::DataClass::T1,
        }
    }

    #[test]
    fn artifacts_survive_reopening_and_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = Store::open(dir.path()).expect("open");
            let a = store
                .put_artifact(&meta(), "raw.json", "application/json", b"{\"a\":1}")
                .expect("put");
            assert_eq!(a.uri, "hcp://session-1/artifacts/raw.json");
            store
                .save_checkpoint(&meta(), "ckpt-001", "ramp", b"state")
                .expect("save");
        }
        let store = Store::open(dir.path()).expect("reopen");
        let (a, bytes, class) = store
            .artifact("hcp://session-1/artifacts/raw.json")
            .expect("get");
        assert_eq!(class, hcp_contracts::DataClass::T1);
        assert_eq!(bytes, b"{\"a\":1}");
        assert_eq!(a.size_bytes, 7);
        assert_eq!(
            store
                .load_checkpoint("session-1", "ckpt-001")
                .expect("load"),
            Some(b"state".to_vec())
        );
        // A tampered blob is refused.
        let hex = a.checksum.trim_start_matches("sha256:");
        std::fs::write(dir.path().join("blobs/sha256").join(hex), b"evil").expect("write");
        let err = store
            .artifact("hcp://session-1/artifacts/raw.json")
            .expect_err("tampered blob accepted");
        assert!(format!("{err:#}").contains("does not match its checksum"));
    }

    #[test]
    fn t3_artifacts_are_sealed_at_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let meta = TaskMeta {
            data_classification: hcp_contracts::DataClass::T3,
            ..meta()
        };
        let a = store
            .put_artifact(&meta, "secret.txt", "text/plain", b"confidential findings")
            .expect("put");
        let hex = a.checksum.trim_start_matches("sha256:");
        assert!(!dir.path().join("blobs/sha256").join(hex).exists());
        let on_disk =
            std::fs::read(dir.path().join("blobs/sealed").join(hex)).expect("sealed blob");
        assert!(!on_disk.windows(12).any(|w| w == b"confidential"));
        let (_, bytes, class) = store.artifact(&a.uri).expect("get");
        assert_eq!(bytes, b"confidential findings");
        assert_eq!(class, hcp_contracts::DataClass::T3);
    }

    #[test]
    fn artifact_uris() {
        assert!(parse_artifact_uri("hcp://s/artifacts/a.json").is_ok());
        for bad in [
            "http://s/artifacts/a",
            "hcp://s/a",
            "hcp:///artifacts/a",
            "hcp://s/artifacts/a/b",
        ] {
            assert!(parse_artifact_uri(bad).is_err(), "{bad}");
        }
    }
}
