//! `hcp:capability/hid`: a guest proposes keyboard and mouse actions and
//! waits for their outcome; the host's HID mediator (behind [`crate::HidBroker`])
//! stands between every proposal and the executor. The guest never reaches
//! the serial port.
//!
//! The sandbox knows nothing of the mediator or the wire: it turns the WIT
//! action into seed 004's `{action_type, payload}` JSON, asks the PEP
//! (`hid.propose`, `hid.wait`: the device granted, budgets, the threat scan
//! of the typed text and the rationale), and hands it over.

use super::context::HcpCtx;
use crate::bindings::hcp::capability::hid;
use crate::bindings::hcp::capability::types::{Denial as WitDenial, HostError, ReasonCode};
use crate::hid_broker::{HidOutcome, HidRefusal};
use crate::pep::{Call, Denial, Op};
use serde_json::{Value, json};
use std::time::Duration;

fn action_json(action: hid::Action) -> Value {
    match action {
        hid::Action::TypeText(text) => {
            json!({"action_type": "TYPE_TEXT", "payload": {"text": text}})
        }
        hid::Action::KeyCombo(keys) => {
            json!({"action_type": "KEY_COMBO", "payload": {"keys": keys}})
        }
        hid::Action::MouseMove(m) => {
            json!({"action_type": "MOUSE_MOVE", "payload": {"x": m.x, "y": m.y}})
        }
        hid::Action::MouseClick(b) => {
            let button = match b {
                hid::MouseButton::Left => "left",
                hid::MouseButton::Right => "right",
                hid::MouseButton::Middle => "middle",
            };
            json!({"action_type": "MOUSE_CLICK", "payload": {"button": button}})
        }
    }
}

impl HcpCtx {
    fn hid_refusal(&mut self, refusal: HidRefusal) -> HostError {
        match refusal {
            HidRefusal::Invalid(m) | HidRefusal::UnknownProposal(m) => {
                HostError::InvalidArgument(m)
            }
            // The mediator's own bound, after the PEP allowed the call.
            HidRefusal::TooManyPending(m) => {
                self.note_denial(&Denial {
                    reason: hcp_receipts::reason::BUDGET_EXCEEDED,
                    message: m.clone(),
                });
                HostError::Denied(WitDenial {
                    reason: ReasonCode::BudgetExceeded,
                    message: m,
                })
            }
            HidRefusal::Unavailable(m) => HostError::Unavailable(m),
        }
    }
}

impl hid::Host for HcpCtx {
    async fn propose(
        &mut self,
        action: hid::Action,
        rationale: String,
    ) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        let action = action_json(action);
        let kind = action["action_type"].as_str().unwrap_or("").to_owned();
        let payload = action["payload"].to_string();
        // Without a mediator the PEP still decides (and records) the call.
        let proposal = self
            .hid
            .as_ref()
            .map(|l| l.broker.new_proposal_id())
            .unwrap_or_default();
        if let Err(e) = self.govern(&Call::hid_propose(&kind, &payload, &proposal, &rationale)) {
            return Ok(Err(e));
        }
        let Some(link) = self.hid.clone() else {
            return Ok(Err(HostError::Unavailable(
                "this host runs no HID mediator".into(),
            )));
        };
        let session = self.meta.session_id.clone();
        let answer = tokio::task::spawn_blocking(move || {
            link.broker.propose(&session, &proposal, action, rationale)
        })
        .await?;
        Ok(match answer {
            Ok(id) => {
                self.log.host_note(&format!("hid: proposed {kind} as {id}"));
                Ok(id)
            }
            Err(r) => Err(self.hid_refusal(r)),
        })
    }

    async fn wait(
        &mut self,
        proposal_id: String,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<hid::Outcome, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::bare(Op::HidWait, proposal_id.as_str())) {
            return Ok(Err(e));
        }
        let Some(link) = self.hid.clone() else {
            return Ok(Err(HostError::Unavailable(
                "this host runs no HID mediator".into(),
            )));
        };
        let session = self.meta.session_id.clone();
        let left = link
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        let timeout = Duration::from_millis(u64::from(timeout_ms)).min(left);
        let answer =
            tokio::task::spawn_blocking(move || link.broker.wait(&session, &proposal_id, timeout))
                .await?;
        Ok(match answer {
            Ok(HidOutcome::Executed(id)) => Ok(hid::Outcome::Executed(id)),
            Ok(HidOutcome::Rejected(r)) => Ok(hid::Outcome::Rejected(r)),
            Ok(HidOutcome::NotExecuted(r)) => Ok(hid::Outcome::NotExecuted(r)),
            Ok(HidOutcome::Failed(r)) => Ok(hid::Outcome::Failed(r)),
            Ok(HidOutcome::Pending) => Ok(hid::Outcome::Pending),
            Err(r) => Err(self.hid_refusal(r)),
        })
    }
}

/// The sandbox unit of `hcp:capability/hid`: audited and linked only
/// with `grants.devices: hid`.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: "hcp:capability/hid",
    audit: |_, grants| {
        if hcp_contracts::interfaces::Grant::Hid.is_granted(grants) {
            Ok(crate::units::unit::GrantedBy::DeviceHid)
        } else {
            Err("the hid device is not granted (grants.devices)".into())
        }
    },
    link: |l, _, grants| {
        if hcp_contracts::interfaces::Grant::Hid.is_granted(grants) {
            crate::bindings::hcp::capability::hid::add_to_linker::<
                crate::task::TaskState,
                super::context::HcpData,
            >(l, |s| &mut s.hcp)?;
        }
        Ok(())
    },
};
