//! A submission is stored once: an admitted task's `task_submit` payload
//! is kept in its row of `tasks`, and its admission receipt's decision
//! input is stored as the bytes around it (`hcp_evidence`'s
//! `submission`), put back whole for every reader: packs, replay and the
//! store's check see the decision input the receipt signs, and a row
//! altered since is caught.

use super::*;

/// In the intent of the test's task: found wherever its payload is kept.
const MARKER: &str = "stored-once-marker-5be1";

/// How many rows of `table` hold `MARKER` in `column`.
fn holding(host: &Host, table: &str, column: &str) -> i64 {
    host.store
        .db()
        .query_row(
            &format!("SELECT COUNT(*) FROM {table} WHERE instr(CAST({column} AS BLOB), CAST(?1 AS BLOB)) > 0"),
            [MARKER],
            |r| r.get(0),
        )
        .expect("count")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admitted_submission_is_stored_once_and_its_decision_input_comes_back_whole() {
    let (_data, host) = lab();
    let mut m = example("document-analysis", "once-1");
    m["payload"]["intent"] = json!(format!("Analyze the paper ({MARKER})"));
    let s = submit(&host, &m, "harness-local-01");
    let task = s.task_id.clone().expect("task id");
    assert_eq!(run(&host, &s).await["type"], "task_completed");

    // Once: in the task's row, in no receipt block.
    assert_eq!(holding(&host, "tasks", "submit"), 1);
    assert_eq!(
        holding(&host, "receipt_blocks", "data"),
        0,
        "the admission's decision input does not keep the payload a second time"
    );

    // Every reader gets the decision input the receipt's hash names.
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    let (_, pack) = export_all(&host);
    assert!(verify(&pack).ok(), "{}", verify(&pack));
    let replayed = hcp_receipts::replay(&pack, &PepDecider::new(&pack));
    assert!(replayed.ok(), "{:?}", replayed.issues);
    assert_eq!(replayed.matched, pack.hosts[0].receipts.len());
    let admission = pack.hosts[0]
        .receipts
        .iter()
        .find(|r| r.task_id.as_deref() == Some(task.as_str()) && r.call == "gate.admission")
        .expect("the admission's receipt");
    let input = pack.hosts[0]
        .inputs
        .iter()
        .find(|i| i.seq == admission.seq)
        .expect("its decision input");
    assert_eq!(
        input.input["submit"]["intent"], m["payload"]["intent"],
        "the pack's decision input holds the payload whole"
    );

    // The row altered since: the decision input no longer comes back as
    // its receipt names it, and the check says so.
    let original: String = host
        .store
        .db()
        .query_row(
            "SELECT submit FROM tasks WHERE task_id = ?1",
            [&task],
            |r| r.get(0),
        )
        .expect("submit");
    let set = |text: &str| {
        host.store
            .db()
            .execute(
                "UPDATE tasks SET submit = ?2 WHERE task_id = ?1",
                [task.as_str(), text],
            )
            .expect("update");
    };
    set(&original.replace(MARKER, "altered-marker-0000000"));
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains(&format!("submission of task {task}"))),
        "{:?}",
        check.problems
    );
    assert!(evidence::export(&host.store, &Selection::All).is_err());
    set(&original);
    assert!(evidence::verify_store(&host.store).expect("check").ok());
}
