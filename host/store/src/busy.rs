//! Waiting for SQLite's write lock.
//!
//! Several connections write `hcp.db` (the store's, the receipt writer's,
//! and other processes'); a transaction that finds the write lock held
//! waits for it. SQLite's own busy timeout sleeps 1, 2, 5, 10, 15, 20,
//! 25 ms and on between tries, which makes a commit of a fraction of a
//! millisecond cost a task several milliseconds whenever two connections
//! meet (measured: the task-path bench, docs/benchmarks.md). This handler
//! tries again after 50 µs, doubling to at most 1 ms, and gives up after
//! the same 10 s as before.

use rusqlite::Connection;
use std::time::{Duration, Instant};

/// How long a transaction waits for the write lock before it fails busy.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The pause before try `count` (0 for the first retry).
fn pause(count: i32) -> Duration {
    let doublings = u32::try_from(count.clamp(0, 5)).unwrap_or(5);
    Duration::from_micros(50 << doublings).min(Duration::from_millis(1))
}

/// Sets `db`'s busy handler: short pauses, failing busy after `limit`.
///
/// # Errors
///
/// SQLite refuses the handler.
pub fn wait_for_lock(db: &mut Connection, limit: Duration) -> rusqlite::Result<()> {
    let mut since: Option<Instant> = None;
    db.busy_handler(Some(move |count: i32| {
        let start = if count == 0 {
            *since.insert(Instant::now())
        } else {
            *since.get_or_insert_with(Instant::now)
        };
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(pause(count));
        true
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{Transaction, TransactionBehavior};

    fn open(path: &std::path::Path, limit: Duration) -> Connection {
        let mut db = Connection::open(path).expect("open");
        db.pragma_update(None, "journal_mode", "WAL").expect("wal");
        wait_for_lock(&mut db, limit).expect("handler");
        db
    }

    #[test]
    fn pauses_grow_from_50_us_to_1_ms() {
        assert_eq!(pause(0), Duration::from_micros(50));
        assert_eq!(pause(1), Duration::from_micros(100));
        assert_eq!(pause(4), Duration::from_micros(800));
        assert_eq!(pause(5), Duration::from_millis(1));
        assert_eq!(pause(1_000_000), Duration::from_millis(1));
        assert_eq!(pause(-1), Duration::from_micros(50));
    }

    #[test]
    fn a_writer_waits_for_the_lock_and_then_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.db");
        let mut a = open(&path, LOCK_WAIT);
        a.execute("CREATE TABLE t (v INTEGER)", []).expect("create");
        let mut b = open(&path, LOCK_WAIT);
        let tx = Transaction::new(&mut a, TransactionBehavior::Immediate).expect("lock");
        tx.execute("INSERT INTO t VALUES (1)", []).expect("insert");
        let other = std::thread::spawn(move || {
            let tx = Transaction::new(&mut b, TransactionBehavior::Immediate).expect("waited");
            tx.execute("INSERT INTO t VALUES (2)", []).expect("insert");
            tx.commit().expect("commit");
            b
        });
        std::thread::sleep(Duration::from_millis(30));
        tx.commit().expect("commit");
        let b = other.join().expect("join");
        let n: i64 = b
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .expect("count");
        assert_eq!(n, 2);
    }

    #[test]
    fn a_lock_held_past_the_limit_fails_busy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.db");
        let mut a = open(&path, LOCK_WAIT);
        a.execute("CREATE TABLE t (v INTEGER)", []).expect("create");
        let mut b = open(&path, Duration::from_millis(20));
        let _held = Transaction::new(&mut a, TransactionBehavior::Immediate).expect("lock");
        let err =
            Transaction::new(&mut b, TransactionBehavior::Immediate).expect_err("took a held lock");
        assert_eq!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy),
            "{err}"
        );
    }
}
