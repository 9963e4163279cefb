//! What the task benches share (each includes this file as `mod common`):
//! the seed's document-analysis `task_submit`, a host with that capability
//! installed, and one task over HTTP from submission to final answer.

#![allow(dead_code, reason = "each bench uses part of it")]

use hcp::engine::{Host, HostConfig, HostPaths};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// harness-local-01's demo bearer token (policies/callers.json).
pub(crate) const LOCAL: &str = "demo-token-harness-local-01-not-a-secret";

/// The seed's document-analysis `task_submit`, with `message_id`.
pub(crate) fn example(message_id: &str) -> Value {
    let path = Path::new(REPO_ROOT).join("plugins/document-analysis/examples/task_submit.json");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read example")).expect("json");
    m["message_id"] = json!(message_id);
    m
}

/// A host on `data` with the repository's policies (or `policies`) and
/// document-analysis installed.
pub(crate) fn open_host_with(data: &Path, policies: &Path) -> Arc<Host> {
    let host = Host::open(
        HostPaths {
            data_dir: data.to_path_buf(),
            cache_dir: cache_dir(),
            policies_dir: policies.to_path_buf(),
        },
        HostConfig::default(),
    )
    .expect("open host");
    host.install_manifest(&Path::new(REPO_ROOT).join("plugins/document-analysis/manifest.json"))
        .expect("install document-analysis");
    Arc::new(host)
}

/// [`open_host_with`] the repository's policies.
pub(crate) fn open_host(data: &Path) -> Arc<Host> {
    open_host_with(data, &Path::new(REPO_ROOT).join("policies"))
}

/// An HTTP client whose connection is kept alive.
pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        // TCP_NODELAY (ureq's default, said here): the server sets it on
        // its side too.
        .no_delay(true)
        // A bound on each phase of a request but the name's resolution, not
        // one on the whole request: with a global (or a resolution) timeout,
        // ureq resolves the address on a thread it starts for the purpose,
        // at every request, kept-alive connection or not (a thread started
        // and joined per request, even for 127.0.0.1: a client's cost that
        // the host's row would carry). Without one, an address literal is
        // parsed in place.
        .timeout_connect(Some(Duration::from_secs(120)))
        .timeout_send_request(Some(Duration::from_secs(120)))
        .timeout_send_body(Some(Duration::from_secs(120)))
        .timeout_recv_response(Some(Duration::from_secs(120)))
        .timeout_recv_body(Some(Duration::from_secs(120)))
        .build()
        .into()
}

/// One task over HTTP as a caller runs it: `POST /v1/tasks`, then the
/// task's event stream until its result, which must be `task_completed`.
pub(crate) fn http_task(agent: &ureq::Agent, base: &str, message: &Value) {
    let resp = agent
        .post(format!("{base}/v1/tasks"))
        .header("Authorization", format!("Bearer {LOCAL}"))
        .header("Content-Type", "application/json")
        .send(message.to_string().as_bytes())
        .expect("POST");
    assert_eq!(resp.status().as_u16(), 200);
    let id = resp
        .headers()
        .get("x-hcp-task-id")
        .and_then(|v| v.to_str().ok())
        .expect("task id")
        .to_owned();
    drop(resp.into_body().read_to_string());
    let mut events = agent
        .get(format!("{base}/v1/tasks/{id}/events"))
        .header("Authorization", format!("Bearer {LOCAL}"))
        .call()
        .expect("events");
    let reader = std::io::BufReader::new(events.body_mut().as_reader());
    let mut completed = false;
    let mut result_next = false;
    // Read to the stream's end (the host ends it after the result), as a
    // client that keeps its connection for the next request does.
    for line in reader.lines() {
        let line = line.expect("event line");
        if result_next {
            completed = line.contains("\"task_completed\"");
        }
        result_next = line == "event: result";
    }
    assert!(completed, "task {id} did not complete");
}

/// One task in process as `hcp serve` runs it: `Host::submit` on the
/// blocking pool, which must answer `task_accepted`, then `Host::run_task`,
/// tried again while the task waits for a session slot (`hcp serve`'s
/// maintenance loop starts it later). The time to `task_accepted`, the
/// time to the final answer, and the answer, which must be
/// `task_completed`.
pub(crate) async fn in_process_task(
    host: &Arc<Host>,
    message: Value,
) -> (Duration, Duration, hcp::engine::Answer) {
    let t0 = std::time::Instant::now();
    let h = host.clone();
    let submission =
        tokio::task::spawn_blocking(move || h.submit(&message, hcp::engine::Auth::Bearer(LOCAL)))
            .await
            .expect("join")
            .expect("submit");
    assert!(
        matches!(submission.answer, hcp::engine::Answer::Accepted(_)),
        "{}",
        submission.answer
    );
    let submitted = t0.elapsed();
    let id = submission.task_id.expect("task id");
    let answer = loop {
        match host.run_task(&id).await.expect("run") {
            Some(answer) => break answer,
            None => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    };
    let wall = t0.elapsed();
    assert!(
        matches!(answer, hcp::engine::Answer::Completed(_)),
        "{answer}"
    );
    (submitted, wall, answer)
}

/// The multi-threaded runtime the benches run their hosts and clients on.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The median of per-round figures.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The lowest and highest of per-round figures.
pub(crate) fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)))
}
