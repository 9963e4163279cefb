//! The `hcp:capability` host interfaces: `log`, `artifacts`, `checkpoints`.
//!
//! Each call is checked (argument bounds, budgets) before anything is stored;
//! a refusal reaches the guest as a `host-error` value, never as a trap. The
//! outer `wasmtime::Result` is reserved for host faults.

use crate::bindings::hcp::capability::types::{Denial, HostError, ReasonCode};
use crate::bindings::hcp::capability::{artifacts, checkpoints, log as wit_log, types};
use crate::store::{StoredArtifact, TaskMeta, TaskStore};
use crate::tasklog::{LogLevel, LogSource, TaskLog};
use hcp_contracts::manifest::Limits;
use std::sync::Arc;
use wasmtime::component::HasData;

/// Per-task state of the hcp interfaces.
pub(crate) struct HcpCtx {
    pub(crate) meta: Arc<TaskMeta>,
    pub(crate) log: TaskLog,
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) limits: Limits,
    pub(crate) artifacts: Vec<StoredArtifact>,
    pub(crate) artifact_bytes: u64,
    pub(crate) checkpoints: Vec<String>,
    /// hcp host calls made (log, artifacts, checkpoints).
    pub(crate) host_calls: u64,
    /// Denials, as `risk_events` names them.
    pub(crate) risk_events: Vec<String>,
    /// The granted instruments behind the session's envelope guard.
    pub(crate) instruments: hcp_instruments::session::Session,
    /// The HID mediator, when `grants.devices` names `hid`.
    pub(crate) hid: Option<crate::hid_unit::HidLink>,
}

pub(crate) struct HcpData;

impl HasData for HcpData {
    type Data<'a> = &'a mut HcpCtx;
}

impl HcpCtx {
    pub(crate) fn deny(&mut self, reason: ReasonCode, message: String) -> HostError {
        self.log.host_note(&format!("denied: {message}"));
        self.risk_events
            .push(format!("denied:{}", reason_name(reason)));
        HostError::Denied(Denial { reason, message })
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
        let level = match level {
            wit_log::Level::Trace => LogLevel::Trace,
            wit_log::Level::Debug => LogLevel::Debug,
            wit_log::Level::Info => LogLevel::Info,
            wit_log::Level::Warn => LogLevel::Warn,
            wit_log::Level::Error => LogLevel::Error,
        };
        let fields: Vec<(String, String)> = fields.into_iter().map(|f| (f.key, f.value)).collect();
        self.log.push(LogSource::Log, level, &message, &fields);
        Ok(())
    }
}

/// `[A-Za-z0-9._-]{1,max}`, not starting with `.`.
fn is_safe_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// `type/subtype` of RFC 6838 token characters, at most 127 bytes.
fn is_media_type(s: &str) -> bool {
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    s.len() <= 127 && s.split_once('/').is_some_and(|(a, b)| token(a) && token(b))
}

impl artifacts::Host for HcpCtx {
    async fn create(
        &mut self,
        name: String,
        mime_type: String,
        content: Vec<u8>,
    ) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        if !is_safe_name(&name, 128) {
            return Ok(Err(HostError::InvalidArgument(format!(
                "artifact name {:?} must be 1-128 characters from [A-Za-z0-9._-], not starting with '.'",
                crate::tasklog::escape_controls(&name)
            ))));
        }
        if !is_media_type(&mime_type) {
            return Ok(Err(HostError::InvalidArgument(format!(
                "{:?} is not a type/subtype media type",
                crate::tasklog::escape_controls(&mime_type)
            ))));
        }
        if self.artifacts.iter().any(|a| a.name == name) {
            return Ok(Err(HostError::InvalidArgument(format!(
                "artifact {name} already exists in this task"
            ))));
        }
        if self.artifacts.len() as u64 >= self.limits.artifacts {
            let msg = format!(
                "artifact {name}: the task may create {} artifacts (limits.artifacts)",
                self.limits.artifacts
            );
            return Ok(Err(self.deny(ReasonCode::BudgetExceeded, msg)));
        }
        let size = content.len() as u64;
        if self.artifact_bytes + size > self.limits.artifact_bytes {
            let msg = format!(
                "artifact {name} ({size} bytes): the task's artifacts may hold {} bytes, {} are used (limits.artifact_bytes)",
                self.limits.artifact_bytes, self.artifact_bytes
            );
            return Ok(Err(self.deny(ReasonCode::BudgetExceeded, msg)));
        }
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
        if !is_safe_name(&label, 64) {
            return Ok(Err(HostError::InvalidArgument(format!(
                "checkpoint label {:?} must be 1-64 characters from [A-Za-z0-9._-], not starting with '.'",
                crate::tasklog::escape_controls(&label)
            ))));
        }
        if self.checkpoints.len() as u64 >= self.limits.checkpoints {
            let msg = format!(
                "checkpoint {label}: the task may save {} checkpoints (limits.checkpoints)",
                self.limits.checkpoints
            );
            return Ok(Err(self.deny(ReasonCode::BudgetExceeded, msg)));
        }
        if state.len() as u64 > self.limits.checkpoint_bytes {
            let msg = format!(
                "checkpoint {label}: {} bytes is over limits.checkpoint_bytes ({})",
                state.len(),
                self.limits.checkpoint_bytes
            );
            return Ok(Err(self.deny(ReasonCode::BudgetExceeded, msg)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_media_types() {
        for ok in ["raman_raw.json", "growth-log.csv", "a"] {
            assert!(is_safe_name(ok, 128), "{ok}");
        }
        for bad in ["", ".hidden", "../x", "a/b", "a b", "é", &"x".repeat(129)] {
            assert!(!is_safe_name(bad, 128), "{bad}");
        }
        for ok in ["application/json", "text/csv", "application/vnd.api+json"] {
            assert!(is_media_type(ok), "{ok}");
        }
        for bad in ["json", "text/", "/csv", "text/csv; charset=utf-8", "a/b/c"] {
            assert!(!is_media_type(bad), "{bad}");
        }
    }
}
