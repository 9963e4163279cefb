//! The admission gate and the task lifecycle end to end, through the host's
//! engine: the shipped policies, the example capabilities installed in a
//! fresh data directory, SQLite on disk, real components on the simulated
//! rig. The gate's clock is pinned to a weekday morning (the shipped policy
//! raises CVD at night and at weekends).

mod slots;

use hcp::engine::{Auth, Host, HostConfig, HostPaths, Submission};
use hcp::store::TaskState;
use hcp_tests::{REPO_ROOT, cache_dir, wire};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Wednesday 2026-11-18, 11:00 at +01:00: attended hours.
fn weekday_morning() -> time::OffsetDateTime {
    time::macros::datetime!(2026-11-18 10:00 UTC)
}

struct Lab {
    data: tempfile::TempDir,
    host: Host,
}

fn lab_with(config: HostConfig) -> Lab {
    let data = tempfile::tempdir().expect("tempdir");
    let host = Host::open(
        HostPaths {
            data_dir: data.path().to_path_buf(),
            cache_dir: cache_dir(),
            policies_dir: Path::new(REPO_ROOT).join("policies"),
        },
        config,
    )
    .expect("host");
    for plugin in ["document-analysis", "cvd-material-synthesis"] {
        host.install_manifest(
            &Path::new(REPO_ROOT)
                .join("plugins")
                .join(plugin)
                .join("manifest.json"),
        )
        .expect("install");
    }
    Lab { data, host }
}

fn lab() -> Lab {
    lab_with(HostConfig {
        gate_clock: Some(weekday_morning()),
        ..HostConfig::default()
    })
}

fn example(plugin: &str) -> Value {
    let path = Path::new(REPO_ROOT)
        .join("plugins")
        .join(plugin)
        .join("examples/task_submit.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

fn doc_submit() -> Value {
    example("document-analysis")
}

/// Seed 001's CVD task_submit, verbatim.
fn cvd_submit() -> Value {
    example("cvd-material-synthesis")
}

fn with_id(mut m: Value, id: &str) -> Value {
    m["message_id"] = json!(id);
    m
}

impl Lab {
    /// A connection of its own to the data directory's database (for a
    /// test's triggers and edits), as another process would have.
    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.data.path().join("hcp.db")).expect("db")
    }

    fn submit(&self, m: &Value, caller: &str) -> Submission {
        self.host
            .submit(m, Auth::Transport(caller))
            .expect("submit")
    }

    async fn run(&self, s: &Submission) -> Value {
        assert!(s.runnable, "not runnable: {}", s.answer);
        let id = s.task_id.as_deref().expect("task id");
        wire(&self.host.run_task(id).await.expect("run").expect("ran"))
    }

    async fn approve(&self, s: &Submission) -> Value {
        let id = s.task_id.as_deref().expect("task id");
        let accepted = self
            .host
            .decide(
                id,
                true,
                Auth::Transport("operator-lab-01"),
                "operator-lab-01",
                "recipe within the lab's SOP",
            )
            .expect("approve");
        assert_eq!(
            wire(&accepted.answer)["type"],
            "task_accepted",
            "{}",
            accepted.answer
        );
        self.run(&accepted).await
    }

    fn install_variant(&self, plugin: &str, version: &str, grants: Option<Value>) -> PathBuf {
        let src = Path::new(REPO_ROOT)
            .join("plugins")
            .join(plugin)
            .join("manifest.json");
        let mut m: Value =
            serde_json::from_str(&std::fs::read_to_string(&src).expect("read")).expect("json");
        m["capability"]["version"] = json!(version);
        let component = src
            .parent()
            .expect("dir")
            .join(m["component"]["path"].as_str().expect("path"));
        m["component"]["path"] = json!(component.canonicalize().expect("component"));
        match grants {
            Some(g) => m["grants"] = g,
            None => {
                // ${manifest_dir} meant the plugin's own directory.
                let text = serde_json::to_string(&m).expect("json");
                let plugin_dir = src.parent().expect("dir").display().to_string();
                m = serde_json::from_str(&text.replace("${manifest_dir}", &plugin_dir))
                    .expect("json");
            }
        }
        let dir = self.data.path().join(format!("src-{version}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("manifest.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&m).expect("json")).expect("write");
        self.host.install_manifest(&path).expect("install variant");
        path
    }
}

fn rejection(s: &Submission) -> Value {
    assert_eq!(wire(&s.answer)["type"], "task_rejected", "{}", s.answer);
    wire(&s.answer)["payload"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seeds_document_analysis_from_a_pipeline_is_accepted_and_completes() {
    let lab = lab();
    let s = lab.submit(&doc_submit(), "harness-local-01");
    let accepted = &wire(&s.answer);
    assert_eq!(accepted["type"], "task_accepted", "{accepted}");
    assert_eq!(accepted["payload"]["risk_level"], "R1");
    assert_eq!(accepted["payload"]["data_classification"], "T1");
    let session = accepted["session_id"].as_str().expect("session");
    let token = accepted["payload"]["session_token"]
        .as_str()
        .expect("token");
    let claims = lab
        .host
        .tokens()
        .verify(token, Some(session))
        .expect("token verifies");
    assert_eq!(claims.sub, "harness-local-01");
    assert_eq!(claims.cap, "document-analysis");
    assert!(
        claims.exp <= claims.iat + 600,
        "exp beyond max_duration PT10M"
    );
    let done = lab.run(&s).await;
    assert_eq!(done["type"], "task_completed", "{done}");
    assert_eq!(done["session_id"], session);
    assert!(
        !done["payload"]["outputs"]["findings"]
            .as_array()
            .expect("findings")
            .is_empty()
    );
    let t = lab
        .host
        .store
        .task(s.task_id.as_deref().expect("id"))
        .expect("task")
        .expect("stored");
    assert_eq!(t.state, TaskState::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seeds_cvd_task_is_queued_approved_and_completes_with_both_artifacts() {
    let lab = lab();
    let s = lab.submit(&cvd_submit(), "harness-alpha-001");
    assert_eq!(
        wire(&s.answer)["status"],
        "pending_approval",
        "{}",
        s.answer
    );
    assert!(wire(&s.answer)["message"].as_str().expect("message").starts_with(
        "waiting for an operator's approval (cvd-material-synthesis@1.0.0 requires it at R3)"
    ));
    let id = s.task_id.as_deref().expect("id");
    let approval = lab.host.store.approval(id).expect("db").expect("approval");
    assert_eq!(
        approval.assessment["intent"],
        cvd_submit()["payload"]["intent"]
    );
    assert_eq!(
        approval.assessment["safety_envelope"]["parameters"]["temperature"]["max"],
        950.0
    );
    let done = lab.approve(&s).await;
    assert_eq!(done["type"], "task_completed", "{done}");
    let outputs = &done["payload"]["outputs"];
    assert_eq!(outputs["layer_count"], 1);
    for field in ["peak_distance", "layer_count", "confidence"] {
        assert!(outputs.get(field).is_some(), "{field}");
    }
    let names: Vec<&str> = done["payload"]["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .map(|a| a["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["raman_raw.json", "growth_log.csv"]);
    for a in done["payload"]["artifacts"].as_array().expect("artifacts") {
        let uri = a["uri"].as_str().expect("uri");
        let (stored, bytes, _) = lab.host.store.artifact(uri).expect("artifact");
        assert_eq!(bytes.len() as u64, stored.size_bytes);
        assert_eq!(a["checksum"], stored.checksum);
    }
    assert_eq!(
        done["payload"]["execution_summary"]["checkpoints_created"],
        5
    );
    let approval = lab.host.store.approval(id).expect("db").expect("approval");
    assert_eq!(approval.decision.as_deref(), Some("approved"));
    assert_eq!(approval.operator_id.as_deref(), Some("operator-lab-01"));
}

#[tokio::test(flavor = "multi_thread")]
async fn cvd_at_1200_from_an_r3_caller_is_rejected_with_a_suggestion() {
    let lab = lab();
    let mut m = cvd_submit();
    m["payload"]["caller_id"] = json!("harness-beta-002");
    m["payload"]["inputs"]["temperature_range"]["max"] = json!(1200);
    let s = lab.submit(&m, "harness-beta-002");
    let r = rejection(&s);
    assert_eq!(r["reason_code"], "risk_too_high");
    assert_eq!(r["assessed_risk_level"], "R4");
    assert_eq!(
        r["reason_message"],
        "Task parameters indicate R4 risk level, but caller harness-beta-002 is only authorized for R1-R3"
    );
    let suggestion = r["suggestion"].as_str().expect("suggestion");
    assert!(
        suggestion.contains("temperature_range.max") && suggestion.contains("800"),
        "{suggestion}"
    );
    // The pipeline caller may not ask for CVD at all.
    let mut m = cvd_submit();
    m["payload"]["caller_id"] = json!("harness-local-01");
    let s = lab.submit(&m, "harness-local-01");
    assert_eq!(rejection(&s)["reason_code"], "forbidden");
}

#[tokio::test(flavor = "multi_thread")]
async fn callers_inputs_and_data_classes_are_checked() {
    let lab = lab();
    let mut m = doc_submit();
    m["payload"]["caller_id"] = json!("harness-ghost");
    let s = lab.submit(&m, "harness-ghost");
    assert_eq!(rejection(&s)["reason_code"], "unauthorized");
    assert!(
        s.task_id.is_none(),
        "an unauthenticated caller recorded a task"
    );
    // Submitting as someone else than the message's caller.
    let s = lab.submit(&doc_submit(), "harness-alpha-001");
    assert_eq!(rejection(&s)["reason_code"], "unauthorized");
    // Bearer credentials: the shipped demo token, and a wrong one.
    let ok = lab
        .host
        .submit(
            &with_id(doc_submit(), "bearer-1"),
            Auth::Bearer("demo-token-harness-local-01-not-a-secret"),
        )
        .expect("submit");
    assert_eq!(wire(&ok.answer)["type"], "task_accepted", "{}", ok.answer);
    let bad = lab
        .host
        .submit(
            &with_id(doc_submit(), "bearer-2"),
            Auth::Bearer("demo-token-harness-alpha-001-not-a-secret"),
        )
        .expect("submit");
    assert_eq!(rejection(&bad)["reason_code"], "unauthorized");

    let mut m = with_id(doc_submit(), "bad-inputs");
    m["payload"]["inputs"]["analysis_type"] = json!("everything");
    let s = lab.submit(&m, "harness-local-01");
    let r = rejection(&s);
    assert_eq!(r["reason_code"], "invalid_input");
    assert_eq!(
        r["reason_message"],
        "inputs do not match the input_schema of document-analysis@1.0.0:\n  \
         /payload/inputs/analysis_type: \"everything\" is not one of \"key_findings_extraction\""
    );
    let mut m = with_id(doc_submit(), "t4");
    m["payload"]["constraints"]["data_classification"] = json!("T4");
    let s = lab.submit(&m, "harness-local-01");
    let r = rejection(&s);
    assert_eq!(r["reason_code"], "forbidden");
    assert!(
        r["reason_message"]
            .as_str()
            .expect("message")
            .contains("T4"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_breach_mid_run_fails_with_safety_violation_and_a_resubmission_resumes() {
    let lab = lab();
    let mut m = with_id(cvd_submit(), "breach-1");
    m["payload"]["inputs"]["temperature_range"] =
        json!({"min": 900, "max": 1100, "unit": "celsius"});
    let s = lab.submit(&m, "harness-alpha-001");
    assert_eq!(
        wire(&s.answer)["status"],
        "pending_approval",
        "{}",
        s.answer
    );
    let failed = lab.approve(&s).await;
    assert_eq!(failed["type"], "task_failed", "{failed}");
    let p = &failed["payload"];
    assert_eq!(p["error_code"], "safety_violation");
    assert_eq!(
        p["error_message"],
        "safety envelope breach: cvd-rig: temperature 1000 celsius is above the hard limit (max 950 celsius)"
    );
    assert_eq!(p["error_details"]["last_checkpoint"], "ckpt-001");
    assert_eq!(p["error_details"]["phase"], "ramp");
    assert_eq!(
        p["partial_outputs"]["completed_phases"],
        json!(["preparation"])
    );
    assert_eq!(p["artifacts"][0]["name"], "growth_log_partial.csv");
    assert!(
        p["execution_summary"]["risk_events"]
            .as_array()
            .expect("events")
            .contains(&json!("breach:over_temperature"))
    );

    let session = failed["session_id"].as_str().expect("session");
    let mut again = with_id(cvd_submit(), "breach-1-resume");
    again["payload"]["resume"] = json!({"session_id": session, "checkpoint": "ckpt-001"});
    let s = lab.submit(&again, "harness-alpha-001");
    assert_eq!(
        wire(&s.answer)["status"],
        "pending_approval",
        "{}",
        s.answer
    );
    let done = lab.approve(&s).await;
    assert_eq!(done["type"], "task_completed", "{done}");

    // A resume naming a checkpoint that does not exist is refused.
    let mut bogus = with_id(cvd_submit(), "bogus-resume");
    bogus["payload"]["resume"] = json!({"session_id": session, "checkpoint": "ckpt-009"});
    let s = lab.submit(&bogus, "harness-alpha-001");
    assert_eq!(
        rejection(&s)["reason_message"],
        format!("resume: session {session} has no checkpoint ckpt-009")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_past_max_duration_times_out_and_missing_fields_fail() {
    let lab = lab();
    let server = hcp_tests::hanging_server();
    let samples = Path::new(REPO_ROOT).join("plugins/document-analysis/samples");
    lab.install_variant(
        "document-analysis",
        "1.0.1",
        Some(json!({
            "filesystem": [{"path": samples, "guest_path": "/documents", "access": "read-only"}],
            "network": [{"host": "localhost", "port": server.port(), "allow_private": true}]
        })),
    );
    // max_duration counts from admission: a first task compiles the new
    // version, so that the slow one's time is its own (less what the
    // session token's whole seconds take: it expires at most max_duration
    // after the whole second it was issued in).
    let warm = lab.submit(&with_id(doc_submit(), "warm"), "harness-local-01");
    let out = lab.run(&warm).await;
    assert_eq!(out["type"], "task_completed", "{out}");
    let mut m = with_id(doc_submit(), "slow");
    m["payload"]["inputs"]["document_uri"] =
        json!(format!("http://localhost:{}/slow", server.port()));
    m["payload"]["constraints"]["max_duration"] = json!("PT2S");
    let s = lab.submit(&m, "harness-local-01");
    let out = lab.run(&s).await;
    assert_eq!(out["payload"]["error_code"], "timeout", "{out}");
    // The deadline counts from admission: the run gets what is left of
    // PT2S, and the message says so.
    let message = out["payload"]["error_message"].as_str().expect("message");
    assert!(
        message == "stopped at its deadline of PT2S while waiting in a host call"
            || (message.starts_with("stopped at its deadline of PT")
                && message.contains(
                    " while waiting in a host call (max_duration PT2S counts from admission; "
                )
                && message.ends_with(" of it passed before the task started)")),
        "{message}"
    );

    let mut m = with_id(doc_submit(), "missing-field");
    m["payload"]["expected_output"]["required_fields"] = json!(["findings", "summary"]);
    let s = lab.submit(&m, "harness-local-01");
    let out = lab.run(&s).await;
    assert_eq!(out["type"], "task_failed");
    assert_eq!(
        out["payload"]["error_message"],
        "outputs lack the required field summary (expected_output.required_fields)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn version_ranges_pick_the_highest_installed_match() {
    let lab = lab();
    lab.install_variant("document-analysis", "1.2.0", None);
    let mut m = with_id(doc_submit(), "range-1x");
    m["payload"]["capability_version"] = json!("1.x");
    let s = lab.submit(&m, "harness-local-01");
    let t = lab
        .host
        .store
        .task(s.task_id.as_deref().expect("id"))
        .expect("db")
        .expect("task");
    assert_eq!(t.version.as_deref(), Some("1.2.0"));
    let mut m = with_id(doc_submit(), "range-2");
    m["payload"]["capability_version"] = json!(">=2.0.0");
    let s = lab.submit(&m, "harness-local-01");
    let r = rejection(&s);
    assert_eq!(r["reason_code"], "capability_not_found");
    assert_eq!(
        r["reason_message"],
        "no installed document-analysis matches >=2.0.0 (installed: 1.0.0, 1.2.0)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_twice_is_one_task() {
    let lab = lab();
    let first = lab.submit(&doc_submit(), "harness-local-01");
    let second = lab.submit(&doc_submit(), "harness-local-01");
    assert!(second.duplicate);
    assert_eq!(first.task_id, second.task_id);
    assert_eq!(first.answer, second.answer);
    assert!(!second.runnable);
    let done = lab.run(&first).await;
    assert_eq!(done["type"], "task_completed");
    // Running it again returns the recorded answer, it does not run twice.
    let again = lab
        .host
        .run_task(first.task_id.as_deref().expect("id"))
        .await
        .expect("run");
    assert_eq!(again.as_ref().map(wire), Some(done));
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_expire_and_rejections_are_answered() {
    let hurried = lab_with(HostConfig {
        gate_clock: Some(weekday_morning()),
        approval_ttl: Duration::from_millis(1),
        ..HostConfig::default()
    });
    let s = hurried.submit(&cvd_submit(), "harness-alpha-001");
    std::thread::sleep(Duration::from_millis(20));
    let expired = hurried.host.expire_approvals().expect("expire");
    assert_eq!(expired, vec![s.task_id.clone().expect("id")]);
    let t = hurried
        .host
        .store
        .task(s.task_id.as_deref().expect("id"))
        .expect("db")
        .expect("task");
    assert_eq!(t.state, TaskState::Rejected);
    assert_eq!(
        wire(&t.answer.expect("answer"))["payload"]["reason_code"],
        "approval_expired"
    );

    let lab = lab();
    let s = lab.submit(&cvd_submit(), "harness-alpha-001");
    let id = s.task_id.as_deref().expect("id");
    // A caller cannot approve; the operator rejects with a reason.
    let err = lab
        .host
        .decide(
            id,
            true,
            Auth::Transport("harness-alpha-001"),
            "harness-alpha-001",
            "mine",
        )
        .expect_err("a caller approved");
    assert_eq!(
        err.to_string(),
        "harness-alpha-001 is not an operator and cannot approve tasks"
    );
    let r = lab
        .host
        .decide(
            id,
            false,
            Auth::Transport("operator-lab-01"),
            "operator-lab-01",
            "substrate not in stock",
        )
        .expect("reject");
    assert_eq!(
        wire(&r.answer)["payload"]["reason_code"],
        "approval_rejected"
    );
    assert_eq!(
        wire(&r.answer)["payload"]["reason_message"],
        "operator operator-lab-01 rejected the task: substrate not in stock"
    );
    let again = lab
        .host
        .decide(
            id,
            true,
            Auth::Transport("operator-lab-01"),
            "operator-lab-01",
            "changed my mind",
        )
        .expect_err("decided twice");
    assert!(
        again.to_string().contains("is not waiting for approval"),
        "{again}"
    );
}

/// An operator's decision and the approval's expiry, at the same moment
/// (`hcp serve` expires approvals every second while an operator decides
/// from the command line): one of them wins, and the task follows the one
/// that won. The operator's decision is made to land at the moment the
/// race lives: while the expiry's receipt is being stored, after the
/// expiry found the approval undecided. A trigger writes what `decide`
/// writes then (the decision, once; the task moved on to run).
#[tokio::test(flavor = "multi_thread")]
async fn an_approval_decided_as_it_expires_ends_one_way_only() {
    let hurried = lab_with(HostConfig {
        gate_clock: Some(weekday_morning()),
        approval_ttl: Duration::from_millis(1),
        ..HostConfig::default()
    });
    let s = hurried.submit(&cvd_submit(), "harness-alpha-001");
    let id = s.task_id.clone().expect("id");
    hurried
        .db()
        .execute_batch(
            "CREATE TRIGGER operator_decides AFTER INSERT ON receipt_marks
             WHEN NEW.call = 'gate.expiry'
             BEGIN
               UPDATE approvals SET decision = 'approved', operator_id = 'operator-lab-01',
                 reason = 'in time', decided_at = '2026-11-18T10:00:00.000Z'
                 WHERE task_id = NEW.task_id AND decision IS NULL;
               UPDATE tasks SET state = 'received'
                 WHERE task_id = NEW.task_id AND changes() = 1;
             END",
        )
        .expect("trigger");
    std::thread::sleep(Duration::from_millis(20));
    let expired = hurried.host.expire_approvals().expect("expire");
    let approval = hurried
        .host
        .store
        .approval(&id)
        .expect("db")
        .expect("approval");
    let task = hurried.host.store.task(&id).expect("db").expect("task");
    // The expiry found the approval first: it is expired, and the task
    // rejected with approval_expired; the operator's decision came too late.
    assert_eq!(
        (
            approval.decision.as_deref(),
            approval.operator_id.as_deref()
        ),
        (Some("expired"), None),
        "the task is {}",
        task.state.as_str()
    );
    assert_eq!(expired, vec![id.clone()]);
    assert_eq!(task.state, TaskState::Rejected);
    assert_eq!(
        wire(&task.answer.expect("answer"))["payload"]["reason_code"],
        "approval_expired"
    );
    // An operator deciding now is told so, and changes nothing.
    let late = hurried
        .host
        .decide(
            &id,
            true,
            Auth::Transport("operator-lab-01"),
            "operator-lab-01",
            "in time",
        )
        .expect_err("decided after the expiry");
    assert!(
        late.to_string().contains("not waiting for approval"),
        "{late}"
    );
    let again = hurried.host.store.task(&id).expect("db").expect("task");
    assert_eq!(again.state, TaskState::Rejected);
    // A second expiry (another process's) finds nothing left to expire.
    assert!(hurried.host.expire_approvals().expect("expire").is_empty());
}

/// An expiry claimed by a process that stopped before storing its receipt
/// and the rejection is finished by the next one, once the claim is older
/// than the lease; a fresh claim (a process still at it) is left alone.
#[tokio::test(flavor = "multi_thread")]
async fn an_expiry_left_unfinished_is_finished_by_the_next_process() {
    let hurried = lab_with(HostConfig {
        gate_clock: Some(weekday_morning()),
        approval_ttl: Duration::from_millis(1),
        ..HostConfig::default()
    });
    let s = hurried.submit(&cvd_submit(), "harness-alpha-001");
    let id = s.task_id.clone().expect("id");
    std::thread::sleep(Duration::from_millis(20));
    let db = hurried.db();
    let claim = |at: &str| {
        db.execute(
            "UPDATE approvals SET decision = 'expired', decided_at = ?2 WHERE task_id = ?1",
            rusqlite::params![id, at],
        )
        .expect("claim");
    };
    claim(&hcp_contracts::message::now_rfc3339());
    assert!(hurried.host.expire_approvals().expect("expire").is_empty());
    let waiting = hurried.host.store.task(&id).expect("db").expect("task");
    assert_eq!(waiting.state, TaskState::PendingApproval);
    claim("2000-01-01T00:00:00.000Z");
    assert_eq!(
        hurried.host.expire_approvals().expect("expire"),
        vec![id.clone()]
    );
    let task = hurried.host.store.task(&id).expect("db").expect("task");
    assert_eq!(task.state, TaskState::Rejected);
    assert_eq!(
        wire(&task.answer.expect("answer"))["payload"]["reason_code"],
        "approval_expired"
    );
}

/// A host that stops while it fails a task the gate never answered (after
/// the failure is written, before the task's `message_id` is freed) does
/// it again at its next start: the failure tells the caller to send the
/// same message again, and that message is then a new task, never a
/// duplicate of the failed one.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_failed_unanswered_frees_its_message_id_even_if_the_host_stopped_midway() {
    let lab = lab();
    let m = with_id(doc_submit(), "msg-unanswered");
    let hcp::store::Submitted::New(task) = lab
        .host
        .store
        .submit(
            "harness-local-01",
            "msg-unanswered",
            "document-analysis",
            &m,
        )
        .expect("submit")
    else {
        panic!("a duplicate");
    };
    let db = lab.db();
    db.execute_batch(
        "CREATE TRIGGER stop_here BEFORE UPDATE OF message_id ON tasks
         BEGIN SELECT RAISE(ABORT, 'the host stopped here'); END",
    )
    .expect("trigger");
    let err = lab.host.settle_unanswered().expect_err("stopped");
    assert!(
        format!("{err:#}").contains("the host stopped here"),
        "{err:#}"
    );
    db.execute_batch("DROP TRIGGER stop_here").expect("drop");
    // The next start.
    assert_eq!(
        lab.host.settle_unanswered().expect("settle"),
        vec![task.task_id.clone()]
    );
    let failed = lab
        .host
        .store
        .task(&task.task_id)
        .expect("db")
        .expect("task");
    assert_eq!(failed.state, TaskState::Failed);
    let again = lab.submit(&m, "harness-local-01");
    assert!(!again.duplicate, "{}", again.answer);
    assert_eq!(
        wire(&again.answer)["type"],
        "task_accepted",
        "{}",
        again.answer
    );
}

/// An operator's decision whose receipt cannot be stored (a full disk, or
/// the host stopping right there) leaves the task with a final answer,
/// never waiting for a decision already taken: before, the approval stayed
/// decided and the task `pending_approval`, which no expiry and no
/// operator could move again.
#[tokio::test(flavor = "multi_thread")]
async fn a_decision_whose_receipt_fails_leaves_the_task_answered_not_stuck() {
    let lab = lab();
    let s = lab.submit(&cvd_submit(), "harness-alpha-001");
    let id = s.task_id.clone().expect("id");
    let db = lab.db();
    db.execute_batch(
        "CREATE TRIGGER full_disk BEFORE INSERT ON receipt_marks WHEN NEW.call = 'gate.approval'
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    )
    .expect("trigger");
    lab.host
        .decide(
            &id,
            true,
            Auth::Transport("operator-lab-01"),
            "operator-lab-01",
            "looks safe",
        )
        .expect_err("the receipt was refused");
    let t = lab.host.store.task(&id).expect("db").expect("task");
    assert_eq!(
        t.state,
        TaskState::Failed,
        "the task is {}",
        t.state.as_str()
    );
    assert_eq!(
        wire(&t.result.expect("a final answer"))["payload"]["error_code"],
        "internal_error"
    );
}

/// A task the gate holds for an approval waits only with its approval
/// request: the admission's receipt, the task's state and the request are
/// one commit. Here the request cannot be written: the task fails with
/// its answer instead of waiting for an approval that does not exist.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_waits_for_an_approval_only_with_its_request() {
    let lab = lab();
    let db = lab.db();
    db.execute_batch(
        "CREATE TRIGGER full_disk BEFORE INSERT ON approvals
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    )
    .expect("trigger");
    let message = hcp::engine::TaskMessage::parse(cvd_submit()).expect("a task_submit");
    lab.host
        .submit_task(message, Auth::Transport("harness-alpha-001"))
        .expect_err("the request was refused");
    let tasks = lab.host.store.tasks(None, 10).expect("tasks");
    assert_eq!(tasks.len(), 1);
    let t = &tasks[0];
    assert_eq!(
        t.state,
        TaskState::Failed,
        "the task is {}",
        t.state.as_str()
    );
    assert!(lab.host.store.approval(&t.task_id).expect("db").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn t3_artifacts_are_sealed_at_rest() {
    let lab = lab();
    let mut m = with_id(cvd_submit(), "t3");
    m["payload"]["constraints"]["data_classification"] = json!("T3");
    let s = lab.submit(&m, "harness-alpha-001");
    let done = lab.approve(&s).await;
    assert_eq!(done["type"], "task_completed", "{done}");
    let raw = &done["payload"]["artifacts"][0];
    let hex = raw["checksum"]
        .as_str()
        .expect("checksum")
        .trim_start_matches("sha256:");
    assert!(lab.data.path().join("blobs/sealed").join(hex).exists());
    assert!(!lab.data.path().join("blobs/sha256").join(hex).exists());
    let (_, bytes, class) = lab
        .host
        .store
        .artifact(raw["uri"].as_str().expect("uri"))
        .expect("get");
    assert_eq!(class, hcp_contracts::DataClass::T3);
    assert!(serde_json::from_slice::<Value>(&bytes).is_ok());
}

/// The prepared capability is read once: the install hashes the component
/// it installs, a host start hashes each installed component, and no
/// admission, approval or run hashes it again.
#[tokio::test(flavor = "multi_thread")]
async fn a_component_is_hashed_once_per_install_and_once_per_host_start_never_per_task() {
    let lab = lab();
    let hashes = hcp_contracts::manifest::component_hashes(lab.data.path());
    assert_eq!(hashes, 2, "each install hashes its installed copy once");
    for i in 0..3 {
        let s = lab.submit(
            &with_id(doc_submit(), &format!("hash-doc-{i}")),
            "harness-local-01",
        );
        let done = lab.run(&s).await;
        assert_eq!(done["type"], "task_completed", "{done}");
    }
    let cvd = lab.submit(&cvd_submit(), "harness-alpha-001");
    assert_eq!(
        wire(&cvd.answer)["status"],
        "pending_approval",
        "{}",
        cvd.answer
    );
    let done = lab.approve(&cvd).await;
    assert_eq!(done["type"], "task_completed", "{done}");
    let hashes = hcp_contracts::manifest::component_hashes(lab.data.path());
    assert_eq!(hashes, 2, "no task hashes a component");
    // A host started on the same data directory hashes each installed
    // component once, then no more for its tasks.
    let Lab { data, host } = lab;
    drop(host);
    let host = Host::open(
        HostPaths {
            data_dir: data.path().to_path_buf(),
            cache_dir: cache_dir(),
            policies_dir: Path::new(REPO_ROOT).join("policies"),
        },
        HostConfig {
            gate_clock: Some(weekday_morning()),
            ..HostConfig::default()
        },
    )
    .expect("host again");
    let lab = Lab { data, host };
    let hashes = hcp_contracts::manifest::component_hashes(lab.data.path());
    assert_eq!(
        hashes, 4,
        "a host start hashes each installed component once"
    );
    let s = lab.submit(
        &with_id(doc_submit(), "hash-doc-after-start"),
        "harness-local-01",
    );
    let done = lab.run(&s).await;
    assert_eq!(done["type"], "task_completed", "{done}");
    let hashes = hcp_contracts::manifest::component_hashes(lab.data.path());
    assert_eq!(hashes, 4, "no task hashes a component");
}

/// One caller's admitted tasks waiting to run are bounded: past the bound
/// the next is rejected `resource_unavailable` (before, every task was
/// accepted and queued, so one caller's backlog grew the store and the
/// start list without end), another caller is not affected, and once one
/// has run the caller may submit again.
#[tokio::test]
async fn a_caller_has_a_bounded_number_of_tasks_waiting_to_run() {
    let lab = lab_with(HostConfig {
        gate_clock: Some(weekday_morning()),
        max_queued_per_caller: 3,
        ..HostConfig::default()
    });
    let mut queued = Vec::new();
    for i in 0..3 {
        let s = lab.submit(
            &with_id(doc_submit(), &format!("msg-backlog-{i}")),
            "harness-local-01",
        );
        assert_eq!(
            wire(&s.answer)["type"],
            "task_accepted",
            "{i}: {}",
            s.answer
        );
        queued.push(s);
    }
    let over = lab.submit(
        &with_id(doc_submit(), "msg-backlog-over"),
        "harness-local-01",
    );
    let refused = rejection(&over);
    assert_eq!(refused["reason_code"], "resource_unavailable", "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains("harness-local-01 has 3 admitted tasks waiting to run"),
        "{said}"
    );
    assert_eq!(
        lab.host
            .store
            .task(over.task_id.as_deref().expect("id"))
            .expect("task")
            .expect("recorded")
            .state,
        TaskState::Rejected
    );
    // Another caller's tasks are admitted as before.
    let mut m = with_id(doc_submit(), "msg-other");
    m["payload"]["caller_id"] = json!("harness-alpha-001");
    let other = lab.submit(&m, "harness-alpha-001");
    assert_eq!(
        wire(&other.answer)["type"],
        "task_accepted",
        "{}",
        other.answer
    );
    // One of the backlog runs; the caller's next task is admitted.
    let done = lab.run(&queued[0]).await;
    assert_eq!(done["type"], "task_completed", "{done}");
    let next = lab.submit(
        &with_id(doc_submit(), "msg-backlog-next"),
        "harness-local-01",
    );
    assert_eq!(
        wire(&next.answer)["type"],
        "task_accepted",
        "{}",
        next.answer
    );
}

/// A caller has at most `MAX_WAITING_PER_CALLER` tasks waiting for an
/// operator at once: the next is refused `resource_unavailable`, saying
/// why, until one of them is decided. Unbounded, one caller buried the
/// operators' queue (and their page) under as many approvals as it liked.
#[test]
fn a_caller_has_a_bounded_number_of_tasks_waiting_for_approval() {
    let lab = lab_with(HostConfig {
        gate_clock: Some(weekday_morning()),
        ..HostConfig::default()
    });
    let max = hcp::engine::MAX_WAITING_PER_CALLER;
    let mut first = None;
    for i in 0..max {
        let s = lab.submit(
            &with_id(cvd_submit(), &format!("msg-waiting-{i}")),
            "harness-alpha-001",
        );
        assert_eq!(
            wire(&s.answer)["status"],
            "pending_approval",
            "{i}: {}",
            s.answer
        );
        first.get_or_insert(s.task_id.clone().expect("id"));
    }
    let over = lab.submit(
        &with_id(cvd_submit(), "msg-waiting-over"),
        "harness-alpha-001",
    );
    assert_eq!(
        wire(&over.answer)["type"],
        "task_rejected",
        "{}",
        over.answer
    );
    assert_eq!(
        wire(&over.answer)["payload"]["reason_code"],
        "resource_unavailable",
        "{}",
        over.answer
    );
    let said = over.answer.to_string();
    assert!(
        said.contains(&format!(
            "harness-alpha-001 has {max} tasks waiting for an operator's approval"
        )),
        "{said}"
    );
    // One decided, the next waits again.
    let first = first.expect("a first task");
    lab.host
        .decide(
            &first,
            false,
            Auth::Transport("operator-lab-01"),
            "operator-lab-01",
            "not today",
        )
        .expect("reject");
    let next = lab.submit(
        &with_id(cvd_submit(), "msg-waiting-next"),
        "harness-alpha-001",
    );
    assert_eq!(
        wire(&next.answer)["status"],
        "pending_approval",
        "{}",
        next.answer
    );
    assert!(
        wire(&next.answer)["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("waiting for an operator's approval")),
        "{}",
        next.answer
    );
}
