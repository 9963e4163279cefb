//! `hcp run` answers only once every receipt of its session is stored: a
//! session that lost receipts to a failed write while it ran (a full disk
//! that had space again by the end) ends in an error, not in the answer
//! it would have given with all of them.

use super::{Hcp, code, parse_answer, seed_submit, stderr, stdout, write_json};
use hcp_contracts::message::MessageType;
use hcp_tests::ManifestBuilder;
use serde_json::json;

#[test]
fn a_run_whose_receipts_were_lost_is_not_answered() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    // The probe imports what it may be asked to use: the grants let it in.
    let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE)
        .set("/grants/instruments", json!(["cvd-rig"]))
        .set("/grants/network", json!([{"host": "localhost", "port": 9}]))
        .write(tmp.path());
    let mut submit = seed_submit();
    submit["payload"]["capability"] = json!("probe");
    // Host calls, then the guest's own work for long enough that their
    // last batch is written before the task's final flush.
    submit["payload"]["inputs"] = json!({"action": "each", "actions": [
        {"action": "flood_log", "lines": 301},
        {"action": "spin", "iterations": 20_000_000}
    ]});
    submit["payload"]
        .as_object_mut()
        .expect("payload")
        .remove("expected_output");
    let input = write_json(tmp.path(), "submit.json", &submit);
    let run = || {
        hcp.run(&[
            "run",
            "-q",
            "--manifest",
            manifest.to_str().expect("utf8"),
            "--input",
            input.to_str().expect("utf8"),
        ])
    };
    // As it is, the run completes.
    let first = run();
    assert_eq!(code(&first), 0, "{}{}", stdout(&first), stderr(&first));
    assert_eq!(parse_answer(&first).kind, MessageType::TaskCompleted);
    // The disk refuses the batch holding the receipt of the last host call
    // (and only that one): the next batch stores, the session goes on.
    rusqlite::Connection::open(hcp.data.path().join("hcp.db"))
        .expect("db")
        .execute_batch(
            "CREATE TRIGGER full_disk BEFORE INSERT ON receipt_blocks
             WHEN instr(NEW.data, CAST('line 300 of a flood' AS BLOB)) > 0
             BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
        )
        .expect("trigger");
    let second = run();
    assert_ne!(code(&second), 0, "{}{}", stdout(&second), stderr(&second));
    assert!(
        stdout(&second).trim().is_empty(),
        "answered: {}",
        stdout(&second)
    );
    assert!(
        stderr(&second).contains("the task's receipts could not be stored"),
        "{}",
        stderr(&second)
    );
}
