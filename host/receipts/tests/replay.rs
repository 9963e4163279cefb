//! Replay re-derives every verdict from the recorded policy and finds the
//! ones that changed.

mod common;

use common::{RulesDecider, standard_pack};
use hcp_receipts::pack::{self, ReadLimits};
use hcp_receipts::replay;
use hcp_receipts::replay::{Finding, PolicySnapshot};
use serde_json::json;

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
