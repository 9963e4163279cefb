//! The gate on the seed's tasks and the shipped policy set: every outcome
//! with its exact message.

mod common;

use common::*;
use hcp_contracts::message::RejectReason;
use hcp_contracts::schema::SchemaId;
use hcp_contracts::{DataClass, RiskLevel};
use hcp_policy::{AdmissionRequest, BaseSource, EquipmentState, Rejection, Stage};
use serde_json::json;
use time::macros::datetime;

fn rejected(result: Result<hcp_policy::Admission, Rejection>) -> Rejection {
    match result {
        Ok(a) => panic!("admitted: {:#?}", a.reasons),
        Err(r) => {
            // Every rejection is a valid task_rejected payload.
            let payload = serde_json::to_value(r.payload()).expect("serialize");
            SchemaId::TaskRejected
                .validate(&payload, "/payload")
                .unwrap_or_else(|p| panic!("{p:?}"));
            r
        }
    }
}

#[test]
fn seed_cvd_task_is_admitted_at_r3_pending_approval() {
    let set = shipped();
    let a = admit(&set, &cvd_submit()).unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(a.caller.as_str(), "harness-alpha-001");
    assert_eq!(a.risk_level, RiskLevel::R3);
    assert_eq!(a.assessment.base_source, BaseSource::Policy);
    assert!(a.assessment.fired.is_empty());
    assert!(a.approval_required);
    assert_eq!(a.data_classification, DataClass::T2);
    assert_eq!(a.authorized_by, ["invoke-within-limits"]);
    assert!(a.queued_for.is_empty());
    assert_eq!(a.policy_hash, set.policy_hash());
    assert_eq!(
        a.reasons,
        [
            "caller harness-alpha-001 (supervised_session) authenticated",
            "harness-alpha-001 lists cvd-material-synthesis",
            "base R3 from risk.json",
            "assessed R3 within ceiling R4 and caller limit R4",
            "data T2 within clearance T3",
            "cedar permits: invoke-within-limits",
            "human approval required: the declaration requires it and R3 ≥ R3",
        ]
    );
    // The operator's envelope tightened the seed's.
    let envelope = serde_json::to_value(&a.envelope.envelope).expect("json");
    assert_eq!(
        envelope,
        json!({
            "parameters": {
                "gas_flow_rate": { "max": 200.0, "unit": "sccm", "hard_limit": true },
                "pressure": { "max": 3.0, "unit": "atm", "hard_limit": true },
                "temperature": { "max": 950.0, "unit": "celsius", "hard_limit": true }
            },
            "prohibited_actions": ["simultaneous_gas_mixing_without_purge", "open_chamber_above_200c"],
            "emergency_procedures": {
                "gas_leak_detected": "close_all_valves_and_alert",
                "over_temperature": "immediate_shutdown",
                "power_loss": "close_all_valves_and_alert"
            }
        })
    );
    assert!(a.envelope.ignored.is_empty());
    assert_eq!(a.budgets.host_calls, 1_000_000);
    assert_eq!(a.budgets.bytes, 1 << 30);
    assert_eq!(a.budgets.artifacts, 32);
    assert_eq!(a.budgets.caller_concurrent_sessions, 4);
    assert_eq!(a.budgets.capability_concurrent_sessions, 1);
}

#[test]
fn cvd_at_1200_celsius_is_too_risky_for_an_r3_caller() {
    let submit = cvd_task(
        "harness-beta-002",
        json!({"min": 1100, "max": 1200, "unit": "celsius"}),
    );
    let r = rejected(admit(&shipped(), &submit));
    assert_eq!(r.stage, Stage::Risk);
    assert_eq!(r.reason_code, RejectReason::RiskTooHigh);
    assert_eq!(r.assessed_risk_level, Some(RiskLevel::R4));
    assert_eq!(
        r.reason_message,
        "Task parameters indicate R4 risk level, but caller harness-beta-002 is only authorized for R1-R3"
    );
    assert_eq!(
        r.suggestion.as_deref(),
        Some("Reduce temperature_range.max to 800°C or below to qualify for R3")
    );
}

#[test]
fn kelvin_inputs_are_converted_before_comparing() {
    let set = shipped();
    let hot = cvd_task(
        "harness-beta-002",
        json!({"min": 1373.15, "max": 1473.15, "unit": "kelvin"}),
    );
    let r = rejected(admit(&set, &hot));
    assert_eq!(r.reason_code, RejectReason::RiskTooHigh);
    assert_eq!(r.assessed_risk_level, Some(RiskLevel::R4));
    assert_eq!(
        r.suggestion.as_deref(),
        Some("Reduce temperature_range.max to 800°C (1073.15 K) or below to qualify for R3")
    );
    // 1000 K is 726.85 °C: below the bound, though 1000 > 800.
    let warm = cvd_task(
        "harness-beta-002",
        json!({"min": 973.15, "max": 1000, "unit": "kelvin"}),
    );
    let a = admit(&set, &warm).unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(a.risk_level, RiskLevel::R3);
    // No unit: the rule's default, celsius.
    let bare = cvd_task("harness-beta-002", json!({"max": 801}));
    assert_eq!(
        rejected(admit(&set, &bare)).assessed_risk_level,
        Some(RiskLevel::R4)
    );
}

#[test]
fn a_caller_allowed_r4_is_admitted_at_r4_with_the_rule_recorded() {
    let submit = cvd_task(
        "harness-alpha-001",
        json!({"min": 1100, "max": 1200, "unit": "celsius"}),
    );
    let a = admit(&shipped(), &submit).unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(a.risk_level, RiskLevel::R4);
    assert!(a.approval_required);
    assert_eq!(a.assessment.fired.len(), 1);
    assert_eq!(a.assessment.fired[0].id.as_str(), "cvd-above-800c");
    assert!(
        a.reasons
            .contains(&"rule cvd-above-800c: temperature_range.max 1200°C > 800°C → R4".to_owned()),
        "{:#?}",
        a.reasons
    );
}

#[test]
fn above_the_declared_ceiling_is_refused_for_everyone() {
    let mut submit = cvd_submit();
    submit.inputs["target_material"] = json!("GaAs");
    let r = rejected(admit(&shipped(), &submit));
    assert_eq!(r.reason_code, RejectReason::RiskTooHigh);
    assert_eq!(r.assessed_risk_level, Some(RiskLevel::R5));
    assert_eq!(
        r.reason_message,
        "Task parameters indicate R5 risk level, above cvd-material-synthesis's risk ceiling R4"
    );
    assert_eq!(
        r.suggestion.as_deref(),
        Some(
            "Change target_material to a value other than \"GaAs\", \"InAs\", \"AlAs\" to qualify for R3"
        )
    ); // For a caller cleared for R3, the suggestion names every rule above R3.
    let mut beta = cvd_task("harness-beta-002", json!({"max": 1200, "unit": "celsius"}));
    beta.inputs["target_material"] = json!("InAs");
    let r = rejected(admit(&shipped(), &beta));
    assert_eq!(r.assessed_risk_level, Some(RiskLevel::R5));
    assert_eq!(
        r.suggestion.as_deref(),
        Some(
            "Reduce temperature_range.max to 800°C or below and change target_material to a value \
             other than \"GaAs\", \"InAs\", \"AlAs\" to qualify for R3"
        )
    );
}

#[test]
fn the_pipeline_may_not_ask_for_cvd_at_all() {
    let mut submit = cvd_submit();
    submit.caller_id = "harness-local-01".into();
    let r = rejected(admit(&shipped(), &submit));
    assert_eq!(r.stage, Stage::Access);
    assert_eq!(r.reason_code, RejectReason::Forbidden);
    assert_eq!(
        r.reason_message,
        "caller harness-local-01 may not invoke cvd-material-synthesis"
    );
    assert_eq!(r.assessed_risk_level, None);
    assert_eq!(r.suggestion, None);
}

/// The shipped callers with harness-local-01 listed for every capability
/// (`all_capabilities`) instead of by name.
fn pipeline_listed_for_all() -> hcp_policy::PolicySet {
    let mut callers: serde_json::Value =
        serde_json::from_str(&shipped_sources()["callers.json"]).expect("json");
    let pipeline = &mut callers["callers"][0];
    assert_eq!(pipeline["id"], "harness-local-01");
    pipeline["capabilities"] = json!([]);
    pipeline["all_capabilities"] = json!(true);
    with_file("callers.json", &callers.to_string())
}

#[test]
fn a_caller_listed_for_all_capabilities_passes_access_and_cedar_within_its_limits() {
    let set = pipeline_listed_for_all();
    let a = admit(&set, &document_submit()).unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(a.risk_level, RiskLevel::R1);
    assert_eq!(a.authorized_by, ["invoke-within-limits"]);
    assert!(
        a.reasons.contains(
            &"harness-local-01 lists every capability (all_capabilities), document-analysis included"
                .to_owned()
        ),
        "{:?}",
        a.reasons
    );
    // Listed for CVD too now, but its R3 is above the pipeline's R2.
    let mut submit = cvd_submit();
    submit.caller_id = "harness-local-01".into();
    let r = rejected(admit(&set, &submit));
    assert_eq!(r.stage, Stage::Risk);
    assert_eq!(r.reason_code, RejectReason::RiskTooHigh);
    // Without the flag and without the name, the same caller is refused at access.
    let mut callers: serde_json::Value =
        serde_json::from_str(&set.sources()["callers.json"]).expect("json");
    callers["callers"][0]["all_capabilities"] = json!(false);
    let set = with_file("callers.json", &callers.to_string());
    let r = rejected(admit(&set, &document_submit()));
    assert_eq!(r.stage, Stage::Access);
    assert_eq!(r.reason_code, RejectReason::Forbidden);
}

#[test]
fn seed_document_analysis_is_admitted_at_r1_without_approval() {
    let a = admit(&shipped(), &document_submit()).unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(a.caller.as_str(), "harness-local-01");
    assert_eq!(a.risk_level, RiskLevel::R1);
    assert_eq!(a.data_classification, DataClass::T1);
    assert!(!a.approval_required);
    assert_eq!(a.envelope.envelope, Default::default());
    // The caller's budget is tighter than the default; sessions: the
    // caller's own, and the default under the declaration's 16.
    assert_eq!(a.budgets.host_calls, 5_000);
    assert_eq!(a.budgets.bytes, 64 << 20);
    assert_eq!(a.budgets.caller_concurrent_sessions, 8);
    assert_eq!(a.budgets.capability_concurrent_sessions, 4);
}

#[test]
fn unknown_callers_and_wrong_credentials_are_unauthorized() {
    let set = shipped();
    let submit = document_submit();
    let manifest = document_manifest();
    let idle = EquipmentState::idle();
    let ask = |caller: &str, credential: &str| {
        let mut submit = submit.clone();
        submit.caller_id = caller.to_owned();
        rejected(set.admit(&AdmissionRequest {
            submit: &submit,
            credential,
            manifest: &manifest,
            now: WEDNESDAY_10AM,
            equipment: &idle,
        }))
    };
    for (caller, credential) in [
        (
            "harness-local-01",
            "demo-token-harness-local-01-not-a-secreT",
        ),
        ("harness-local-01", ""),
        ("harness-local-01", &token("harness-alpha-001")),
        ("harness-nobody", &token("harness-local-01")),
        ("not a valid id", &token("harness-local-01")),
    ] {
        let r = ask(caller, credential);
        assert_eq!(r.stage, Stage::Authentication, "{caller}");
        assert_eq!(r.reason_code, RejectReason::Unauthorized);
        assert_eq!(
            r.reason_message,
            format!("caller {caller:?} is not authenticated: unknown caller or wrong credential")
        );
    }
}

#[test]
fn t4_data_from_a_t2_caller_is_refused() {
    let set = shipped();
    let mut submit = document_submit();
    submit
        .constraints
        .as_mut()
        .expect("constraints")
        .data_classification = Some(DataClass::T4);
    let r = rejected(admit(&set, &submit));
    assert_eq!(r.stage, Stage::DataClassification);
    assert_eq!(r.reason_code, RejectReason::Forbidden);
    assert_eq!(r.assessed_risk_level, Some(RiskLevel::R1));
    assert_eq!(
        r.reason_message,
        "data classification T4 is above caller harness-local-01's clearance T2"
    );
    // Within the caller's clearance (T3) but above the capability's (T2).
    submit.caller_id = "harness-alpha-001".into();
    submit
        .constraints
        .as_mut()
        .expect("constraints")
        .data_classification = Some(DataClass::T3);
    let r = rejected(admit(&set, &submit));
    assert_eq!(
        r.reason_message,
        "data classification T3 is above what document-analysis may handle (T2)"
    );
}

#[test]
fn unattended_hours_raise_the_level() {
    let set = shipped();
    let beta = cvd_task(
        "harness-beta-002",
        json!({"min": 700, "max": 750, "unit": "celsius"}),
    );
    // Wednesday 23:00 in the lab.
    let night = datetime!(2025-01-15 22:00 UTC);
    let r = rejected(admit_at(&set, &beta, night, &EquipmentState::idle()));
    assert_eq!(r.reason_code, RejectReason::RiskTooHigh);
    assert_eq!(r.assessed_risk_level, Some(RiskLevel::R4));
    assert_eq!(
        r.suggestion.as_deref(),
        Some("Submit outside unattended hours (20:00–07:00 UTC+01:00) to qualify for R3")
    );
    // harness-alpha-001 may run it at night, at R4.
    let a = admit_at(&set, &cvd_submit(), night, &EquipmentState::idle()).expect("admitted");
    assert_eq!(a.risk_level, RiskLevel::R4);
    assert!(a.assessment.unattended);
    assert_eq!(
        a.assessment.fired[0].detail,
        "unattended hours (20:00–07:00 UTC+01:00): local time 23:00"
    );
    // Saturday noon: the weekend window.
    let saturday = datetime!(2025-01-18 12:00 +01:00);
    let r = rejected(admit_at(&set, &beta, saturday, &EquipmentState::idle()));
    assert_eq!(
        r.suggestion.as_deref(),
        Some("Submit outside unattended hours (sat, sun 00:00–24:00 UTC+01:00) to qualify for R3")
    );
    // Both a hot run and the night: both named.
    let hot = cvd_task("harness-beta-002", json!({"max": 900, "unit": "celsius"}));
    let r = rejected(admit_at(&set, &hot, night, &EquipmentState::idle()));
    assert_eq!(
        r.suggestion.as_deref(),
        Some(
            "Reduce temperature_range.max to 800°C or below and submit outside unattended hours \
             (20:00–07:00 UTC+01:00) to qualify for R3"
        )
    );
    // Document analysis is not in the window's capabilities.
    let a = admit_at(&set, &document_submit(), night, &EquipmentState::idle()).expect("admitted");
    assert_eq!(a.risk_level, RiskLevel::R1);
}

#[test]
fn unattended_window_edges_follow_the_stated_offset() {
    let set = shipped();
    let cvd = cvd_manifest().capability;
    let inputs = cvd_submit().inputs;
    let level = |now| set.assess(&cvd, &inputs, now).expect("assessed").level;
    // 20:00–07:00 at UTC+01:00, across midnight.
    assert_eq!(level(datetime!(2025-01-15 18:59 UTC)), RiskLevel::R3); // 19:59 local
    assert_eq!(level(datetime!(2025-01-15 19:00 UTC)), RiskLevel::R4); // 20:00 local
    assert_eq!(level(datetime!(2025-01-16 05:59 UTC)), RiskLevel::R4); // 06:59 local
    assert_eq!(level(datetime!(2025-01-16 06:00 UTC)), RiskLevel::R3); // 07:00 local
    // The same instant written in another offset is the same decision.
    assert_eq!(level(datetime!(2025-01-15 14:30 -05:00)), RiskLevel::R4); // 20:30 local
    // Weekend: Friday 23:59 is a night, Sunday 23:59 the weekend, Monday 10:00 neither.
    assert_eq!(level(datetime!(2025-01-17 23:59 +01:00)), RiskLevel::R4);
    assert_eq!(level(datetime!(2025-01-19 23:59 +01:00)), RiskLevel::R4);
    assert_eq!(level(datetime!(2025-01-20 10:00 +01:00)), RiskLevel::R3);
}

#[test]
fn busy_equipment_refuses_or_queues_per_resource() {
    let set = shipped();
    let gas = EquipmentState::busy(["gas_supply", "unrelated_robot"]);
    let r = rejected(admit_at(&set, &cvd_submit(), WEDNESDAY_10AM, &gas));
    assert_eq!(r.stage, Stage::Resources);
    assert_eq!(r.reason_code, RejectReason::ResourceUnavailable);
    assert_eq!(r.assessed_risk_level, Some(RiskLevel::R3));
    assert_eq!(
        r.reason_message,
        "cvd-material-synthesis needs gas_supply now in use; try again later"
    );
    let furnace = EquipmentState::busy(["high_temperature_furnace"]);
    let a = admit_at(&set, &cvd_submit(), WEDNESDAY_10AM, &furnace).expect("queued");
    assert_eq!(a.queued_for, ["high_temperature_furnace"]);
    // Resources the capability does not declare do not matter.
    let other = EquipmentState::busy(["unrelated_robot"]);
    let a = admit_at(&set, &cvd_submit(), WEDNESDAY_10AM, &other).expect("admitted");
    assert!(a.queued_for.is_empty());
}

#[test]
fn inputs_a_rule_cannot_compare_are_invalid() {
    let set = shipped();
    for (range, message) in [
        (
            json!({"max": "hot"}),
            "inputs: temperature_range.max: \"hot\" is not a number, but rule cvd-above-800c compares it with 800",
        ),
        (
            json!({"max": 700, "unit": "rankine"}),
            "inputs: temperature_range.unit: \"rankine\" is not a known unit (celsius, kelvin, \
             fahrenheit, pa, kpa, bar, atm, torr, psi)",
        ),
        (
            json!({"max": 700, "unit": "atm"}),
            "inputs: temperature_range.unit: atm does not convert to celsius (use one of celsius, \
             kelvin, fahrenheit)",
        ),
    ] {
        let r = rejected(admit(&set, &cvd_task("harness-alpha-001", range)));
        assert_eq!(r.stage, Stage::Assessment);
        assert_eq!(r.reason_code, RejectReason::InvalidInput);
        assert_eq!(r.reason_message, message);
    }
}

#[test]
fn operators_approve_others_tasks_only() {
    let set = shipped();
    let cvd = cvd_manifest().capability;
    let a = admit(&set, &cvd_submit()).expect("admitted");
    let operator = set
        .authorize_approval("operator-lab-01", &token("operator-lab-01"), &a, &cvd)
        .expect("approved");
    assert_eq!(operator.id.as_str(), "operator-lab-01");
    // A supervised session is not an operator.
    let r = set
        .authorize_approval("harness-alpha-001", &token("harness-alpha-001"), &a, &cvd)
        .expect_err("approved");
    assert_eq!(r.reason_code, RejectReason::Forbidden);
    assert_eq!(
        r.reason_message,
        "harness-alpha-001 is not an operator and cannot approve tasks"
    );
    // Wrong token.
    let r = set
        .authorize_approval("operator-lab-01", "guess", &a, &cvd)
        .expect_err("approved");
    assert_eq!(r.reason_code, RejectReason::Unauthorized);
    // An operator's own task: Cedar's four-eyes rule.
    let mut own = cvd_submit();
    own.caller_id = "operator-lab-01".into();
    own.constraints = None;
    let a = admit(&set, &own).expect("admitted");
    let r = set
        .authorize_approval("operator-lab-01", &token("operator-lab-01"), &a, &cvd)
        .expect_err("approved own task");
    assert_eq!(r.stage, Stage::Authorization);
    assert_eq!(r.reason_code, RejectReason::Forbidden);
    assert_eq!(
        r.reason_message,
        "authz.cedar forbids operator-lab-01 approve cvd-material-synthesis at R3 with T1 data \
         (policy no-self-approval)"
    );
}

#[test]
fn admissions_and_rejections_round_trip_through_json() {
    // The host stores them (an approval comes later) and records them.
    let a = admit(&shipped(), &cvd_submit()).expect("admitted");
    let stored = serde_json::to_value(&a).expect("serialize");
    let back: hcp_policy::Admission = serde_json::from_value(stored).expect("deserialize");
    assert_eq!(back, a);
    let r = rejected(admit(
        &shipped(),
        &cvd_task("harness-beta-002", json!({"max": 900})),
    ));
    let back: Rejection =
        serde_json::from_value(serde_json::to_value(&r).expect("serialize")).expect("deserialize");
    assert_eq!(back, r);
}

#[test]
fn decisions_are_replayable() {
    let set = shipped();
    let hot = cvd_task("harness-beta-002", json!({"max": 1200, "unit": "celsius"}));
    let first = admit(&set, &hot);
    let replayed =
        hcp_policy::PolicySet::from_sources("receipt", set.sources().clone()).expect("replay");
    assert_eq!(admit(&replayed, &hot), first);
    assert_eq!(admit(&replayed, &cvd_submit()), admit(&set, &cvd_submit()));
}

/// Whether the policy can ever ask the approval a declaration requires:
/// the shipped policy asks it of CVD from R3 (its base); with CVD's entry
/// gone from `risk.json`, its R4 floor (physical resources) still asks it;
/// a capability that requires approval but that nothing raises to R3 is
/// never asked (what `hcp review` and `hcp install` warn about).
#[test]
fn an_approval_the_policy_never_asks_for_is_found() {
    let set = shipped();
    let cvd = cvd_manifest();
    let reach = set.approval_reach(&cvd.capability).expect("required");
    assert!(reach.reachable, "{}", reach.detail);
    assert_eq!(
        reach.detail,
        "asked for tasks assessed R3 or above (base R3 from risk.json; 4 escalation rules or \
         unattended windows raise it to at most R5; ceiling R4)"
    );
    let empty = with_file("risk.json", r#"{"capabilities": {}}"#);
    let reach = empty.approval_reach(&cvd.capability).expect("required");
    assert!(reach.reachable, "{}", reach.detail);
    assert!(
        reach.detail.starts_with(
            "asked for tasks assessed R4 or above (base R4 from the declaration's \
             involves_physical_resources;"
        ),
        "{}",
        reach.detail
    );
    // Above the ceiling is refused, never asked.
    let mut declaration = cvd.capability.clone();
    declaration.safety.risk_ceiling = RiskLevel::R2;
    let reach = set.approval_reach(&declaration).expect("required");
    assert!(!reach.reachable, "{}", reach.detail);
    // Another capability (no unattended window of CVD's), not physical.
    let mut declaration = cvd.capability.clone();
    declaration.name = "another".into();
    declaration.safety.involves_physical_resources = false;
    let reach = empty.approval_reach(&declaration).expect("required");
    assert!(!reach.reachable, "{}", reach.detail);
    assert_eq!(
        reach.detail,
        "the declaration requires human approval, but this policy never asks for it: approval \
         is asked from R3, and no task of another can be admitted at R3 or above (base R1 from \
         default; no escalation rule or unattended window raises it; ceiling R4); its tasks run \
         without one. Give it a base of R3 or above in risk.json, or an escalation rule"
    );
    declaration.safety.requires_human_approval = false;
    assert_eq!(set.approval_reach(&declaration), None);
}
