//! `hcp:capability/instrument`: commands to the granted instruments. The
//! host works out what a command would do (the instrument's plan) and the
//! PEP decides on it (surface, schema, budgets, safety envelope, threat
//! scan); an allowed command then runs through the session's
//! safety-envelope guard (`hcp-instruments`), which checks it again, runs
//! it, and checks the instrument's state after it.
//!
//! A command the PEP refuses for crossing the envelope never runs, and
//! still counts as a breach: the declared emergency procedure runs and the
//! session's instruments shut down, as the guard would have done.

use super::context::HcpCtx;
use crate::bindings::hcp::capability::instrument;
use crate::bindings::hcp::capability::types::{Denial, HostError, ReasonCode};
use crate::pep::{Call, InstrumentArgs, Op, PlanArgs, SettingArgs};
use hcp_instruments::Plan;
use hcp_instruments::session::Refusal;
use std::borrow::Cow;

/// The longest arguments of one instrument command, in bytes. Longer ones
/// are refused (`INVALID_ARGS`, with a receipt) without being parsed: they
/// were parsed before the PEP saw them, a JSON value for every two bytes of
/// a guest's whole memory.
const MAX_ARGUMENTS: usize = 64 * 1024;

fn plan_args(plan: &Plan) -> PlanArgs {
    PlanArgs {
        actions: plan.actions.clone(),
        settings: plan
            .settings
            .iter()
            .map(|s| SettingArgs {
                parameter: s.parameter.clone(),
                unit: s.unit.clone(),
                value: s.value,
            })
            .collect(),
    }
}

impl HcpCtx {
    fn refusal(&mut self, r: Refusal) -> HostError {
        use hcp_instruments::envelope::Violation;
        match r {
            Refusal::Invalid(m) => HostError::InvalidArgument(m),
            r @ Refusal::NotGranted(_) => HostError::Denied(Denial {
                reason: ReasonCode::ToolNotFound,
                message: r.to_string(),
            }),
            r @ Refusal::ShutDown(_) => HostError::Denied(Denial {
                reason: ReasonCode::EnvelopeHardLimit,
                message: r.to_string(),
            }),
            r @ Refusal::Breach { .. } => {
                let reason = match &r {
                    Refusal::Breach {
                        violation: Violation::Prohibited { .. },
                        ..
                    } => ReasonCode::ProhibitedAction,
                    _ => ReasonCode::EnvelopeHardLimit,
                };
                HostError::Denied(Denial {
                    reason,
                    message: r.to_string(),
                })
            }
        }
    }

    fn note_safety_events(&mut self, before: usize) {
        let events: Vec<_> = self.instruments.events()[before..].to_vec();
        for e in events {
            self.log.host_note(&e.message);
            self.risk_events.push(e.kind);
        }
    }
}

impl instrument::Host for HcpCtx {
    async fn command(
        &mut self,
        instrument: String,
        action: String,
        arguments: String,
    ) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        let parsed = if arguments.len() > MAX_ARGUMENTS {
            // Not parsed: a JSON value costs many times its text, and this
            // is what the guest's memory held.
            Err(format!(
                "arguments are {} bytes; a command's may be at most {MAX_ARGUMENTS}",
                arguments.len()
            ))
        } else {
            match serde_json::from_str::<serde_json::Value>(&arguments) {
                Ok(v @ serde_json::Value::Object(_)) => Ok(v),
                Ok(_) => Err("arguments must be a JSON object".to_owned()),
                Err(e) => Err(format!("arguments are not JSON: {e}")),
            }
        };
        let plan = match &parsed {
            Ok(args) => self
                .instruments
                .plan(&instrument, &action, args)
                .map_err(|r| r.to_string()),
            Err(e) => Err(e.clone()),
        };
        let call = Call::instrument_command(
            &instrument,
            InstrumentArgs {
                action: Cow::Borrowed(&action),
                arguments: Cow::Borrowed(&arguments),
                breach: self.instruments.breach().map(|b| Cow::Owned(b.to_owned())),
                plan: plan.as_ref().ok().map(plan_args),
                plan_error: plan.as_ref().err().map(|e| Cow::Owned(e.clone())),
            },
        );
        if let Err(denied) = self.govern(&call) {
            // Refused for the envelope: the emergency procedure runs as if
            // the guard had refused it.
            if let (HostError::Denied(d), Ok(plan)) = (&denied, &plan)
                && matches!(
                    d.reason,
                    ReasonCode::EnvelopeHardLimit | ReasonCode::ProhibitedAction
                )
                && self.instruments.breach().is_none()
            {
                let before = self.instruments.events().len();
                let refused = self.instruments.refuse(&instrument, plan);
                self.note_safety_events(before);
                if let Some(r) = refused {
                    return Ok(Err(self.refusal(r)));
                }
            }
            return Ok(Err(denied));
        }
        let Ok(args) = parsed else {
            return Ok(Err(HostError::InvalidArgument(
                "arguments must be a JSON object".into(),
            )));
        };
        let before = self.instruments.events().len();
        let result = self.instruments.command(&instrument, &action, &args);
        self.note_safety_events(before);
        Ok(match result {
            Ok(reading) => Ok(reading.to_string()),
            Err(r) => Err(self.refusal(r)),
        })
    }

    async fn read(&mut self, instrument: String) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::bare(Op::InstrumentRead, instrument.as_str())) {
            return Ok(Err(e));
        }
        Ok(match self.instruments.read(&instrument) {
            Ok(reading) => Ok(reading.to_string()),
            Err(r) => Err(self.refusal(r)),
        })
    }
}

/// The sandbox unit of `hcp:capability/instrument`: audited and linked only
/// with `grants.instruments`.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: "hcp:capability/instrument",
    audit: |_, grants| {
        if hcp_contracts::interfaces::Grant::Instruments.is_granted(grants) {
            Ok(crate::units::unit::GrantedBy::Instruments)
        } else {
            Err("no instrument is granted (grants.instruments)".into())
        }
    },
    link: |l, _, grants| {
        if hcp_contracts::interfaces::Grant::Instruments.is_granted(grants) {
            crate::bindings::hcp::capability::instrument::add_to_linker::<
                crate::task::TaskState,
                super::context::HcpData,
            >(l, |s| &mut s.hcp)?;
        }
        Ok(())
    },
};
