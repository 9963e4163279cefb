//! The mediator: modes, proposals, operator decisions, and execution of
//! approved actions only.
//!
//! - **Modes** OBSERVE (the default), SUGGEST and EXECUTE change only by an
//!   operator ([`Mediator::set_mode`]), each change logged (MODE_CHANGE).
//! - **Proposals** ([`Mediator::propose`]) are checked
//!   ([`crate::proposal`]) and logged (PROPOSAL; a refused one as ERROR). In
//!   OBSERVE a proposal is recorded and at once resolved as not executed; in
//!   SUGGEST and EXECUTE it waits for a decision.
//! - **Decisions** ([`Mediator::approve`], [`Mediator::reject`]) need an
//!   operator id; a rejection a reason; approving a proposal whose text
//!   looks like a secret, an explicit acknowledgement. Each is logged
//!   (DECISION) before anything else happens.
//! - **Execution** happens only inside [`Mediator::approve`]: in EXECUTE
//!   mode, while armed, once per proposal, in the order approved, never
//!   sooner than [`MIN_ACTION_DELAY_MS`] after the device answered the
//!   previous action (so the device's own clock sees at least as much).
//!   Each is logged (EXECUTION).
//! - **Arming**: entering EXECUTE opens the port, checks the executor
//!   (handshake: contract version, kill switch) and sends
//!   `{"type":"set_mode","mode":"EXECUTE"}`; if any of that fails the mode
//!   does not change. Any fault afterwards (timeout, error or garbled
//!   answer, disconnect, kill switch DISABLED) **halts** execution: ERROR is
//!   logged, the device is sent OBSERVE (best effort), and nothing runs until
//!   an operator re-arms ([`Mediator::rearm`]). Leaving EXECUTE sends OBSERVE.
//! - **Guests** see only [`Mediator::propose`] and [`Mediator::wait`], scoped
//!   to their session.

mod decide;
mod details;
mod execute;
mod mode;
pub mod witness;

use crate::action::{HOST_OPERATOR, MIN_ACTION_DELAY_MS, Mode, ProposalId};
use crate::device::{Device, DeviceConfig, DeviceError, DeviceKind};
use crate::log::{Event, EventType, LogError, SessionLog};
use crate::proposal::{self, Proposal, ProposalError, ProposalRequest};
use crate::wire::DeviceStatus;
use details::{bounded, proposal_details};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use witness::{Witness, WitnessError};

/// Longest operator reason, in characters (the decision schema's bound).
pub const MAX_REASON_CHARS: usize = 500;

/// How the mediator runs.
#[derive(Debug, Clone)]
pub struct MediatorConfig {
    /// The executor's port; without one, EXECUTE cannot be armed.
    pub device: Option<DeviceConfig>,
    /// Most undecided proposals one session may have.
    pub max_pending_per_session: usize,
    /// Records every decision and mode change before it takes effect, and
    /// every approved proposal's end (the host's receipts).
    pub witness: Option<Arc<dyn Witness>>,
    /// The key of `payload_hmac_sha256`, the keyed digest the session log
    /// keeps of a credential-like text; without one, it keeps none.
    pub digest_key: Option<Vec<u8>>,
}

impl MediatorConfig {
    /// The executor at `device`, 16 pending proposals per session, no
    /// witness.
    pub fn new(device: Option<DeviceConfig>) -> Self {
        Self {
            device,
            max_pending_per_session: 16,
            witness: None,
            digest_key: None,
        }
    }

    /// The same, with `witness`.
    #[must_use]
    pub fn with_witness(mut self, witness: Arc<dyn Witness>) -> Self {
        self.witness = Some(witness);
        self
    }
}

/// Whether approved actions can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Execution {
    /// Not in EXECUTE mode.
    Off,
    /// In EXECUTE mode and armed: approved actions run.
    Armed {
        /// What the handshake found.
        device: DeviceKind,
    },
    /// In EXECUTE mode, stopped by a fault until an operator re-arms.
    Halted {
        /// The fault.
        reason: String,
    },
}

/// The mediator's state, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The mode.
    pub mode: Mode,
    /// Whether actions can run.
    pub execution: Execution,
    /// The last status the device reported, if it reports any.
    pub device_status: Option<DeviceStatus>,
}

/// How a proposal ended, as its guest sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Approved and executed by the device.
    Executed {
        /// The execution's id.
        execution_id: String,
    },
    /// Rejected by an operator (or withdrawn by the host when its session
    /// ended: operator `host`).
    Rejected {
        /// Who rejected.
        operator_id: String,
        /// Why.
        reason: String,
    },
    /// Recorded, possibly approved, but not executed because of the mode or
    /// a halt.
    NotExecuted {
        /// The mode at the time.
        mode: Mode,
        /// Why, in words.
        reason: String,
    },
    /// Approved and sent, but the device failed (execution halted); whether
    /// the action happened is unknown.
    Failed {
        /// The fault.
        reason: String,
    },
    /// No decision within the wait's timeout; the proposal is still pending.
    TimedOut,
}

/// A proposal, for operators.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposalView {
    /// The proposal as seed 004's `action_proposal`.
    pub proposal: Value,
    /// The guest's session.
    pub session: String,
    /// `None` while pending (or executing), else how it ended.
    pub outcome: Option<Outcome>,
}

/// Why a mediator call was refused.
#[derive(Debug, thiserror::Error)]
pub enum MediatorError {
    /// The guest's proposal does not fit.
    #[error("proposal refused: {0}")]
    Proposal(#[from] ProposalError),
    /// The session has too many undecided proposals.
    #[error("session {session} already has {limit} proposals waiting for a decision")]
    TooManyPending {
        /// The session.
        session: String,
        /// The bound.
        limit: usize,
    },
    /// No such proposal (or not the caller's).
    #[error("no proposal {0}")]
    UnknownProposal(String),
    /// A proposal with this id exists already.
    #[error("proposal {0} exists already")]
    DuplicateProposal(String),
    /// The session ended: nothing it proposes can be decided.
    #[error("session {0} has ended: nothing it proposes can be decided")]
    SessionEnded(String),
    /// The witness did not record the decision or mode change: it did not
    /// take effect.
    #[error("the decision did not take effect: {0}")]
    Witness(String),
    /// The policy does not let this operator make this decision or mode
    /// change (as it would not let them approve the proposing task): it did
    /// not take effect.
    #[error("refused by the policy: {0}")]
    Forbidden(String),
    /// The proposal was decided already.
    #[error("proposal {0} is not waiting for a decision")]
    NotPending(String),
    /// Approving a credential-like text needs an acknowledgement.
    #[error(
        "proposal {0} carries credential_warning: approving it needs the operator to acknowledge the credential"
    )]
    CredentialNotAcknowledged(String),
    /// A rejection's reason is empty, too long, or has control characters.
    #[error("a rejection needs a reason of 1 to 500 characters without control characters")]
    BadReason,
    /// No executor is configured.
    #[error("no HID executor is configured: EXECUTE cannot be armed")]
    NoDevice,
    /// Re-arming outside EXECUTE.
    #[error("re-arming needs EXECUTE mode; the mode is {0}")]
    NotInExecute(Mode),
    /// Arming failed: the mode did not change (or execution stays halted).
    #[error("arming refused: {0}")]
    ArmRefused(#[source] DeviceError),
    /// The session log failed: nothing that needed logging happened.
    #[error(transparent)]
    Log(#[from] LogError),
}

#[derive(Debug)]
enum State {
    Pending,
    Executing,
    Done(Outcome),
}

#[derive(Debug)]
struct Record {
    proposal: Proposal,
    mode: Mode,
    state: State,
}

#[derive(Debug)]
struct Inner {
    mode: Mode,
    execution: Execution,
    records: HashMap<ProposalId, Record>,
    order: Vec<ProposalId>,
    device_status: Option<DeviceStatus>,
    /// Sessions closed lately: a proposal of one is refused.
    closed: ClosedSessions,
}

/// The sessions closed in the last [`ClosedSessions::KEPT_FOR`] (at most
/// [`ClosedSessions::MOST`] of them): a guest's proposal can reach the
/// mediator after its session was closed (its call outlived the task's
/// deadline on a blocking thread), and must not be recorded then.
#[derive(Debug, Default)]
struct ClosedSessions {
    names: std::collections::HashSet<String>,
    order: std::collections::VecDeque<(Instant, String)>,
}

impl ClosedSessions {
    const KEPT_FOR: Duration = Duration::from_secs(600);
    const MOST: usize = 100_000;

    fn insert(&mut self, session: &str) {
        let now = Instant::now();
        while let Some((at, _)) = self.order.front()
            && (now.duration_since(*at) > Self::KEPT_FOR || self.order.len() >= Self::MOST)
        {
            if let Some((_, name)) = self.order.pop_front() {
                self.names.remove(&name);
            }
        }
        if self.names.insert(session.to_owned()) {
            self.order.push_back((now, session.to_owned()));
        }
    }

    fn contains(&self, session: &str) -> bool {
        self.names.contains(session)
    }
}

#[derive(Debug)]
struct Exec {
    device: Option<Device>,
    /// When the device answered the last action.
    last_action: Option<Instant>,
}

/// The HID mediator. Share it (`Arc`) between the guest-facing host calls
/// and the operator's interfaces.
///
/// Locks are taken in one order: `exec` (held across device I/O, so
/// executions run one at a time in approval order), then `inner` (never
/// held across device I/O), then `log`.
#[derive(Debug)]
pub struct Mediator {
    config: MediatorConfig,
    exec: Mutex<Exec>,
    inner: Mutex<Inner>,
    changed: Condvar,
    log: Mutex<SessionLog>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Mediator {
    /// A mediator in OBSERVE mode writing to `log`. When a device is
    /// configured and reachable, it is told OBSERVE at once (it may still be
    /// in EXECUTE from an earlier run); an unreachable device is not an
    /// error here (arming will say).
    pub fn start(log: SessionLog, config: MediatorConfig) -> Self {
        let mut exec = Exec {
            device: None,
            last_action: None,
        };
        if let Some(dc) = &config.device {
            match Device::open(dc.clone()).and_then(|mut d| d.set_mode(Mode::Observe).map(|_| d)) {
                Ok(d) => exec.device = Some(d),
                Err(e) => tracing::warn!(error = %e, "HID executor not told OBSERVE at start"),
            }
        }
        Self {
            config,
            exec: Mutex::new(exec),
            inner: Mutex::new(Inner {
                mode: Mode::Observe,
                execution: Execution::Off,
                records: HashMap::new(),
                order: Vec::new(),
                device_status: None,
                closed: ClosedSessions::default(),
            }),
            changed: Condvar::new(),
            log: Mutex::new(log),
        }
    }

    /// Asks the witness (if any) to record a decision before it takes
    /// effect.
    fn witness_decided(&self, decided: &witness::Decided<'_>) -> Result<(), MediatorError> {
        match &self.config.witness {
            Some(w) => w.decided(decided).map_err(|e| {
                tracing::warn!(proposal = %decided.proposal, error = %e, "HID decision refused or not recorded");
                witness_error(e)
            }),
            None => Ok(()),
        }
    }

    /// Asks the witness (if any) to record an approved proposal's end; on
    /// failure, the reason execution must halt.
    fn witness_finished(&self, finished: &witness::Finished<'_>) -> Result<(), String> {
        match &self.config.witness {
            Some(w) => w.finished(finished).map_err(|e| {
                tracing::error!(proposal = %finished.proposal, error = %e, "HID execution not recorded");
                format!(
                    "the end of proposal {} could not be recorded: {e}",
                    finished.proposal
                )
            }),
            None => Ok(()),
        }
    }

    fn append(&self, event: Event) -> Result<crate::log::LogEntry, LogError> {
        lock(&self.log).append(event)
    }

    /// The mode, the execution state and the last device status.
    pub fn status(&self) -> Status {
        let inner = lock(&self.inner);
        Status {
            mode: inner.mode,
            execution: inner.execution.clone(),
            device_status: inner.device_status.clone(),
        }
    }

    /// Every proposal this mediator holds, oldest first.
    pub fn proposals(&self) -> Vec<ProposalView> {
        let inner = lock(&self.inner);
        inner
            .order
            .iter()
            .filter_map(|id| inner.records.get(id))
            .map(|r| ProposalView {
                proposal: r.proposal.to_contract(r.mode),
                session: r.proposal.session.clone(),
                outcome: match &r.state {
                    State::Done(o) => Some(o.clone()),
                    State::Pending | State::Executing => None,
                },
            })
            .collect()
    }

    /// Reads the session log back and verifies its chain.
    ///
    /// # Errors
    ///
    /// As [`SessionLog::verify`].
    pub fn verify_log(&self) -> Result<crate::log::Verified, LogError> {
        lock(&self.log).verify()
    }

    /// A guest proposes an action. Returns the proposal's id; the guest then
    /// [`waits`](Self::wait) for the outcome.
    ///
    /// # Errors
    ///
    /// [`MediatorError::Proposal`] (also logged as ERROR),
    /// [`MediatorError::TooManyPending`], [`MediatorError::Log`].
    pub fn propose(
        &self,
        session: &str,
        request: ProposalRequest,
    ) -> Result<ProposalId, MediatorError> {
        self.propose_as(session, ProposalId::new(), request)
    }

    /// [`Mediator::propose`] under an id chosen beforehand (the host names
    /// the proposal in the receipt of the guest's call before it reaches
    /// the mediator).
    ///
    /// # Errors
    ///
    /// As [`Mediator::propose`]; [`MediatorError::DuplicateProposal`] when
    /// `id` is taken.
    pub fn propose_as(
        &self,
        session: &str,
        id: ProposalId,
        request: ProposalRequest,
    ) -> Result<ProposalId, MediatorError> {
        let mut inner = lock(&self.inner);
        if inner.closed.contains(session) {
            return Err(MediatorError::SessionEnded(session.to_owned()));
        }
        if inner.records.contains_key(&id) {
            return Err(MediatorError::DuplicateProposal(id.to_string()));
        }
        let mode = inner.mode;
        let proposal = match proposal::check(session, id, request, mode) {
            Ok(p) => p,
            Err(e) => {
                let mut details = Map::new();
                details.insert("session_id".into(), json!(bounded(session, 256)));
                details.insert(
                    "error_message".into(),
                    json!(bounded(&format!("proposal refused: {e}"), 1000)),
                );
                self.append(host_event(EventType::Error, mode, details))?;
                return Err(e.into());
            }
        };
        let pending = inner
            .records
            .values()
            .filter(|r| r.proposal.session == session && matches!(r.state, State::Pending))
            .count();
        if pending >= self.config.max_pending_per_session {
            return Err(MediatorError::TooManyPending {
                session: session.to_owned(),
                limit: self.config.max_pending_per_session,
            });
        }
        let mut event = host_event(
            EventType::Proposal,
            mode,
            proposal_details(&proposal, self.config.digest_key.as_deref()),
        );
        event.proposal_id = Some(proposal.id.to_string());
        self.append(event)?;
        let state = match mode {
            Mode::Observe => State::Done(Outcome::NotExecuted {
                mode,
                reason: "OBSERVE mode: nothing proposed is executed".into(),
            }),
            Mode::Suggest | Mode::Execute => State::Pending,
        };
        let id = proposal.id.clone();
        inner.order.push(id.clone());
        inner.records.insert(
            id.clone(),
            Record {
                proposal,
                mode,
                state,
            },
        );
        self.changed.notify_all();
        Ok(id)
    }

    /// Waits up to `timeout` for the outcome of `session`'s proposal `id`.
    /// [`Outcome::TimedOut`] leaves it pending: wait again, or let the
    /// session end ([`Mediator::close_session`]).
    ///
    /// # Errors
    ///
    /// [`MediatorError::UnknownProposal`] when `id` is not one of `session`'s.
    pub fn wait(
        &self,
        session: &str,
        id: &ProposalId,
        timeout: Duration,
    ) -> Result<Outcome, MediatorError> {
        let deadline = Instant::now() + timeout;
        let mut inner = lock(&self.inner);
        loop {
            let Some(record) = inner
                .records
                .get(id)
                .filter(|r| r.proposal.session == session)
            else {
                return Err(MediatorError::UnknownProposal(id.to_string()));
            };
            if let State::Done(outcome) = &record.state {
                return Ok(outcome.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Outcome::TimedOut);
            }
            inner = self
                .changed
                .wait_timeout(inner, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A witness's refusal as the mediator reports it.
fn witness_error(e: WitnessError) -> MediatorError {
    match e {
        WitnessError::Forbidden(m) => MediatorError::Forbidden(m),
        e @ WitnessError::Invalid(_) => MediatorError::Witness(e.to_string()),
        WitnessError::Failed(m) => MediatorError::Witness(m),
    }
}

/// The record of a pending proposal.
fn pending<'a>(inner: &'a mut Inner, id: &ProposalId) -> Result<&'a mut Record, MediatorError> {
    let record = inner
        .records
        .get_mut(id)
        .ok_or_else(|| MediatorError::UnknownProposal(id.to_string()))?;
    if !matches!(record.state, State::Pending) {
        return Err(MediatorError::NotPending(id.to_string()));
    }
    Ok(record)
}

/// An operator's decision on proposal `proposal`, as the log records it.
fn decision_event(
    mode: Mode,
    operator: &impl std::fmt::Display,
    proposal: &impl std::fmt::Display,
    details: Map<String, Value>,
) -> Event {
    Event {
        event_type: EventType::Decision,
        mode,
        operator_id: operator.to_string(),
        proposal_id: Some(proposal.to_string()),
        execution_id: None,
        details,
    }
}

fn host_event(event_type: EventType, mode: Mode, details: Map<String, Value>) -> Event {
    Event {
        event_type,
        mode,
        operator_id: HOST_OPERATOR.into(),
        proposal_id: None,
        execution_id: None,
        details,
    }
}

/// Why the host withdraws a proposal.
const WITHDRAWN: &str = "the session ended before a decision";

/// The shortest time between actions.
const MIN_DELAY: Duration = Duration::from_millis(MIN_ACTION_DELAY_MS);

#[cfg(test)]
mod tests;
