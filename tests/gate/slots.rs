//! Session slots end to end through the engine: `budgets.json`'s
//! `concurrent_sessions` of a caller and the declaration's
//! `concurrent_limit` bound the sessions running at once; a task without a
//! slot stays `queued`; a task whose session ended while it waited fails
//! `timeout` with a `session.token` receipt instead of running.

use super::weekday_morning;
use hcp::engine::{Auth, Host, HostConfig, HostPaths, job_status};
use hcp::evidence::{ReceiptFilter, recent_receipts};
use hcp::store::TaskState;
use hcp_tests::{ManifestBuilder, REPO_ROOT, SLEEPER, cache_dir, wire};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const CALLER: &str = "harness-local-01";

/// A host whose policies are the shipped ones with `harness-local-01`
/// limited to `caller_sessions`, and the sleeper guest installed as
/// `document-analysis` 9.0.0 with `concurrent_limit`.
fn probe_lab(caller_sessions: u32, concurrent_limit: u32) -> (tempfile::TempDir, Arc<Host>) {
    let data = tempfile::tempdir().expect("tempdir");
    let policies = data.path().join("policies");
    std::fs::create_dir_all(&policies).expect("mkdir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), policies.join(entry.file_name())).expect("copy");
    }
    let budgets_path = policies.join("budgets.json");
    let mut budgets: Value =
        serde_json::from_str(&std::fs::read_to_string(&budgets_path).expect("read")).expect("json");
    budgets["callers"][CALLER]["concurrent_sessions"] = json!(caller_sessions);
    std::fs::write(&budgets_path, budgets.to_string()).expect("write");
    let host = Host::open(
        HostPaths {
            data_dir: data.path().join("data"),
            cache_dir: cache_dir(),
            policies_dir: policies,
        },
        HostConfig {
            gate_clock: Some(weekday_morning()),
            ..HostConfig::default()
        },
    )
    .expect("host");
    let src = data.path().join("sleeper-src");
    std::fs::create_dir_all(&src).expect("mkdir");
    let manifest = ManifestBuilder::new("document-analysis", SLEEPER)
        .set("/capability/version", json!("9.0.0"))
        .set(
            "/capability/constraints",
            json!({"max_duration": "PT30S", "concurrent_limit": concurrent_limit}),
        )
        .write(&src);
    host.install_manifest(&manifest)
        .expect("install the sleeper");
    (data, Arc::new(host))
}

fn submit(host: &Host, id: &str, action: Value, max_duration: &str) -> String {
    let message = json!({
        "hcp_version": "1.0",
        "message_id": id,
        "timestamp": "2025-01-15T08:30:00.000Z",
        "session_id": null,
        "type": "task_submit",
        "payload": {
            "capability": "document-analysis",
            "capability_version": "9.x",
            "caller_id": CALLER,
            "intent": "Probe the host's session slots",
            "inputs": action,
            "constraints": {"max_duration": max_duration, "data_classification": "T1"}
        }
    });
    let s = host
        .submit(&message, Auth::Transport(CALLER))
        .expect("submit");
    assert_eq!(wire(&s.answer)["type"], "task_accepted", "{}", s.answer);
    assert!(s.runnable, "{}", s.answer);
    s.task_id.expect("task id")
}

fn state(host: &Host, id: &str) -> TaskState {
    host.store.task(id).expect("task").expect("exists").state
}

/// Waits until the task is `running`.
async fn until_running(host: &Host, id: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while state(host, id) != TaskState::Running {
        assert!(
            std::time::Instant::now() < deadline,
            "task {id} never started: {:?}",
            state(host, id)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn running(host: &Host) -> usize {
    host.store
        .tasks(Some(TaskState::Running), usize::MAX)
        .expect("tasks")
        .len()
}

/// Starts `run_task` of every id at once; returns each one's answer (`None`:
/// it stayed queued) and the most tasks seen running at the same time.
async fn run_all(host: &Arc<Host>, ids: &[String]) -> (Vec<Option<Value>>, usize) {
    let runs: Vec<_> = ids
        .iter()
        .map(|id| {
            let (host, id) = (host.clone(), id.clone());
            tokio::spawn(async move { host.run_task(&id).await.expect("run") })
        })
        .collect();
    let watcher = {
        let host = host.clone();
        tokio::spawn(async move {
            let mut most = 0;
            for _ in 0..80 {
                most = most.max(running(&host));
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            most
        })
    };
    let mut answers = Vec::new();
    for run in runs {
        answers.push(run.await.expect("join").as_ref().map(wire));
    }
    let most = watcher.await.expect("join").max(running(host));
    (answers, most)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_runs_at_most_its_concurrent_sessions_and_the_rest_wait_queued() {
    let (_data, host) = probe_lab(2, 8);
    let ids: Vec<String> = (0..4)
        .map(|i| submit(&host, &format!("slots-{i}"), json!({"ms": 1500}), "PT30S"))
        .collect();
    let (answers, most) = run_all(&host, &ids).await;
    assert!(
        most <= 2,
        "{most} sessions of {CALLER} ran at once; its limit is 2"
    );
    let ran: Vec<&Value> = answers.iter().flatten().collect();
    assert_eq!(ran.len(), 2, "answers: {answers:?}");
    for answer in ran {
        assert_eq!(answer["type"], "task_completed", "{answer}");
    }
    let waiting: Vec<&String> = ids
        .iter()
        .zip(&answers)
        .filter(|(_, a)| a.is_none())
        .map(|(id, _)| id)
        .collect();
    for id in &waiting {
        let task = host.store.task(id).expect("task").expect("exists");
        assert_eq!(task.state, TaskState::Queued);
        assert_eq!(wire(&job_status(&task, "waiting"))["status"], "queued");
    }
    // Once the first two are done, the others take their slots.
    let (answers, most) = run_all(&host, &waiting.into_iter().cloned().collect::<Vec<_>>()).await;
    assert!(most <= 2);
    for answer in &answers {
        let answer = answer.as_ref().expect("ran");
        assert_eq!(answer["type"], "task_completed", "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_waiting_for_the_concurrent_limit_is_queued_not_running() {
    let (_data, host) = probe_lab(8, 1);
    let first = submit(&host, "limit-1", json!({"ms": 1500}), "PT30S");
    let second = submit(&host, "limit-2", json!({"ms": 0}), "PT30S");
    let run = {
        let (host, first) = (host.clone(), first.clone());
        tokio::spawn(async move { host.run_task(&first).await.expect("run") })
    };
    until_running(&host, &first).await;
    let waited = host.run_task(&second).await.expect("run");
    assert_eq!(
        waited, None,
        "the second task ran beside the first: concurrent_limit is 1"
    );
    assert_eq!(state(&host, &second), TaskState::Queued);
    let done = wire(&run.await.expect("join").expect("ran"));
    assert_eq!(done["type"], "task_completed", "{done}");
    let answer = wire(&host.run_task(&second).await.expect("run").expect("ran"));
    assert_eq!(answer["type"], "task_completed", "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_whose_session_expired_while_queued_fails_timeout_with_its_receipt() {
    let (_data, host) = probe_lab(8, 1);
    let slow = submit(&host, "expiry-1", json!({"ms": 3500}), "PT30S");
    let run = {
        let (host, slow) = (host.clone(), slow.clone());
        tokio::spawn(async move { host.run_task(&slow).await.expect("run") })
    };
    until_running(&host, &slow).await;
    // Its session lasts one second from admission; the slot is taken.
    let late = submit(&host, "expiry-2", json!({"ms": 0}), "PT1S");
    let waiting = {
        let (host, late) = (host.clone(), late.clone());
        tokio::spawn(async move { host.run_task(&late).await.expect("run") })
    };
    let first_try = waiting.await.expect("join");
    assert_eq!(
        first_try, None,
        "the task ran while the slot was taken: {first_try:?}"
    );
    let done = wire(&run.await.expect("join").expect("ran"));
    assert_eq!(done["type"], "task_completed", "{done}");
    // The slot is free now, but the session ended while the task waited.
    let answer = wire(&host.run_task(&late).await.expect("run").expect("answered"));
    assert_eq!(answer["type"], "task_failed", "{answer}");
    assert_eq!(answer["payload"]["error_code"], "timeout", "{answer}");
    let message = answer["payload"]["error_message"]
        .as_str()
        .expect("message");
    assert!(
        message.starts_with("the session ended before the task could run: "),
        "{message}"
    );
    assert_eq!(state(&host, &late), TaskState::Failed);
    let receipts = recent_receipts(&host.store, ReceiptFilter::Task(&late), 50).expect("receipts");
    let token = receipts
        .iter()
        .find(|r| r.call == "session.token")
        .unwrap_or_else(|| panic!("no session.token receipt: {receipts:?}"));
    assert_eq!(token.reason_code, "DELEGATION_INVALID");
    assert!(
        !receipts.iter().any(|r| r.call == "session.open"),
        "the session opened: {receipts:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fractional_max_duration_is_the_deadline_to_the_millisecond() {
    let (_data, host) = probe_lab(8, 4);
    let id = submit(&host, "fraction-1", json!({"ms": 10_000}), "PT1.5S");
    let task = host.store.task(&id).expect("task").expect("exists");
    let accepted = wire(&task.answer.expect("accepted"));
    assert_eq!(
        accepted["payload"]["constraints"]["max_duration"], "PT1.5S",
        "{accepted}"
    );
    let answer = wire(&host.run_task(&id).await.expect("run").expect("ran"));
    assert_eq!(answer["payload"]["error_code"], "timeout", "{answer}");
    let message = answer["payload"]["error_message"]
        .as_str()
        .expect("message");
    // Counted from admission: a little less than 1.5 s is left when it
    // starts, never the whole second below it.
    let given = message
        .strip_prefix("stopped at its deadline of ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|d| hcp_contracts::IsoDuration::parse(d).ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!(
        given.get() > Duration::from_millis(1000) && given.get() <= Duration::from_millis(1500),
        "{message}"
    );
}

/// A task whose session ended while it waited is never final without its
/// final answer: the refusal's receipt and the failure with that answer
/// are one commit. Here the store refuses the answer's write (a full
/// disk): the task stays queued, and is refused again once the store
/// takes writes. (Before, the task was made `failed` first, with no
/// answer; an AMQP outbox or an event stream reading it then sent its
/// `task_accepted` as its last word, for good once the write failed.)
#[tokio::test(flavor = "multi_thread")]
async fn a_task_refused_for_its_ended_session_is_never_final_without_its_answer() {
    let (data, host) = probe_lab(8, 1);
    let late = submit(&host, "expiry-refused", json!({"ms": 0}), "PT1S");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let db = rusqlite::Connection::open(data.path().join("data").join("hcp.db")).expect("db");
    db.execute_batch(
        "CREATE TRIGGER full_disk BEFORE UPDATE OF result ON tasks
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    )
    .expect("trigger");
    let _ = host.run_task(&late).await;
    let t = host.store.task(&late).expect("db").expect("task");
    assert!(
        !t.state.is_final() || t.result.is_some(),
        "the task is {} without a final answer",
        t.state.as_str()
    );
    db.execute_batch("DROP TRIGGER full_disk").expect("drop");
    host.store.settle_pending();
    let answer = match host.run_task(&late).await.expect("run") {
        Some(answer) => answer,
        None => host
            .store
            .task(&late)
            .expect("db")
            .expect("task")
            .result
            .expect("a final answer"),
    };
    let answer = wire(&answer);
    assert_eq!(answer["type"], "task_failed", "{answer}");
    assert_eq!(state(&host, &late), TaskState::Failed);
}

/// Another host process on the same data directory (`hcp serve` starting
/// while `hcp tasks run-queued` or `hcp approvals approve` runs a task)
/// fails at its start only the tasks whose runner is gone: a task a live
/// process runs goes on, keeps its equipment, and ends as it ran, and a
/// runner of the starting host leaves it alone. (Before,
/// the starting host failed it "the host stopped while the task was
/// running", freed its equipment, and the task's own answer was lost.)
#[tokio::test(flavor = "multi_thread")]
async fn a_starting_host_leaves_alone_a_task_another_process_runs() {
    let (data, host) = probe_lab(8, 1);
    let slow = submit(&host, "alive-1", json!({"ms": 1500}), "PT30S");
    let run = {
        let (host, slow) = (host.clone(), slow.clone());
        tokio::spawn(async move { host.run_task(&slow).await.expect("run") })
    };
    until_running(&host, &slow).await;
    let other = Host::open(
        HostPaths {
            data_dir: data.path().join("data"),
            cache_dir: cache_dir(),
            policies_dir: data.path().join("policies"),
        },
        HostConfig {
            gate_clock: Some(weekday_morning()),
            ..HostConfig::default()
        },
    )
    .expect("a second host");
    assert_eq!(other.recover().expect("recover"), Vec::<String>::new());
    assert_eq!(state(&host, &slow), TaskState::Running);
    // A runner there that listed it as queued just before (`hcp tasks
    // run-queued`) leaves it, and goes on with the next (it failed, and
    // the command stopped there).
    assert_eq!(other.run_task(&slow).await.expect("run"), None);
    let done = wire(&run.await.expect("join").expect("ran"));
    assert_eq!(done["type"], "task_completed", "{done}");
    assert_eq!(state(&host, &slow), TaskState::Completed);
    // Once it ended, nothing is left to recover.
    assert_eq!(other.recover().expect("recover"), Vec::<String>::new());
}

/// `hcp remove` leaves a version with unfinished tasks installed (a queued
/// task would wait for good, a running guest lose its files), and a task
/// whose version went while it was queued (removed as it was admitted)
/// fails `resource_unavailable` instead of waiting for good.
#[tokio::test(flavor = "multi_thread")]
async fn a_version_with_unfinished_tasks_stays_and_a_task_of_a_removed_one_fails() {
    let (_data, host) = probe_lab(8, 1);
    let queued = submit(&host, "remove-1", json!({"ms": 0}), "PT30S");
    let err = hcp::install::remove(&host.store, "document-analysis", "9.0.0")
        .expect_err("removed under its queued task");
    assert!(
        format!("{err:#}").contains(&format!(
            "document-analysis@9.0.0 has 1 unfinished task(s): {queued} (queued)"
        )),
        "{err:#}"
    );
    host.store
        .record_removal("document-analysis", "9.0.0")
        .expect("removed under it");
    let answer = host
        .run_task(&queued)
        .await
        .expect("run")
        .expect("answered");
    let answer = wire(&answer);
    assert_eq!(answer["type"], "task_failed", "{answer}");
    assert_eq!(
        answer["payload"]["error_code"], "resource_unavailable",
        "{answer}"
    );
    assert_eq!(state(&host, &queued), TaskState::Failed);
}
