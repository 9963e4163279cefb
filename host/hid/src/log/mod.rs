//! The HID session log: every PROPOSAL, DECISION, EXECUTION, ERROR and
//! MODE_CHANGE, shaped like seed 004's `session_log`, hash-chained and kept
//! durably in SQLite.
//!
//! Each entry's `checksum` is the SHA-256 (hex) of the RFC 8785 canonical
//! form of the entry without its `checksum`; that form holds the entry's
//! `sequence` (1, 2, ...) and `previous_log_checksum` (the checksum of the
//! entry before it; absent on the first), so the entries form a chain. A
//! one-row head table holds the count and the last checksum, written in the
//! same transaction as each entry. [`SessionLog::verify`] finds an altered,
//! deleted, inserted or reordered entry and names it ([`IntegrityError`]).
//!
//! The chain makes tampering evident, not impossible: whoever can rewrite
//! the whole database can rewrite the whole chain. Signing the head (the
//! receipts crate's job) closes that.
//!
//! The tables live in a database file the host names (usually its own
//! `hcp.db`), opened in WAL mode with `synchronous=FULL`: an entry is on
//! disk before [`SessionLog::append`] returns. The host's store versions its
//! own tables with `PRAGMA user_version`; this module versions its tables
//! in a table of its own, `hid_schema_version`, and touches nothing else.
//!
//! # Ambient authority
//!
//! [`SessionLog::open`] opens (creating) the database file at the path it is
//! given, and nothing else.

mod verify;

pub use verify::{IntegrityError, Verified, verify};

use crate::action::Mode;
use hcp_contracts::problem::{self, Problem};
use hcp_contracts::schema::SchemaId;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The kind of a session-log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    /// A guest proposed an action.
    Proposal,
    /// An operator (or the host, withdrawing) decided on a proposal.
    Decision,
    /// An approved action was sent to the executor; `details.result` says
    /// how it ended.
    Execution,
    /// Something failed: a device fault (execution halts), a refused arming.
    Error,
    /// An operator changed the mode, or re-armed execution.
    ModeChange,
}

/// What to append: an entry without its id, sequence, time and checksums.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its kind.
    pub event_type: EventType,
    /// The mode at the time of the event.
    pub mode: Mode,
    /// The operator responsible, or [`crate::action::HOST_OPERATOR`].
    pub operator_id: String,
    /// The proposal concerned.
    pub proposal_id: Option<String>,
    /// The execution concerned.
    pub execution_id: Option<String>,
    /// Event-specific data.
    pub details: Map<String, Value>,
}

/// One entry, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogEntry {
    /// Its id, `log-<uuid v7>`.
    pub log_id: String,
    /// Its place in the chain, from 1.
    pub sequence: u64,
    /// When it was written (RFC 3339, UTC, milliseconds).
    pub timestamp: String,
    /// Its kind.
    pub event_type: EventType,
    /// The mode at the time.
    pub mode: Mode,
    /// Who was responsible.
    pub operator_id: String,
    /// The proposal concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal_id: Option<String>,
    /// The execution concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// Event-specific data.
    pub details: Map<String, Value>,
    /// The checksum of the entry before (absent on the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_log_checksum: Option<String>,
    /// SHA-256 (hex) of the canonical form without this field.
    pub checksum: String,
}

impl LogEntry {
    /// The checksum this entry should carry.
    ///
    /// # Errors
    ///
    /// Canonicalization failed (a non-finite number).
    pub fn compute_checksum(&self) -> Result<String, ChecksumError> {
        let mut value = serde_json::to_value(self)?;
        if let Some(obj) = value.as_object_mut() {
            obj.remove("checksum");
        }
        hcp_contracts::jcs::sha256(&value)
            .map(hex::encode)
            .map_err(ChecksumError::Canonical)
    }
}

/// Why an entry's checksum cannot be computed.
#[derive(Debug, thiserror::Error)]
pub enum ChecksumError {
    /// The entry has no JSON form.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Its JSON has no canonical form (a non-finite number).
    #[error("{0}")]
    Canonical(String),
}

/// The error of a failed database call on the log at `path`.
fn db_error(path: &Path) -> impl Fn(rusqlite::Error) -> LogError + Copy + '_ {
    move |source| LogError::Db {
        path: path.to_path_buf(),
        source,
    }
}

/// What went wrong with the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The database failed.
    #[error("session log {path}: {source}")]
    Db {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database was written by a newer host.
    #[error(
        "session log {path}: HID schema version {found} is newer than this host knows ({known}); upgrade the host"
    )]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: i64,
        /// The newest this host knows.
        known: usize,
    },
    /// An entry does not fit the shipped `session_log` schema (a host
    /// defect).
    #[error("session log entry does not fit session_log:\n{}", problem::list(.0))]
    Contract(Vec<Problem>),
    /// An entry could not be canonicalized.
    #[error("session log entry cannot be hashed: {0}")]
    Hash(String),
    /// The chain is broken.
    #[error("session log {path}: {source}")]
    Integrity {
        /// The database file.
        path: PathBuf,
        /// Where and how.
        #[source]
        source: IntegrityError,
    },
}

/// Migrations of this module's tables, in order; `hid_schema_version`
/// records how many ran.
const MIGRATIONS: &[&str] = &[r"
    CREATE TABLE hid_session_log (
        position INTEGER PRIMARY KEY,
        log_id TEXT NOT NULL UNIQUE,
        entry TEXT NOT NULL
    ) STRICT;
    CREATE TABLE hid_log_head (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        count INTEGER NOT NULL,
        checksum TEXT NOT NULL
    ) STRICT;
"];

/// The session log in its database.
#[derive(Debug)]
pub struct SessionLog {
    path: PathBuf,
    db: Connection,
}

impl SessionLog {
    /// Opens (creating) the log's tables in the database at `path`.
    ///
    /// # Errors
    ///
    /// The database cannot be opened or migrated, or its HID tables were
    /// written by a newer host.
    pub fn open(path: &Path) -> Result<Self, LogError> {
        let db_err = db_error(path);
        let db = Connection::open(path).map_err(db_err)?;
        db.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(db_err)?;
        db.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_err)?;
        db.pragma_update(None, "synchronous", "FULL")
            .map_err(db_err)?;
        let mut log = Self {
            path: path.to_path_buf(),
            db,
        };
        log.migrate()?;
        Ok(log)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db_err(&self, source: rusqlite::Error) -> LogError {
        db_error(&self.path)(source)
    }

    fn migrate(&mut self) -> Result<(), LogError> {
        let path = self.path.clone();
        let db_err = db_error(&path);
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS hid_schema_version (
                 id INTEGER PRIMARY KEY CHECK (id = 1),
                 version INTEGER NOT NULL
             ) STRICT;",
        )
        .map_err(db_err)?;
        let found: i64 = tx
            .query_row(
                "SELECT version FROM hid_schema_version WHERE id = 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?
            .unwrap_or(0);
        let version = usize::try_from(found).unwrap_or(usize::MAX);
        if version > MIGRATIONS.len() {
            return Err(LogError::TooNew {
                path: path.clone(),
                found,
                known: MIGRATIONS.len(),
            });
        }
        for sql in MIGRATIONS.iter().skip(version) {
            tx.execute_batch(sql).map_err(db_err)?;
        }
        let latest = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT INTO hid_schema_version (id, version) VALUES (1, ?1)
             ON CONFLICT (id) DO UPDATE SET version = excluded.version",
            params![latest],
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)
    }

    /// Appends `event`, chained to the last entry, durably.
    ///
    /// # Errors
    ///
    /// The entry does not fit the schema ([`LogError::Contract`]), or the
    /// database failed.
    pub fn append(&mut self, event: Event) -> Result<LogEntry, LogError> {
        let path = self.path.clone();
        let db_err = db_error(&path);
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let head: Option<(i64, String)> = tx
            .query_row(
                "SELECT count, checksum FROM hid_log_head WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db_err)?;
        let (count, previous) = match head {
            Some((count, checksum)) => (u64::try_from(count).unwrap_or(0), Some(checksum)),
            None => (0, None),
        };
        let mut entry = LogEntry {
            log_id: format!("log-{}", uuid::Uuid::now_v7().simple()),
            sequence: count + 1,
            timestamp: hcp_contracts::message::now_rfc3339(),
            event_type: event.event_type,
            mode: event.mode,
            operator_id: event.operator_id,
            proposal_id: event.proposal_id,
            execution_id: event.execution_id,
            details: event.details,
            previous_log_checksum: previous,
            checksum: String::new(),
        };
        entry.checksum = entry
            .compute_checksum()
            .map_err(|e| LogError::Hash(e.to_string()))?;
        let value = serde_json::to_value(&entry).map_err(|e| LogError::Hash(e.to_string()))?;
        SchemaId::HidSessionLog
            .validate(&value, "")
            .map_err(LogError::Contract)?;
        tx.execute(
            "INSERT INTO hid_session_log (log_id, entry) VALUES (?1, ?2)",
            params![entry.log_id, value.to_string()],
        )
        .map_err(db_err)?;
        tx.execute(
            "INSERT INTO hid_log_head (id, count, checksum) VALUES (1, ?1, ?2)
             ON CONFLICT (id) DO UPDATE SET count = excluded.count, checksum = excluded.checksum",
            params![
                i64::try_from(entry.sequence).unwrap_or(i64::MAX),
                entry.checksum
            ],
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(entry)
    }

    /// Every entry, in stored order.
    ///
    /// # Errors
    ///
    /// The database failed, or an entry is unreadable
    /// ([`IntegrityError::Unreadable`]).
    pub fn entries(&self) -> Result<Vec<LogEntry>, LogError> {
        self.rows()?
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                serde_json::from_str(&text).map_err(|e| LogError::Integrity {
                    path: self.path.clone(),
                    source: IntegrityError::Unreadable {
                        position: i + 1,
                        reason: e.to_string(),
                    },
                })
            })
            .collect()
    }

    fn rows(&self) -> Result<Vec<String>, LogError> {
        self.rows_in(&self.db)
    }

    fn rows_in(&self, db: &Connection) -> Result<Vec<String>, LogError> {
        let mut stmt = db
            .prepare("SELECT entry FROM hid_session_log ORDER BY position")
            .map_err(|e| self.db_err(e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.db_err(e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.db_err(e))
    }

    /// Checks the whole chain and the head.
    ///
    /// # Errors
    ///
    /// [`LogError::Integrity`] naming the first entry found altered, missing,
    /// inserted or out of order; or the database failed.
    pub fn verify(&self) -> Result<Verified, LogError> {
        // The entries and the head as of one moment: one read transaction
        // (an append by another connection between two reads would read as
        // a deleted tail).
        let tx = self
            .db
            .unchecked_transaction()
            .map_err(|e| self.db_err(e))?;
        let rows = self.rows_in(&tx)?;
        let head: Option<(i64, String)> = tx
            .query_row(
                "SELECT count, checksum FROM hid_log_head WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.db_err(e))?;
        drop(tx);
        let head = head.map(|(n, c)| (u64::try_from(n).unwrap_or(0), c));
        verify(&rows, head.as_ref().map(|(n, c)| (*n, c.as_str()))).map_err(|source| {
            LogError::Integrity {
                path: self.path.clone(),
                source,
            }
        })
    }
}

#[cfg(test)]
mod tests;
