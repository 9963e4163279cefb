//! Tasks, approvals and resources in use, durable in SQLite.
//!
//! A submission is recorded once per `(caller_id, message_id)`: the same
//! message submitted again (concurrently, or after a restart) finds the
//! original task and its answer instead of creating a second one.

use super::{Store, now};
use anyhow::{Context as _, Result};
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Recorded, not yet through the gate.
    Received,
    /// Admitted; waiting for an operator.
    PendingApproval,
    /// Admitted (and approved where needed); waiting to run.
    Queued,
    /// Running.
    Running,
    /// Answered `task_completed`.
    Completed,
    /// Answered `task_failed`.
    Failed,
    /// Answered `task_rejected`.
    Rejected,
}

impl TaskState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::PendingApproval => "pending_approval",
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Rejected => "rejected",
        }
    }

    /// The state of a stored name.
    ///
    /// # Errors
    ///
    /// An unknown name.
    pub fn parse_name(s: &str) -> Result<Self> {
        Ok(match s {
            "received" => Self::Received,
            "pending_approval" => Self::PendingApproval,
            "queued" => Self::Queued,
            "running" => Self::Running,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "rejected" => Self::Rejected,
            other => anyhow::bail!("unknown task state {other:?} in the database"),
        })
    }

    /// Whether the task has its final answer.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Rejected)
    }
}

/// One task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Host-assigned id.
    pub task_id: String,
    /// The authenticated caller.
    pub caller_id: String,
    /// The caller's `message_id`.
    pub message_id: String,
    /// Capability asked for.
    pub capability: String,
    /// Version chosen.
    pub version: Option<String>,
    /// Session, once admitted.
    pub session_id: Option<String>,
    /// Where it is.
    pub state: TaskState,
    /// Assessed risk level.
    pub risk: Option<String>,
    /// Approved data classification.
    pub data_class: Option<String>,
    /// The `task_submit` envelope as received.
    pub submit: Value,
    /// The gate's answer (`task_accepted` or `task_rejected`).
    pub answer: Option<Value>,
    /// The final answer (`task_completed` or `task_failed`).
    pub result: Option<Value>,
    /// When it was received.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// The gate's admission (JSON of `hcp_policy::Admission`), once admitted.
    pub admission: Option<Value>,
}

/// What recording a submission found.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// A new task.
    New(TaskRecord),
    /// This caller already sent this `message_id`: the original task.
    Duplicate(TaskRecord),
}

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

const TASK_COLUMNS: &str = "task_id, caller_id, message_id, capability, version, session_id, state, risk, \
     data_class, submit, answer, result, created_at, updated_at, admission";

fn json(text: Option<String>) -> Result<Option<Value>> {
    text.map(|t| serde_json::from_str(&t).context("stored JSON"))
        .transpose()
}

fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<[Option<String>; 15]> {
    let mut out: [Option<String>; 15] = Default::default();
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = r.get(i)?;
    }
    Ok(out)
}

fn task_record(row: [Option<String>; 15]) -> Result<TaskRecord> {
    let [
        task_id,
        caller_id,
        message_id,
        capability,
        version,
        session_id,
        state,
        risk,
        data_class,
        submit,
        answer,
        result,
        created_at,
        updated_at,
        admission,
    ] = row;
    let req = |v: Option<String>, what: &str| v.with_context(|| format!("task without {what}"));
    Ok(TaskRecord {
        task_id: req(task_id, "id")?,
        caller_id: req(caller_id, "caller")?,
        message_id: req(message_id, "message id")?,
        capability: req(capability, "capability")?,
        version,
        session_id,
        state: TaskState::parse_name(&req(state, "state")?)?,
        risk,
        data_class,
        submit: serde_json::from_str(&req(submit, "submission")?).context("stored submission")?,
        answer: json(answer)?,
        result: json(result)?,
        created_at: req(created_at, "creation time")?,
        updated_at: req(updated_at, "update time")?,
        admission: json(admission)?,
    })
}

/// Fields a task update may set.
#[derive(Debug, Clone, Default)]
pub struct TaskUpdate {
    /// Version chosen.
    pub version: Option<String>,
    /// Session opened.
    pub session_id: Option<String>,
    /// Assessed risk.
    pub risk: Option<String>,
    /// Data class.
    pub data_class: Option<String>,
    /// The gate's answer.
    pub answer: Option<Value>,
    /// The final answer.
    pub result: Option<Value>,
    /// The gate's admission (JSON of `hcp_policy::Admission`).
    pub admission: Option<Value>,
}

impl TaskRecord {
    /// What lists show of a task: ids, state, capability and version,
    /// session, assessed risk and data class, times (no messages).
    pub fn summary(&self) -> Value {
        serde_json::json!({
            "task_id": self.task_id,
            "state": self.state.as_str(),
            "caller_id": self.caller_id,
            "message_id": self.message_id,
            "capability": self.capability,
            "version": self.version,
            "session_id": self.session_id,
            "risk_level": self.risk,
            "data_classification": self.data_class,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

impl Store {
    /// Records a submission, or finds the task this caller already submitted
    /// with this `message_id`.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn submit(
        &self,
        caller_id: &str,
        message_id: &str,
        capability: &str,
        submit: &Value,
    ) -> Result<Submitted> {
        let task_id = format!("task-{}", uuid::Uuid::now_v7());
        let at = now();
        let mut db = self.db();
        let tx = db.transaction()?;
        let inserted = tx.execute(
            "INSERT INTO tasks (task_id, caller_id, message_id, capability, state, submit, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'received', ?5, ?6, ?6)
             ON CONFLICT (caller_id, message_id) DO NOTHING",
            params![task_id, caller_id, message_id, capability, submit.to_string(), at],
        )?;
        let row = tx.query_row(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE caller_id = ?1 AND message_id = ?2"),
            params![caller_id, message_id],
            task_row,
        )?;
        tx.commit()?;
        let record = task_record(row)?;
        if inserted == 1 {
            self.task_moved(&record.task_id, record.state);
        }
        Ok(if inserted == 1 {
            Submitted::New(record)
        } else {
            Submitted::Duplicate(record)
        })
    }

    /// Moves a task to `state`, setting the given fields (others unchanged).
    ///
    /// # Errors
    ///
    /// No such task, or the database fails.
    pub fn update_task(
        &self,
        task_id: &str,
        state: TaskState,
        u: TaskUpdate,
    ) -> Result<TaskRecord> {
        let n = self.db().execute(
            "UPDATE tasks SET state = ?2,
                version = COALESCE(?3, version), session_id = COALESCE(?4, session_id),
                risk = COALESCE(?5, risk), data_class = COALESCE(?6, data_class),
                answer = COALESCE(?7, answer), result = COALESCE(?8, result), updated_at = ?9,
                admission = COALESCE(?10, admission)
             WHERE task_id = ?1",
            params![
                task_id,
                state.as_str(),
                u.version,
                u.session_id,
                u.risk,
                u.data_class,
                u.answer.map(|v| v.to_string()),
                u.result.map(|v| v.to_string()),
                now(),
                u.admission.map(|v| v.to_string())
            ],
        )?;
        if n == 0 {
            anyhow::bail!("no task {task_id}");
        }
        self.task_moved(task_id, state);
        self.task(task_id)?
            .with_context(|| format!("no task {task_id}"))
    }

    /// Moves a task from `from` to `to` only if it is in `from`; returns
    /// whether it moved (a second runner loses the race).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn transition(&self, task_id: &str, from: TaskState, to: TaskState) -> Result<bool> {
        let moved = self.db().execute(
            "UPDATE tasks SET state = ?3, updated_at = ?4 WHERE task_id = ?1 AND state = ?2",
            params![task_id, from.as_str(), to.as_str(), now()],
        )? == 1;
        if moved {
            self.task_moved(task_id, to);
        }
        Ok(moved)
    }

    /// One task.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn task(&self, task_id: &str) -> Result<Option<TaskRecord>> {
        let row = self
            .db()
            .query_row(
                &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?1"),
                params![task_id],
                task_row,
            )
            .optional()?;
        row.map(task_record).transpose()
    }

    /// Tasks, newest first, optionally in one state.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn tasks(&self, state: Option<TaskState>, limit: usize) -> Result<Vec<TaskRecord>> {
        let db = self.db();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match state {
            Some(s) => db
                .prepare(&format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE state = ?1 ORDER BY created_at DESC, task_id DESC LIMIT ?2"
                ))?
                .query_map(params![s.as_str(), limit], task_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
            None => db
                .prepare(&format!(
                    "SELECT {TASK_COLUMNS} FROM tasks ORDER BY created_at DESC, task_id DESC LIMIT ?1"
                ))?
                .query_map(params![limit], task_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
        };
        rows.into_iter().map(task_record).collect()
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
        self.db().execute(
            "INSERT INTO approvals (task_id, requested_at, expires_at, assessment) VALUES (?1, ?2, ?3, ?4)",
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
        let n = self.db().execute(
            "UPDATE approvals SET decision = ?2, operator_id = ?3, reason = ?4, decided_at = ?5
             WHERE task_id = ?1 AND decision IS NULL",
            params![task_id, decision, operator_id, reason, now()],
        )?;
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
            .query_row(
                "SELECT task_id, requested_at, expires_at, assessment, decision, operator_id, reason, decided_at
                 FROM approvals WHERE task_id = ?1",
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

    /// Claims a shared resource (an instrument) for a session; `false` when
    /// another session holds it.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn acquire_resource(&self, name: &str, session_id: &str) -> Result<bool> {
        Ok(self.db().execute(
            "INSERT INTO resources (name, session_id, since) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING",
            params![name, session_id, now()],
        )? == 1)
    }

    /// Releases a resource the session holds.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn release_resource(&self, name: &str, session_id: &str) -> Result<()> {
        self.db().execute(
            "DELETE FROM resources WHERE name = ?1 AND session_id = ?2",
            params![name, session_id],
        )?;
        Ok(())
    }

    /// Which session holds a resource.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn resource_holder(&self, name: &str) -> Result<Option<String>> {
        Ok(self
            .db()
            .query_row(
                "SELECT session_id FROM resources WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Releases every resource a session holds (after a crash).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn release_session_resources(&self, session_id: &str) -> Result<()> {
        self.db().execute(
            "DELETE FROM resources WHERE session_id = ?1",
            params![session_id],
        )?;
        Ok(())
    }

    /// The last checkpoint a session saved.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn last_checkpoint(&self, session_id: &str) -> Result<Option<String>> {
        Ok(self
            .db()
            .query_row(
                "SELECT id FROM checkpoints WHERE session_id = ?1 ORDER BY id DESC LIMIT 1",
                params![session_id],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Records an access to an artifact (T2 and above are logged).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn log_artifact_access(&self, uri: &str, accessor: &str, purpose: &str) -> Result<()> {
        self.db().execute(
            "INSERT INTO artifact_access (uri, accessor, purpose, at) VALUES (?1, ?2, ?3, ?4)",
            params![uri, accessor, purpose, now()],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_is_recorded_once_per_caller() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let Submitted::New(first) = store
            .submit("c1", "msg-1", "cap", &json!({"a": 1}))
            .expect("submit")
        else {
            panic!("not new");
        };
        let Submitted::Duplicate(again) = store
            .submit("c1", "msg-1", "cap", &json!({"a": 2}))
            .expect("submit")
        else {
            panic!("not a duplicate");
        };
        assert_eq!(again.task_id, first.task_id);
        assert_eq!(again.submit, json!({"a": 1}));
        // Another caller may use the same message id.
        assert!(matches!(
            store
                .submit("c2", "msg-1", "cap", &json!({}))
                .expect("submit"),
            Submitted::New(_)
        ));
        // Across a reopen.
        drop(store);
        let store = Store::open(dir.path()).expect("reopen");
        assert!(matches!(
            store
                .submit("c1", "msg-1", "cap", &json!({}))
                .expect("submit"),
            Submitted::Duplicate(_)
        ));
    }

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

    #[test]
    fn a_resource_has_one_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        assert!(store.acquire_resource("cvd-rig", "s1").expect("acquire"));
        assert!(!store.acquire_resource("cvd-rig", "s2").expect("acquire"));
        assert_eq!(
            store.resource_holder("cvd-rig").expect("holder").as_deref(),
            Some("s1")
        );
        store.release_resource("cvd-rig", "s2").expect("release");
        assert!(!store.acquire_resource("cvd-rig", "s2").expect("still held"));
        store.release_resource("cvd-rig", "s1").expect("release");
        assert!(store.acquire_resource("cvd-rig", "s2").expect("free"));
    }
}
