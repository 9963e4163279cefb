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
    /// `approved` or `rejected` once an operator decided, `expired` once
    /// nobody did in time ([`Store::claim_expiry`]), `withdrawn` once the
    /// task's caller cancelled it first ([`Store::withdraw_approval`]).
    pub decision: Option<String>,
    /// Who decided.
    pub operator_id: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// When.
    pub decided_at: Option<String>,
}

/// How long a claimed expiry ([`Store::claim_expiry`]) is the claiming
/// process's to finish (one receipt and the rejection, in one commit)
/// before another may claim it again.
pub const EXPIRY_LEASE: time::Duration = time::Duration::minutes(1);

/// A decision refused because the task no longer waits for one: it was
/// decided, its approval expired, or the task moved on. A transport
/// answers it as a conflict, not as a fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotPending(pub String);

/// Refuses a decision on `a` at `at` when it was decided, or expired.
fn undecided(a: &ApprovalRecord, at: &str) -> Result<()> {
    let refused = match a.decision.as_deref() {
        Some("expired") => format!(
            "the approval of task {} expired at {}",
            a.task_id, a.expires_at
        ),
        Some("withdrawn") => format!(
            "task {} was withdrawn by its caller at {}",
            a.task_id,
            a.decided_at.as_deref().unwrap_or("?")
        ),
        Some(d) => format!(
            "task {} was already {d} by {} at {}",
            a.task_id,
            a.operator_id.as_deref().unwrap_or("?"),
            a.decided_at.as_deref().unwrap_or("?")
        ),
        // RFC 3339 UTC with fixed precision compares as text.
        None if a.expires_at.as_str() <= at => format!(
            "the approval of task {} expired at {}",
            a.task_id, a.expires_at
        ),
        None => return Ok(()),
    };
    Err(NotPending(refused).into())
}

/// [`Store::request_approval`] on `db` (in the caller's transaction). A
/// task the gate admits again (its earlier decision never carried out: the
/// host stopped first) is asked again: the request replaces the earlier
/// one.
///
/// # Errors
///
/// The database fails.
pub fn request_approval(
    db: &rusqlite::Connection,
    task_id: &str,
    expires_at: &str,
    assessment: &Value,
) -> Result<()> {
    db.prepare_cached(
        "INSERT OR REPLACE INTO approvals (task_id, requested_at, expires_at, assessment)
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![task_id, now(), expires_at, assessment.to_string()])?;
    Ok(())
}

impl Store {
    /// The tasks waiting for an operator's approval now, and when the
    /// oldest of them asked (`/metrics`).
    ///
    /// # Errors
    ///
    /// The database fails, or a stored time does not parse.
    pub fn waiting_approvals(&self) -> Result<(i64, Option<time::OffsetDateTime>)> {
        let (n, oldest): (i64, Option<String>) = self
            .db()
            .prepare_cached(
                "SELECT COUNT(*), MIN(a.requested_at) FROM tasks t
                 JOIN approvals a ON a.task_id = t.task_id
                 WHERE t.state = 'pending_approval'",
            )?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let oldest = oldest
            .map(|s| {
                time::OffsetDateTime::parse(&s, &time::format_description::well_known::Rfc3339)
                    .with_context(|| format!("approval requested at {s:?}"))
            })
            .transpose()?;
        Ok((n, oldest))
    }

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
        request_approval(&self.db(), task_id, expires_at, assessment)
    }

    /// Records an operator's decision, once, and moves the task from
    /// `pending_approval` to `received` (the gate answers it from there) in
    /// the same transaction: a decided or expired approval cannot be
    /// decided again, and a task that left `pending_approval` meanwhile
    /// (let go, failed) is not brought back. A host that stops right after
    /// leaves the task `received`, which the next start fails as a task the
    /// gate never answered.
    ///
    /// # Errors
    ///
    /// No pending approval for the task, it expired, it was already decided,
    /// the task no longer waits for it, or the database fails.
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
        let at = now();
        undecided(&current, &at)?;
        let decision = if approved { "approved" } else { "rejected" };
        {
            let mut db = self.db();
            let tx = db.transaction()?;
            // Only an approval nobody decided and that has not expired: an
            // expiry claims it the same way (`claim_expiry`), so one of the
            // two wins.
            let decided = tx
                .prepare_cached(
                    "UPDATE approvals SET decision = ?2, operator_id = ?3, reason = ?4, decided_at = ?5
                 WHERE task_id = ?1 AND decision IS NULL AND expires_at > ?5",
                )?
                .execute(params![task_id, decision, operator_id, reason, at])?;
            if decided == 0 {
                drop(tx);
                drop(db);
                let now = self
                    .approval(task_id)?
                    .with_context(|| format!("task {task_id} lost its approval"))?;
                undecided(&now, &at)?;
                return Err(NotPending(format!("task {task_id} was decided concurrently")).into());
            }
            let moved = tx
                .prepare_cached(
                    "UPDATE tasks SET state = 'received', updated_at = ?2
                 WHERE task_id = ?1 AND state = 'pending_approval'",
                )?
                .execute(params![task_id, at])?;
            if moved == 0 {
                drop(tx);
                drop(db);
                let state = self.task(task_id)?.map_or("gone", |t| t.state.as_str());
                return Err(NotPending(format!(
                    "task {task_id} is not waiting for approval (it is {state})"
                ))
                .into());
            }
            tx.commit()?;
        }
        self.task_moved(task_id, super::TaskState::Received);
        self.approval(task_id)?
            .with_context(|| format!("task {task_id} lost its approval"))
    }

    /// The tasks waiting for an approval that expired by `now` and that
    /// [`Store::claim_expiry`] would let the caller claim, oldest expiry
    /// first: read by the index on the tasks' state, without their
    /// messages.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn expired_approvals(&self, now: time::OffsetDateTime) -> Result<Vec<String>> {
        let at = hcp_contracts::message::rfc3339(now);
        let stale = hcp_contracts::message::rfc3339(now - EXPIRY_LEASE);
        let db = self.db();
        let mut stmt = db.prepare_cached(
            "SELECT t.task_id FROM tasks t JOIN approvals a ON a.task_id = t.task_id
             WHERE t.state = 'pending_approval' AND a.expires_at <= ?1
               AND (a.decision IS NULL OR (a.decision = 'expired' AND a.decided_at <= ?2))
             ORDER BY a.expires_at, t.task_id",
        )?;
        let ids = stmt.query_map(params![at, stale], |r| r.get(0))?;
        Ok(ids.collect::<rusqlite::Result<_>>()?)
    }

    /// Claims the expiry of a task's approval at `now`: `true` when this
    /// caller is the one to reject the task for it, once. `false` when an
    /// operator decided it first, it has not expired, or another process
    /// claimed the expiry. An expiry claimed more than [`EXPIRY_LEASE`]
    /// ago whose task still waits (the process that claimed it stopped
    /// before its receipt and the rejection were stored) is claimed again.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn claim_expiry(&self, task_id: &str, now: time::OffsetDateTime) -> Result<bool> {
        let at = hcp_contracts::message::rfc3339(now);
        let stale = hcp_contracts::message::rfc3339(now - EXPIRY_LEASE);
        let n = self
            .db()
            .prepare_cached(
                "UPDATE approvals SET decision = 'expired', decided_at = ?2
                 WHERE task_id = ?1 AND expires_at <= ?2
                   AND (decision IS NULL OR (decision = 'expired' AND decided_at <= ?3))",
            )?
            .execute(params![task_id, at, stale])?;
        Ok(n == 1)
    }

    /// Withdraws the approval of a task whose caller cancelled it while it
    /// waited: recorded as the decision `withdrawn`, once, and only while
    /// nobody decided it and no expiry claimed it (so whichever of the
    /// three comes first wins). `true` when this call withdrew it.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn withdraw_approval(&self, task_id: &str) -> Result<bool> {
        let n = self
            .db()
            .prepare_cached(
                "UPDATE approvals SET decision = 'withdrawn', decided_at = ?2
                 WHERE task_id = ?1 AND decision IS NULL",
            )?
            .execute(params![task_id, now()])?;
        Ok(n == 1)
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

    /// Decided approvals (approved or rejected by an operator; not those
    /// that expired), the most recently decided first, at most `limit`.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ids: Vec<String> = self
            .db()
            .prepare(
                "SELECT task_id FROM approvals WHERE decision IN ('approved', 'rejected')
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

    /// A task waiting for an approval that expires at `expires_at`.
    fn pending(store: &Store, message: &str, expires_at: &str) -> String {
        let Submitted::New(t) = store
            .submit("c1", message, "cap", &json!({}))
            .expect("submit")
        else {
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
            .request_approval(&t.task_id, expires_at, &json!({"risk": "R3"}))
            .expect("request");
        t.task_id
    }

    fn at(s: &str) -> time::OffsetDateTime {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
            .expect("time")
    }

    #[test]
    fn an_approval_is_either_decided_in_time_or_expired_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        // Expired: no operator may decide it; one claim of its expiry wins.
        let late = pending(&store, "late", "2000-01-01T00:00:00.000Z");
        let err = store
            .decide(&late, true, "op-1", "looks safe")
            .expect_err("decided after it expired");
        assert_eq!(
            err.to_string(),
            format!("the approval of task {late} expired at 2000-01-01T00:00:00.000Z")
        );
        let now = at("2000-01-01T00:00:01Z");
        assert_eq!(
            store.expired_approvals(now).expect("expired"),
            vec![late.clone()]
        );
        assert!(store.claim_expiry(&late, now).expect("claim"));
        assert!(!store.claim_expiry(&late, now).expect("claim"), "twice");
        assert!(store.expired_approvals(now).expect("expired").is_empty());
        let a = store.approval(&late).expect("db").expect("approval");
        assert_eq!(a.decision.as_deref(), Some("expired"));
        assert_eq!(a.decided_at.as_deref(), Some("2000-01-01T00:00:01.000Z"));
        assert!(store.decided_approvals(10).expect("list").is_empty());
        // A claim left unfinished past the lease is claimed again, once.
        let later = now + EXPIRY_LEASE;
        assert_eq!(
            store.expired_approvals(later).expect("expired"),
            vec![late.clone()]
        );
        assert!(store.claim_expiry(&late, later).expect("claim"));
        assert!(!store.claim_expiry(&late, later).expect("claim"));
        // Decided in time: its expiry is never claimed.
        let decided = pending(&store, "decided", "2999-01-01T00:00:00.000Z");
        store.decide(&decided, false, "op-1", "no").expect("decide");
        assert!(
            !store
                .claim_expiry(&decided, at("3000-01-01T00:00:00Z"))
                .expect("claim")
        );
        // Not expired yet: nothing to claim.
        let waiting = pending(&store, "waiting", "2999-01-01T00:00:00.000Z");
        assert!(!store.claim_expiry(&waiting, now).expect("claim"));
        let listed: Vec<_> = store
            .decided_approvals(10)
            .expect("list")
            .into_iter()
            .map(|a| a.task_id)
            .collect();
        assert_eq!(listed, vec![decided]);
    }

    #[test]
    fn a_withdrawn_approval_is_neither_decided_nor_expired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let task_id = pending(&store, "w", "2000-01-01T00:00:01.000Z");
        assert!(store.withdraw_approval(&task_id).expect("withdraw"));
        assert!(!store.withdraw_approval(&task_id).expect("twice"), "once");
        let err = store
            .decide(&task_id, true, "op-1", "looks safe")
            .expect_err("decided after it was withdrawn");
        assert!(
            err.to_string()
                .starts_with(&format!("task {task_id} was withdrawn by its caller at ")),
            "{err}"
        );
        let now = at("2000-01-01T00:00:02Z");
        assert!(store.expired_approvals(now).expect("expired").is_empty());
        assert!(!store.claim_expiry(&task_id, now).expect("claim"));
        let a = store.approval(&task_id).expect("db").expect("approval");
        assert_eq!(a.decision.as_deref(), Some("withdrawn"));
        // Decided first: not withdrawn.
        let decided = pending(&store, "d", "2999-01-01T00:00:00.000Z");
        store.decide(&decided, true, "op-1", "ok").expect("decide");
        assert!(!store.withdraw_approval(&decided).expect("withdraw"));
    }

    #[test]
    fn a_task_no_longer_pending_is_not_decided() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let task_id = pending(&store, "m", "2999-01-01T00:00:00.000Z");
        // Let go meanwhile (its AMQP delivery was never acknowledged).
        assert!(
            store
                .transition(&task_id, TaskState::PendingApproval, TaskState::Failed)
                .expect("t")
        );
        let err = store
            .decide(&task_id, true, "op-1", "looks safe")
            .expect_err("decided");
        assert_eq!(
            err.to_string(),
            format!("task {task_id} is not waiting for approval (it is failed)")
        );
        let a = store.approval(&task_id).expect("db").expect("approval");
        assert_eq!(a.decision, None, "the decision was kept");
        let t = store.task(&task_id).expect("db").expect("task");
        assert_eq!(t.state, TaskState::Failed);
    }

    #[test]
    fn approvals_are_decided_once_and_transitions_are_exclusive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let task_id = pending(&store, "m", "2999-01-01T00:00:00.000Z");
        let t = store.task(&task_id).expect("db").expect("task");
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
        // The decision handed the task back to the gate.
        let decided = store.task(&t.task_id).expect("db").expect("task");
        assert_eq!(decided.state, TaskState::Received);
        assert!(
            store
                .transition(&t.task_id, TaskState::Received, TaskState::Queued)
                .expect("t")
        );
        assert!(
            !store
                .transition(&t.task_id, TaskState::Received, TaskState::Queued)
                .expect("t")
        );
    }
}
