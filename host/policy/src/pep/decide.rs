//! The decision: one call, under one session's scope and counters.

use super::call::{Args, Call};
use super::scope::Scope;
use super::threat::{Signals, scan};
use hcp_contracts::ReasonCode;
use hcp_contracts::RiskLevel;
use hcp_receipts::Verdict;
use serde::{Deserialize, Serialize};

/// What a session has spent so far; the decision of each call reads them,
/// the host charges them after it ([`Counters::charge`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    /// Bytes of the artifacts created.
    pub artifact_bytes: u64,
    /// Artifacts created.
    pub artifacts: u64,
    /// Bytes moved through allowed calls ([`Call::bytes`]).
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
    /// Charges a decided call: every call counts against `host_calls`; an
    /// allowed one also against bytes, artifacts and checkpoints.
    pub fn charge(&mut self, call: &Call<'_>, verdict: Verdict) {
        self.host_calls = self.host_calls.saturating_add(1);
        if verdict == Verdict::Deny {
            return;
        }
        self.bytes = self.bytes.saturating_add(call.bytes());
        match &call.args {
            Args::Artifact(a) => {
                self.artifacts += 1;
                self.artifact_bytes = self.artifact_bytes.saturating_add(a.bytes);
            }
            Args::CheckpointSave(_) => self.checkpoints += 1,
            _ => {}
        }
    }

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

    fn allow(signals: Signals) -> Self {
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

/// What the decision input of a bounded call ([`Call::bounded`]) recorded
/// about the whole call, in place of the text it no longer has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// What the whole call charges to the `bytes` budget.
    pub bytes: u64,
    /// The threat signals the scan of the whole call found.
    pub signals: Signals,
}

/// Decides `call` at `at_ms` (Unix milliseconds) under `scope`, having spent
/// `counters`. Pure: the same inputs always give the same decision, which
/// is how replay re-derives it. Deny by default: a call is allowed only if
/// every check passes, in this order (the first failure decides):
///
/// 1. the session is valid (not revoked, not expired) — `DELEGATION_INVALID`;
/// 2. the call is in the granted surface and the operator has not turned it
///    off — `DENY_TOOL_NOT_FOUND`;
/// 3. its arguments fit the operation's schema — `DENY_ARGS_INVALID`;
/// 4. the budgets have room — `BUDGET_EXCEEDED`;
/// 5. an instrument command keeps to the safety envelope —
///    `DENY_PROHIBITED_ACTION`, `DENY_ENVELOPE_HARD_LIMIT`;
/// 6. no threat signal whose detector is set to deny —
///    `THREAT_SIGNAL_DETECTED`.
///
/// Checks 2, 3, 5 and the interface's part of 4 are the rules of the
/// call's interface (its module of `pep/interfaces/`, `Op::rules`);
/// this function alone runs them, in this order. Arguments that do not fit
/// the operation (a malformed [`Call`]) fail closed: `FAIL_CLOSED_ERROR`.
pub fn decide(scope: &Scope, counters: &Counters, call: &Call<'_>, at_ms: u64) -> Decision {
    decide_recorded(scope, counters, call, at_ms, None)
}

/// [`decide`], for replay of a bounded call: the bytes it charges and its
/// threat signals are taken from `recorded` (when given) instead of the
/// call's text.
pub fn decide_recorded(
    scope: &Scope,
    counters: &Counters,
    call: &Call<'_>,
    at_ms: u64,
    recorded: Option<&Recorded>,
) -> Decision {
    let facts = &scope.facts;
    if counters.revoked {
        return Decision::deny(
            ReasonCode::DelegationInvalid,
            format!("session {} was revoked", facts.session_id),
        );
    }
    if at_ms >= facts.expires_at_ms {
        return Decision::deny(
            ReasonCode::DelegationInvalid,
            format!("session {} has expired", facts.session_id),
        );
    }
    if scope.is_denied(call.op) {
        return Decision::deny(
            ReasonCode::DenyToolNotFound,
            format!(
                "{} is turned off for {} by the operator's dispatch policy",
                call.op, facts.capability
            ),
        );
    }
    let rules = call.op.rules();
    if let Err(d) = rules.surface(scope, call) {
        return d;
    }
    if let Err(d) = rules.arguments(call) {
        return d;
    }
    let bytes = recorded.map_or_else(|| call.bytes(), |r| r.bytes);
    if let Err(d) = budgets(scope, counters, call, bytes) {
        return d;
    }
    if let Err(d) = rules.envelope(scope, call) {
        return d;
    }
    let signals = recorded.map_or_else(|| scan(&scope.scan, call), |r| r.signals);
    if let Some(detector) = scope.scan.denying(signals) {
        return Decision {
            signals,
            ..Decision::deny(
                ReasonCode::ThreatSignalDetected,
                format!(
                    "{}: the threat scan found {} in the arguments",
                    call.op,
                    detector.name().replace('_', " ")
                ),
            )
        };
    }
    Decision::allow(signals)
}

pub(super) fn not_found(message: String) -> Result<(), Decision> {
    Err(Decision::deny(ReasonCode::DenyToolNotFound, message))
}

pub(super) fn malformed(call: &Call<'_>) -> Result<(), Decision> {
    Err(Decision::deny(
        ReasonCode::FailClosedError,
        format!("{}: malformed call (its arguments do not fit it)", call.op),
    ))
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

/// Check 4: budgets and per-task limits.
fn budgets(scope: &Scope, c: &Counters, call: &Call<'_>, bytes: u64) -> Result<(), Decision> {
    let b = &scope.facts.budgets;
    if c.host_calls >= b.host_calls {
        return exceeded(format!(
            "{}: the session may make {} host calls (budgets.host_calls)",
            call.op, b.host_calls
        ));
    }
    if c.bytes.saturating_add(bytes) > b.bytes {
        return exceeded(format!(
            "{} ({bytes} bytes): the session may move {} bytes through host calls, {} are used (budgets.bytes)",
            call.op, b.bytes, c.bytes
        ));
    }
    call.op.rules().limits(scope, c, call)
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
