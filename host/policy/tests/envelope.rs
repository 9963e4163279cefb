//! The effective safety envelope: never looser than the declaration or the
//! policy, for any pair of envelopes (property test), with the exact
//! messages for what is ignored and what is refused.

mod common;

use hcp_contracts::manifest::{EnvelopeParameter, SafetyEnvelope};
use hcp_contracts::message::RejectReason;
use hcp_policy::units::Unit;
use hcp_policy::{EnvelopeError, tighten};
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

fn envelope(value: serde_json::Value) -> SafetyEnvelope {
    serde_json::from_value(value).expect("envelope")
}

#[test]
fn looser_policy_values_are_ignored_and_reported() {
    let declared = envelope(json!({
        "parameters": { "temperature": { "min": 20, "max": 1000, "unit": "celsius", "hard_limit": true } }
    }));
    let policy = envelope(json!({
        "parameters": { "temperature": { "min": 10, "max": 1200, "unit": "celsius" } }
    }));
    let e = tighten(&declared, Some(&policy)).expect("merged");
    assert_eq!(e.envelope, declared);
    assert_eq!(
        e.ignored,
        [
            "temperature.max 1200 celsius is looser than the declaration's 1000 celsius: ignored",
            "temperature.min 10 celsius is looser than the declaration's 20 celsius: ignored",
        ]
    );
}

#[test]
fn policy_bounds_in_another_unit_are_converted() {
    let declared = envelope(json!({
        "parameters": { "temperature": { "max": 1000, "unit": "celsius" } }
    }));
    let policy = envelope(json!({
        "parameters": {
            "temperature": { "max": 1173.15, "unit": "kelvin", "hard_limit": true },
            "pressure": { "max": 2, "unit": "atm" }
        },
        "prohibited_actions": ["open_chamber_above_200c"]
    }));
    let e = tighten(&declared, Some(&policy)).expect("merged");
    let t = &e.envelope.parameters["temperature"];
    assert!((t.max.expect("max") - 900.0).abs() < 1e-9, "{t:?}");
    assert_eq!(t.unit.as_deref(), Some("celsius"));
    assert!(t.hard_limit);
    assert_eq!(e.envelope.parameters["pressure"].max, Some(2.0));
    assert_eq!(e.envelope.prohibited_actions, ["open_chamber_above_200c"]);
}

#[test]
fn what_cannot_be_merged_is_refused() {
    let declared = envelope(json!({
        "parameters": { "temperature": { "min": 500, "max": 1000, "unit": "celsius" } },
        "emergency_procedures": { "over_temperature": "immediate_shutdown" }
    }));
    let cases = [
        (
            json!({ "parameters": { "temperature": { "max": 5, "unit": "atm" } } }),
            "safety envelope parameter temperature: the declaration's unit \"celsius\" and the \
             policy's \"atm\" do not convert",
        ),
        (
            json!({ "parameters": { "temperature": { "max": 400 } } }),
            "safety envelope parameter temperature: merged min 500 is above max 400",
        ),
        (
            json!({ "emergency_procedures": { "over_temperature": "keep_going" } }),
            "safety envelope emergency procedure over_temperature: the declaration says \
             \"immediate_shutdown\", the policy \"keep_going\"; make them agree",
        ),
    ];
    for (policy, message) in cases {
        let err = tighten(&declared, Some(&envelope(policy))).expect_err("merged");
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn the_gate_refuses_a_task_whose_envelope_cannot_be_merged() {
    let envelopes = r#"{ "capabilities": { "cvd-material-synthesis": {
        "emergency_procedures": { "over_temperature": "log_and_continue" } } } }"#;
    let set = common::with_file("envelopes.json", envelopes);
    let r = common::admit(&set, &common::cvd_submit()).expect_err("admitted");
    assert_eq!(r.reason_code, RejectReason::InternalError);
    assert_eq!(
        r.reason_message,
        "cvd-material-synthesis: envelopes.json: safety envelope emergency procedure \
         over_temperature: the declaration says \"immediate_shutdown\", the policy \
         \"log_and_continue\"; make them agree"
    );
}

const NAMES: [&str; 3] = ["temperature", "pressure", "flow"];
const UNITS: [Option<&str>; 4] = [None, Some("celsius"), Some("kelvin"), Some("sccm")];

fn parameter() -> impl Strategy<Value = EnvelopeParameter> {
    let bound = proptest::option::of(-2000i32..2000);
    (bound.clone(), bound, 0..UNITS.len(), any::<bool>()).prop_map(|(a, b, u, hard_limit)| {
        EnvelopeParameter {
            min: a.map(f64::from),
            max: b.map(f64::from),
            unit: UNITS[u].map(str::to_owned),
            hard_limit,
        }
    })
}

fn arbitrary_envelope() -> impl Strategy<Value = SafetyEnvelope> {
    (
        proptest::collection::btree_map(proptest::sample::select(&NAMES[..]), parameter(), 0..3),
        proptest::collection::vec(proptest::sample::select(&["a", "b", "c"][..]), 0..3),
        proptest::collection::btree_map(
            proptest::sample::select(&["fire", "leak"][..]),
            proptest::sample::select(&["stop", "vent"][..]),
            0..2,
        ),
    )
        .prop_map(|(parameters, actions, procedures)| {
            let mut prohibited_actions: Vec<String> =
                actions.into_iter().map(str::to_owned).collect();
            prohibited_actions.dedup();
            SafetyEnvelope {
                parameters: parameters
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
                prohibited_actions,
                emergency_procedures: procedures
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            }
        })
}

/// `v` in `from` expressed in `to` (same unit or unit-less: unchanged).
fn convert(v: f64, from: Option<&str>, to: Option<&str>) -> f64 {
    match (
        from.and_then(|u| u.parse::<Unit>().ok()),
        to.and_then(|u| u.parse::<Unit>().ok()),
    ) {
        (Some(f), Some(t)) => f.convert(v, t).expect("same quantity"),
        _ => v,
    }
}

/// `effective` is at least as tight as `side` for every parameter `side` bounds.
fn at_least_as_tight(
    effective: &SafetyEnvelope,
    side: &SafetyEnvelope,
) -> Result<(), TestCaseError> {
    for (name, p) in &side.parameters {
        let e = effective
            .parameters
            .get(name)
            .ok_or_else(|| TestCaseError::fail(format!("{name} dropped")))?;
        let to = e.unit.as_deref();
        if let Some(max) = p.max {
            let bound = convert(max, p.unit.as_deref(), to);
            let em = e
                .max
                .ok_or_else(|| TestCaseError::fail(format!("{name}.max dropped")))?;
            prop_assert!(em <= bound + 1e-9, "{name}.max {em} looser than {bound}");
        }
        if let Some(min) = p.min {
            let bound = convert(min, p.unit.as_deref(), to);
            let em = e
                .min
                .ok_or_else(|| TestCaseError::fail(format!("{name}.min dropped")))?;
            prop_assert!(em >= bound - 1e-9, "{name}.min {em} looser than {bound}");
        }
        prop_assert!(e.hard_limit || !p.hard_limit, "{name}: hard_limit dropped");
    }
    for action in &side.prohibited_actions {
        prop_assert!(
            effective.prohibited_actions.contains(action),
            "{action} allowed again"
        );
    }
    for (condition, procedure) in &side.emergency_procedures {
        prop_assert_eq!(
            effective.emergency_procedures.get(condition),
            Some(procedure)
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn the_effective_envelope_is_never_looser_than_either_side(
        declared in arbitrary_envelope(),
        policy in arbitrary_envelope(),
    ) {
        match tighten(&declared, Some(&policy)) {
            Ok(effective) => {
                at_least_as_tight(&effective.envelope, &declared)?;
                at_least_as_tight(&effective.envelope, &policy)?;
                for p in effective.envelope.parameters.values() {
                    if let (Some(min), Some(max)) = (p.min, p.max) {
                        prop_assert!(min <= max);
                    }
                }
            }
            // Refusals only for the documented reasons, each really present.
            Err(EnvelopeError::Units { parameter, declared: du, policy: pu }) => {
                prop_assert_ne!(&du, &pu);
                prop_assert!(du == "sccm" || pu == "sccm", "{} and {} convert", du, pu);
                prop_assert!(declared.parameters.contains_key(&parameter));
            }
            Err(EnvelopeError::Procedure { condition, declared: d, policy: p }) => {
                prop_assert_ne!(&d, &p);
                prop_assert_eq!(declared.emergency_procedures.get(&condition), Some(&d));
            }
            Err(EnvelopeError::Empty { parameter, .. }) => {
                prop_assert!(
                    declared.parameters.contains_key(&parameter) || policy.parameters.contains_key(&parameter)
                );
            }
        }
    }

    #[test]
    fn without_a_policy_the_declaration_stands(declared in arbitrary_envelope()) {
        if let Ok(effective) = tighten(&declared, None) {
            prop_assert_eq!(effective.envelope, declared);
            prop_assert!(effective.ignored.is_empty());
        }
    }
}
