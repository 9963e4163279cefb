//! Stable reason codes of verdicts. A receipt may carry any code of the form
//! `[A-Z][A-Z0-9_]*` (at most 64 characters); these are the ones the host
//! uses, each the string of its [`ReasonCode`] (spelt once, in
//! `hcp-contracts`).

use hcp_contracts::ReasonCode;

/// The call was admissible.
pub const ALLOW: &str = ReasonCode::Allow.as_str();
/// The tool or interface is not in the bounded surface.
pub const DENY_TOOL_NOT_FOUND: &str = ReasonCode::DenyToolNotFound.as_str();
/// The arguments do not fit the pinned schema.
pub const DENY_ARGS_INVALID: &str = ReasonCode::DenyArgsInvalid.as_str();
/// A budget ceiling would be crossed.
pub const BUDGET_EXCEEDED: &str = ReasonCode::BudgetExceeded.as_str();
/// The session or delegation is expired, foreign or out of scope.
pub const DELEGATION_INVALID: &str = ReasonCode::DelegationInvalid.as_str();
/// A safety envelope hard limit would be crossed.
pub const DENY_ENVELOPE_HARD_LIMIT: &str = ReasonCode::DenyEnvelopeHardLimit.as_str();
/// The action is prohibited by the safety envelope.
pub const DENY_PROHIBITED_ACTION: &str = ReasonCode::DenyProhibitedAction.as_str();
/// A threat scanner flagged the call.
pub const THREAT_SIGNAL_DETECTED: &str = ReasonCode::ThreatSignalDetected.as_str();
/// The identity may not act on the resource.
pub const DENY_IDENTITY_UNAUTHORIZED: &str = ReasonCode::DenyIdentityUnauthorized.as_str();
/// The decision itself failed; the call is denied (fail closed).
pub const FAIL_CLOSED_ERROR: &str = ReasonCode::FailClosedError.as_str();

/// The gate: the policy forbids the task (access list, data
/// classification, a Cedar `forbid`), or the operator may not decide it.
pub const DENY_FORBIDDEN: &str = ReasonCode::DenyForbidden.as_str();
/// The gate: the assessed risk is above the capability's ceiling or the
/// caller's limit.
pub const DENY_RISK_TOO_HIGH: &str = ReasonCode::DenyRiskTooHigh.as_str();
/// The gate: the equipment the task needs is not available.
pub const DENY_RESOURCE_UNAVAILABLE: &str = ReasonCode::DenyResourceUnavailable.as_str();
/// An operator rejected the task.
pub const DENY_APPROVAL_REJECTED: &str = ReasonCode::DenyApprovalRejected.as_str();
/// Nobody decided before the approval expired.
pub const DENY_APPROVAL_EXPIRED: &str = ReasonCode::DenyApprovalExpired.as_str();

/// Every code above.
pub const KNOWN: [&str; 15] = {
    let mut out = [""; 15];
    let mut i = 0;
    while i < out.len() {
        out[i] = ReasonCode::ALL[i].as_str();
        i += 1;
    }
    out
};

/// Whether `code` has the form of a reason code.
pub fn is_well_formed(code: &str) -> bool {
    let bytes = code.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_uppercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_codes_are_well_formed() {
        for code in super::KNOWN {
            assert!(super::is_well_formed(code), "{code}");
        }
        for bad in ["", "allow", "1DENY", "DENY-X", "DENY X"] {
            assert!(!super::is_well_formed(bad), "{bad}");
        }
    }
}
