//! The host's HID mediator as the sandbox sees it: the trait a host
//! implements ([`HidBroker`]), what it answers, and the link a task holds
//! to it. The `hcp:capability/hid` unit (`units/hid.rs`) is its one user.

use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Why the mediator refused a guest's call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HidRefusal {
    /// The action or rationale breaks a bound (the message says which).
    Invalid(String),
    /// Too many proposals of this session wait for a decision.
    TooManyPending(String),
    /// Not a proposal of this session.
    UnknownProposal(String),
    /// The mediator failed (its log could not be written): nothing happened.
    Unavailable(String),
}

/// How a proposal ended, as the guest sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HidOutcome {
    /// Approved and executed; the execution's id.
    Executed(String),
    /// Rejected by an operator, or withdrawn; the reason.
    Rejected(String),
    /// Not executed because of the mode or a halt; the reason.
    NotExecuted(String),
    /// Sent, but the executor failed; the reason.
    Failed(String),
    /// No outcome yet.
    Pending,
}

/// The host's HID mediator, as the sandbox uses it. Calls may block (a wait
/// blocks up to its timeout); the sandbox calls them off the async threads.
pub trait HidBroker: Send + Sync + std::fmt::Debug {
    /// A fresh proposal id. The sandbox names the proposal in the PEP's
    /// call (so in its receipt) before [`HidBroker::propose`] records it.
    fn new_proposal_id(&self) -> String;

    /// Records proposal `proposal` of `session`: `action` is seed 004's
    /// `{"action_type", "payload"}`. Returns the proposal's id.
    ///
    /// # Errors
    ///
    /// A bound broken, too many pending, or a mediator fault.
    fn propose(
        &self,
        session: &str,
        proposal: &str,
        action: Value,
        rationale: String,
    ) -> Result<String, HidRefusal>;

    /// Waits up to `timeout` for the outcome of `proposal`.
    ///
    /// # Errors
    ///
    /// Not a proposal of `session`, or a mediator fault.
    fn wait(
        &self,
        session: &str,
        proposal: &str,
        timeout: Duration,
    ) -> Result<HidOutcome, HidRefusal>;

    /// The session ended: withdraw its undecided proposals.
    fn close(&self, session: &str);
}

/// The HID link of one task.
#[derive(Debug, Clone)]
pub(crate) struct HidLink {
    pub(crate) broker: Arc<dyn HidBroker>,
    /// The task's deadline bounds every wait.
    pub(crate) deadline: std::time::Instant,
}
