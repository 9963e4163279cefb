//! The `approvals` table: what an operator is asked to decide, and the
//! decision, recorded once.

use super::{Store, now};
use anyhow::{Context as _, Result};
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

/// An approval request and its decision.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    /// The task.
    pub task_id: String,
    /// Requested at.
    pub requested_at: String,
    /// Expires at (RFC 3339).
    pub expires_at: String,
    /// What the operator needs to decide: intent, inputs, risk, rules, envelope.
    pub assessment: Value,
    /// `approved` or `rejected`, once decided.
    pub decision: Option<String>,
    /// Who decided.
    pub operator_id: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// When.
    pub decided_at: Option<String>,
}

impl Store {
    /// Records that a task waits for an operator until `expires_at`.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn request_approval(
        &self,
        task_id: &str,
        expires_at: &str,
        assessment: &Value,
    ) -> Result<()> {
        self.db().prepare_cached(
            "INSERT INTO approvals (task_id, requested_at, expires_at, assessment) VALUES (?1, ?2, ?3, ?4)")?.execute(
            params![task_id, now(), expires_at, assessment.to_string()],
        )?;
        Ok(())
    }

    /// Records an operator's decision, once: a decided or expired approval
    /// cannot be decided again.
    ///
    /// # Errors
    ///
    /// No pending approval for the task, it expired, it was already decided,
    /// or the database fails.
    pub fn decide(
        &self,
        task_id: &str,
        approved: bool,
        operator_id: &str,
        reason: &str,
    ) -> Result<ApprovalRecord> {
        let current = self
            .approval(task_id)?
            .with_context(|| format!("task {task_id} has no approval request"))?;
        if let Some(d) = &current.decision {
            anyhow::bail!(
                "task {task_id} was already {d} by {} at {}",
                current.operator_id.as_deref().unwrap_or("?"),
                current.decided_at.as_deref().unwrap_or("?")
            );
        }
        let decision = if approved { "approved" } else { "rejected" };
        let n = self
            .db()
            .prepare_cached(
                "UPDATE approvals SET decision = ?2, operator_id = ?3, reason = ?4, decided_at = ?5
             WHERE task_id = ?1 AND decision IS NULL",
            )?
            .execute(params![task_id, decision, operator_id, reason, now()])?;
        if n == 0 {
            anyhow::bail!("task {task_id} was decided concurrently");
        }
        self.approval(task_id)?
            .with_context(|| format!("task {task_id} lost its approval"))
    }

    /// The approval of a task.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn approval(&self, task_id: &str) -> Result<Option<ApprovalRecord>> {
        let row = self
            .db()
            .prepare_cached(
                "SELECT task_id, requested_at, expires_at, assessment, decision, operator_id, reason, decided_at
                 FROM approvals WHERE task_id = ?1")?.query_row(
                params![task_id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, Option<String>>(6)?,
                        r.get::<_, Option<String>>(7)?,
                    ))
                },
            )
            .optional()?;
        row.map(
            |(
                task_id,
                requested_at,
                expires_at,
                assessment,
                decision,
                operator_id,
                reason,
                decided_at,
            )| {
                Ok(ApprovalRecord {
                    task_id,
                    requested_at,
                    expires_at,
                    assessment: serde_json::from_str(&assessment).context("stored assessment")?,
                    decision,
                    operator_id,
                    reason,
                    decided_at,
                })
            },
        )
        .transpose()
    }

    /// Decided approvals (approved or rejected by an operator), the most
    /// recently decided first, at most `limit`.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ids: Vec<String> = self
            .db()
            .prepare(
                "SELECT task_id FROM approvals WHERE decision IS NOT NULL
                 ORDER BY decided_at DESC, task_id DESC LIMIT ?1",
            )?
            .query_map(params![limit], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(a) = self.approval(&id)? {
                out.push(a);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Submitted, TaskState, TaskUpdate};
    use super::*;
    use serde_json::json;

    #[test]
    fn approvals_are_decided_once_and_transitions_are_exclusive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let Submitted::New(t) = store.submit("c1", "m", "cap", &json!({})).expect("submit") else {
            panic!("not new");
        };
        store
            .update_task(
                &t.task_id,
                TaskState::PendingApproval,
                TaskUpdate::default(),
            )
            .expect("update");
        store
            .request_approval(
                &t.task_id,
                "2999-01-01T00:00:00.000Z",
                &json!({"risk": "R3"}),
            )
            .expect("request");
        let a = store
            .decide(&t.task_id, true, "op-1", "looks safe")
            .expect("decide");
        assert_eq!(a.decision.as_deref(), Some("approved"));
        let err = store
            .decide(&t.task_id, false, "op-2", "no")
            .expect_err("decided twice");
        assert!(err.to_string().starts_with(&format!(
            "task {} was already approved by op-1 at ",
            t.task_id
        )));
        assert!(
            store
                .transition(&t.task_id, TaskState::PendingApproval, TaskState::Queued)
                .expect("t")
        );
        assert!(
            !store
                .transition(&t.task_id, TaskState::PendingApproval, TaskState::Queued)
                .expect("t")
        );
    }
}
