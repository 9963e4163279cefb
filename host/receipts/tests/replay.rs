//! Replay re-derives every verdict from the recorded policy and finds the
//! ones that changed.

mod common;

use common::{RulesDecider, standard_pack};
use hcp_receipts::pack::{self, Pack, ReadLimits};
use hcp_receipts::replay;
use hcp_receipts::replay::{Finding, PolicySnapshot};
use serde_json::json;
use std::collections::BTreeMap;

#[test]
fn the_recorded_policy_gives_the_recorded_verdicts() {
    let pack = standard_pack();
    let report = replay(&pack, &RulesDecider);
    assert!(report.ok(), "{:?}", report.issues);
    assert_eq!((report.replayed, report.matched), (15, 15));
    // The same after a round trip through the tar.
    let read =
        pack::read(&pack::write(&pack).expect("write"), &ReadLimits::default()).expect("read");
    assert_eq!(replay(&read, &RulesDecider), report);
}

#[test]
fn a_policy_edited_after_the_fact_changes_verdicts() {
    let mut pack = standard_pack();
    let recorded = PolicySnapshot {
        files: &pack.policy,
    }
    .digest();
    let loosened = json!({"denied_calls": [], "max_risk": "R5"});
    pack.policy.insert(
        "rules.json".into(),
        serde_json::to_vec_pretty(&loosened).expect("json"),
    );
    let edited = PolicySnapshot {
        files: &pack.policy,
    }
    .digest();
    let report = replay(&pack, &RulesDecider);
    let changed: Vec<String> = report
        .issues
        .iter()
        .filter(|i| matches!(i.finding, Finding::VerdictChanged { .. }))
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        changed,
        [
            "receipt host-a:3 (receipts/host-a.jsonl index 3): verdict changed: recorded DENY DENY_TOOL_NOT_FOUND, replayed ALLOW ALLOW",
            "receipt host-a:7 (receipts/host-a.jsonl index 7): verdict changed: recorded DENY DENY_ENVELOPE_HARD_LIMIT, replayed ALLOW ALLOW",
            "receipt host-b:1 (receipts/host-b.jsonl index 1): verdict changed: recorded DENY DENY_TOOL_NOT_FOUND, replayed ALLOW ALLOW",
        ]
    );
    let policy_mismatches = report
        .issues
        .iter()
        .filter(|i| {
            i.finding
                == Finding::PolicyHashMismatch {
                    recorded,
                    snapshot: edited,
                }
        })
        .count();
    assert_eq!(
        policy_mismatches, 15,
        "every receipt names the original policy"
    );
    assert_eq!((report.replayed, report.matched), (15, 12));
}

#[test]
fn a_reason_change_alone_is_reported() {
    let mut pack = standard_pack();
    // Same verdicts, but R5 now trips the deny list first.
    let rules = json!({"denied_calls": ["net.connect", "instrument.set"], "max_risk": "R4"});
    pack.policy.insert(
        "rules.json".into(),
        serde_json::to_vec(&rules).expect("json"),
    );
    let report = replay(&pack, &RulesDecider);
    let reasons: Vec<String> = report
        .issues
        .iter()
        .filter(|i| !matches!(i.finding, Finding::PolicyHashMismatch { .. }))
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        reasons,
        [
            "receipt host-a:5 (receipts/host-a.jsonl index 5): verdict changed: recorded ALLOW ALLOW, replayed DENY DENY_TOOL_NOT_FOUND",
            "receipt host-a:7 (receipts/host-a.jsonl index 7): reason changed: recorded DENY_ENVELOPE_HARD_LIMIT, replayed DENY_TOOL_NOT_FOUND",
        ]
    );
}

#[test]
fn decision_inputs_must_match_their_hash() {
    let mut pack = standard_pack();
    pack.hosts[0].inputs[4].input["args"]["n"] = json!(99);
    pack.hosts[0].inputs.remove(9);
    let report = replay(&pack, &RulesDecider);
    let found: Vec<String> = report.issues.iter().map(ToString::to_string).collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with(
            "receipt host-a:4 (receipts/host-a.jsonl index 4): decision input hashes to sha256:"
        ),
        "{}",
        found[0]
    );
    assert_eq!(
        found[1],
        "receipt host-a:9 (receipts/host-a.jsonl index 9): no decision input in the pack"
    );
}

/// A log whose policy changed midway: the same two calls decided under the
/// shipped rules, then under looser ones; each snapshot's files, and the
/// pack with both under `<hex>/`.
/// A snapshot's files by name.
type Files = BTreeMap<String, Vec<u8>>;

fn two_policies() -> (Pack, Files, Files) {
    use common::{HOST_A, HostRun, key_a, policy_files};
    use hcp_contracts::RiskLevel;
    use hcp_receipts::Draft;
    use hcp_receipts::replay::Decider as _;
    let old = policy_files();
    let new = BTreeMap::from([(
        "rules.json".to_owned(),
        serde_json::to_vec(&json!({"denied_calls": [], "max_risk": "R5"})).expect("json"),
    )]);
    let mut run = HostRun::new(HOST_A, key_a(), 100);
    let mut second = 0;
    for files in [&old, &new] {
        let snapshot = PolicySnapshot { files };
        for (call, risk) in [
            ("net.connect", RiskLevel::R2),
            ("instrument.set", RiskLevel::R5),
        ] {
            let input = json!({"call": call, "risk": risk.as_str(), "args": {}});
            let decision = RulesDecider.decide(&snapshot, &input).expect("decide");
            let appended = run
                .log
                .append(Draft {
                    session_id: Some("s-1".into()),
                    task_id: Some("task-s-1".into()),
                    capability: "document-analysis@1.0.0".into(),
                    call: call.into(),
                    args_hash: hcp_receipts::Digest::of_canonical(&json!({})).expect("args"),
                    input_hash: hcp_receipts::Digest::of_canonical(&input).expect("input"),
                    verdict: decision.verdict,
                    reason_code: decision.reason_code,
                    risk,
                    policy_hash: snapshot.digest(),
                    parents: vec![],
                    timestamp: format!("2026-03-01T10:00:{second:02}Z"),
                })
                .expect("append");
            second += 1;
            run.inputs.push(pack::DecisionInput {
                input,
                seq: appended.receipt.seq,
            });
            run.hashes.push(appended.hash);
            run.receipts.push(appended.receipt);
        }
    }
    run.seal(0);
    let mut policy = BTreeMap::new();
    for files in [&old, &new] {
        let hex = PolicySnapshot { files }.digest().to_hex();
        for (name, bytes) in files {
            policy.insert(format!("{hex}/{name}"), bytes.clone());
        }
    }
    let pack = Pack {
        hosts: vec![run.section()],
        public_keys: vec![run.log.public_key().clone()],
        policy,
        ..Pack::default()
    };
    (pack, old, new)
}

#[test]
fn each_receipt_replays_under_its_own_snapshot() {
    let (pack, old, new) = two_policies();
    let snapshots = pack.policy_snapshots();
    assert_eq!(snapshots.len(), 2);
    assert!(snapshots.contains(&old) && snapshots.contains(&new));
    let report = replay(&pack, &RulesDecider);
    assert!(report.ok(), "{:?}", report.issues);
    assert_eq!((report.replayed, report.matched), (4, 4));
    let read =
        pack::read(&pack::write(&pack).expect("write"), &ReadLimits::default()).expect("read");
    assert_eq!(replay(&read, &RulesDecider), report);

    // One snapshot, the newest (what packs carried before): the receipts
    // decided under the older rules come out differently.
    let mut newest = pack.clone();
    newest.policy = new.clone();
    let found: Vec<String> = replay(&newest, &RulesDecider)
        .issues
        .iter()
        .map(ToString::to_string)
        .collect();
    let (o, n) = (
        PolicySnapshot { files: &old }.digest(),
        PolicySnapshot { files: &new }.digest(),
    );
    assert_eq!(
        found,
        [
            format!("receipt host-a:0 (receipts/host-a.jsonl index 0): decided under policy {o}, but the pack's policy snapshot is {n}"),
            "receipt host-a:0 (receipts/host-a.jsonl index 0): verdict changed: recorded DENY DENY_TOOL_NOT_FOUND, replayed ALLOW ALLOW".to_owned(),
            format!("receipt host-a:1 (receipts/host-a.jsonl index 1): decided under policy {o}, but the pack's policy snapshot is {n}"),
            "receipt host-a:1 (receipts/host-a.jsonl index 1): verdict changed: recorded DENY DENY_ENVELOPE_HARD_LIMIT, replayed ALLOW ALLOW".to_owned(),
        ]
    );

    // Several snapshots, none of them the one a receipt names: said, and
    // that receipt is not replayed under another.
    let mut missing = pack.clone();
    missing.policy.retain(|k, _| k.starts_with(&o.to_hex()));
    missing.policy.insert(
        "other/rules.json".into(),
        serde_json::to_vec(&json!({"denied_calls": ["fs.open"], "max_risk": "R1"})).expect("json"),
    );
    let other = PolicySnapshot {
        files: &missing.policy_snapshots()[1],
    }
    .digest();
    let report = replay(&missing, &RulesDecider);
    let found: Vec<String> = report.issues.iter().map(ToString::to_string).collect();
    let no = |i: usize| {
        format!(
            "receipt host-a:{i} (receipts/host-a.jsonl index {i}): decided under policy {n}, but the pack holds no snapshot of it (its snapshots: {o}, {other})"
        )
    };
    assert_eq!(found, [no(2), no(3)]);
    assert_eq!((report.replayed, report.matched), (2, 2));
}
