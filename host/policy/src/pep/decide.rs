//! The decision: one call, under one session's scope and counters.

use super::call::{Args, Call, FsAccess, InstrumentArgs, Op};
use super::scope::{Scope, canonical, normalize_name};
use super::threat::{Signals, scan};
use hcp_contracts::ReasonCode;
use hcp_contracts::RiskLevel;
use hcp_contracts::manifest::Access;
use hcp_instruments::envelope::Violation;
use hcp_receipts::Verdict;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

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
/// Arguments that do not fit the operation (a malformed [`Call`]) fail
/// closed: `FAIL_CLOSED_ERROR`.
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
    if let Err(d) = surface(scope, call) {
        return d;
    }
    if let Err(d) = arguments(call) {
        return d;
    }
    let bytes = recorded.map_or_else(|| call.bytes(), |r| r.bytes);
    if let Err(d) = budgets(scope, counters, call, bytes) {
        return d;
    }
    if let Args::Instrument(a) = &call.args
        && let Err(d) = envelope(scope, call, a)
    {
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

fn not_found(message: String) -> Result<(), Decision> {
    Err(Decision::deny(ReasonCode::DenyToolNotFound, message))
}

fn malformed(call: &Call<'_>) -> Result<(), Decision> {
    Err(Decision::deny(
        ReasonCode::FailClosedError,
        format!("{}: malformed call (its arguments do not fit it)", call.op),
    ))
}

/// Check 2: the granted surface.
fn surface(scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
    let target = call.target.as_ref();
    match (call.op, &call.args) {
        (Op::LogWrite, Args::Log(_))
        | (Op::ArtifactCreate, Args::Artifact(_))
        | (Op::CheckpointSave, Args::CheckpointSave(_))
        | (Op::CheckpointLoad, Args::CheckpointLoad(_)) => Ok(()),
        (Op::InstrumentCommand, Args::Instrument(_)) | (Op::InstrumentRead, Args::Empty(_)) => {
            if scope.instruments.contains(target) {
                Ok(())
            } else {
                not_found(format!(
                    "instrument {target:?} is not granted to {}",
                    scope.facts.capability
                ))
            }
        }
        (
            Op::FsOpen
            | Op::FsStat
            | Op::FsMetadataHash
            | Op::FsReadlink
            | Op::FsMkdir
            | Op::FsRmdir
            | Op::FsUnlink
            | Op::FsRename
            | Op::FsLink
            | Op::FsSymlink
            | Op::FsSetTimes,
            Args::Fs(a),
        ) => {
            let write = a.access == FsAccess::Write;
            fs_path(scope, call.op, target, write)?;
            match (call.op, &a.to) {
                (Op::FsRename | Op::FsLink, Some(to)) => fs_path(scope, call.op, to, true),
                (Op::FsRename | Op::FsLink, None) => malformed(call),
                _ => Ok(()),
            }
        }
        (Op::FsWrite, Args::FsWrite(_)) => fs_path(scope, call.op, target, true),
        (Op::NetConnect, Args::Connect(a)) => {
            let Ok(addr) = target.parse::<SocketAddr>() else {
                return malformed(call);
            };
            let granted = scope.addrs.contains(&canonical(addr))
                || a.via.as_ref().is_some_and(|name| {
                    scope
                        .names
                        .get(&normalize_name(name))
                        .is_some_and(|ports| ports.contains(&addr.port()))
                });
            if granted {
                Ok(())
            } else {
                not_found(format!("connect to {target}: not in grants.network"))
            }
        }
        (Op::NetBind, Args::Empty(_)) => match target.parse::<SocketAddr>() {
            // The implicit bind of a client connect: any local address, an
            // ephemeral port. Listening and accepting stay denied.
            Ok(a) if a.ip().is_unspecified() && a.port() == 0 => Ok(()),
            Ok(_) => not_found(format!(
                "bind to {target}: only the ephemeral bind of a client connect is granted"
            )),
            Err(_) => malformed(call),
        },
        (Op::NetListen | Op::NetAccept | Op::NetUdp, Args::Empty(_)) => not_found(format!(
            "{} {target}: listening, accepting and UDP are never granted",
            call.op
        )),
        (Op::NetLookup, Args::Empty(_) | Args::Lookup(_)) => {
            if !scope.names.contains_key(&normalize_name(target)) {
                not_found(format!(
                    "name lookup of {target:?}: not a host in grants.network"
                ))
            } else if matches!(&call.args, Args::Lookup(a) if a.addresses.is_empty()) {
                not_found(format!(
                    "name lookup of {target:?}: it resolves to no address the grant allows (non-public addresses need allow_private)"
                ))
            } else {
                Ok(())
            }
        }
        (Op::NetSocket, Args::Empty(_)) => {
            if scope.addrs.is_empty() && scope.names.is_empty() {
                not_found(format!(
                    "net.socket {target}: {} has no grants.network",
                    scope.facts.capability
                ))
            } else {
                Ok(())
            }
        }
        (Op::HidPropose, Args::Hid(_)) | (Op::HidWait, Args::Empty(_)) => {
            if scope.facts.surface.devices.iter().any(|d| d == "hid") {
                Ok(())
            } else {
                not_found(format!(
                    "{}: the hid device is not granted to {}",
                    call.op, scope.facts.capability
                ))
            }
        }
        (Op::HttpRequest, Args::Http(a)) => {
            let Some((host, port)) = target
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            else {
                return malformed(call);
            };
            let literal = host.trim_start_matches('[').trim_end_matches(']');
            let granted = match literal.parse() {
                Ok(ip) => scope.addrs.contains(&canonical(SocketAddr::new(ip, port))),
                Err(_) => scope
                    .names
                    .get(&normalize_name(host))
                    .is_some_and(|ports| ports.contains(&port)),
            };
            if !granted {
                not_found(format!(
                    "{} {}://{target}: not in grants.network",
                    a.method, a.scheme
                ))
            } else if a.addresses.as_ref().is_some_and(Vec::is_empty) {
                not_found(format!(
                    "{} {}://{target}: {host} resolves to no address the grant allows (non-public addresses need allow_private)",
                    a.method, a.scheme
                ))
            } else {
                Ok(())
            }
        }
        _ => malformed(call),
    }
}

fn fs_path(scope: &Scope, op: Op, path: &str, write: bool) -> Result<(), Decision> {
    match scope.fs_access(path) {
        None => not_found(format!(
            "{op} {path:?}: not inside a directory of grants.filesystem"
        )),
        Some(Access::ReadOnly) if write => {
            not_found(format!("{op} {path:?}: the directory is granted read-only"))
        }
        Some(_) => Ok(()),
    }
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

fn args_invalid(message: String) -> Result<(), Decision> {
    Err(Decision::deny(ReasonCode::DenyArgsInvalid, message))
}

/// Check 3: the pinned schema of each operation's arguments.
fn arguments(call: &Call<'_>) -> Result<(), Decision> {
    let shown = |s: &str| s.escape_debug().to_string();
    match &call.args {
        Args::Artifact(a) => {
            if !is_safe_name(&a.name, 128) {
                return args_invalid(format!(
                    "artifact name \"{}\" must be 1-128 characters from [A-Za-z0-9._-], not starting with '.'",
                    shown(&a.name)
                ));
            }
            if !is_media_type(&a.mime_type) {
                return args_invalid(format!(
                    "\"{}\" is not a type/subtype media type",
                    shown(&a.mime_type)
                ));
            }
            Ok(())
        }
        Args::CheckpointSave(a) if !is_safe_name(&a.label, 64) => args_invalid(format!(
            "checkpoint label \"{}\" must be 1-64 characters from [A-Za-z0-9._-], not starting with '.'",
            shown(&a.label)
        )),
        Args::CheckpointLoad(a) if !is_safe_name(&a.id, 128) => args_invalid(format!(
            "checkpoint id \"{}\" must be 1-128 characters from [A-Za-z0-9._-]",
            shown(&a.id)
        )),
        Args::Instrument(a) => match (&a.plan, &a.plan_error) {
            (_, Some(e)) => args_invalid(e.to_string()),
            (None, None) => args_invalid("the command has no plan".into()),
            (Some(_), None) => Ok(()),
        },
        Args::Hid(a)
            if !matches!(
                &*a.action_type,
                "TYPE_TEXT" | "KEY_COMBO" | "MOUSE_MOVE" | "MOUSE_CLICK"
            ) =>
        {
            args_invalid(format!(
                "HID action type \"{}\" is unknown",
                shown(&a.action_type)
            ))
        }
        Args::Log(a) if !matches!(&*a.level, "trace" | "debug" | "info" | "warn" | "error") => {
            args_invalid(format!("log level \"{}\" is unknown", shown(&a.level)))
        }
        _ => Ok(()),
    }
}

fn exceeded(message: String) -> Result<(), Decision> {
    Err(Decision::deny(ReasonCode::BudgetExceeded, message))
}

/// Check 4: budgets and per-task limits.
fn budgets(scope: &Scope, c: &Counters, call: &Call<'_>, bytes: u64) -> Result<(), Decision> {
    let b = &scope.facts.budgets;
    let l = &scope.facts.limits;
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
    match &call.args {
        Args::Artifact(a) => {
            if c.artifacts >= scope.max_artifacts {
                return exceeded(format!(
                    "artifact {}: the task may create {} artifacts (limits.artifacts, budgets.artifacts)",
                    a.name, scope.max_artifacts
                ));
            }
            if c.artifact_bytes.saturating_add(a.bytes) > l.artifact_bytes {
                return exceeded(format!(
                    "artifact {} ({} bytes): the task's artifacts may hold {} bytes, {} are used (limits.artifact_bytes)",
                    a.name, a.bytes, l.artifact_bytes, c.artifact_bytes
                ));
            }
            Ok(())
        }
        Args::CheckpointSave(a) => {
            if c.checkpoints >= l.checkpoints {
                return exceeded(format!(
                    "checkpoint {}: the task may save {} checkpoints (limits.checkpoints)",
                    a.label, l.checkpoints
                ));
            }
            if a.bytes > l.checkpoint_bytes {
                return exceeded(format!(
                    "checkpoint {}: {} bytes is over limits.checkpoint_bytes ({})",
                    a.label, a.bytes, l.checkpoint_bytes
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Check 5: the safety envelope (prohibited actions, hard limits).
fn envelope(scope: &Scope, call: &Call<'_>, a: &InstrumentArgs<'_>) -> Result<(), Decision> {
    let instrument = &call.target;
    if let Some(breach) = &a.breach {
        return Err(Decision::deny(
            ReasonCode::DenyEnvelopeHardLimit,
            format!("instruments are shut down after a safety breach: {breach}"),
        ));
    }
    let Some(plan) = &a.plan else {
        return malformed(call);
    };
    for action in &plan.actions {
        if let Err(v) = scope.guard.check_action(action) {
            return Err(Decision::deny(
                ReasonCode::DenyProhibitedAction,
                format!("{instrument}: {v}"),
            ));
        }
    }
    for s in &plan.settings {
        match scope.guard.check(&s.parameter, s.value, &s.unit) {
            Ok(_) => {}
            Err(v @ Violation::Unit { .. }) => {
                return args_invalid(format!("{instrument}: {v}"));
            }
            Err(v) => {
                return Err(Decision::deny(
                    ReasonCode::DenyEnvelopeHardLimit,
                    format!("{instrument}: {v}"),
                ));
            }
        }
    }
    Ok(())
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
