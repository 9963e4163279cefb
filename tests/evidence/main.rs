//! Receipts of the task engine end to end: the gate's decisions, operator
//! decisions and every host call of the tasks the engine runs become
//! receipts in the store; the store verifies; an evidence pack of it is
//! deterministic, verifies offline and replays without a difference; signed
//! receipts tampered with fail with their own message; the log survives a
//! restart and is shared by two hosts on one data directory.

mod archive;
mod pipeline;
mod reload;
mod submission;
mod transport;
mod withheld;

use hcp::engine::{Auth, Host, HostConfig, HostPaths, Submission};
use hcp::evidence::{self, ReceiptFilter, Selection};
use hcp_contracts::RiskLevel;
use hcp_policy::pep::PepDecider;
use hcp_receipts::merkle::{self, ProofError};
use hcp_receipts::pack::{self, Pack};
use hcp_receipts::{HostKey, Receipt, Verdict, VerifyOptions, reason};
use hcp_tests::{REPO_ROOT, cache_dir, wire};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;

/// Wednesday 2026-11-18, 11:00 at +01:00: attended hours.
fn weekday_morning() -> time::OffsetDateTime {
    time::macros::datetime!(2026-11-18 10:00 UTC)
}

fn open(dir: &Path) -> Host {
    Host::open(
        HostPaths {
            data_dir: dir.to_path_buf(),
            cache_dir: cache_dir(),
            policies_dir: Path::new(REPO_ROOT).join("policies"),
        },
        HostConfig {
            gate_clock: Some(weekday_morning()),
            ..HostConfig::default()
        },
    )
    .expect("host")
}

fn lab() -> (tempfile::TempDir, Host) {
    let data = tempfile::tempdir().expect("tempdir");
    let host = open(data.path());
    for plugin in ["document-analysis", "cvd-material-synthesis"] {
        host.install_manifest(
            &Path::new(REPO_ROOT)
                .join("plugins")
                .join(plugin)
                .join("manifest.json"),
        )
        .expect("install");
    }
    (data, host)
}

fn example(plugin: &str, message_id: &str) -> Value {
    let path = Path::new(REPO_ROOT)
        .join("plugins")
        .join(plugin)
        .join("examples/task_submit.json");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
    m["message_id"] = json!(message_id);
    m
}

fn submit(host: &Host, m: &Value, caller: &str) -> Submission {
    host.submit(m, Auth::Transport(caller)).expect("submit")
}

async fn run(host: &Host, s: &Submission) -> Value {
    assert!(s.runnable, "not runnable: {}", s.answer);
    let id = s.task_id.as_deref().expect("task id");
    wire(&host.run_task(id).await.expect("run").expect("ran"))
}

fn decide(host: &Host, s: &Submission, approved: bool) -> Submission {
    host.decide(
        s.task_id.as_deref().expect("id"),
        approved,
        Auth::Transport("operator-lab-01"),
        "operator-lab-01",
        "checked against the lab's SOP",
    )
    .expect("decide")
}

/// The pack of every receipt, as `hcp evidence export --all` writes it.
fn export_all(host: &Host) -> (Vec<u8>, Pack) {
    let pack = evidence::export(&host.store, &Selection::All).expect("export");
    (pack::write(&pack).expect("write"), pack)
}

fn verify(pack: &Pack) -> hcp_receipts::Report {
    hcp_receipts::verify(
        pack,
        &VerifyOptions {
            signing: Some(hcp_receipts::SigningPolicy::default()),
            trusted_keys: Some(pack.public_keys.clone()),
            known_checkpoints: Vec::new(),
            host_keys: Vec::new(),
        },
    )
}

fn has(report: &hcp_receipts::Report, expected: &str) {
    let text = report.to_string();
    assert!(
        text.lines().any(|l| l.starts_with(expected)),
        "expected a line starting with\n  {expected}\nin\n{text}"
    );
}

/// The receipts of a task, in log order.
fn of_task<'a>(pack: &'a Pack, task: &str) -> Vec<&'a Receipt> {
    pack.hosts[0]
        .receipts
        .iter()
        .filter(|r| r.task_id.as_deref() == Some(task))
        .collect()
}

fn hash(r: &Receipt) -> hcp_receipts::Digest {
    r.hash().expect("hash")
}

/// Runs the demo tasks through the engine: the seed's document analysis,
/// the seed's CVD task approved by an operator, a CVD task refused for its
/// risk, one with inputs off the schema, and one an operator rejects.
async fn demo(host: &Host) -> Vec<String> {
    let doc = submit(
        host,
        &example("document-analysis", "doc-1"),
        "harness-local-01",
    );
    assert_eq!(run(host, &doc).await["type"], "task_completed");
    let cvd = submit(
        host,
        &example("cvd-material-synthesis", "cvd-1"),
        "harness-alpha-001",
    );
    assert_eq!(
        wire(&cvd.answer)["status"],
        "pending_approval",
        "{}",
        cvd.answer
    );
    let accepted = decide(host, &cvd, true);
    assert_eq!(run(host, &accepted).await["type"], "task_completed");
    let mut hot = example("cvd-material-synthesis", "cvd-hot");
    hot["payload"]["caller_id"] = json!("harness-beta-002");
    hot["payload"]["inputs"]["temperature_range"]["max"] = json!(1200);
    let hot = submit(host, &hot, "harness-beta-002");
    assert_eq!(wire(&hot.answer)["payload"]["reason_code"], "risk_too_high");
    let mut bad = example("document-analysis", "doc-bad");
    bad["payload"]["inputs"]["analysis_type"] = json!("everything");
    let bad = submit(host, &bad, "harness-local-01");
    assert_eq!(wire(&bad.answer)["payload"]["reason_code"], "invalid_input");
    let refused = submit(
        host,
        &example("cvd-material-synthesis", "cvd-2"),
        "harness-alpha-001",
    );
    let rejected = decide(host, &refused, false);
    assert_eq!(
        wire(&rejected.answer)["payload"]["reason_code"],
        "approval_rejected"
    );
    [doc, cvd, hot, bad, refused]
        .into_iter()
        .map(|s| s.task_id.expect("recorded"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_decision_of_the_engine_is_a_receipt_and_the_pack_verifies_and_replays() {
    let (_data, host) = lab();
    let tasks = demo(&host).await;
    let [doc, cvd, hot, bad, refused] = &tasks[..] else {
        unreachable!()
    };

    // The store's receipts are intact, and the operator's list shows them.
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    assert_eq!(check.covered, check.receipts, "all sealed before answers");
    let recent = evidence::recent_receipts(&host.store, ReceiptFilter::All, 3).expect("list");
    assert_eq!(recent.len(), 3);
    assert!(recent[0].seq > recent[1].seq, "newest first");
    assert_eq!(
        (recent[0].call.as_str(), recent[0].reason_code.as_str()),
        ("gate.approval", reason::DENY_APPROVAL_REJECTED)
    );
    let of_bad =
        evidence::recent_receipts(&host.store, ReceiptFilter::Task(bad), 10).expect("list");
    assert_eq!(of_bad.len(), 1);
    assert_eq!(
        (of_bad[0].call.as_str(), of_bad[0].verdict, of_bad[0].signed),
        ("gate.admission", Verdict::Deny, true)
    );

    // Two exports of the same state are byte-identical, and verify.
    let (a, pack) = export_all(&host);
    let (b, _) = export_all(&host);
    assert!(a == b, "two exports of the same state differ");
    let report = verify(&pack);
    assert!(report.ok(), "{report}");

    // Every receipt replays to the same verdict under the recorded policy.
    let replayed = hcp_receipts::replay(&pack, &PepDecider::new(&pack));
    assert!(replayed.ok(), "{:?}", replayed.issues);
    assert_eq!(replayed.replayed, pack.hosts[0].receipts.len());
    assert_eq!(replayed.matched, replayed.replayed);

    // What each task left.
    let calls = |task: &str| -> Vec<(String, String)> {
        of_task(&pack, task)
            .iter()
            .map(|r| (r.call.clone(), r.reason_code.clone()))
            .collect()
    };
    let doc_calls = calls(doc);
    assert_eq!(doc_calls[0], ("gate.admission".into(), "ALLOW".into()));
    assert_eq!(doc_calls[1], ("session.open".into(), "ALLOW".into()));
    let kinds: BTreeSet<&str> = doc_calls.iter().map(|(c, _)| c.as_str()).collect();
    assert!(
        kinds.contains("fs.open") && kinds.contains("log.write"),
        "{kinds:?}"
    );
    let cvd_calls = calls(cvd);
    assert_eq!(cvd_calls[0], ("gate.admission".into(), "ALLOW".into()));
    assert_eq!(cvd_calls[1], ("gate.approval".into(), "ALLOW".into()));
    assert_eq!(cvd_calls[2], ("session.open".into(), "ALLOW".into()));
    for call in ["instrument.command", "artifacts.create", "checkpoints.save"] {
        assert!(
            cvd_calls.iter().any(|(c, _)| c == call),
            "{call}: {cvd_calls:?}"
        );
    }
    assert_eq!(
        calls(hot),
        [("gate.admission".into(), "DENY_RISK_TOO_HIGH".into())]
    );
    assert_eq!(
        calls(bad),
        [("gate.admission".into(), "DENY_ARGS_INVALID".into())]
    );
    assert_eq!(
        calls(refused),
        [
            ("gate.admission".into(), "ALLOW".into()),
            ("gate.approval".into(), "DENY_APPROVAL_REJECTED".into())
        ]
    );

    // The admission and the approval are DAG parents of the session's
    // opening and of its first host call; the approval's parent is the
    // admission.
    let r = of_task(&pack, cvd);
    let (admission, approval, open, first) = (r[0], r[1], r[2], r[3]);
    assert_eq!(approval.parents, [hash(admission)]);
    assert_eq!(open.parents, [hash(admission), hash(approval)]);
    assert_eq!(first.parents, [hash(open), hash(admission), hash(approval)]);
    assert!(
        r[4..].iter().all(|x| x.parents.len() == 1),
        "later calls follow the session"
    );

    // Every DENY, and every receipt at R4 or above, is signed one by one.
    for r in &pack.hosts[0].receipts {
        if r.verdict == Verdict::Deny || r.risk >= RiskLevel::R4 {
            assert!(r.is_signed(), "{} is unsigned", r.receipt_id);
        }
    }
    assert!(
        pack.hosts[0]
            .receipts
            .iter()
            .any(|r| r.verdict == Verdict::Allow && !r.is_signed())
    );
}

/// Adds L to the S half of a signature (little-endian): the same point, a
/// non-canonical S that lax verification would accept.
fn add_l(sig: &mut [u8; 64]) {
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut carry = 0u16;
    for i in 0..32 {
        let sum = u16::from(sig[32 + i]) + u16::from(L[i]) + carry;
        sig[32 + i] = sum as u8;
        carry = sum >> 8;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn signed_receipts_tampered_with_fail_with_their_own_message() {
    let (_data, host) = lab();
    demo(&host).await;
    let (_, pack) = export_all(&host);
    let host_id = pack.hosts[0].host_id.clone();
    let receipts = &pack.hosts[0].receipts;
    let at = |i: usize| {
        format!(
            "receipt {} (receipts/{host_id}.jsonl index {i})",
            receipts[i].receipt_id
        )
    };
    let signed = receipts
        .iter()
        .position(|r| r.is_signed() && r.verdict == Verdict::Deny)
        .expect("a signed DENY");

    // S + L: the same signature to a lax verifier.
    let mut malleated = pack.clone();
    let r = &mut malleated.hosts[0].receipts[signed];
    let mut sig = r.signature.expect("signed");
    add_l(&mut sig.0);
    r.signature = Some(sig);
    has(
        &verify(&malleated),
        &format!(
            "[signature] {}: S is not reduced modulo L (non-canonical, malleable signature)",
            at(signed)
        ),
    );

    // Signed by another key that claims to be the host's.
    let stranger = HostKey::from_seed(&[0x5e; 32]);
    let mut resigned = pack.clone();
    let r = &mut resigned.hosts[0].receipts[signed];
    let claimed = r.key_id.clone();
    r.sign(&stranger).expect("sign");
    r.key_id = claimed.clone();
    has(
        &verify(&resigned),
        &format!(
            "[signature] {}: signature does not verify under key {}: signed by another key, or the signed content changed",
            at(signed),
            claimed.expect("key id")
        ),
    );

    // A truncated chain: the checkpoints cover more than the pack holds.
    let mut truncated = pack.clone();
    let keep = truncated.hosts[0].receipts.len() - 2;
    truncated.hosts[0].receipts.truncate(keep);
    let last = truncated.hosts[0]
        .checkpoints
        .last()
        .expect("checkpoint")
        .clone();
    has(
        &verify(&truncated),
        &format!(
            "[checkpoint] checkpoint {} of {host_id} (size {}): covers receipts up to seq {}, but the pack's receipts of {host_id} end at seq {}: the chain is truncated",
            truncated.hosts[0].checkpoints.len() - 1,
            last.tree_size,
            last.tree_size - 1,
            keep - 1
        ),
    );

    // An inner node passed off as a receipt's leaf, the second-preimage
    // attack that RFC 6962's distinct leaf (0x00) and node (0x01) prefixes
    // defeat. A signed receipt's inclusion proof without its lowest hash (the
    // neighbouring receipt's leaf) is the genuine path of the inner node over
    // the two receipts: a shorter path to the same signed root.
    let section = &pack.hosts[0];
    let (target, proof) = receipts
        .iter()
        .enumerate()
        .find_map(|(i, r)| {
            let p = section.inclusion.iter().find(|p| p.seq == r.seq)?;
            (r.is_signed() && r.seq ^ 1 < p.tree_size).then(|| (i, p.clone()))
        })
        .expect("a signed receipt with a neighbour under its checkpoint");
    let seq = receipts[target].seq;
    let c = section
        .checkpoints
        .iter()
        .position(|cp| cp.tree_size == proof.tree_size)
        .expect("its checkpoint");
    let (size, root) = (proof.tree_size, section.checkpoints[c].root_hash);
    let leaf = |q: u64| {
        let i = usize::try_from(q - section.first_seq).expect("index");
        merkle::leaf_hash(&hash(&receipts[i]).0)
    };
    assert_eq!(
        proof.path[0],
        leaf(seq ^ 1),
        "lowest hash: the neighbour's leaf"
    );
    let short = proof.path[1..].to_vec();
    let mut forged = pack.clone();
    forged.hosts[0]
        .inclusion
        .iter_mut()
        .find(|p| p.seq == seq)
        .expect("proof")
        .path = short.clone();
    let report = verify(&forged);
    has(
        &report,
        &format!(
            "[inclusion] {}: inclusion proof against checkpoint {c} (size {size}) fails: an inner node passed off as the receipt's leaf: the proof leads to the signed root from the inner node over seqs {} to {} (height 1), not from leaf {seq}; it has {} hashes, leaf {seq} of a tree of {size} needs {}",
            at(target),
            seq & !1,
            seq | 1,
            short.len(),
            proof.path.len()
        ),
    );
    assert_eq!(
        report.failures.len(),
        1,
        "nothing else is blamed:\n{report}"
    );
    // The verifier hashes the receipt into its leaf itself and places it at
    // the receipt's own seq, so it refuses this proof by its length, prefixes
    // or not. What the prefixes defeat is the same path serving a leaf whose
    // data is chosen: it is a valid proof of the inner node as leaf seq / 2
    // of the tree of the checkpoint's level-1 nodes (same root) ...
    let (left, right) = (leaf(seq & !1), leaf(seq | 1));
    let node = merkle::node_hash(&left, &right);
    let (index, width) = (seq >> 1, ((size - 1) >> 1) + 1);
    assert_eq!(
        merkle::verify_inclusion_of_leaf_hash(&node, index, width, &short, &root),
        Ok(())
    );
    // ... and the 64 bytes under that node, offered there as leaf data, are
    // refused only because a leaf is hashed with 0x00 and a node with 0x01.
    // Without the domain separation SHA-256(left || right) would be the node
    // itself, this forged leaf would verify, and this test would fail.
    assert!(
        matches!(
            merkle::verify_inclusion(&[left.0, right.0].concat(), index, width, &short, &root),
            Err(ProofError::RootMismatch { .. })
        ),
        "a leaf must never pass for an inner node"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn receipts_survive_a_restart_and_two_hosts_share_one_log() {
    let (data, host) = lab();
    let doc = submit(
        &host,
        &example("document-analysis", "before"),
        "harness-local-01",
    );
    run(&host, &doc).await;
    let before = evidence::verify_store(&host.store).expect("check");
    assert!(before.ok() && before.receipts > 2, "{before:?}");
    drop(host);

    // Reopened: nothing lost, the chain goes on.
    let one = open(data.path());
    let again = evidence::verify_store(&one.store).expect("check");
    assert_eq!(
        (again.receipts, again.covered),
        (before.receipts, before.covered)
    );
    // A second host process on the same data directory (`hcp serve` and the
    // command line): both append to one log.
    let two = open(data.path());
    let a = submit(
        &one,
        &example("document-analysis", "one"),
        "harness-local-01",
    );
    let b = submit(
        &two,
        &example("document-analysis", "two"),
        "harness-local-01",
    );
    let (ra, rb) = tokio::join!(run(&one, &a), run(&two, &b));
    assert_eq!(
        (ra["type"].as_str(), rb["type"].as_str()),
        (Some("task_completed"), Some("task_completed"))
    );
    let cvd = submit(
        &one,
        &example("cvd-material-synthesis", "cvd"),
        "harness-alpha-001",
    );
    let accepted = decide(&two, &cvd, true);
    assert_eq!(run(&two, &accepted).await["type"], "task_completed");
    drop(two);
    let after = evidence::verify_store(&one.store).expect("check");
    assert!(after.ok(), "{:?}", after.problems);
    assert!(after.receipts > before.receipts * 3, "{after:?}");
    let (_, pack) = export_all(&one);
    let report = verify(&pack);
    assert!(report.ok(), "{report}");
    let replayed = hcp_receipts::replay(&pack, &PepDecider::new(&pack));
    assert!(replayed.ok(), "{:?}", replayed.issues);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_message_gets_its_refusal_and_its_receipt() {
    let (_data, host) = lab();
    let mut m = example("document-analysis", "hostile");
    m["payload"]["capability_version"] = json!(format!("\u{1b}[2J{}", "\u{7}".repeat(120)));
    let s = submit(&host, &m, "harness-local-01");
    assert_eq!(
        wire(&s.answer)["payload"]["reason_code"],
        "invalid_input",
        "{}",
        s.answer
    );
    let task = s.task_id.expect("recorded");
    let r = evidence::recent_receipts(&host.store, ReceiptFilter::Task(&task), 10).expect("list");
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].capability,
        format!("document-analysis@?[2J{}", "?".repeat(96))
    );
    assert_eq!(
        (r[0].verdict, r[0].reason_code.as_str()),
        (Verdict::Deny, "DENY_ARGS_INVALID")
    );
    assert!(evidence::verify_store(&host.store).expect("check").ok());
}
