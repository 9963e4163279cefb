//! Stable reason codes of verdicts. A receipt may carry any code of the form
//! `[A-Z][A-Z0-9_]*` (at most 64 characters); these are the ones the host uses.

/// The call was admissible.
pub const ALLOW: &str = "ALLOW";
/// The tool or interface is not in the bounded surface.
pub const DENY_TOOL_NOT_FOUND: &str = "DENY_TOOL_NOT_FOUND";
/// The arguments do not fit the pinned schema.
pub const DENY_ARGS_INVALID: &str = "DENY_ARGS_INVALID";
/// A budget ceiling would be crossed.
pub const BUDGET_EXCEEDED: &str = "BUDGET_EXCEEDED";
/// The session or delegation is expired, foreign or out of scope.
pub const DELEGATION_INVALID: &str = "DELEGATION_INVALID";
/// A safety envelope hard limit would be crossed.
pub const DENY_ENVELOPE_HARD_LIMIT: &str = "DENY_ENVELOPE_HARD_LIMIT";
/// The action is prohibited by the safety envelope.
pub const DENY_PROHIBITED_ACTION: &str = "DENY_PROHIBITED_ACTION";
/// A threat scanner flagged the call.
pub const THREAT_SIGNAL_DETECTED: &str = "THREAT_SIGNAL_DETECTED";
/// The identity may not act on the resource.
pub const DENY_IDENTITY_UNAUTHORIZED: &str = "DENY_IDENTITY_UNAUTHORIZED";
/// The decision itself failed; the call is denied (fail closed).
pub const FAIL_CLOSED_ERROR: &str = "FAIL_CLOSED_ERROR";

/// The gate: the policy forbids the task (access list, data
/// classification, a Cedar `forbid`), or the operator may not decide it.
pub const DENY_FORBIDDEN: &str = "DENY_FORBIDDEN";
/// The gate: the assessed risk is above the capability's ceiling or the
/// caller's limit.
pub const DENY_RISK_TOO_HIGH: &str = "DENY_RISK_TOO_HIGH";
/// The gate: the equipment the task needs is not available.
pub const DENY_RESOURCE_UNAVAILABLE: &str = "DENY_RESOURCE_UNAVAILABLE";
/// An operator rejected the task.
pub const DENY_APPROVAL_REJECTED: &str = "DENY_APPROVAL_REJECTED";
/// Nobody decided before the approval expired.
pub const DENY_APPROVAL_EXPIRED: &str = "DENY_APPROVAL_EXPIRED";

/// Every code above.
pub const KNOWN: [&str; 15] = [
    ALLOW,
    DENY_TOOL_NOT_FOUND,
    DENY_ARGS_INVALID,
    BUDGET_EXCEEDED,
    DELEGATION_INVALID,
    DENY_ENVELOPE_HARD_LIMIT,
    DENY_PROHIBITED_ACTION,
    THREAT_SIGNAL_DETECTED,
    DENY_IDENTITY_UNAUTHORIZED,
    FAIL_CLOSED_ERROR,
    DENY_FORBIDDEN,
    DENY_RISK_TOO_HIGH,
    DENY_RESOURCE_UNAVAILABLE,
    DENY_APPROVAL_REJECTED,
    DENY_APPROVAL_EXPIRED,
];

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
