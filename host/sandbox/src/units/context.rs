//! The per-task state every `hcp:capability` unit works on, and the one
//! way each of them asks the PEP.
//!
//! Each call passes the PEP ([`crate::pep`]: argument schema, budgets,
//! threat scan) before anything is stored; a denial reaches the guest as
//! `host-error::denied(reason-code)`, never as a trap. The outer
//! `wasmtime::Result` is reserved for host faults.

use crate::bindings::hcp::capability::types::{self, Denial as WitDenial, HostError, ReasonCode};
use crate::hid_broker::HidLink;
use crate::pep::{Call, Denial, Op, Pep, Signals};
use crate::store::{StoredArtifact, TaskMeta, TaskStore};
use crate::tasklog::TaskLog;
use std::sync::Arc;
use wasmtime::component::HasData;

/// Per-task state of the hcp interfaces.
pub(crate) struct HcpCtx {
    pub(crate) meta: Arc<TaskMeta>,
    pub(crate) log: TaskLog,
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) artifacts: Vec<StoredArtifact>,
    pub(crate) artifact_bytes: u64,
    pub(crate) checkpoints: Vec<String>,
    /// hcp host calls made (log, artifacts, checkpoints).
    pub(crate) host_calls: u64,
    /// Denials, as `risk_events` names them.
    pub(crate) risk_events: Vec<String>,
    /// The granted instruments behind the session's envelope guard.
    pub(crate) instruments: hcp_instruments::session::Session,
    /// The task's policy enforcement point.
    pub(crate) pep: Pep,
    /// The HID mediator, when `grants.devices` names `hid`.
    pub(crate) hid: Option<HidLink>,
}

pub(crate) struct HcpData;

impl HasData for HcpData {
    type Data<'a> = &'a mut HcpCtx;
}

impl HcpCtx {
    /// Notes a PEP denial in the task log and the risk events.
    pub(crate) fn note_denial(&mut self, denial: &Denial) {
        self.log.host_note(&format!(
            "denied ({}): {}",
            denial.reason,
            crate::tasklog::escape_controls(&denial.message)
        ));
        self.risk_events.push(format!("denied:{}", denial.reason));
    }

    /// Notes threat signals the PEP recorded (and let through).
    pub(crate) fn note_signals(&mut self, op: Op, signals: Signals) {
        if signals.is_empty() {
            return;
        }
        self.log.host_note(&format!(
            "threat scan recorded {} in the arguments of {op}",
            signals.names()
        ));
        for d in signals.detectors() {
            self.risk_events.push(format!("threat:{}", d.name()));
        }
    }

    /// Asks the PEP about an hcp call: `Err` is the guest's `host-error`.
    pub(crate) fn govern(&mut self, call: &Call<'_>) -> Result<(), HostError> {
        match self.pep.check(call) {
            Ok(signals) => {
                self.note_signals(call.op, signals);
                Ok(())
            }
            Err(denial) => {
                self.note_denial(&denial);
                Err(HostError::Denied(WitDenial {
                    reason: wit_reason(denial.reason),
                    message: denial.message,
                }))
            }
        }
    }
}

/// The WIT reason code of a receipt's reason code (fail closed for codes
/// the WIT does not know).
pub(crate) fn wit_reason(code: &str) -> ReasonCode {
    use hcp_receipts::reason;
    match code {
        reason::DENY_TOOL_NOT_FOUND => ReasonCode::ToolNotFound,
        reason::DENY_ARGS_INVALID => ReasonCode::ArgsInvalid,
        reason::BUDGET_EXCEEDED => ReasonCode::BudgetExceeded,
        reason::DELEGATION_INVALID => ReasonCode::SessionInvalid,
        reason::DENY_ENVELOPE_HARD_LIMIT => ReasonCode::EnvelopeHardLimit,
        reason::DENY_PROHIBITED_ACTION => ReasonCode::ProhibitedAction,
        reason::THREAT_SIGNAL_DETECTED => ReasonCode::ThreatSignalDetected,
        reason::DENY_IDENTITY_UNAUTHORIZED => ReasonCode::IdentityUnauthorized,
        _ => ReasonCode::FailClosedError,
    }
}

/// `hcp:capability/types` declares no functions: only the types the other
/// interfaces share (its reason codes: [`wit_reason`] here, their names in
/// `types.rs`).
impl types::Host for HcpCtx {}
