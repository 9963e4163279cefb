//! The gate's decisions as receipts record them, and as replay re-derives
//! them: admission, an operator's approval, an approval's expiry, and a
//! session refused for its token.
//!
//! Each decision input is RFC 8785 canonical JSON holding what the decision
//! depended on, so that [`decide`] can take it again under a policy
//! snapshot:
//!
//! - `gate.admission`: the caller (authenticated by its transport or
//!   credential; credentials are never recorded), the `task_submit`
//!   payload, the capability's manifest, the gate's clock and the equipment
//!   in use; or, for a task the host refused before the policy's gate (no
//!   capability matched, inputs off the `input_schema`, a resume that
//!   cannot be honoured), that refusal as a `host_check` fact. What no
//!   decision reads is bounded ([`super::BoundedText`]): the payload of a
//!   large submission the host refused by its own check, and a large
//!   free-form `context`.
//! - `gate.approval`: the operator, the admission, the declaration, and
//!   the operator's decision (a fact: replay checks that the policy let
//!   this operator decide).
//! - `gate.expiry`: when the approval expired and when the host noticed.
//! - `session.token`: the session token did not verify when the task was
//!   about to run (a fact).
//! - `gate.abandoned`: a host that stopped before acknowledging a task's
//!   AMQP delivery fails its copy at its next start, without running or
//!   answering it (the broker delivers the message again); the fact is the
//!   transport and why.

use super::bound::BoundedText;
use super::error::{InputError, read};
use super::verdict::Decision;
use crate::PolicySet;
use crate::gate::{Admission, AdmissionRequest, EquipmentState};
use hcp_contracts::ReasonCode;
use hcp_contracts::manifest::{Declaration, ManifestDoc};
use hcp_contracts::message::{RejectReason, TaskSubmit};
use hcp_receipts::Verdict;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `call` and `kind` of an admission receipt.
pub const CALL_ADMISSION: &str = "gate.admission";
/// `call` and `kind` of an operator's decision.
pub const CALL_APPROVAL: &str = "gate.approval";
/// `call` and `kind` of an approval that expired.
pub const CALL_EXPIRY: &str = "gate.expiry";
/// `call` and `kind` of a session refused because its token did not verify.
pub const CALL_SESSION_TOKEN: &str = "session.token";
/// `call` and `kind` of a task copy a host abandoned (its delivery was
/// never acknowledged).
pub const CALL_ABANDONED: &str = "gate.abandoned";

/// The receipt reason code of a `task_rejected` reason.
pub fn gate_reason(code: RejectReason) -> &'static str {
    code.verdict().as_str()
}

/// A refusal by the host's own checks, before or beside the policy's gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCheck {
    /// What the caller was told.
    pub message: String,
    /// `task_rejected.reason_code`.
    pub reason_code: RejectReason,
}

/// The decision input of `gate.admission`. The host renders it with the
/// manifest left out (`M = ()`) and the installed manifest's canonical
/// form put in its place ([`hcp_contracts::jcs::Canonical::replacing`]):
/// the same bytes as with the manifest (`M = ManifestDoc`), without
/// copying and rendering the whole manifest again for every task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionInput<M = ManifestDoc> {
    /// The gate's clock (RFC 3339).
    pub at: String,
    /// The authenticated caller.
    pub caller: String,
    /// Resources held by other sessions when the gate decided.
    pub equipment_busy: Vec<String>,
    /// The host's own refusal, if it refused before the policy decided.
    pub host_check: Option<HostCheck>,
    /// [`CALL_ADMISSION`].
    pub kind: String,
    /// The manifest of the capability selected (none when none matched).
    pub manifest: Option<M>,
    /// The `task_submit` payload (`null` when `submit_bounded` stands for
    /// it; without its `context` when `context_bounded` stands for that).
    pub submit: Value,
    /// A payload the host refused by its own check (`host_check`), whose
    /// canonical form is larger than [`super::ARGS_PREFIX_BYTES`]: its hash,
    /// size and prefix, in place of `submit`. Such a refusal reads nothing
    /// of the payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_bounded: Option<BoundedText>,
    /// The payload's free-form `context`, when its canonical form is
    /// larger than [`super::ARGS_PREFIX_BYTES`]: its hash, size and prefix,
    /// and `submit` without it. No decision reads `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_bounded: Option<BoundedText>,
    /// The transport the task came by, where it is not the message's own
    /// (`mcp/stdio`, `mcp/http`: an MCP `tools/call` the host made the
    /// `task_submit` of). No decision reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
}

/// The decision input of `gate.approval`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalInput {
    /// What the gate admitted.
    pub admission: Admission,
    /// The operator's decision.
    pub approved: bool,
    /// When (RFC 3339).
    pub at: String,
    /// The capability's declaration.
    pub declaration: Declaration,
    /// [`CALL_APPROVAL`].
    pub kind: String,
    /// The operator (authenticated).
    pub operator: String,
}

/// The decision input of `gate.expiry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpiryInput {
    /// When the host noticed (RFC 3339, UTC, as the store writes it).
    pub at: String,
    /// When the approval expired (same form).
    pub expires_at: String,
    /// [`CALL_EXPIRY`].
    pub kind: String,
}

/// The decision input of `session.token`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenInput {
    /// Why the token did not verify.
    pub error: String,
    /// [`CALL_SESSION_TOKEN`].
    pub kind: String,
    /// The session.
    pub session_id: String,
}

/// The decision input of `gate.abandoned`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbandonInput {
    /// When the host abandoned it (RFC 3339).
    pub at: String,
    /// [`CALL_ABANDONED`].
    pub kind: String,
    /// What the host found, e.g. "the AMQP delivery was not acknowledged".
    pub reason: String,
    /// The transport the task came by, e.g. `amqp`.
    pub transport: String,
}

fn allow() -> Decision {
    Decision::new(Verdict::Allow, ReasonCode::Allow, String::new())
}

fn deny(code: ReasonCode, message: String) -> Decision {
    Decision::deny(code, message)
}

/// Decides an admission from its input under `policy`: the policy's gate
/// ([`PolicySet::admit_authenticated`]), unless the host refused first.
pub fn decide_admission(policy: &PolicySet, input: &AdmissionInput) -> Decision {
    if let Some(check) = &input.host_check {
        return deny(check.reason_code.verdict(), check.message.clone());
    }
    if input.submit_bounded.is_some() {
        // The host bounds only a payload it refused by its own check.
        return deny(
            ReasonCode::FailClosedError,
            "the task_submit payload is recorded bounded, but no host check refused it".into(),
        );
    }
    let Some(caller) = policy.caller(&input.caller) else {
        return deny(
            ReasonCode::DenyIdentityUnauthorized,
            format!("caller {:?} is not in the policy", input.caller),
        );
    };
    let checked = match serde_json::from_value::<TaskSubmit>(input.submit.clone())
        .map_err(|e| e.to_string())
        .and_then(|s| s.check().map_err(|p| hcp_contracts::problem::list(&p)))
    {
        Ok(c) => c,
        Err(e) => return deny(ReasonCode::DenyArgsInvalid, e),
    };
    let Some(manifest) = &input.manifest else {
        return deny(
            ReasonCode::FailClosedError,
            "an admission decided by the policy names its manifest".into(),
        );
    };
    let now = match time::OffsetDateTime::parse(
        &input.at,
        &time::format_description::well_known::Rfc3339,
    ) {
        Ok(t) => t,
        Err(e) => return deny(ReasonCode::FailClosedError, format!("at: {e}")),
    };
    let equipment = EquipmentState::busy(input.equipment_busy.iter().cloned());
    let request = AdmissionRequest {
        submit: &checked.submit,
        credential: "",
        manifest,
        now,
        equipment: &equipment,
    };
    match policy.admit_authenticated(caller, &request) {
        Ok(_) => allow(),
        Err(r) => deny(r.reason_code.verdict(), r.reason_message),
    }
}

/// Decides an operator's decision from its input under `policy`: the
/// operator must be one the policy lets approve this task; then the verdict
/// is the operator's.
pub fn decide_approval(policy: &PolicySet, input: &ApprovalInput) -> Decision {
    let Some(operator) = policy.caller(&input.operator) else {
        return deny(
            ReasonCode::DenyIdentityUnauthorized,
            format!("operator {:?} is not in the policy", input.operator),
        );
    };
    if let Err(r) = policy.authorize_approval_by(operator, &input.admission, &input.declaration) {
        return deny(r.reason_code.verdict(), r.reason_message);
    }
    if input.approved {
        allow()
    } else {
        deny(
            ReasonCode::DenyApprovalRejected,
            format!("operator {} rejected the task", input.operator),
        )
    }
}

/// An approval expired when the host noticed at or after its expiry.
pub fn decide_expiry(input: &ExpiryInput) -> Decision {
    // RFC 3339 UTC with fixed precision compares as text (as the host does).
    if input.at >= input.expires_at {
        deny(
            ReasonCode::DenyApprovalExpired,
            format!("the approval expired at {}", input.expires_at),
        )
    } else {
        allow()
    }
}

/// A session whose token did not verify is refused.
pub fn decide_token(input: &TokenInput) -> Decision {
    deny(
        ReasonCode::DelegationInvalid,
        format!("session {}: {}", input.session_id, input.error),
    )
}

/// A task copy the host abandoned never runs: fail closed.
pub fn decide_abandoned(input: &AbandonInput) -> Decision {
    deny(
        ReasonCode::FailClosedError,
        format!("abandoned ({}): {}", input.transport, input.reason),
    )
}

/// Decides a gate input of any kind above; `None` for other kinds.
///
/// # Errors
///
/// The input does not read as its kind.
pub fn decide(
    policy: &PolicySet,
    kind: &str,
    input: &Value,
) -> Option<Result<Decision, InputError>> {
    Some(match kind {
        CALL_ADMISSION => read(kind, input).map(|i| decide_admission(policy, &i)),
        CALL_APPROVAL => read(kind, input).map(|i| decide_approval(policy, &i)),
        CALL_EXPIRY => read(kind, input).map(|i| decide_expiry(&i)),
        CALL_SESSION_TOKEN => read(kind, input).map(|i| decide_token(&i)),
        CALL_ABANDONED => read(kind, input).map(|i| decide_abandoned(&i)),
        _ => return None,
    })
}
