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
use hcp_contracts::answer::Answer;
use hcp_contracts::message::ErrorCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The `task_failed` (`internal_error`) of a task the host fails itself.
fn internal_failure(task: &TaskRecord, message: &str) -> Answer {
    super::answer::failure(
        task.session_id.clone(),
        ErrorCode::InternalError,
        message.to_owned(),
        None,
    )
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
        if let Ok(true) = self.store.settle(
            &task.task_id,
            TaskState::Received,
            TaskState::Failed,
            internal_failure(task, message),
        ) {
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
            );
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
    /// stopped. A task is recorded as the host's only once the broker is
    /// known to have taken the acknowledgement of its AMQP delivery, so
    /// for such a task the host cannot know whether the broker took it:
    /// if not, the broker redelivers the message (to this host or
    /// another), and whoever takes it answers; if it did, nobody has the
    /// message. Either way this copy never runs and this host never
    /// answers for it (another host may): it is failed here (a
    /// `gate.abandoned` receipt), its `message_id` freed for the
    /// redelivery, and its route closed. A task already answered for good
    /// (refused at the gate) only has its route closed. Returns the ids of
    /// the copies abandoned.
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
                const WHY: &str = "the host stopped before it knew that the broker had taken \
                                   its acknowledgement of the AMQP delivery, so the broker \
                                   delivers the message again and whoever takes it answers, \
                                   or, if the broker had taken it, nobody runs the task: this \
                                   host does not run it either way";
                // The receipt first: a copy abandoned is on the record
                // before its state says so. The failure, the freed
                // `message_id` and the closed route are one write: a host
                // that stops before it abandons the copy again at its next
                // start.
                self.record_abandoned(&task, "amqp", WHY)?;
                let answer = internal_failure(&task, &format!("abandoned: {WHY}"));
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

    /// While serving: a task whose AMQP delivery could not be
    /// acknowledged (the connection or channel was gone, so the
    /// acknowledgement never left). The broker gives the message to
    /// another consumer, so this copy is abandoned as at startup
    /// ([`Host::abandon_copy`] with [`ACK_NOT_SENT`]). Returns whether it
    /// was abandoned.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn abandon_unacknowledged_copy(&self, task_id: &str) -> Result<bool> {
        Ok(self.abandon_copy(task_id, ACK_NOT_SENT)?.is_some())
    }

    /// While serving: a copy of an AMQP delivery that is not this host's
    /// to run (`why` says why: [`ACK_NOT_SENT`], [`ACK_NOT_CONFIRMED`],
    /// [`OWN_NOT_RECORDED`]) is failed, its `message_id` freed and its
    /// route closed, with a `gate.abandoned` receipt, unless it has started
    /// meanwhile (it then stays this host's, and runs). Returns the failure
    /// (the task's final answer, which the caller gets only where no other
    /// host can answer: [`OWN_NOT_RECORDED`]) when it was abandoned.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn abandon_copy(&self, task_id: &str, why: &str) -> Result<Option<Answer>> {
        let Some(task) = self.store.task(task_id)? else {
            return Ok(None);
        };
        if !matches!(task.state, TaskState::Queued | TaskState::PendingApproval) {
            return Ok(None);
        }
        // Not this host's: neither the outbox nor the loop that starts
        // tasks takes it from here on (and a host that stops now abandons
        // it at startup).
        self.store.route_disowned(task_id)?;
        // Then the state, conditionally: a task that started meanwhile is
        // this host's again, and runs; no receipt says it was abandoned.
        // The failure, the freed `message_id` (the redelivery may come
        // back here: it is a new submission) and the closed route (the
        // outbox never answers for it) in one write.
        let answer = internal_failure(&task, &format!("abandoned: {why}"));
        if !self.store.abandon(task_id, task.state, &answer)? {
            self.store.route_acked(task_id)?;
            return Ok(None);
        }
        self.record_abandoned(&task, "amqp", why)?;
        Ok(Some(answer))
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
        self.settle_stopped(
            task_id,
            &format!("the host shut down while the task was running: {why}"),
            None,
        )
    }

    /// A running task of this process whose caller cancelled it (an MCP
    /// client's cancellation, over `transport`), its run dropped (its
    /// guest stopped): failed as [`Host::settle_interrupted`] fails one,
    /// with a `gate.abandoned` receipt saying so. Returns whether it was
    /// failed here (`false`: it was no longer running).
    ///
    /// # Errors
    ///
    /// The database or the receipt log fails.
    pub fn settle_cancelled(&self, task_id: &str, why: &str, transport: &str) -> Result<bool> {
        self.settle_stopped(
            task_id,
            &format!("the caller cancelled the task while it was running: {why}"),
            Some(transport),
        )
    }

    /// A task whose caller cancelled it (an MCP client's cancellation,
    /// over `transport`) while it still waited: for an operator's approval,
    /// or queued for a session slot or its equipment. Its approval is
    /// withdrawn first (claimed as an operator's decision or an expiry
    /// claims it, so whichever comes first wins; the task leaves the
    /// operators' queue and a decision on it is refused), then the task is
    /// failed (`internal_error`, nothing ran) in the commit that stores its
    /// `gate.abandoned` receipt naming `transport`. Returns whether it was
    /// withdrawn here (`false`: it no longer waited: it started, was
    /// decided, or is final; a run it started is the caller's to stop).
    ///
    /// # Errors
    ///
    /// The database or the receipt log fails.
    pub fn withdraw_waiting(&self, task_id: &str, why: &str, transport: &str) -> Result<bool> {
        let Some(task) = self.store.task(task_id)? else {
            return Ok(false);
        };
        let waiting = match task.state {
            TaskState::PendingApproval => {
                if !self.store.withdraw_approval(task_id)? {
                    return Ok(false);
                }
                "waiting for an operator's approval"
            }
            TaskState::Queued => "queued for a session slot or its equipment",
            _ => return Ok(false),
        };
        let reason = format!("the caller cancelled the task while it was {waiting}: {why}");
        let answer = internal_failure(&task, &reason);
        let write = SettleWrite::new(
            self.store.data_key(),
            task_id,
            task.state,
            TaskState::Failed,
            &answer,
        )?;
        // Conditional on the state read: a queued task a runner started
        // meanwhile is not failed here (its receipt then says the caller
        // withdrew it, and the caller stops the run).
        let moved = Arc::new(AtomicBool::new(false));
        self.record_withdrawn(&task, transport, &reason, {
            let moved = moved.clone();
            Box::new(move |db| {
                moved.store(write.apply(db)?, Ordering::SeqCst);
                Ok(())
            })
        })?;
        let moved = moved.load(Ordering::SeqCst);
        if moved {
            self.store.task_moved(task_id, TaskState::Failed);
        }
        Ok(moved)
    }

    /// [`Host::settle_interrupted`] and [`Host::settle_cancelled`]: the
    /// receipt names `transport`, else the task's own (AMQP or HTTP).
    fn settle_stopped(&self, task_id: &str, reason: &str, transport: Option<&str>) -> Result<bool> {
        let Some(task) = self.store.task(task_id)? else {
            return Ok(false);
        };
        if task.state != TaskState::Running {
            return Ok(false);
        }
        let session = task.session_id.clone().unwrap_or_default();
        let last = self.store.last_checkpoint(&session)?;
        let reason = reason.to_owned();
        let answer = super::answer::stopped(session.clone(), reason.clone(), last);
        let transport = match transport {
            Some(t) => t,
            None => {
                let amqp = self
                    .store
                    .open_routes()?
                    .iter()
                    .any(|r| r.task_id == task_id);
                if amqp { "amqp" } else { "http" }
            }
        };
        // The receipt first: the run abandoned is on the record before the
        // task's state says so.
        self.record_abandoned(&task, transport, &reason)?;
        self.recorder.close_session(&session);
        let settle = SettleWrite::new(
            self.store.data_key(),
            task_id,
            TaskState::Running,
            TaskState::Failed,
            &answer,
        )?;
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

/// Why a copy is let go ([`Host::abandon_copy`]): the acknowledgement of
/// its AMQP delivery could not be sent, so the broker gives the message to
/// another consumer.
pub const ACK_NOT_SENT: &str = "the connection to the broker was lost before the host \
                                acknowledged the AMQP delivery, so the broker delivers the \
                                message again and whoever takes it answers";

/// Why a copy is let go: the acknowledgement was sent, and the connection
/// was lost before the broker said it had taken it. The host cannot know
/// which: another host may have the message, so this one neither runs it
/// nor answers.
pub const ACK_NOT_CONFIRMED: &str = "the connection to the broker was lost before the broker \
                                     confirmed that it had taken the host's acknowledgement of \
                                     the AMQP delivery, so the broker delivers the message again \
                                     and whoever takes it answers, or, if it had taken it, \
                                     nobody runs the task: this host does not run it either way";

/// Why a copy is let go: the broker took the acknowledgement, and the host
/// could not record the task as its own. No other host has the message,
/// so this host answers for it.
pub const OWN_NOT_RECORDED: &str = "the host could not record the task as its own after the \
                                    broker took its AMQP delivery; it did not run: send it again";
