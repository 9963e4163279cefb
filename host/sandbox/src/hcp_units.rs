//! The `hcp:capability` host interfaces: `log`, `artifacts`, `checkpoints`.
//!
//! Each call passes the PEP ([`crate::pep`]: argument schema, budgets,
//! threat scan) before anything is stored; a denial reaches the guest as
//! `host-error::denied(reason-code)`, never as a trap. The outer
//! `wasmtime::Result` is reserved for host faults.

use crate::bindings::hcp::capability::types::{Denial as WitDenial, HostError, ReasonCode};
use crate::bindings::hcp::capability::{artifacts, checkpoints, log as wit_log, types};
use crate::pep::{Call, Denial, Op, Pep, Signals};
use crate::store::{StoredArtifact, TaskMeta, TaskStore};
use crate::tasklog::{LogLevel, LogSource, TaskLog};
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
    pub(crate) hid: Option<crate::hid_unit::HidLink>,
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

/// The stable name of a reason code, as receipts spell it.
pub fn reason_name(code: ReasonCode) -> &'static str {
    match code {
        ReasonCode::ToolNotFound => "DENY_TOOL_NOT_FOUND",
        ReasonCode::ArgsInvalid => "DENY_ARGS_INVALID",
        ReasonCode::BudgetExceeded => "BUDGET_EXCEEDED",
        ReasonCode::SessionInvalid => "DELEGATION_INVALID",
        ReasonCode::EnvelopeHardLimit => "DENY_ENVELOPE_HARD_LIMIT",
        ReasonCode::ProhibitedAction => "DENY_PROHIBITED_ACTION",
        ReasonCode::ThreatSignalDetected => "THREAT_SIGNAL_DETECTED",
        ReasonCode::IdentityUnauthorized => "DENY_IDENTITY_UNAUTHORIZED",
        ReasonCode::FailClosedError => "FAIL_CLOSED_ERROR",
    }
}

impl types::Host for HcpCtx {}

impl wit_log::Host for HcpCtx {
    async fn write(
        &mut self,
        level: wit_log::Level,
        message: String,
        fields: Vec<wit_log::Field>,
    ) -> wasmtime::Result<()> {
        self.host_calls += 1;
        let (level, name) = match level {
            wit_log::Level::Trace => (LogLevel::Trace, "trace"),
            wit_log::Level::Debug => (LogLevel::Debug, "debug"),
            wit_log::Level::Info => (LogLevel::Info, "info"),
            wit_log::Level::Warn => (LogLevel::Warn, "warn"),
            wit_log::Level::Error => (LogLevel::Error, "error"),
        };
        let fields: Vec<(String, String)> = fields.into_iter().map(|f| (f.key, f.value)).collect();
        // `write` returns nothing: a denied line is dropped (and noted).
        if self.govern(&Call::log(name, &message, &fields)).is_ok() {
            self.log.push(LogSource::Log, level, &message, &fields);
        }
        Ok(())
    }
}

impl artifacts::Host for HcpCtx {
    async fn create(
        &mut self,
        name: String,
        mime_type: String,
        content: Vec<u8>,
    ) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::artifact(&name, &mime_type, content.len() as u64)) {
            return Ok(Err(e));
        }
        if self.artifacts.iter().any(|a| a.name == name) {
            return Ok(Err(HostError::InvalidArgument(format!(
                "artifact {name} already exists in this task"
            ))));
        }
        let size = content.len() as u64;
        match self
            .store
            .put_artifact(&self.meta, &name, &mime_type, &content)
        {
            Ok(stored) => {
                let uri = stored.uri.clone();
                self.artifact_bytes += size;
                self.artifacts.push(stored);
                Ok(Ok(uri))
            }
            Err(e) => Ok(Err(HostError::Unavailable(format!(
                "artifact {name} could not be stored: {e}"
            )))),
        }
    }
}

impl checkpoints::Host for HcpCtx {
    async fn save(
        &mut self,
        label: String,
        state: Vec<u8>,
    ) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::checkpoint_save(&label, state.len() as u64)) {
            return Ok(Err(e));
        }
        let id = format!("ckpt-{:03}", self.checkpoints.len() + 1);
        match self.store.save_checkpoint(&self.meta, &id, &label, &state) {
            Ok(()) => {
                self.checkpoints.push(id.clone());
                Ok(Ok(id))
            }
            Err(e) => Ok(Err(HostError::Unavailable(format!(
                "checkpoint {label} could not be saved: {e}"
            )))),
        }
    }

    async fn load(&mut self, id: String) -> wasmtime::Result<Result<Vec<u8>, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::checkpoint_load(&id)) {
            return Ok(Err(e));
        }
        let session = if self.checkpoints.contains(&id) {
            self.meta.session_id.clone()
        } else if let Some(resume) = self.meta.resume.as_ref().filter(|r| r.checkpoint == id) {
            resume.session_id.clone()
        } else {
            return Ok(Err(HostError::InvalidArgument(format!(
                "no checkpoint {:?} in this task or the one it resumes",
                crate::tasklog::escape_controls(&id)
            ))));
        };
        match self.store.load_checkpoint(&session, &id) {
            Ok(Some(state)) => Ok(Ok(state)),
            Ok(None) => Ok(Err(HostError::InvalidArgument(format!(
                "checkpoint {id} of session {session} does not exist"
            )))),
            Err(e) => Ok(Err(HostError::Unavailable(format!(
                "checkpoint {id} could not be loaded: {e}"
            )))),
        }
    }
}
