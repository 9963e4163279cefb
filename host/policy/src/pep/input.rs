//! Decision inputs: what a receipt's `input_hash` covers, and what replay
//! feeds the decision again.
//!
//! Two kinds, both RFC 8785 canonical JSON:
//!
//! ```text
//! {"at_ms":<ms>,"facts":{…SessionFacts…},"kind":"session.open"}
//! {"at_ms":<ms>,"call":{…Call…},"counters":{…Counters…},"kind":"host_call","scope":"sha256:<facts hash>"}
//! {"at_ms":<ms>,"call":{…bounded Call…},"counters":{…},"full":{…FullArgs…},"kind":"host_call","scope":"sha256:<facts hash>"}
//! ```
//!
//! The third form is a call whose text is larger than
//! [`super::ARGS_PREFIX_BYTES`]: the call is cut to that prefix
//! ([`Call::bounded`]) and `full` records the whole call's SHA-256 (the
//! receipt's `args_hash`), size, the bytes it charges and its threat
//! signals ([`super::FullArgs`]).
//!
//! A session's first receipt (`session.open`) records its facts in full;
//! every host call names them by hash, so a call's input stays small.

use super::bound::FullArgs;
use super::error::CallError;
use super::interfaces::{Call, OpRules};
use super::scope::{Scope, ScopeError, SessionFacts};
use super::verdict::{Counters, Decision};
use crate::PolicySet;
use hcp_contracts::ReasonCode;
use hcp_contracts::interfaces::Op;
use hcp_receipts::{Digest, Verdict};
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::io::Write as _;

/// `kind` of a session's first decision input.
pub const KIND_SESSION_OPEN: &str = "session.open";
/// `kind` of a host call's decision input.
pub const KIND_HOST_CALL: &str = "host_call";
/// The receipt `call` of a session's first receipt.
pub const CALL_SESSION_OPEN: &str = "session.open";

#[derive(Serialize)]
struct OpenInput<'a> {
    at_ms: u64,
    facts: &'a SessionFacts,
    kind: &'static str,
}

/// The decision input of a session's opening.
///
/// # Errors
///
/// Facts without a canonical form (a non-finite number in the envelope).
pub fn open_input(facts: &SessionFacts, at_ms: u64) -> Result<Vec<u8>, String> {
    hcp_contracts::jcs::canonical_bytes(&OpenInput {
        at_ms,
        facts,
        kind: KIND_SESSION_OPEN,
    })
}

/// The decision of a session's opening: ALLOW when its facts compile under
/// the policy and it has not expired yet.
pub fn decide_open(
    scope: &Result<Scope, ScopeError>,
    facts: &SessionFacts,
    at_ms: u64,
) -> Decision {
    match scope {
        Err(e) => Decision::deny(ReasonCode::FailClosedError, e.to_string()),
        Ok(_) if at_ms >= facts.expires_at_ms => Decision::deny(
            ReasonCode::DelegationInvalid,
            format!("session {} has expired", facts.session_id),
        ),
        Ok(_) => Decision::new(Verdict::Allow, ReasonCode::Allow, String::new()),
    }
}

/// Opens a session: compiles its scope under `policy` and decides.
pub fn open(
    policy: &PolicySet,
    facts: SessionFacts,
    at_ms: u64,
) -> (Result<Scope, ScopeError>, Decision) {
    let scope = Scope::compile(policy, facts.clone());
    let decision = decide_open(&scope, &facts, at_ms);
    (scope, decision)
}

/// The decision input of a host call, from the call's canonical bytes
/// ([`Call::canonical_bytes`]). Written directly: every part is already
/// canonical and the keys are in order.
pub fn call_input(at_ms: u64, call_bytes: &[u8], counters: &Counters, scope: &Digest) -> Vec<u8> {
    let mut out = Vec::with_capacity(call_bytes.len() + 256);
    call_input_into(&mut out, at_ms, call_bytes, counters, scope);
    out
}

/// [`call_input`], written at the end of `out` (a buffer used again, so
/// that a decision input hashed and dropped costs no allocation).
pub fn call_input_into(
    out: &mut Vec<u8>,
    at_ms: u64,
    call_bytes: &[u8],
    counters: &Counters,
    scope: &Digest,
) {
    out.reserve(call_bytes.len() + 256);
    out.extend_from_slice(b"{\"at_ms\":");
    hcp_receipts::ids::push_decimal(out, at_ms);
    out.extend_from_slice(b",\"call\":");
    out.extend_from_slice(call_bytes);
    out.extend_from_slice(b",\"counters\":");
    counters.write_canonical(out);
    out.extend_from_slice(b",\"kind\":\"");
    out.extend_from_slice(KIND_HOST_CALL.as_bytes());
    out.extend_from_slice(b"\",\"scope\":\"");
    scope.push_text(out);
    out.extend_from_slice(b"\"}");
}

/// The decision input of a bounded call ([`Call::bounded`], canonical bytes
/// `call_bytes`) with what `full` records of the whole call.
pub fn bounded_call_input(
    at_ms: u64,
    call_bytes: &[u8],
    counters: &Counters,
    full: &FullArgs,
    scope: &Digest,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(call_bytes.len() + 512);
    let _ = write!(out, "{{\"at_ms\":{at_ms},\"call\":");
    out.extend_from_slice(call_bytes);
    out.extend_from_slice(b",\"counters\":");
    let _ = serde_json::to_writer(&mut out, counters);
    // A digest, integers and detector names, fields in key order: canonical.
    out.extend_from_slice(b",\"full\":");
    let _ = serde_json::to_writer(&mut out, full);
    let _ = write!(
        out,
        ",\"kind\":\"{KIND_HOST_CALL}\",\"scope\":\"{scope}\"}}"
    );
    out
}

/// A receipt's `args_hash` and decision input for `call` as the governor
/// handed it over: whole (`full` is `None`), or bounded with the facts of
/// the whole call.
///
/// # Errors
///
/// As [`Call::canonical_bytes`].
pub fn receipt_input(
    at_ms: u64,
    call: &Call<'_>,
    full: Option<&FullArgs>,
    counters: &Counters,
    scope: &Digest,
) -> Result<(Digest, Vec<u8>), String> {
    match full {
        None => {
            let (bytes, input) = call_record(at_ms, call, counters, scope)?;
            Ok((Digest::of(&bytes), input))
        }
        Some(full) => {
            let bytes = call.canonical_bytes()?;
            let input = bounded_call_input(at_ms, &bytes, counters, full, scope);
            Ok((full.args_hash, input))
        }
    }
}

/// The canonical bytes of `call` and its decision input, as the host
/// records them.
///
/// # Errors
///
/// As [`Call::canonical_bytes`].
pub fn call_record(
    at_ms: u64,
    call: &Call<'_>,
    counters: &Counters,
    scope: &Digest,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let bytes = call.canonical_bytes()?;
    let input = call_input(at_ms, &bytes, counters, scope);
    Ok((bytes, input))
}

impl Call<'_> {
    /// Reads a call back from its JSON form (a decision input).
    ///
    /// # Errors
    ///
    /// Not a call: unknown operation, or arguments that do not fit it.
    pub fn from_value(value: &Value) -> Result<Call<'static>, CallError> {
        let object = value.as_object().ok_or(CallError::NotAnObject)?;
        if let Some(key) = object
            .keys()
            .find(|k| !matches!(k.as_str(), "args" | "op" | "target"))
        {
            return Err(CallError::UnknownField(key.clone()));
        }
        let name = object
            .get("op")
            .and_then(Value::as_str)
            .ok_or(CallError::NoOp)?;
        let op = Op::from_name(name).ok_or_else(|| CallError::UnknownOp(name.to_owned()))?;
        let target = object
            .get("target")
            .and_then(Value::as_str)
            .ok_or(CallError::NoTarget)?
            .to_owned();
        let raw = object.get("args").cloned().unwrap_or(Value::Null);
        // Each interface reads its own arguments.
        let args = op.rules().args(op, raw)?;
        Ok(Call {
            args,
            op,
            target: Cow::Owned(target),
        })
    }
}
