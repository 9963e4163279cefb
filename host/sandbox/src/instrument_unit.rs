//! `hcp:capability/instrument`: commands to the granted instruments, every
//! one through the session's safety-envelope guard (`hcp-instruments`).

use crate::bindings::hcp::capability::instrument;
use crate::bindings::hcp::capability::types::{Denial, HostError, ReasonCode};
use crate::hcp_units::HcpCtx;

impl instrument::Host for HcpCtx {
    async fn command(
        &mut self,
        instrument: String,
        action: String,
        arguments: String,
    ) -> wasmtime::Result<Result<String, HostError>> {
        use hcp_instruments::envelope::Violation;
        use hcp_instruments::session::Refusal;
        self.host_calls += 1;
        let args: serde_json::Value = match serde_json::from_str(&arguments) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            Ok(_) => {
                return Ok(Err(HostError::InvalidArgument(
                    "arguments must be a JSON object".into(),
                )));
            }
            Err(e) => {
                return Ok(Err(HostError::InvalidArgument(format!(
                    "arguments are not JSON: {e}"
                ))));
            }
        };
        let events_before = self.instruments.events().len();
        let result = self.instruments.command(&instrument, &action, &args);
        for e in &self.instruments.events()[events_before..] {
            self.log.host_note(&e.message);
            self.risk_events.push(e.kind.clone());
        }
        Ok(match result {
            Ok(reading) => Ok(reading.to_string()),
            Err(Refusal::Invalid(m)) => Err(HostError::InvalidArgument(m)),
            Err(r @ Refusal::NotGranted(_)) => {
                Err(self.deny(ReasonCode::ToolNotFound, r.to_string()))
            }
            Err(r @ Refusal::ShutDown(_)) => Err(HostError::Denied(Denial {
                reason: ReasonCode::EnvelopeHardLimit,
                message: r.to_string(),
            })),
            Err(r @ Refusal::Breach { .. }) => {
                let reason = match &r {
                    Refusal::Breach {
                        violation: Violation::Prohibited { .. },
                        ..
                    } => ReasonCode::ProhibitedAction,
                    _ => ReasonCode::EnvelopeHardLimit,
                };
                Err(HostError::Denied(Denial {
                    reason,
                    message: r.to_string(),
                }))
            }
        })
    }

    async fn read(&mut self, instrument: String) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        Ok(match self.instruments.read(&instrument) {
            Ok(reading) => Ok(reading.to_string()),
            Err(r) => Err(self.deny(ReasonCode::ToolNotFound, r.to_string())),
        })
    }
}
