//! Why a recorded decision input cannot be decided again, or a call's
//! recorded facts cannot be made: the errors of replay and of bounding.
//! Each says what it said when it was a string; replay (whose `Decider`
//! trait speaks in strings) hands on its text.

use super::scope::ScopeError;
use crate::PolicyError;
use hcp_receipts::Digest;

/// A decision input that cannot be decided again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The input does not read as its kind (`gate.admission`,
    /// `hid.decision`, `policy.reload`, ...).
    #[error("{kind} input: {reason}")]
    Kind {
        /// The kind.
        kind: String,
        /// Why it does not read.
        reason: String,
    },
    /// A part of the input does not read as what it is (`session facts`,
    /// `counters`, `full`).
    #[error("{part}: {reason}")]
    Part {
        /// The part.
        part: &'static str,
        /// Why it does not read.
        reason: String,
    },
    /// The input lacks a field.
    #[error("the decision input has no {0:?}")]
    Missing(String),
    /// `at_ms` is not a whole number of milliseconds.
    #[error("at_ms is not a whole number")]
    AtMs,
    /// `scope` is not a digest.
    #[error("scope is not a sha256: digest")]
    ScopeDigest,
    /// A digest (a policy's hash) does not read.
    #[error("{0}")]
    Digest(String),
    /// The session facts the input names are not in the pack.
    #[error("the session facts {0} are not in the pack")]
    FactsMissing(Digest),
    /// The session facts do not compile into a scope.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// The recorded call does not read back.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The recorded signals name an unknown detector.
    #[error("unknown threat detector {0:?}")]
    UnknownDetector(String),
    /// A kind no decider here replays.
    #[error("no decision of kind {kind:?} (this decider replays {known})")]
    UnknownKind {
        /// The input's kind.
        kind: String,
        /// The kinds replayed.
        known: String,
    },
    /// A file of the pack's policy snapshot is not UTF-8.
    #[error("the pack's policy snapshot does not load: policy/{0} is not UTF-8")]
    NotUtf8(String),
    /// The pack's policy snapshot does not load.
    #[error("the pack's policy snapshot does not load: {0}")]
    Policy(#[from] PolicyError),
}

/// Reads `input` as an input of `kind`.
pub(crate) fn read<T: serde::de::DeserializeOwned>(
    kind: &str,
    input: &serde_json::Value,
) -> Result<T, InputError> {
    serde_json::from_value(input.clone()).map_err(|e| InputError::Kind {
        kind: kind.to_owned(),
        reason: e.to_string(),
    })
}

/// A call's facts (for a bounded receipt) that cannot be made: the call has
/// no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CanonicalError(pub String);

/// A recorded call that does not read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Not a JSON object.
    #[error("a call is a JSON object")]
    NotAnObject,
    /// A field other than `op`, `target`, `args`.
    #[error("unknown field {0:?} in a call")]
    UnknownField(String),
    /// No `op`.
    #[error("a call names its op")]
    NoOp,
    /// An `op` the enforcement point does not know.
    #[error("unknown op {0:?}")]
    UnknownOp(String),
    /// No `target`.
    #[error("a call names its target")]
    NoTarget,
    /// Arguments that do not fit the operation.
    #[error("arguments of {op}: {reason}")]
    Args {
        /// The operation.
        op: String,
        /// Why they do not fit.
        reason: String,
    },
}
