//! The PEP's rules of `hcp:capability/instrument`: only the granted
//! instruments; a command needs the instrument's plan, and the plan must
//! keep to the session's safety envelope (prohibited actions, hard
//! limits); after a breach every command is refused.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, Op};
use crate::pep::decide::{Decision, args_invalid, malformed, not_found};
use crate::pep::scope::Scope;
use hcp_contracts::ReasonCode;
use hcp_instruments::envelope::Violation;

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
}
