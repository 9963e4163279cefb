//! The PEP's decision alone, no wasm: every operation allowed when it
//! should be and denied with its reason code when not; deny by default;
//! canonical forms (`calls`, and every kind of arguments in `forms`); replay of recorded decisions (`replay`); the
//! HID assistant's calls, decisions and their replay (`hid`).

mod calls;
#[path = "../common/mod.rs"]
mod common;
mod forms;
mod hid;
mod keyvalue;
mod replay;

use common::shipped;
use hcp_contracts::manifest::{Access, SafetyEnvelope};
use hcp_contracts::{DataClass, RiskLevel};
use hcp_policy::pep::{
    BudgetCaps, Call, CallLimits, Counters, FsSurface, InstrumentArgs, NetSurface, PlanArgs, Scope,
    SessionFacts, SettingArgs, Surface, decide,
};
use serde_json::json;
use std::borrow::Cow;

pub(crate) const NOW: u64 = 1_800_000_000_000;

pub(crate) fn envelope() -> SafetyEnvelope {
    serde_json::from_value(json!({
        "parameters": {
            "temperature": { "max": 1000, "unit": "celsius", "hard_limit": true },
            "ramp_rate": { "max": 20, "unit": "celsius_per_minute", "hard_limit": false }
        },
        "prohibited_actions": ["open_chamber_hot"],
        "emergency_procedures": { "over_temperature": "immediate_shutdown" }
    }))
    .expect("envelope")
}

pub(crate) fn facts() -> SessionFacts {
    SessionFacts {
        budgets: BudgetCaps {
            artifacts: 2,
            bytes: 1000,
            host_calls: 100,
        },
        caller: "harness-local-01".into(),
        capability: "document-analysis@1.0.0".into(),
        data_classification: DataClass::T1,
        envelope: envelope(),
        expires_at_ms: NOW + 60_000,
        limits: CallLimits {
            artifact_bytes: 500,
            artifacts: 8,
            checkpoint_bytes: 100,
            checkpoints: 1,
            table: Default::default(),
        },
        risk_level: RiskLevel::R1,
        session_id: "session-1".into(),
        surface: Surface {
            table: Default::default(),
            devices: vec![],
            filesystem: vec![
                FsSurface {
                    access: Access::ReadOnly,
                    guest_path: "/data".into(),
                },
                FsSurface {
                    access: Access::ReadWrite,
                    guest_path: "/data/out".into(),
                },
            ],
            instruments: vec!["cvd-rig".into()],
            network: vec![
                NetSurface {
                    host: "127.0.0.1".into(),
                    port: 9000,
                },
                NetSurface {
                    host: "example.org".into(),
                    port: 443,
                },
            ],
        },
        task_id: "task-1".into(),
    }
}

pub(crate) fn scope() -> Scope {
    Scope::compile(&shipped(), facts()).expect("scope")
}

pub(crate) fn verdict(scope: &Scope, call: &Call<'_>) -> (&'static str, String) {
    let d = decide(scope, &Counters::default(), call, NOW);
    (d.reason, d.message)
}

pub(crate) fn instrument<'a>(action: &'a str, plan: Option<PlanArgs>) -> Call<'a> {
    Call::instrument_command(
        "cvd-rig",
        InstrumentArgs {
            action: Cow::Borrowed(action),
            arguments: Cow::Borrowed("{\"target\":700}"),
            breach: None,
            plan,
            plan_error: None,
        },
    )
}

pub(crate) fn plan(value: f64) -> PlanArgs {
    PlanArgs {
        actions: vec![],
        settings: vec![SettingArgs {
            parameter: "temperature".into(),
            unit: "celsius".into(),
            value,
        }],
    }
}

pub(crate) fn hex_sha256(text: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}
