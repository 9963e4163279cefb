//! The mediator's witness: what the host records, outside the session log,
//! about each decision and each execution (the host's signed receipts).
//!
//! The mediator calls [`Witness::decided`] after a decision passed its
//! checks and before it takes effect: when the witness cannot record it,
//! the decision does not happen (the proposal stays pending, nothing is
//! logged or executed). [`Witness::finished`] follows every approval with
//! what came of it; when that cannot be recorded, execution halts until an
//! operator re-arms, as it does when the session log fails.
//! [`Witness::mode_change`] comes before an operator's mode change takes
//! effect.
//!
//! The witness also decides: the host's receipts carry the policy's
//! verdict, and a decision or mode change the policy refuses
//! ([`WitnessError::Forbidden`], [`WitnessError::Invalid`]) is recorded and
//! does not take effect.

use crate::action::{Mode, ProposalId};
use std::fmt;

/// What an operator (or the host) decided on a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// An operator approved it.
    Approve,
    /// An operator rejected it.
    Reject,
    /// The host withdrew it: its session ended undecided.
    Withdraw,
}

impl Verdict {
    /// `approve`, `reject` or `withdraw`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Reject => "reject",
            Self::Withdraw => "withdraw",
        }
    }
}

/// A decision, about to take effect.
#[derive(Debug, Clone, Copy)]
pub struct Decided<'a> {
    /// The proposal.
    pub proposal: &'a ProposalId,
    /// The guest's session.
    pub session: &'a str,
    /// Who decided (`host` for a withdrawal).
    pub operator: &'a str,
    /// What.
    pub verdict: Verdict,
    /// The rejection's or withdrawal's reason.
    pub reason: Option<&'a str>,
    /// The mode when it was decided.
    pub mode: Mode,
    /// Whether the proposal's text looks like a secret.
    pub credential_warning: bool,
    /// Whether the operator acknowledged that.
    pub credential_acknowledged: bool,
}

/// What came of an approved proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Result<'a> {
    /// The device carried it out.
    Executed {
        /// The execution's id.
        execution_id: &'a str,
    },
    /// It was sent (or about to be), and the device failed: execution
    /// halted; whether the action happened is unknown.
    Failed {
        /// The execution's id.
        execution_id: &'a str,
        /// Whether the line was written to the device.
        sent: bool,
        /// The fault.
        reason: &'a str,
    },
    /// Not executed: the mode, or execution not armed or halted.
    NotExecuted {
        /// Why, in words.
        reason: &'a str,
    },
}

impl Result<'_> {
    /// `executed`, `failed` or `not_executed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Executed { .. } => "executed",
            Self::Failed { .. } => "failed",
            Self::NotExecuted { .. } => "not_executed",
        }
    }
}

/// Whether actions could run when an approval took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// EXECUTE mode, armed.
    Armed,
    /// Not in EXECUTE mode, or not armed.
    Off,
    /// Halted by a fault until an operator re-arms.
    Halted,
}

impl Readiness {
    /// `armed`, `off` or `halted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Armed => "armed",
            Self::Off => "off",
            Self::Halted => "halted",
        }
    }
}

/// An operator's mode change, about to take effect.
#[derive(Debug, Clone, Copy)]
pub struct ModeChange<'a> {
    /// Who.
    pub operator: &'a str,
    /// The mode before.
    pub from: Mode,
    /// The mode asked for (EXECUTE again: a re-arm).
    pub to: Mode,
}

/// Why a decision or a mode change must not take effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WitnessError {
    /// The policy does not let this operator make it.
    #[error("the policy does not let this operator decide: {0}")]
    Forbidden(String),
    /// The policy refuses the decision itself (an unacknowledged
    /// credential).
    #[error("the policy refuses it: {0}")]
    Invalid(String),
    /// It could not be recorded.
    #[error("{0}")]
    Failed(String),
}

/// An approved proposal's end.
#[derive(Debug, Clone, Copy)]
pub struct Finished<'a> {
    /// The proposal.
    pub proposal: &'a ProposalId,
    /// The guest's session.
    pub session: &'a str,
    /// Who approved it.
    pub operator: &'a str,
    /// The mode when it was approved.
    pub mode: Mode,
    /// The mode it was proposed in.
    pub proposed_in: Mode,
    /// Whether actions could run then.
    pub readiness: Readiness,
    /// `action_type` of the action.
    pub action_type: &'a str,
    /// What came of it.
    pub result: Result<'a>,
}

/// Records decisions and executions (see the module docs). Called with the
/// mediator's locks held: it must not call back into the mediator.
pub trait Witness: Send + Sync + fmt::Debug {
    /// A decision is about to take effect.
    ///
    /// # Errors
    ///
    /// The policy refuses it, or it could not be recorded: the decision
    /// must not take effect.
    fn decided(&self, decided: &Decided<'_>) -> std::result::Result<(), WitnessError>;

    /// An operator's mode change is about to take effect.
    ///
    /// # Errors
    ///
    /// The policy refuses it, or it could not be recorded: the mode must
    /// not change (leaving EXECUTE happens all the same).
    fn mode_change(&self, change: &ModeChange<'_>) -> std::result::Result<(), WitnessError>;

    /// An approved proposal ended.
    ///
    /// # Errors
    ///
    /// It could not be recorded: execution halts.
    fn finished(&self, finished: &Finished<'_>) -> std::result::Result<(), WitnessError>;
}
