use super::*;
use crate::action::HOST_OPERATOR;
use serde_json::json;

fn event(event_type: EventType, n: u64) -> Event {
    let mut details = Map::new();
    details.insert("n".into(), json!(n));
    details.insert("decision".into(), json!("APPROVED"));
    Event {
        event_type,
        mode: Mode::Execute,
        operator_id: HOST_OPERATOR.into(),
        proposal_id: Some(format!("prop-{n:08}")),
        execution_id: None,
        details,
    }
}

/// A log of `n` entries in a fresh database.
fn log_of(n: u64) -> (tempfile::TempDir, SessionLog, Vec<LogEntry>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = SessionLog::open(&dir.path().join("hcp.db")).expect("open");
    let entries = (1..=n)
        .map(|i| log.append(event(EventType::Decision, i)).expect("append"))
        .collect();
    (dir, log, entries)
}

fn sql(log: &SessionLog, statement: &str) {
    log.db.execute_batch(statement).expect(statement);
}

/// Inserts `forged`, its checksum made right, as a row of its own: at
/// `position`, or after the last row.
fn insert_forged(log: &SessionLog, mut forged: LogEntry, position: Option<i64>) {
    forged.checksum = forged.compute_checksum().expect("hash");
    log.db
        .execute(
            "INSERT INTO hid_session_log (position, log_id, entry) VALUES (?1, ?2, ?3)",
            params![
                position,
                forged.log_id,
                serde_json::to_string(&forged).expect("json")
            ],
        )
        .expect("insert");
}

fn integrity(log: &SessionLog) -> IntegrityError {
    match log.verify() {
        Err(LogError::Integrity { source, .. }) => source,
        other => panic!("expected an integrity error, got {other:?}"),
    }
}

#[test]
fn entries_chain_and_fit_the_schema() {
    let (_dir, log, entries) = log_of(3);
    assert_eq!(entries[0].previous_log_checksum, None);
    assert_eq!(
        entries[1].previous_log_checksum.as_deref(),
        Some(entries[0].checksum.as_str())
    );
    assert_eq!(entries[2].sequence, 3);
    for e in &entries {
        assert_eq!(e.compute_checksum().expect("hash"), e.checksum);
        SchemaId::HidSessionLog
            .validate(&serde_json::to_value(e).expect("value"), "")
            .expect("schema");
    }
    assert_eq!(log.entries().expect("entries"), entries);
    assert_eq!(
        log.verify().expect("verifies"),
        Verified {
            entries: 3,
            head: Some(entries[2].checksum.clone())
        }
    );
}

#[test]
fn the_chain_survives_reopening_and_user_version_is_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hcp.db");
    {
        let db = Connection::open(&path).expect("host store");
        db.pragma_update(None, "user_version", 7)
            .expect("host's version");
    }
    let first = SessionLog::open(&path)
        .expect("open")
        .append(event(EventType::Proposal, 1))
        .expect("append");
    let mut log = SessionLog::open(&path).expect("reopen");
    let second = log.append(event(EventType::Decision, 2)).expect("append");
    assert_eq!(second.sequence, 2);
    assert_eq!(second.previous_log_checksum, Some(first.checksum));
    log.verify().expect("verifies");
    let user_version: i64 = log
        .db
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("pragma");
    assert_eq!(user_version, 7);
    let journal: String = log
        .db
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .expect("pragma");
    assert_eq!(journal, "wal");
    let sync: i64 = log
        .db
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .expect("pragma");
    assert_eq!(sync, 2, "FULL");
}

#[test]
fn a_newer_schema_is_refused() {
    let (dir, log, _) = log_of(0);
    sql(&log, "UPDATE hid_schema_version SET version = 9");
    drop(log);
    let err = SessionLog::open(&dir.path().join("hcp.db")).expect_err("too new");
    assert!(
        err.to_string()
            .ends_with("HID schema version 9 is newer than this host knows (1); upgrade the host"),
        "{err}"
    );
}

#[test]
fn an_altered_entry_is_found() {
    let (_dir, log, entries) = log_of(4);
    sql(
        &log,
        "UPDATE hid_session_log SET entry = replace(entry, 'APPROVED', 'REJECTED') WHERE position = 2",
    );
    assert_eq!(
        integrity(&log),
        IntegrityError::Altered {
            sequence: 2,
            log_id: entries[1].log_id.clone()
        }
    );
}

#[test]
fn an_altered_and_rehashed_entry_breaks_the_chain() {
    let (_dir, log, entries) = log_of(3);
    let mut forged = entries[1].clone();
    forged.details.insert("decision".into(), json!("REJECTED"));
    forged.checksum = forged.compute_checksum().expect("hash");
    let text = serde_json::to_string(&forged).expect("json");
    log.db
        .execute(
            "UPDATE hid_session_log SET entry = ?1 WHERE position = 2",
            params![text],
        )
        .expect("update");
    assert_eq!(
        integrity(&log),
        IntegrityError::ChainBroken {
            sequence: 3,
            log_id: entries[2].log_id.clone()
        }
    );
}

#[test]
fn a_deleted_entry_is_found() {
    let (_dir, log, entries) = log_of(4);
    sql(&log, "DELETE FROM hid_session_log WHERE position = 2");
    let err = integrity(&log);
    assert_eq!(
        err,
        IntegrityError::Deleted {
            first: 2,
            last: 2,
            before: Some(entries[2].log_id.clone())
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "entry 2 was deleted (the chain resumes at {})",
            entries[2].log_id
        )
    );
}

#[test]
fn deleted_tail_entries_are_found_by_the_head() {
    let (_dir, log, _) = log_of(4);
    sql(&log, "DELETE FROM hid_session_log WHERE position >= 3");
    let err = integrity(&log);
    assert_eq!(
        err,
        IntegrityError::Deleted {
            first: 3,
            last: 4,
            before: None
        }
    );
    assert_eq!(
        err.to_string(),
        "entries 3 to 4 were deleted at the end of the log"
    );
    sql(&log, "DELETE FROM hid_log_head");
    assert_eq!(integrity(&log), IntegrityError::HeadMissing { entries: 2 });
}

#[test]
fn an_inserted_entry_is_found() {
    let (_dir, log, entries) = log_of(4);
    // Make room between positions 2 and 3, then forge a well-formed entry
    // claiming sequence 3 and linking to entry 2.
    sql(
        &log,
        "UPDATE hid_session_log SET position = -position;
         UPDATE hid_session_log SET position = -position * 10;",
    );
    let mut forged = entries[2].clone();
    forged.log_id = "log-forged0000000000".into();
    forged.details.insert("n".into(), json!(99));
    insert_forged(&log, forged, Some(25));
    assert_eq!(
        integrity(&log),
        IntegrityError::Inserted {
            sequence: 3,
            log_id: "log-forged0000000000".into()
        }
    );
}

#[test]
fn an_appended_entry_is_found_by_the_head() {
    let (_dir, log, entries) = log_of(2);
    let mut forged = entries[1].clone();
    forged.log_id = "log-forged0000000000".into();
    forged.sequence = 3;
    forged.previous_log_checksum = Some(entries[1].checksum.clone());
    insert_forged(&log, forged, None);
    assert_eq!(
        integrity(&log),
        IntegrityError::Inserted {
            sequence: 3,
            log_id: "log-forged0000000000".into()
        }
    );
}

#[test]
fn reordered_entries_are_found() {
    let (_dir, log, entries) = log_of(4);
    sql(
        &log,
        "UPDATE hid_session_log SET position = 100 WHERE position = 2;
         UPDATE hid_session_log SET position = 2 WHERE position = 3;
         UPDATE hid_session_log SET position = 3 WHERE position = 100;",
    );
    let err = integrity(&log);
    assert_eq!(
        err,
        IntegrityError::Reordered {
            sequence: 2,
            log_id: entries[1].log_id.clone(),
            position: 3,
            after: 3
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "entry 2 ({}) is out of order: stored at position 3, after entry 3",
            entries[1].log_id
        )
    );
}

#[test]
fn garbage_rows_are_unreadable() {
    let (_dir, log, _) = log_of(2);
    sql(
        &log,
        "UPDATE hid_session_log SET entry = 'not json' WHERE position = 2",
    );
    assert_eq!(
        integrity(&log),
        IntegrityError::Unreadable {
            position: 2,
            reason: "expected ident at line 1 column 2".into()
        }
    );
}

#[test]
fn entries_that_do_not_fit_the_schema_are_refused() {
    let (_dir, mut log, _) = log_of(0);
    let mut bad = event(EventType::Error, 1);
    bad.details
        .insert("error_message".into(), json!("e".repeat(1001)));
    match log.append(bad) {
        Err(LogError::Contract(p)) => assert_eq!(p[0].pointer, "/details/error_message"),
        other => panic!("{other:?}"),
    }
    log.verify().expect("nothing was written");
    assert!(log.entries().expect("entries").is_empty());
}

/// Verification reads the entries and the head as of one moment: with
/// another connection (another process on the data directory) appending
/// meanwhile, it never reports entries missing that were only appended
/// between its reads. Before, the rows and the head were two reads, and an
/// append between them read as a deleted tail.
#[test]
fn verifying_while_another_connection_appends_finds_nothing_wrong() {
    let (dir, log, _) = log_of(20);
    let path = dir.path().join("hcp.db");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let appending = scope.spawn(|| {
            let mut other = SessionLog::open(&path).expect("open");
            let mut n = 1_000;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                other.append(event(EventType::Decision, n)).expect("append");
                n += 1;
            }
        });
        let started = std::time::Instant::now();
        let mut checked = 0;
        while started.elapsed() < std::time::Duration::from_secs(3) {
            if let Err(e) = log.verify() {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
                panic!("a false alarm after {checked} clean checks: {e}");
            }
            checked += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        appending.join().expect("appender");
    });
}
