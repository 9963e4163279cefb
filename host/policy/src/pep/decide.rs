//! The decision: one call, under one session's scope and counters. The
//! checks run here, in their order; each interface's part of them is its
//! rules' (`super::interfaces`), and what they answer is a
//! [`super::verdict::Decision`].

use super::interfaces::{Args, Call, OpRules};
use super::scope::Scope;
use super::threat::{Exposure, Scan, ScanMode, Signals};
use super::verdict::{Counters, Decision, exceeded};
use hcp_contracts::ReasonCode;
use hcp_receipts::Verdict;

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
/// call's interface (its module of `pep/interfaces/`, `OpRules::rules`);
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

/// Check 6: the threat scan of every string argument, each as exposed,
/// under a session's settings `s`.
fn scan(s: &Scan, call: &Call<'_>) -> Signals {
    let mut signals = Signals::NONE;
    if s.terminal_escape == ScanMode::Off
        && s.prompt_injection == ScanMode::Off
        && s.shell_metacharacters == ScanMode::Off
    {
        return signals;
    }
    s.scan(&call.target, Exposure::NAME, &mut signals);
    // Each string of the arguments as its interface exposes it.
    call.args.scan(s, &mut signals);
    signals
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
