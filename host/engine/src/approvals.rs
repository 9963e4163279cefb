//! Approvals: an operator's decision on a task the gate held for one, and
//! the expiry of those nobody decided in time. Each is a receipt before
//! the answer.

use super::Host;
use super::submission::{Auth, Submission, refusal};
use crate::store::{TaskRecord, TaskState, TaskUpdate};
use anyhow::{Context as _, Result};
use hcp_contracts::message::RejectReason;
use hcp_contracts::problem;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why an operator's decision was not taken (any other error of
/// [`Host::decide`] is the host's own fault), for a transport to answer.
#[derive(Debug, thiserror::Error)]
pub enum DecisionRefused {
    /// The task no longer waits for a decision: decided, expired, moved
    /// on, or its capability removed.
    #[error("{0}")]
    NotPending(String),
    /// The operator may not decide it, or not here.
    #[error("{0}")]
    Forbidden(String),
    /// The decision is malformed.
    #[error("{0}")]
    Invalid(String),
}

impl Host {
    /// An operator approves or rejects a pending task (authenticated by the
    /// transport, or by credential when `credential` is given).
    ///
    /// # Errors
    ///
    /// No pending approval, expired, already decided, or the operator may not
    /// decide it: a [`DecisionRefused`] that says why. Anything else is a
    /// fault of the host (its store, its receipts).
    pub fn decide(
        &self,
        task_id: &str,
        approved: bool,
        operator: Auth<'_>,
        operator_id: &str,
        reason: &str,
    ) -> Result<Submission> {
        self.expire_approvals()?;
        let task = self
            .store
            .task(task_id)?
            .with_context(|| format!("no task {task_id}"))?;
        if task.state != TaskState::PendingApproval {
            return Err(DecisionRefused::NotPending(format!(
                "task {task_id} is not waiting for approval (it is {})",
                task.state.as_str()
            ))
            .into());
        }
        if reason.trim().is_empty() {
            return Err(DecisionRefused::Invalid("a decision needs a reason".into()).into());
        }
        if self.store.is_held(task_id)? {
            return Err(DecisionRefused::Forbidden(format!(
                "task {task_id} is not this host's to decide: its AMQP delivery was never \
                 acknowledged here, so the broker may give the message to another host \
                 (`hcp serve` lets this copy go when it starts)"
            ))
            .into());
        }
        let admission = task
            .admission
            .clone()
            .context("pending task without its admission")?;
        let installed = self
            .store
            .installed_version(
                &task.capability,
                task.version.as_deref().unwrap_or_default(),
            )?
            .ok_or_else(|| {
                DecisionRefused::NotPending(format!(
                    "{} {} is no longer installed",
                    task.capability,
                    task.version.as_deref().unwrap_or("?")
                ))
            })?;
        let capability = self.capability(&installed)?;
        let manifest = &*capability.manifest;
        let policy = self.policy();
        let op = operator.caller(&policy, operator_id).map_err(|_| {
            DecisionRefused::Forbidden(format!("operator {operator_id:?} is not authenticated"))
        })?;
        let record = |refused| {
            self.record_approval(
                &policy,
                &task,
                manifest,
                &admission,
                operator_id,
                approved,
                refused,
            )
        };
        if let Err(r) = policy.authorize_approval_by(op, &admission, &manifest.doc.capability) {
            record(Some(r.reason_code))?;
            return Err(DecisionRefused::Forbidden(r.reason_message).into());
        }
        // Checked as the store read it back.
        let checked = task
            .checked()?
            .map_err(|p| anyhow::anyhow!(problem::list(p)))?;
        // The decision, and the task back in the gate's hands (`received`),
        // in one write; then its receipt, then the gate's answer, each from
        // `received` only. A host that stops in between leaves the task
        // `received`: its next start fails it (the gate never answered).
        self.store
            .decide(task_id, approved, operator_id, reason)
            .map_err(|e| match e.downcast::<crate::store::NotPending>() {
                Ok(refused) => DecisionRefused::NotPending(refused.0).into(),
                Err(e) => e,
            })?;
        tracing::info!(
            target: "hcp::approval",
            task = task_id,
            operator = operator_id,
            decision = if approved { "approved" } else { "rejected" },
            capability = %task.capability,
            reason = reason,
            "task {task_id}: {} by operator {operator_id}: {reason:?}",
            if approved { "approved" } else { "rejected" }
        );
        let received = self
            .store
            .task(task_id)?
            .with_context(|| format!("no task {task_id}"))?;
        if let Err(e) = record(None) {
            return self.settle_submission(&received, Err(e));
        }
        if !approved {
            let rejected = self.reject_task(
                &received,
                refusal(
                    RejectReason::ApprovalRejected,
                    format!("operator {operator_id} rejected the task: {reason}"),
                    Some(admission.risk_level),
                ),
            );
            return self.settle_submission(&received, rejected);
        }
        let accepted = self.accept(
            &received,
            manifest,
            checked,
            &admission,
            TaskUpdate::default(),
            None,
        );
        self.settle_submission(&received, accepted)
    }

    /// Rejects, with `approval_expired`, every task whose approval expired
    /// undecided. Each expiry is claimed in the store first
    /// ([`crate::store::Store::claim_expiry`]): an operator's decision that
    /// came first wins, and of several processes expiring approvals (`hcp
    /// serve`'s maintenance, a command, the approvals API) one rejects the
    /// task, once. The receipt and the rejection are one commit.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn expire_approvals(&self) -> Result<Vec<String>> {
        let now = time::OffsetDateTime::now_utc();
        let at = hcp_contracts::message::rfc3339(now);
        let mut expired = Vec::new();
        // Only the waiting tasks whose approval expired are read (this runs
        // every second while serving, however many tasks wait).
        for id in self.store.expired_approvals(now)? {
            let (Some(task), Some(approval)) = (self.store.task(&id)?, self.store.approval(&id)?)
            else {
                continue;
            };
            if task.state != TaskState::PendingApproval || !self.store.claim_expiry(&id, now)? {
                continue;
            }
            if self.reject_expired(&task, &at, &approval.expires_at)? {
                tracing::info!(
                    target: "hcp::approval",
                    task = %id,
                    decision = "expired",
                    capability = %task.capability,
                    "task {id}: no operator decided before its approval expired at {}: rejected",
                    approval.expires_at
                );
                expired.push(id);
            }
        }
        Ok(expired)
    }

    /// The expiry's receipt, and the task's rejection in its commit (if the
    /// task still waits for its approval); whether the task was rejected.
    fn reject_expired(&self, task: &TaskRecord, at: &str, expires_at: &str) -> Result<bool> {
        let risk = task.risk.as_deref().and_then(|r| r.parse().ok());
        let (write, _) = super::answers::rejection(
            &task.task_id,
            refusal(
                RejectReason::ApprovalExpired,
                format!("no operator decided before the approval expired at {expires_at}"),
                risk,
            ),
        )?;
        let moved = Arc::new(AtomicBool::new(false));
        self.record_expiry(task, at, expires_at, {
            let moved = moved.clone();
            Box::new(move |db| {
                let m = write.apply_from(db, TaskState::PendingApproval)?;
                moved.store(m, Ordering::SeqCst);
                Ok(())
            })
        })?;
        let moved = moved.load(Ordering::SeqCst);
        if moved {
            self.store.task_moved(&task.task_id, TaskState::Rejected);
        }
        Ok(moved)
    }
}
