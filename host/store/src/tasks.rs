//! The `tasks` table: tasks and their states, durable in SQLite.
//!
//! A submission is recorded once per `(caller_id, message_id)`: the same
//! message submitted again (concurrently, or after a restart) finds the
//! original task and its answer instead of creating a second one.

use super::{Store, now};
use crate::seal::DataKey;
use anyhow::{Context as _, Result};
use hcp_contracts::Problem;
use hcp_contracts::answer::Answer;
use hcp_contracts::message::{CheckedSubmit, TaskSubmit};
use hcp_policy::Admission;
use rusqlite::{OptionalExtension, params};
use serde::Deserialize as _;
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
    pub answer: Option<Answer>,
    /// The final answer (`task_completed` or `task_failed`).
    pub result: Option<Answer>,
    /// When it was received.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// The gate's admission, once admitted.
    pub admission: Option<Admission>,
    /// The `task_submit` payload as checked, when it reads as one (a
    /// message the gate refused as invalid may not): the gate's check,
    /// kept with the task it made (`None` until then for a new task); for
    /// a task read from the database, checked when first asked.
    pub checked: Option<CheckedPayload>,
    /// The session the gate issued, once it accepted the task.
    pub session: Option<SessionIssued>,
}

/// A `task_submit` payload checked ([`TaskSubmit::check`]: its version
/// range, duration and expected-output schema parsed), or the problems
/// that check found. Checked once per task: the gate checks it and the
/// record carries the check to the run; a task read back from the
/// database is checked there, when first asked ([`TaskRecord::checked`]),
/// so that reads that never ask (listings, the outbox) do not check.
#[derive(Debug, Clone)]
pub struct CheckedPayload {
    checked: std::sync::OnceLock<Result<CheckedSubmit, Vec<Problem>>>,
    /// The payload while it is not checked (a task read back).
    unchecked: Option<TaskSubmit>,
}

impl CheckedPayload {
    /// `submit`, checked now.
    pub fn of(submit: TaskSubmit) -> Self {
        Self {
            checked: std::sync::OnceLock::from(submit.check()),
            unchecked: None,
        }
    }

    /// `submit` as read back, checked when first asked.
    fn read(submit: TaskSubmit) -> Self {
        Self {
            checked: std::sync::OnceLock::new(),
            unchecked: Some(submit),
        }
    }

    /// The check.
    pub fn get(&self) -> &Result<CheckedSubmit, Vec<Problem>> {
        self.checked.get_or_init(|| match &self.unchecked {
            Some(submit) => submit.clone().check(),
            // `of` sets the check: never here.
            None => Err(vec![Problem::new("/payload", "not read")]),
        })
    }

    /// The payload, when known without checking it.
    fn payload(&self) -> Option<&TaskSubmit> {
        self.unchecked.as_ref().or_else(|| {
            self.checked
                .get()
                .and_then(|c| c.as_ref().ok())
                .map(|c| &c.submit)
        })
    }
}

impl PartialEq for CheckedPayload {
    /// The same payload (what is parsed of it follows from it).
    fn eq(&self, other: &Self) -> bool {
        match (self.payload(), other.payload()) {
            (Some(a), Some(b)) => a == b,
            _ => match (self.get(), other.get()) {
                (Ok(a), Ok(b)) => a.submit == b.submit,
                (Err(a), Err(b)) => a == b,
                _ => false,
            },
        }
    }
}

/// A task as its status shows it (`job_status`, its event stream): read
/// by [`Store::task_status`] without the rest of the task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStatus {
    /// Host-assigned id.
    pub task_id: String,
    /// The authenticated caller.
    pub caller_id: String,
    /// Where it is.
    pub state: TaskState,
    /// Last change.
    pub updated_at: String,
    /// The final answer (`task_completed` or `task_failed`), once the
    /// task is in a final state.
    pub result: Option<Answer>,
    /// The gate's answer, only when the task is in a final state without a
    /// final answer: a `task_rejected`, or the `task_accepted` of a task
    /// failed without one.
    pub answer: Option<Answer>,
}

impl TaskStatus {
    /// The answer a task in a final state ends with: its final answer, or
    /// else the gate's; `None` while it is not final.
    pub fn final_answer(&self) -> Option<&Answer> {
        if !self.state.is_final() {
            return None;
        }
        self.result.as_ref().or(self.answer.as_ref())
    }
}

impl TaskRecord {
    /// The task's `task_submit` payload as checked, or the problems its
    /// check found.
    ///
    /// # Errors
    ///
    /// The task has no payload that reads as a `task_submit`, or (a new
    /// task) the gate has not checked it yet.
    pub fn checked(&self) -> Result<std::result::Result<&CheckedSubmit, &[Problem]>> {
        match self.checked.as_ref().map(CheckedPayload::get) {
            Some(Ok(c)) => Ok(Ok(c)),
            Some(Err(p)) => Ok(Err(p)),
            None => anyhow::bail!("task {} without its task_submit", self.task_id),
        }
    }

    /// The task as its status shows it ([`TaskStatus`]).
    pub fn status(&self) -> TaskStatus {
        let final_state = self.state.is_final();
        TaskStatus {
            task_id: self.task_id.clone(),
            caller_id: self.caller_id.clone(),
            state: self.state,
            updated_at: self.updated_at.clone(),
            result: self.result.clone().filter(|_| final_state),
            answer: self
                .answer
                .clone()
                .filter(|_| final_state && self.result.is_none()),
        }
    }
}

/// The session the gate issued with its `task_accepted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIssued {
    /// The session token.
    pub token: String,
    /// When the task was accepted (the answer's timestamp, RFC 3339).
    pub accepted_at: String,
}

impl SessionIssued {
    /// The session of a gate answer, if it is a `task_accepted`.
    fn of(answer: &Answer) -> Option<Self> {
        let Answer::Accepted(accepted) = answer else {
            return None;
        };
        Some(Self {
            token: accepted.payload.session_token.clone(),
            accepted_at: accepted.timestamp.clone(),
        })
    }
}

/// What claiming a running slot for a queued task found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotClaim {
    /// The task is `running`.
    Moved,
    /// The task is no longer `queued`.
    NotQueued,
    /// No slot: the tasks of its caller and of its capability running now.
    Full {
        /// Of its caller.
        by_caller: u32,
        /// Of its capability.
        by_capability: u32,
    },
}

/// What recording a submission found.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// A new task.
    New(TaskRecord),
    /// This caller already sent this `message_id`: the original task.
    Duplicate(TaskRecord),
}

const TASK_COLUMNS: &str = "task_id, caller_id, message_id, capability, version, session_id, state, risk, \
     data_class, submit, answer, result, created_at, updated_at, admission";

/// An answer as stored (its JSON text), read.
fn answer_of(text: Option<String>) -> Result<Option<Answer>> {
    text.map(|t| serde_json::from_str(&t).context("stored answer"))
        .transpose()
}

/// How a message sealed at rest starts in its column: `sealed:` and the
/// base64 of its [`DataKey::seal`] form (a JSON text never starts so).
const SEALED: &str = "sealed:";

/// What a sealed message is bound to: its task and its column, so that
/// no sealed message opens in another's place.
fn sealed_for(task_id: &str, column: &str) -> String {
    format!("tasks:{task_id}:{column}")
}

/// `text`, the `column` message of `task_id`, sealed with `key`.
///
/// # Errors
///
/// The cipher or the random source failed.
pub(crate) fn seal_message(
    key: &DataKey,
    task_id: &str,
    column: &str,
    text: &str,
) -> Result<String> {
    use base64::Engine as _;
    let sealed = key.seal(text.as_bytes(), &sealed_for(task_id, column))?;
    Ok(format!(
        "{SEALED}{}",
        base64::engine::general_purpose::STANDARD.encode(sealed)
    ))
}

/// A stored message as its text: opened when it is sealed.
fn open_message(key: &DataKey, task_id: &str, column: &str, text: String) -> Result<String> {
    use base64::Engine as _;
    let Some(body) = text.strip_prefix(SEALED) else {
        return Ok(text);
    };
    let sealed = base64::engine::general_purpose::STANDARD
        .decode(body)
        .with_context(|| format!("task {task_id}: sealed {column} is not base64"))?;
    let plain = key
        .open(&sealed, &sealed_for(task_id, column))
        .with_context(|| format!("task {task_id}: sealed {column}"))?;
    String::from_utf8(plain).with_context(|| format!("task {task_id}: sealed {column}"))
}

/// A stored answer, opened when sealed.
fn message(
    key: &DataKey,
    task_id: &str,
    column: &str,
    text: Option<String>,
) -> Result<Option<Answer>> {
    answer_of(
        text.map(|t| open_message(key, task_id, column, t))
            .transpose()?,
    )
}

/// Whether a task's messages rest sealed (`crate::seal`, the data key of
/// T3/T4 artifacts): its `task_submit` claims T3 or T4
/// (`constraints.data_classification`), or holds a string the credential
/// detector flags (`crate::withhold`).
pub fn seals_messages(submit: &Value) -> bool {
    let claimed = submit["payload"]["constraints"]["data_classification"].as_str();
    matches!(claimed, Some("T3" | "T4")) || crate::withhold::holds_credential(submit)
}

fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<[Option<String>; 15]> {
    let mut out: [Option<String>; 15] = Default::default();
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = r.get(i)?;
    }
    Ok(out)
}

/// The `task_submit` payload of a message as stored, when it reads as
/// one (the database's edge: a task read back), to be checked when asked.
fn checked_of(submit: &Value) -> Option<CheckedPayload> {
    submit
        .get("payload")
        .and_then(|p| TaskSubmit::deserialize(p).ok())
        .map(CheckedPayload::read)
}

fn task_record(key: &DataKey, row: [Option<String>; 15]) -> Result<TaskRecord> {
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
    let task_id = req(task_id, "id")?;
    let submit = open_message(key, &task_id, "submit", req(submit, "submission")?)?;
    let submit: Value = serde_json::from_str(&submit).context("stored submission")?;
    let answer = message(key, &task_id, "answer", answer)?;
    let admission = admission
        .map(|a| serde_json::from_str(&a).context("stored admission"))
        .transpose()?;
    Ok(TaskRecord {
        checked: checked_of(&submit),
        session: answer.as_ref().and_then(SessionIssued::of),
        result: message(key, &task_id, "result", result)?,
        task_id,
        caller_id: req(caller_id, "caller")?,
        message_id: req(message_id, "message id")?,
        capability: req(capability, "capability")?,
        version,
        session_id,
        state: TaskState::parse_name(&req(state, "state")?)?,
        risk,
        data_class,
        submit,
        answer,
        created_at: req(created_at, "creation time")?,
        updated_at: req(updated_at, "update time")?,
        admission,
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
    pub answer: Option<Answer>,
    /// The final answer.
    pub result: Option<Answer>,
    /// The gate's admission.
    pub admission: Option<Admission>,
}

/// A task moved to a state with some of its fields set, ready to be
/// written on any connection to the store's database: by
/// [`Store::set_task`], or in the receipt writer's transaction with the
/// receipt that records the decision (then [`Store::task_moved`] once it
/// is durable).
#[derive(Debug)]
pub struct TaskWrite {
    task_id: String,
    state: TaskState,
    version: Option<String>,
    session_id: Option<String>,
    risk: Option<String>,
    data_class: Option<String>,
    answer: Option<String>,
    result: Option<String>,
    admission: Option<String>,
    /// The submission kept in place of the one received (see
    /// [`TaskWrite::keeping_submit`]).
    submit: Option<String>,
    at: String,
}

impl TaskWrite {
    /// The write of `u` and `state` to `task_id`, stamped now.
    ///
    /// # Errors
    ///
    /// The admission or an answer cannot be encoded.
    pub fn new(task_id: &str, state: TaskState, u: TaskUpdate) -> Result<Self> {
        let text = |a: Option<Answer>| a.as_ref().map(serde_json::to_string).transpose();
        Ok(Self {
            task_id: task_id.to_owned(),
            state,
            version: u.version,
            session_id: u.session_id,
            risk: u.risk,
            data_class: u.data_class,
            answer: text(u.answer)?,
            result: text(u.result)?,
            admission: u
                .admission
                .as_ref()
                .map(serde_json::to_string)
                .transpose()?,
            submit: None,
            at: now(),
        })
    }

    /// This write, and `submit` kept as the task's submission in place of
    /// the message as received (a refused task keeps what its answer and
    /// its receipt need, not a whole large body).
    pub fn keeping_submit(mut self, submit: &Value) -> Self {
        self.submit = Some(submit.to_string());
        self
    }

    /// This write, with its gate answer `answer` sealed with `key` when the
    /// credential detector flags a string of it (a refusal quoting the
    /// message); readers open it as every sealed message.
    ///
    /// # Errors
    ///
    /// The cipher or the random source failed.
    pub fn sealing_flagged_answer(mut self, key: &DataKey, answer: &Answer) -> Result<Self> {
        let answer = answer.to_value()?;
        if crate::withhold::holds_credential(&answer) {
            self.answer = Some(seal_message(
                key,
                &self.task_id,
                "answer",
                &answer.to_string(),
            )?);
        }
        Ok(self)
    }

    /// The task written to.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The state written.
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// Writes it on `db`.
    ///
    /// # Errors
    ///
    /// No such task, or the database fails.
    pub fn apply(&self, db: &rusqlite::Connection) -> Result<()> {
        if !self.write(db, None)? {
            anyhow::bail!("no task {}", self.task_id);
        }
        Ok(())
    }

    /// Writes it on `db` only if the task is in state `from`; returns
    /// whether it was (the task moved).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn apply_from(&self, db: &rusqlite::Connection, from: TaskState) -> Result<bool> {
        self.write(db, Some(from))
    }

    fn write(&self, db: &rusqlite::Connection, from: Option<TaskState>) -> Result<bool> {
        let n = db
            .prepare_cached(
                "UPDATE tasks SET state = ?2,
                version = COALESCE(?3, version), session_id = COALESCE(?4, session_id),
                risk = COALESCE(?5, risk), data_class = COALESCE(?6, data_class),
                answer = COALESCE(?7, answer), result = COALESCE(?8, result), updated_at = ?9,
                admission = COALESCE(?10, admission), submit = COALESCE(?12, submit)
             WHERE task_id = ?1 AND (?11 IS NULL OR state = ?11)",
            )?
            .execute(params![
                self.task_id,
                self.state.as_str(),
                self.version,
                self.session_id,
                self.risk,
                self.data_class,
                self.answer,
                self.result,
                self.at,
                self.admission,
                from.map(TaskState::as_str),
                self.submit,
            ])?;
        Ok(n == 1)
    }
}

impl TaskRecord {
    /// The task as the gate's [`TaskWrite`] of `u` to `queued` leaves it:
    /// what was just written, without reading it back.
    pub fn accepted(self, u: TaskUpdate) -> Self {
        Self {
            session: u
                .answer
                .as_ref()
                .and_then(SessionIssued::of)
                .or(self.session),
            state: TaskState::Queued,
            version: u.version.or(self.version),
            session_id: u.session_id.or(self.session_id),
            risk: u.risk.or(self.risk),
            data_class: u.data_class.or(self.data_class),
            answer: u.answer.or(self.answer),
            result: u.result.or(self.result),
            admission: u.admission.or(self.admission),
            ..self
        }
    }

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
    /// How many tasks wait or run now, by state and capability (the states
    /// before an answer for good: `received`, `pending_approval`,
    /// `queued`, `running`), read by the index on the state: what
    /// `/metrics` shows, at a cost that does not grow with the tasks
    /// answered long ago.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn live_task_counts(&self) -> Result<Vec<(TaskState, String, i64)>> {
        let db = self.db();
        let mut stmt = db.prepare_cached(
            "SELECT state, capability, COUNT(*) FROM tasks
             WHERE state IN ('received', 'pending_approval', 'queued', 'running')
             GROUP BY state, capability",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut counts = Vec::new();
        for row in rows {
            let (state, capability, n) = row?;
            counts.push((TaskState::parse_name(&state)?, capability, n));
        }
        Ok(counts)
    }

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
        self.submit_routed(caller_id, message_id, capability, submit, None)
    }

    /// [`Store::submit`], and for a new task where its answers go
    /// ([`super::Replies`]) in the same transaction: no task of an AMQP
    /// delivery exists without its route, so one left by a host that
    /// stopped is never taken for a task submitted over HTTP (started
    /// here while the broker gives the message to another host). A
    /// duplicate keeps its task's route, if any.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn submit_routed(
        &self,
        caller_id: &str,
        message_id: &str,
        capability: &str,
        submit: &Value,
        replies: Option<super::Replies<'_>>,
    ) -> Result<Submitted> {
        let task_id = format!("task-{}", uuid::Uuid::now_v7());
        let at = now();
        let mut db = self.db();
        // Committed without its own fsync: nothing answers a caller about
        // this row until a later write has been synced (the gate's receipt,
        // the admission, the refusal), and that sync of the log file covers
        // this commit, which precedes it there. A concurrent submission of
        // the same message waits for this one's answer (`submit_lock`).
        // A sensitive message rests sealed (see [`seals_messages`]).
        let text = if seals_messages(submit) {
            seal_message(&self.data_key, &task_id, "submit", &submit.to_string())?
        } else {
            submit.to_string()
        };
        let earlier = super::unsynced(&mut db, |db| {
            let tx = db.transaction()?;
            let inserted = tx.prepare_cached(
                "INSERT INTO tasks (task_id, caller_id, message_id, capability, state, submit, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'received', ?5, ?6, ?6)
                 ON CONFLICT (caller_id, message_id) DO NOTHING")?.execute(
                params![task_id, caller_id, message_id, capability, text, at],
            )?;
            // A new task is what was just written; a duplicate is read.
            let earlier = if inserted == 1 {
                if let Some(replies) = replies {
                    super::replies::insert_route(&tx, &task_id, replies)?;
                }
                None
            } else {
                Some(
                    tx.prepare_cached(&format!(
                        "SELECT {TASK_COLUMNS} FROM tasks WHERE caller_id = ?1 AND message_id = ?2"
                    ))?
                    .query_row(params![caller_id, message_id], task_row)?,
                )
            };
            tx.commit()?;
            Ok(earlier)
        })?;
        drop(db);
        if let Some(row) = earlier {
            return Ok(Submitted::Duplicate(task_record(&self.data_key, row)?));
        }
        let record = TaskRecord {
            // Checked by the gate, which has the payload parsed.
            checked: None,
            task_id,
            caller_id: caller_id.to_owned(),
            message_id: message_id.to_owned(),
            capability: capability.to_owned(),
            version: None,
            session_id: None,
            state: TaskState::Received,
            risk: None,
            data_class: None,
            submit: submit.clone(),
            answer: None,
            result: None,
            created_at: at.clone(),
            updated_at: at,
            admission: None,
            session: None,
        };
        self.task_moved(&record.task_id, record.state);
        Ok(Submitted::New(record))
    }

    /// Moves a task to `state`, setting the given fields (others
    /// unchanged), and returns it as it is then.
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
        self.set_task(task_id, state, u)?;
        self.task(task_id)?
            .with_context(|| format!("no task {task_id}"))
    }

    /// Moves a task to `state`, setting the given fields (others unchanged).
    ///
    /// # Errors
    ///
    /// No such task, or the database fails.
    pub fn set_task(&self, task_id: &str, state: TaskState, u: TaskUpdate) -> Result<()> {
        self.write_task(&TaskWrite::new(task_id, state, u)?)
    }

    /// Writes `write` on the store's connection.
    ///
    /// # Errors
    ///
    /// No such task, or the database fails.
    pub fn write_task(&self, write: &TaskWrite) -> Result<()> {
        write.apply(&self.db())?;
        self.task_moved(write.task_id(), write.state());
        Ok(())
    }

    /// Writes `write` only if the task is in `from`; returns whether it
    /// was (another writer moved it first otherwise, and nothing is
    /// written).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn write_task_from(&self, write: &TaskWrite, from: TaskState) -> Result<bool> {
        let moved = write.apply_from(&self.db(), from)?;
        if moved {
            self.task_moved(write.task_id(), write.state());
        }
        Ok(moved)
    }

    /// Moves a task from `from` to `to` only if it is in `from`; returns
    /// whether it moved (a second runner loses the race).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn transition(&self, task_id: &str, from: TaskState, to: TaskState) -> Result<bool> {
        let moved = self
            .db()
            .prepare_cached(
                "UPDATE tasks SET state = ?3, updated_at = ?4 WHERE task_id = ?1 AND state = ?2",
            )?
            .execute(params![task_id, from.as_str(), to.as_str(), now()])?
            == 1;
        if moved {
            self.task_moved(task_id, to);
        }
        Ok(moved)
    }

    /// Moves `task` from `queued` to `running` if fewer than
    /// `caller_limit` tasks of its caller and fewer than `capability_limit`
    /// of its capability are running: one statement, so that neither two
    /// runners of one process nor two processes overrun a limit.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn claim_running(
        &self,
        task: &TaskRecord,
        caller_limit: u32,
        capability_limit: u32,
    ) -> Result<SlotClaim> {
        let moved = self.db().prepare_cached(CLAIM)?.execute(params![
            task.task_id,
            now(),
            task.caller_id,
            caller_limit,
            task.capability,
            capability_limit,
        ])? == 1;
        if moved {
            self.task_moved(&task.task_id, TaskState::Running);
            return Ok(SlotClaim::Moved);
        }
        let (state, by_caller, by_capability): (String, u32, u32) =
            self.db().prepare_cached(CLAIM_FULL)?.query_row(
                params![task.task_id, task.caller_id, task.capability],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
        if state != TaskState::Queued.as_str() {
            return Ok(SlotClaim::NotQueued);
        }
        Ok(SlotClaim::Full {
            by_caller,
            by_capability,
        })
    }

    /// One task.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn task(&self, task_id: &str) -> Result<Option<TaskRecord>> {
        let row = self
            .db()
            .prepare_cached(&format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?1"
            ))?
            .query_row(params![task_id], task_row)
            .optional()?;
        row.map(|r| task_record(&self.data_key, r)).transpose()
    }

    /// A task's state and when it last changed, without reading the rest
    /// of it: what a watcher woken by any task's change needs to know
    /// whether its own changed.
    ///
    /// # Errors
    ///
    /// The database fails, or the state is not one this host knows.
    pub fn task_stamp(&self, task_id: &str) -> Result<Option<(TaskState, String)>> {
        let row: Option<(String, String)> = self
            .db()
            .prepare_cached("SELECT state, updated_at FROM tasks WHERE task_id = ?1")?
            .query_row(params![task_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        row.map(|(state, at)| Ok((TaskState::parse_name(&state)?, at)))
            .transpose()
    }

    /// What a task's `job_status` shows ([`TaskStatus`]), read without
    /// the rest of the task: its submission, admission and session are
    /// neither read nor parsed, and its answers only once it has its final
    /// one. What an event stream reads each time its task changes.
    ///
    /// # Errors
    ///
    /// The database fails, the state is not one this host knows, or a
    /// stored answer is not JSON.
    pub fn task_status(&self, task_id: &str) -> Result<Option<TaskStatus>> {
        type Row = (String, String, String, Option<String>, Option<String>);
        let row: Option<Row> = self
            .db()
            .prepare_cached(
                "SELECT caller_id, state, updated_at,
                   CASE WHEN state IN ('completed', 'failed', 'rejected') THEN result END,
                   CASE WHEN state IN ('completed', 'failed', 'rejected') AND result IS NULL
                     THEN answer END
                 FROM tasks WHERE task_id = ?1",
            )?
            .query_row(params![task_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .optional()?;
        let Some((caller_id, state, updated_at, result, answer)) = row else {
            return Ok(None);
        };
        Ok(Some(TaskStatus {
            task_id: task_id.to_owned(),
            caller_id,
            state: TaskState::parse_name(&state)?,
            updated_at,
            result: message(&self.data_key, task_id, "result", result)?,
            answer: message(&self.data_key, task_id, "answer", answer)?,
        }))
    }

    /// The task of a session.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn task_of_session(&self, session_id: &str) -> Result<Option<TaskRecord>> {
        let row = self
            .db()
            .prepare_cached(
                &format!(
                    "SELECT {TASK_COLUMNS} FROM tasks WHERE session_id = ?1 ORDER BY created_at DESC, task_id DESC LIMIT 1"
                ))?.query_row(
                params![session_id],
                task_row,
            )
            .optional()?;
        row.map(|r| task_record(&self.data_key, r)).transpose()
    }

    /// Tasks, newest first, optionally in one state.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn tasks(&self, state: Option<TaskState>, limit: usize) -> Result<Vec<TaskRecord>> {
        self.tasks_of(None, state, limit)
    }

    /// The tasks of `capability`@`version` that have not ended (received,
    /// waiting for approval, queued or running), oldest first, with their
    /// state.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn unfinished_tasks_of(
        &self,
        capability: &str,
        version: &str,
    ) -> Result<Vec<(String, TaskState)>> {
        let db = self.db();
        let mut stmt = db.prepare_cached(
            "SELECT task_id, state FROM tasks
             WHERE capability = ?1 AND version = ?2
               AND state IN ('received', 'pending_approval', 'queued', 'running')
             ORDER BY created_at, task_id",
        )?;
        let rows = stmt.query_map(params![capability, version], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        rows.map(|row| {
            let (id, state) = row?;
            Ok((id, TaskState::parse_name(&state)?))
        })
        .collect()
    }

    /// How many of `caller`'s tasks wait for an operator's approval.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn waiting_for_approval(&self, caller: &str) -> Result<u64> {
        self.count_of(caller, PENDING_OF)
    }

    /// How many of `caller`'s tasks are admitted and wait to run
    /// (`queued`: for a session slot, for equipment, or just accepted).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn queued_of(&self, caller: &str) -> Result<u64> {
        self.count_of(caller, QUEUED_OF)
    }

    /// The bytes of `caller`'s messages as received (a refused one kept
    /// bounded counts the size it records, `bounded_message.size`),
    /// recorded at or after `since` (RFC 3339, as the store writes times),
    /// by minute: each minute's time (`None` when the stored one does not
    /// read as a time) and its bytes. Read once per caller by a process
    /// that limits what callers submit (`budgets.json` `submissions`);
    /// walks the caller's tasks through the index of its message ids.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn recorded_bytes_since(
        &self,
        caller: &str,
        since: &str,
    ) -> Result<Vec<(Option<time::OffsetDateTime>, u64)>> {
        let db = self.db();
        let mut stmt = db.prepare_cached(
            "SELECT substr(created_at, 1, 16), SUM(CASE
                 WHEN substr(submit, 1, 19) = '{\"bounded_message\":'
                 THEN json_extract(submit, '$.bounded_message.size')
                 ELSE length(CAST(submit AS BLOB)) END)
             FROM tasks WHERE caller_id = ?1 AND created_at >= ?2 GROUP BY 1 ORDER BY 1",
        )?;
        let rows = stmt.query_map(params![caller, since], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<i64>>(1)?.unwrap_or(0),
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (minute, bytes) = row?;
            let at = time::OffsetDateTime::parse(
                &format!("{minute}:00Z"),
                &time::format_description::well_known::Rfc3339,
            )
            .ok();
            out.push((at, u64::try_from(bytes).unwrap_or(0)));
        }
        Ok(out)
    }

    fn count_of(&self, caller: &str, sql: &str) -> Result<u64> {
        let n: i64 = self
            .db()
            .prepare_cached(sql)?
            .query_row(rusqlite::params![caller], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// [`Store::tasks`] of one caller (`Some`), or of every caller.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn tasks_of(
        &self,
        caller: Option<&str>,
        state: Option<TaskState>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>> {
        let db = self.db();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Each filter only when given, so that the index on the state (or
        // the one on the caller and message) serves the query.
        let mut filters: Vec<&str> = Vec::new();
        let mut values: Vec<&dyn rusqlite::ToSql> = Vec::new();
        let state = state.map(TaskState::as_str);
        if let Some(caller) = &caller {
            filters.push("caller_id = ?");
            values.push(caller);
        }
        // The state as a literal (one of `TaskState`'s names): bound as a
        // parameter, SQLite compiled the statement again at every run, its
        // value deciding whether the partial index of approvals applies.
        let by_state = state.map(|s| format!("state = '{s}'"));
        if let Some(by_state) = &by_state {
            filters.push(by_state);
        }
        values.push(&limit);
        let filter = if filters.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", filters.join(" AND "))
        };
        let rows = db
            .prepare_cached(&listing(&filter))?
            .query_map(values.as_slice(), task_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|r| task_record(&self.data_key, r))
            .collect()
    }
}

/// The query of [`Store::tasks_of`] with its `WHERE` clause (or none):
/// the newest first, read in that order from `tasks_newest` (everybody's)
/// or `tasks_newest_by_caller` (a caller's), so that a listing reads the
/// tasks it returns, not every task to sort them.
fn listing(filter: &str) -> String {
    format!(
        "SELECT {TASK_COLUMNS} FROM tasks {filter}
         ORDER BY created_at DESC, task_id DESC LIMIT ?"
    )
}

/// A task's messages as stored: `task_submit`, the gate's answer, the
/// final answer (JSON text).
pub type StoredMessages = (String, Option<String>, Option<String>);

/// A task's [`StoredMessages`], read on a connection the caller holds (an
/// evidence pack reads many tables in one go).
///
/// # Errors
///
/// The database fails.
pub fn stored_messages(
    db: &rusqlite::Connection,
    key: &DataKey,
    task_id: &str,
) -> Result<Option<StoredMessages>> {
    let row: Option<(String, Option<String>, Option<String>)> = db
        .prepare_cached("SELECT submit, answer, result FROM tasks WHERE task_id = ?1")?
        .query_row(params![task_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let Some((submit, answer, result)) = row else {
        return Ok(None);
    };
    let open = |column: &str, text: Option<String>| {
        text.map(|t| open_message(key, task_id, column, t))
            .transpose()
    };
    Ok(Some((
        open_message(key, task_id, "submit", submit)?,
        open("answer", answer)?,
        open("result", result)?,
    )))
}

/// A caller's tasks waiting to run: through the index of states, whose
/// `queued` range holds only the (few) queued tasks of all callers, never
/// through the caller's index, which holds its whole history.
/// Moves a task from `queued` to `running` when its caller and its
/// capability each run fewer sessions than their limits (`slots`). The
/// states are literals: bound as parameters, the value of `state` decided
/// whether the partial index of tasks waiting for an approval could serve
/// the counts, so SQLite compiled the statement again at every claim (its
/// parser and planner on every task's path, about 3% of the task path's
/// CPU).
const CLAIM: &str = "UPDATE tasks SET state = 'running', updated_at = ?2
     WHERE task_id = ?1 AND state = 'queued'
       AND (SELECT COUNT(*) FROM tasks WHERE state = 'running' AND caller_id = ?3) < ?4
       AND (SELECT COUNT(*) FROM tasks WHERE state = 'running' AND capability = ?5) < ?6";

/// What a claim that did not move its task found: the task's state and the
/// running sessions of its caller and of its capability.
const CLAIM_FULL: &str = "SELECT (SELECT state FROM tasks WHERE task_id = ?1),
        (SELECT COUNT(*) FROM tasks WHERE state = 'running' AND caller_id = ?2),
        (SELECT COUNT(*) FROM tasks WHERE state = 'running' AND capability = ?3)";

const QUEUED_OF: &str =
    "SELECT COUNT(*) FROM tasks INDEXED BY tasks_state WHERE state = 'queued' AND caller_id = ?1";

/// A caller's tasks waiting for an approval, through the partial index of
/// them (`tasks_pending_by_caller`; the state a literal, as in the index's
/// condition, for the planner to use it).
const PENDING_OF: &str =
    "SELECT COUNT(*) FROM tasks WHERE caller_id = ?1 AND state = 'pending_approval'";

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use hcp_contracts::message::{RejectReason, TaskCompleted, TaskRejected};
    use serde_json::json;

    /// A listing of the newest tasks, a caller's or everybody's, reads them
    /// in order from an index: no scan of the tasks, no sort of them (its
    /// time grew with the store before: docs/benchmarks.md, "Growth").
    #[test]
    fn the_newest_tasks_are_listed_from_an_index_not_sorted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let db = store.db();
        for filter in ["", "WHERE caller_id = ?"] {
            let sql = format!("EXPLAIN QUERY PLAN {}", listing(filter));
            let mut stmt = db.prepare(&sql).expect("plan");
            let n = stmt.parameter_count();
            let params: Vec<&dyn rusqlite::ToSql> = match n {
                1 => vec![&100],
                _ => vec![&"c1", &100],
            };
            let plan: Vec<String> = stmt
                .query_map(params.as_slice(), |r| r.get::<_, String>(3))
                .expect("plan")
                .collect::<rusqlite::Result<_>>()
                .expect("plan");
            let plan = plan.join("; ");
            assert!(
                !plan.contains("TEMP B-TREE") && plan.contains("INDEX tasks_newest"),
                "{filter:?}: {plan}"
            );
        }
    }

    /// A task read back carries its payload unchecked, and checks it once,
    /// when first asked: a listing or the outbox, which never ask, do not
    /// check; the gate's check is carried as it was made.
    #[test]
    fn a_task_read_back_is_checked_when_first_asked_and_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let message = json!({"payload": {
            "capability": "cap", "caller_id": "c1", "intent": "i", "inputs": {},
            "capability_version": "1.x",
            "constraints": {"max_duration": "PT5S"}
        }});
        let Submitted::New(task) = store
            .submit("c1", "m-checked", "cap", &message)
            .expect("submit")
        else {
            panic!("not new");
        };
        assert!(
            task.checked.is_none(),
            "a new task waits for the gate's check"
        );
        let read = store.task(&task.task_id).expect("read").expect("task");
        let payload = read.checked.as_ref().expect("a payload");
        assert!(payload.checked.get().is_none(), "checked as it was read");
        let checked = read.checked().expect("payload").expect("checks");
        assert_eq!(
            checked.max_duration,
            Some(std::time::Duration::from_secs(5))
        );
        assert!(payload.checked.get().is_some());
        let first: *const CheckedSubmit = checked;
        let again: *const CheckedSubmit = read.checked().expect("payload").expect("checks");
        assert_eq!(first, again, "checked twice");
        // The gate's check, carried: the same payload as the one read back.
        let gate = CheckedPayload::of(payload.payload().expect("payload").clone());
        assert!(gate.checked.get().is_some());
        assert_eq!(&gate, payload);
        // A payload that does not check: its problems, once.
        let bad = json!({"payload": {
            "capability": "cap", "caller_id": "c1", "intent": "i", "inputs": {},
            "capability_version": "one"
        }});
        let Submitted::New(task) = store.submit("c1", "m-bad", "cap", &bad).expect("submit") else {
            panic!("not new");
        };
        let read = store.task(&task.task_id).expect("read").expect("task");
        let problems = read.checked().expect("payload").expect_err("refused");
        assert_eq!(problems[0].pointer, "/payload/capability_version");
    }

    /// A `task_completed` to store.
    pub(crate) fn completed() -> Answer {
        Answer::completed(
            Some("session-1".into()),
            TaskCompleted {
                outputs: json!({"n": 1.5}),
                artifacts: Vec::new(),
                execution_summary: None,
            },
        )
    }

    /// A `task_failed` to store.
    pub(crate) fn failed(message: &str) -> Answer {
        Answer::failed(
            None,
            hcp_contracts::message::TaskFailed {
                error_code: hcp_contracts::message::ErrorCode::Timeout,
                error_message: message.into(),
                error_details: None,
                partial_outputs: None,
                artifacts: Vec::new(),
                execution_summary: None,
            },
        )
    }

    /// A `task_accepted` to store.
    pub(crate) fn accepted() -> Answer {
        Answer::accepted(
            "session-1".into(),
            hcp_contracts::message::TaskAccepted {
                session_token: "t".into(),
                risk_level: hcp_contracts::RiskLevel::R1,
                data_classification: hcp_contracts::DataClass::T1,
                safety_envelope: json!({}),
                constraints: json!({}),
                issued_at: None,
                expires_at: None,
            },
        )
    }

    /// The claim on every task's path is compiled once: a state bound as a
    /// parameter made SQLite compile it again at every run (the partial
    /// index of approvals depends on the state's value), as the same
    /// statement with its states bound shows beside it.
    #[test]
    fn a_claim_is_not_compiled_again_at_every_task() {
        use rusqlite::StatementStatus::{RePrepare, Run};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        for i in 0..3 {
            let Submitted::New(task) = store
                .submit("c1", &format!("m-{i}"), "cap", &json!({}))
                .expect("submit")
            else {
                panic!("not new");
            };
            store
                .db()
                .execute(
                    "UPDATE tasks SET state = 'queued' WHERE task_id = ?1",
                    rusqlite::params![task.task_id],
                )
                .expect("state");
            let task = store.task(&task.task_id).expect("read").expect("task");
            assert_eq!(
                store.claim_running(&task, 10, 10).expect("claim"),
                SlotClaim::Moved
            );
            assert_eq!(
                store
                    .tasks_of(Some("c1"), Some(TaskState::Running), 10)
                    .expect("list")
                    .len(),
                i + 1
            );
        }
        let db = store.db();
        let claim = db.prepare_cached(CLAIM).expect("cached");
        assert_eq!(claim.get_status(Run), 3);
        assert_eq!(claim.get_status(RePrepare), 0);
        // The same statement with its states bound.
        let mut bound = db
            .prepare(
                "UPDATE tasks SET state = ?2 WHERE task_id = ?1 AND state = ?3
                   AND (SELECT COUNT(*) FROM tasks WHERE state = ?2 AND caller_id = ?4) < 10",
            )
            .expect("prepare");
        for i in 0..3 {
            bound
                .execute(rusqlite::params![
                    format!("t-{i}"),
                    "running",
                    "queued",
                    "c1"
                ])
                .expect("run");
        }
        assert_eq!(bound.get_status(RePrepare), 3, "SQLite compiles it again");
    }

    /// A task's status, read alone, is what the whole task shows in every
    /// state: its answers only once it is final, the final answer before
    /// the gate's, the gate's alone when there is no final answer (a
    /// `task_rejected`; a task failed without one), and no task for an
    /// unknown id.
    #[test]
    fn a_tasks_status_read_alone_is_the_status_of_the_whole_task() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let new = |m: &str| {
            let Submitted::New(task) = store
                .submit("c1", m, "cap", &json!({"payload": {"intent": m}}))
                .expect("submit")
            else {
                panic!("not new");
            };
            task.task_id
        };
        let same = |id: &str| {
            let whole = store.task(id).expect("read").expect("task").status();
            let alone = store.task_status(id).expect("status").expect("task");
            assert_eq!(alone, whole, "{id}");
            alone
        };
        let accepted = accepted();
        let done = completed();
        let task = new("m-1");
        assert_eq!(same(&task).state, TaskState::Received);
        let with_answer = TaskUpdate {
            answer: Some(accepted.clone()),
            ..TaskUpdate::default()
        };
        store
            .set_task(&task, TaskState::Queued, with_answer.clone())
            .expect("queue");
        let queued = same(&task);
        assert_eq!((queued.result, queued.answer), (None, None));
        store
            .transition(&task, TaskState::Queued, TaskState::Running)
            .expect("run");
        assert_eq!(same(&task).final_answer(), None);
        store
            .settle(
                &task,
                TaskState::Running,
                TaskState::Completed,
                done.clone(),
            )
            .expect("settle");
        let completed = same(&task);
        assert_eq!(completed.final_answer(), Some(&done));
        assert_eq!(completed.answer, None, "the gate's answer is not read");

        let rejected = new("m-2");
        let refusal = Answer::rejected(TaskRejected {
            reason_code: RejectReason::Forbidden,
            reason_message: "x".into(),
            assessed_risk_level: None,
            suggestion: None,
        });
        store
            .set_task(
                &rejected,
                TaskState::Rejected,
                TaskUpdate {
                    answer: Some(refusal.clone()),
                    ..TaskUpdate::default()
                },
            )
            .expect("reject");
        assert_eq!(same(&rejected).final_answer(), Some(&refusal));

        let failed = new("m-3");
        store
            .set_task(&failed, TaskState::Failed, with_answer)
            .expect("fail");
        assert_eq!(same(&failed).final_answer(), Some(&accepted));

        assert_eq!(store.task_status("task-none").expect("status"), None);
    }

    /// The counts taken at admission read the index of states and the
    /// partial index of tasks waiting for an approval, not the caller's
    /// whole history, and count only the caller's tasks in that state.
    #[test]
    fn a_callers_waiting_tasks_are_counted_from_their_own_index() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        for (caller, i, state) in [
            ("c1", 0, "queued"),
            ("c1", 1, "queued"),
            ("c1", 2, "running"),
            ("c1", 3, "pending_approval"),
            ("c2", 4, "queued"),
        ] {
            let Submitted::New(task) = store
                .submit(caller, &format!("m-{i}"), "cap", &json!({}))
                .expect("submit")
            else {
                panic!("not new");
            };
            store
                .db()
                .execute(
                    "UPDATE tasks SET state = ?1 WHERE task_id = ?2",
                    rusqlite::params![state, task.task_id],
                )
                .expect("state");
        }
        assert_eq!(store.queued_of("c1").expect("count"), 2);
        assert_eq!(store.queued_of("c2").expect("count"), 1);
        assert_eq!(store.waiting_for_approval("c1").expect("count"), 1);
        assert_eq!(store.waiting_for_approval("c2").expect("count"), 0);
        for (sql, index) in [
            (QUEUED_OF, "tasks_state"),
            (PENDING_OF, "tasks_pending_by_caller"),
        ] {
            let plan: Vec<String> = store
                .db()
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("plan")
                .query_map(["c1"], |r| r.get::<_, String>(3))
                .expect("plan")
                .collect::<rusqlite::Result<_>>()
                .expect("plan");
            assert!(plan.iter().any(|p| p.contains(index)), "{sql}: {plan:?}");
        }
    }

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
        // The new task as answered is the task as stored.
        assert_eq!(
            store.task(&first.task_id).expect("read"),
            Some(first.clone())
        );
        assert_eq!(again, first);
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
}
