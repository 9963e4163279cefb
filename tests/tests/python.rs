//! Python capabilities through the same host as the Rust ones: the example
//! (`plugins/python/word-count`, built with the SDK `plugins/python/hcp_guest`
//! for the world `basic`) runs with its grants, its calls decided by the PEP
//! and recorded; a hostile Python guest (`tests/guests/python/probe`) is
//! denied what it was not granted, with receipts; a Python guest built for
//! the world `capability` imports `instrument` and `hid` and is refused
//! before it is compiled; a Python guest of the world `with-keyvalue`
//! (`tests/guests/python/kv-probe`) keeps values in its granted buckets only.
//!
//! Each component is built once per test binary with componentize-py
//! (`pip install componentize-py==0.25.1`; `scripts/test` installs it), and
//! cached under `target/python-guests/` by the digest of everything the
//! build reads, so a repeated run builds nothing; their compiled code is in
//! the shared compile cache (`target/hcp-test-cache`).

use hcp_contracts::message::ErrorCode;
use hcp_contracts::{DataClass, Manifest, RiskLevel};
use hcp_receipts::{Verdict, reason};
use hcp_sandbox::audit::{GrantedBy, ImportVerdict};
use hcp_sandbox::pep::{DecidedCall, MemorySink, Op};
use hcp_sandbox::{
    MemoryStore, PrepareError, PreparedCapability, RunResult, Sandbox, SandboxConfig, TaskRequest,
    TaskRun, TaskStore,
};
use hcp_tests::{REPO_ROOT, cache_dir, listener};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant};

/// The componentize-py release the SDK is written and tested against.
const COMPONENTIZE_PY: &str = "componentize-py 0.25.1";

static SANDBOX: LazyLock<Sandbox> = LazyLock::new(|| {
    Sandbox::new(SandboxConfig {
        cache_dir: Some(cache_dir()),
        pool_instances: 8,
        ..SandboxConfig::default()
    })
    .expect("sandbox")
});

fn repo(rel: &str) -> PathBuf {
    Path::new(REPO_ROOT).join(rel)
}

/// `(name, bytes)` of every file ending in `ext` directly in `dir`, sorted.
fn files(dir: &Path, ext: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("read"))
        })
        .collect();
    out.sort();
    out
}

/// Builds `app.py` of `app_dir` with the Python SDK for `world`, or takes
/// the component an earlier build made from the same inputs.
fn build(app_dir: &str, world: &str) -> PathBuf {
    let version = Command::new("componentize-py")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| {
            panic!(
                "componentize-py is not installed: pip install componentize-py==0.25.1 \
                 (scripts/test installs it)"
            )
        });
    assert_eq!(
        version, COMPONENTIZE_PY,
        "pip install componentize-py==0.25.1"
    );
    let app = repo(app_dir);
    let sdk = repo("plugins/python");
    let wit = repo("wit");
    // Everything the build reads, by name and content.
    let mut inputs = format!("{version}\nworld {world}\n").into_bytes();
    for (dir, ext) in [(&wit, "wit"), (&sdk.join("hcp_guest"), "py"), (&app, "py")] {
        for (name, bytes) in files(dir, ext) {
            inputs.extend_from_slice(
                format!("\n{} {name} {}\n", dir.display(), bytes.len()).as_bytes(),
            );
            inputs.extend_from_slice(&bytes);
        }
    }
    let digest = hcp_contracts::jcs::sha256_bytes_tagged(&inputs);
    let out_dir = repo("target/python-guests");
    let name = app_dir.rsplit('/').next().expect("name");
    let wasm = out_dir.join(format!("{name}-{}.wasm", &digest["sha256:".len()..][..16]));
    if wasm.is_file() {
        return wasm;
    }
    std::fs::create_dir_all(&out_dir).expect("mkdir target/python-guests");
    let partial = wasm.with_extension(format!("{}.partial", std::process::id()));
    // componentize-py leaves `__pycache__` next to the sources it reads:
    // it reads copies.
    let sources = tempfile::tempdir().expect("tempdir");
    for (dir, ext, into) in [
        (&app, "py", "app"),
        (&sdk.join("hcp_guest"), "py", "hcp_guest"),
    ] {
        let into = sources.path().join(into);
        std::fs::create_dir(&into).expect("mkdir");
        for (name, bytes) in files(dir, ext) {
            std::fs::write(into.join(name), bytes).expect("copy");
        }
    }
    let started = Instant::now();
    let out = Command::new("componentize-py")
        .arg("-d")
        .arg(&wit)
        .args(["-w", world, "componentize", "app", "-p"])
        .arg(sources.path().join("app"))
        .arg("-p")
        .arg(sources.path())
        .arg("-o")
        .arg(&partial)
        .output()
        .expect("run componentize-py");
    assert!(
        out.status.success(),
        "componentize-py failed for {app_dir}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &wasm).expect("rename");
    eprintln!(
        "built {} ({} bytes) in {:.1?}",
        wasm.display(),
        std::fs::metadata(&wasm).map(|m| m.len()).unwrap_or(0),
        started.elapsed()
    );
    wasm
}

fn word_count() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("plugins/python/word-count", "basic"))
}

fn probe() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("tests/guests/python/probe", "basic"))
}

fn kv_probe() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("tests/guests/python/kv-probe", "with-keyvalue"))
}

fn full_world() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("tests/guests/python/full-world", "capability"))
}

/// A manifest document, its component at `component`, loaded from `base`.
fn load(mut doc: Value, component: &Path, base: &Path) -> Manifest {
    doc["component"]["path"] = json!(component);
    hcp_contracts::manifest::from_value(
        doc,
        base,
        None,
        "test manifest",
        hcp_contracts::LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("test manifest invalid: {e}"))
}

/// A manifest for a test guest: R1, no grants but `grants`.
fn guest_manifest(name: &str, component: &Path, grants: Value, base: &Path) -> Manifest {
    load(
        json!({
            "capability": {
                "name": name,
                "version": "1.0.0",
                "description": format!("test capability {name}"),
                "input_schema": {"type": "object"},
                "output_schema": {"type": "object"},
                "safety": {
                    "risk_ceiling": "R1",
                    "requires_human_approval": false,
                    "involves_physical_resources": false
                },
                "constraints": {"max_duration": "PT30S", "concurrent_limit": 4}
            },
            "component": {"path": "", "world": "hcp:capability/capability@1.0.0"},
            "grants": grants,
            "limits": {"memory_bytes": 128 << 20}
        }),
        component,
        base,
    )
}

/// Runs one task with a governor recording into a fresh sink.
async fn run(prepared: &PreparedCapability, inputs: Value) -> (TaskRun, Vec<DecidedCall<'static>>) {
    run_in(prepared, inputs, Arc::new(MemoryStore::new())).await
}

/// [`run`] on the host's store `store` (what the task keeps there stays).
async fn run_in(
    prepared: &PreparedCapability,
    inputs: Value,
    store: Arc<dyn TaskStore>,
) -> (TaskRun, Vec<DecidedCall<'static>>) {
    let deadline = Duration::from_secs(60);
    let sink = Arc::new(MemorySink::new());
    let request = TaskRequest {
        task_id: "task-py".into(),
        session_id: "session-py".into(),
        caller_id: "tester".into(),
        intent: "a python task".into(),
        inputs,
        constraints: json!({}),
        context: None,
        resume: None,
        risk_level: RiskLevel::R1,
        data_classification: DataClass::T1,
        deadline,
        envelope: Default::default(),
        governor: prepared.standalone_governor(
            "task-py",
            "session-py",
            deadline,
            &Default::default(),
            sink.clone(),
        ),
        hid: None,
    };
    let run = prepared.run(request, store).await;
    (run, sink.decided())
}

fn outputs(run: &TaskRun) -> &Value {
    match &run.result {
        RunResult::Completed { outputs, .. } => outputs,
        RunResult::Failed(f) => panic!("failed: {f:?}\nlog: {:#?}", run.log.entries),
    }
}

fn verdicts(decided: &[DecidedCall<'_>], op: Op) -> Vec<(Verdict, &'static str, String)> {
    decided
        .iter()
        .filter(|d| d.call.op == op)
        .map(|d| (d.verdict, d.reason, d.call.target.to_string()))
        .collect()
}

fn granted_by(prepared: &PreparedCapability, import: &str) -> GrantedBy {
    let line = prepared
        .report()
        .imports
        .iter()
        .find(|i| i.name.starts_with(import))
        .unwrap_or_else(|| panic!("no import {import}"));
    match &line.verdict {
        ImportVerdict::Allowed { granted_by } => *granted_by,
        ImportVerdict::Refused { reason } => panic!("{import} refused: {reason}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_example_runs_with_its_grants_and_receipts() {
    let dir = repo("plugins/python/word-count");
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
    )
    .expect("json");
    let manifest = load(doc, word_count(), &dir);
    let prepared = tokio::task::spawn_blocking(move || SANDBOX.prepare(Arc::new(manifest)))
        .await
        .expect("join")
        .expect("the example prepares");
    // Its own directory is granted; the sockets Python's runtime imports
    // are linked inert.
    assert_eq!(
        granted_by(&prepared, "wasi:filesystem/preopens@"),
        GrantedBy::Filesystem
    );
    for sockets in ["wasi:sockets/tcp-create-socket@", "wasi:sockets/udp@"] {
        assert_eq!(granted_by(&prepared, sockets), GrantedBy::NetworkInert);
    }
    let text = prepared.report().to_string();
    assert!(
        text.contains("verdict: allowed (every import is within the grants; 7 linked, inert)"),
        "{text}"
    );

    let (run, decided) = run(&prepared, json!({"directory": "/data"})).await;
    let out = outputs(&run);
    let mut expected = Vec::new();
    for name in ["notes.md", "sample.txt"] {
        let text = std::fs::read_to_string(dir.join("data").join(name)).expect("read");
        expected.push(json!({
            "name": name,
            "lines": text.lines().count(),
            "words": text.split_whitespace().count(),
            "bytes": text.len(),
        }));
    }
    assert_eq!(out["files"], json!(expected), "{out:#}");
    let report = out["report"].as_str().expect("report");
    assert_eq!(report, "hcp://session-py/artifacts/word-count.csv");
    assert_eq!(run.artifacts.len(), 1);
    assert_eq!(run.artifacts[0].mime_type, "text/csv");
    let counted: Vec<_> = run
        .log
        .entries
        .iter()
        .filter(|e| e.message == "counted")
        .map(|e| e.fields.clone())
        .collect();
    assert_eq!(counted.len(), 2, "{:#?}", run.log.entries);
    assert_eq!(counted[0][0], ("file".to_owned(), "notes.md".to_owned()));

    // Every call was decided, and recorded: each file opened, each log
    // line, the artifact.
    let opened = verdicts(&decided, Op::FsOpen);
    for file in ["/data/notes.md", "/data/sample.txt"] {
        assert!(
            opened.contains(&(Verdict::Allow, reason::ALLOW, file.into())),
            "{opened:?}"
        );
    }
    assert!(opened.iter().all(|v| v.0 == Verdict::Allow), "{opened:?}");
    assert_eq!(verdicts(&decided, Op::LogWrite).len(), 3);
    let created: Vec<_> = verdicts(&decided, Op::ArtifactCreate)
        .into_iter()
        .map(|(verdict, reason, _)| (verdict, reason))
        .collect();
    assert_eq!(created, [(Verdict::Allow, reason::ALLOW)]);
}

/// The probe with `/data` granted read-only (a file in it, a secret next
/// to it) and no network.
struct Probe {
    _tmp: tempfile::TempDir,
    prepared: PreparedCapability,
}

impl Probe {
    async fn new(grants: Value) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).expect("mkdir");
        std::fs::write(data.join("hello.txt"), "hi").expect("write");
        std::fs::write(tmp.path().join("secret.txt"), "SECRET").expect("write");
        let grants = serde_json::from_str(
            &grants
                .to_string()
                .replace("$DATA", &data.display().to_string()),
        )
        .expect("grants");
        let manifest = guest_manifest("py-probe", probe(), grants, tmp.path());
        let prepared = tokio::task::spawn_blocking(move || SANDBOX.prepare(Arc::new(manifest)))
            .await
            .expect("join")
            .expect("the probe prepares");
        Self {
            _tmp: tmp,
            prepared,
        }
    }

    /// Runs `inputs`; what the guest saw, and what the PEP decided.
    async fn op(&self, inputs: Value) -> (Value, Vec<DecidedCall<'static>>) {
        let (run, decided) = run(&self.prepared, inputs).await;
        (outputs(&run).clone(), decided)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_python_guest_is_denied_what_it_was_not_granted_with_receipts() {
    let p = Probe::new(json!({
        "filesystem": [{"path": "$DATA", "guest_path": "/data", "access": "read-only"}]
    }))
    .await;
    assert_eq!(
        granted_by(&p.prepared, "wasi:sockets/tcp-create-socket@"),
        GrantedBy::NetworkInert
    );

    // What is granted works.
    let (out, decided) = p
        .op(json!({"action": "read", "path": "/data/hello.txt"}))
        .await;
    assert_eq!(out, json!({"ok": true, "value": "hi"}));
    assert_eq!(
        verdicts(&decided, Op::FsOpen),
        [(Verdict::Allow, reason::ALLOW, "/data/hello.txt".into())]
    );

    // Out of the granted directory: denied by the PEP, with a receipt.
    let (out, decided) = p
        .op(json!({"action": "read", "path": "/data/../secret.txt"}))
        .await;
    assert_eq!(out["ok"], false);
    assert_eq!(
        out["error"],
        "PermissionError: [Errno 2] Permission denied: '/data/../secret.txt'"
    );
    assert_eq!(
        verdicts(&decided, Op::FsOpen),
        [(
            Verdict::Deny,
            reason::DENY_IDENTITY_UNAUTHORIZED,
            "/secret.txt".into()
        )]
    );

    // A write into a read-only grant: denied, with a receipt.
    let (out, decided) = p
        .op(json!({"action": "write", "path": "/data/new.txt"}))
        .await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(
        verdicts(&decided, Op::FsOpen),
        [(
            Verdict::Deny,
            reason::DENY_IDENTITY_UNAUTHORIZED,
            "/data/new.txt".into()
        )]
    );

    // A path under no granted directory reaches the host through the
    // guest's empty `/`: denied by the PEP, with a receipt.
    let (out, decided) = p.op(json!({"action": "read", "path": "/etc/passwd"})).await;
    assert_eq!(
        out["error"],
        "PermissionError: [Errno 2] Permission denied: '/etc/passwd'"
    );
    assert_eq!(
        verdicts(&decided, Op::FsOpen),
        [(
            Verdict::Deny,
            reason::DENY_IDENTITY_UNAUTHORIZED,
            "/etc/passwd".into()
        )]
    );

    // A connection, with no network granted: the lookup of the address
    // (Python's `create_connection` resolves even a numeric host) is
    // denied, with a receipt; a socket made directly is denied, with a
    // receipt.
    let port = listener("never-reached").port();
    let (out, decided) = p
        .op(json!({"action": "connect", "host": "127.0.0.1", "port": port}))
        .await;
    assert_eq!(
        out,
        json!({"ok": false, "error": "PermissionError: [Errno 2] Permission denied"})
    );
    assert_eq!(
        verdicts(&decided, Op::NetLookup),
        [(
            Verdict::Deny,
            reason::DENY_TOOL_NOT_FOUND,
            "127.0.0.1".into()
        )]
    );
    let (out, decided) = p
        .op(json!({"action": "socket", "host": "127.0.0.1", "port": port}))
        .await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(
        verdicts(&decided, Op::NetSocket),
        [(Verdict::Deny, reason::DENY_TOOL_NOT_FOUND, "ipv4".into())],
        "{out}"
    );
    assert!(verdicts(&decided, Op::NetConnect).is_empty());

    // No environment: nothing of the host's.
    let (out, _) = p.op(json!({"action": "environ"})).await;
    assert_eq!(out, json!({"ok": true, "value": {}}));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_nothing_granted_files_and_sockets_are_inert() {
    let p = Probe::new(json!({})).await;
    for (import, by) in [
        ("wasi:filesystem/types@", GrantedBy::FilesystemInert),
        ("wasi:filesystem/preopens@", GrantedBy::FilesystemInert),
        ("wasi:sockets/tcp@", GrantedBy::NetworkInert),
        ("wasi:sockets/ip-name-lookup@", GrantedBy::NetworkInert),
    ] {
        assert_eq!(granted_by(&p.prepared, import), by, "{import}");
    }
    let (out, decided) = p.op(json!({"action": "list", "path": "/"})).await;
    assert_eq!(out["ok"], false, "{out}");
    assert!(verdicts(&decided, Op::FsOpen).is_empty(), "{decided:?}");

    let (out, decided) = p
        .op(json!({"action": "lookup", "host": "example.com"}))
        .await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(
        verdicts(&decided, Op::NetLookup),
        [(
            Verdict::Deny,
            reason::DENY_TOOL_NOT_FOUND,
            "example.com".into()
        )]
    );
}

/// Every file under `dir`, recursively.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(read) = std::fs::read_dir(dir) {
        for e in read.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(entries(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn an_ungranted_instrument_refuses_a_python_guest_before_it_is_compiled() {
    let component = full_world();
    // A sandbox of its own, its compile cache empty: a refusal must leave
    // it so, an allowed component does not.
    let cache = tempfile::tempdir().expect("tempdir");
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(cache.path().join("cache")),
        pool_instances: 2,
        ..SandboxConfig::default()
    })
    .expect("sandbox");
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifest = guest_manifest("py-full", component, json!({}), tmp.path());
    let started = Instant::now();
    let err = sandbox
        .prepare(Arc::new(manifest.clone()))
        .expect_err("refused");
    let elapsed = started.elapsed();
    let PrepareError::Refused(report) = &err else {
        panic!("{err}");
    };
    let refused: Vec<&str> = report.refused().map(|(name, _)| name).collect();
    assert_eq!(
        refused,
        [
            "hcp:capability/instrument@1.0.0",
            "hcp:capability/hid@1.0.0"
        ]
    );
    assert_eq!(
        err.to_string(),
        "py-full@1.0.0: refused: the component imports interfaces its manifest does not grant:\n  \
         hcp:capability/instrument@1.0.0: no instrument is granted (grants.instruments)\n  \
         hcp:capability/hid@1.0.0: the hid device is not granted (grants.devices)"
    );
    assert!(!sandbox.audit(&manifest).expect("audit").allowed);
    assert!(
        entries(cache.path()).is_empty(),
        "a refused component was compiled: {:?}",
        entries(cache.path())
    );
    eprintln!(
        "refused a {} byte component in {elapsed:.1?}",
        manifest.component.bytes.len()
    );

    // The same sandbox compiles, and caches, what it allows.
    let trivial = hcp_tests::ManifestBuilder::new("trivial", hcp_tests::TRIVIAL).load(tmp.path());
    sandbox
        .prepare(Arc::new(trivial))
        .expect("trivial prepares");
    assert!(
        !entries(cache.path()).is_empty(),
        "the cache is not written"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_saves_checkpoints_reports_warnings_and_fails_with_a_code() {
    let p = Probe::new(json!({})).await;
    let (out, decided) = p.op(json!({"action": "checkpoint"})).await;
    assert_eq!(
        out,
        json!({"ok": true, "value": {"id": "ckpt-001", "state": {"done": 3}}})
    );
    assert_eq!(verdicts(&decided, Op::CheckpointSave).len(), 1);
    assert_eq!(verdicts(&decided, Op::CheckpointLoad).len(), 1);

    let (warned, _) = run(&p.prepared, json!({"action": "warn"})).await;
    let RunResult::Completed { warnings, .. } = &warned.result else {
        panic!("{:?}", warned.result);
    };
    assert_eq!(warnings, &["half of the input was empty"]);

    // A host error the guest catches: the denial, with its receipt's
    // reason, as a HostError.
    let (out, decided) = p
        .op(json!({"action": "artifact", "name": "../escape"}))
        .await;
    assert_eq!(
        out["error"],
        "HostError: denied (DENY_ARGS_INVALID): artifact name \"../escape\" must be 1-128 \
         characters from [A-Za-z0-9._-], not starting with '.'"
    );
    assert_eq!(
        verdicts(&decided, Op::ArtifactCreate)[0].1,
        reason::DENY_ARGS_INVALID
    );

    // A Failure: task_failed with its code, phase, step and partial outputs.
    let (failed, _) = run(&p.prepared, json!({"action": "fail"})).await;
    let RunResult::Failed(f) = &failed.result else {
        panic!("{:?}", failed.result);
    };
    assert_eq!(f.code, ErrorCode::InputError);
    assert_eq!(f.message, "the input names no file");
    assert_eq!(f.phase.as_deref(), Some("reading"));
    assert_eq!(f.step, Some(2));
    assert!(f.recoverable);
    assert_eq!(f.partial_outputs, Some(json!({"read": 0})));

    // Any other exception traps: internal_error, its traceback in the log.
    let (trapped, _) = run(&p.prepared, json!({"action": "nonsense"})).await;
    let RunResult::Failed(f) = &trapped.result else {
        panic!("{:?}", trapped.result);
    };
    assert_eq!(f.code, ErrorCode::InternalError, "{f:?}");
    assert!(
        trapped
            .log
            .entries
            .iter()
            .any(|e| e.message == "ValueError: unknown action 'nonsense'"),
        "{:#?}",
        trapped.log.entries
    );
}

/// `wasi:keyvalue` from a Python guest (the world `with-keyvalue`): the
/// calls of a granted bucket work, each with its receipt naming the
/// operation; values stay across tasks; a bucket not granted, a write to a
/// read-only one and a value over `limits.kv_value_bytes` are denied, with
/// a DENY receipt each.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_guest_keeps_values_in_its_granted_buckets_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut manifest = guest_manifest(
        "py-kv",
        kv_probe(),
        json!({"keyvalue": [
            {"bucket": "notes", "access": "read-write"},
            {"bucket": "shared", "access": "read-only"}
        ]}),
        tmp.path(),
    );
    manifest.limits.kv_value_bytes = 8;
    let prepared = tokio::task::spawn_blocking(move || SANDBOX.prepare(Arc::new(manifest)))
        .await
        .expect("join")
        .expect("the kv probe prepares");
    assert_eq!(
        granted_by(&prepared, "wasi:keyvalue/store@"),
        GrantedBy::Grant(hcp_contracts::interfaces::Grant::Keyvalue)
    );
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let steps = |steps: Value| json!({ "steps": steps });

    let (run, decided) = run_in(
        &prepared,
        steps(json!([
            {"op": "set", "bucket": "notes", "key": "greeting", "value": "hello"},
            {"op": "get", "bucket": "notes", "key": "greeting"},
            {"op": "increment", "bucket": "notes", "key": "count", "delta": 5},
            {"op": "set", "bucket": "notes", "key": "tmp", "value": "t"},
            {"op": "exists", "bucket": "notes", "key": "tmp"},
            {"op": "delete", "bucket": "notes", "key": "tmp"},
            {"op": "exists", "bucket": "notes", "key": "tmp"},
            {"op": "list", "bucket": "notes"},
        ])),
        store.clone(),
    )
    .await;
    assert_eq!(
        outputs(&run)["results"],
        json!([
            {"ok": null}, {"ok": "hello"}, {"ok": 5}, {"ok": null},
            {"ok": true}, {"ok": null}, {"ok": false}, {"ok": ["count", "greeting"]},
        ])
    );
    for (op, n) in [
        (Op::KvOpen, 8),
        (Op::KvSet, 2),
        (Op::KvGet, 1),
        (Op::KvIncrement, 1),
        (Op::KvExists, 2),
        (Op::KvDelete, 1),
        (Op::KvListKeys, 1),
    ] {
        let v = verdicts(&decided, op);
        assert_eq!(v.len(), n, "{op}: {v:?}");
        assert!(
            v.iter()
                .all(|r| *r == (Verdict::Allow, reason::ALLOW, "notes".to_owned())),
            "{op}: {v:?}"
        );
    }

    // The next task sees the values; what is not granted is denied.
    let (run, decided) = run_in(
        &prepared,
        steps(json!([
            {"op": "get", "bucket": "notes", "key": "greeting"},
            {"op": "increment", "bucket": "notes", "key": "count", "delta": 1},
            {"op": "get", "bucket": "secrets", "key": "k"},
            {"op": "set", "bucket": "shared", "key": "k", "value": "v"},
            {"op": "set", "bucket": "notes", "key": "big", "size": 9},
            {"op": "get", "bucket": "notes", "key": "big"},
        ])),
        store.clone(),
    )
    .await;
    let results = &outputs(&run)["results"];
    assert_eq!(
        results[0],
        json!({"ok": "hello"}),
        "a value survives the task"
    );
    assert_eq!(results[1], json!({"ok": 6}));
    assert_eq!(results[2], json!({"err": "access-denied"}));
    assert_eq!(results[3], json!({"err": "access-denied"}));
    let over = results[4]["err"].as_str().expect("err");
    assert!(
        over.starts_with("other: denied (BUDGET_EXCEEDED)") && over.contains("kv_value_bytes"),
        "{over}"
    );
    assert_eq!(results[5], json!({"ok": null}), "nothing was written");
    assert!(
        verdicts(&decided, Op::KvOpen).contains(&(
            Verdict::Deny,
            reason::DENY_TOOL_NOT_FOUND,
            "secrets".into()
        )),
        "{decided:?}"
    );
    assert_eq!(
        verdicts(&decided, Op::KvSet),
        [
            (Verdict::Deny, reason::DENY_TOOL_NOT_FOUND, "shared".into()),
            (Verdict::Deny, reason::BUDGET_EXCEEDED, "notes".into()),
        ]
    );
}
