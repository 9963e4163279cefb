//! Hostile guests against the sandbox: each case asserts the exact error the
//! guest (or the host) sees, and that the same capability then runs the next
//! task normally.

mod common;

use common::{ProbeTask, host_notes};
use hcp_contracts::message::ErrorCode;
use hcp_receipts::{Verdict, reason};
use hcp_sandbox::audit::ImportVerdict;
use hcp_sandbox::pep::{DecidedCall, MemorySink, NoReceipts};
use hcp_sandbox::{
    MemoryStore, PrepareError, PreparedCapability, RunFailure, RunResult, Sandbox, TaskRun,
    TaskStore,
};
use hcp_tests::{ManifestBuilder, ProbeWorld};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

static SANDBOX: LazyLock<Sandbox> = LazyLock::new(|| common::sandbox(16));

/// The probe with a bit of every grant: a read-only directory at `/data`, a
/// read-write one at `/out`, one granted listener (by address), one granted
/// HTTP server (by name), `PATH`, and the simulated CVD rig.
struct Probe {
    world: ProbeWorld,
    prepared: PreparedCapability,
    store: Arc<dyn TaskStore>,
}

impl Probe {
    fn new() -> Self {
        let world = ProbeWorld::new();
        let secret = world.tmp.path().join("secret.txt");
        std::fs::write(&secret, "SECRET").expect("write");
        std::os::unix::fs::symlink(&secret, world.tmp.path().join("data/link")).expect("symlink");
        let manifest = world
            .manifest
            .clone()
            .set("/grants/env", json!(["PATH"]))
            .set("/limits/memory_bytes", json!(16 << 20))
            .set("/limits/log_bytes", json!(4096))
            .load(world.tmp.path());
        let prepared = SANDBOX.prepare(Arc::new(manifest)).expect("probe prepares");
        Self {
            world,
            prepared,
            store: Arc::new(MemoryStore::new()),
        }
    }

    fn host_path(&self, rel: &str) -> PathBuf {
        self.world.tmp.path().join(rel)
    }

    async fn run_for(&self, inputs: Value, deadline: Duration) -> TaskRun {
        let task = ProbeTask {
            task_id: "task-1",
            session_id: "session-1",
            intent: "probe the sandbox",
            deadline,
        };
        let governor = self.prepared.standalone_governor(
            task.task_id,
            task.session_id,
            deadline,
            &Default::default(),
            Arc::new(NoReceipts),
        );
        let request = task.request(inputs, Default::default(), governor);
        self.prepared.run(request, self.store.clone()).await
    }

    async fn run(&self, inputs: Value) -> TaskRun {
        self.run_for(inputs, Duration::from_secs(20)).await
    }

    /// Runs an operation the guest reports on; returns `(ok, value or error)`.
    async fn op(&self, inputs: Value) -> (bool, Value, TaskRun) {
        let run = self.run(inputs.clone()).await;
        let RunResult::Completed { outputs, .. } = &run.result else {
            panic!("{inputs} did not complete: {:?}", run.result);
        };
        let ok = outputs["ok"].as_bool().expect("ok flag");
        let v = if ok {
            outputs["value"].clone()
        } else {
            outputs["error"].clone()
        };
        (ok, v, run)
    }

    async fn denied(&self, inputs: Value, error: &str) -> TaskRun {
        let (ok, v, run) = self.op(inputs.clone()).await;
        assert!(!ok, "{inputs} was allowed: {v}");
        assert_eq!(v, error, "{inputs}");
        self.still_works().await;
        run
    }

    /// Each of `cases` is denied with `error`, as [`Probe::denied`].
    async fn all_denied<const N: usize>(&self, error: &str, cases: [Value; N]) {
        for inputs in cases {
            self.denied(inputs, error).await;
        }
    }

    async fn failed(&self, inputs: Value, deadline: Duration) -> RunFailure {
        let run = self.run_for(inputs.clone(), deadline).await;
        let RunResult::Failed(f) = run.result else {
            panic!("{inputs} did not fail: {:?}", run.result);
        };
        self.still_works().await;
        f
    }

    /// The next task runs normally.
    async fn still_works(&self) {
        let (ok, v, _) = self
            .op(json!({"action": "read_file", "path": "/data/hello.txt"}))
            .await;
        assert!(ok, "the next task failed: {v}");
        assert_eq!(v, "hi");
    }
}

const EPERM: &str = "Operation not permitted (os error 63)";
const EACCES: &str = "Permission denied (os error 2)";

#[tokio::test(flavor = "multi_thread")]
async fn granted_operations_work() {
    let p = Probe::new();
    let (ok, v, _) = p
        .op(json!({"action": "read_file", "path": "/data/hello.txt"}))
        .await;
    assert!(ok && v == "hi");
    let (ok, _, _) = p
        .op(json!({"action": "write_file", "path": "/out/new.txt", "content": "x"}))
        .await;
    assert!(ok);
    assert_eq!(
        std::fs::read_to_string(p.host_path("out/new.txt")).expect("written"),
        "x"
    );
    let (ok, v, _) = p
        .op(json!({"action": "connect", "addr": p.world.granted.to_string()}))
        .await;
    assert!(ok && v == "granted-banner", "{v}");
    let (ok, v, _) = p.op(json!({"action": "lookup", "name": "localhost"})).await;
    assert!(
        ok && v
            .as_array()
            .is_some_and(|a| a.contains(&json!("127.0.0.1"))),
        "{v}"
    );
    let url = format!("http://localhost:{}/paper", p.world.web.port());
    let (ok, v, _) = p.op(json!({"action": "http_get", "url": url})).await;
    assert!(ok && v == "web body", "{v}");
    let (ok, _, _) = p.op(json!({"action": "env", "name": "PATH"})).await;
    assert!(ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn dotdot_escape_is_refused() {
    let p = Probe::new();
    p.all_denied(
        EACCES,
        [
            json!({"action": "read_file", "path": "/data/../secret.txt"}),
            json!({"action": "list_dir", "path": "/data/.."}),
        ],
    )
    .await;
}

/// Paths outside the grants reach the PEP through the guest's empty `/`
/// and are denied (`containment.rs` checks their receipts and notes).
#[tokio::test(flavor = "multi_thread")]
async fn absolute_paths_outside_the_grants_are_denied() {
    let p = Probe::new();
    let secret = p.host_path("secret.txt");
    p.all_denied(
        EACCES,
        [
            json!({"action": "read_file", "path": secret}),
            json!({"action": "read_file", "path": "/etc/passwd"}),
            json!({"action": "list_dir", "path": "/"}),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_out_of_a_preopen_is_refused() {
    let p = Probe::new();
    p.denied(json!({"action": "read_file", "path": "/data/link"}), EPERM)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_grant_cannot_be_written() {
    let p = Probe::new();
    p.all_denied(
        EACCES,
        [
            json!({"action": "write_file", "path": "/data/new.txt", "content": "x"}),
            json!({"action": "write_file", "path": "/data/hello.txt", "content": "x"}),
        ],
    )
    .await;
    assert!(!p.host_path("data/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(p.host_path("data/hello.txt")).expect("read"),
        "hi"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connecting_to_an_ungranted_port_is_refused() {
    let p = Probe::new();
    let run = p
        .denied(
            json!({"action": "connect", "addr": p.world.other.to_string()}),
            EACCES,
        )
        .await;
    assert_eq!(
        host_notes(&run),
        [format!(
            "denied (DENY_TOOL_NOT_FOUND): connect to {}: not in grants.network",
            p.world.other
        )]
    );
    // The granted port of another host is not granted either.
    let elsewhere = format!("127.0.0.2:{}", p.world.granted.port());
    p.denied(json!({"action": "connect", "addr": elsewhere}), EACCES)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_and_udp_are_refused() {
    let p = Probe::new();
    // An ephemeral bind is what every client connect does; listening on it
    // is refused.
    let run = p
        .denied(json!({"action": "listen", "addr": "0.0.0.0:0"}), EACCES)
        .await;
    let notes = host_notes(&run);
    assert!(
        notes.len() == 1
            && notes[0].starts_with("denied (DENY_TOOL_NOT_FOUND): net.listen 0.0.0.0:")
            && notes[0].ends_with(": listening, accepting and UDP are never granted"),
        "{notes:?}"
    );
    let run = p
        .denied(
            json!({"action": "listen", "addr": "127.0.0.1:8080"}),
            EACCES,
        )
        .await;
    assert_eq!(
        host_notes(&run),
        [
            "denied (DENY_TOOL_NOT_FOUND): bind to 127.0.0.1:8080: only the ephemeral bind of a client connect is granted"
        ]
    );
    let (ok, v, _) = p
        .op(json!({"action": "udp", "addr": p.world.granted.to_string()}))
        .await;
    assert!(!ok, "UDP was allowed: {v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ungranted_name_lookup_is_refused() {
    let p = Probe::new();
    let run = p
        .denied(json!({"action": "lookup", "name": "example.com"}), EACCES)
        .await;
    assert_eq!(
        host_notes(&run),
        [
            "denied (DENY_TOOL_NOT_FOUND): name lookup of \"example.com\": not a host in grants.network"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn http_to_an_ungranted_destination_is_refused() {
    let p = Probe::new();
    let url = format!("http://127.0.0.1:{}/x", p.world.other.port());
    let run = p
        .denied(
            json!({"action": "http_get", "url": url}),
            &format!("{url}: ErrorCode::HttpRequestDenied"),
        )
        .await;
    assert_eq!(
        host_notes(&run),
        [format!(
            "denied (DENY_TOOL_NOT_FOUND): GET http://127.0.0.1:{}: not in grants.network",
            p.world.other.port()
        )]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ungranted_env_var_is_absent_and_nothing_is_inherited() {
    let p = Probe::new();
    p.denied(
        json!({"action": "env", "name": "HOME"}),
        "environment variable not found",
    )
    .await;
    let (ok, v, _) = p.op(json!({"action": "args"})).await;
    assert!(ok && v == json!([]), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_infinite_loop_stops_at_the_deadline() {
    let p = Probe::new();
    let f = p
        .failed(json!({"action": "spin"}), Duration::from_millis(500))
        .await;
    assert_eq!(
        f,
        RunFailure::new(ErrorCode::Timeout, "stopped at its deadline of PT0.5S")
    );
}

/// A guest that only computes hands its thread back at every epoch tick:
/// two spinning tasks on a runtime of one thread leave the host's own work
/// (here a 10 ms timer) running. A spinning guest held its thread until its
/// deadline, and `hcp serve` runs on two: two such tasks stalled its API,
/// its AMQP consumers and its approval expiry for as long as they ran.
#[tokio::test(flavor = "current_thread")]
async fn a_spinning_guest_leaves_its_thread_to_the_hosts_other_work() {
    let p = Arc::new(Probe::new());
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let p = p.clone();
            tokio::spawn(async move {
                p.run_for(json!({"action": "spin"}), Duration::from_secs(3))
                    .await
            })
        })
        .collect();
    // The longest a 10 ms timer waits while they run.
    let mut worst = Duration::ZERO;
    while spinners.iter().any(|s| !s.is_finished()) {
        let started = std::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(10)).await;
        worst = worst.max(started.elapsed());
    }
    for spinner in spinners {
        let run = spinner.await.expect("joined");
        assert!(
            matches!(&run.result, RunResult::Failed(f) if f.code == ErrorCode::Timeout),
            "{:?}",
            run.result
        );
    }
    assert!(
        worst < Duration::from_secs(1),
        "a 10 ms timer waited {worst:?} beside two spinning guests"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_growth_past_the_limit_is_stopped() {
    let p = Probe::new();
    let f = p
        .failed(
            json!({"action": "grow", "bytes": 64 << 20}),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(f.code, ErrorCode::ExecutionError);
    assert!(
        f.message.starts_with("memory limit exceeded: growing to ")
            && f.message
                .ends_with(" bytes was refused (limits.memory_bytes is 16777216)"),
        "{}",
        f.message
    );
    // Within the limit it works.
    let (ok, _, _) = p.op(json!({"action": "grow", "bytes": 4 << 20})).await;
    assert!(ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn unbounded_recursion_is_stopped() {
    let p = Probe::new();
    let f = p
        .failed(json!({"action": "recurse"}), Duration::from_secs(20))
        .await;
    assert_eq!(
        f,
        RunFailure::new(
            ErrorCode::ExecutionError,
            "call stack exhausted (the host allows 512 KiB of wasm stack)"
        )
    );
}

/// The run completed, and its log kept at most `limits.log_bytes` (4096).
fn completed_within_the_log_bound(run: &TaskRun) {
    assert!(
        matches!(run.result, RunResult::Completed { .. }),
        "{:?}",
        run.result
    );
    let kept: usize = run.log.entries.iter().map(|e| e.message.len()).sum();
    assert!(kept <= 4096, "kept {kept} bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_output_flood_is_bounded() {
    let p = Probe::new();
    let run = p
        .run(json!({"action": "flood_stdout", "bytes": 10 << 20}))
        .await;
    completed_within_the_log_bound(&run);
    assert!(
        run.log.dropped_bytes >= (10 << 20) - 4096,
        "dropped {}",
        run.log.dropped_bytes
    );

    let run = p
        .run(json!({"action": "flood_log", "lines": 100_000}))
        .await;
    completed_within_the_log_bound(&run);
    assert!(
        run.log.dropped_lines > 99_000,
        "dropped {} lines",
        run.log.dropped_lines
    );
    p.still_works().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_is_an_internal_error() {
    let p = Probe::new();
    let f = p
        .failed(json!({"action": "panic"}), Duration::from_secs(20))
        .await;
    assert_eq!(
        f,
        RunFailure::new(
            ErrorCode::InternalError,
            "the capability trapped: wasm trap: wasm `unreachable` instruction executed"
        )
    );
}

#[test]
fn an_import_no_grant_provides_is_refused_at_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifest =
        ManifestBuilder::new("undeclared", hcp_tests::UNDECLARED_IMPORT).load(tmp.path());
    let err = SANDBOX.prepare(Arc::new(manifest)).expect_err("loaded");
    assert!(matches!(err, PrepareError::Refused(_)));
    assert_eq!(
        err.to_string(),
        "undeclared@1.0.0: refused: the component imports interfaces its manifest does not grant:\n  \
         evil:backdoor/shell@1.0.0: evil:backdoor is not provided by this host"
    );
}

#[test]
fn imports_beyond_the_grants_are_refused_at_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The probe uses an instrument, files, sockets and HTTP; granted
    // nothing, it may not load. Files and sockets alone would be linked
    // inert; the instrument and HTTP refuse it.
    let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE).load(tmp.path());
    let err = SANDBOX.prepare(Arc::new(manifest)).expect_err("loaded");
    let PrepareError::Refused(report) = &err else {
        panic!("{err}");
    };
    let refused: Vec<&str> = report.refused().map(|(name, _)| name).collect();
    assert_eq!(
        refused,
        [
            "hcp:capability/instrument@1.0.0",
            "wasi:http/types@0.2.12",
            "wasi:http/outgoing-handler@0.2.12",
        ]
    );
    let inert: Vec<&str> = report
        .imports
        .iter()
        .filter(
            |i| matches!(i.verdict, ImportVerdict::Allowed { granted_by } if granted_by.is_inert()),
        )
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(
        inert,
        [
            "wasi:filesystem/types@0.2.12",
            "wasi:filesystem/preopens@0.2.12",
            "wasi:sockets/network@0.2.12",
            "wasi:sockets/instance-network@0.2.12",
            "wasi:sockets/udp@0.2.12",
            "wasi:sockets/udp-create-socket@0.2.12",
            "wasi:sockets/tcp@0.2.12",
            "wasi:sockets/tcp-create-socket@0.2.12",
            "wasi:sockets/ip-name-lookup@0.2.12",
        ]
    );
}

#[test]
fn a_component_without_run_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifest = ManifestBuilder::new("other", hcp_tests::NO_RUN_EXPORT).load(tmp.path());
    let err = SANDBOX.prepare(Arc::new(manifest)).expect_err("loaded");
    assert!(matches!(err, PrepareError::Link { .. }), "{err}");
    assert!(
        err.to_string().starts_with(
            "other@1.0.0: the component does not implement world hcp:capability/capability:"
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_larger_than_the_guest_memory_fail_with_both_sizes() {
    let p = Probe::new();
    // 20 MiB of inputs for a guest limited to 16 MiB.
    let inputs = json!({"action": "echo", "pad": "x".repeat(20 << 20)});
    let bytes =
        inputs.to_string().len() + "task-1session-1probe1.0.0testerprobe the sandbox{}".len();
    let f = p.failed(inputs, Duration::from_secs(20)).await;
    assert_eq!(f.code, ErrorCode::InputError, "{}", f.message);
    assert_eq!(
        f.message,
        format!(
            "arguments of {bytes} bytes exceed the guest's memory limit of {} bytes (limits.memory_bytes)",
            16 << 20
        )
    );
}

/// `(op, verdict, reason, bucket)` of every `kv.*` call decided.
fn kv_receipts(decided: &[DecidedCall<'_>]) -> Vec<(String, Verdict, &'static str, String)> {
    decided
        .iter()
        .filter(|d| d.call.op.to_string().starts_with("kv."))
        .map(|d| {
            (
                d.call.op.to_string(),
                d.verdict,
                d.reason,
                d.call.target.to_string(),
            )
        })
        .collect()
}

/// Runs one task of the kv-probe doing `steps` on `store`: each step's
/// answer, and the `kv.*` receipts.
async fn kv_run(
    cap: &PreparedCapability,
    store: &Arc<dyn TaskStore>,
    steps: Value,
) -> (Value, Vec<(String, Verdict, &'static str, String)>) {
    let task = ProbeTask {
        task_id: "task-kv",
        session_id: "session-kv",
        intent: "probe the key-value store",
        deadline: Duration::from_secs(20),
    };
    let sink = Arc::new(MemorySink::new());
    let governor = cap.standalone_governor(
        task.task_id,
        task.session_id,
        task.deadline,
        &Default::default(),
        sink.clone(),
    );
    let request = task.request(json!({ "steps": steps }), Default::default(), governor);
    let run = cap.run(request, store.clone()).await;
    let RunResult::Completed { outputs, .. } = run.result else {
        panic!("did not complete: {:?}", run.result);
    };
    (outputs["results"].clone(), kv_receipts(&sink.decided()))
}

/// `wasi:keyvalue` from the Rust kv-probe: granted buckets work and keep
/// their values across tasks; a bucket not granted, a write to a
/// read-only one, a value, a key count or a bucket over its limit are
/// denied, each with its receipt naming the operation; two capabilities'
/// buckets of one name never meet.
#[tokio::test(flavor = "multi_thread")]
async fn keyvalue_buckets_are_granted_bounded_and_apart() {
    use Verdict::{Allow, Deny};
    use reason::{ALLOW, BUDGET_EXCEEDED, DENY_TOOL_NOT_FOUND};
    let tmp = tempfile::tempdir().expect("tempdir");
    // The host's own store: what a task sets is durable, across a restart.
    let data = tmp.path().join("data");
    let host_store = || -> Arc<dyn TaskStore> {
        Arc::new(hcp_store::Store::open(&data).expect("the host's store opens"))
    };
    let kv = |name: &str| {
        let manifest = ManifestBuilder::new(name, hcp_tests::KV_PROBE)
            .set(
                "/grants/keyvalue",
                json!([
                    {"bucket": "counts", "access": "read-write"},
                    {"bucket": "reference", "access": "read-only"}
                ]),
            )
            .set("/limits/kv_value_bytes", json!(16))
            .set("/limits/kv_keys", json!(3))
            .set("/limits/kv_bytes", json!(50))
            .load(tmp.path());
        SANDBOX
            .prepare(Arc::new(manifest))
            .expect("kv-probe prepares")
    };
    let (a, b) = (kv("kv-a"), kv("kv-b"));
    // What `hcp surface` prints: the buckets, each with its access.
    let surface = a.report().to_string();
    assert!(
        surface.contains("  keyvalue:\n    counts (read-write)\n    reference (read-only)\n"),
        "{surface}"
    );
    let store = host_store();
    let (r, receipts) = kv_run(
        &a,
        &store,
        json!([
            {"op": "set", "bucket": "counts", "key": "k", "value": "v1"},
            {"op": "increment", "bucket": "counts", "key": "n", "delta": 2},
            {"op": "open", "bucket": "secrets"},
            {"op": "set", "bucket": "reference", "key": "k", "value": "x"},
            {"op": "get", "bucket": "reference", "key": "k"},
            {"op": "set", "bucket": "counts", "key": "big", "size": 17},
            {"op": "set", "bucket": "counts", "key": "gone", "value": "g"},
            {"op": "exists", "bucket": "counts", "key": "gone"},
            {"op": "delete", "bucket": "counts", "key": "gone"},
            {"op": "exists", "bucket": "counts", "key": "gone"},
            {"op": "get", "bucket": "counts", "key": "gone"},
            {"op": "increment", "bucket": "counts", "key": "k"},
        ]),
    )
    .await;
    assert_eq!(r[0], json!({"ok": null}));
    assert_eq!(r[1], json!({"ok": 2}));
    assert_eq!(
        r[2],
        json!({"err": "access-denied"}),
        "a bucket not granted"
    );
    assert_eq!(r[3], json!({"err": "access-denied"}), "a read-only bucket");
    assert_eq!(r[4], json!({"ok": null}));
    let over = r[5]["err"].as_str().expect("err");
    assert!(
        over.contains("BUDGET_EXCEEDED") && over.contains("kv_value_bytes"),
        "{over}"
    );
    assert_eq!(r[6], json!({"ok": null}));
    assert_eq!(r[7], json!({"ok": true}));
    assert_eq!(r[8], json!({"ok": null}));
    assert_eq!(r[9], json!({"ok": false}));
    assert_eq!(r[10], json!({"ok": null}));
    assert_eq!(
        r[11],
        json!({"err": "other: the value is not a decimal u64"})
    );
    // Every call has its receipt, naming the operation and the bucket (each
    // step opens its bucket first).
    let rc = |op: &str, verdict, reason, bucket: &str| {
        (op.to_owned(), verdict, reason, bucket.to_owned())
    };
    let open = |bucket| rc("kv.open", Allow, ALLOW, bucket);
    assert_eq!(
        receipts,
        [
            open("counts"),
            rc("kv.set", Allow, ALLOW, "counts"),
            open("counts"),
            rc("kv.increment", Allow, ALLOW, "counts"),
            rc("kv.open", Deny, DENY_TOOL_NOT_FOUND, "secrets"),
            open("reference"),
            rc("kv.set", Deny, DENY_TOOL_NOT_FOUND, "reference"),
            open("reference"),
            rc("kv.get", Allow, ALLOW, "reference"),
            open("counts"),
            rc("kv.set", Deny, BUDGET_EXCEEDED, "counts"),
            open("counts"),
            rc("kv.set", Allow, ALLOW, "counts"),
            open("counts"),
            rc("kv.exists", Allow, ALLOW, "counts"),
            open("counts"),
            rc("kv.delete", Allow, ALLOW, "counts"),
            open("counts"),
            rc("kv.exists", Allow, ALLOW, "counts"),
            open("counts"),
            rc("kv.get", Allow, ALLOW, "counts"),
            open("counts"),
            rc("kv.increment", Allow, ALLOW, "counts"),
        ]
    );
    // The next task, after the host restarted, sees the values; the key
    // count and the total bytes hold.
    drop(store);
    let store = host_store();
    let (r, receipts) = kv_run(
        &a,
        &store,
        json!([
            {"op": "get", "bucket": "counts", "key": "k"},
            {"op": "increment", "bucket": "counts", "key": "n", "delta": 1},
            {"op": "set", "bucket": "counts", "key": "third", "value": "3"},
            {"op": "set", "bucket": "counts", "key": "fourth", "value": "4"},
            {"op": "set", "bucket": "counts", "key": "k", "size": 16},
            {"op": "set", "bucket": "counts", "key": "third", "size": 16},
            {"op": "set", "bucket": "counts", "key": "n", "size": 16},
            {"op": "list", "bucket": "counts"},
        ]),
    )
    .await;
    assert_eq!(r[0], json!({"ok": "v1"}), "a value survives the task");
    assert_eq!(r[1], json!({"ok": 3}));
    assert_eq!(r[2], json!({"ok": null}));
    let keys = r[3]["err"].as_str().expect("err");
    assert!(keys.contains("kv_keys"), "{keys}");
    assert_eq!(r[4], json!({"ok": null}));
    assert_eq!(r[5], json!({"ok": null}));
    let total = r[6]["err"].as_str().expect("err");
    assert!(total.contains("kv_bytes"), "{total}");
    assert_eq!(r[7], json!({"ok": ["k", "n", "third"]}));
    let denied: Vec<_> = receipts.iter().filter(|r| r.1 == Deny).cloned().collect();
    assert_eq!(
        denied,
        [
            rc("kv.set", Deny, BUDGET_EXCEEDED, "counts"),
            rc("kv.set", Deny, BUDGET_EXCEEDED, "counts"),
        ]
    );
    assert_eq!(
        receipts.last(),
        Some(&rc("kv.list_keys", Allow, ALLOW, "counts"))
    );
    // Another capability's bucket of the same name is its own.
    let (r, _) = kv_run(
        &b,
        &store,
        json!([
            {"op": "exists", "bucket": "counts", "key": "k"},
            {"op": "list", "bucket": "counts"},
        ]),
    )
    .await;
    assert_eq!(r[0], json!({"ok": false}));
    assert_eq!(r[1], json!({"ok": []}));
}
