//! Reason codes, each spelt once.
//!
//! Two vocabularies, both documented:
//!
//! - [`ReasonCode`]: the code of a verdict of the policy enforcement point
//!   (seed 003: `ALLOW`, `DENY_TOOL_NOT_FOUND`, `BUDGET_EXCEEDED`,
//!   `DELEGATION_INVALID`, `THREAT_SIGNAL_DETECTED`, `FAIL_CLOSED_ERROR`,
//!   ...), as receipts record it. The host's own gate codes (`DENY_FORBIDDEN`,
//!   `DENY_RISK_TOO_HIGH`, ...) are of the same form.
//! - [`RejectReason`]: `task_rejected.reason_code` (seed 000,
//!   `schemas/hcp/task_rejected.payload.schema.json`: `unauthorized`,
//!   `forbidden`, `invalid_input`, ...), what a caller is told.
//!
//! [`RejectReason::verdict`] says which verdict code records a rejection.

use crate::message::RejectReason;
use serde::{Deserialize, Serialize};

/// The reason code of a verdict, as receipts record it. Its string
/// ([`ReasonCode::as_str`], and its serde form) is the documented one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReasonCode {
    /// The call was admissible.
    Allow,
    /// The tool or interface is not in the bounded surface.
    DenyToolNotFound,
    /// The arguments do not fit the pinned schema.
    DenyArgsInvalid,
    /// A budget ceiling would be crossed.
    BudgetExceeded,
    /// The session or delegation is expired, foreign or out of scope.
    DelegationInvalid,
    /// A safety envelope hard limit would be crossed.
    DenyEnvelopeHardLimit,
    /// The action is prohibited by the safety envelope.
    DenyProhibitedAction,
    /// A threat scanner flagged the call.
    ThreatSignalDetected,
    /// The identity may not act on the resource.
    DenyIdentityUnauthorized,
    /// The decision itself failed; the call is denied (fail closed).
    FailClosedError,
    /// The gate: the policy forbids the task (access list, data
    /// classification, a Cedar `forbid`), or the operator may not decide it.
    DenyForbidden,
    /// The gate: the assessed risk is above the capability's ceiling or the
    /// caller's limit.
    DenyRiskTooHigh,
    /// The gate: the equipment the task needs is not available.
    DenyResourceUnavailable,
    /// An operator rejected the task.
    DenyApprovalRejected,
    /// Nobody decided before the approval expired.
    DenyApprovalExpired,
}

impl ReasonCode {
    /// Every code.
    pub const ALL: [ReasonCode; 15] = [
        Self::Allow,
        Self::DenyToolNotFound,
        Self::DenyArgsInvalid,
        Self::BudgetExceeded,
        Self::DelegationInvalid,
        Self::DenyEnvelopeHardLimit,
        Self::DenyProhibitedAction,
        Self::ThreatSignalDetected,
        Self::DenyIdentityUnauthorized,
        Self::FailClosedError,
        Self::DenyForbidden,
        Self::DenyRiskTooHigh,
        Self::DenyResourceUnavailable,
        Self::DenyApprovalRejected,
        Self::DenyApprovalExpired,
    ];

    /// The documented string (`ALLOW`, `DENY_TOOL_NOT_FOUND`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "ALLOW",
            Self::DenyToolNotFound => "DENY_TOOL_NOT_FOUND",
            Self::DenyArgsInvalid => "DENY_ARGS_INVALID",
            Self::BudgetExceeded => "BUDGET_EXCEEDED",
            Self::DelegationInvalid => "DELEGATION_INVALID",
            Self::DenyEnvelopeHardLimit => "DENY_ENVELOPE_HARD_LIMIT",
            Self::DenyProhibitedAction => "DENY_PROHIBITED_ACTION",
            Self::ThreatSignalDetected => "THREAT_SIGNAL_DETECTED",
            Self::DenyIdentityUnauthorized => "DENY_IDENTITY_UNAUTHORIZED",
            Self::FailClosedError => "FAIL_CLOSED_ERROR",
            Self::DenyForbidden => "DENY_FORBIDDEN",
            Self::DenyRiskTooHigh => "DENY_RISK_TOO_HIGH",
            Self::DenyResourceUnavailable => "DENY_RESOURCE_UNAVAILABLE",
            Self::DenyApprovalRejected => "DENY_APPROVAL_REJECTED",
            Self::DenyApprovalExpired => "DENY_APPROVAL_EXPIRED",
        }
    }

    /// The code a string names, if it is one of these.
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == code)
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RejectReason {
    /// Every reason, in the schema's order.
    pub const ALL: [RejectReason; 10] = [
        Self::Unauthorized,
        Self::Forbidden,
        Self::InvalidInput,
        Self::RiskTooHigh,
        Self::ApprovalRejected,
        Self::ApprovalExpired,
        Self::ResourceUnavailable,
        Self::CapabilityNotFound,
        Self::InternalError,
        Self::RateLimited,
    ];

    /// The documented string (`unauthorized`, `invalid_input`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::InvalidInput => "invalid_input",
            Self::RiskTooHigh => "risk_too_high",
            Self::ApprovalRejected => "approval_rejected",
            Self::ApprovalExpired => "approval_expired",
            Self::ResourceUnavailable => "resource_unavailable",
            Self::CapabilityNotFound => "capability_not_found",
            Self::InternalError => "internal_error",
            Self::RateLimited => "rate_limited",
        }
    }

    /// The verdict code a receipt records for a task rejected for this
    /// reason.
    pub const fn verdict(self) -> ReasonCode {
        match self {
            Self::Unauthorized => ReasonCode::DenyIdentityUnauthorized,
            Self::Forbidden => ReasonCode::DenyForbidden,
            Self::InvalidInput => ReasonCode::DenyArgsInvalid,
            Self::RiskTooHigh => ReasonCode::DenyRiskTooHigh,
            Self::ApprovalRejected => ReasonCode::DenyApprovalRejected,
            Self::ApprovalExpired => ReasonCode::DenyApprovalExpired,
            Self::ResourceUnavailable => ReasonCode::DenyResourceUnavailable,
            Self::CapabilityNotFound => ReasonCode::DenyToolNotFound,
            Self::InternalError => ReasonCode::FailClosedError,
            Self::RateLimited => ReasonCode::BudgetExceeded,
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn verdict_codes_serialize_as_their_documented_strings() {
        for code in ReasonCode::ALL {
            assert_eq!(serde_json::to_value(code).ok(), Some(json!(code.as_str())));
            assert_eq!(ReasonCode::parse(code.as_str()), Some(code));
            let back: Option<ReasonCode> = serde_json::from_value(json!(code.as_str())).ok();
            assert_eq!(back, Some(code));
        }
        assert_eq!(ReasonCode::parse("allow"), None);
        // Seed 003 names these.
        for documented in [
            "BUDGET_EXCEEDED",
            "DENY_TOOL_NOT_FOUND",
            "FAIL_CLOSED_ERROR",
            "DELEGATION_INVALID",
            "THREAT_SIGNAL_DETECTED",
        ] {
            assert!(ReasonCode::parse(documented).is_some(), "{documented}");
        }
    }

    #[test]
    fn reject_reasons_are_the_schemas_enum() {
        let schema: serde_json::Value = serde_json::from_str(include_str!(
            "../../../schemas/hcp/task_rejected.payload.schema.json"
        ))
        .expect("schema");
        let documented: Vec<&str> = schema["properties"]["reason_code"]["enum"]
            .as_array()
            .expect("enum")
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect();
        let ours: Vec<&str> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(ours, documented);
        for r in RejectReason::ALL {
            assert_eq!(serde_json::to_value(r).ok(), Some(json!(r.as_str())));
        }
    }
}
