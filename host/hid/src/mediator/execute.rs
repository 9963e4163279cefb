//! The operator's side that touches the device: approving (and executing),
//! changing mode, arming, re-arming, halting.

use super::witness::{self, Decided, Finished, Readiness};
use super::{
    Exec, Execution, Inner, MIN_DELAY, Mediator, MediatorError, Outcome, State, Status, bounded,
    host_event, lock, pending,
};
use crate::action::{ExecutionId, Mode, OperatorId, ProposalId};
use crate::device::{Device, DeviceError, DeviceKind};
use crate::log::{Event, EventType};
use crate::wire::ActionExecute;
use serde_json::{Map, json};
use std::sync::MutexGuard;
use std::time::Instant;

impl Mediator {
    /// An operator approves a pending proposal. In EXECUTE mode, while
    /// armed, the action is executed now (after the rate limit) and the call
    /// returns once the device answered; otherwise the approval is recorded
    /// and the outcome says why nothing ran. `credential_acknowledged` must
    /// be true when the proposal carries `credential_warning`.
    ///
    /// # Errors
    ///
    /// [`MediatorError::UnknownProposal`], [`MediatorError::NotPending`],
    /// [`MediatorError::CredentialNotAcknowledged`], [`MediatorError::Log`]
    /// (then nothing was executed). A device fault is not an error here: it
    /// halts execution and the outcome is [`Outcome::Failed`].
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
        if record.proposal.credential_warning && !credential_acknowledged {
            return Err(MediatorError::CredentialNotAcknowledged(id.to_string()));
        }
        self.witness_decided(&Decided {
            proposal: id,
            session: &record.proposal.session,
            operator: operator.as_str(),
            verdict: witness::Verdict::Approve,
            reason: None,
            mode,
            credential_warning: record.proposal.credential_warning,
            credential_acknowledged,
        })?;
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
        let decision = self.append(Event {
            event_type: EventType::Decision,
            mode,
            operator_id: operator.to_string(),
            proposal_id: Some(id.to_string()),
            execution_id: None,
            details,
        })?;
        let not_executed = match (&mode, &execution) {
            (Mode::Observe, _) => Some("OBSERVE mode: nothing proposed is executed".to_owned()),
            (Mode::Suggest, _) => {
                Some("SUGGEST mode: proposals are shown, not executed".to_owned())
            }
            (Mode::Execute, Execution::Halted { reason }) => Some(format!(
                "execution is halted until an operator re-arms: {reason}"
            )),
            (Mode::Execute, Execution::Off) => Some("execution is not armed".to_owned()),
            (Mode::Execute, Execution::Armed { .. }) => None,
        };
        if let Some(reason) = not_executed {
            let finished = Finished {
                proposal: id,
                session: &record.proposal.session,
                operator: operator.as_str(),
                mode,
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
                (Outcome::Failed { reason: why }, Some(e))
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
        device.execute(cmd).map_err(|e| {
            let sent = !matches!(e, DeviceError::Wire(_));
            (e, sent)
        })
    }

    /// An operator changes the mode. Entering EXECUTE arms (see the module
    /// docs); leaving it sends OBSERVE to the device. Choosing the current
    /// mode changes nothing, except that EXECUTE while halted re-arms.
    ///
    /// # Errors
    ///
    /// [`MediatorError::ArmRefused`] / [`MediatorError::NoDevice`] (the mode
    /// did not change; logged as ERROR), [`MediatorError::Log`].
    pub fn set_mode(&self, operator: &OperatorId, mode: Mode) -> Result<Status, MediatorError> {
        let mut exec = lock(&self.exec);
        let inner = lock(&self.inner);
        let old = inner.mode;
        if old == mode {
            let halted = matches!(inner.execution, Execution::Halted { .. });
            drop(inner);
            if mode == Mode::Execute && halted {
                return self.arm(&mut exec, operator);
            }
            return Ok(self.status());
        }
        if mode == Mode::Execute {
            drop(inner);
            return self.arm(&mut exec, operator);
        }
        let mut inner = inner;
        if old == Mode::Execute {
            // Leaving EXECUTE is never blocked, not even by a failing log.
            inner.mode = mode;
            inner.execution = Execution::Off;
            let logged = self.append(mode_change(operator, old, mode, false));
            drop(inner);
            tell_observe(&mut exec);
            logged?;
        } else {
            self.append(mode_change(operator, old, mode, false))?;
            inner.mode = mode;
            inner.execution = Execution::Off;
            drop(inner);
        }
        Ok(self.status())
    }

    /// An operator re-arms a halted (or armed) EXECUTE mode: a fresh
    /// handshake, then `set_mode EXECUTE`.
    ///
    /// # Errors
    ///
    /// [`MediatorError::NotInExecute`], [`MediatorError::ArmRefused`]
    /// (execution stays halted), [`MediatorError::Log`].
    pub fn rearm(&self, operator: &OperatorId) -> Result<Status, MediatorError> {
        let mut exec = lock(&self.exec);
        let mode = lock(&self.inner).mode;
        if mode != Mode::Execute {
            return Err(MediatorError::NotInExecute(mode));
        }
        self.arm(&mut exec, operator)
    }

    /// Asks a reporting device for its status now (nothing is sent to the
    /// public firmware); a DISABLED kill switch or any fault halts
    /// execution. The host may call this periodically.
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

    /// Arms EXECUTE: open, handshake, `set_mode EXECUTE`. On success the
    /// mode is EXECUTE and armed (MODE_CHANGE logged); on failure the mode is
    /// unchanged, or stays halted (ERROR logged), and OBSERVE is sent.
    fn arm(&self, exec: &mut Exec, operator: &OperatorId) -> Result<Status, MediatorError> {
        let Some(config) = self.config.device.clone() else {
            let mut details = Map::new();
            details.insert(
                "error_message".into(),
                json!(MediatorError::NoDevice.to_string()),
            );
            let mode = lock(&self.inner).mode;
            self.append(operator_event(EventType::Error, mode, operator, details))?;
            return Err(MediatorError::NoDevice);
        };
        let attempt = (|| {
            if exec.device.is_none() {
                exec.device = Some(Device::open(config)?);
            }
            let device = exec
                .device
                .as_mut()
                .ok_or_else(|| DeviceError::Disconnected {
                    request: "get_status",
                    reason: "the port is closed".into(),
                })?;
            let kind = device.handshake()?;
            let status = device.last_status().cloned();
            device.set_mode(Mode::Execute)?;
            Ok::<(DeviceKind, _), DeviceError>((kind, status))
        })();
        let mut inner = lock(&self.inner);
        let old = inner.mode;
        match attempt {
            Ok((kind, status)) => {
                self.append(mode_change(
                    operator,
                    old,
                    Mode::Execute,
                    old == Mode::Execute,
                ))?;
                inner.mode = Mode::Execute;
                inner.execution = Execution::Armed { device: kind };
                if status.is_some() {
                    inner.device_status = status;
                }
                drop(inner);
                Ok(self.status())
            }
            Err(e) => {
                let mut details = Map::new();
                details.insert(
                    "error_message".into(),
                    json!(bounded(&format!("arming refused: {e}"), 1000)),
                );
                details.insert("requested_mode".into(), json!(Mode::Execute));
                let logged = self.append(operator_event(EventType::Error, old, operator, details));
                if let Execution::Halted { .. } = inner.execution {
                    inner.execution = Execution::Halted {
                        reason: format!("arming refused: {e}"),
                    };
                }
                drop(inner);
                forget_if_gone(exec, &e);
                tell_observe(exec);
                logged?;
                Err(MediatorError::ArmRefused(e))
            }
        }
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
fn forget_if_gone(exec: &mut Exec, fault: &DeviceError) {
    if matches!(
        fault,
        DeviceError::Disconnected { .. } | DeviceError::Open { .. }
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

fn tell_observe(exec: &mut Exec) {
    if let Some(device) = exec.device.as_mut()
        && let Err(e) = device.set_mode(Mode::Observe)
    {
        tracing::warn!(error = %e, "HID executor not told OBSERVE");
        if matches!(e, DeviceError::Disconnected { .. }) {
            exec.device = None;
        }
    }
}

fn operator_event(
    event_type: EventType,
    mode: Mode,
    operator: &OperatorId,
    details: Map<String, serde_json::Value>,
) -> Event {
    Event {
        event_type,
        mode,
        operator_id: operator.to_string(),
        proposal_id: None,
        execution_id: None,
        details,
    }
}

fn mode_change(operator: &OperatorId, old: Mode, new: Mode, rearmed: bool) -> Event {
    let mut details = Map::new();
    details.insert("old_mode".into(), json!(old));
    details.insert("new_mode".into(), json!(new));
    if rearmed {
        details.insert("rearmed".into(), json!(true));
    }
    operator_event(EventType::ModeChange, new, operator, details)
}
