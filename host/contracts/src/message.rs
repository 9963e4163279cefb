//! HCP messages (seeds 000 and 001): the envelope and the L3/L4 payloads.
//!
//! Incoming messages are checked against the envelope schema, then the
//! payload schema of their `type`, then semantically (semver ranges, ISO 8601
//! durations, caller-supplied schemas), and every problem is reported with its
//! JSON pointer. Outgoing messages are built from typed payloads and always
//! carry a fresh `message_id` and an RFC 3339 `timestamp`.

use crate::duration::IsoDuration;
use crate::levels::{DataClass, RiskLevel};
use crate::problem::Problem;
use crate::schema::{self, SchemaId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The protocol version this host speaks.
pub const HCP_VERSION: &str = "1.0";

/// Message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    /// Caller → callee: run a task.
    TaskSubmit,
    /// The gate admitted the task.
    TaskAccepted,
    /// The gate refused the task.
    TaskRejected,
    /// The task finished.
    TaskCompleted,
    /// The task failed.
    TaskFailed,
}

impl MessageType {
    /// The wire name, e.g. `task_submit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TaskSubmit => "task_submit",
            Self::TaskAccepted => "task_accepted",
            Self::TaskRejected => "task_rejected",
            Self::TaskCompleted => "task_completed",
            Self::TaskFailed => "task_failed",
        }
    }

    fn payload_schema(self) -> SchemaId {
        match self {
            Self::TaskSubmit => SchemaId::TaskSubmit,
            Self::TaskAccepted => SchemaId::TaskAccepted,
            Self::TaskRejected => SchemaId::TaskRejected,
            Self::TaskCompleted => SchemaId::TaskCompleted,
            Self::TaskFailed => SchemaId::TaskFailed,
        }
    }
}

/// An HCP message with its payload still as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// `1.0`.
    pub hcp_version: String,
    /// Sender-chosen identifier.
    pub message_id: String,
    /// When it was sent, as the sender wrote it.
    pub timestamp: String,
    /// `null` before acceptance.
    pub session_id: Option<String>,
    /// The message type.
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// The payload.
    pub payload: Value,
}

impl Envelope {
    /// A new outgoing message: fresh id, current time.
    ///
    /// # Errors
    ///
    /// A payload that does not serialize (never for this crate's types).
    pub fn new(
        kind: MessageType,
        session_id: Option<String>,
        payload: impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            hcp_version: HCP_VERSION.to_owned(),
            message_id: format!("msg-{}", uuid::Uuid::now_v7()),
            timestamp: now_rfc3339(),
            session_id,
            kind,
            payload: serde_json::to_value(payload)?,
        })
    }

    /// Checks `value` against the envelope schema and its type's payload
    /// schema.
    ///
    /// # Errors
    ///
    /// Every problem, with pointers into the whole message.
    pub fn parse(value: &Value) -> Result<Self, Vec<Problem>> {
        SchemaId::Envelope.validate(value, "")?;
        // Read from the message itself, not a copy of it.
        let envelope =
            Envelope::deserialize(value).map_err(|e| vec![Problem::new("", e.to_string())])?;
        envelope
            .kind
            .payload_schema()
            .validate(&envelope.payload, "/payload")?;
        Ok(envelope)
    }

    /// The payload as `T`.
    ///
    /// # Errors
    ///
    /// A payload of another shape.
    pub fn payload_as<T: for<'de> Deserialize<'de>>(&self) -> Result<T, Vec<Problem>> {
        // Read from the payload itself, not a copy of it.
        T::deserialize(&self.payload).map_err(|e| vec![Problem::new("/payload", e.to_string())])
    }
}

/// Timestamps of messages (see [`crate::timestamp`]), here too, beside
/// the messages that carry them.
pub use crate::timestamp::{now_rfc3339, rfc3339};

/// `task_submit` payload (seed 001).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSubmit {
    /// Capability name.
    pub capability: String,
    /// Semver range of acceptable versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_version: Option<String>,
    /// Caller's identifier.
    pub caller_id: String,
    /// Natural-language goal.
    pub intent: String,
    /// Inputs for the capability's `input_schema`.
    pub inputs: Value,
    /// Execution constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<TaskConstraints>,
    /// What the caller expects back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_output: Option<ExpectedOutput>,
    /// Free-form context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Resume a failed task from a checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
}

/// `task_submit.constraints`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConstraints {
    /// ISO 8601 duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<String>,
    /// Lowest acceptable confidence, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_threshold: Option<f64>,
    /// Sensitivity of the data involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_classification: Option<DataClass>,
    /// Relative priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
}

/// `task_submit.constraints.priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Low.
    Low,
    /// Normal.
    Normal,
    /// High.
    High,
    /// Urgent.
    Urgent,
}

/// `task_submit.expected_output`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedOutput {
    /// Named format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Fields the outputs must contain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_fields: Vec<String>,
    /// Schema the outputs must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// `task_submit.resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resume {
    /// Session of the failed task.
    pub session_id: String,
    /// Its checkpoint to resume from.
    pub checkpoint: String,
}

/// A `task_submit` whose values are parsed and checked.
#[derive(Debug, Clone)]
pub struct CheckedSubmit {
    /// The payload as sent.
    pub submit: TaskSubmit,
    /// Parsed `capability_version` (`*` when absent).
    pub version_req: semver::VersionReq,
    /// Parsed `constraints.max_duration`.
    pub max_duration: Option<Duration>,
    /// Compiled `expected_output.schema`.
    pub expected_schema: Option<std::sync::Arc<jsonschema::Validator>>,
}

impl TaskSubmit {
    /// Parses the semver range, the duration and the expected-output schema.
    ///
    /// # Errors
    ///
    /// Every problem, with pointers under `/payload`.
    pub fn check(self) -> Result<CheckedSubmit, Vec<Problem>> {
        let mut problems = Vec::new();
        let version_req = match &self.capability_version {
            None => semver::VersionReq::STAR,
            Some(text) => semver::VersionReq::parse(text).unwrap_or_else(|e| {
                problems.push(Problem::new(
                    "/payload/capability_version",
                    format!("{text:?} is not a semver range (e.g. \"1.x\", \">=2.0.0\"): {e}"),
                ));
                semver::VersionReq::STAR
            }),
        };
        let max_duration = self
            .constraints
            .as_ref()
            .and_then(|c| c.max_duration.as_deref())
            .and_then(|text| match IsoDuration::parse(text) {
                Ok(d) if d.get().is_zero() => {
                    problems.push(Problem::new(
                        "/payload/constraints/max_duration",
                        "must be longer than zero",
                    ));
                    None
                }
                Ok(d) => Some(d.get()),
                Err(e) => {
                    problems.push(Problem::new("/payload/constraints/max_duration", e));
                    None
                }
            });
        let expected_schema = self
            .expected_output
            .as_ref()
            .and_then(|e| e.schema.as_ref())
            .and_then(|s| match schema::compile_user_cached(s) {
                Ok(v) => Some(v),
                Err(e) => {
                    problems.push(Problem::new(
                        "/payload/expected_output/schema",
                        e.to_string(),
                    ));
                    None
                }
            });
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(CheckedSubmit {
            submit: self,
            version_req,
            max_duration,
            expected_schema,
        })
    }
}

/// `task_accepted` payload (seed 000).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskAccepted {
    /// Opaque token of the session.
    pub session_token: String,
    /// Approved risk level.
    pub risk_level: RiskLevel,
    /// Approved data classification.
    pub data_classification: DataClass,
    /// The envelope the session runs under.
    pub safety_envelope: Value,
    /// Approved operational constraints.
    pub constraints: Value,
    /// When the token was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<String>,
    /// When the token expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// `task_rejected` payload (seed 000).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRejected {
    /// Why.
    pub reason_code: RejectReason,
    /// Explanation.
    pub reason_message: String,
    /// The assessed level, when assessment ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assessed_risk_level: Option<RiskLevel>,
    /// How to make the task acceptable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

/// `task_rejected.reason_code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// The caller is not authenticated.
    Unauthorized,
    /// The caller may not invoke this capability.
    Forbidden,
    /// The inputs or the message are malformed.
    InvalidInput,
    /// The assessed risk exceeds what the caller or capability allows.
    RiskTooHigh,
    /// An operator rejected the task.
    ApprovalRejected,
    /// Nobody decided before the approval expired.
    ApprovalExpired,
    /// The equipment or capacity is not available.
    ResourceUnavailable,
    /// No installed capability matches.
    CapabilityNotFound,
    /// The host failed.
    InternalError,
    /// The caller submits faster, or has had more bytes recorded in a
    /// day, than `budgets.json` `submissions` allows; nothing of the
    /// submission was recorded.
    RateLimited,
}

/// `task_completed` payload (seed 001).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskCompleted {
    /// Structured results.
    pub outputs: Value,
    /// Files produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ArtifactRef>,
    /// Measured summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_summary: Option<ExecutionSummary>,
}

/// An artifact, referenced by URI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRef {
    /// Name.
    pub name: String,
    /// MIME type.
    #[serde(rename = "type")]
    pub mime_type: String,
    /// Where to fetch it.
    pub uri: String,
    /// Size.
    pub size_bytes: u64,
    /// `sha256:<hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

/// `execution_summary`: measured, never invented.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSummary {
    /// Wall time, ISO 8601.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Host calls executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_executed: Option<u64>,
    /// Checkpoints saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints_created: Option<u64>,
    /// Denials, envelope events, timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_events: Option<Vec<String>>,
    /// Conditions that did not stop the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

/// `task_failed` payload (seed 001).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFailed {
    /// Standard error code.
    pub error_code: ErrorCode,
    /// Explanation.
    pub error_message: String,
    /// Where it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_details: Option<ErrorDetails>,
    /// Results before the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_outputs: Option<Value>,
    /// Artifacts before the failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ArtifactRef>,
    /// Measured summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_summary: Option<ExecutionSummary>,
}

/// Standard L4 error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Error during execution.
    ExecutionError,
    /// Past `max_duration`.
    Timeout,
    /// Would violate the safety envelope.
    SafetyViolation,
    /// A resource is unavailable.
    ResourceUnavailable,
    /// The callee failed internally.
    InternalError,
    /// Bad input found during execution.
    InputError,
}

impl ErrorCode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExecutionError => "execution_error",
            Self::Timeout => "timeout",
            Self::SafetyViolation => "safety_violation",
            Self::ResourceUnavailable => "resource_unavailable",
            Self::InternalError => "internal_error",
            Self::InputError => "input_error",
        }
    }
}

/// `task_failed.error_details`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetails {
    /// Phase that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Step that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// Last checkpoint saved, if any.
    #[serde(default)]
    pub last_checkpoint: Option<String>,
    /// Whether a resubmission may succeed.
    #[serde(default)]
    pub recoverable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payload_problems_point_into_the_payload() {
        let msg = json!({
            "hcp_version": "1.0", "message_id": "m", "timestamp": "...",
            "session_id": null, "type": "task_submit",
            "payload": {"capability": "x", "caller_id": "c", "intent": "i", "inputs": {}, "colour": 1}
        });
        let problems = Envelope::parse(&msg).expect_err("accepted an unknown field");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].pointer, "/payload");
        assert!(
            problems[0].message.contains("colour"),
            "{}",
            problems[0].message
        );
    }

    #[test]
    fn check_reports_every_bad_value() {
        let submit = TaskSubmit {
            capability: "x".into(),
            capability_version: Some("one".into()),
            caller_id: "c".into(),
            intent: "i".into(),
            inputs: json!({}),
            constraints: Some(TaskConstraints {
                max_duration: Some("10 minutes".into()),
                ..TaskConstraints::default()
            }),
            expected_output: Some(ExpectedOutput {
                schema: Some(json!({"type": 7})),
                ..ExpectedOutput::default()
            }),
            context: None,
            resume: None,
        };
        let problems = submit.check().expect_err("accepted");
        let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(
            pointers,
            [
                "/payload/capability_version",
                "/payload/constraints/max_duration",
                "/payload/expected_output/schema"
            ]
        );
    }

    #[test]
    fn semver_ranges_of_the_seed_parse() {
        for (range, version, matches) in [
            ("1.x", "1.4.2", true),
            ("1.x", "2.0.0", false),
            (">=2.0.0", "2.1.0", true),
            (">=2.0.0", "1.9.9", false),
        ] {
            let req = semver::VersionReq::parse(range).expect("range");
            let v = semver::Version::parse(version).expect("version");
            assert_eq!(req.matches(&v), matches, "{range} vs {version}");
        }
    }
}
