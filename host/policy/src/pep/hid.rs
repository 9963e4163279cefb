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
//!   takes effect. A decision the policy does not let this operator make
//!   does not take effect: not an operator (`DENY_IDENTITY_UNAUTHORIZED`),
//!   or refused by the question a task approval asks (the operator lists
//!   the proposing task's capability, the task's risk and data are within
//!   the operator's limits, Cedar `approve`, whose shipped policy forbids
//!   deciding on one's own task: `DENY_FORBIDDEN` or Cedar's code); nor
//!   does an approval of a credential-like text without its
//!   acknowledgement (`DENY_ARGS_INVALID`).
//! - `hid.execution`: the approved action was executed or sent and failed
//!   (`ALLOW`: EXECUTE mode, armed), or not executed (`DENY_TOOL_NOT_FOUND`
//!   outside EXECUTE mode: the device is not part of the surface then;
//!   `DENY_RESOURCE_UNAVAILABLE` in EXECUTE mode while not armed or
//!   halted, or the proposal was made in another mode). Parents: the
//!   decision and the proposal.
//!
//! A third, `hid.mode`, records an operator's mode change (no parents).
//! Entering EXECUTE (arming, re-arming) asks, for every installed
//! capability that holds the HID device grant, the question of a task
//! approval at that capability's risk ceiling (`ALLOW`, or the refusal's
//! code); OBSERVE and SUGGEST execute nothing, and any operator may choose
//! them (leaving EXECUTE is never blocked).

use super::error::{InputError, read};
use super::verdict::Decision;
use crate::{AuthzContext, PolicySet};
use hcp_contracts::ReasonCode;
use hcp_contracts::manifest::Declaration;
use hcp_contracts::{DataClass, RiskLevel};
use hcp_receipts::Verdict;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// `call` and `kind` of an operator's decision on a proposal.
pub const CALL_HID_DECISION: &str = "hid.decision";
/// `call` and `kind` of an approved proposal's end.
pub const CALL_HID_EXECUTION: &str = "hid.execution";
/// `call` and `kind` of an operator's mode change.
pub const CALL_HID_MODE: &str = "hid.mode";
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

/// What the policy's `approve` question looks at: a capability, and the
/// facts of the task (or, for a mode change, of the most its tasks may be).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HidAuthzFacts {
    /// The capability's declaration.
    pub declaration: Declaration,
    /// The task's risk level (a mode change: the capability's ceiling).
    pub risk: RiskLevel,
    /// The task's data classification (a mode change: T1).
    pub data: DataClass,
    /// Whether an unattended-hours window applied to the task.
    pub unattended: bool,
    /// The caller that submitted the task (a mode change: empty).
    pub submitter: String,
}

/// The decision input of `hid.decision`.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The proposing task's facts (operator decisions; `None` for a
    /// withdrawal, and an operator decision without them is refused).
    pub task: Option<HidAuthzFacts>,
}

/// The decision input of `hid.mode`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HidModeInput {
    /// When (RFC 3339).
    pub at: String,
    /// Every installed capability that holds the HID device grant, at its
    /// risk ceiling.
    pub capabilities: Vec<HidAuthzFacts>,
    /// The mode before.
    pub from: String,
    /// [`CALL_HID_MODE`].
    pub kind: String,
    /// The operator (authenticated).
    pub operator: String,
    /// The mode asked for.
    pub to: String,
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
    /// The mode the proposal was made in (absent in receipts recorded
    /// before it was: read as the mode at the approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_in: Option<String>,
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

fn decision(verdict: Verdict, code: ReasonCode, message: String) -> Decision {
    Decision::new(verdict, code, message)
}

/// Decides an operator's decision on a proposal under `policy`.
pub fn decide_decision(policy: &PolicySet, input: &HidDecisionInput) -> Decision {
    let deny = |code, message| decision(Verdict::Deny, code, message);
    if input.decision == HidVerdict::Withdraw {
        return if input.operator == HOST_OPERATOR {
            deny(
                ReasonCode::DelegationInvalid,
                format!("proposal {} withdrawn: its session ended", input.proposal),
            )
        } else {
            deny(
                ReasonCode::DenyIdentityUnauthorized,
                format!("only the host withdraws proposals, not {}", input.operator),
            )
        };
    }
    let Some(operator) = policy.caller(&input.operator).filter(|c| c.is_operator()) else {
        return deny(
            ReasonCode::DenyIdentityUnauthorized,
            format!("{:?} is not an operator of the policy", input.operator),
        );
    };
    let Some(task) = &input.task else {
        return deny(
            ReasonCode::DenyIdentityUnauthorized,
            format!(
                "proposal {}: the facts of its task are not known, so no operator may decide it",
                input.proposal
            ),
        );
    };
    if let Err(code) = authorize(policy, operator, task) {
        return code;
    }
    match input.decision {
        HidVerdict::Approve if input.credential_warning && !input.credential_acknowledged => deny(
            ReasonCode::DenyArgsInvalid,
            format!(
                "proposal {} carries credential_warning and the credential was not acknowledged",
                input.proposal
            ),
        ),
        HidVerdict::Approve => decision(Verdict::Allow, ReasonCode::Allow, String::new()),
        _ => deny(
            ReasonCode::DenyApprovalRejected,
            format!(
                "operator {} rejected proposal {}",
                input.operator, input.proposal
            ),
        ),
    }
}

/// The question a task approval asks, on `facts`.
fn authorize(
    policy: &PolicySet,
    operator: &crate::Caller,
    facts: &HidAuthzFacts,
) -> Result<(), Decision> {
    let busy = BTreeSet::new();
    let context = AuthzContext {
        risk: facts.risk,
        data: facts.data,
        unattended: facts.unattended,
        busy_resources: &busy,
        submitter: &facts.submitter,
    };
    policy
        .authorize_approval_in(operator, &facts.declaration, &context)
        .map_err(|r| decision(Verdict::Deny, r.reason_code.verdict(), r.reason_message))
}

/// Decides an operator's mode change under `policy`: any operator may
/// choose OBSERVE or SUGGEST; EXECUTE needs the operator to be allowed to
/// approve the tasks of every capability that holds the HID device grant,
/// at its risk ceiling, and at least one such capability installed.
pub fn decide_mode(policy: &PolicySet, input: &HidModeInput) -> Decision {
    let deny = |code, message| decision(Verdict::Deny, code, message);
    let Some(operator) = policy.caller(&input.operator).filter(|c| c.is_operator()) else {
        return deny(
            ReasonCode::DenyIdentityUnauthorized,
            format!("{:?} is not an operator of the policy", input.operator),
        );
    };
    match input.to.as_str() {
        "OBSERVE" | "SUGGEST" => return decision(Verdict::Allow, ReasonCode::Allow, String::new()),
        "EXECUTE" => {}
        other => {
            return deny(
                ReasonCode::DenyArgsInvalid,
                format!("{other:?} is not a mode"),
            );
        }
    }
    if input.capabilities.is_empty() {
        return deny(
            ReasonCode::DenyResourceUnavailable,
            "no installed capability holds the HID device grant: there is nothing to arm EXECUTE for".into(),
        );
    }
    for facts in &input.capabilities {
        if let Err(refused) = authorize(policy, operator, facts) {
            return Decision {
                message: format!("arming EXECUTE: {}", refused.message),
                ..refused
            };
        }
    }
    decision(Verdict::Allow, ReasonCode::Allow, String::new())
}

/// Decides whether an approved proposal could be executed: in EXECUTE
/// mode, while armed.
pub fn decide_execution(input: &HidExecutionInput) -> Decision {
    if let Some(proposed) = &input.proposed_in
        && *proposed != input.mode
    {
        return decision(
            Verdict::Deny,
            ReasonCode::DenyToolNotFound,
            format!(
                "proposed in {proposed} mode, approved in {}: only proposals made in EXECUTE mode are executed",
                input.mode
            ),
        );
    }
    match (input.mode.as_str(), input.readiness) {
        ("EXECUTE", HidReadiness::Armed) => {
            decision(Verdict::Allow, ReasonCode::Allow, String::new())
        }
        ("EXECUTE", _) => decision(
            Verdict::Deny,
            ReasonCode::DenyResourceUnavailable,
            "HID execution is not armed".into(),
        ),
        (mode, _) => decision(
            Verdict::Deny,
            ReasonCode::DenyToolNotFound,
            format!("{mode} mode: proposals are not executed"),
        ),
    }
}

/// Decides an input of either kind above; `None` for other kinds.
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
        CALL_HID_DECISION => read(kind, input).map(|i| decide_decision(policy, &i)),
        CALL_HID_EXECUTION => read(kind, input).map(|i| decide_execution(&i)),
        CALL_HID_MODE => read(kind, input).map(|i| decide_mode(policy, &i)),
        _ => return None,
    })
}
