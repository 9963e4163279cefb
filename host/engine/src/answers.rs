//! The engine's answers to a task that is not running: a `job_status`
//! while it waits, the original answer to a message sent again, and
//! `task_rejected` (recorded as the task's answer).

use super::Host;
use super::submission::Submission;
use crate::store::{TaskRecord, TaskState, TaskStatus, TaskUpdate, TaskWrite};
use anyhow::Result;
use hcp_contracts::answer::{Answer, JobState, JobStatus};
use hcp_contracts::message::TaskRejected;
use serde_json::{Value, json};

/// A `job_status` (seed 004's global contract) for a task that waits.
pub fn job_status(task: &TaskRecord, message: &str) -> Answer {
    job_status_of(&task.status(), message)
}

/// A `job_status` of a task read as its status alone
/// ([`crate::store::Store::task_status`]); the final answer is its
/// `result` once the task has one. The one builder of a `job_status`.
pub fn job_status_of(task: &TaskStatus, message: &str) -> Answer {
    let status = match task.state {
        TaskState::Received | TaskState::Queued => JobState::Queued,
        TaskState::PendingApproval => JobState::PendingApproval,
        TaskState::Running => JobState::Running,
        TaskState::Completed => JobState::Complete,
        TaskState::Failed | TaskState::Rejected => JobState::Failed,
    };
    Answer::Waiting(JobStatus {
        job_id: task.task_id.clone(),
        status,
        service: "hcp".to_owned(),
        updated_at: task.updated_at.clone(),
        message: message.to_owned(),
        result: task.final_answer().map(|a| Box::new(a.clone())),
    })
}

impl Host {
    /// The answer to a message submitted before. A task the gate never
    /// answered (the host stopped mid-gate) goes through the gate now.
    pub(super) fn duplicate(
        &self,
        policy: &super::CurrentPolicy,
        task: TaskRecord,
        caller: &hcp_policy::Caller,
    ) -> Result<Submission> {
        if task.state == TaskState::Received && task.answer.is_none() {
            // Checked as the store read it back.
            return match task.checked()? {
                Ok(checked) => self.admit(policy, &task, caller, checked, None),
                Err(p) => self.refuse_invalid(policy, &task, caller, p, None),
            };
        }
        let answer = match (&task.state, &task.answer) {
            (TaskState::PendingApproval, _) => {
                job_status(&task, "waiting for an operator's approval")
            }
            (TaskState::Queued, _) if task.answer.is_none() => {
                job_status(&task, "waiting for equipment")
            }
            (_, Some(answer)) => answer.clone(),
            (TaskState::Received, None) => {
                job_status(&task, "received; the gate has not answered yet")
            }
            // Failed before the gate answered: its final answer.
            (_, None) => match &task.result {
                Some(result) => result.clone(),
                None => job_status(&task, "no answer recorded"),
            },
        };
        Ok(Submission {
            duplicate: true,
            ..Submission::answered(&task, answer, false)
        })
    }

    /// Answers `task_rejected` with `payload`, the task's final answer.
    pub(super) fn reject_task(
        &self,
        task: &TaskRecord,
        payload: TaskRejected,
    ) -> Result<Submission> {
        let (write, answer) = rejection(&task.task_id, payload)?;
        // An answer quoting a credential of the message rests sealed (a
        // duplicate is answered from it, opened).
        let write = write.sealing_flagged_answer(self.store.data_key(), &answer)?;
        // A refused task is answered again from its answer (a duplicate)
        // and its receipt holds what the gate read: a large body is not
        // kept whole a second time. Its prefix is kept with the message's
        // credentials withheld (the whole message rested sealed).
        let withheld = self.store.withhold().json(&task.submit);
        let write = match bounded_submission(withheld.as_ref().unwrap_or(&task.submit)) {
            Some(kept) => write.keeping_submit(&kept),
            None => write,
        };
        // From the gate's hands only: a task another writer moved meanwhile
        // (let go, failed at a start) keeps what it was moved to.
        if !self.store.write_task_from(&write, TaskState::Received)? {
            anyhow::bail!(
                "task {} left the gate before it was rejected; its state stands",
                task.task_id
            );
        }
        Ok(Submission::answered(task, answer, false))
    }
}

/// What a refused task keeps of its `task_submit` when the message is
/// larger than [`hcp_policy::pep::ARGS_PREFIX_BYTES`]: its hash, size and
/// prefix (`{"bounded_message": {"prefix", "sha256", "size"}}`); `None`
/// when it is kept as received.
pub(super) fn bounded_submission(submit: &Value) -> Option<Value> {
    let bounded = hcp_policy::pep::BoundedText::of(&submit.to_string())?;
    Some(json!({ "bounded_message": bounded }))
}

/// The write that rejects `task_id` with `payload` (its state, the risk the
/// gate assessed, the answer), and that answer.
pub(super) fn rejection(task_id: &str, payload: TaskRejected) -> Result<(TaskWrite, Answer)> {
    let risk = payload.assessed_risk_level.map(|l| l.as_str().to_owned());
    let answer = Answer::rejected(payload);
    let write = TaskWrite::new(
        task_id,
        TaskState::Rejected,
        TaskUpdate {
            risk,
            answer: Some(answer.clone()),
            ..TaskUpdate::default()
        },
    )?;
    Ok((write, answer))
}
