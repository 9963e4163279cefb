//! The HID assistant's calls, the operator's decisions and the arming of
//! EXECUTE, and their replay.

use super::*;
use crate::common::{shipped, with_file};
use hcp_contracts::{DataClass, RiskLevel};
use hcp_policy::pep::{Call, Op, Scope};
use hcp_receipts::reason;
use serde_json::json;

#[test]
fn hid_calls_need_the_device_and_typed_text_is_scanned() {
    let payload = r#"{"text":"ls -la | grep notes"}"#;
    let propose = Call::hid_propose("TYPE_TEXT", payload, "prop-1", "list the notes");
    let wait = Call::bare(Op::HidWait, "prop-00000001");
    // Not granted: neither call.
    let s = scope();
    assert_eq!(
        verdict(&s, &propose),
        (
            reason::DENY_TOOL_NOT_FOUND,
            "hid.propose: the hid device is not granted to document-analysis@1.0.0".to_owned()
        )
    );
    assert_eq!(verdict(&s, &wait).0, reason::DENY_TOOL_NOT_FOUND);
    // Granted: both; typed shell metacharacters are text for the operator's
    // screen, not a command of the host's.
    let mut f = facts();
    f.surface.devices = vec!["hid".into()];
    let s = Scope::compile(&shipped(), f).expect("scope");
    assert_eq!(verdict(&s, &propose), (reason::ALLOW, String::new()));
    assert_eq!(verdict(&s, &wait), (reason::ALLOW, String::new()));
    // A terminal escape in typed text is denied by the shipped policy.
    let escape = r#"{"text":"\u001b[2Jwiped"}"#;
    let call = Call::hid_propose("TYPE_TEXT", escape, "prop-2", "clear the screen");
    assert_eq!(verdict(&s, &call).0, reason::THREAT_SIGNAL_DETECTED);
    // An action type the host never builds fails the schema.
    let call = Call::hid_propose("SHELL", "{}", "prop-3", "x");
    assert_eq!(
        verdict(&s, &call),
        (
            reason::DENY_ARGS_INVALID,
            "HID action type \"SHELL\" is unknown".to_owned()
        )
    );
    // The bytes budget counts the payload and the rationale.
    assert_eq!(propose.bytes(), (payload.len() + 14) as u64);
    // Replay reads the call back.
    let value: serde_json::Value =
        serde_json::from_slice(&propose.canonical_bytes().expect("bytes")).expect("json");
    assert_eq!(
        Call::from_value(&value).expect("call"),
        propose.clone().into_owned()
    );
}

#[test]
fn hid_decisions_and_executions_replay_from_their_inputs() {
    use hcp_policy::pep::hid::{
        CALL_HID_DECISION, CALL_HID_EXECUTION, HidDecisionInput, HidExecutionInput, HidReadiness,
        HidResult, HidVerdict, decide, decide_decision, decide_execution,
    };
    let policy = shipped();
    let approve = approval_in_execute();
    let code = |i: &HidDecisionInput| decide_decision(&policy, i).reason;
    assert_eq!(code(&approve), reason::ALLOW);
    // A caller who is not an operator, or no caller at all, decides nothing.
    for who in ["harness-alpha-001", "nobody", "host"] {
        let i = HidDecisionInput {
            operator: who.into(),
            ..approve.clone()
        };
        assert_eq!(code(&i), reason::DENY_IDENTITY_UNAUTHORIZED, "{who}");
    }
    let secret = HidDecisionInput {
        credential_warning: true,
        ..approve.clone()
    };
    assert_eq!(code(&secret), reason::DENY_ARGS_INVALID);
    let acknowledged = HidDecisionInput {
        credential_acknowledged: true,
        ..secret
    };
    assert_eq!(code(&acknowledged), reason::ALLOW);
    let reject = HidDecisionInput {
        decision: HidVerdict::Reject,
        reason: Some("wrong window".into()),
        ..approve.clone()
    };
    assert_eq!(code(&reject), reason::DENY_APPROVAL_REJECTED);
    let withdraw = HidDecisionInput {
        decision: HidVerdict::Withdraw,
        operator: "host".into(),
        ..approve.clone()
    };
    assert_eq!(code(&withdraw), reason::DELEGATION_INVALID);
    let forged = HidDecisionInput {
        operator: "operator-lab-01".into(),
        ..withdraw
    };
    assert_eq!(code(&forged), reason::DENY_IDENTITY_UNAUTHORIZED);

    let executed = HidExecutionInput {
        action_type: "TYPE_TEXT".into(),
        at: "2026-11-22T10:00:01Z".into(),
        execution_id: Some("exec-1".into()),
        kind: CALL_HID_EXECUTION.into(),
        mode: "EXECUTE".into(),
        operator: "operator-lab-01".into(),
        proposal: "prop-1".into(),
        proposed_in: Some("EXECUTE".into()),
        readiness: HidReadiness::Armed,
        reason: None,
        result: HidResult::Executed,
        sent: None,
        session_id: "s-1".into(),
    };
    assert_eq!(decide_execution(&executed).reason, reason::ALLOW);
    let halted = HidExecutionInput {
        readiness: HidReadiness::Halted,
        result: HidResult::NotExecuted,
        ..executed.clone()
    };
    assert_eq!(
        decide_execution(&halted).reason,
        reason::DENY_RESOURCE_UNAVAILABLE
    );
    let suggest = HidExecutionInput {
        mode: "SUGGEST".into(),
        readiness: HidReadiness::Off,
        ..halted
    };
    assert_eq!(
        decide_execution(&suggest).reason,
        reason::DENY_TOOL_NOT_FOUND
    );

    // Replay reads them by kind; a malformed input is an error, not a verdict.
    let value = serde_json::to_value(&approve).expect("json");
    let replayed = decide(&policy, CALL_HID_DECISION, &value).expect("a HID kind");
    assert_eq!(replayed.expect("reads").reason, reason::ALLOW);
    let mut extra = value.clone();
    extra["smuggled"] = json!(true);
    assert!(
        decide(&policy, CALL_HID_DECISION, &extra)
            .expect("a HID kind")
            .is_err()
    );
    assert!(decide(&policy, "gate.admission", &value).is_none());
}

/// The facts of a `hid-assistant` task at R2 with T1 data, submitted by
/// `submitter`.
fn hid_task(submitter: &str) -> hcp_policy::pep::hid::HidAuthzFacts {
    let doc: hcp_contracts::manifest::ManifestDoc = serde_json::from_str(include_str!(
        "../../../../plugins/hid-assistant/manifest.json"
    ))
    .expect("manifest");
    hcp_policy::pep::hid::HidAuthzFacts {
        declaration: doc.capability,
        risk: RiskLevel::R2,
        data: DataClass::T1,
        unattended: false,
        submitter: submitter.into(),
    }
}

/// Issue 16.1: an HID decision or an arming of EXECUTE asks what a task
/// approval asks (the operator lists the capability, within its risk limit,
/// never its own task), not only whether the caller is an operator.
#[test]
fn hid_decisions_and_arming_ask_the_approval_question() {
    use hcp_policy::pep::hid::{
        CALL_HID_MODE, HidDecisionInput, HidModeInput, HidVerdict, decide, decide_decision,
        decide_mode,
    };
    // The shipped callers, and an operator limited to document-analysis at R1.
    let mut callers: serde_json::Value =
        serde_json::from_str(&shipped().sources()["callers.json"]).expect("callers");
    callers["callers"].as_array_mut().expect("list").push(json!({
        "id": "operator-docs-r1",
        "description": "An operator for document analysis only, up to R1.",
        "kind": "operator",
        "credential": format!("sha256:{}", hex_sha256("demo-token-operator-docs-r1-not-a-secret")),
        "capabilities": ["document-analysis"],
        "max_risk_level": "R1",
        "max_data_classification": "T1"
    }));
    let policy = with_file("callers.json", &callers.to_string());
    let approve = approval_in_execute();
    let verdict = |i: &HidDecisionInput| {
        let d = decide_decision(&policy, i);
        (d.reason, d.message)
    };
    assert_eq!(verdict(&approve), (reason::ALLOW, String::new()));
    // The limited operator may neither approve nor reject.
    for decision in [HidVerdict::Approve, HidVerdict::Reject] {
        let limited = HidDecisionInput {
            operator: "operator-docs-r1".into(),
            decision,
            reason: Some("not mine".into()),
            ..approve.clone()
        };
        assert_eq!(
            verdict(&limited),
            (
                reason::DENY_FORBIDDEN,
                "operator operator-docs-r1 may not approve hid-assistant".to_owned()
            )
        );
    }
    // Above the operator's risk limit.
    let mut high = hid_task("harness-alpha-001");
    high.risk = RiskLevel::R5;
    let too_high = HidDecisionInput {
        task: Some(high),
        ..approve.clone()
    };
    assert_eq!(
        verdict(&too_high),
        (
            reason::DENY_FORBIDDEN,
            "operator operator-lab-01 may approve up to R4 with T4 data, not R5 with T1 data"
                .to_owned()
        )
    );
    // Its own task's proposal: four eyes.
    let own = HidDecisionInput {
        task: Some(hid_task("operator-lab-01")),
        ..approve.clone()
    };
    let (code, message) = verdict(&own);
    assert_eq!(code, reason::DENY_FORBIDDEN, "{message}");
    assert!(message.contains("no-self-approval"), "{message}");
    // Without the task's facts, nobody decides.
    let unknown = HidDecisionInput {
        task: None,
        ..approve.clone()
    };
    assert_eq!(verdict(&unknown).0, reason::DENY_IDENTITY_UNAUTHORIZED);

    // Arming EXECUTE: every capability with the HID grant, at its ceiling.
    let mut ceiling = hid_task("");
    ceiling.risk = RiskLevel::R3;
    let arm = HidModeInput {
        at: "2026-11-22T10:00:00Z".into(),
        capabilities: vec![ceiling],
        from: "OBSERVE".into(),
        kind: CALL_HID_MODE.into(),
        operator: "operator-lab-01".into(),
        to: "EXECUTE".into(),
    };
    let mode = |i: &HidModeInput| {
        let d = decide_mode(&policy, i);
        (d.reason, d.message)
    };
    assert_eq!(mode(&arm), (reason::ALLOW, String::new()));
    let limited = HidModeInput {
        operator: "operator-docs-r1".into(),
        ..arm.clone()
    };
    assert_eq!(
        mode(&limited),
        (
            reason::DENY_FORBIDDEN,
            "arming EXECUTE: operator operator-docs-r1 may not approve hid-assistant".to_owned()
        )
    );
    // Leaving EXECUTE, or SUGGEST, is any operator's; nobody else's.
    for to in ["OBSERVE", "SUGGEST"] {
        let safe = HidModeInput {
            from: "EXECUTE".into(),
            to: to.into(),
            ..limited.clone()
        };
        assert_eq!(mode(&safe).0, reason::ALLOW, "{to}");
        let caller = HidModeInput {
            operator: "harness-alpha-001".into(),
            ..safe
        };
        assert_eq!(mode(&caller).0, reason::DENY_IDENTITY_UNAUTHORIZED, "{to}");
    }
    // Nothing installed holds the grant: nothing to arm for.
    let none = HidModeInput {
        capabilities: Vec::new(),
        ..arm.clone()
    };
    assert_eq!(mode(&none).0, reason::DENY_RESOURCE_UNAVAILABLE);
    // Replay reads it by kind.
    let value = serde_json::to_value(&limited).expect("json");
    let replayed = decide(&policy, CALL_HID_MODE, &value).expect("a HID kind");
    assert_eq!(replayed.expect("reads").reason, reason::DENY_FORBIDDEN);
}

/// `operator-lab-01` approves proposal `prop-1` of a `harness-alpha-001`
/// task, in EXECUTE.
fn approval_in_execute() -> hcp_policy::pep::hid::HidDecisionInput {
    use hcp_policy::pep::hid::{CALL_HID_DECISION, HidDecisionInput, HidVerdict};
    HidDecisionInput {
        at: "2026-11-22T10:00:00Z".into(),
        credential_acknowledged: false,
        credential_warning: false,
        decision: HidVerdict::Approve,
        kind: CALL_HID_DECISION.into(),
        mode: "EXECUTE".into(),
        operator: "operator-lab-01".into(),
        proposal: "prop-1".into(),
        reason: None,
        session_id: "s-1".into(),
        task: Some(hid_task("harness-alpha-001")),
    }
}
