//! Setup shared by the sandbox benchmarks.

use hcp_contracts::{DataClass, RiskLevel};
use hcp_sandbox::pep::NoReceipts;
use hcp_sandbox::{
    MemoryStore, PreparedCapability, RunResult, Sandbox, SandboxConfig, TaskRequest, TaskStore,
};
use hcp_tests::ManifestBuilder;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn request(cap: &PreparedCapability, inputs: Value) -> TaskRequest {
    let deadline = Duration::from_secs(60);
    TaskRequest {
        governor: cap.standalone_governor(
            "task-bench",
            "session-bench",
            deadline,
            &Default::default(),
            Arc::new(NoReceipts),
        ),
        task_id: "task-bench".into(),
        session_id: "session-bench".into(),
        caller_id: "bench".into(),
        intent: "benchmark".into(),
        inputs,
        constraints: json!({}),
        context: None,
        resume: None,
        risk_level: RiskLevel::R1,
        data_classification: DataClass::T1,
        deadline,
        envelope: Default::default(),
        hid: None,
    }
}

pub(crate) fn prepare(
    config: SandboxConfig,
    builder: &ManifestBuilder,
    dir: &std::path::Path,
) -> PreparedCapability {
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(hcp_tests::cache_dir()),
        ..config
    })
    .expect("sandbox");
    sandbox
        .prepare(Arc::new(builder.load(dir)))
        .expect("prepare")
}

pub(crate) async fn run_ok(cap: &PreparedCapability, store: &Arc<dyn TaskStore>, inputs: Value) {
    let run = cap.run(request(cap, inputs), store.clone()).await;
    assert!(
        matches!(run.result, RunResult::Completed { .. }),
        "{:?}",
        run.result
    );
}

/// The two configurations of each benchmark pair, ready to run.
pub(crate) struct Pairs {
    pub(crate) pooled: PreparedCapability,
    pub(crate) plain: PreparedCapability,
    pub(crate) with_epoch: PreparedCapability,
    pub(crate) no_epoch: PreparedCapability,
    pub(crate) store: Arc<dyn TaskStore>,
    _dir: tempfile::TempDir,
}

/// Inputs of the trivial task.
pub(crate) fn trivial_inputs() -> Value {
    json!({"document_uri": "file:///documents/x.md"})
}

/// Inputs of the CPU-bound task.
pub(crate) fn spin_inputs() -> Value {
    json!({"action": "spin", "iterations": 20_000_000})
}

pub(crate) fn pairs() -> Pairs {
    let dir = tempfile::tempdir().expect("tempdir");
    let trivial = ManifestBuilder::new("trivial", hcp_tests::TRIVIAL)
        .set("/capability/constraints/concurrent_limit", json!(64));
    // The probe imports files, sockets and instruments: grant a directory, one
    // name and the rig.
    let probe = ManifestBuilder::new("probe", hcp_tests::PROBE)
        .set(
            "/grants/filesystem",
            json!([{"path": dir.path(), "access": "read-only"}]),
        )
        .set("/grants/network", json!([{"host": "localhost", "port": 9}]))
        .set("/grants/instruments", json!(["cvd-rig"]));
    Pairs {
        pooled: prepare(SandboxConfig::default(), &trivial, dir.path()),
        plain: prepare(
            SandboxConfig {
                pooling: false,
                pre_instantiate: false,
                ..SandboxConfig::default()
            },
            &trivial,
            dir.path(),
        ),
        with_epoch: prepare(SandboxConfig::default(), &probe, dir.path()),
        no_epoch: prepare(
            SandboxConfig {
                epoch_interruption: false,
                ..SandboxConfig::default()
            },
            &probe,
            dir.path(),
        ),
        store: Arc::new(MemoryStore::new()),
        _dir: dir,
    }
}
