//! Containment at run time: name lookups and HTTP hand the guest only the
//! addresses its grant allows, socket creation is a governed call, every
//! task holds a bounded number of resources, and large or repeated denied
//! calls stay bounded in the receipts and stop the guest. A path outside
//! the granted directories reaches the PEP: a DENY receipt and a note
//! naming the granted directories.

mod common;

use common::{ProbeTask, host_notes};
use hcp_contracts::manifest::SafetyEnvelope;
use hcp_contracts::message::ErrorCode;
use hcp_receipts::{Verdict, reason};
use hcp_sandbox::pep::{
    self, ARGS_PREFIX_BYTES, BudgetCaps, DecidedCall, MemorySink, Op, VerdictSink,
};
use hcp_sandbox::{
    MAX_TABLE_ENTRIES, MemoryStore, PreparedCapability, RunResult, Sandbox, TaskRun,
};
use hcp_tests::{ManifestBuilder, http_server, listener};
use serde_json::{Value, json};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

static SANDBOX: LazyLock<Sandbox> = LazyLock::new(|| common::sandbox(16));

fn probe(dir: &std::path::Path, network: Value) -> PreparedCapability {
    let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE)
        .set("/grants/network", network)
        .set(
            "/grants/filesystem",
            json!([{"path": dir, "guest_path": "/data", "access": "read-only"}]),
        )
        .set("/grants/instruments", json!(["cvd-rig"]))
        .set("/limits/memory_bytes", json!(64 << 20))
        .load(dir);
    SANDBOX.prepare(Arc::new(manifest)).expect("probe prepares")
}

const UNLIMITED: BudgetCaps = BudgetCaps {
    artifacts: pep::UNLIMITED,
    bytes: pep::UNLIMITED,
    host_calls: pep::UNLIMITED,
};

async fn run(
    prepared: &PreparedCapability,
    budgets: BudgetCaps,
    sink: Arc<dyn VerdictSink>,
    inputs: Value,
) -> TaskRun {
    let task = ProbeTask {
        task_id: "task-c",
        session_id: "session-c",
        intent: "containment",
        deadline: Duration::from_secs(30),
    };
    let envelope = SafetyEnvelope::default();
    let governor = task.governor(prepared, &envelope, budgets, 60_000, sink);
    let request = task.request(inputs, envelope, governor);
    prepared.run(request, Arc::new(MemoryStore::new())).await
}

fn outputs(run: &TaskRun) -> Value {
    match &run.result {
        RunResult::Completed { outputs, .. } => outputs.clone(),
        RunResult::Failed(f) => panic!("the task failed: {f:?}"),
    }
}

fn verdicts(decided: &[DecidedCall<'_>], op: Op) -> Vec<(Verdict, &'static str)> {
    decided
        .iter()
        .filter(|d| d.call.op == op)
        .map(|d| (d.verdict, d.reason))
        .collect()
}

/// A guest opening a path outside its granted directories, by an absolute
/// path (which the guest's C library used to refuse unseen, `ENOENT`) or
/// by `..` out of a granted one: the PEP decides it, a DENY receipt
/// `DENY_IDENTITY_UNAUTHORIZED` on the path it resolves to, a host note
/// naming the granted guest directories; the guest sees `EACCES`. The
/// granted directory reads as before.
#[tokio::test(flavor = "multi_thread")]
async fn reads_outside_the_grants_are_denied_receipted_and_name_the_grants() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("hello.txt"), "hi").expect("write");
    // A destination granted (the probe imports HTTP), none used.
    let prepared = probe(tmp.path(), json!([{"host": "localhost", "port": 9}]));
    let secret = tmp.path().parent().expect("parent").join("secret.txt");
    let secret = secret.to_str().expect("utf8");
    for (path, resolved) in [
        ("/etc/passwd", "/etc/passwd"),
        ("/data/../etc/passwd", "/etc/passwd"),
        ("/", "/"),
        (secret, secret),
        ("relative.txt", "/relative.txt"),
    ] {
        let sink = Arc::new(MemorySink::new());
        let action = if path == "/" { "list_dir" } else { "read_file" };
        let ran = run(
            &prepared,
            UNLIMITED,
            sink.clone(),
            json!({"action": action, "path": path}),
        )
        .await;
        let out = outputs(&ran);
        assert_eq!(out["ok"], false, "{path}: {out}");
        assert_eq!(out["error"], "Permission denied (os error 2)", "{path}");
        let opened: Vec<(Verdict, &str, String)> = sink
            .decided()
            .iter()
            .filter(|d| d.call.op == Op::FsOpen)
            .map(|d| (d.verdict, d.reason, d.call.target.to_string()))
            .collect();
        assert_eq!(
            opened,
            [(
                Verdict::Deny,
                reason::DENY_IDENTITY_UNAUTHORIZED,
                resolved.to_owned()
            )],
            "{path}"
        );
        let notes = host_notes(&ran);
        let note = format!(
            "denied (DENY_IDENTITY_UNAUTHORIZED): fs.open {resolved:?}: outside the granted \
             directories (/data read-only)"
        );
        assert!(notes.contains(&note), "{path}: {notes:?}");
    }
    let sink = Arc::new(MemorySink::new());
    let ran = run(
        &prepared,
        UNLIMITED,
        sink,
        json!({"action": "read_file", "path": "/data/hello.txt"}),
    )
    .await;
    assert_eq!(outputs(&ran)["value"], "hi");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lookup_hands_out_only_the_addresses_the_grant_allows() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let strict = probe(
        tmp.path(),
        json!([{"host": "localhost", "port": 9, "allow_private": false}]),
    );
    let sink = Arc::new(MemorySink::new());
    let looked = run(
        &strict,
        UNLIMITED,
        sink.clone(),
        json!({"action": "lookup", "name": "localhost"}),
    )
    .await;
    let out = outputs(&looked);
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(
        out["error"], "failed to lookup address information: Name does not resolve",
        "{out}"
    );
    assert_eq!(
        verdicts(&sink.decided(), Op::NetLookup),
        [
            (Verdict::Allow, reason::ALLOW),
            (Verdict::Deny, reason::DENY_TOOL_NOT_FOUND)
        ]
    );
    let notes = host_notes(&looked);
    assert!(
        notes.iter().any(|n| n
            == "denied (DENY_TOOL_NOT_FOUND): name lookup of \"localhost\": it resolves to no address the grant allows (non-public addresses need allow_private)"),
        "{notes:?}"
    );

    // With allow_private, loopback is handed out.
    let tmp = tempfile::tempdir().expect("tempdir");
    let open = probe(
        tmp.path(),
        json!([{"host": "localhost", "port": 9, "allow_private": true}]),
    );
    let out = outputs(
        &run(
            &open,
            UNLIMITED,
            Arc::new(MemorySink::new()),
            json!({"action": "lookup", "name": "localhost"}),
        )
        .await,
    );
    assert_eq!(out["ok"], true, "{out}");
    assert!(
        out["value"]
            .as_array()
            .expect("addresses")
            .contains(&json!("127.0.0.1")),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn http_to_a_name_with_no_allowed_address_is_a_denied_receipt() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let web = http_server("text/plain", "web body".into());
    let strict = probe(
        tmp.path(),
        json!([{"host": "localhost", "port": web.port(), "allow_private": false}]),
    );
    let sink = Arc::new(MemorySink::new());
    let url = format!("http://localhost:{}/x", web.port());
    let got = run(
        &strict,
        UNLIMITED,
        sink.clone(),
        json!({"action": "http_get", "url": url}),
    )
    .await;
    let out = outputs(&got);
    assert_eq!(
        out["error"],
        format!("{url}: ErrorCode::HttpRequestDenied"),
        "{out}"
    );
    assert_eq!(
        verdicts(&sink.decided(), Op::HttpRequest),
        [(Verdict::Deny, reason::DENY_TOOL_NOT_FOUND)]
    );
    let notes = host_notes(&got);
    assert!(
        notes.iter().any(|n| *n
            == format!(
                "denied (DENY_TOOL_NOT_FOUND): GET http://localhost:{}: localhost resolves to no address the grant allows (non-public addresses need allow_private)",
                web.port()
            )),
        "{notes:?}"
    );
}

/// Descriptors this process holds.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("fds").count()
}

#[tokio::test(flavor = "multi_thread")]
async fn creating_sockets_is_governed_budgeted_and_capped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let granted = listener("granted-banner");
    let prepared = probe(
        tmp.path(),
        json!([
            {"host": "127.0.0.1", "port": granted.port()},
            {"host": "localhost", "port": 9}
        ]),
    );
    let before = open_fds();
    // Every socket is a decided call; the task holds at most its table.
    let sink = Arc::new(MemorySink::new());
    let run1 = run(
        &prepared,
        UNLIMITED,
        sink.clone(),
        json!({"action": "sockets", "count": 5000}),
    )
    .await;
    let out = outputs(&run1);
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(
        out["error"],
        "ErrorCode { code: 10, name: \"new-socket-limit\", message: \"A new socket resource could not be created because of a system limit.\" }",
        "{out}"
    );
    let created = out["created"].as_u64().expect("created") as usize;
    assert!(
        created > MAX_TABLE_ENTRIES / 2 && created <= MAX_TABLE_ENTRIES,
        "{created}"
    );
    let sockets = verdicts(&sink.decided(), Op::NetSocket);
    assert_eq!(sockets.len(), created + 1);
    assert!(
        sockets
            .iter()
            .all(|v| *v == (Verdict::Allow, reason::ALLOW))
    );
    assert!(host_notes(&run1).contains(&format!(
        "socket refused: the task holds {MAX_TABLE_ENTRIES} resources (descriptors, sockets, streams), its limit"
    )));
    // The sockets are closed with the task.
    assert!(open_fds() < before + 16, "{} then {}", before, open_fds());

    // Each socket costs a host call of the budget.
    let sink = Arc::new(MemorySink::new());
    let out = outputs(
        &run(
            &prepared,
            BudgetCaps {
                host_calls: 20,
                ..UNLIMITED
            },
            sink.clone(),
            json!({"action": "sockets", "count": 100}),
        )
        .await,
    );
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("ErrorCode { code: 1, name: \"access-denied\"")),
        "{out}"
    );
    assert_eq!(out["created"], 20, "{out}");
    assert_eq!(
        verdicts(&sink.decided(), Op::NetSocket).last(),
        Some(&(Verdict::Deny, reason::BUDGET_EXCEEDED))
    );

    // UDP sockets are never created.
    let sink = Arc::new(MemorySink::new());
    let out = outputs(
        &run(
            &prepared,
            UNLIMITED,
            sink.clone(),
            json!({"action": "udp", "addr": granted.to_string()}),
        )
        .await,
    );
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(
        verdicts(&sink.decided(), Op::NetUdp),
        [(Verdict::Deny, reason::DENY_TOOL_NOT_FOUND)]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_holding_too_many_descriptors_fails_saying_why() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("f.txt"), "x").expect("write");
    let prepared = probe(tmp.path(), json!([{"host": "localhost", "port": 9}]));
    let before = open_fds();
    let opened = run(
        &prepared,
        UNLIMITED,
        Arc::new(MemorySink::new()),
        json!({"action": "open_files", "path": "/data/f.txt", "count": 5000}),
    )
    .await;
    let RunResult::Failed(f) = &opened.result else {
        panic!("the task did not fail: {:?}", opened.result);
    };
    assert_eq!(f.code, ErrorCode::ExecutionError);
    assert_eq!(
        f.message,
        format!(
            "resource limit: the task holds {MAX_TABLE_ENTRIES} resources (descriptors, sockets, streams) and may open no more"
        )
    );
    assert!(open_fds() < before + 16, "{} then {}", before, open_fds());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_calling_on_after_its_budget_is_spent_is_stopped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let prepared = probe(tmp.path(), json!([{"host": "localhost", "port": 9}]));
    let sink = Arc::new(MemorySink::new());
    let size = 2 << 20;
    let logged = run(
        &prepared,
        BudgetCaps {
            bytes: 1 << 20,
            ..UNLIMITED
        },
        sink.clone(),
        json!({"action": "big_logs", "count": 40, "size": size}),
    )
    .await;
    let RunResult::Failed(f) = &logged.result else {
        panic!("the task did not fail: {:?}", logged.result);
    };
    assert_eq!(f.code, ErrorCode::SafetyViolation);
    assert_eq!(
        f.message,
        format!(
            "stopped after {} host calls in a row were denied for a spent budget (BUDGET_EXCEEDED): \
             log.write ({size} bytes): the session may move 1048576 bytes through host calls, 0 are used (budgets.bytes)",
            pep::MAX_DENIALS_AFTER_BUDGET
        )
    );
    let decided = sink.decided();
    assert!(
        decided.len() >= pep::MAX_DENIALS_AFTER_BUDGET as usize && decided.len() < 40,
        "{} calls decided",
        decided.len()
    );
    // Each verdict carries a bounded prefix of the call and the facts of
    // the whole.
    for d in &decided {
        let bytes = d.call.canonical_bytes().expect("bytes");
        assert!(bytes.len() <= ARGS_PREFIX_BYTES + 128, "{}", bytes.len());
        let full = d.full.as_ref().expect("a bounded call");
        assert_eq!(full.bytes, size as u64);
        assert!(full.size > size as u64);
    }
}
