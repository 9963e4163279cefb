//! Mode changes: an operator chooses OBSERVE, SUGGEST or EXECUTE (arming
//! the executor), or re-arms a halted EXECUTE. The witness (the host's
//! policy and receipts) hears of each before it takes effect; entering
//! EXECUTE needs its consent, leaving it never does.

use super::execute::{forget_if_gone, tell_observe};
use super::witness::{ModeChange, WitnessError};
use super::{Exec, Execution, Mediator, MediatorError, Status, bounded, lock, witness_error};
use crate::action::{Mode, OperatorId};
use crate::device::{Device, DeviceError, DeviceKind};
use crate::log::{Event, EventType};
use serde_json::{Map, json};

impl Mediator {
    /// An operator changes the mode. Entering EXECUTE arms (see the module
    /// docs); leaving it sends OBSERVE to the device. Choosing the current
    /// mode changes nothing, except that EXECUTE while halted re-arms.
    ///
    /// # Errors
    ///
    /// [`MediatorError::Forbidden`] (the policy does not let this operator
    /// arm EXECUTE), [`MediatorError::ArmRefused`] /
    /// [`MediatorError::NoDevice`] (the mode did not change; logged as
    /// ERROR), [`MediatorError::Witness`], [`MediatorError::Log`].
    pub fn set_mode(&self, operator: &OperatorId, mode: Mode) -> Result<Status, MediatorError> {
        let mut exec = lock(&self.exec);
        let inner = lock(&self.inner);
        let old = inner.mode;
        if old == mode {
            let halted = matches!(inner.execution, Execution::Halted { .. });
            drop(inner);
            if mode == Mode::Execute && halted {
                self.witness_mode(operator, old, mode)?;
                return self.arm(&mut exec, operator);
            }
            return Ok(self.status());
        }
        if mode == Mode::Execute {
            drop(inner);
            self.witness_mode(operator, old, mode)?;
            return self.arm(&mut exec, operator);
        }
        // Never refused: OBSERVE and SUGGEST execute nothing.
        self.witness_mode(operator, old, mode)?;
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
    /// [`MediatorError::NotInExecute`], [`MediatorError::Forbidden`],
    /// [`MediatorError::ArmRefused`] (execution stays halted),
    /// [`MediatorError::Witness`], [`MediatorError::Log`].
    pub fn rearm(&self, operator: &OperatorId) -> Result<Status, MediatorError> {
        let mut exec = lock(&self.exec);
        let mode = lock(&self.inner).mode;
        if mode != Mode::Execute {
            return Err(MediatorError::NotInExecute(mode));
        }
        self.witness_mode(operator, mode, mode)?;
        self.arm(&mut exec, operator)
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
                if let Err(e) = self.append(mode_change(
                    operator,
                    old,
                    Mode::Execute,
                    old == Mode::Execute,
                )) {
                    // Not armed here without its entry: the device, which
                    // took EXECUTE, is told OBSERVE again.
                    drop(inner);
                    tell_observe(exec);
                    return Err(e.into());
                }
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

    /// Asks the witness (if any) whether `operator` may change the mode from
    /// `from` to `to`, and records it. A refusal of EXECUTE is logged as
    /// ERROR and returned; any other mode is never refused here (leaving
    /// EXECUTE is the safe direction): a failure is only traced.
    fn witness_mode(
        &self,
        operator: &OperatorId,
        from: Mode,
        to: Mode,
    ) -> Result<(), MediatorError> {
        let Some(w) = &self.config.witness else {
            return Ok(());
        };
        let change = ModeChange {
            operator: operator.as_str(),
            from,
            to,
        };
        match w.mode_change(&change) {
            Ok(()) => Ok(()),
            Err(e) if to != Mode::Execute => {
                tracing::warn!(error = %e, %from, %to, "HID mode change not witnessed");
                Ok(())
            }
            Err(e) => {
                let refused = matches!(e, WitnessError::Forbidden(_));
                let err = witness_error(e);
                let mut details = Map::new();
                details.insert(
                    "error_message".into(),
                    json!(bounded(&format!("arming refused: {err}"), 1000)),
                );
                details.insert("requested_mode".into(), json!(Mode::Execute));
                self.append(operator_event(EventType::Error, from, operator, details))?;
                if !refused {
                    tracing::error!(error = %err, "HID mode change not recorded");
                }
                Err(err)
            }
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
