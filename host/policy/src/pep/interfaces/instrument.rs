//! The PEP's rules of `hcp:capability/instrument`: only the granted
//! instruments; a command needs the instrument's plan, and the plan must
//! keep to the session's safety envelope (prohibited actions, hard
//! limits); after a breach every command is refused.

use super::{Args, Call, InterfaceRules, OwnArgs, de, flagged_text, malformed};
use crate::pep::cut::{Cutter, Text, t};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::threat::scan_json;
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Decision, args_invalid, not_found};
use hcp_contracts::ReasonCode;
use hcp_contracts::interfaces::Op;
use hcp_instruments::envelope::Violation;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// `instrument.command`, with what the host worked out before deciding:
/// the instrument's plan (values it would set, actions it would perform),
/// or why there is none, and whether an earlier breach shut the session's
/// instruments down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentArgs<'a> {
    /// The action.
    pub action: Text<'a>,
    /// The arguments as the guest sent them (JSON text).
    pub arguments: Text<'a>,
    /// The breach that shut the instruments down, if one did.
    pub breach: Option<Text<'a>>,
    /// The instrument's plan for the command.
    pub plan: Option<PlanArgs>,
    /// Why there is no plan (malformed arguments, unknown action).
    pub plan_error: Option<Text<'a>>,
}

/// An instrument's plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanArgs {
    /// Named actions (checked against prohibited actions).
    pub actions: Vec<String>,
    /// Values it would set (checked against hard limits).
    pub settings: Vec<SettingArgs>,
}

/// One value a command would set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingArgs {
    /// Envelope parameter.
    pub parameter: String,
    /// Unit of `value`.
    pub unit: String,
    /// The value.
    pub value: f64,
}

impl<'a> Call<'a> {
    /// `instrument.command`.
    pub fn instrument_command(instrument: &'a str, args: InstrumentArgs<'a>) -> Self {
        Self {
            op: Op::InstrumentCommand,
            target: t(instrument),
            args: Args::Instrument(args),
        }
    }
}

impl OwnArgs for InstrumentArgs<'_> {
    type Static = InstrumentArgs<'static>;

    fn into_static(self) -> InstrumentArgs<'static> {
        let o = |t: Text<'_>| -> Text<'static> { Cow::Owned(t.into_owned()) };
        InstrumentArgs {
            action: o(self.action),
            arguments: o(self.arguments),
            breach: self.breach.map(o),
            plan: self.plan,
            plan_error: self.plan_error.map(o),
        }
    }

    /// The arguments' text.
    fn budget_bytes(&self, _target: &str) -> u64 {
        self.arguments.len() as u64
    }

    fn text_len(&self) -> usize {
        let opt = |s: &Option<Text<'_>>| s.as_ref().map_or(0, |s| s.len());
        self.action.len() + self.arguments.len() + opt(&self.breach) + opt(&self.plan_error)
    }

    /// The action, breach and plan error before the target; the arguments
    /// after it.
    fn cut(&self, c: &mut Cutter) -> InstrumentArgs<'static> {
        let action = c.cut(&self.action);
        let breach = c.opt(&self.breach);
        let plan_error = c.opt(&self.plan_error);
        InstrumentArgs {
            action,
            arguments: Cow::Owned(String::new()),
            breach,
            plan: self.plan.clone(),
            plan_error,
        }
    }

    fn cut_bulk(&self, kept: &mut InstrumentArgs<'static>, c: &mut Cutter) {
        kept.arguments = c.cut(&self.arguments);
    }

    /// The plan's values are floats.
    fn floats(&self) -> bool {
        true
    }

    /// The action and the arguments' keys and strings are bound for a
    /// command.
    fn scan(&self, s: &Scan, signals: &mut Signals) {
        s.scan(&self.action, Exposure::COMMAND, signals);
        match serde_json::from_str::<serde_json::Value>(&self.arguments) {
            Ok(v) => scan_json(s, &v, Exposure::COMMAND, signals),
            Err(_) => s.scan(&self.arguments, Exposure::COMMAND, signals),
        }
    }

    fn flagged(&self) -> bool {
        flagged_text(&self.arguments)
    }

    fn kept(&self, pointer: &str) -> bool {
        matches!(pointer, "/action" | "/breach" | "/plan_error") || pointer.starts_with("/plan/")
    }
}

/// `instrument.command`, `instrument.read`.
#[derive(Debug)]
pub(crate) struct Instrument;

impl InterfaceRules for Instrument {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        let target = call.target.as_ref();
        match (call.op, &call.args) {
            (Op::InstrumentCommand, Args::Instrument(_)) | (Op::InstrumentRead, Args::Empty(_)) => {
                if scope.instruments.contains(target) {
                    Ok(())
                } else {
                    not_found(format!(
                        "instrument {target:?} is not granted to {}",
                        scope.facts.capability
                    ))
                }
            }
            _ => malformed(call),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        match &call.args {
            Args::Instrument(a) => match (&a.plan, &a.plan_error) {
                (_, Some(e)) => args_invalid(e.to_string()),
                (None, None) => args_invalid("the command has no plan".into()),
                (Some(_), None) => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn envelope(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        let Args::Instrument(a) = &call.args else {
            return Ok(());
        };
        let instrument = &call.target;
        if let Some(breach) = &a.breach {
            return Err(Decision::deny(
                ReasonCode::DenyEnvelopeHardLimit,
                format!("instruments are shut down after a safety breach: {breach}"),
            ));
        }
        let Some(plan) = &a.plan else {
            return malformed(call);
        };
        for action in &plan.actions {
            if let Err(v) = scope.guard.check_action(action) {
                return Err(Decision::deny(
                    ReasonCode::DenyProhibitedAction,
                    format!("{instrument}: {v}"),
                ));
            }
        }
        for s in &plan.settings {
            match scope.guard.check(&s.parameter, s.value, &s.unit) {
                Ok(_) => {}
                Err(v @ Violation::Unit { .. }) => {
                    return args_invalid(format!("{instrument}: {v}"));
                }
                Err(v) => {
                    return Err(Decision::deny(
                        ReasonCode::DenyEnvelopeHardLimit,
                        format!("{instrument}: {v}"),
                    ));
                }
            }
        }
        Ok(())
    }

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(match op {
            Op::InstrumentCommand => Args::Instrument(de(op, raw)?),
            _ => Args::Empty(de(op, raw)?),
        })
    }
}
