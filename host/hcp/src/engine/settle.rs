//! Every acknowledged task gets a final state: a submission that fails on
//! a host fault after its task was recorded fails the task (instead of
//! leaving it `received`, reported queued, forever), and at startup the
//! tasks a stopped host left `received` are failed the same way; a task
//! still running when a stopping server's grace runs out is failed before
//! the host exits ([`Host::settle_interrupted`]).

use super::Host;
use super::submission::Submission;
use crate::store::{SettleWrite, TaskRecord, TaskState};
use anyhow::Result;
use hcp_contracts::message::{Envelope, ErrorCode, ErrorDetails, MessageType, TaskFailed};
use serde_json::Value;

fn internal_failure(task: &TaskRecord, message: &str) -> Result<Value> {
    Ok(serde_json::to_value(Envelope::new(
        MessageType::TaskFailed,
        task.session_id.clone(),
        TaskFailed {
            error_code: ErrorCode::InternalError,
            error_message: message.to_owned(),
            error_details: None,
            partial_outputs: None,
            artifacts: Vec::new(),
            execution_summary: None,
        },
    )?)?)
}

impl Host {
    /// The gate's answer, or, on a host fault, the task (if the gate had
    /// not answered it yet) failed with `internal_error`, and the fault.
    pub(super) fn settle_submission(
        &self,
        task: &TaskRecord,
        answered: Result<Submission>,
    ) -> Result<Submission> {
        let Err(fault) = answered else {
            return answered;
        };
        let message = match crate::store::durable::storage_full(&fault) {
            Some(_) => {
                "the host's storage was full: the task was not admitted; submit it again \
                        with a new message_id once the host accepts tasks"
            }
            None => "the host failed while admitting the task; see its log",
        };
        // If even this cannot be written, the store writes it once it can.
        if let Ok(answer) = internal_failure(task, message)
            && let Ok(true) = self.store.settle(
                &task.task_id,
                TaskState::Received,
                TaskState::Failed,
                answer,
            )
        {
            // Answered for good: an AMQP delivery's redelivery is a
            // duplicate of it and gets this answer, so its route (if any)
            // has nothing left to carry. Left open, a host that starts
            // again closes it.
            let _ = self.store.route_answered(&task.task_id);
        }
        Err(fault)
    }

    /// At startup: tasks left `received` (the gate never answered them)
    /// are failed with `internal_error`, and their `message_id`s freed
    /// (nothing ran, nobody had an answer). Returns their ids.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn settle_unanswered(&self) -> Result<Vec<String>> {
        let mut settled = Vec::new();
        for id in self.store.unanswered()? {
            let Some(task) = self.store.task(&id)? else {
                continue;
            };
            let answer = internal_failure(
                &task,
                "the host stopped or failed before the gate answered the task, so it never \
                 ran; its message_id is free again: send the same message again to submit it",
            )?;
            // Nobody had an answer: the same message (a caller's retry, a
            // broker's redelivery) is a new task. The failure and the freed
            // `message_id` are one write, so the failure never says the
            // message may be sent again while it is still taken.
            if self
                .store
                .fail_unanswered(&id, TaskState::Received, &answer)?
            {
                settled.push(id);
            }
        }
        Ok(settled)
    }

    /// At startup: tasks this host had not recorded as its own when it
    /// stopped, so their AMQP delivery was not acknowledged (the record
    /// comes first). The broker redelivers such a message
    /// (to this host or another), so this copy never runs and this host
    /// never answers for it: it is failed here (a `gate.abandoned`
    /// receipt), its `message_id` freed for the redelivery, and its route
    /// closed. A task already answered for good (refused at the gate) only
    /// has its route closed. Returns the ids of the copies abandoned.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn abandon_unacknowledged(&self) -> Result<Vec<String>> {
        let mut abandoned = Vec::new();
        for route in self.store.open_routes()? {
            if route.acked {
                continue;
            }
            let task = self.store.task(&route.task_id)?;
            if task.as_ref().is_some_and(|t| t.state.is_final()) {
                // Answered for good before the host stopped (refused at
                // the gate, or failed there): the redelivery is a
                // duplicate and gets the same answer, so its
                // `message_id` stays taken.
                self.store.route_answered(&route.task_id)?;
                continue;
            }
            if let Some(task) = task {
                const WHY: &str = "the host stopped before it acknowledged the AMQP delivery, \
                                   so the broker delivers the message again and whoever takes \
                                   it answers";
                // The receipt first: a copy abandoned is on the record
                // before its state says so. The failure, the freed
                // `message_id` and the closed route are one write: a host
                // that stops before it abandons the copy again at its next
                // start.
                self.record_abandoned(&task, "amqp", WHY)?;
                let answer = internal_failure(&task, &format!("abandoned: {WHY}"))?;
                if !self.store.abandon(&task.task_id, task.state, &answer)? {
                    // Moved meanwhile (another host on this directory):
                    // let go all the same, as the copy is not this one's.
                    self.store.let_go(&route.task_id)?;
                }
            } else {
                self.store.let_go(&route.task_id)?;
            }
            abandoned.push(route.task_id);
        }
        Ok(abandoned)
    }

    /// While serving: a task recorded as this host's whose AMQP delivery
    /// then could not be acknowledged (the connection or channel was gone,
    /// so the acknowledgement never left). The broker gives the message to
    /// another consumer, so this copy is abandoned as at startup, unless it
    /// has started meanwhile (it then stays this host's, and runs). Returns
    /// whether it was abandoned.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn abandon_unacknowledged_copy(&self, task_id: &str) -> Result<bool> {
        const WHY: &str = "the connection to the broker was lost before the host acknowledged \
                           the AMQP delivery, so the broker delivers the message again and \
                           whoever takes it answers";
        let Some(task) = self.store.task(task_id)? else {
            return Ok(false);
        };
        if !matches!(task.state, TaskState::Queued | TaskState::PendingApproval) {
            return Ok(false);
        }
        // Not this host's any more: neither the outbox nor the loop that
        // starts tasks takes it from here on (and a host that stops now
        // abandons it at startup).
        self.store.route_disowned(task_id)?;
        // Then the state, conditionally: a task that started meanwhile is
        // this host's again, and runs; no receipt says it was abandoned.
        // The failure, the freed `message_id` (the redelivery may come
        // back here: it is a new submission) and the closed route (this
        // host never answers for it) in one write.
        let answer = internal_failure(&task, &format!("abandoned: {WHY}"))?;
        if !self.store.abandon(task_id, task.state, &answer)? {
            self.store.route_acked(task_id)?;
            return Ok(false);
        }
        self.record_abandoned(&task, "amqp", WHY)?;
        Ok(true)
    }

    /// While a server stops: a task of this process still running when the
    /// shutdown grace ran out, whose run was dropped (its guest stopped).
    /// It fails as `recover` fails a task a stopped host left running
    /// (`internal_error`, with its last checkpoint to resume from), now
    /// rather than at the next start: a `gate.abandoned` receipt says why
    /// (`why`: what ran out), then the session's last receipts and the
    /// final state are made durable in one commit, and the equipment it
    /// held is released. Returns whether it was failed here (`false`: it
    /// was no longer running).
    ///
    /// # Errors
    ///
    /// The database or the receipt log fails.
    pub fn settle_interrupted(&self, task_id: &str, why: &str) -> Result<bool> {
        let Some(task) = self.store.task(task_id)? else {
            return Ok(false);
        };
        if task.state != TaskState::Running {
            return Ok(false);
        }
        let session = task.session_id.clone().unwrap_or_default();
        let last = self.store.last_checkpoint(&session)?;
        let reason = format!("the host shut down while the task was running: {why}");
        let answer = serde_json::to_value(Envelope::new(
            MessageType::TaskFailed,
            Some(session.clone()),
            TaskFailed {
                error_code: ErrorCode::InternalError,
                error_message: reason.clone(),
                error_details: Some(ErrorDetails {
                    phase: None,
                    step: None,
                    recoverable: last.is_some(),
                    last_checkpoint: last,
                }),
                partial_outputs: None,
                artifacts: Vec::new(),
                execution_summary: None,
            },
        )?)?;
        let amqp = self
            .store
            .open_routes()?
            .iter()
            .any(|r| r.task_id == task_id);
        // The receipt first: the run abandoned is on the record before the
        // task's state says so.
        self.record_abandoned(&task, if amqp { "amqp" } else { "http" }, &reason)?;
        self.recorder.close_session(&session);
        let settle = SettleWrite::new(task_id, TaskState::Running, TaskState::Failed, &answer);
        let moved = match self
            .recorder
            .flush_with(&session, move |db| settle.apply(db))
        {
            Ok(Some(moved)) => {
                if moved {
                    self.store.task_moved(task_id, TaskState::Failed);
                }
                moved
            }
            // Receipts of the session were lost to a failed write, or this
            // one failed: the final state on its own (kept and written
            // once the store takes writes, if it cannot now).
            Ok(None) | Err(_) => {
                self.recorder.session_lost(&session);
                self.store
                    .settle(task_id, TaskState::Running, TaskState::Failed, answer)?
            }
        };
        if moved {
            self.store.release_session_resources(&session)?;
        }
        Ok(moved)
    }
}
