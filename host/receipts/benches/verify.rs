//! Offline verification of an evidence pack of 1,000,000 receipts.
//!
//! Builds one host's log the way the host does (`HostLog::append`, default
//! signing policy: every DENY and everything at R4 or above signed one by
//! one, a checkpoint every 1024 receipts), exports it as a pack with an
//! inclusion proof for every receipt, then times `verify_bytes` (read and
//! verify the pack's bytes) and reports wall and CPU time. `HCP_BENCH_RECEIPTS` changes the count.
//!
//! ```sh
//! cargo bench -p hcp-receipts --bench verify
//! ```
#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use hcp_contracts::RiskLevel;
use hcp_receipts::merkle::Tree;
use hcp_receipts::pack::{self, DecisionInput, HostSection, Pack, ReadLimits};
use hcp_receipts::receipt::{Parent, Verdict};
use hcp_receipts::{
    Digest, Draft, HostKey, HostLog, SigningPolicy, VerifyOptions, reason, verify_bytes,
};
use serde_json::json;
use std::collections::HashMap;
use std::time::Instant;

const SESSION_LENGTH: u64 = 200;

fn main() {
    let count: u64 = std::env::var("HCP_BENCH_RECEIPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // HCP_BENCH_PACK=<file> keeps the pack's bytes between runs (for profiling).
    let cache = std::env::var_os("HCP_BENCH_PACK").map(std::path::PathBuf::from);
    let bytes = match cache.as_ref().and_then(|p| std::fs::read(p).ok()) {
        Some(bytes) => {
            println!("pack: {:.0} MiB read from {:?}", mib(&bytes), cache);
            bytes
        }
        None => {
            let started = Instant::now();
            let pack = build(count);
            let built = started.elapsed();
            let started = Instant::now();
            let bytes = pack::write(&pack).expect("write");
            let written = started.elapsed();
            let signed = pack.hosts[0]
                .receipts
                .iter()
                .filter(|r| r.is_signed())
                .count();
            let checkpoints = pack.hosts[0].checkpoints.len();
            println!(
                "pack: {count} receipts ({signed} signed, {:.1}%), {checkpoints} checkpoints, {:.0} MiB; built in {:.2?}, written in {:.2?}",
                100.0 * signed as f64 / count as f64,
                mib(&bytes),
                built,
                written
            );
            if let Some(path) = &cache {
                std::fs::write(path, &bytes).expect("cache");
            }
            bytes
        }
    };
    let options = VerifyOptions {
        signing: Some(SigningPolicy::default()),
        ..VerifyOptions::default()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for round in 1..=3 {
        let (started, cpu) = (Instant::now(), cpu_seconds());
        let report = verify_bytes(&bytes, &ReadLimits::default(), &options);
        let (wall, cpu) = (started.elapsed(), cpu_seconds() - cpu);
        assert!(report.ok(), "{report}");
        println!(
            "round {round}: verify_bytes {wall:.2?} wall, {cpu:.2} s CPU on {threads} threads: {}",
            report.to_string().trim_end()
        );
    }
}

fn mib(bytes: &[u8]) -> f64 {
    bytes.len() as f64 / f64::from(1 << 20)
}

/// User + system CPU time of this process, from /proc/self/stat (Linux,
/// USER_HZ = 100); 0 elsewhere.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn build(count: u64) -> Pack {
    let key = HostKey::from_seed(&[7; 32]);
    let public = key.public().clone();
    let mut log = HostLog::new("bench-host", key, SigningPolicy::default()).expect("log");
    let policy_hash = Digest::of(b"policy");
    let mut receipts = Vec::with_capacity(count as usize);
    let mut hashes = Vec::with_capacity(count as usize);
    let mut inputs = Vec::with_capacity(count as usize);
    let mut checkpoints = Vec::new();
    let mut last_of_session: HashMap<u64, Parent> = HashMap::new();
    for i in 0..count {
        // Sessions of SESSION_LENGTH calls, eight of them interleaved.
        let session = (i / (SESSION_LENGTH * 8)) * 8 + i % 8;
        // About 2% denied, 3% at R4 or R5 (so about 5% signed), the rest
        // low-risk allows.
        let (call, risk, verdict, reason_code) = match i % 100 {
            0 | 50 => (
                "net.connect",
                RiskLevel::R2,
                Verdict::Deny,
                reason::DENY_TOOL_NOT_FOUND,
            ),
            10 | 60 => (
                "instrument.set",
                RiskLevel::R4,
                Verdict::Allow,
                reason::ALLOW,
            ),
            90 => ("hid.execute", RiskLevel::R5, Verdict::Allow, reason::ALLOW),
            n if n % 3 == 0 => (
                "hcp.artifacts.create",
                RiskLevel::R2,
                Verdict::Allow,
                reason::ALLOW,
            ),
            _ => ("fs.open", RiskLevel::R1, Verdict::Allow, reason::ALLOW),
        };
        let args = json!({"path": format!("/documents/{session}/{i}.md")});
        let input = json!({"call": call, "risk": risk.as_str(), "args": args});
        let appended = log
            .append(Draft {
                session_id: Some(format!("session-{session}")),
                task_id: Some(format!("task-{session}")),
                capability: "document-analysis@1.0.0".into(),
                call: call.into(),
                args_hash: Digest::of_canonical(&args).expect("args"),
                input_hash: Digest::of_canonical(&input).expect("input"),
                verdict,
                reason_code: reason_code.into(),
                risk,
                policy_hash,
                parents: last_of_session.get(&session).copied().into_iter().collect(),
                timestamp: format!(
                    "2026-03-01T{:02}:{:02}:{:02}.{:03}Z",
                    (i / 3_600_000) % 24,
                    (i / 60_000) % 60,
                    (i / 1000) % 60,
                    i % 1000
                ),
            })
            .expect("append");
        last_of_session.insert(
            session,
            Parent {
                hash: appended.hash,
                lamport: appended.receipt.lamport,
            },
        );
        checkpoints.extend(appended.checkpoint);
        inputs.push(DecisionInput { input, seq: i });
        hashes.push(appended.hash);
        receipts.push(appended.receipt);
    }
    checkpoints.push(log.checkpoint("2026-03-02T00:00:00Z").expect("seal"));
    let mut section = HostSection::new(
        "bench-host",
        vec![public.key_id().clone()],
        receipts,
        checkpoints,
        inputs,
    );
    let tree = Tree::from_data(hashes.iter().map(|h| h.0.as_slice()));
    pack::prove(&mut section, &tree).expect("prove");
    Pack {
        hosts: vec![section],
        public_keys: vec![public],
        ..Pack::default()
    }
}
