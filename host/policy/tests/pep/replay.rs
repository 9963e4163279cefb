//! Replay of a session's recorded decisions, against the policy they were
//! made under and against a changed one.

use super::*;
use crate::common::shipped;
use hcp_policy::pep::{self, Call, Counters, FsAccess, Op, PepDecider, decide};
use hcp_receipts::pack::{DecisionInput, HostSection, Pack};
use hcp_receipts::replay::{Finding, replay};
use hcp_receipts::{Digest, Draft, HostKey, HostLog, SigningPolicy};

/// A log of one session's decisions, as a host records them, in a pack.
fn recorded_pack(policy: &hcp_policy::PolicySet) -> Pack {
    let key = HostKey::from_seed(&[7; 32]);
    let public = key.public().clone();
    let mut log = HostLog::new("host-test", key, SigningPolicy::default()).expect("log");
    let f = facts();
    let (scope, opened) = pep::input::open(policy, f.clone(), NOW);
    let scope = scope.expect("scope");
    let policy_hash: Digest = policy.policy_hash().parse().expect("hash");
    let mut receipts = Vec::new();
    let mut inputs = Vec::new();
    let mut append = |call: &str, input: Vec<u8>, verdict, reason: &str, log: &mut HostLog| {
        let a = log
            .append(Draft {
                session_id: Some("session-1".into()),
                task_id: Some("task-1".into()),
                capability: f.capability.clone(),
                call: call.into(),
                args_hash: Digest::of(b"args"),
                input_hash: Digest::of(&input),
                verdict,
                reason_code: reason.into(),
                risk: RiskLevel::R1,
                policy_hash,
                parents: vec![],
                timestamp: "2027-01-15T08:00:00Z".into(),
            })
            .expect("append");
        inputs.push(DecisionInput {
            input: serde_json::from_slice(&input).expect("json"),
            seq: a.receipt.seq,
        });
        receipts.push(a.receipt);
    };
    let open_input = pep::input::open_input(&f, NOW).expect("input");
    append(
        "session.open",
        open_input,
        opened.verdict,
        opened.reason,
        &mut log,
    );
    let fields = vec![];
    let mut counters = Counters::default();
    for call in [
        Call::log("info", "x", &fields),
        Call::fs(Op::FsOpen, "/etc/passwd".into(), FsAccess::Read, None),
        Call::http("example.org:443".into(), "GET", "https", "/"),
    ] {
        let d = decide(&scope, &counters, &call, NOW + 1);
        let (_, input) =
            pep::input::call_record(NOW + 1, &call, &counters, &scope.facts_hash()).expect("rec");
        append(call.op.name(), input, d.verdict, d.reason, &mut log);
        counters.charge(&call, d.verdict);
    }
    Pack {
        hosts: vec![HostSection::new(
            "host-test",
            vec![public.key_id().clone()],
            receipts,
            vec![],
            inputs,
        )],
        public_keys: vec![public],
        policy: policy
            .sources()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
            .collect(),
        ..Pack::default()
    }
}

#[test]
fn replay_rederives_every_verdict_and_finds_a_changed_policy() {
    let pack = recorded_pack(&shipped());
    let report = replay(&pack, &PepDecider::new(&pack));
    assert!(report.ok(), "{:?}", report.issues);
    assert_eq!((report.replayed, report.matched), (4, 4));

    // The snapshot edited: http.request turned off for the capability.
    let mut edited = pack.clone();
    let dispatch = String::from_utf8(edited.policy["dispatch.json"].clone())
        .expect("utf8")
        .replace(
            "\"capabilities\": {",
            "\"capabilities\": {\n    \"document-analysis\": {\"denied_calls\": [\"http.request\"]},",
        );
    edited
        .policy
        .insert("dispatch.json".into(), dispatch.into_bytes());
    let report = replay(&edited, &PepDecider::new(&edited));
    let changed: Vec<String> = report
        .issues
        .iter()
        .filter(|i| matches!(i.finding, Finding::VerdictChanged { .. }))
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        changed,
        [
            "receipt host-test:3 (receipts/host-test.jsonl index 3): verdict changed: recorded ALLOW ALLOW, replayed DENY DENY_TOOL_NOT_FOUND"
        ]
    );
    // And every receipt names another policy than the edited snapshot.
    assert_eq!(
        report
            .issues
            .iter()
            .filter(|i| matches!(i.finding, Finding::PolicyHashMismatch { .. }))
            .count(),
        4
    );
}
