//! Merging the evidence packs of N = 2 hosts, and verifying the result,
//! at 1,000 and 10,000 receipts per host (criterion).
//!
//! Each host's log is built the way the host builds it (`HostLog::append`,
//! the default signing policy: every DENY and everything at R4 or above
//! signed one by one, a checkpoint every 1024 receipts), exported as a pack
//! with an inclusion proof for every receipt; host-b's first receipt has
//! host-a's first as a parent (an edge across hosts). Cases, per size:
//!
//! - `merge`: `pack::merge` of the two packs, in memory;
//! - `merge_write`: the same, and the merged pack written as bytes;
//! - `verify_merged`: `verify_bytes` of the merged pack's bytes;
//! - `cli_path`: what `hcp evidence merge` does between reading the files
//!   and writing one: verify each input's bytes, read each, merge, write.
//!
//! ```sh
//! cargo bench -p hcp-receipts --bench merge
//! ```

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use hcp_contracts::RiskLevel;
use hcp_receipts::merkle::Tree;
use hcp_receipts::pack::{self, DecisionInput, HostSection, Pack, ReadLimits};
use hcp_receipts::receipt::{Parent, Verdict};
use hcp_receipts::{
    Digest, Draft, HostKey, HostLog, SigningPolicy, VerifyOptions, reason, verify_bytes,
};
use serde_json::json;
use std::hint::black_box;

/// One host's pack of `count` receipts; its first receipt follows `parent`
/// (a receipt of another host) when given.
fn host_pack(host: &str, seed: u8, count: u64, parent: Option<Parent>) -> Pack {
    let key = HostKey::from_seed(&[seed; 32]);
    let public = key.public().clone();
    let mut log = HostLog::new(host, key, SigningPolicy::default()).expect("log");
    if let Some(p) = parent {
        log.receive(p.lamport).expect("receive");
    }
    let policy_hash = Digest::of(b"policy");
    let (mut receipts, mut hashes, mut inputs, mut checkpoints) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut last: Option<Parent> = parent;
    for i in 0..count {
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
            _ => ("fs.open", RiskLevel::R1, Verdict::Allow, reason::ALLOW),
        };
        let args = json!({"path": format!("/documents/{host}/{i}.md")});
        let input = json!({"call": call, "risk": risk.as_str(), "args": args});
        let appended = log
            .append(Draft {
                session_id: Some(format!("session-{host}-{}", i / 200)),
                task_id: Some(format!("task-{host}-{}", i / 200)),
                capability: "document-analysis@1.0.0".into(),
                call: call.into(),
                args_hash: Digest::of_canonical(&args).expect("args"),
                input_hash: Digest::of_canonical(&input).expect("input"),
                verdict,
                reason_code: reason_code.into(),
                risk,
                policy_hash,
                parents: last.into_iter().collect(),
                timestamp: format!("2026-03-01T10:{:02}:{:02}Z", (i / 60) % 60, i % 60),
            })
            .expect("append");
        last = Some(appended.receipt.as_parent().expect("parent"));
        checkpoints.extend(appended.checkpoint);
        inputs.push(DecisionInput { input, seq: i });
        hashes.push(appended.hash);
        receipts.push(appended.receipt);
    }
    checkpoints.push(log.checkpoint("2026-03-02T00:00:00Z").expect("seal"));
    let mut section = HostSection::new(
        host,
        vec![public.key_id().clone()],
        receipts,
        checkpoints,
        inputs,
    );
    let tree = Tree::from_data(hashes.iter().map(|h| h.0.as_slice()));
    pack::prove(&mut section, &tree).expect("prove");
    Pack {
        hosts: vec![section],
        external_parents: parent.map(|p| p.hash).into_iter().collect(),
        public_keys: vec![public],
        policy: [("rules.json".to_owned(), b"{}\n".to_vec())].into(),
        ..Pack::default()
    }
}

fn two_hosts(count: u64) -> (Pack, Pack) {
    let a = host_pack("host-a", 0xa1, count, None);
    let first = a.hosts[0].receipts[0].as_parent().expect("parent");
    let b = host_pack("host-b", 0xb2, count, Some(first));
    (a, b)
}

fn options() -> VerifyOptions {
    VerifyOptions {
        signing: Some(SigningPolicy::default()),
        ..VerifyOptions::default()
    }
}

fn benches(c: &mut Criterion) {
    for count in [1_000u64, 10_000] {
        let (a, b) = two_hosts(count);
        let (a_bytes, b_bytes) = (
            pack::write(&a).expect("write"),
            pack::write(&b).expect("write"),
        );
        let merged = pack::merge(vec![a.clone(), b.clone()]).expect("merge");
        let merged_bytes = pack::write(&merged).expect("write");
        let report = verify_bytes(&merged_bytes, &ReadLimits::default(), &options());
        assert!(report.ok(), "{report}");
        assert!(merged.external_parents.is_empty());

        let mut group = c.benchmark_group(format!("merge_2x{count}"));
        group.sample_size(10);
        group.bench_function("merge", |bench| {
            bench.iter_batched(
                || vec![a.clone(), b.clone()],
                |packs| black_box(pack::merge(packs).expect("merge")),
                BatchSize::LargeInput,
            );
        });
        group.bench_function("merge_write", |bench| {
            bench.iter_batched(
                || vec![a.clone(), b.clone()],
                |packs| {
                    let merged = pack::merge(packs).expect("merge");
                    black_box(pack::write(&merged).expect("write"))
                },
                BatchSize::LargeInput,
            );
        });
        group.bench_function("verify_merged", |bench| {
            bench.iter(|| {
                let report = verify_bytes(&merged_bytes, &ReadLimits::default(), &options());
                assert!(report.ok());
            });
        });
        group.bench_function("cli_path", |bench| {
            bench.iter(|| {
                let mut packs = Vec::new();
                for bytes in [&a_bytes, &b_bytes] {
                    let report = verify_bytes(bytes, &ReadLimits::default(), &options());
                    assert!(report.ok());
                    packs.push(pack::read(bytes, &ReadLimits::default()).expect("read"));
                }
                let merged = pack::merge(packs).expect("merge");
                black_box(pack::write(&merged).expect("write"))
            });
        });
        group.finish();
    }
}

criterion_group!(merge_benches, benches);
criterion_main!(merge_benches);
