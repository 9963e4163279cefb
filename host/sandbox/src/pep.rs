//! The policy enforcement point's hook: every host call a capability makes
//! is described as a [`Call`] and passed to the task's [`Governor`] before
//! it is dispatched.
//!
//! Where the hook sits, per call kind (one choke point, [`Pep::check`]):
//!
//! | calls | hook |
//! |---|---|
//! | `hcp:capability/{log,artifacts,checkpoints,instrument}` | at the top of each host function (`units/`) |
//! | `wasi:filesystem/types` `*-at` (open, stat, mkdir, unlink, rename, link, symlink, readlink, set-times, metadata-hash) | a governed view ([`crate::fs`]) linked in place of the stock interface, delegating to it |
//! | bytes written into files (`write`, output streams of files, `set-size` growth) | the same view, through a write meter ([`crate::fs_write`]) |
//! | TCP and UDP socket creation | a governed view of `tcp-create-socket`, `udp-create-socket` ([`crate::net::sockets`]) |
//! | TCP bind, connect, listen, accept; UDP | `socket_addr_check` of the WASI context |
//! | `wasi:sockets/ip-name-lookup` | a governed view delegating to the stock one |
//! | outgoing `wasi:http` | `WasiHttpHooks::send_request` |
//!
//! A denial reaches the guest as an error value: `host-error::denied` with
//! the WIT reason code for hcp calls, `access` / `access-denied` /
//! `HTTP-request-denied` for WASI calls. Nothing the guest sends makes the
//! host panic.
//!
//! [`PolicyGovernor`] is the governor hosts use: it decides with
//! `hcp_policy::pep::decide` over the session's compiled scope, charges the
//! session's counters, and hands every verdict, allow and deny, to a
//! [`VerdictSink`] (the receipt pipeline) without waiting for it.

pub use hcp_policy::pep::{
    ARGS_PREFIX_BYTES, Args, BudgetCaps, Call, Counters, Decision, FsAccess, FsWriteArgs, FullArgs,
    InstrumentArgs, Op, PlanArgs, Scope, SessionFacts, SettingArgs, Signals, Surface,
};

use hcp_contracts::manifest::{Manifest, SafetyEnvelope};
use hcp_contracts::{DataClass, RiskLevel};
use hcp_policy::files::ThreatScan;
use hcp_policy::pep::ScanMode;
use hcp_receipts::Digest;
use hcp_receipts::{Verdict, reason};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// A denied call, as the sandbox turns it into the guest's error value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// A reason code of `hcp_receipts::reason`.
    pub reason: &'static str,
    /// Detail for the guest and the task log (no host secrets).
    pub message: String,
}

/// The policy enforcement point of one task. Called before every host call
/// is dispatched, on the task's own thread: it must decide quickly and never
/// wait on I/O (record verdicts asynchronously).
pub trait Governor: Send + Sync + std::fmt::Debug + 'static {
    /// Decides `call`: `Ok` with the threat signals it recorded (the call
    /// proceeds), or the denial.
    ///
    /// # Errors
    ///
    /// The call is denied.
    fn check(&self, call: &Call<'_>) -> Result<Signals, Denial>;

    /// Why the task must stop now, if it must: the sandbox traps the guest
    /// and the task fails `safety_violation` with this message.
    fn stop_reason(&self) -> Option<String> {
        None
    }

    /// The session's compiled scope, when the governor decides over one:
    /// what the operator's policy provides (`wasi:config` values) is read
    /// from it. `None`: nothing is provided.
    fn scope(&self) -> Option<&Arc<Scope>> {
        None
    }
}

/// Calls denied in a row for a spent budget (`BUDGET_EXCEEDED`) after which
/// the guest is stopped: a guest that keeps calling once its budget is gone
/// cannot fill the receipt log with denials.
pub const MAX_DENIALS_AFTER_BUDGET: u32 = 16;

/// Denies every call (`FAIL_CLOSED_ERROR`), saying why: the governor of a
/// session whose scope could not be built.
#[derive(Debug, Clone)]
pub struct DenyAll(pub String);

impl Governor for DenyAll {
    fn check(&self, _call: &Call<'_>) -> Result<Signals, Denial> {
        Err(Denial {
            reason: reason::FAIL_CLOSED_ERROR,
            message: self.0.clone(),
        })
    }
}

/// One decided call, for the receipt pipeline.
#[derive(Debug, Clone)]
pub struct DecidedCall<'a> {
    /// The session's scope.
    pub scope: Arc<Scope>,
    /// The call: whole, its text borrowed from the host call being
    /// decided, or bounded ([`Call::bounded`]) when its text is larger
    /// than [`ARGS_PREFIX_BYTES`].
    pub call: Call<'a>,
    /// When `call` is bounded: the hash, size, bytes and threat signals of
    /// the whole call.
    pub full: Option<FullArgs>,
    /// The counters the decision read.
    pub counters: Counters,
    /// When it was decided (Unix milliseconds).
    pub at_ms: u64,
    /// The verdict.
    pub verdict: Verdict,
    /// Its reason code.
    pub reason: &'static str,
    /// The risk level its receipt records.
    pub risk: RiskLevel,
}

impl DecidedCall<'_> {
    /// The same verdict, owning its call's text: for a sink that keeps it
    /// past [`VerdictSink::record`].
    pub fn into_owned(self) -> DecidedCall<'static> {
        DecidedCall {
            scope: self.scope,
            call: self.call.into_owned(),
            full: self.full,
            counters: self.counters,
            at_ms: self.at_ms,
            verdict: self.verdict,
            reason: self.reason,
            risk: self.risk,
        }
    }
}

/// Where a [`PolicyGovernor`] sends its verdicts.
pub trait VerdictSink: Send + Sync + 'static {
    /// Takes one verdict to record. Must not wait for it to be stored
    /// (hosts make it durable before they answer the task). The call's
    /// text is borrowed from the host call being decided: what the sink
    /// keeps of it past this call, it copies (all of it:
    /// [`DecidedCall::into_owned`]).
    fn record(&self, decided: DecidedCall<'_>);

    /// Whether verdicts can still be recorded. Once false, the governor
    /// denies every call (`FAIL_CLOSED_ERROR`): nothing runs unrecorded.
    fn healthy(&self) -> bool {
        true
    }
}

/// Discards verdicts: for tests and benchmarks that do not look at receipts.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoReceipts;

impl VerdictSink for NoReceipts {
    fn record(&self, _decided: DecidedCall<'_>) {}
}

/// Keeps verdicts in memory: for tests.
#[derive(Debug, Default)]
pub struct MemorySink {
    decided: Mutex<Vec<DecidedCall<'static>>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The verdicts so far, in order.
    pub fn decided(&self) -> Vec<DecidedCall<'static>> {
        self.decided
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl VerdictSink for MemorySink {
    fn record(&self, decided: DecidedCall<'_>) {
        self.decided
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(decided.into_owned());
    }
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The governor of one session: `hcp_policy::pep::decide` over its scope
/// and counters, every verdict to a [`VerdictSink`].
pub struct PolicyGovernor {
    scope: Arc<Scope>,
    counters: Mutex<Counters>,
    sink: Arc<dyn VerdictSink>,
    /// `BUDGET_EXCEEDED` denials in a row, and the last one's message.
    spent: Mutex<(u32, String)>,
}

impl std::fmt::Debug for PolicyGovernor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyGovernor")
            .field("session", &self.scope.facts().session_id)
            .finish_non_exhaustive()
    }
}

impl PolicyGovernor {
    /// A governor for the session `scope` was compiled for.
    pub fn new(scope: Arc<Scope>, sink: Arc<dyn VerdictSink>) -> Self {
        Self {
            scope,
            counters: Mutex::new(Counters::default()),
            sink,
            spent: Mutex::new((0, String::new())),
        }
    }

    /// The session's scope.
    pub fn scope(&self) -> &Arc<Scope> {
        &self.scope
    }

    /// What the session has spent so far.
    pub fn counters(&self) -> Counters {
        *self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Revokes the session: every later call is denied (`DELEGATION_INVALID`).
    pub fn revoke(&self) {
        self.counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .revoked = true;
    }

    /// Decides `call` now, charges the counters, and returns the decision
    /// and the counters it read (for benchmarks and tests; hosts use
    /// [`Governor::check`]).
    pub fn decide(&self, call: &Call<'_>) -> (Decision, Counters, u64) {
        let at_ms = now_ms();
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let before = *counters;
        let mut decision = hcp_policy::pep::decide(&self.scope, &before, call, at_ms);
        if !self.sink.healthy() {
            decision = Decision {
                verdict: Verdict::Deny,
                reason: reason::FAIL_CLOSED_ERROR,
                message: "verdicts cannot be recorded; the host refuses every call".into(),
                signals: Signals::NONE,
            };
        }
        counters.charge(call, decision.verdict);
        drop(counters);
        (decision, before, at_ms)
    }
}

impl Governor for PolicyGovernor {
    fn scope(&self) -> Option<&Arc<Scope>> {
        Some(&self.scope)
    }

    fn check(&self, call: &Call<'_>) -> Result<Signals, Denial> {
        let (decision, counters, at_ms) = self.decide(call);
        {
            let mut spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
            if decision.reason == reason::BUDGET_EXCEEDED {
                spent.0 = spent.0.saturating_add(1);
                spent.1.clone_from(&decision.message);
            } else {
                *spent = (0, String::new());
            }
        }
        // A large call is recorded bounded, with the facts of the whole
        // (a call without a canonical form is handed over whole: the
        // writer reports it).
        let (recorded, full) = match call.bounded() {
            Some(bounded) => match FullArgs::of(call, decision.signals) {
                Ok(full) => (bounded, Some(full)),
                Err(_) => (call.clone(), None),
            },
            None => (call.clone(), None),
        };
        self.sink.record(DecidedCall {
            scope: self.scope.clone(),
            call: recorded,
            full,
            counters,
            at_ms,
            verdict: decision.verdict,
            reason: decision.reason,
            risk: decision.risk(&self.scope),
        });
        if decision.allowed() {
            Ok(decision.signals)
        } else {
            Err(Denial {
                reason: decision.reason,
                message: decision.message,
            })
        }
    }

    fn stop_reason(&self) -> Option<String> {
        let spent = self.spent.lock().unwrap_or_else(|e| e.into_inner());
        (spent.0 >= MAX_DENIALS_AFTER_BUDGET).then(|| {
            format!(
                "stopped after {} host calls in a row were denied for a spent budget (BUDGET_EXCEEDED): {}",
                spent.0, spent.1
            )
        })
    }
}

/// The hook as the sandbox's units hold it: the task's governor, or none
/// when the sandbox runs with enforcement off (benchmarks only).
#[derive(Clone)]
pub(crate) struct Pep {
    governor: Option<Arc<dyn Governor>>,
}

impl Pep {
    pub(crate) fn new(governor: Option<Arc<dyn Governor>>) -> Self {
        Self { governor }
    }

    /// The session's scope (see [`Governor::scope`]).
    pub(crate) fn scope(&self) -> Option<&Arc<Scope>> {
        self.governor.as_ref().and_then(|g| g.scope())
    }

    /// Whether calls are governed (enforcement on).
    pub(crate) fn is_on(&self) -> bool {
        self.governor.is_some()
    }

    /// Why the task must stop now (see [`Governor::stop_reason`]).
    pub(crate) fn stop_reason(&self) -> Option<String> {
        self.governor.as_ref().and_then(|g| g.stop_reason())
    }

    /// The one choke point: decides `call` before dispatch.
    pub(crate) fn check(&self, call: &Call<'_>) -> Result<Signals, Denial> {
        match &self.governor {
            Some(g) => g.check(call),
            None => Ok(Signals::NONE),
        }
    }
}

/// A task as a host without a gate runs it (`hcp run`, tests, benchmarks):
/// who, what, until when.
#[derive(Debug, Clone)]
pub struct Standalone<'a> {
    /// The task.
    pub task_id: &'a str,
    /// The session.
    pub session_id: &'a str,
    /// The caller (not authenticated).
    pub caller: &'a str,
    /// Risk level.
    pub risk_level: RiskLevel,
    /// Data classification.
    pub data_classification: DataClass,
    /// The envelope (the manifest's).
    pub envelope: &'a SafetyEnvelope,
    /// Expiry, Unix milliseconds.
    pub expires_at_ms: u64,
    /// Budgets.
    pub budgets: BudgetCaps,
}

/// The largest integer receipts carry (2^53 − 1): "no budget".
pub const UNLIMITED: u64 = (1 << 53) - 1;

impl Standalone<'_> {
    /// The session facts of this task of `manifest`.
    pub fn facts(&self, manifest: &Manifest) -> SessionFacts {
        SessionFacts {
            budgets: self.budgets,
            caller: self.caller.to_owned(),
            capability: manifest.id(),
            data_classification: self.data_classification,
            envelope: self.envelope.clone(),
            expires_at_ms: self.expires_at_ms,
            limits: hcp_policy::pep::CallLimits::of(manifest),
            risk_level: self.risk_level,
            session_id: self.session_id.to_owned(),
            surface: Surface::of(&manifest.grants),
            task_id: self.task_id.to_owned(),
        }
    }
}

/// The dispatch settings of hosts without a policy set: terminal escapes
/// and shell metacharacters denied, prompt injection recorded.
pub const DEFAULT_SCAN: ThreatScan = ThreatScan {
    terminal_escape: ScanMode::Deny,
    prompt_injection: ScanMode::Record,
    shell_metacharacters: ScanMode::Deny,
};

impl PolicyGovernor {
    /// A governor over `facts` with [`DEFAULT_SCAN`] and no policy set (its
    /// receipts name the policy hash of the text `hcp-sandbox:default`).
    ///
    /// # Errors
    ///
    /// The facts do not compile.
    pub fn standalone(
        facts: SessionFacts,
        sink: Arc<dyn VerdictSink>,
    ) -> Result<Self, hcp_policy::pep::ScopeError> {
        let scope =
            Scope::with_settings(facts, DEFAULT_SCAN, &[], Digest::of(b"hcp-sandbox:default"))?;
        Ok(Self::new(Arc::new(scope), sink))
    }
}
