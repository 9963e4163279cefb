//! A policy reload as its receipt records it, and as replay re-derives it.
//!
//! A running host swaps its policy set only whole, and only for a set that
//! checks: `policy.reload` records each attempt. An accepted reload's
//! receipt carries the new set's hash (and its snapshot), a refused one the
//! hash of the set kept, with every problem found. Replay takes the input
//! under the receipt's own snapshot: an accepted reload must name that
//! snapshot as its new set; a refused one is refused for the problems it
//! recorded (a fact: the candidate files are not kept).

use super::error::{InputError, read};
use super::verdict::Decision;
use crate::PolicySet;
use hcp_contracts::ReasonCode;
use hcp_receipts::Verdict;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `call` and `kind` of a policy reload.
pub const CALL_POLICY_RELOAD: &str = "policy.reload";

/// The decision input of `policy.reload`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReloadInput {
    /// When (RFC 3339).
    pub at: String,
    /// Who asked: an operator's id, or `signal:SIGHUP`.
    pub by: String,
    /// [`CALL_POLICY_RELOAD`].
    pub kind: String,
    /// The set's hash (`sha256:`) after the reload (the old one when
    /// refused).
    pub new_hash: String,
    /// The set's hash before.
    pub old_hash: String,
    /// Every problem of the candidate set (empty when it checked).
    pub problems: Vec<String>,
}

/// Decides a reload from its input under `policy` (the receipt's snapshot).
pub fn decide_reload(policy: &PolicySet, input: &ReloadInput) -> Decision {
    let (verdict, reason, message) = if !input.problems.is_empty() {
        (
            Verdict::Deny,
            ReasonCode::DenyArgsInvalid,
            format!(
                "the policy set does not check ({} problems); {} kept",
                input.problems.len(),
                input.old_hash
            ),
        )
    } else if input.new_hash == policy.policy_hash() {
        (Verdict::Allow, ReasonCode::Allow, String::new())
    } else {
        (
            Verdict::Deny,
            ReasonCode::FailClosedError,
            format!(
                "the reload names {} but was decided under {}",
                input.new_hash,
                policy.policy_hash()
            ),
        )
    };
    Decision::new(verdict, reason, message)
}

/// Decides a `policy.reload` input; `None` for other kinds.
///
/// # Errors
///
/// The input does not read as a reload.
pub fn decide(
    policy: &PolicySet,
    kind: &str,
    input: &Value,
) -> Option<Result<Decision, InputError>> {
    (kind == CALL_POLICY_RELOAD)
        .then(|| read::<ReloadInput>(kind, input).map(|i| decide_reload(policy, &i)))
}
