//! Receipts stay bounded whatever a guest sends: `hcp run` of a guest that
//! keeps making large log calls after its `bytes` budget is spent ends with
//! an answer (the guest is stopped), the store holds a bounded prefix of
//! each call, and the pack still verifies and replays.

use super::{Hcp, code, parse_answer, stderr, stdout, write_json};
use hcp_contracts::message::MessageType;
use hcp_tests::{ManifestBuilder, REPO_ROOT};
use serde_json::{Value, json};
use std::path::Path;

/// Bytes of the data directory's database files.
fn db_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("data dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("hcp.db"))
        .map(|e| e.metadata().expect("metadata").len())
        .sum()
}

#[test]
fn large_calls_after_the_budget_is_spent_are_bounded_and_stopped() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    // The repo's policies, with a 1 MiB `bytes` budget.
    let policies = tmp.path().join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    for entry in std::fs::read_dir(format!("{REPO_ROOT}/policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), policies.join(entry.file_name())).expect("copy");
    }
    let budgets = policies.join("budgets.json");
    let mut b: Value =
        serde_json::from_str(&std::fs::read_to_string(&budgets).expect("read")).expect("json");
    b["defaults"]["bytes"] = json!(1 << 20);
    write_json(&policies, "budgets.json", &b);
    // A directory of its own: not the one holding the policies (no grant
    // may reach the host's own directories).
    let granted = tmp.path().join("granted");
    std::fs::create_dir(&granted).expect("mkdir");
    let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE)
        .set(
            "/grants/filesystem",
            json!([{"path": granted, "guest_path": "/data", "access": "read-only"}]),
        )
        .set("/grants/instruments", json!(["cvd-rig"]))
        .set("/grants/network", json!([{"host": "localhost", "port": 9}]))
        .set("/limits/memory_bytes", json!(64 << 20))
        .write(tmp.path());
    let mut submit: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json"
        ))
        .expect("example"),
    )
    .expect("json");
    submit["payload"]["capability"] = json!("probe");
    // One large call within the budget (allowed, recorded bounded), then
    // 40 calls of 2 MiB, each over it.
    submit["payload"]["inputs"] = json!({"action": "each", "actions": [
        {"action": "big_logs", "count": 1, "size": 600_000},
        {"action": "big_logs", "count": 40, "size": 2 << 20}
    ]});
    submit["payload"]
        .as_object_mut()
        .expect("payload")
        .remove("expected_output");
    let input = write_json(tmp.path(), "submit.json", &submit);
    let out = hcp.run(&[
        "run",
        "-q",
        "--policies",
        policies.to_str().expect("utf8"),
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let answer = parse_answer(&out);
    assert_eq!(answer.kind, MessageType::TaskFailed, "{}", stdout(&out));
    assert_eq!(answer.payload["error_code"], "safety_violation");
    assert_eq!(
        answer.payload["error_message"],
        "stopped after 16 host calls in a row were denied for a spent budget (BUDGET_EXCEEDED): \
         log.write (2097152 bytes): the session may move 1048576 bytes through host calls, \
         600000 are used (budgets.bytes)"
    );
    // 80 MiB of arguments went through the PEP; the store keeps a prefix of
    // each call (at most 4 KiB of text), not the calls.
    let stored = db_bytes(hcp.data.path());
    assert!(stored < 4 << 20, "the database holds {stored} bytes");

    // The pack verifies and replays: every verdict re-derived, the bounded
    // ones from the recorded facts of the whole call.
    let err = stderr(&out);
    let task = err
        .lines()
        .find_map(|l| l.strip_prefix("receipts: task "))
        .and_then(|l| l.split_once(", session "))
        .map(|(t, _)| t.to_owned())
        .unwrap_or_else(|| panic!("no receipts line in:\n{err}"));
    let pack = tmp.path().join("pack.tar");
    let o = hcp.run(&[
        "evidence",
        "export",
        "--task",
        &task,
        "-o",
        pack.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = hcp.run(&["evidence", "verify", pack.to_str().expect("utf8")]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = hcp.run(&["replay", pack.to_str().expect("utf8")]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
}

/// `hcp submit` goes through the same submission limits as HTTP and
/// AMQP (`budgets.json` `submissions`), and the bytes a caller's messages
/// took are read back from the store by each new process: once a caller's
/// day is spent, the next submission is refused `rate_limited`, in a
/// process that never saw the earlier ones.
#[test]
fn the_command_line_counts_a_callers_recorded_bytes_across_processes() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let policies = tmp.path().join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    for entry in std::fs::read_dir(format!("{REPO_ROOT}/policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), policies.join(entry.file_name())).expect("copy");
    }
    let budgets = policies.join("budgets.json");
    let mut b: Value =
        serde_json::from_str(&std::fs::read_to_string(&budgets).expect("read")).expect("json");
    b["submissions"] = json!({"defaults": {"stored_bytes_per_day": 8192}});
    write_json(&policies, "budgets.json", &b);
    let mut refused = 0;
    let answer = loop {
        let mut submit = super::seed_submit();
        submit["message_id"] = json!(format!("m-{refused}"));
        // No such capability is installed: refused, and recorded.
        submit["payload"]["capability"] = json!("not-installed");
        let input = write_json(tmp.path(), "submit.json", &submit);
        let out = hcp.run(&[
            "submit",
            "--policies",
            policies.to_str().expect("utf8"),
            "--as",
            "harness-local-01",
            input.to_str().expect("utf8"),
        ]);
        assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
        let answer = parse_answer(&out);
        assert_eq!(answer.kind, MessageType::TaskRejected, "{}", stdout(&out));
        if answer.payload["reason_code"] == "rate_limited" {
            break answer;
        }
        assert_eq!(answer.payload["reason_code"], "capability_not_found");
        refused += 1;
        assert!(refused < 12, "no rate_limited after {refused} submissions");
    };
    // About 1 KiB each: several fit in 8 KiB, then the day is spent.
    assert!(refused >= 3, "{refused}");
    let message = answer.payload["reason_message"].as_str().expect("message");
    assert!(message.contains("stored_bytes_per_day (8192)"), "{message}");
    assert!(
        answer.payload["suggestion"]
            .as_str()
            .is_some_and(|s| s.starts_with("submit again in ")),
        "{}",
        answer.payload
    );
}
