//! What the store does about a full disk and a damaged database.
//!
//! - A write that fails because the data directory's filesystem is full
//!   (SQLite's `SQLITE_FULL`, a write error, `ENOSPC`, `EFBIG`, `EDQUOT`)
//!   is a [`StorageFull`]: the HTTP API answers it 503 `storage_full`, and
//!   the host goes on once space returns.
//! - The mark (`hcp.db.mark` beside the database) records how many
//!   receipts the store held, and the hash of the last, after each batch
//!   that a checkpoint sealed (two checksummed records, each mark
//!   overwriting the one not written last in place and syncing it; see
//!   [`MarkFile`]). A store that holds fewer, or another receipt there, lost
//!   acknowledged data: [`check`] refuses it, and [`Store::open`] with it.
//! - [`backup`] copies the database with SQLite's online backup; [`restore`]
//!   puts a backup in place and takes it as the store's new mark.
//!
//! [`Store::open`]: super::Store::open

use anyhow::{Context as _, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension as _};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The mark's file name, in the data directory.
pub const MARK: &str = "hcp.db.mark";

/// The database's file name, in the data directory.
pub const DB: &str = "hcp.db";

/// A write failed because the data directory's storage is full.
#[derive(Debug, thiserror::Error)]
#[error("the host's storage is full: {0}")]
pub struct StorageFull(pub String);

/// Whether `e` (or any error it wraps) is a write that failed for want of
/// space, and why.
pub fn storage_full(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|c| {
        if let Some(StorageFull(why)) = c.downcast_ref::<StorageFull>() {
            return Some(why.clone());
        }
        if let Some(rusqlite::Error::SqliteFailure(f, _)) = c.downcast_ref::<rusqlite::Error>()
            && sqlite_full(f)
        {
            return Some(c.to_string());
        }
        c.downcast_ref::<std::io::Error>()
            .filter(|io| io_full(io))
            .map(ToString::to_string)
    })
}

fn sqlite_full(f: &rusqlite::ffi::Error) -> bool {
    f.code == rusqlite::ErrorCode::DiskFull
        || matches!(
            f.extended_code,
            rusqlite::ffi::SQLITE_IOERR_WRITE | rusqlite::ffi::SQLITE_IOERR_FSYNC
        )
}

/// `ENOSPC`, `EFBIG` (a file size limit), `EDQUOT`.
fn io_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(28 | 27 | 122))
        || e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::FileTooLarge
        || e.kind() == std::io::ErrorKind::QuotaExceeded
}

/// What the store held when its mark was last written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Receipts stored (the next receipt's `seq`).
    pub receipts: u64,
    /// The hex SHA-256 of the last of them (`None` when there is none).
    pub head: Option<String>,
}

/// The mark file holds two records of [`SLOT`] bytes each, a line of JSON
/// with a checksum, padded with spaces: the marker overwrites one in place
/// and syncs it, and the other still holds the mark before it should the
/// write be torn. The valid record with more receipts is the mark. (Either
/// is a true lower bound of the store: receipts are only ever appended.)
const SLOT: usize = 256;

/// One record of the mark file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    receipts: u64,
    head: Option<String>,
    /// [`Mark::sum`].
    sum: String,
}

impl Mark {
    /// A short checksum of the record, so that a torn write is not taken
    /// for a mark.
    fn sum(&self) -> String {
        use sha2::Digest as _;
        let text = format!("{}:{}", self.receipts, self.head.as_deref().unwrap_or(""));
        hex::encode(&sha2::Sha256::digest(text.as_bytes())[..8])
    }

    /// The mark as one record of the file: a line of JSON padded to
    /// [`SLOT`] bytes.
    fn record(&self) -> Result<Vec<u8>> {
        let mut line = serde_json::to_vec(&Record {
            receipts: self.receipts,
            head: self.head.clone(),
            sum: self.sum(),
        })?;
        anyhow::ensure!(
            line.len() < SLOT,
            "a mark record is longer than {SLOT} bytes"
        );
        line.resize(SLOT - 1, b' ');
        line.push(b'\n');
        Ok(line)
    }

    /// A record of the file, if it is one whose checksum holds.
    fn from_record(bytes: &[u8]) -> Option<Self> {
        let r: Record = serde_json::from_slice(bytes.trim_ascii_end()).ok()?;
        let mark = Self {
            receipts: r.receipts,
            head: r.head,
        };
        (mark.sum() == r.sum).then_some(mark)
    }

    /// The mark a file holds: the valid record with more receipts, or a
    /// mark written as one JSON document (by hosts before the records).
    fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() == 2 * SLOT {
            return bytes
                .chunks(SLOT)
                .filter_map(Self::from_record)
                .max_by_key(|m| m.receipts);
        }
        serde_json::from_slice(bytes).ok()
    }

    /// The mark of `dir`, if it has one.
    ///
    /// # Errors
    ///
    /// A [`Damaged`] when the file holds no mark (neither record's
    /// checksum holds), with the way out; the file cannot be read.
    fn read(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(MARK);
        match std::fs::read(&path) {
            Ok(bytes) => Self::parse(&bytes).map(Some).ok_or_else(|| {
                damaged(
                    dir,
                    format!(
                        "{} is not a store mark (damaged or replaced): what the store must \
                         hold is unknown",
                        path.display()
                    ),
                    RESTORE_OR_ACCEPT,
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| path.display().to_string()),
        }
    }

    /// Writes the mark atomically (both records): a temporary file, synced,
    /// renamed over the mark, the directory synced.
    ///
    /// # Errors
    ///
    /// The file cannot be written (the old mark stays).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join(format!(".{MARK}.{}.tmp", uuid::Uuid::new_v4()));
        let written = (|| -> Result<()> {
            let record = self.record()?;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&record)?;
            f.write_all(&record)?;
            f.sync_all()?;
            std::fs::rename(&tmp, dir.join(MARK))?;
            Ok(())
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.with_context(|| format!("{}", dir.join(MARK).display()))?;
        super::sync_dir(dir);
        Ok(())
    }

    /// The mark of the store as it is.
    fn of(db: &Connection) -> Result<Self> {
        Ok(match super::receipt_hashes::last(db)? {
            Some((seq, hash)) => Self {
                receipts: seq + 1,
                head: Some(hex::encode(hash.0)),
            },
            None => Self {
                receipts: 0,
                head: None,
            },
        })
    }
}

/// The mark file as the receipt writer's marker keeps it open: each mark
/// overwrites the record not written last, in place, and is synced (one
/// `fdatasync`, no new file, no rename, no directory sync).
#[derive(Debug)]
pub struct MarkFile {
    dir: PathBuf,
    open: Option<(std::fs::File, u64)>,
}

impl MarkFile {
    /// The mark file of `dir`, opened at the first [`MarkFile::write`].
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            open: None,
        }
    }

    /// Records `mark` (of receipts already durable).
    ///
    /// # Errors
    ///
    /// The file cannot be written (the mark before stays).
    pub fn write(&mut self, mark: &Mark) -> Result<()> {
        use std::os::unix::fs::{FileExt as _, MetadataExt as _};
        // A file replaced since (by `hcp store restore`, or another process
        // writing it afresh) is opened again.
        if let Some((file, _)) = &self.open
            && file.metadata().map_or(true, |m| m.nlink() == 0)
        {
            self.open = None;
        }
        let Some((file, slot)) = &mut self.open else {
            // Afresh, both records: the file may not exist yet, or be a
            // mark of one JSON document.
            mark.write(&self.dir)?;
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.dir.join(MARK))
                .with_context(|| self.dir.join(MARK).display().to_string())?;
            self.open = Some((file, 0));
            return Ok(());
        };
        let written = file
            .write_all_at(&mark.record()?, *slot * SLOT as u64)
            .and_then(|()| file.sync_data());
        if let Err(e) = written {
            self.open = None;
            return Err(e).with_context(|| self.dir.join(MARK).display().to_string());
        }
        *slot ^= 1;
        Ok(())
    }
}

/// The store is damaged or lost acknowledged data: the host must not
/// serve from it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: {what}. The host will not serve from this store.\nRecovery: stop every hcp process using this data directory, then {steps}"
)]
pub struct Damaged {
    path: String,
    what: String,
    steps: &'static str,
}

const RESTORE: &str = "restore the database from a backup with `hcp store restore <backup>` \
(see \"Durability, backup and restore\" in the README), and start again.";
const RESTORE_OR_ACCEPT: &str = "restore the database from a backup with `hcp store restore \
<backup>` (see \"Durability, backup and restore\" in the README), and start again; or, to accept the loss \
and serve from the store as it is, run `hcp store check --accept-loss`.";

fn damaged(dir: &Path, what: String, steps: &'static str) -> anyhow::Error {
    Damaged {
        path: dir.join(DB).display().to_string(),
        what,
        steps,
    }
    .into()
}

/// Compares the store with its mark (cheap: two lookups); every open of
/// the store does it.
///
/// # Errors
///
/// A [`Damaged`] when the store holds less than the mark recorded, or
/// other receipts; the database or the mark cannot be read.
pub(super) fn check_mark(dir: &Path, db: &Connection) -> Result<()> {
    let Some(mark) = Mark::read(dir)? else {
        return Ok(());
    };
    let now = match Mark::of(db) {
        Ok(m) => m,
        Err(e) => {
            return Err(damaged(
                dir,
                format!("the database cannot be read ({e:#})"),
                RESTORE,
            ));
        }
    };
    if now.receipts < mark.receipts {
        return Err(damaged(
            dir,
            format!(
                "the store holds {} receipts, but {} recorded {} (the database or its \
                 write-ahead log {DB}-wal was emptied, truncated, deleted or replaced): \
                 acknowledged data is lost",
                now.receipts, MARK, mark.receipts
            ),
            RESTORE_OR_ACCEPT,
        ));
    }
    if let Some(head) = &mark.head {
        let seq = mark.receipts.saturating_sub(1);
        let stored = super::receipt_hashes::at(db, seq)?;
        // A receipt archived since, its hash pruned with it (all but the
        // last: the anchor's head), is past checking here: the archive
        // verified its pack against the log before it pruned.
        let pruned = stored.is_none() && seq < super::receipt_hashes::first_stored(db)?;
        if !pruned && stored.map(|h| hex::encode(h.0)).as_deref() != Some(head.as_str()) {
            return Err(damaged(
                dir,
                format!(
                    "receipt {seq} is not the one {MARK} recorded (the store was replaced or \
                     went another way)"
                ),
                RESTORE_OR_ACCEPT,
            ));
        }
    }
    Ok(())
}

fn open_existing(path: &Path) -> rusqlite::Result<Connection> {
    let mut db = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    super::busy::wait_for_lock(&mut db, super::busy::LOCK_WAIT)?;
    Ok(db)
}

/// What [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The store as it is now.
    pub store: Mark,
    /// The mark it was checked against (`None`: there was none).
    pub mark: Option<Mark>,
    /// Whether every page of the database was checked (else its most
    /// recent rows: [`Scope::Startup`]).
    pub whole: bool,
}

/// A database up to this size is checked whole at startup too: reading
/// it all takes a bounded time (well under a second from disk).
pub const WHOLE_AT_STARTUP: u64 = 64 << 20;

/// How many of the most recently written rows of each table the startup
/// check reads whole, when it does not check the whole database.
const RECENT_ROWS: i64 = 256;

/// The tables whose rows are written in the order of their `rowid` (or
/// their integer key), so that the last rows are the most recent writes,
/// with how many of them the startup check reads: the receipt blocks hold
/// up to a thousand receipts (about 1 MiB at most) each.
const RECENT: &[(&str, i64)] = &[
    ("receipt_blocks", 64),
    ("receipts", RECENT_ROWS),
    ("receipt_marks", RECENT_ROWS),
    ("receipt_checkpoints", 16),
    ("receipt_sessions", RECENT_ROWS),
    ("task_messages", RECENT_ROWS),
    ("tasks", RECENT_ROWS),
    ("approvals", RECENT_ROWS),
    ("checkpoints", 64),
    ("artifacts", RECENT_ROWS),
];

/// How much of the database a check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every page (`quick_check`): `hcp store check`.
    Whole,
    /// At startup: the whole database up to [`WHOLE_AT_STARTUP`] bytes;
    /// beyond, a check whose time does not grow with the store (the
    /// mark, the most recent rows of each table read whole, the recent
    /// tasks found again through each of their indexes).
    Startup,
}

/// The startup check of `hcp serve` and `hcp mcp` ([`Scope::Startup`]).
///
/// # Errors
///
/// A [`Damaged`] naming the file, what is wrong and the recovery steps.
pub fn check_at_startup(dir: &Path) -> Result<Checked> {
    check_scoped(dir, Scope::Startup, WHOLE_AT_STARTUP)
}

/// The check of `hcp store check`: SQLite's `quick_check` of the whole
/// database, then the mark.
///
/// # Errors
///
/// A [`Damaged`] naming the file, what is wrong and the recovery steps.
pub fn check(dir: &Path) -> Result<Checked> {
    check_scoped(dir, Scope::Whole, WHOLE_AT_STARTUP)
}

/// [`check`] or [`check_at_startup`], the database checked whole when
/// `scope` is [`Scope::Whole`] or it is no larger than `whole_up_to`.
fn check_scoped(dir: &Path, scope: Scope, whole_up_to: u64) -> Result<Checked> {
    let path = dir.join(DB);
    let mark = Mark::read(dir)?;
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if len == 0 {
        return match &mark {
            Some(m) if m.receipts > 0 => Err(damaged(
                dir,
                format!(
                    "the database is missing or empty, but {MARK} recorded {} receipts: \
                     acknowledged data is lost",
                    m.receipts
                ),
                RESTORE_OR_ACCEPT,
            )),
            _ => Ok(Checked {
                store: Mark {
                    receipts: 0,
                    head: None,
                },
                mark,
                whole: true,
            }),
        };
    }
    let db = open_existing(&path)
        .map_err(|e| damaged(dir, format!("the database cannot be opened ({e})"), RESTORE))?;
    let whole = scope == Scope::Whole || len <= whole_up_to;
    if whole {
        quick_check(dir, &db)?;
    } else {
        recent_check(&db).map_err(|e| {
            damaged(
                dir,
                format!("the database is damaged (its most recent rows: {e:#})"),
                RESTORE,
            )
        })?;
    }
    check_mark(dir, &db)?;
    Ok(Checked {
        store: Mark::of(&db)?,
        mark,
        whole,
    })
}

/// SQLite's `quick_check` of every page.
fn quick_check(dir: &Path, db: &Connection) -> Result<()> {
    let quick = |db: &Connection| -> rusqlite::Result<Vec<String>> {
        let mut stmt = db.prepare("PRAGMA quick_check")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    };
    match quick(db) {
        Ok(rows) if rows == ["ok"] => Ok(()),
        Ok(rows) => {
            let mut found: Vec<String> = rows.into_iter().take(5).collect();
            found.dedup();
            Err(damaged(
                dir,
                format!(
                    "the database is damaged (quick_check: {})",
                    found.join("; ")
                ),
                RESTORE,
            ))
        }
        Err(e) => Err(damaged(
            dir,
            format!("the database is damaged (quick_check: {e})"),
            RESTORE,
        )),
    }
}

/// The startup check beyond [`WHOLE_AT_STARTUP`], in a time that does not
/// grow with the store: the schema, then the last rows of each table of
/// [`RECENT`] read whole, every column (which walks the pages from each
/// table's root to its most recent leaves and their overflow pages:
/// SQLite refuses a page there that is not what it must be), then each of
/// the recent tasks found again through each of the indexes on `tasks`
/// (an index that lost or changed the entry of a recent task).
fn recent_check(db: &Connection) -> Result<()> {
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for (table, n) in RECENT {
        if !tables.iter().any(|t| t == table) {
            continue;
        }
        let mut stmt = db.prepare(&format!(
            "SELECT * FROM {table} ORDER BY rowid DESC LIMIT ?1"
        ))?;
        let columns = stmt.column_count();
        let mut rows = stmt.query([n])?;
        while let Some(row) = rows.next()? {
            for i in 0..columns {
                // Reading the value reads its overflow pages too.
                let _ = row.get_ref(i)?;
            }
        }
    }
    if !tables.iter().any(|t| t == "tasks") {
        return Ok(());
    }
    type Recent = (i64, String, String, String, String, Option<String>);
    let recent: Vec<Recent> = db
        .prepare(
            "SELECT rowid, task_id, caller_id, message_id, state, session_id FROM tasks
             ORDER BY rowid DESC LIMIT ?1",
        )?
        .query_map([RECENT_ROWS], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    // Each query is answered by one index (the primary key's, the unique
    // caller and message's, the state's, the session's, the waiting
    // approvals'), each a search for one entry: the task must be found.
    let mut by_id = db.prepare("SELECT rowid FROM tasks WHERE task_id = ?1")?;
    let mut by_message =
        db.prepare("SELECT rowid FROM tasks WHERE caller_id = ?1 AND message_id = ?2")?;
    // (A store of an older host may not have every index yet: it is
    // migrated once the check passed.)
    let indexes: Vec<String> = db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'tasks'")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let with = |index: &str, sql: &str| -> Result<Option<rusqlite::Statement<'_>>> {
        Ok(match indexes.iter().any(|i| i == index) {
            true => Some(db.prepare(sql)?),
            false => None,
        })
    };
    let mut by_state = with(
        "tasks_state",
        "SELECT 1 FROM tasks INDEXED BY tasks_state WHERE state = ?1 AND rowid = ?2",
    )?;
    let mut by_session = with(
        "tasks_session",
        "SELECT 1 FROM tasks INDEXED BY tasks_session WHERE session_id = ?1 AND rowid = ?2",
    )?;
    let mut pending = with(
        "tasks_pending_by_caller",
        "SELECT 1 FROM tasks INDEXED BY tasks_pending_by_caller
         WHERE caller_id = ?1 AND state = 'pending_approval' AND rowid = ?2",
    )?;
    let found_in = |stmt: &mut Option<rusqlite::Statement<'_>>,
                    key: &dyn rusqlite::ToSql,
                    rowid: i64|
     -> Result<bool> {
        Ok(match stmt {
            Some(stmt) => stmt.exists(rusqlite::params![key, rowid])?,
            None => true,
        })
    };
    for (rowid, id, caller, message, state, session) in &recent {
        let found = by_id.query_row([id], |r| r.get::<_, i64>(0)).optional()? == Some(*rowid)
            && by_message
                .query_row(rusqlite::params![caller, message], |r| r.get::<_, i64>(0))
                .optional()?
                == Some(*rowid)
            && found_in(&mut by_state, state, *rowid)?
            && match session {
                Some(s) => found_in(&mut by_session, s, *rowid)?,
                None => true,
            }
            && (state != "pending_approval" || found_in(&mut pending, caller, *rowid)?);
        if !found {
            anyhow::bail!("task {id} is missing from an index of the tasks");
        }
    }
    Ok(())
}

/// The mark that a recovery (accepting the loss, restoring a backup)
/// replaces: none when the file holds no mark, since replacing a damaged
/// mark is one of the things these commands are for.
fn replaced_mark(dir: &Path) -> Result<Option<Mark>> {
    match Mark::read(dir) {
        Err(e) if e.downcast_ref::<Damaged>().is_some() => Ok(None),
        other => other,
    }
}

/// Accepts the store as it is: after `quick_check`, its mark becomes what
/// it holds now. Returns the old mark and the new.
///
/// # Errors
///
/// The database is damaged (nothing to accept), or the mark cannot be
/// written.
pub fn accept_loss(dir: &Path) -> Result<Checked> {
    let _alone = hold_alone(dir)?;
    let path = dir.join(DB);
    let mark = replaced_mark(dir)?;
    let store = if std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) == 0 {
        Mark {
            receipts: 0,
            head: None,
        }
    } else {
        let db = open_existing(&path)?;
        let rows: String = db.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
        if rows != "ok" {
            return Err(damaged(
                dir,
                format!("the database is damaged (quick_check: {rows})"),
                RESTORE,
            ));
        }
        Mark::of(&db)?
    };
    store.write(dir)?;
    Ok(Checked {
        store,
        mark,
        whole: true,
    })
}

/// Copies the database of `dir` to `dest` (a new file) with SQLite's online
/// backup: consistent while the host runs. Returns the copy's mark.
///
/// # Errors
///
/// `dest` exists; the database cannot be read or the copy written.
pub fn backup(dir: &Path, dest: &Path) -> Result<Mark> {
    if dest.exists() {
        anyhow::bail!("{}: already exists", dest.display());
    }
    let src = open_existing(&dir.join(DB)).with_context(|| dir.join(DB).display().to_string())?;
    let tmp = temp_beside(dest)?;
    let copied = (|| -> Result<Mark> {
        src.backup(
            rusqlite::MAIN_DB,
            &tmp,
            None::<fn(rusqlite::backup::Progress)>,
        )?;
        let copy = open_existing(&tmp)?;
        copy.pragma_update(None, "journal_mode", "DELETE")?;
        let mark = Mark::of(&copy)?;
        drop(copy);
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, dest)?;
        Ok(mark)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    let mark = copied.with_context(|| format!("backup to {}", dest.display()))?;
    if let Some(parent) = dest.parent() {
        super::sync_dir(parent);
    }
    Ok(mark)
}

/// The data directory's lock, beside the database: every open store holds
/// it shared ([`hold_shared`]); restore and accept-loss, which replace what
/// an open store writes into, take it alone ([`hold_alone`]).
pub const LOCK: &str = "hcp.lock";

fn lock_file(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(LOCK);
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(&path)
        .with_context(|| format!("{}", path.display()))
}

/// Holds the data directory's lock shared while the returned file is open
/// (waits while a restore or accept-loss has it).
///
/// # Errors
///
/// The lock file cannot be opened or locked.
pub(crate) fn hold_shared(dir: &Path) -> Result<std::fs::File> {
    let file = lock_file(dir)?;
    file.lock_shared()
        .with_context(|| format!("locking {}", dir.join(LOCK).display()))?;
    Ok(file)
}

/// The lock a store's setup (`Store::open`: WAL, the mark's check, the
/// schema, the data key) is made under, one process at a time.
pub const SETUP_LOCK: &str = "hcp.setup.lock";

/// Holds the setup lock alone while the returned file is open (waits for
/// another process's setup, a few milliseconds).
///
/// # Errors
///
/// The lock file cannot be opened or locked.
pub(crate) fn hold_setup(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(SETUP_LOCK);
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .open(&path)
        .with_context(|| format!("{}", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

/// Holds the data directory's lock alone, or refuses when any process has
/// its store open.
fn hold_alone(dir: &Path) -> Result<std::fs::File> {
    let file = lock_file(dir)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{}: another hcp process has this data directory open (`hcp serve`, or a \
             command): stop it first, since what it holds open would be replaced under it",
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", dir.join(LOCK).display()))
        }
    }
}

fn temp_beside(dest: &Path) -> Result<PathBuf> {
    let name = dest
        .file_name()
        .with_context(|| format!("{}: not a file name", dest.display()))?
        .to_string_lossy();
    Ok(dest.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4())))
}

/// Puts the backup `from` in place as the database of `dir` (no host may
/// be running on it): checks it (`quick_check`), copies it beside the
/// database, syncs it, removes the old write-ahead log and renames it
/// over `hcp.db`; its mark becomes the store's. Returns the old mark and
/// the new.
///
/// # Errors
///
/// The backup is damaged or cannot be read; the copy cannot be written.
pub fn restore(dir: &Path, from: &Path) -> Result<Checked> {
    let _alone = hold_alone(dir)?;
    let source = open_existing(from).with_context(|| from.display().to_string())?;
    let rows: String = source
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .with_context(|| from.display().to_string())?;
    if rows != "ok" {
        anyhow::bail!(
            "{}: the backup is damaged (quick_check: {rows})",
            from.display()
        );
    }
    let store = Mark::of(&source)?;
    drop(source);
    let mark = replaced_mark(dir)?;
    let path = dir.join(DB);
    let tmp = temp_beside(&path)?;
    let placed = (|| -> Result<()> {
        std::fs::copy(from, &tmp)?;
        std::fs::File::open(&tmp)?.sync_all()?;
        for stale in [format!("{DB}-wal"), format!("{DB}-shm")] {
            match std::fs::remove_file(dir.join(stale)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        std::fs::rename(&tmp, &path)?;
        Ok(())
    })();
    if placed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    placed.with_context(|| format!("restoring {}", path.display()))?;
    super::sync_dir(dir);
    store.write(dir)?;
    Ok(Checked {
        store,
        mark,
        whole: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Restore and accept-loss replace what a running host holds open: they
    /// are refused while any process has the data directory's store open
    /// (a host kept writing into the replaced files, and everything it
    /// acknowledged after was lost), and work once it is closed.
    #[test]
    fn restore_and_accept_loss_wait_for_the_directory_to_be_theirs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let store = super::super::Store::open(&data).expect("open");
        let copy = dir.path().join("backup.db");
        backup(&data, &copy).expect("backup");
        for refused in [restore(&data, &copy), accept_loss(&data)] {
            let e = refused.expect_err("replaced under an open store");
            assert!(
                format!("{e:#}").contains("another hcp process has this data directory open"),
                "{e:#}"
            );
        }
        drop(store);
        restore(&data, &copy).expect("restore");
        accept_loss(&data).expect("accept the loss");
        super::super::Store::open(&data).expect("open again");
    }

    /// A store of `n` tasks written in order, each with a submission that
    /// names it (`<submit-000042>`), its write-ahead log checkpointed into
    /// the database file.
    fn with_tasks(n: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let store = super::super::Store::open(&data).expect("open");
        {
            let mut db = store.db();
            let tx = db.transaction().expect("transaction");
            for i in 0..n {
                tx.execute(
                    "INSERT INTO tasks (task_id, caller_id, message_id, capability, session_id,
                        state, submit, created_at, updated_at)
                     VALUES (?1, 'caller', ?2, 'cap', ?3, 'completed', ?4, ?5, ?5)",
                    rusqlite::params![
                        format!("task-{i:06}"),
                        format!("message-{i:06}"),
                        format!("session-{i:06}"),
                        format!("<submit-{i:06}>{}", "x".repeat(300)),
                        format!("2026-01-01T00:00:{:02}Z", i % 60),
                    ],
                )
                .expect("insert");
            }
            tx.commit().expect("commit");
        }
        drop(store);
        let db = open_existing(&data.join(DB)).expect("open");
        db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .expect("checkpoint");
        (dir, data)
    }

    /// Makes the page of `hcp.db` that holds `needle` a page of no type
    /// (its header's first byte 0): SQLite refuses it once it reads it.
    fn damage_page_holding(data: &Path, needle: &str) {
        let path = data.join(DB);
        let mut bytes = std::fs::read(&path).expect("read");
        let size = match u16::from_be_bytes([bytes[16], bytes[17]]) {
            1 => 65_536,
            n => usize::from(n),
        };
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .expect("needle in the database file");
        let page = at / size;
        let header = page * size + if page == 0 { 100 } else { 0 };
        bytes[header] = 0;
        std::fs::write(&path, &bytes).expect("write");
    }

    /// Beyond its size for a whole check, the startup check reads the most
    /// recent rows whole: a damaged page among them refuses the store.
    #[test]
    fn startup_refuses_a_damaged_recent_page_of_a_large_store() {
        let (_dir, data) = with_tasks(5_000);
        check_scoped(&data, Scope::Startup, 0).expect("intact");
        damage_page_holding(&data, "<submit-004990>");
        let e = check_scoped(&data, Scope::Startup, 0).expect_err("damaged");
        assert!(e.downcast_ref::<Damaged>().is_some(), "{e:#}");
        assert!(
            format!("{e:#}").contains("the database is damaged (its most recent rows: "),
            "{e:#}"
        );
        let e = check(&data).expect_err("damaged");
        assert!(format!("{e:#}").contains("(quick_check: "), "{e:#}");
    }

    /// An old page is not read at startup of a large store (the trade of a
    /// startup that does not grow with the store); `hcp store check` reads
    /// every page and refuses it, and so does the startup of a store small
    /// enough to be checked whole.
    #[test]
    fn store_check_finds_a_damaged_old_page_that_startup_does_not_read() {
        let (_dir, data) = with_tasks(5_000);
        damage_page_holding(&data, "<submit-000010>");
        let checked = check_scoped(&data, Scope::Startup, 0).expect("the recent rows are intact");
        assert!(!checked.whole);
        let e = check(&data).expect_err("damaged");
        assert!(
            format!("{e:#}").contains("the database is damaged (quick_check: "),
            "{e:#}"
        );
        let e = check_at_startup(&data).expect_err("small: checked whole");
        assert!(format!("{e:#}").contains("(quick_check: "), "{e:#}");
    }

    #[test]
    fn full_disk_errors_are_recognised() {
        let sqlite = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            Some("database or disk is full".into()),
        );
        let e = anyhow::Error::from(sqlite).context("receipts");
        assert_eq!(
            storage_full(&e).as_deref(),
            Some("database or disk is full")
        );
        let io = anyhow::Error::from(std::io::Error::from_raw_os_error(28)).context("blob");
        assert!(storage_full(&io).is_some());
        let other = anyhow::anyhow!("database disk image is malformed");
        assert_eq!(storage_full(&other), None);
    }

    fn mark(receipts: u64) -> Mark {
        Mark {
            receipts,
            head: Some(format!("{receipts:064x}")),
        }
    }

    #[test]
    fn marks_are_written_in_place_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = MarkFile::new(dir.path());
        for n in 1..=5 {
            file.write(&mark(n)).expect("write");
            assert_eq!(Mark::read(dir.path()).expect("read"), Some(mark(n)));
            let len = std::fs::metadata(dir.path().join(MARK))
                .expect("mark")
                .len();
            assert_eq!(len, 2 * SLOT as u64);
        }
        // No temporary file left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, [MARK]);
        // Each record is a line of JSON.
        let text = std::fs::read_to_string(dir.path().join(MARK)).expect("mark");
        let receipts: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).expect("json")["receipts"]
                    .as_u64()
                    .expect("receipts")
            })
            .collect();
        // 1 went to both, then each mark to the record not written last.
        assert_eq!(receipts, [4, 5]);
    }

    #[test]
    fn a_torn_record_leaves_the_mark_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = MarkFile::new(dir.path());
        for n in [10, 20, 30] {
            file.write(&mark(n)).expect("write");
        }
        // 10 went to both records, 20 to the first, 30 to the second: tear
        // the second.
        let path = dir.path().join(MARK);
        let mut bytes = std::fs::read(&path).expect("mark");
        let torn = bytes.iter().position(|&b| b == b'\n').expect("line") + 40;
        bytes[torn] ^= 0x01;
        std::fs::write(&path, &bytes).expect("tear");
        assert_eq!(Mark::read(dir.path()).expect("read"), Some(mark(20)));
        // A record whose checksum does not hold is not taken either.
        let mut line = serde_json::to_vec(&serde_json::json!({
            "receipts": 1_000, "head": null, "sum": mark(20).sum()
        }))
        .expect("json");
        line.resize(SLOT - 1, b' ');
        line.push(b'\n');
        bytes[SLOT..].copy_from_slice(&line);
        std::fs::write(&path, &bytes).expect("forge");
        assert_eq!(Mark::read(dir.path()).expect("read"), Some(mark(20)));
        // Both records damaged: not a mark.
        bytes[10] ^= 0x01;
        std::fs::write(&path, &bytes).expect("tear");
        let err = Mark::read(dir.path()).expect_err("damaged");
        assert!(
            format!("{err:#}").contains("is not a store mark"),
            "{err:#}"
        );
    }

    #[test]
    fn an_older_mark_is_read_and_then_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(MARK);
        std::fs::write(&path, serde_json::to_vec(&mark(7)).expect("json")).expect("old mark");
        assert_eq!(Mark::read(dir.path()).expect("read"), Some(mark(7)));
        let mut file = MarkFile::new(dir.path());
        file.write(&mark(8)).expect("write");
        assert_eq!(Mark::read(dir.path()).expect("read"), Some(mark(8)));
        assert_eq!(
            std::fs::metadata(&path).expect("mark").len(),
            2 * SLOT as u64
        );
    }

    #[test]
    fn a_mark_file_replaced_underneath_is_opened_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = MarkFile::new(dir.path());
        file.write(&mark(1)).expect("write");
        file.write(&mark(2)).expect("write");
        // `hcp store restore` (or another process) puts a new file there.
        mark(50).write(dir.path()).expect("replace");
        file.write(&mark(60)).expect("write");
        assert_eq!(Mark::read(dir.path()).expect("read"), Some(mark(60)));
        file.write(&mark(61)).expect("write");
        assert_eq!(Mark::read(dir.path()).expect("read"), Some(mark(61)));
    }
}
