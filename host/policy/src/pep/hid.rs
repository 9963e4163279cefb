//! The HID mediator's decisions as receipts record them, and as replay
//! re-derives them: an operator's decision on a guest's proposal, and what
//! came of an approved one.
//!
//! A guest's `hid.propose` call is decided by the PEP like any host call;
//! its arguments name the proposal. The two receipts here follow from it
//! (their DAG parents):
//!
//! - `hid.decision`: an operator approved (`ALLOW`) or rejected
//!   (`DENY_APPROVAL_REJECTED`) the proposal, or the host withdrew it when
//!   its session ended (`DELEGATION_INVALID`). Recorded before the decision
//!   takes effect; a decision the policy does not let this operator make
//!   (`DENY_IDENTITY_UNAUTHORIZED`), or an approval of a credential-like
//!   text without its acknowledgement (`DENY_ARGS_INVALID`), does not take
//!   effect.
//! - `hid.execution`: the approved action was executed or sent and failed
//!   (`ALLOW`: EXECUTE mode, armed), or not executed (`DENY_TOOL_NOT_FOUND`
//!   outside EXECUTE mode: the device is not part of the surface then;
//!   `DENY_RESOURCE_UNAVAILABLE` in EXECUTE mode while not armed or
//!   halted). Parents: the decision and the proposal.

use super::decide::Decision;
use super::threat::Signals;
use crate::PolicySet;
use hcp_receipts::{Verdict, reason};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `call` and `kind` of an operator's decision on a proposal.
pub const CALL_HID_DECISION: &str = "hid.decision";
/// `call` and `kind` of an approved proposal's end.
pub const CALL_HID_EXECUTION: &str = "hid.execution";
/// The operator id of the host itself (a withdrawal).
pub const HOST_OPERATOR: &str = "host";

/// What was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HidVerdict {
    /// An operator approved.
    Approve,
    /// An operator rejected.
    Reject,
    /// The host withdrew the proposal: its session ended undecided.
    Withdraw,
}

/// The decision input of `hid.decision`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HidDecisionInput {
    /// When (RFC 3339).
    pub at: String,
    /// Whether the operator acknowledged the credential warning.
    pub credential_acknowledged: bool,
    /// Whether the proposal's text looks like a secret.
    pub credential_warning: bool,
    /// What was decided.
    pub decision: HidVerdict,
    /// [`CALL_HID_DECISION`].
    pub kind: String,
    /// The mediator's mode (`OBSERVE`, `SUGGEST`, `EXECUTE`).
    pub mode: String,
    /// The operator (authenticated), or [`HOST_OPERATOR`].
    pub operator: String,
    /// The proposal.
    pub proposal: String,
    /// The rejection's or withdrawal's reason.
    pub reason: Option<String>,
    /// The guest's session.
    pub session_id: String,
}

/// What came of an approved proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HidResult {
    /// The device carried it out.
    Executed,
    /// Sent (or about to be), and the device failed.
    Failed,
    /// Not executed.
    NotExecuted,
}

/// Whether actions could run when the approval took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HidReadiness {
    /// EXECUTE mode, armed.
    Armed,
    /// Not armed.
    Off,
    /// Halted by a fault.
    Halted,
}

/// The decision input of `hid.execution`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HidExecutionInput {
    /// `action_type` of the action.
    pub action_type: String,
    /// When it ended (RFC 3339).
    pub at: String,
    /// The execution's id, when one was made.
    pub execution_id: Option<String>,
    /// [`CALL_HID_EXECUTION`].
    pub kind: String,
    /// The mediator's mode at the approval.
    pub mode: String,
    /// Who approved.
    pub operator: String,
    /// The proposal.
    pub proposal: String,
    /// Whether actions could run.
    pub readiness: HidReadiness,
    /// The fault, or why nothing ran.
    pub reason: Option<String>,
    /// What came of it.
    pub result: HidResult,
    /// Whether the line reached the device (failures only).
    pub sent: Option<bool>,
    /// The guest's session.
    pub session_id: String,
}

fn decision(verdict: Verdict, code: &'static str, message: String) -> Decision {
    Decision {
        verdict,
        reason: code,
        message,
        signals: Signals::NONE,
    }
}

/// Decides an operator's decision on a proposal under `policy`.
pub fn decide_decision(policy: &PolicySet, input: &HidDecisionInput) -> Decision {
    let deny = |code, message| decision(Verdict::Deny, code, message);
    if input.decision == HidVerdict::Withdraw {
        return if input.operator == HOST_OPERATOR {
            deny(
                reason::DELEGATION_INVALID,
                format!("proposal {} withdrawn: its session ended", input.proposal),
            )
        } else {
            deny(
                reason::DENY_IDENTITY_UNAUTHORIZED,
                format!("only the host withdraws proposals, not {}", input.operator),
            )
        };
    }
    if !policy
        .caller(&input.operator)
        .is_some_and(crate::Caller::is_operator)
    {
        return deny(
            reason::DENY_IDENTITY_UNAUTHORIZED,
            format!("{:?} is not an operator of the policy", input.operator),
        );
    }
    match input.decision {
        HidVerdict::Approve if input.credential_warning && !input.credential_acknowledged => deny(
            reason::DENY_ARGS_INVALID,
            format!(
                "proposal {} carries credential_warning and the credential was not acknowledged",
                input.proposal
            ),
        ),
        HidVerdict::Approve => decision(Verdict::Allow, reason::ALLOW, String::new()),
        _ => deny(
            reason::DENY_APPROVAL_REJECTED,
            format!(
                "operator {} rejected proposal {}",
                input.operator, input.proposal
            ),
        ),
    }
}

/// Decides whether an approved proposal could be executed: in EXECUTE
/// mode, while armed.
pub fn decide_execution(input: &HidExecutionInput) -> Decision {
    match (input.mode.as_str(), input.readiness) {
        ("EXECUTE", HidReadiness::Armed) => decision(Verdict::Allow, reason::ALLOW, String::new()),
        ("EXECUTE", _) => decision(
            Verdict::Deny,
            reason::DENY_RESOURCE_UNAVAILABLE,
            "HID execution is not armed".into(),
        ),
        (mode, _) => decision(
            Verdict::Deny,
            reason::DENY_TOOL_NOT_FOUND,
            format!("{mode} mode: proposals are not executed"),
        ),
    }
}

/// Decides an input of either kind above; `None` for other kinds.
///
/// # Errors
///
/// The input does not read as its kind.
pub fn decide(policy: &PolicySet, kind: &str, input: &Value) -> Option<Result<Decision, String>> {
    fn read<T: serde::de::DeserializeOwned>(kind: &str, v: &Value) -> Result<T, String> {
        serde_json::from_value(v.clone()).map_err(|e| format!("{kind} input: {e}"))
    }
    Some(match kind {
        CALL_HID_DECISION => read(kind, input).map(|i| decide_decision(policy, &i)),
        CALL_HID_EXECUTION => read(kind, input).map(|i| decide_execution(&i)),
        _ => return None,
    })
}
