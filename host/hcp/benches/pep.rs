//! The PEP's hot path, measured side by side in one run (release profile):
//!
//! 1. `decide`: the decision alone (`hcp_policy::pep::decide` over a
//!    compiled scope), for one `log.write` call and one denied `fs.open`.
//! 2. `allow path`: `PolicyGovernor::check` of a granted `log.write`, its
//!    verdict handed to the host's receipt pipeline (`evidence::Recorder`,
//!    SQLite in a temporary data directory). Per-call latency (p50, p99) is
//!    what the guest waits for; the durable cost is the wall time of all
//!    calls and the `flush` that makes their receipts durable and covered
//!    by a signed checkpoint, divided by the number of calls.
//! 3. `deny path`: the same for an `fs.open` outside the grants, whose
//!    receipt the writer signs one by one (Ed25519).
//! 4. `plugin`: a capability making 100,000 host calls (`log.write`) with
//!    full enforcement (PEP, a receipt for every call, durable before the
//!    task is answered) against the same capability with enforcement off,
//!    interleaved rounds; the ratio of medians and the added cost per call.
//!
//! 5. `realistic`: a capability that reads 16 files of 16 KiB from its
//!    granted directory, logs each, and writes 4 artifacts of 64 KiB,
//!    enforced against off as in 4.
//!
//! Run: `cargo bench -p hcp --bench pep` (`HCP_BENCH_CALLS` changes the
//! number of micro-benchmark calls, 200,000 by default;
//! `HCP_BENCH_PLUGIN_CALLS` the plugin's, 100,000).

mod common;

use common::{median, range};
use hcp::evidence::Recorder;
use hcp::hostkey::HostIdentity;
use hcp::store::Store;
use hcp_contracts::{DataClass, RiskLevel};
use hcp_policy::PolicySet;
use hcp_policy::pep::{BudgetCaps, Call, Counters, FsAccess, Op, SessionFacts};
use hcp_receipts::{HostKey, SigningPolicy};
use hcp_sandbox::pep::{Governor, NoReceipts, PolicyGovernor, UNLIMITED, now_ms};
use hcp_sandbox::{
    MemoryStore, PreparedCapability, RunResult, Sandbox, SandboxConfig, TaskRequest, TaskStore,
};
use hcp_tests::{ManifestBuilder, REPO_ROOT};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Host calls of the plugin task (`HCP_BENCH_PLUGIN_CALLS`, 100,000 by
/// default).
fn plugin_calls() -> u64 {
    std::env::var("HCP_BENCH_PLUGIN_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn us(d: Duration) -> String {
    format!("{:.2} µs", d.as_secs_f64() * 1e6)
}

struct Lab {
    _dir: tempfile::TempDir,
    recorder: Recorder,
    policy: PolicySet,
    manifest: Arc<hcp_contracts::Manifest>,
}

fn facts(manifest: &hcp_contracts::Manifest, session: &str) -> SessionFacts {
    SessionFacts {
        budgets: BudgetCaps {
            artifacts: UNLIMITED,
            bytes: UNLIMITED,
            host_calls: UNLIMITED,
        },
        caller: "harness-local-01".into(),
        capability: manifest.id(),
        data_classification: DataClass::T1,
        envelope: manifest.doc.safety_envelope.clone(),
        expires_at_ms: now_ms() + 3_600_000,
        limits: (&manifest.limits).into(),
        risk_level: RiskLevel::R1,
        session_id: session.into(),
        surface: hcp_policy::pep::Surface::of(&manifest.grants),
        task_id: format!("task-{session}"),
    }
}

impl Lab {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let granted = dir.path().join("granted");
        std::fs::create_dir_all(&granted).expect("mkdir");
        // What the realistic plugin reads.
        for i in 0..REALISTIC_FILES {
            let line = format!("line of part {i}: some measured values 1.25 2.5 5.0\n");
            let text = line.repeat(REALISTIC_FILE_BYTES / line.len() + 1);
            std::fs::write(
                granted.join(format!("part-{i}.txt")),
                &text[..REALISTIC_FILE_BYTES],
            )
            .expect("write a file of the grant");
        }
        let store = Arc::new(Store::open(&data).expect("store"));
        // As a host that runs tasks: the write-ahead log checkpointed by a
        // thread of its own.
        store.checkpoint_in_background().expect("checkpointer");
        let key = HostKey::generate().expect("key");
        let host_id = format!("host-{}", key.key_id());
        let recorder = Recorder::open(
            store,
            HostIdentity { key, host_id },
            SigningPolicy::default(),
        )
        .expect("recorder");
        let policy = PolicySet::load(&Path::new(REPO_ROOT).join("policies")).expect("policy");
        let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE)
            .set("/capability/constraints/concurrent_limit", json!(4))
            .set(
                "/grants/filesystem",
                json!([{"path": granted, "guest_path": "/data", "access": "read-only"}]),
            )
            .set("/grants/network", json!([{"host": "localhost", "port": 9}]))
            .set("/grants/instruments", json!(["cvd-rig"]))
            .load(dir.path());
        Self {
            _dir: dir,
            recorder,
            policy,
            manifest: Arc::new(manifest),
        }
    }

    fn governor(&self, session: &str) -> PolicyGovernor {
        hcp::engine::open_session(
            &self.recorder,
            &self.policy,
            facts(&self.manifest, session),
            b"{}",
            Vec::new(),
        )
        .expect("session")
    }
}

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn decide_only(lab: &Lab, n: usize) {
    let g = lab.governor("decide");
    let scope = g.scope().clone();
    let fields = Vec::new();
    for (name, call) in [
        ("allow log.write", Call::log("debug", "x", &fields)),
        (
            "deny fs.open",
            Call::fs(Op::FsOpen, "/etc/passwd".into(), FsAccess::Read, None),
        ),
    ] {
        let counters = Counters::default();
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            std::hint::black_box(hcp_policy::pep::decide(
                &scope,
                &counters,
                std::hint::black_box(&call),
                1,
            ));
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "decide           {name:<16} p50 {:>10}  p99 {:>10}",
            us(percentile(&times, 0.5)),
            us(percentile(&times, 0.99))
        );
    }
}

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn governed(lab: &Lab, n: usize, deny: bool) {
    let g = lab.governor(if deny { "deny" } else { "allow" });
    let fields = Vec::new();
    let call = if deny {
        Call::fs(Op::FsOpen, "/etc/passwd".into(), FsAccess::Read, None)
    } else {
        Call::log("debug", "x", &fields)
    };
    // What a deny cannot go below: its receipt's signature, one after the
    // other (each receipt's hash covers its signature, and the next one's
    // signed form names that hash). Measured first, while the writer and
    // the checkpoint thread are idle.
    let signing = deny.then(|| signing_alone(n.min(20_000)));
    // Warm up (and seal what the warm-up wrote).
    for _ in 0..1000 {
        let _ = g.check(&call);
    }
    lab.recorder.flush().expect("flush");
    let mut times = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        let verdict = g.check(std::hint::black_box(&call));
        times.push(t.elapsed());
        assert_eq!(verdict.is_ok(), !deny);
    }
    let handed = start.elapsed();
    lab.recorder.flush().expect("flush");
    let durable = start.elapsed();
    times.sort();
    println!(
        "{:<16} {:<16} p50 {:>10}  p99 {:>10}  | durable: {} per call ({} calls + flush in {:.3} s; hot path alone {:.3} s)",
        if deny { "deny path" } else { "allow path" },
        if deny { "fs.open" } else { "log.write" },
        us(percentile(&times, 0.5)),
        us(percentile(&times, 0.99)),
        us(durable / u32::try_from(n).unwrap_or(u32::MAX)),
        n,
        durable.as_secs_f64(),
        handed.as_secs_f64(),
    );
    let per_call = durable.as_secs_f64() * 1e6 / n as f64;
    let hot = percentile(&times, 0.5).as_secs_f64() * 1e6;
    let (row, target) = if deny {
        ("durable signed deny", 20.0)
    } else {
        ("durable allow receipt (writer throughput)", 2.0)
    };
    let floor = match signing {
        Some(signing) => format!(
            "; signing one receipt alone (Ed25519, {DENY_SIGNED_BYTES} bytes): p50 {signing:.2} µs"
        ),
        None => String::new(),
    };
    println!(
        "row | {row} | {per_call:.2} µs per call | the call as the guest waits for it: p50 {hot:.2} µs{floor} | {:.2}x the target {target} µs |",
        per_call / target
    );
}

/// About the size of what a deny receipt's signature covers (the domain
/// and its canonical form with `signature` null).
const DENY_SIGNED_BYTES: usize = 660;

/// The median time of one Ed25519 signature over a deny receipt's bytes.
fn signing_alone(n: usize) -> f64 {
    let key = HostKey::generate().expect("key");
    let mut message = vec![b'x'; DENY_SIGNED_BYTES];
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        // A different message each time, as each receipt is.
        message[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let t = Instant::now();
        std::hint::black_box(key.sign(std::hint::black_box(&message)));
        times.push(t.elapsed());
    }
    times.sort();
    percentile(&times, 0.5).as_secs_f64() * 1e6
}

fn request(session: &str, governor: Arc<dyn Governor>, inputs: &Value) -> TaskRequest {
    TaskRequest {
        governor,
        task_id: format!("task-{session}"),
        session_id: session.into(),
        caller_id: "harness-local-01".into(),
        intent: "benchmark".into(),
        inputs: inputs.clone(),
        constraints: json!({}),
        context: None,
        resume: None,
        risk_level: RiskLevel::R1,
        data_classification: DataClass::T1,
        deadline: Duration::from_secs(600),
        envelope: Default::default(),
        hid: None,
    }
}

fn prepare(manifest: &Arc<hcp_contracts::Manifest>, enforcement: bool) -> PreparedCapability {
    Sandbox::new(SandboxConfig {
        cache_dir: Some(hcp_tests::cache_dir()),
        enforcement,
        ..SandboxConfig::default()
    })
    .expect("sandbox")
    .prepare(manifest.clone())
    .expect("prepare")
}

async fn task(
    lab: &Lab,
    cap: &PreparedCapability,
    store: &Arc<dyn TaskStore>,
    work: &Work,
    n: u32,
    on: bool,
) -> Timed {
    let session = format!("{}-{on}-{n}", work.name);
    let governor: Arc<dyn Governor> = if on {
        Arc::new(lab.governor(&session))
    } else {
        cap.standalone_governor(
            "task-off",
            &session,
            Duration::from_secs(600),
            &Default::default(),
            Arc::new(NoReceipts),
        )
    };
    let start = Instant::now();
    let run = cap
        .run(request(&session, governor, &work.inputs), store.clone())
        .await;
    let ran = start.elapsed().as_secs_f64();
    if on {
        // Durable before the task is answered, as the engine does.
        lab.recorder.close_session(&session);
        lab.recorder.flush().expect("flush");
    }
    let elapsed = start.elapsed().as_secs_f64();
    match &run.result {
        RunResult::Completed { outputs, .. } => (work.check)(outputs),
        other => panic!("{} did not complete: {other:?}", work.name),
    }
    Timed {
        elapsed,
        flush: elapsed - ran,
    }
}

/// A plugin task's time, and the part of it its durable flush took (its
/// receipts' commit, fsync and checkpoint; none with enforcement off).
struct Timed {
    elapsed: f64,
    flush: f64,
}

/// What a plugin task does: the probe's inputs, and a check of its outputs
/// (the same work on both sides, done, not refused).
struct Work {
    name: &'static str,
    inputs: Value,
    check: fn(&Value),
}

/// Files the realistic plugin reads from its grant, and their size.
const REALISTIC_FILES: usize = 16;
const REALISTIC_FILE_BYTES: usize = 16 * 1024;

impl Work {
    /// The cheapest host call, many times.
    fn log_calls() -> Self {
        Self {
            name: "plugin",
            inputs: json!({"action": "log_calls", "count": plugin_calls()}),
            check: |_| {},
        }
    }

    /// What a document or data capability does: reads files from its
    /// granted directory, logs what it does, and writes its results as
    /// artifacts.
    fn realistic() -> Self {
        let mut actions = Vec::new();
        for i in 0..REALISTIC_FILES {
            actions.push(json!({"action": "log", "message": format!("reading part-{i}.txt")}));
            actions.push(json!({"action": "read_file", "path": format!("/data/part-{i}.txt")}));
        }
        actions.push(json!({"action": "artifacts", "count": 4, "size": 64 * 1024}));
        actions.push(json!({"action": "log", "message": "done"}));
        Self {
            name: "realistic",
            inputs: json!({"action": "each", "actions": actions}),
            check: |outputs| {
                let reports = outputs["value"].as_array().expect("reports");
                assert_eq!(reports.len(), 2 * REALISTIC_FILES + 2);
                for r in reports {
                    assert_eq!(r["ok"], true, "a step failed: {r}");
                }
            },
        }
    }
}

/// What [`enforced_off`] measured: median times (seconds), the median
/// ratio and its range over the rounds.
struct Compared {
    on: f64,
    off: f64,
    ratio: f64,
    lo: f64,
    hi: f64,
    /// The enforced task's median durable flush.
    flush: f64,
}

/// A plugin task with full enforcement against the same task with
/// enforcement off, interleaved.
async fn enforced_off(lab: &Lab, work: &Work, rounds: u32) -> Compared {
    let on = prepare(&lab.manifest, true);
    let off = prepare(&lab.manifest, false);
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    task(lab, &on, &store, work, 0, true).await;
    task(lab, &off, &store, work, 0, false).await;
    let (mut a, mut b, mut ratios, mut flushes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let t_on = task(lab, &on, &store, work, round, true).await;
        let t_off = task(lab, &off, &store, work, round, false).await.elapsed;
        a.push(t_on.elapsed);
        b.push(t_off);
        ratios.push(t_on.elapsed / t_off);
        flushes.push(t_on.flush);
    }
    let (lo, hi) = range(&ratios);
    Compared {
        on: median(a),
        off: median(b),
        ratio: median(ratios),
        lo,
        hi,
        flush: median(flushes),
    }
}

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
async fn plugin(lab: &Lab, rounds: u32) {
    let c = enforced_off(lab, &Work::log_calls(), rounds).await;
    println!(
        "plugin           {} log.write  enforced {:.1} ms  off {:.1} ms  enforced/off {:.2}x (rounds {:.2}x..{:.2}x)  added {:.2} µs per call",
        plugin_calls(),
        c.on * 1e3,
        c.off * 1e3,
        c.ratio,
        c.lo,
        c.hi,
        (c.on - c.off) / plugin_calls() as f64 * 1e6
    );
    println!(
        "row | {} log.write plugin, enforced / off | enforced {:.1} ms | off {:.1} ms | {:.2}x (rounds {:.2}x..{:.2}x), target <= 3x |",
        plugin_calls(),
        c.on * 1e3,
        c.off * 1e3,
        c.ratio,
        c.lo,
        c.hi,
    );
}

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
async fn realistic(lab: &Lab, rounds: u32) {
    let Compared {
        on: m_on,
        off: m_off,
        ratio,
        lo,
        hi,
        flush,
    } = enforced_off(lab, &Work::realistic(), rounds).await;
    println!(
        "realistic        {REALISTIC_FILES} files of {} KiB read from a grant, 4 artifacts of 64 KiB, {} log lines  enforced {:.2} ms (of which the durable flush {:.2} ms)  off {:.2} ms  enforced/off {ratio:.2}x (rounds {lo:.2}x..{hi:.2}x)",
        REALISTIC_FILE_BYTES / 1024,
        REALISTIC_FILES + 1,
        m_on * 1e3,
        flush * 1e3,
        m_off * 1e3,
    );
    println!(
        "row | a realistic plugin (files read from a grant, artifacts, log), enforced / off | enforced {:.2} ms | off {:.2} ms | {ratio:.2}x (rounds {lo:.2}x..{hi:.2}x), target <= 1.2x |",
        m_on * 1e3,
        m_off * 1e3,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then this only checks that it builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let n: usize = std::env::var("HCP_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    // `HCP_BENCH_ONLY=decide,allow,deny,plugin,realistic` runs some of them (for
    // profiling one at a time).
    let only = std::env::var("HCP_BENCH_ONLY").unwrap_or_default();
    let runs = |name: &str| only.is_empty() || only.split(',').any(|o| o == name);
    let lab = Lab::new();
    if runs("decide") {
        decide_only(&lab, n);
    }
    if runs("allow") {
        governed(&lab, n, false);
    }
    if runs("deny") {
        governed(&lab, n, true);
    }
    if runs("plugin") {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(plugin(&lab, 11));
    }
    if runs("realistic") {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(realistic(&lab, 41));
    }
}
