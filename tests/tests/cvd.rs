//! The CVD example on the simulated rig, through the sandbox: a monolayer run
//! with both artifacts; an envelope breach mid-run (rig shut down,
//! `safety_violation`, partial outputs, partial artifact, last checkpoint);
//! and a resubmission from that checkpoint that completes.

use hcp_contracts::manifest::{Manifest, SafetyEnvelope};
use hcp_contracts::message::ErrorCode;
use hcp_contracts::{DataClass, LoadOptions, RiskLevel};
use hcp_sandbox::pep::NoReceipts;
use hcp_sandbox::{
    MemoryStore, PreparedCapability, ResumeFrom, RunResult, Sandbox, SandboxConfig, TaskRequest,
    TaskRun,
};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn prepared() -> PreparedCapability {
    let path = format!("{REPO_ROOT}/plugins/cvd-material-synthesis/manifest.json");
    let manifest: Manifest =
        hcp_contracts::manifest::load(path.as_ref(), LoadOptions::default()).expect("manifest");
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(cache_dir()),
        pool_instances: 4,
        ..SandboxConfig::default()
    })
    .expect("sandbox");
    sandbox.prepare(Arc::new(manifest)).expect("prepare")
}

fn request(
    cap: &PreparedCapability,
    session: &str,
    inputs: Value,
    resume: Option<ResumeFrom>,
) -> TaskRequest {
    request_under(cap, session, inputs, resume, |_| {})
}

/// A request whose envelope `tighten` changes (as an operator's policy would).
fn request_under(
    cap: &PreparedCapability,
    session: &str,
    inputs: Value,
    resume: Option<ResumeFrom>,
    tighten: impl FnOnce(&mut SafetyEnvelope),
) -> TaskRequest {
    let path = format!("{REPO_ROOT}/plugins/cvd-material-synthesis/manifest.json");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
    let mut envelope: SafetyEnvelope =
        serde_json::from_value(manifest["safety_envelope"].clone()).expect("envelope");
    tighten(&mut envelope);
    let deadline = Duration::from_secs(60);
    TaskRequest {
        governor: cap.standalone_governor(
            &format!("task-{session}"),
            session,
            deadline,
            &envelope,
            Arc::new(NoReceipts),
        ),
        task_id: format!("task-{session}"),
        session_id: session.to_owned(),
        caller_id: "harness-alpha-001".into(),
        intent: "Synthesize monolayer MoS2 on SiO2/Si substrate and perform Raman spectroscopy characterization".into(),
        inputs,
        constraints: json!({"max_duration": "PT72H", "confidence_threshold": 0.95, "data_classification": "T2"}),
        context: None,
        resume,
        risk_level: RiskLevel::R4,
        data_classification: DataClass::T2,
        deadline,
        envelope,
        hid: None,
    }
}

fn seed_inputs(max: f64) -> Value {
    json!({
        "target_material": "MoS2",
        "substrate": "SiO2/Si",
        "temperature_range": { "min": 700, "max": max, "unit": "celsius" }
    })
}

fn completed(run: &TaskRun) -> &Value {
    match &run.result {
        RunResult::Completed { outputs, .. } => outputs,
        RunResult::Failed(f) => panic!("failed: {f:?}\nlog: {:?}", run.log.entries),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seeds_cvd_task_grows_a_monolayer_with_both_artifacts() {
    let cap = prepared();
    let store = Arc::new(MemoryStore::new());
    let run = cap
        .run(
            request(&cap, "session-a", seed_inputs(750.0), None),
            store.clone(),
        )
        .await;
    let outputs = completed(&run);
    assert_eq!(outputs["layer_count"], 1, "{outputs}");
    let distance = outputs["peak_distance"].as_f64().expect("distance");
    assert!((18.0..20.2).contains(&distance), "{distance}");
    assert!(outputs["confidence"].as_f64().expect("confidence") >= 0.95);
    assert_eq!(outputs["recipe"]["growth_temperature"], 725.0);
    let names: Vec<&str> = run.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["raman_raw.json", "growth_log.csv"]);
    let log = store
        .artifact("session-a", "growth_log.csv")
        .expect("growth log");
    let log = String::from_utf8(log).expect("utf8");
    assert!(log.starts_with("time_s,temperature_c,"));
    assert!(log.lines().count() > 20, "{log}");
    assert_eq!(run.checkpoints.len(), 5);
    assert!(run.risk_events.is_empty(), "{:?}", run.risk_events);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_breach_mid_run_shuts_the_rig_and_a_resubmission_resumes() {
    let cap = prepared();
    let store = Arc::new(MemoryStore::new());
    // Growing at 1050 °C (the middle of 900–1200) crosses the 1000 °C hard limit.
    let mut inputs = seed_inputs(1200.0);
    inputs["temperature_range"]["min"] = json!(900);
    let run = cap
        .run(request(&cap, "session-b", inputs, None), store.clone())
        .await;
    let RunResult::Failed(f) = &run.result else {
        panic!("completed: {:?}", run.result);
    };
    assert_eq!(f.code, ErrorCode::SafetyViolation);
    assert_eq!(
        f.message,
        "safety envelope breach: cvd-rig: temperature 1050 celsius is above the hard limit (max 1000 celsius)"
    );
    assert_eq!(f.phase.as_deref(), Some("ramp"));
    assert_eq!(
        f.partial_outputs
            .as_ref()
            .map(|p| p["completed_phases"].clone()),
        Some(json!(["preparation"]))
    );
    assert_eq!(run.checkpoints, ["ckpt-001"]);
    assert_eq!(
        run.artifacts
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>(),
        ["growth_log_partial.csv"]
    );
    assert!(
        run.risk_events
            .contains(&"breach:over_temperature".to_owned()),
        "{:?}",
        run.risk_events
    );
    assert!(
        run.log.entries.iter().any(|e| e
            .message
            .contains("emergency procedure immediate_shutdown ran")),
        "{:?}",
        run.log.entries
    );

    // Resubmitted within the envelope, from the last checkpoint.
    let resume = ResumeFrom {
        session_id: "session-b".into(),
        checkpoint: "ckpt-001".into(),
    };
    let run = cap
        .run(
            request(&cap, "session-c", seed_inputs(750.0), Some(resume)),
            store.clone(),
        )
        .await;
    let outputs = completed(&run);
    assert_eq!(outputs["layer_count"], 1);
    assert!(
        run.log
            .entries
            .iter()
            .any(|e| e.message.starts_with("resuming from ckpt-001")),
        "{:?}",
        run.log.entries
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_cannot_loosen_the_envelope_and_policy_can_tighten_it() {
    let cap = prepared();
    let store = Arc::new(MemoryStore::new());
    // An operator tightened the furnace to 720 °C: growing at 725 fails.
    let req = request_under(&cap, "session-d", seed_inputs(750.0), None, |e| {
        e.parameters
            .get_mut("temperature")
            .expect("temperature")
            .max = Some(720.0);
    });
    let run = cap.run(req, store).await;
    let RunResult::Failed(f) = &run.result else {
        panic!("completed under a tightened envelope");
    };
    assert_eq!(f.code, ErrorCode::SafetyViolation);
    assert!(f.message.contains("max 720 celsius"), "{}", f.message);
}
