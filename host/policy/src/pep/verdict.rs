//! What a check of the PEP answers: a [`Decision`] (verdict, reason code,
//! threat signals), the helpers that make the denials of each check, and
//! what a session has spent ([`Counters`]) for the budgets the checks
//! read. A leaf below the interfaces' rules, which make their decisions
//! with it; `super::decide` runs the checks.

use super::scope::Scope;
use super::threat::Signals;
use hcp_contracts::ReasonCode;
use hcp_contracts::RiskLevel;
use hcp_receipts::Verdict;
use serde::{Deserialize, Serialize};

/// What a session has spent so far; the decision of each call reads them,
/// the host charges them after it (`Counters::charge`, in `super::decide`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    /// Bytes of the artifacts created.
    pub artifact_bytes: u64,
    /// Artifacts created.
    pub artifacts: u64,
    /// Bytes moved through allowed calls (`Call::bytes`).
    pub bytes: u64,
    /// Checkpoints saved.
    pub checkpoints: u64,
    /// Calls decided, allowed or denied.
    pub host_calls: u64,
    /// The session was revoked (an operator's kill switch, a foreign or
    /// revoked token): every call is denied.
    pub revoked: bool,
}

impl Counters {
    /// Appends the counters' canonical form (RFC 8785: integers and a
    /// bool, keys in order) to `out`: what serde_json writes of them,
    /// without its serializer, on every host call's decision input.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        use hcp_receipts::ids::push_decimal;
        out.extend_from_slice(b"{\"artifact_bytes\":");
        push_decimal(out, self.artifact_bytes);
        out.extend_from_slice(b",\"artifacts\":");
        push_decimal(out, self.artifacts);
        out.extend_from_slice(b",\"bytes\":");
        push_decimal(out, self.bytes);
        out.extend_from_slice(b",\"checkpoints\":");
        push_decimal(out, self.checkpoints);
        out.extend_from_slice(b",\"host_calls\":");
        push_decimal(out, self.host_calls);
        out.extend_from_slice(if self.revoked {
            b",\"revoked\":true}"
        } else {
            b",\"revoked\":false}"
        });
    }
}

/// A verdict, its reason code, and what the threat scan saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// ALLOW or DENY.
    pub verdict: Verdict,
    /// The string of its [`ReasonCode`] (as receipts record it).
    pub reason: &'static str,
    /// For the guest and the task log; empty when allowed.
    pub message: String,
    /// Detectors that fired (recorded, or the cause of a denial).
    pub signals: Signals,
}

impl Decision {
    /// A verdict for `code`, no signals.
    pub(crate) fn new(verdict: Verdict, code: ReasonCode, message: String) -> Self {
        Self {
            verdict,
            reason: code.as_str(),
            message,
            signals: Signals::NONE,
        }
    }

    /// An allowed call, with the signals the threat scan recorded.
    pub(super) fn allow(signals: Signals) -> Self {
        Self {
            signals,
            ..Self::new(Verdict::Allow, ReasonCode::Allow, String::new())
        }
    }

    pub(crate) fn deny(code: ReasonCode, message: String) -> Self {
        Self::new(Verdict::Deny, code, message)
    }

    /// Whether the call may proceed.
    pub fn allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }

    /// The risk level its receipt records: the session's, raised to R4 when
    /// the threat scan recorded a signal, so that the receipt is signed.
    pub fn risk(&self, scope: &Scope) -> RiskLevel {
        let session = scope.facts.risk_level;
        if self.signals.is_empty() {
            session
        } else {
            session.max(RiskLevel::R4)
        }
    }
}

pub(super) fn not_found(message: String) -> Result<(), Decision> {
    Err(Decision::deny(ReasonCode::DenyToolNotFound, message))
}

/// `[A-Za-z0-9._-]{1,max}`, not starting with `.`.
pub(crate) fn is_safe_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// `type/subtype` of RFC 6838 token characters, at most 127 bytes.
pub(crate) fn is_media_type(s: &str) -> bool {
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    s.len() <= 127 && s.split_once('/').is_some_and(|(a, b)| token(a) && token(b))
}

pub(super) fn args_invalid(message: String) -> Result<(), Decision> {
    Err(Decision::deny(ReasonCode::DenyArgsInvalid, message))
}

pub(super) fn exceeded(message: String) -> Result<(), Decision> {
    Err(Decision::deny(ReasonCode::BudgetExceeded, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_media_types() {
        for ok in ["raman_raw.json", "growth-log.csv", "a"] {
            assert!(is_safe_name(ok, 128), "{ok}");
        }
        for bad in ["", ".hidden", "../x", "a/b", "a b", "é", &"x".repeat(129)] {
            assert!(!is_safe_name(bad, 128), "{bad}");
        }
        for ok in ["application/json", "text/csv", "application/vnd.api+json"] {
            assert!(is_media_type(ok), "{ok}");
        }
        for bad in ["json", "text/", "/csv", "text/csv; charset=utf-8", "a/b/c"] {
            assert!(!is_media_type(bad), "{bad}");
        }
    }
}
