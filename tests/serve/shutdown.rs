//! `hcp serve` stopping with a task that outlives `--shutdown-grace`: the
//! task is stopped and settled (answered `task_failed` with a
//! `gate.abandoned` receipt) before the process exits 1, with no panic, and
//! the log says when the shutdown began and how it ended. Before, the run
//! was dropped with the runtime: its guest's timers panicked ("A Tokio 1.x
//! context was found, but it is being shutdown"), the task stayed
//! `running` until the next start, and the process exited 0.

use super::{LOCAL, Server, paths};
use hcp::engine::{Host, HostConfig};
use hcp::evidence::{ReceiptFilter, recent_receipts};
use hcp::store::TaskState;
use hcp_tests::{ManifestBuilder, SLEEPER};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// A data directory with the sleeper guest installed as
/// `document-analysis` 9.0.0 (granted `granted`, when given, so that its
/// tasks run on a thread of their own).
pub(super) fn sleeper_lab(granted: Option<&Path>) -> tempfile::TempDir {
    let data = tempfile::tempdir().expect("tempdir");
    let host = Host::open(paths(data.path()), HostConfig::default()).expect("host");
    let src = tempfile::tempdir().expect("tempdir");
    let mut manifest = ManifestBuilder::new("document-analysis", SLEEPER)
        .set("/capability/version", json!("9.0.0"))
        .set(
            "/capability/constraints",
            json!({"max_duration": "PT2M", "concurrent_limit": 4}),
        );
    if let Some(dir) = granted {
        manifest = manifest.set(
            "/grants/filesystem",
            json!([{"path": dir, "guest_path": "/work", "access": "read-only"}]),
        );
    }
    host.install_manifest(&manifest.write(src.path()))
        .expect("install the sleeper");
    data
}

/// `hcp serve` on `data` with a shutdown grace of `grace`.
fn start(data: &Path, grace: &str) -> Server {
    Server::start_with(data, &["--shutdown-grace", grace])
}

/// Submits a task that sleeps 60 s and waits until it runs.
pub(super) fn sleeping_task(server: &Server, message_id: &str) -> String {
    let message = json!({
        "hcp_version": "1.0",
        "message_id": message_id,
        "timestamp": "2025-01-15T08:30:00.000Z",
        "session_id": null,
        "type": "task_submit",
        "payload": {
            "capability": "document-analysis",
            "capability_version": "9.x",
            "caller_id": "harness-local-01",
            "intent": "Sleep past the server's shutdown grace",
            "inputs": {"ms": 60_000},
            "constraints": {"max_duration": "PT2M", "data_classification": "T1"}
        }
    });
    let (status, answer, task) = server.post("/v1/tasks", LOCAL, &message);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_accepted", "{answer}");
    let task = task.expect("task id");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, job) = server.get(&format!("/v1/tasks/{task}"), Some(LOCAL));
        if job["status"] == "running" {
            return task;
        }
        assert!(Instant::now() < deadline, "never ran: {job}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stopped_past_the_grace(granted: Option<&Path>) {
    let data = sleeper_lab(granted);
    let mut server = start(data.path(), "PT1S");
    let task = sleeping_task(&server, "slow-1");
    let signalled = Instant::now();
    server.signal("-TERM");
    let exit = server.wait_exit();
    let took = signalled.elapsed();
    let log = std::fs::read_to_string(data.path().join("serve.log")).expect("log");
    assert!(
        !log.contains("panicked") && !log.contains("being shutdown"),
        "a panic on shutdown:\n{log}"
    );
    // Tasks were stopped: the stop's answer is negative.
    assert_eq!(exit.code(), Some(1), "{exit:?}\n{log}");
    assert!(took < Duration::from_secs(20), "stopping took {took:?}");
    let began = log
        .find("shutdown began")
        .unwrap_or_else(|| panic!("{log}"));
    let ended = log
        .find("shutdown ended")
        .unwrap_or_else(|| panic!("{log}"));
    assert!(began < ended, "{log}");
    assert!(log[ended..].contains("interrupted=1"), "{log}");

    // The task is final now, not at the next start: failed with its
    // receipt, the session's receipts durable.
    let host = Host::open(paths(data.path()), HostConfig::default()).expect("host");
    let record = host.store.task(&task).expect("task").expect("exists");
    assert_eq!(record.state, TaskState::Failed, "{record:?}");
    let result = hcp_tests::wire(&record.result.expect("its answer"));
    assert_eq!(result["type"], "task_failed", "{result}");
    assert_eq!(
        result["payload"]["error_code"], "internal_error",
        "{result}"
    );
    assert!(
        result["payload"]["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("shutdown grace of PT1S")),
        "{result}"
    );
    let receipts = recent_receipts(&host.store, ReceiptFilter::Task(&task), 50).expect("receipts");
    let abandoned = receipts
        .iter()
        .find(|r| r.call == "gate.abandoned")
        .unwrap_or_else(|| panic!("no gate.abandoned receipt: {receipts:?}"));
    assert_eq!(abandoned.reason_code, "FAIL_CLOSED_ERROR");
    assert!(
        receipts.iter().any(|r| r.call == "session.open"),
        "{receipts:?}"
    );
    drop(host);
    // The next start finds nothing left running.
    let server = start(data.path(), "PT1S");
    let (status, answer) = server.get(&format!("/v1/tasks/{task}/result"), Some(LOCAL));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, result);
    let log = std::fs::read_to_string(data.path().join("serve.log")).expect("log");
    assert!(!log.contains("was running when the host stopped"), "{log}");
}

#[test]
fn a_task_that_outlives_the_shutdown_grace_is_stopped_and_settled() {
    stopped_past_the_grace(None);
}

/// The same for a task on a thread of its own (a capability granted a
/// directory runs on one): its run stops when its caller is gone.
#[test]
fn a_task_on_its_own_thread_that_outlives_the_grace_is_stopped_and_settled() {
    let granted = tempfile::tempdir().expect("tempdir");
    stopped_past_the_grace(Some(granted.path()));
}
