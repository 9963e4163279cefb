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

/// The host renders an admission's decision input with the installed
/// manifest's canonical form put in place of the manifest
/// (`Canonical::replacing`), not the manifest copied and rendered again:
/// the receipt's `input_hash`, the stored input and what replay decides
/// from it must be those of the input rendered whole.
#[test]
fn an_admission_input_with_its_manifest_put_in_place_is_the_input_rendered_whole() {
    use hcp_contracts::jcs::{Canonical, canonical_bytes};
    use hcp_policy::pep::gate::{AdmissionInput, CALL_ADMISSION, decide_admission};
    let policy = shipped();
    for submit in [common::document_submit(), common::cvd_submit()] {
        let manifest = common::manifest_for(&submit);
        let payload = serde_json::to_value(&submit).expect("payload");
        let whole = AdmissionInput {
            at: "2025-01-15T09:00:00.123456789Z".into(),
            caller: submit.caller_id.clone(),
            equipment_busy: vec!["furnace-2".into()],
            host_check: None,
            kind: CALL_ADMISSION.into(),
            manifest: Some(manifest.clone()),
            submit: payload.clone(),
            submit_bounded: None,
            context_bounded: None,
            transport: None,
        };
        let without = AdmissionInput::<()> {
            at: whole.at.clone(),
            caller: whole.caller.clone(),
            equipment_busy: whole.equipment_busy.clone(),
            host_check: None,
            kind: CALL_ADMISSION.into(),
            manifest: None,
            submit: payload,
            submit_bounded: None,
            context_bounded: None,
            transport: None,
        };
        let placed = Canonical::replacing(
            &without,
            "manifest",
            &Canonical::of(&manifest).expect("manifest"),
        )
        .expect("placed");
        assert_eq!(
            String::from_utf8_lossy(placed.as_bytes()),
            String::from_utf8_lossy(&canonical_bytes(&whole).expect("whole")),
            "{}",
            submit.capability
        );
        let back: AdmissionInput = serde_json::from_slice(placed.as_bytes()).expect("read back");
        assert_eq!(
            decide_admission(&policy, &back),
            decide_admission(&policy, &whole)
        );
    }
}

/// What an admission receipt bounds is what its decision does not read: a
/// payload the host refused by its own check decides as that check says;
/// a bounded payload without one fails closed (the host never records
/// one); a bounded `context` decides as the whole payload does.
#[test]
fn a_bounded_admission_input_decides_as_the_whole_one_or_fails_closed() {
    use hcp_contracts::message::RejectReason;
    use hcp_policy::pep::BoundedText;
    use hcp_policy::pep::gate::{AdmissionInput, CALL_ADMISSION, HostCheck, decide_admission};
    let policy = shipped();
    let submit = common::document_submit();
    let manifest = common::manifest_for(&submit);
    let mut payload = serde_json::to_value(&submit).expect("payload");
    payload["context"] = serde_json::json!({"notes": "x".repeat(10_000)});
    let context = BoundedText::of(&payload["context"].to_string()).expect("large");
    let whole = AdmissionInput {
        at: "2025-01-15T09:00:00.123Z".into(),
        caller: submit.caller_id.clone(),
        equipment_busy: Vec::new(),
        host_check: None,
        kind: CALL_ADMISSION.into(),
        manifest: Some(manifest),
        submit: payload.clone(),
        submit_bounded: None,
        context_bounded: None,
        transport: None,
    };
    let mut without_context = payload.clone();
    without_context
        .as_object_mut()
        .expect("object")
        .remove("context");
    let bounded_context = AdmissionInput {
        submit: without_context,
        context_bounded: Some(context),
        ..whole.clone()
    };
    assert_eq!(
        decide_admission(&policy, &bounded_context),
        decide_admission(&policy, &whole)
    );
    let refused = AdmissionInput {
        host_check: Some(HostCheck {
            message: "the task_submit is invalid".into(),
            reason_code: RejectReason::InvalidInput,
        }),
        submit: serde_json::Value::Null,
        submit_bounded: BoundedText::of(&payload.to_string()),
        ..whole.clone()
    };
    let d = decide_admission(&policy, &refused);
    assert_eq!(
        (d.verdict, d.reason),
        (hcp_receipts::Verdict::Deny, "DENY_ARGS_INVALID")
    );
    let forged = AdmissionInput {
        host_check: None,
        ..refused
    };
    assert_eq!(
        decide_admission(&policy, &forged).reason,
        "FAIL_CLOSED_ERROR"
    );
}
