//! Every host call kind the sandbox offers passes the PEP before dispatch,
//! allowed and denied, driven through the probe guest: each verdict reaches
//! the governor's sink (the receipt pipeline) with its reason code, and each
//! denial reaches the guest as an error value.

mod common;

use common::ProbeTask;
use hcp_receipts::{Verdict, reason};
use hcp_sandbox::pep::{DecidedCall, MemorySink, Op, VerdictSink};
use hcp_sandbox::{MemoryStore, PreparedCapability, RunResult, Sandbox, SandboxConfig, TaskRun};
use hcp_tests::{ProbeWorld, cache_dir};
use serde_json::{Value, json};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

static SANDBOX: LazyLock<Sandbox> = LazyLock::new(|| common::sandbox(8));

/// The probe's world, its manifest with one artifact and an envelope
/// whose breach shuts the rig down, prepared.
struct World {
    probe: ProbeWorld,
    prepared: PreparedCapability,
}

fn world() -> World {
    let probe = ProbeWorld::new();
    let manifest = probe
        .manifest
        .clone()
        .set("/limits/artifacts", json!(1))
        .set(
            "/safety_envelope",
            json!({
                "parameters": {"temperature": {"max": 1000, "unit": "celsius", "hard_limit": true}},
                "emergency_procedures": {"over_temperature": "immediate_shutdown"}
            }),
        )
        .load(probe.tmp.path());
    let prepared = SANDBOX.prepare(Arc::new(manifest)).expect("prepares");
    World { probe, prepared }
}

async fn run(w: &World, sink: Arc<dyn VerdictSink>, actions: Value) -> TaskRun {
    let deadline = Duration::from_secs(20);
    let envelope = w.prepared.manifest().doc.safety_envelope.clone();
    let task = ProbeTask {
        task_id: "task-pep",
        session_id: "session-pep",
        intent: "every host call",
        deadline,
    };
    let governor =
        w.prepared
            .standalone_governor(task.task_id, task.session_id, deadline, &envelope, sink);
    let request = task.request(
        json!({"action": "each", "actions": actions}),
        envelope,
        governor,
    );
    w.prepared.run(request, Arc::new(MemoryStore::new())).await
}

fn reports(run: &TaskRun) -> Vec<Value> {
    let outputs = match &run.result {
        RunResult::Completed { outputs, .. } => outputs.clone(),
        RunResult::Failed(f) => f.partial_outputs.clone().unwrap_or_default(),
    };
    outputs["value"].as_array().cloned().unwrap_or_default()
}

fn verdicts(decided: &[DecidedCall<'_>], op: Op) -> Vec<(Verdict, &'static str, String)> {
    decided
        .iter()
        .filter(|d| d.call.op == op)
        .map(|d| (d.verdict, d.reason, d.call.target.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_host_call_kind_is_decided_allowed_and_denied() {
    let w = world();
    let sink = Arc::new(MemorySink::new());
    let url = format!("http://localhost:{}/paper", w.probe.web.port());
    let ungranted_url = format!("http://127.0.0.1:{}/x", w.probe.other.port());
    let actions = json!([
        {"action": "log", "message": "hello"},
        {"action": "log", "message": "\u{1b}[2Jwiped"},
        {"action": "artifacts", "count": 2, "size": 3},
        {"action": "checkpoint", "label": "ramp", "state": {"t": 1}},
        {"action": "checkpoint", "label": "bad label", "state": {}},
        {"action": "load_checkpoint", "id": "ckpt-001"},
        {"action": "load_checkpoint", "id": "../ckpt"},
        {"action": "read_file", "path": "/data/hello.txt"},
        {"action": "read_file", "path": "/data/../secret.txt"},
        {"action": "write_file", "path": "/data/new.txt", "content": "x"},
        {"action": "mkdir", "path": "/out/d"},
        {"action": "rename", "from": "/out/d", "to": "/data/d"},
        {"action": "stat", "path": "/data/hello.txt"},
        {"action": "connect", "addr": w.probe.granted.to_string()},
        {"action": "connect", "addr": w.probe.other.to_string()},
        {"action": "lookup", "name": "localhost"},
        {"action": "lookup", "name": "example.com"},
        {"action": "http_get", "url": url},
        {"action": "http_get", "url": ungranted_url},
        {"action": "listen", "addr": "127.0.0.1:0"},
        {"action": "udp", "addr": w.probe.granted.to_string()},
        {"action": "instrument_read", "instrument": "cvd-rig"},
        {"action": "instrument_read", "instrument": "laser"},
        {"action": "instrument", "instrument": "cvd-rig", "command": "set_temperature", "arguments": {"target": 700}},
        {"action": "instrument", "instrument": "cvd-rig", "command": "set_temperature", "arguments": {"target": 1200}},
        {"action": "instrument", "instrument": "cvd-rig", "command": "set_temperature", "arguments": {"target": 600}}
    ]);
    let run = run(&w, sink.clone(), actions).await;
    let r = reports(&run);
    assert_eq!(r.len(), 26, "{:?}", run.result);
    let decided = sink.decided();

    // What the guest saw.
    assert_eq!(r[2]["ok"], false);
    assert_eq!(r[2]["created"].as_array().map(Vec::len), Some(1));
    assert!(
        r[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("BudgetExceeded")),
        "{}",
        r[2]
    );
    assert!(
        r[4]["error"]
            .as_str()
            .is_some_and(|e| e.contains("ArgsInvalid"))
    );
    assert_eq!(r[5], json!({"ok": true, "value": {"t": 1}}));
    assert!(
        r[6]["error"]
            .as_str()
            .is_some_and(|e| e.contains("ArgsInvalid"))
    );
    assert_eq!(r[7], json!({"ok": true, "value": "hi"}));
    for i in [8, 9, 11, 14, 16] {
        assert_eq!(
            r[i],
            json!({"ok": false, "error": "Permission denied (os error 2)"}),
            "action {i}"
        );
    }
    assert_eq!(r[10]["ok"], true);
    assert_eq!(r[13], json!({"ok": true, "value": "granted-banner"}));
    assert_eq!(r[17], json!({"ok": true, "value": "web body"}));
    assert_eq!(
        r[18]["error"],
        format!("{ungranted_url}: ErrorCode::HttpRequestDenied")
    );
    assert!(
        r[22]["error"]
            .as_str()
            .is_some_and(|e| e.contains("ToolNotFound"))
    );
    assert_eq!(r[23]["ok"], true, "{}", r[23]);
    assert!(
        r[24]["error"]
            .as_str()
            .is_some_and(|e| e.contains("EnvelopeHardLimit") && e.contains("immediate_shutdown")),
        "{}",
        r[24]
    );
    assert!(
        r[25]["error"]
            .as_str()
            .is_some_and(|e| e.contains("shut down after a safety breach")),
        "{}",
        r[25]
    );
    // The breach ends the task with safety_violation, as the guard would.
    let RunResult::Failed(f) = &run.result else {
        panic!("{:?}", run.result)
    };
    assert_eq!(f.code, hcp_contracts::message::ErrorCode::SafetyViolation);

    // What the PEP decided, per call kind: allowed and denied, with reasons.
    use Verdict::{Allow, Deny};
    let log = verdicts(&decided, Op::LogWrite);
    assert_eq!(log[0].0, Allow);
    assert_eq!(log[1].1, reason::THREAT_SIGNAL_DETECTED);
    let art = verdicts(&decided, Op::ArtifactCreate);
    assert_eq!(
        art.iter().map(|v| v.1).collect::<Vec<_>>(),
        [reason::ALLOW, reason::BUDGET_EXCEEDED]
    );
    let save = verdicts(&decided, Op::CheckpointSave);
    assert_eq!(
        save.iter().map(|v| v.1).collect::<Vec<_>>(),
        [reason::ALLOW, reason::DENY_ARGS_INVALID]
    );
    let load = verdicts(&decided, Op::CheckpointLoad);
    assert_eq!(
        load.iter().map(|v| v.1).collect::<Vec<_>>(),
        [reason::ALLOW, reason::DENY_ARGS_INVALID]
    );
    let open = verdicts(&decided, Op::FsOpen);
    assert!(
        open.contains(&(Allow, reason::ALLOW, "/data/hello.txt".into())),
        "{open:?}"
    );
    assert!(open.contains(&(
        Deny,
        reason::DENY_IDENTITY_UNAUTHORIZED,
        "/secret.txt".into()
    )));
    assert!(open.contains(&(
        Deny,
        reason::DENY_IDENTITY_UNAUTHORIZED,
        "/data/new.txt".into()
    )));
    assert_eq!(
        verdicts(&decided, Op::FsMkdir),
        [(Allow, reason::ALLOW, "/out/d".into())]
    );
    assert_eq!(
        verdicts(&decided, Op::FsRename),
        [(Deny, reason::DENY_IDENTITY_UNAUTHORIZED, "/out/d".into())]
    );
    let connect = verdicts(&decided, Op::NetConnect);
    assert_eq!(
        connect,
        [
            (Allow, reason::ALLOW, w.probe.granted.to_string()),
            (Deny, reason::DENY_TOOL_NOT_FOUND, w.probe.other.to_string())
        ]
    );
    let lookup = verdicts(&decided, Op::NetLookup);
    assert_eq!(
        lookup,
        [
            (Allow, reason::ALLOW, "localhost".into()),
            (Deny, reason::DENY_TOOL_NOT_FOUND, "example.com".into())
        ]
    );
    let http = verdicts(&decided, Op::HttpRequest);
    assert_eq!(
        http,
        [
            (
                Allow,
                reason::ALLOW,
                format!("localhost:{}", w.probe.web.port())
            ),
            (
                Deny,
                reason::DENY_TOOL_NOT_FOUND,
                format!("127.0.0.1:{}", w.probe.other.port())
            )
        ]
    );
    assert!(
        verdicts(&decided, Op::NetListen)
            .iter()
            .all(|v| v.1 == reason::DENY_TOOL_NOT_FOUND)
    );
    assert_eq!(verdicts(&decided, Op::NetUdp)[0].0, Deny);
    let read = verdicts(&decided, Op::InstrumentRead);
    assert_eq!(
        read,
        [
            (Allow, reason::ALLOW, "cvd-rig".into()),
            (Deny, reason::DENY_TOOL_NOT_FOUND, "laser".into())
        ]
    );
    let cmd = verdicts(&decided, Op::InstrumentCommand);
    assert_eq!(
        cmd.iter().map(|v| v.1).collect::<Vec<_>>(),
        [
            reason::ALLOW,
            reason::DENY_ENVELOPE_HARD_LIMIT,
            reason::DENY_ENVELOPE_HARD_LIMIT
        ]
    );
    // Every verdict read the counters before it, and host calls count
    // every decided call.
    for (i, d) in decided.iter().enumerate() {
        assert_eq!(d.counters.host_calls, i as u64, "{:?}", d.call);
    }
    // The risk events name every denial.
    assert!(
        run.risk_events
            .contains(&"denied:BUDGET_EXCEEDED".to_owned())
    );
    assert!(
        run.risk_events
            .contains(&"breach:over_temperature".to_owned())
    );
    drop(w.probe);
}

#[tokio::test(flavor = "multi_thread")]
async fn enforcement_off_decides_nothing_but_the_grants_still_hold() {
    let w = world();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(cache_dir()),
        pool_instances: 2,
        enforcement: false,
        ..SandboxConfig::default()
    })
    .expect("sandbox");
    let off = World {
        prepared: sandbox
            .prepare(w.prepared.manifest().clone())
            .expect("prepares"),
        ..w
    };
    let sink = Arc::new(MemorySink::new());
    let actions = json!([
        {"action": "log", "message": "hello"},
        {"action": "read_file", "path": "/data/hello.txt"},
        {"action": "read_file", "path": "/data/../secret.txt"},
        {"action": "connect", "addr": off.probe.other.to_string()}
    ]);
    let run = run(&off, sink.clone(), actions).await;
    let r = reports(&run);
    assert_eq!(r[1], json!({"ok": true, "value": "hi"}));
    assert_eq!(r[2]["ok"], false, "{}", r[2]);
    assert_eq!(r[3]["ok"], false, "{}", r[3]);
    assert!(sink.decided().is_empty());
}

/// An instrument command's arguments larger than 64 KiB are refused
/// (`INVALID_ARGS`, with a receipt) without being parsed: they were parsed
/// into JSON before the PEP saw them, a value for every two bytes of what
/// the guest's memory held.
#[tokio::test(flavor = "multi_thread")]
async fn instrument_arguments_past_their_bound_are_refused_unparsed() {
    let w = world();
    let sink = Arc::new(MemorySink::new());
    let zeros = vec![0; 100_000];
    let actions = json!([
        {"action": "instrument", "instrument": "cvd-rig", "command": "set_temperature",
         "arguments": {"target": 700, "padding": zeros}},
        {"action": "instrument", "instrument": "cvd-rig", "command": "set_temperature", "arguments": {"target": 700}}
    ]);
    let run = run(&w, sink.clone(), actions).await;
    let r = reports(&run);
    assert_eq!(r.len(), 2, "{:?}", run.result);
    let error = r[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("ArgsInvalid")
            && error.contains("arguments are ")
            && error.contains(" bytes; a command's may be at most 65536"),
        "{}",
        r[0]
    );
    assert_eq!(r[1]["ok"], true, "{}", r[1]);
    let decided = verdicts(&sink.decided(), Op::InstrumentCommand);
    assert_eq!(
        decided.iter().map(|d| (d.0, d.1)).collect::<Vec<_>>(),
        [
            (Verdict::Deny, reason::DENY_ARGS_INVALID),
            (Verdict::Allow, reason::ALLOW)
        ]
    );
}
