//! What the gate takes and gives: the request, the admission, the refusal.

use crate::assess::Assessment;
use crate::budget::Budgets;
use crate::envelope::EffectiveEnvelope;
use crate::files::CallerKind;
use crate::ids::{CallerId, CapabilityName};
use hcp_contracts::manifest::ManifestDoc;
use hcp_contracts::message::{RejectReason, TaskRejected, TaskSubmit};
use hcp_contracts::{DataClass, RiskLevel};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use time::OffsetDateTime;

/// The step of the gate that refused a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Who is calling.
    Authentication,
    /// May the caller invoke (or approve) the capability at all.
    Access,
    /// Assessing risk from inputs and context.
    Assessment,
    /// Assessed level against the ceiling and the caller's limit.
    Risk,
    /// The task's data classification.
    DataClassification,
    /// Cedar.
    Authorization,
    /// Equipment in use.
    Resources,
    /// Merging the safety envelope.
    Envelope,
}

/// A refusal: exactly the fields of `task_rejected`, plus the stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    /// Where the gate refused.
    pub stage: Stage,
    /// `task_rejected.reason_code`.
    pub reason_code: RejectReason,
    /// `task_rejected.reason_message`.
    pub reason_message: String,
    /// `task_rejected.assessed_risk_level`, once assessment ran.
    pub assessed_risk_level: Option<RiskLevel>,
    /// `task_rejected.suggestion`, when something in the task can change.
    pub suggestion: Option<String>,
}

impl Rejection {
    pub(crate) fn new(stage: Stage, reason_code: RejectReason, reason_message: String) -> Self {
        Self {
            stage,
            reason_code,
            reason_message,
            assessed_risk_level: None,
            suggestion: None,
        }
    }

    pub(crate) fn assessed(mut self, level: RiskLevel) -> Self {
        self.assessed_risk_level = Some(level);
        self
    }

    /// The `task_rejected` payload.
    pub fn payload(&self) -> TaskRejected {
        TaskRejected {
            reason_code: self.reason_code,
            reason_message: self.reason_message.clone(),
            assessed_risk_level: self.assessed_risk_level,
            suggestion: self.suggestion.clone(),
        }
    }
}

impl From<Rejection> for TaskRejected {
    fn from(r: Rejection) -> Self {
        r.payload()
    }
}

/// Which resources are in use right now; the host knows, the gate asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EquipmentState {
    busy: BTreeSet<String>,
}

impl EquipmentState {
    /// Nothing in use.
    pub fn idle() -> Self {
        Self::default()
    }

    /// These resource types in use.
    pub fn busy<S: Into<String>>(resources: impl IntoIterator<Item = S>) -> Self {
        Self {
            busy: resources.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether `resource` is in use.
    pub fn is_busy(&self, resource: &str) -> bool {
        self.busy.contains(resource)
    }
}

/// Everything the gate decides on. The host validated the message and the
/// inputs against the declaration's `input_schema` already.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequest<'a> {
    /// The `task_submit` payload.
    pub submit: &'a TaskSubmit,
    /// The bearer token the caller presented.
    pub credential: &'a str,
    /// The capability's manifest (declaration and default envelope).
    pub manifest: &'a ManifestDoc,
    /// The time of the decision.
    pub now: OffsetDateTime,
    /// Equipment in use.
    pub equipment: &'a EquipmentState,
}

/// An admitted task: what the session runs under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admission {
    /// The authenticated caller.
    pub caller: CallerId,
    /// Its kind.
    pub caller_kind: CallerKind,
    /// The capability.
    pub capability: CapabilityName,
    /// The assessed (and approved) risk level.
    pub risk_level: RiskLevel,
    /// The task's data classification (the caller's claim, default T1).
    pub data_classification: DataClass,
    /// The task waits for an operator's approval before it runs.
    pub approval_required: bool,
    /// Busy resources whose policy queues: the host runs the task once they
    /// are free.
    pub queued_for: Vec<String>,
    /// The safety envelope the session runs under.
    pub envelope: EffectiveEnvelope,
    /// What the task may spend.
    pub budgets: Budgets,
    /// How the level was reached.
    pub assessment: Assessment,
    /// The Cedar policies that permitted it.
    pub authorized_by: Vec<String>,
    /// Each decision, in order, for the log and the receipt.
    pub reasons: Vec<String>,
    /// The policy set's hash.
    pub policy_hash: String,
}
