//! The host's HID mediator (`hcp-hid`), wired to the sandbox's `hid`
//! interface and to the operator's endpoints.
//!
//! One mediator per host process, its session log in the data directory's
//! database. Only the process given an executor (`hcp serve --hid-device`)
//! opens the serial port; any other starts in OBSERVE with no device, so
//! what its guests propose is recorded and never executed.
//!
//! Its witness, which records each of its decisions as a receipt decided
//! by the policy in force, is the engine's (`hid_witness.rs`): this
//! room imports nothing of the engine.

use hcp_hid::action::{Action, Mode, OperatorId, ProposalId};
use hcp_hid::device::DeviceConfig;
use hcp_hid::log::SessionLog;
use hcp_hid::mediator::witness::Witness;
use hcp_hid::mediator::{Mediator, MediatorConfig, MediatorError, Outcome};
use hcp_hid::proposal::ProposalRequest;
use hcp_sandbox::{HidBroker, HidOutcome, HidRefusal};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The key of the HID session log's keyed digests, shared with what the
/// host withholds (`hcp_store::withhold`, where it is made).
pub use crate::withhold::digest_key;

/// The mediator, as the sandbox and the operator's interfaces use it.
#[derive(Debug)]
pub struct HidService {
    mediator: Mediator,
}

impl HidService {
    /// Starts the mediator with its log in `data_dir/hcp.db` and its digest
    /// key in `data_dir/keys/hid-digest.key`; with `device`, tells the
    /// executor OBSERVE at once.
    ///
    /// # Errors
    ///
    /// The session log or the digest key cannot be opened.
    pub fn start(
        data_dir: &Path,
        device: Option<DeviceConfig>,
        witness: Option<Arc<dyn Witness>>,
    ) -> anyhow::Result<Self> {
        let log = SessionLog::open(&data_dir.join("hcp.db"))?;
        let mut config = MediatorConfig::new(device);
        config.witness = witness;
        config.digest_key = Some(digest_key(data_dir)?);
        Ok(Self {
            mediator: Mediator::start(log, config),
        })
    }

    /// The mediator, for the operator's calls.
    pub fn mediator(&self) -> &Mediator {
        &self.mediator
    }

    /// The mediator's state as JSON: mode, execution, the device's last
    /// status (seed 004's `device_status`).
    pub fn status_json(&self) -> Value {
        let s = self.mediator.status();
        let execution = match &s.execution {
            hcp_hid::mediator::Execution::Off => json!({"state": "off"}),
            hcp_hid::mediator::Execution::Armed { device } => {
                json!({"state": "armed", "device": format!("{device:?}")})
            }
            hcp_hid::mediator::Execution::Halted { reason } => {
                json!({"state": "halted", "reason": reason})
            }
        };
        json!({
            "mode": s.mode.as_str(),
            "execution": execution,
            "device_status": s.device_status.as_ref().and_then(|d| serde_json::to_value(d).ok()),
        })
    }

    /// Every proposal of this process, oldest first, as seed 004's
    /// `action_proposal` with the session and the outcome.
    pub fn proposals_json(&self) -> Vec<Value> {
        self.mediator
            .proposals()
            .into_iter()
            .map(|p| {
                json!({
                    "proposal": p.proposal,
                    "session_id": p.session,
                    "outcome": p.outcome.as_ref().map(outcome_json),
                })
            })
            .collect()
    }
}

/// An outcome as JSON for operators.
pub fn outcome_json(o: &Outcome) -> Value {
    match o {
        Outcome::Executed { execution_id } => {
            json!({"outcome": "executed", "execution_id": execution_id})
        }
        Outcome::Rejected {
            operator_id,
            reason,
        } => json!({"outcome": "rejected", "operator_id": operator_id, "reason": reason}),
        Outcome::NotExecuted { mode, reason } => {
            json!({"outcome": "not_executed", "mode": mode.as_str(), "reason": reason})
        }
        Outcome::Failed { reason } => json!({"outcome": "failed", "reason": reason}),
        Outcome::TimedOut => json!({"outcome": "pending"}),
    }
}

/// Why an operator's input to the mediator was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HidInputError {
    /// Not an operator id (the mediator's reason).
    #[error("{0}")]
    Operator(String),
    /// Not a mode.
    #[error("{name:?} is not a mode (OBSERVE, SUGGEST or EXECUTE)")]
    Mode {
        /// What was given.
        name: String,
    },
    /// Not a proposal id (the mediator's reason).
    #[error("{0}")]
    Proposal(String),
}

impl From<HidInputError> for String {
    fn from(e: HidInputError) -> Self {
        e.to_string()
    }
}

/// Parses an operator id for the mediator.
///
/// # Errors
///
/// Not 2–64 characters of `[A-Za-z0-9_-]`, or `host`.
pub fn operator(id: &str) -> Result<OperatorId, HidInputError> {
    OperatorId::try_from(id.to_owned()).map_err(HidInputError::Operator)
}

/// Parses a mode name (`OBSERVE`, `SUGGEST`, `EXECUTE`, any case).
///
/// # Errors
///
/// Not one of the three.
pub fn mode(name: &str) -> Result<Mode, HidInputError> {
    name.to_ascii_uppercase()
        .parse::<Mode>()
        .map_err(|_| HidInputError::Mode {
            name: name.to_owned(),
        })
}

/// Parses a proposal id.
///
/// # Errors
///
/// Not a proposal id.
pub fn proposal_id(id: &str) -> Result<ProposalId, HidInputError> {
    id.parse().map_err(HidInputError::Proposal)
}

fn refusal(e: MediatorError) -> HidRefusal {
    match e {
        MediatorError::Proposal(p) => HidRefusal::Invalid(p.to_string()),
        e @ MediatorError::TooManyPending { .. } => HidRefusal::TooManyPending(e.to_string()),
        e @ MediatorError::UnknownProposal(_) => HidRefusal::UnknownProposal(e.to_string()),
        e => HidRefusal::Unavailable(e.to_string()),
    }
}

impl HidBroker for HidService {
    fn new_proposal_id(&self) -> String {
        ProposalId::new().to_string()
    }

    fn propose(
        &self,
        session: &str,
        proposal: &str,
        action: Value,
        rationale: String,
    ) -> Result<String, HidRefusal> {
        let id: ProposalId = proposal
            .parse()
            .map_err(|e| HidRefusal::Invalid(format!("proposal id: {e}")))?;
        let action: Action = serde_json::from_value(action)
            .map_err(|e| HidRefusal::Invalid(format!("proposal is malformed: {e}")))?;
        self.mediator
            .propose_as(session, id, ProposalRequest { action, rationale })
            .map(|id| id.to_string())
            .map_err(refusal)
    }

    fn wait(
        &self,
        session: &str,
        proposal: &str,
        timeout: Duration,
    ) -> Result<HidOutcome, HidRefusal> {
        let id: ProposalId = proposal
            .parse()
            .map_err(|_| HidRefusal::UnknownProposal(format!("no proposal {proposal:?}")))?;
        Ok(
            match self.mediator.wait(session, &id, timeout).map_err(refusal)? {
                Outcome::Executed { execution_id } => HidOutcome::Executed(execution_id),
                Outcome::Rejected {
                    operator_id,
                    reason,
                } => HidOutcome::Rejected(format!("rejected by {operator_id}: {reason}")),
                Outcome::NotExecuted { mode, reason } => {
                    HidOutcome::NotExecuted(format!("{}: {reason}", mode.as_str()))
                }
                Outcome::Failed { reason } => HidOutcome::Failed(reason),
                Outcome::TimedOut => HidOutcome::Pending,
            },
        )
    }

    fn close(&self, session: &str) {
        if let Err(e) = self.mediator.close_session(session) {
            tracing::error!("closing the HID proposals of {session}: {e}");
        }
    }
}
