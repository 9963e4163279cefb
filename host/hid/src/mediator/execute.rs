//! The operator's side that touches the device: approving (and executing),
//! changing mode, arming, re-arming, halting.

use super::witness::{self, Decided, Finished, Readiness};
use super::{
    Exec, Execution, Inner, MIN_DELAY, Mediator, MediatorError, Outcome, State, Status, bounded,
    decision_event, host_event, lock, pending,
};
use crate::action::{ExecutionId, Mode, OperatorId, ProposalId};
use crate::device::{DeviceError, DeviceKind};
use crate::log::{Event, EventType};
use crate::wire::ActionExecute;
use serde_json::{Map, json};
use std::sync::MutexGuard;
use std::time::Instant;

impl Mediator {
    /// An operator approves a pending proposal. In EXECUTE mode, while
    /// armed, a proposal made in EXECUTE mode is executed now (after the
    /// rate limit) and the call returns once the device answered; otherwise
    /// the approval is recorded and the outcome says why nothing ran (a
    /// proposal made in SUGGEST mode is never executed: the guest proposes
    /// it again). `credential_acknowledged` must be true when the proposal
    /// carries `credential_warning`; the refusal is witnessed all the same.
    ///
    /// # Errors
    ///
    /// [`MediatorError::UnknownProposal`], [`MediatorError::NotPending`],
    /// [`MediatorError::CredentialNotAcknowledged`],
    /// [`MediatorError::Forbidden`], [`MediatorError::Witness`],
    /// [`MediatorError::Log`] (then nothing was executed). A device fault is
    /// not an error here: it halts execution and the outcome is
    /// [`Outcome::Failed`] (or [`Outcome::NotExecuted`] when nothing reached
    /// the device).
    pub fn approve(
        &self,
        operator: &OperatorId,
        id: &ProposalId,
        credential_acknowledged: bool,
    ) -> Result<Outcome, MediatorError> {
        let mut exec = lock(&self.exec);
        let mut inner = lock(&self.inner);
        let mode = inner.mode;
        let execution = inner.execution.clone();
        let record = pending(&mut inner, id)?;
        let witnessed = self.witness_decided(&Decided {
            proposal: id,
            session: &record.proposal.session,
            operator: operator.as_str(),
            verdict: witness::Verdict::Approve,
            reason: None,
            mode,
            credential_warning: record.proposal.credential_warning,
            credential_acknowledged,
        });
        if record.proposal.credential_warning && !credential_acknowledged {
            // Witnessed (the policy's refusal is a receipt), never effective;
            // an operator the policy does not let decide hears that first.
            if let Err(e @ MediatorError::Forbidden(_)) = witnessed {
                return Err(e);
            }
            return Err(MediatorError::CredentialNotAcknowledged(id.to_string()));
        }
        witnessed?;
        let proposed_in = record.mode;
        let readiness = match (&mode, &execution) {
            (Mode::Execute, Execution::Armed { .. }) => Readiness::Armed,
            (Mode::Execute, Execution::Halted { .. }) => Readiness::Halted,
            _ => Readiness::Off,
        };
        let action_type = record.proposal.action.action_type().as_str();
        let mut details = Map::new();
        details.insert("decision".into(), json!("APPROVED"));
        details.insert("session_id".into(), json!(record.proposal.session));
        details.insert(
            "credential_warning".into(),
            json!(record.proposal.credential_warning),
        );
        details.insert(
            "credential_acknowledged".into(),
            json!(credential_acknowledged),
        );
        let decision = self.append(decision_event(mode, &operator, &id, details))?;
        let not_executed = match (&mode, &execution) {
            (Mode::Observe, _) => Some("OBSERVE mode: nothing proposed is executed".to_owned()),
            (Mode::Suggest, _) => {
                Some("SUGGEST mode: proposals are shown, not executed".to_owned())
            }
            (Mode::Execute, Execution::Halted { reason }) => Some(format!(
                "execution is halted until an operator re-arms: {reason}"
            )),
            (Mode::Execute, Execution::Off) => Some("execution is not armed".to_owned()),
            (Mode::Execute, Execution::Armed { .. }) if proposed_in != Mode::Execute => {
                Some(format!(
                    "proposed in {proposed_in} mode: only proposals made in EXECUTE mode are executed; propose it again"
                ))
            }
            (Mode::Execute, Execution::Armed { .. }) => None,
        };
        if let Some(reason) = not_executed {
            let finished = Finished {
                proposal: id,
                session: &record.proposal.session,
                operator: operator.as_str(),
                mode,
                proposed_in,
                readiness,
                action_type,
                result: witness::Result::NotExecuted { reason: &reason },
            };
            let witnessed = self.witness_finished(&finished);
            let outcome = Outcome::NotExecuted { mode, reason };
            record.state = State::Done(outcome.clone());
            self.changed.notify_all();
            if let Err(reason) = witnessed
                && mode == Mode::Execute
            {
                stop_executing(&mut exec, inner, reason);
            }
            return Ok(outcome);
        }
        record.state = State::Executing;
        let cmd = ActionExecute::new(
            &ExecutionId::new(),
            id,
            &record.proposal.action,
            operator,
            &decision.timestamp,
        );
        let session = record.proposal.session.clone();
        drop(inner);

        // The rate limit, measured from the device's last answer.
        if let Some(last) = exec.last_action {
            let ready = last + MIN_DELAY;
            let now = Instant::now();
            if ready > now {
                std::thread::sleep(ready - now);
            }
        }
        let result = self.run(&mut exec, &cmd);
        exec.last_action = Some(Instant::now());

        let mut inner = lock(&self.inner);
        let mut details = Map::new();
        details.insert("session_id".into(), json!(session));
        details.insert("action_type".into(), json!(cmd.action_type));
        let result = result.map_err(|(e, sent)| (e.to_string(), e, sent));
        let witnessed = self.witness_finished(&Finished {
            proposal: id,
            session: &session,
            operator: operator.as_str(),
            mode,
            proposed_in,
            readiness,
            action_type,
            result: match &result {
                Ok(_) => witness::Result::Executed {
                    execution_id: &cmd.execution_id,
                },
                Err((why, _, sent)) => witness::Result::Failed {
                    execution_id: &cmd.execution_id,
                    sent: *sent,
                    reason: why,
                },
            },
        });
        let (outcome, fault) = match result {
            Ok(answer) => {
                details.insert("result".into(), json!("ok"));
                details.insert("sent".into(), json!(true));
                if let Some(a) = answer.action {
                    details.insert("device_action".into(), json!(bounded(&a, 100)));
                }
                (
                    Outcome::Executed {
                        execution_id: cmd.execution_id.clone(),
                    },
                    None,
                )
            }
            Err((why, e, sent)) => {
                details.insert("result".into(), json!("failed"));
                details.insert("sent".into(), json!(sent));
                details.insert("error_message".into(), json!(bounded(&why, 1000)));
                let outcome = if sent {
                    // Written, then the device failed: it may have acted.
                    Outcome::Failed { reason: why }
                } else {
                    // Nothing reached the device: the action did not happen.
                    Outcome::NotExecuted {
                        mode,
                        reason: format!("the action was not sent: {why}"),
                    }
                };
                (outcome, Some(e))
            }
        };
        if let Some(r) = inner.records.get_mut(id) {
            r.state = State::Done(outcome.clone());
        }
        self.changed.notify_all();
        let logged = self.append(Event {
            event_type: EventType::Execution,
            mode,
            operator_id: operator.to_string(),
            proposal_id: Some(id.to_string()),
            execution_id: Some(cmd.execution_id.clone()),
            details,
        });
        if let Some(e) = fault {
            self.halt(&mut exec, inner, &e, Some(&cmd.execution_id));
        } else if let Err(e) = &logged {
            // The log is mandatory: without it, nothing more runs.
            stop_executing(&mut exec, inner, format!("the session log failed: {e}"));
        } else if let Err(reason) = witnessed {
            // So are the host's receipts.
            stop_executing(&mut exec, inner, reason);
        }
        logged?;
        Ok(outcome)
    }

    /// Sends one action: a fresh kill-switch check first where the device
    /// reports status. On failure, says whether the line was written.
    fn run(
        &self,
        exec: &mut Exec,
        cmd: &ActionExecute,
    ) -> Result<crate::wire::Answer, (DeviceError, bool)> {
        let Some(device) = exec.device.as_mut() else {
            return Err((
                DeviceError::Disconnected {
                    request: "action_execute",
                    reason: "the port is closed".into(),
                },
                false,
            ));
        };
        let status = device.status().map_err(|e| (e, false))?;
        if status.is_some() {
            lock(&self.inner).device_status = status;
        }
        device.execute(cmd).map_err(|e| (e, device.line_started()))
    }

    /// While armed, checks that the device is there: a reporting device is
    /// asked for its status; the public firmware, which reports none, is
    /// sent `set_mode EXECUTE` again (what arming sent: it changes nothing
    /// and is answered). A hang-up (end of file, a failed write), silence
    /// (no answer within the answer timeout), an error answer or a DISABLED
    /// kill switch halts execution, before any approval is spent on a dead
    /// device. The host calls this periodically.
    ///
    /// # Errors
    ///
    /// [`MediatorError::Log`].
    pub fn check_device(&self) -> Result<Status, MediatorError> {
        let mut exec = lock(&self.exec);
        if !matches!(lock(&self.inner).execution, Execution::Armed { .. }) {
            return Ok(self.status());
        }
        let result = match exec.device.as_mut() {
            Some(d) if matches!(d.kind(), Some(DeviceKind::PublicFirmware)) => {
                d.set_mode(Mode::Execute).map(|_| None)
            }
            Some(d) => d.status(),
            None => return Ok(self.status()),
        };
        let inner = lock(&self.inner);
        match result {
            Ok(status) => {
                let mut inner = inner;
                if status.is_some() {
                    inner.device_status = status;
                }
            }
            Err(e) => self.halt(&mut exec, inner, &e, None),
        }
        Ok(self.status())
    }

    /// Halts execution after a device fault: ERROR logged, OBSERVE sent
    /// (best effort), the port dropped if it is gone.
    fn halt(
        &self,
        exec: &mut Exec,
        mut inner: MutexGuard<'_, Inner>,
        fault: &DeviceError,
        execution_id: Option<&str>,
    ) {
        let reason = fault.to_string();
        let mode = inner.mode;
        if mode == Mode::Execute {
            inner.execution = Execution::Halted {
                reason: reason.clone(),
            };
        }
        let mut details = Map::new();
        details.insert(
            "error_message".into(),
            json!(bounded(&format!("HID execution halted: {reason}"), 1000)),
        );
        let mut event = host_event(EventType::Error, mode, details);
        event.execution_id = execution_id.map(str::to_owned);
        if let Err(e) = self.append(event) {
            tracing::error!(error = %e, "HID halt not logged");
        }
        tracing::warn!(%reason, "HID execution halted");
        drop(inner);
        forget_if_gone(exec, fault);
        tell_observe(exec);
    }
}

/// Drops the port when the fault says it is gone, so re-arming reopens it.
pub(super) fn forget_if_gone(exec: &mut Exec, fault: &DeviceError) {
    if matches!(
        fault,
        DeviceError::Disconnected { .. }
            | DeviceError::Open { .. }
            | DeviceError::NotWritten { .. }
    ) {
        exec.device = None;
    }
}

/// Tells the device OBSERVE, best effort (it may be gone or mute).
/// Halts execution for `reason` (no device fault: nothing more to log)
/// and tells the device OBSERVE once `inner` is released.
fn stop_executing(exec: &mut Exec, mut inner: MutexGuard<'_, Inner>, reason: String) {
    inner.execution = Execution::Halted { reason };
    drop(inner);
    tell_observe(exec);
}

pub(super) fn tell_observe(exec: &mut Exec) {
    if let Some(device) = exec.device.as_mut()
        && let Err(e) = device.set_mode(Mode::Observe)
    {
        tracing::warn!(error = %e, "HID executor not told OBSERVE");
        if matches!(
            e,
            DeviceError::Disconnected { .. } | DeviceError::NotWritten { .. }
        ) {
            exec.device = None;
        }
    }
}
