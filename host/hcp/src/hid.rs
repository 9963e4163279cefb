//! The host's HID mediator (`hcp-hid`), wired to the sandbox's `hid`
//! interface and to the operator's endpoints.
//!
//! One mediator per host process, its session log in the data directory's
//! database. Only the process given an executor (`hcp serve --hid-device`)
//! opens the serial port; any other starts in OBSERVE with no device, so
//! what its guests propose is recorded and never executed.

use crate::evidence::{Appender, Entry, Follows};
use crate::store::Store;
use hcp_contracts::RiskLevel;
use hcp_hid::action::{Action, Mode, OperatorId, ProposalId};
use hcp_hid::device::DeviceConfig;
use hcp_hid::log::SessionLog;
use hcp_hid::mediator::witness::{self, Decided, Finished, Readiness, Witness};
use hcp_hid::mediator::{Mediator, MediatorConfig, MediatorError, Outcome};
use hcp_hid::proposal::ProposalRequest;
use hcp_policy::pep::hid::{
    self as pep_hid, CALL_HID_DECISION, CALL_HID_EXECUTION, HidDecisionInput, HidExecutionInput,
    HidReadiness, HidResult, HidVerdict,
};
use hcp_policy::pep::{Decision, SessionFacts};
use hcp_receipts::Verdict;
use hcp_sandbox::{HidBroker, HidOutcome, HidRefusal};
use rusqlite::OptionalExtension as _;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Receipts of the mediator's decisions and executions (`hid.decision`,
/// `hid.execution`; see `hcp_policy::pep::hid`), each following from the
/// receipt of the guest's `hid.propose` call and decided by the same
/// functions `hcp replay` uses.
#[derive(Debug)]
pub struct HidReceipts {
    pub(crate) appender: Appender,
    pub(crate) store: Arc<Store>,
    /// The policy in force (read once per decision).
    pub(crate) policy: Arc<crate::engine::LivePolicy>,
}

/// What a session's receipts say of it.
struct SessionOf {
    task_id: String,
    capability: String,
    risk: RiskLevel,
}

impl HidReceipts {
    fn session(&self, id: &str) -> Result<SessionOf, String> {
        let row: Option<(String, String, Vec<u8>)> = self
            .store
            .db()
            .query_row(
                "SELECT task_id, capability, facts FROM receipt_sessions WHERE session_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| format!("session {id}: {e}"))?;
        let (task_id, capability, facts) =
            row.ok_or_else(|| format!("no receipt opened session {id}"))?;
        let facts: SessionFacts =
            serde_json::from_slice(&facts).map_err(|e| format!("session {id}'s facts: {e}"))?;
        Ok(SessionOf {
            task_id,
            capability,
            risk: facts.risk_level,
        })
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one receipt's fields and the policy it was decided under"
    )]
    fn record(
        &self,
        session_id: &str,
        call: &str,
        args: Value,
        input: Value,
        decision: &Decision,
        policy: &crate::engine::CurrentPolicy,
        follows: Follows,
    ) -> Result<(), String> {
        let session = self.session(session_id)?;
        self.appender
            .append_sealed(Entry {
                session_id: Some(session_id.to_owned()),
                task_id: Some(session.task_id),
                capability: session.capability,
                call: call.to_owned(),
                args,
                input,
                verdict: decision.verdict,
                reason_code: decision.reason.to_owned(),
                risk: session.risk,
                policy_hash: policy.digest,
                parents: Vec::new(),
                manifest: None,
                policy_sources: Some(policy.sources.clone()),
                follows: Some(follows),
            })
            .map(|_| ())
            .map_err(|e| format!("its receipt could not be recorded: {e:#}"))
    }
}

impl Witness for HidReceipts {
    fn decided(&self, d: &Decided<'_>) -> Result<(), String> {
        let verdict = match d.verdict {
            witness::Verdict::Approve => HidVerdict::Approve,
            witness::Verdict::Reject => HidVerdict::Reject,
            witness::Verdict::Withdraw => HidVerdict::Withdraw,
        };
        let input = HidDecisionInput {
            at: hcp_contracts::message::now_rfc3339(),
            credential_acknowledged: d.credential_acknowledged,
            credential_warning: d.credential_warning,
            decision: verdict,
            kind: CALL_HID_DECISION.to_owned(),
            mode: d.mode.as_str().to_owned(),
            operator: d.operator.to_owned(),
            proposal: d.proposal.to_string(),
            reason: d.reason.map(str::to_owned),
            session_id: d.session.to_owned(),
        };
        let policy = self.policy.current();
        let decision = pep_hid::decide_decision(&policy, &input);
        let args = json!({
            "decision": verdict,
            "operator": d.operator,
            "proposal": d.proposal,
        });
        let input = serde_json::to_value(&input).map_err(|e| e.to_string())?;
        self.record(
            d.session,
            CALL_HID_DECISION,
            args,
            input,
            &decision,
            &policy,
            Follows {
                proposal: d.proposal.to_string(),
                // An approval is followed by its execution's receipt; an
                // approval the policy refused leaves the proposal pending.
                last: verdict != HidVerdict::Approve,
            },
        )?;
        if verdict == HidVerdict::Approve && decision.verdict == Verdict::Deny {
            return Err(format!(
                "the policy refuses it ({}): {}",
                decision.reason, decision.message
            ));
        }
        Ok(())
    }

    fn finished(&self, f: &Finished<'_>) -> Result<(), String> {
        let (result, execution_id, sent, reason) = match f.result {
            witness::Result::Executed { execution_id } => {
                (HidResult::Executed, Some(execution_id), None, None)
            }
            witness::Result::Failed {
                execution_id,
                sent,
                reason,
            } => (
                HidResult::Failed,
                Some(execution_id),
                Some(sent),
                Some(reason),
            ),
            witness::Result::NotExecuted { reason } => {
                (HidResult::NotExecuted, None, None, Some(reason))
            }
        };
        let input = HidExecutionInput {
            action_type: f.action_type.to_owned(),
            at: hcp_contracts::message::now_rfc3339(),
            execution_id: execution_id.map(str::to_owned),
            kind: CALL_HID_EXECUTION.to_owned(),
            mode: f.mode.as_str().to_owned(),
            operator: f.operator.to_owned(),
            proposal: f.proposal.to_string(),
            readiness: match f.readiness {
                Readiness::Armed => HidReadiness::Armed,
                Readiness::Off => HidReadiness::Off,
                Readiness::Halted => HidReadiness::Halted,
            },
            reason: reason.map(str::to_owned),
            result,
            sent,
            session_id: f.session.to_owned(),
        };
        let decision = pep_hid::decide_execution(&input);
        let args = json!({
            "execution_id": execution_id,
            "proposal": f.proposal,
            "result": result,
        });
        let input = serde_json::to_value(&input).map_err(|e| e.to_string())?;
        self.record(
            f.session,
            CALL_HID_EXECUTION,
            args,
            input,
            &decision,
            &self.policy.current(),
            Follows {
                proposal: f.proposal.to_string(),
                last: true,
            },
        )
    }
}

/// The mediator, as the sandbox and the operator's interfaces use it.
#[derive(Debug)]
pub struct HidService {
    mediator: Mediator,
}

impl HidService {
    /// Starts the mediator with its log in `data_dir/hcp.db`; with `device`,
    /// tells the executor OBSERVE at once.
    ///
    /// # Errors
    ///
    /// The session log cannot be opened.
    pub fn start(
        data_dir: &Path,
        device: Option<DeviceConfig>,
        witness: Option<Arc<dyn Witness>>,
    ) -> anyhow::Result<Self> {
        let log = SessionLog::open(&data_dir.join("hcp.db"))?;
        let mut config = MediatorConfig::new(device);
        config.witness = witness;
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

/// Parses an operator id for the mediator.
///
/// # Errors
///
/// Not 2–64 characters of `[A-Za-z0-9_-]`, or `host`.
pub fn operator(id: &str) -> Result<OperatorId, String> {
    OperatorId::try_from(id.to_owned())
}

/// Parses a mode name (`OBSERVE`, `SUGGEST`, `EXECUTE`, any case).
///
/// # Errors
///
/// Not one of the three.
pub fn mode(name: &str) -> Result<Mode, String> {
    name.to_ascii_uppercase()
        .parse::<Mode>()
        .map_err(|_| format!("{name:?} is not a mode (OBSERVE, SUGGEST or EXECUTE)"))
}

/// Parses a proposal id.
///
/// # Errors
///
/// Not a proposal id.
pub fn proposal_id(id: &str) -> Result<ProposalId, String> {
    id.parse()
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
