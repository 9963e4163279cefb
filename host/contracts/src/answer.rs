//! A host's answers to a task, typed: what travels from the engine to
//! every transport (HTTP, AMQP, the command line) and rests in the store.
//!
//! An [`Answer`] is one of the HCP messages a host sends about a task
//! (`task_accepted`, `task_rejected`, `task_completed`, `task_failed`:
//! a [`Message`] of its typed payload), or a `job_status` while the task
//! waits ([`JobStatus`], seed 004's global contract). Nobody reads an
//! answer's JSON: transports ask the typed answer ([`Answer::kind_name`],
//! [`Answer::rejected`], [`Answer::message_id`], ...), and JSON is made
//! or read only here, at the edges (serialization for the wire, the store's
//! columns).
//!
//! The wire form is the one [`crate::message::Envelope`] writes, field for
//! field and in its order (`hcp_version`, `message_id`, `timestamp`,
//! `session_id`, `type`, `payload`): an answer read back from its JSON and
//! written again is the same text (a duplicate gets its original answer
//! byte for byte).

use crate::message::{
    HCP_VERSION, MessageType, RejectReason, TaskAccepted, TaskCompleted, TaskFailed, TaskRejected,
    now_rfc3339,
};
use serde::ser::SerializeStruct as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An HCP message the host sends, with its payload typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Message<P> {
    /// `1.0`.
    pub hcp_version: String,
    /// The host's identifier of this message.
    pub message_id: String,
    /// When it was sent (RFC 3339).
    pub timestamp: String,
    /// The task's session, once it has one.
    pub session_id: Option<String>,
    /// The payload.
    pub payload: P,
}

impl<P> Message<P> {
    /// A new outgoing message: fresh id, current time (as
    /// [`crate::message::Envelope::new`]).
    pub fn new(session_id: Option<String>, payload: P) -> Self {
        Self {
            hcp_version: HCP_VERSION.to_owned(),
            message_id: format!("msg-{}", uuid::Uuid::now_v7()),
            timestamp: now_rfc3339(),
            session_id,
            payload,
        }
    }
}

/// What a `job_status` says of its task (`status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Received (not yet through the gate), or admitted and waiting for a
    /// session slot or its equipment.
    Queued,
    /// Admitted, and waiting for an operator's approval (`pending_approval`:
    /// a status of its own since issue 45; it was `queued` before).
    PendingApproval,
    /// Running.
    Running,
    /// Completed.
    Complete,
    /// Failed or rejected.
    Failed,
}

/// A `job_status` (seed 004's global contract): the answer while a task
/// waits, and what its status endpoint shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobStatus {
    /// The task's id.
    pub job_id: String,
    /// Where it is.
    pub status: JobState,
    /// `hcp`.
    pub service: String,
    /// Its last change.
    pub updated_at: String,
    /// What it waits for, or where it is.
    pub message: String,
    /// Its final answer, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<Answer>>,
}

/// A host's answer about a task.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `task_accepted`: the gate admitted it and issued its session.
    Accepted(Message<TaskAccepted>),
    /// `task_rejected`: refused, for good.
    Rejected(Message<TaskRejected>),
    /// A `job_status`: the task waits (queued for an operator's approval,
    /// for equipment, or for the gate).
    Waiting(JobStatus),
    /// `task_completed`.
    Completed(Message<TaskCompleted>),
    /// `task_failed`.
    Failed(Message<TaskFailed>),
}

impl Answer {
    /// A new `task_accepted` of session `session_id`.
    pub fn accepted(session_id: String, payload: TaskAccepted) -> Self {
        Self::Accepted(Message::new(Some(session_id), payload))
    }

    /// A new `task_rejected` (no session: the task never had one).
    pub fn rejected(payload: TaskRejected) -> Self {
        Self::Rejected(Message::new(None, payload))
    }

    /// A new `task_completed` of `session_id`.
    pub fn completed(session_id: Option<String>, payload: TaskCompleted) -> Self {
        Self::Completed(Message::new(session_id, payload))
    }

    /// A new `task_failed` of `session_id`.
    pub fn failed(session_id: Option<String>, payload: TaskFailed) -> Self {
        Self::Failed(Message::new(session_id, payload))
    }

    /// The HCP message type, or `None` for a `job_status`.
    pub fn message_type(&self) -> Option<MessageType> {
        Some(match self {
            Self::Accepted(_) => MessageType::TaskAccepted,
            Self::Rejected(_) => MessageType::TaskRejected,
            Self::Completed(_) => MessageType::TaskCompleted,
            Self::Failed(_) => MessageType::TaskFailed,
            Self::Waiting(_) => return None,
        })
    }

    /// Its name, as logs and listings show it: the message type
    /// (`task_completed`, ...), or `job_status`.
    pub fn kind_name(&self) -> &'static str {
        self.message_type()
            .map_or("job_status", MessageType::as_str)
    }

    /// The HCP message's `message_id` (`None` for a `job_status`).
    pub fn message_id(&self) -> Option<&str> {
        match self {
            Self::Accepted(m) => Some(&m.message_id),
            Self::Rejected(m) => Some(&m.message_id),
            Self::Completed(m) => Some(&m.message_id),
            Self::Failed(m) => Some(&m.message_id),
            Self::Waiting(_) => None,
        }
    }

    /// The HCP message's `session_id` (`None` for a `job_status`, and
    /// for a message without a session).
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Self::Accepted(m) => m.session_id.as_deref(),
            Self::Rejected(m) => m.session_id.as_deref(),
            Self::Completed(m) => m.session_id.as_deref(),
            Self::Failed(m) => m.session_id.as_deref(),
            Self::Waiting(_) => None,
        }
    }

    /// The refusal, for a `task_rejected`.
    pub fn rejected_payload(&self) -> Option<&TaskRejected> {
        match self {
            Self::Rejected(m) => Some(&m.payload),
            _ => None,
        }
    }

    /// Why it was refused, for a `task_rejected`.
    pub fn reject_reason(&self) -> Option<RejectReason> {
        self.rejected_payload().map(|r| r.reason_code)
    }

    /// A `task_rejected` or a `task_failed`: the task did not succeed.
    pub fn is_refusal_or_failure(&self) -> bool {
        matches!(self, Self::Rejected(_) | Self::Failed(_))
    }

    /// The answer as a JSON value (what a withholding walk rewrites).
    ///
    /// # Errors
    ///
    /// Never for this module's types (their JSON cannot fail).
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    /// The answer of a JSON value (its wire form).
    ///
    /// # Errors
    ///
    /// The value is neither an HCP answer nor a `job_status`.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        use serde::de::Error as _;
        if value.get("type").is_none() {
            return Ok(Self::Waiting(serde_json::from_value(value)?));
        }
        let wire: Wire = serde_json::from_value(value)?;
        Ok(match wire.kind {
            MessageType::TaskAccepted => Self::Accepted(wire.message()?),
            MessageType::TaskRejected => Self::Rejected(wire.message()?),
            MessageType::TaskCompleted => Self::Completed(wire.message()?),
            MessageType::TaskFailed => Self::Failed(wire.message()?),
            MessageType::TaskSubmit => {
                return Err(serde_json::Error::custom("a task_submit is not an answer"));
            }
        })
    }
}

/// The envelope of an answer as read, its payload still JSON.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    hcp_version: String,
    message_id: String,
    timestamp: String,
    session_id: Option<String>,
    #[serde(rename = "type")]
    kind: MessageType,
    payload: Value,
}

impl Wire {
    /// The message, its payload read as `P`.
    fn message<P: serde::de::DeserializeOwned>(self) -> Result<Message<P>, serde_json::Error> {
        Ok(Message {
            payload: serde_json::from_value(self.payload)?,
            hcp_version: self.hcp_version,
            message_id: self.message_id,
            timestamp: self.timestamp,
            session_id: self.session_id,
        })
    }
}

fn serialize_message<S: serde::Serializer, P: Serialize>(
    m: &Message<P>,
    kind: MessageType,
    s: S,
) -> Result<S::Ok, S::Error> {
    // `Envelope`'s fields, in its order.
    let mut out = s.serialize_struct("Envelope", 6)?;
    out.serialize_field("hcp_version", &m.hcp_version)?;
    out.serialize_field("message_id", &m.message_id)?;
    out.serialize_field("timestamp", &m.timestamp)?;
    out.serialize_field("session_id", &m.session_id)?;
    out.serialize_field("type", &kind)?;
    out.serialize_field("payload", &m.payload)?;
    out.end()
}

impl Serialize for Answer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Accepted(m) => serialize_message(m, MessageType::TaskAccepted, s),
            Self::Rejected(m) => serialize_message(m, MessageType::TaskRejected, s),
            Self::Completed(m) => serialize_message(m, MessageType::TaskCompleted, s),
            Self::Failed(m) => serialize_message(m, MessageType::TaskFailed, s),
            Self::Waiting(j) => j.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Answer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        Self::from_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

impl std::fmt::Display for Answer {
    /// Its JSON text (as the wire carries it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{
        ArtifactRef, Envelope, ErrorCode, ErrorDetails, ExecutionSummary, TaskAccepted,
    };
    use crate::{DataClass, RiskLevel};
    use serde_json::json;

    fn answers() -> Vec<(MessageType, Option<String>, Value)> {
        let summary = ExecutionSummary {
            duration: Some("PT0.5S".into()),
            steps_executed: Some(3),
            checkpoints_created: Some(0),
            risk_events: Some(Vec::new()),
            warnings: None,
        };
        vec![
            (
                MessageType::TaskAccepted,
                Some("session-1".into()),
                serde_json::to_value(TaskAccepted {
                    session_token: "t.o.k".into(),
                    risk_level: RiskLevel::R2,
                    data_classification: DataClass::T2,
                    safety_envelope: json!({"z": 1, "a": [1.5, "x"]}),
                    constraints: json!({"max_duration": "PT10M", "priority": "high"}),
                    issued_at: Some("2026-01-01T00:00:00Z".into()),
                    expires_at: None,
                })
                .expect("value"),
            ),
            (
                MessageType::TaskRejected,
                None,
                serde_json::to_value(TaskRejected {
                    reason_code: RejectReason::RiskTooHigh,
                    reason_message: "no \"way\"\n\u{1F600}".into(),
                    assessed_risk_level: Some(RiskLevel::R4),
                    suggestion: None,
                })
                .expect("value"),
            ),
            (
                MessageType::TaskCompleted,
                Some("session-2".into()),
                serde_json::to_value(TaskCompleted {
                    outputs: json!({"zeta": 1e300, "alpha": -0.1, "big": 18446744073709551615u64, "nested": {"b": null, "a": [true]}}),
                    artifacts: vec![ArtifactRef {
                        name: "r.txt".into(),
                        mime_type: "text/plain".into(),
                        uri: "hcp://artifacts/x".into(),
                        size_bytes: 3,
                        checksum: Some("sha256:00".into()),
                    }],
                    execution_summary: Some(summary.clone()),
                })
                .expect("value"),
            ),
            (
                MessageType::TaskFailed,
                Some("session-3".into()),
                serde_json::to_value(TaskFailed {
                    error_code: ErrorCode::Timeout,
                    error_message: "late".into(),
                    error_details: Some(ErrorDetails {
                        phase: None,
                        step: Some(2),
                        last_checkpoint: None,
                        recoverable: false,
                    }),
                    partial_outputs: Some(json!({"n": 2})),
                    artifacts: Vec::new(),
                    execution_summary: Some(summary),
                })
                .expect("value"),
            ),
            (
                MessageType::TaskFailed,
                None,
                serde_json::to_value(TaskFailed {
                    error_code: ErrorCode::InternalError,
                    error_message: "stopped".into(),
                    error_details: None,
                    partial_outputs: None,
                    artifacts: Vec::new(),
                    execution_summary: None,
                })
                .expect("value"),
            ),
        ]
    }

    /// The typed answer writes what the envelope of its payload wrote
    /// (the host's answers before they were typed), byte for byte, and
    /// reads back into the same text.
    #[test]
    fn an_answer_is_written_as_its_envelope_was_and_reads_back_the_same() {
        for (kind, session, payload) in answers() {
            let envelope = Envelope::new(kind, session, payload).expect("envelope");
            let before = serde_json::to_string(&serde_json::to_value(&envelope).expect("value"))
                .expect("text");
            let answer: Answer = serde_json::from_str(&before).expect("reads");
            assert_eq!(answer.kind_name(), kind.as_str());
            assert_eq!(answer.message_id(), Some(envelope.message_id.as_str()));
            assert_eq!(answer.to_string(), before);
            let again: Answer = serde_json::from_str(&answer.to_string()).expect("again");
            assert_eq!(again, answer);
        }
    }

    /// The seeds' answers (the valid fixtures of `schemas/fixtures/hcp`)
    /// read as typed answers and write back as the same JSON, and the
    /// answers this module writes are valid HCP messages.
    #[test]
    fn the_seeds_answers_read_and_write_back_the_same() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/fixtures/hcp");
        let mut read = 0;
        for kind in [
            "task_accepted",
            "task_rejected",
            "task_completed",
            "task_failed",
        ] {
            let dir = root.join(kind).join("valid");
            for entry in std::fs::read_dir(&dir).expect("fixtures") {
                let path = entry.expect("entry").path();
                let text = std::fs::read_to_string(&path).expect("read");
                let value: Value = serde_json::from_str(&text).expect("JSON");
                let answer: Answer = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(answer.kind_name(), kind, "{}", path.display());
                let written = answer.to_value().expect("value");
                assert_eq!(written, value, "{}", path.display());
                Envelope::parse(&written).expect("a valid HCP message");
                read += 1;
            }
        }
        assert!(read >= 5, "{read} fixtures");
    }

    #[test]
    fn a_job_status_reads_and_writes_in_its_order_with_its_result() {
        let text = r#"{"job_id":"task-1","status":"failed","service":"hcp","updated_at":"2026-01-01T00:00:00Z","message":"done","result":{"hcp_version":"1.0","message_id":"m","timestamp":"t","session_id":null,"type":"task_rejected","payload":{"reason_code":"forbidden","reason_message":"no"}}}"#;
        let answer: Answer = serde_json::from_str(text).expect("reads");
        let Answer::Waiting(status) = &answer else {
            panic!("not a job_status: {answer:?}");
        };
        assert_eq!(status.status, JobState::Failed);
        assert_eq!(
            status.result.as_deref().and_then(Answer::reject_reason),
            Some(RejectReason::Forbidden)
        );
        assert_eq!(answer.kind_name(), "job_status");
        assert_eq!(answer.to_string(), text);
    }

    #[test]
    fn what_is_not_an_answer_does_not_read_as_one() {
        for bad in [
            json!({"hcp_version": "1.0", "message_id": "m", "timestamp": "t", "session_id": null,
                   "type": "task_submit", "payload": {}}),
            json!({"hcp_version": "1.0", "message_id": "m", "timestamp": "t", "session_id": null,
                   "type": "task_completed", "payload": {"outputs": {}, "extra": 1}}),
            json!({"type": "task_completed"}),
            json!(1),
            json!({"job_id": "x"}),
        ] {
            assert!(Answer::from_value(bad.clone()).is_err(), "read {bad}");
        }
    }
}
