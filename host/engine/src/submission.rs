//! The one way a task enters the engine, whatever its transport.
//!
//! A transport (the HTTP API, the command line, AMQP next) does two
//! things: it parses what it received once, into a [`TaskMessage`], and it
//! says how the caller was authenticated ([`Auth`]). It hands both to
//! [`Host::submit_task`] and delivers the [`Submission`] it gets back: the
//! answer (an [`Answer`], typed: an HCP message or a `job_status`, which
//! the transport serializes), what it says ([`AnswerKind`], from which a
//! transport picks its status, never from the answer's strings), and
//! whether the task is ready to run now.

use super::Host;
use super::limits::Over;
use crate::store::{CheckedPayload, Submitted, TaskRecord};
use anyhow::Result;
use hcp_contracts::answer::Answer;
use hcp_contracts::message::{Envelope, MessageType, RejectReason, TaskRejected, TaskSubmit};
use hcp_contracts::{Problem, problem};
use serde_json::Value;

/// How the caller was authenticated.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// By its transport: the local command line acting with the data
    /// directory's authority, naming the caller.
    Transport(&'a str),
    /// By a bearer credential checked against `callers.json`.
    Bearer(&'a str),
    /// By a bearer credential, as [`Auth::Bearer`], that reached the host
    /// in plaintext from beyond loopback (HTTP without TLS, served so on
    /// purpose): the task and its data crossed a network in clear, so a
    /// task of data above T2 is refused (`forbidden`; seed 000: T3 data is
    /// encrypted in transit).
    BearerInClear(&'a str),
    /// By the message broker: the AMQP `user-id` property, which RabbitMQ
    /// checks against the connection's login, mapped to a caller by
    /// `amqp_user` in `callers.json`; `None` when the message carries none.
    Broker(Option<&'a str>),
}

impl Auth<'_> {
    /// The caller these credentials prove, if any, for a message that
    /// names `caller_id`; otherwise why not.
    pub(crate) fn caller<'p>(
        self,
        policy: &'p hcp_policy::PolicySet,
        caller_id: &str,
    ) -> std::result::Result<&'p hcp_policy::Caller, String> {
        let unknown = || {
            format!("caller {caller_id:?} is not authenticated: unknown caller or wrong credential")
        };
        match self {
            Self::Transport(id) if id != caller_id => Err(format!(
                "the task names caller_id {caller_id:?} but was submitted as {id:?}"
            )),
            Self::Transport(id) => policy.caller(id).ok_or_else(unknown),
            Self::Bearer(credential) | Self::BearerInClear(credential) => policy
                .authenticate(caller_id, credential)
                .map_err(|_| unknown()),
            Self::Broker(None) => Err(
                "the message carries no user-id: over AMQP the caller is the broker-checked \
                 user-id property"
                    .to_owned(),
            ),
            Self::Broker(Some(user)) => match policy.caller_for_amqp_user(user) {
                None => Err(format!(
                    "broker user {user:?} is no caller's amqp_user in callers.json"
                )),
                Some(c) if c.id.as_str() != caller_id => Err(format!(
                    "the task names caller_id {caller_id:?} but broker user {user:?} is caller {:?}",
                    c.id.as_str()
                )),
                Some(c) => Ok(c),
            },
        }
    }

    /// The refusal of a task whose data may not cross the transport it
    /// came by: above T2 over a credential sent in clear beyond loopback.
    fn refuses_data(self, submit: &TaskSubmit) -> Option<TaskRejected> {
        let data = submit
            .constraints
            .as_ref()
            .and_then(|c| c.data_classification)?;
        (matches!(self, Self::BearerInClear(_)) && data > hcp_contracts::DataClass::T2).then(|| {
            refusal(
                RejectReason::Forbidden,
                format!(
                    "data classification {data} must be encrypted in transit, and this task came \
                     in plaintext from beyond loopback: submit it over HTTPS (hcp serve \
                     --tls-cert/--tls-key) or from loopback"
                ),
                None,
            )
        })
    }
}

/// A `task_submit` as a transport received it, parsed once at its edge:
/// the envelope checked against its schema, the payload read as a
/// [`TaskSubmit`]. The message as received is kept: it is what the store
/// records and what evidence packs carry.
#[derive(Debug, Clone)]
pub struct TaskMessage {
    message: Value,
    envelope: Envelope,
    submit: TaskSubmit,
}

/// Why a message is not a `task_submit` the engine can take.
#[derive(Debug, Clone)]
pub enum NotATask {
    /// Not an HCP message (its envelope or payload breaks the schema).
    Invalid(Vec<Problem>),
    /// An HCP message of another type.
    WrongType(MessageType),
    /// The payload does not read as a `task_submit`.
    Payload(Vec<Problem>),
}

impl NotATask {
    /// The `task_rejected` payload that answers it.
    pub fn refusal(&self) -> TaskRejected {
        let reason_message = match self {
            Self::Invalid(p) => format!("not a valid HCP message:\n{}", problem::list(p)),
            Self::WrongType(kind) => {
                format!("expected a task_submit message, got {}", kind.as_str())
            }
            Self::Payload(p) => problem::list(p),
        };
        refusal(RejectReason::InvalidInput, reason_message, None)
    }
}

impl TaskMessage {
    /// Checks a received message.
    ///
    /// # Errors
    ///
    /// It is not a valid HCP message, not a `task_submit`, or its payload
    /// does not read as one.
    pub fn parse(message: Value) -> Result<Self, NotATask> {
        let envelope = Envelope::parse(&message).map_err(NotATask::Invalid)?;
        if envelope.kind != MessageType::TaskSubmit {
            return Err(NotATask::WrongType(envelope.kind));
        }
        let submit = envelope.payload_as().map_err(NotATask::Payload)?;
        Ok(Self {
            message,
            envelope,
            submit,
        })
    }

    /// The sender's `message_id`.
    pub fn message_id(&self) -> &str {
        &self.envelope.message_id
    }

    /// The payload.
    pub fn submit(&self) -> &TaskSubmit {
        &self.submit
    }

    /// The message as received.
    pub fn message(&self) -> &Value {
        &self.message
    }

    /// The size of the message as the store records it (its JSON text).
    pub fn size(&self) -> u64 {
        /// Counts what is written, keeping none of it.
        struct Count(u64);
        impl std::io::Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len() as u64;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut n = Count(0);
        // Writing a JSON value into a counter cannot fail.
        let _ = serde_json::to_writer(&mut n, &self.message);
        n.0
    }
}

/// What an answer says, typed: transports choose their status from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// `task_accepted`.
    Accepted,
    /// `task_rejected`, and why.
    Rejected(RejectReason),
    /// A `job_status`: the task waits (for an operator, equipment, or the
    /// gate).
    Waiting,
    /// `task_completed` or `task_failed` (a duplicate of a finished task
    /// whose gate answer was lost).
    Finished,
}

impl AnswerKind {
    /// What `answer` says.
    pub fn of(answer: &Answer) -> Self {
        match answer {
            Answer::Accepted(_) => Self::Accepted,
            Answer::Rejected(r) => Self::Rejected(r.payload.reason_code),
            Answer::Waiting(_) => Self::Waiting,
            Answer::Completed(_) | Answer::Failed(_) => Self::Finished,
        }
    }

    /// The task is answered for good at the gate or after: not waiting.
    pub fn is_final(self) -> bool {
        self != Self::Waiting
    }
}

/// What a submission came to.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The task, once recorded (not for messages refused before that).
    pub task_id: Option<String>,
    /// The answer: `task_accepted`, `task_rejected`, or (pending approval or
    /// queued for equipment) a `job_status`.
    pub answer: Answer,
    /// What the answer says.
    pub kind: AnswerKind,
    /// The caller had sent this message before: this is the original answer.
    pub duplicate: bool,
    /// Admitted and ready to run now.
    pub runnable: bool,
    /// Refused `rate_limited`: when the caller may submit again (HTTP
    /// answers it as `Retry-After`).
    pub retry_after: Option<std::time::Duration>,
}

impl Submission {
    /// The gate's answer to `task`, recorded (not a duplicate).
    pub(super) fn answered(task: &TaskRecord, answer: Answer, runnable: bool) -> Self {
        Self {
            task_id: Some(task.task_id.clone()),
            kind: AnswerKind::of(&answer),
            answer,
            duplicate: false,
            runnable,
            retry_after: None,
        }
    }

    /// The answer to a message refused before any task was recorded.
    pub fn refused(payload: TaskRejected) -> Self {
        Self {
            task_id: None,
            kind: AnswerKind::Rejected(payload.reason_code),
            answer: Answer::rejected(payload),
            duplicate: false,
            runnable: false,
            retry_after: None,
        }
    }

    /// The answer to a submission over its caller's limits
    /// ([`super::limits`]): `rate_limited`, with when to try again;
    /// nothing was recorded.
    fn limited(caller: &str, over: &Over) -> Self {
        let after = over.retry_after();
        let seconds = after.as_secs() + u64::from(after.subsec_nanos() > 0);
        let seconds = seconds.max(1);
        let why = match over {
            Over::Rate(_) => format!(
                "{caller} submits faster than budgets.json submissions allows \
                 (per_second, burst); nothing was recorded"
            ),
            Over::Bytes {
                used, quota, size, ..
            } => format!(
                "{caller}'s submissions recorded {used} bytes in the last 24 hours; this one \
                 ({size} bytes) would pass budgets.json submissions stored_bytes_per_day \
                 ({quota}); nothing was recorded"
            ),
        };
        let mut payload = refusal(RejectReason::RateLimited, why, None);
        payload.suggestion = Some(format!("submit again in {seconds} s"));
        Self {
            retry_after: Some(std::time::Duration::from_secs(seconds)),
            ..Self::refused(payload)
        }
    }
}

/// The most bytes of a refusal's `reason_message`: a message that quotes
/// what the caller sent (a schema's error quotes the value it refuses) is
/// cut there, so no submission makes its own answer and receipt large.
const MAX_REASON_BYTES: usize = 4096;

/// `message` cut to [`MAX_REASON_BYTES`] on a character boundary, saying
/// so.
fn bounded_reason(mut message: String) -> String {
    if message.len() <= MAX_REASON_BYTES {
        return message;
    }
    let size = message.len();
    let mut cut = MAX_REASON_BYTES;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message.push_str(&format!(" … (cut: {size} bytes in all)"));
    message
}

/// A `task_rejected` payload (its message bounded: [`MAX_REASON_BYTES`]).
pub fn refusal(
    reason_code: RejectReason,
    reason_message: String,
    level: Option<hcp_contracts::RiskLevel>,
) -> TaskRejected {
    TaskRejected {
        reason_code,
        reason_message: bounded_reason(reason_message),
        assessed_risk_level: level,
        suggestion: None,
    }
}

/// What a transport carries with a `task_submit` besides the message
/// ([`Host::submit_task_carried`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Carried<'a> {
    /// Where the answers go (AMQP's `reply_to`; `""` for a message without
    /// one): the task is recorded with its route.
    pub reply_to: Option<&'a str>,
    /// A Lamport clock the caller brought back from an answer (AMQP's
    /// `x-hcp-lamport`).
    pub lamport: Option<u64>,
    /// The transport, when the gate's receipt is to name it (`mcp/stdio`,
    /// `mcp/http`: the host made the `task_submit` of an MCP call).
    pub transport: Option<&'a str>,
}

impl Host {
    /// Parses `message` as a transport that holds raw JSON would
    /// ([`TaskMessage::parse`]) and takes it through [`Host::submit_task`];
    /// a message that is not a `task_submit` is answered `task_rejected`.
    ///
    /// # Errors
    ///
    /// Only host faults (the database); every refusal is a `task_rejected`.
    pub fn submit(&self, message: &Value, auth: Auth<'_>) -> Result<Submission> {
        match TaskMessage::parse(message.clone()) {
            Ok(m) => self.submit_task(m, auth),
            Err(not) => Ok(Submission::refused(not.refusal())),
        }
    }

    /// Takes a `task_submit` through the gate: the caller, before anything
    /// is recorded under its name; the task recorded once per `(caller_id,
    /// message_id)`; then admission (see [`super::admit`]). Every transport
    /// calls this.
    ///
    /// # Errors
    ///
    /// Only host faults (the database); every refusal is a `task_rejected`.
    pub fn submit_task(&self, message: TaskMessage, auth: Auth<'_>) -> Result<Submission> {
        self.submit_task_replying(message, auth, None)
    }

    /// [`Host::submit_task`] for a transport whose answers go to a queue
    /// (AMQP's `reply_to`): a new task is recorded with its route in one
    /// write, so no host that stops in between leaves a task without it
    /// (see [`crate::store::Store::submit_routed`]). The route starts out
    /// not this host's: the task is not started before the transport
    /// records it as its own ([`crate::store::Store::route_acked`]).
    ///
    /// # Errors
    ///
    /// Only host faults (the database); every refusal is a `task_rejected`.
    pub fn submit_task_replying(
        &self,
        message: TaskMessage,
        auth: Auth<'_>,
        reply_to: Option<&str>,
    ) -> Result<Submission> {
        self.submit_task_carried(
            message,
            auth,
            Carried {
                reply_to,
                lamport: None,
                transport: None,
            },
        )
    }

    /// [`Host::submit_task_replying`] with what else the transport carried
    /// ([`Carried`]): a Lamport clock is observed only once the caller is
    /// authenticated, and before anything is recorded, so the task's
    /// receipts come after the clock. A clock too far ahead of this host's
    /// ([`crate::evidence::ClockOutOfRange`]) is refused `invalid_input`,
    /// and nothing is recorded. (Observed before the caller was known, one
    /// message from any broker user moved the clock, also one answered
    /// `unauthorized`.)
    ///
    /// # Errors
    ///
    /// Only host faults (the database, the receipt writer); every refusal
    /// is a `task_rejected`.
    pub fn submit_task_carried(
        &self,
        message: TaskMessage,
        auth: Auth<'_>,
        carried: Carried<'_>,
    ) -> Result<Submission> {
        let submitted = self.gate_submission(message, auth, carried);
        // Every answer of the one submission path, counted once here
        // (`/metrics`: hcp_admission_decisions_total).
        if let Ok(s) = &submitted {
            let (decision, reason) = match s.kind {
                _ if s.duplicate => ("duplicate", ""),
                AnswerKind::Accepted => ("accepted", ""),
                AnswerKind::Rejected(r) => ("rejected", r.as_str()),
                AnswerKind::Waiting => ("waiting", ""),
                AnswerKind::Finished => ("finished", ""),
            };
            self.store.metrics().admission(decision, reason);
        }
        submitted
    }

    /// [`Host::submit_task_carried`], uncounted.
    fn gate_submission(
        &self,
        message: TaskMessage,
        auth: Auth<'_>,
        carried: Carried<'_>,
    ) -> Result<Submission> {
        let Carried {
            reply_to,
            lamport,
            transport,
        } = carried;
        let submit = &message.submit;
        // The whole gate decides under the policy in force now.
        let policy = self.policy();
        let caller = match auth.caller(&policy, &submit.caller_id) {
            Ok(caller) => caller,
            Err(who) => {
                return Ok(Submission::refused(refusal(
                    RejectReason::Unauthorized,
                    who,
                    None,
                )));
            }
        };
        // The caller's limits, before anything is recorded under its name.
        let size = message.size();
        let limits = policy.submission_limits(caller.id.as_str());
        if let Err(over) = self
            .meters
            .take(&self.store, caller.id.as_str(), &limits, size)?
        {
            return Ok(Submission::limited(caller.id.as_str(), &over));
        }
        // Refused before it is recorded, as an unauthenticated one is: it
        // is not kept either.
        if let Some(refused) = auth.refuses_data(submit) {
            return Ok(Submission::refused(refused));
        }
        if let Some(remote) = lamport
            && let Err(e) = self.observe_lamport(remote)
        {
            return match e.downcast_ref::<crate::evidence::ClockOutOfRange>() {
                Some(range) => Ok(Submission::refused(refusal(
                    RejectReason::InvalidInput,
                    format!("the Lamport clock the message brought: {range}"),
                    None,
                ))),
                None => Err(e),
            };
        }
        let _serialized = self.submit_lock(caller.id.as_str(), message.message_id());
        let record = phase!("submit.record");
        let replies = reply_to.map(|reply_to| crate::store::Replies {
            reply_to,
            correlation_id: message.message_id(),
        });
        let task = match self.store.submit_routed(
            caller.id.as_str(),
            message.message_id(),
            &submit.capability,
            &message.message,
            replies,
        )? {
            Submitted::Duplicate(task) => {
                // Nothing more was recorded.
                self.meters.unrecorded(caller.id.as_str(), size);
                let answered = self.duplicate(&policy, task.clone(), caller);
                return self.settle_submission(&task, answered);
            }
            Submitted::New(task) => task,
        };
        drop(record);
        // Checked once: the check travels with the task (to its run).
        let check = phase!("submit.check");
        let task = TaskRecord {
            checked: Some(CheckedPayload::of(message.submit)),
            ..task
        };
        drop(check);
        let answered = match task.checked() {
            Ok(Ok(checked)) => self.admit(&policy, &task, caller, checked, transport),
            Ok(Err(p)) => self.refuse_invalid(&policy, &task, caller, p, transport),
            Err(e) => Err(e),
        };
        self.settle_submission(&task, answered)
    }
}
