//! One task: its store, its WASI context built from the grants alone, its
//! deadline, and how its end (return value or trap) is reported.

use crate::bindings::hcp::capability::types as wit;
use crate::fs::FsPaths;
use crate::fs_write::WriteMeter;
use crate::limits::TaskLimiter;
use crate::net::{NetPolicy, http::GovernedHttp, socket_check};
use crate::pep::{Governor, Pep};
use crate::store::{StoredArtifact, TaskMeta, TaskStore};
use crate::tasklog::{LogSummary, TaskLog};
use crate::units::context::HcpCtx;
use hcp_contracts::manifest::{Access, Manifest};
use hcp_contracts::message::ErrorCode;
use hcp_contracts::{DataClass, RiskLevel};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// The data of one task's store.
pub(crate) struct TaskState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) http: WasiHttpCtx,
    pub(crate) http_hooks: GovernedHttp,
    pub(crate) net: Arc<NetPolicy>,
    pub(crate) limiter: TaskLimiter,
    pub(crate) hcp: HcpCtx,
    /// Guest paths of open descriptors, for the governed filesystem.
    pub(crate) fs_paths: FsPaths,
    /// Bytes written into files, against the byte budget.
    pub(crate) fs_writes: Arc<WriteMeter>,
}

impl WasiView for TaskState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for TaskState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

/// What the host hands a capability to run: an admitted task.
#[derive(Debug, Clone)]
pub struct TaskRequest {
    /// Host-assigned task id.
    pub task_id: String,
    /// Session id.
    pub session_id: String,
    /// Authenticated caller.
    pub caller_id: String,
    /// The caller's intent.
    pub intent: String,
    /// Inputs, already valid against `input_schema`.
    pub inputs: Value,
    /// The `constraints` object.
    pub constraints: Value,
    /// The `context` object.
    pub context: Option<Value>,
    /// Checkpoint to resume from.
    pub resume: Option<crate::store::ResumeFrom>,
    /// Approved risk level.
    pub risk_level: RiskLevel,
    /// Approved data classification.
    pub data_classification: DataClass,
    /// When the task is stopped with `timeout`.
    pub deadline: Duration,
    /// The session's effective safety envelope: the manifest's, tightened by
    /// the operator's policy. Every instrument command is checked against it.
    pub envelope: hcp_contracts::manifest::SafetyEnvelope,
    /// The session's policy enforcement point: every host call of the task
    /// passes it before dispatch (see [`crate::pep`]). Hosts use a
    /// [`crate::pep::PolicyGovernor`] whose sink records receipts.
    pub governor: Arc<dyn Governor>,
    /// The host's HID mediator; needed when `grants.devices` names `hid`.
    pub hid: Option<std::sync::Arc<dyn crate::HidBroker>>,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunResult {
    /// `run` returned `ok` with outputs that parse as a JSON object within
    /// `limits.output_bytes`. Schemas are the task engine's to check.
    Completed {
        /// The outputs.
        outputs: Value,
        /// Warnings the capability reported.
        warnings: Vec<String>,
    },
    /// `run` returned `err`, trapped, ran out of time or resources.
    Failed(RunFailure),
}

/// A failed task, ready for `task_failed`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFailure {
    /// Standard error code.
    pub code: ErrorCode,
    /// Explanation.
    pub message: String,
    /// Phase that failed.
    pub phase: Option<String>,
    /// Step that failed.
    pub step: Option<u64>,
    /// Whether a resubmission may succeed.
    pub recoverable: bool,
    /// Partial outputs (a JSON object).
    pub partial_outputs: Option<Value>,
}

impl RunFailure {
    /// A failure with a code and a message only.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            phase: None,
            step: None,
            recoverable: false,
            partial_outputs: None,
        }
    }
}

/// Everything a task left: result, log, artifacts, checkpoints, counters.
#[derive(Debug, Clone)]
pub struct TaskRun {
    /// How it ended.
    pub result: RunResult,
    /// The task log.
    pub log: LogSummary,
    /// Artifacts created (also on failure).
    pub artifacts: Vec<StoredArtifact>,
    /// Checkpoint ids saved, in order.
    pub checkpoints: Vec<String>,
    /// hcp host calls made.
    pub host_calls: u64,
    /// Denials and limit events.
    pub risk_events: Vec<String>,
    /// Wall time from instantiation to the end.
    pub duration: Duration,
}

impl TaskRun {
    /// A task that ended before its guest ran, or whose thread gave no
    /// answer: nothing logged, made or called.
    pub(crate) fn failed_before(failure: RunFailure) -> Self {
        Self {
            result: RunResult::Failed(failure),
            log: TaskLog::new(0).finish(),
            artifacts: Vec::new(),
            checkpoints: Vec::new(),
            host_calls: 0,
            risk_events: Vec::new(),
            duration: Duration::ZERO,
        }
    }
}

/// Builds the WASI context from the grants alone: no args, no inherited
/// environment, closed stdin, stdout/stderr into the task log, only the
/// granted directories, only the granted destinations.
///
/// # Ambient authority
///
/// Reads the host's values of the environment variables `grants.env` names,
/// and opens the granted directories (see [`crate::grant_dir`]).
pub(crate) fn wasi_ctx(
    manifest: &Manifest,
    log: &TaskLog,
    net: &Arc<NetPolicy>,
    pep: &Pep,
) -> Result<WasiCtx, Unavailable> {
    let grants = &manifest.grants;
    let mut b = WasiCtxBuilder::new();
    // Filesystem calls are made on the task's own thread, not handed to
    // the blocking pool and back one by one: a task granted a directory
    // runs on a thread of its own ([`crate::PreparedCapability::run`]),
    // and one granted none has no file or directory to call.
    b.allow_blocking_current_thread(true);
    b.stdout(log.stdout()).stderr(log.stderr());
    for name in &grants.env {
        if let Ok(value) = std::env::var(name) {
            b.env(name, value);
        }
    }
    for dir in &grants.filesystem {
        let perms = match dir.access {
            Access::ReadOnly => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        // Opened without following a link, checked against the recorded
        // directory, then handed over as that very handle.
        let opened = crate::grant_dir::open(dir)?;
        b.preopened_dir(opened.proc_path(), &dir.guest_path, perms)
            .map_err(|e| Unavailable::Preopen {
                path: dir.host_path.display().to_string(),
                guest: dir.guest_path.clone(),
                reason: format!("{e:#}"),
            })?;
    }
    // The guest's `/`, empty, so that a path outside the granted
    // directories reaches the PEP (a denial with a receipt) instead of
    // failing in the guest's C library unseen (see [`crate::guest_root`]).
    if pep.is_on()
        && !grants.filesystem.is_empty()
        && !grants.filesystem.iter().any(|d| d.guest_path == "/")
    {
        match crate::guest_root::proc_path() {
            Ok(root) => {
                b.preopened_dir(&root, "/", FsPerms::ReadOnly)
                    .map_err(|e| Unavailable::Preopen {
                        path: root.clone(),
                        guest: "/".to_owned(),
                        reason: format!("{e:#}"),
                    })?;
            }
            Err(e) => tracing::warn!(
                "the guest's empty / could not be made ({e}): paths outside the granted \
                 directories fail in the guest without a receipt"
            ),
        }
    }
    let has_net = !grants.network.is_empty();
    // UDP is never granted. With the PEP on, a UDP socket can be created
    // so that its first use (bind, connect, send) reaches the PEP, which
    // denies it with a receipt; with enforcement off it cannot be created.
    b.allow_tcp(has_net)
        .allow_udp(has_net && pep.is_on())
        .allow_ip_name_lookup(grants.grants_names())
        .socket_addr_check(socket_check(net.clone(), log.clone(), pep.clone()));
    Ok(b.build())
}

/// Why a task cannot have what its manifest grants: it fails
/// `resource_unavailable`, saying so.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unavailable {
    /// A granted directory is missing, replaced or otherwise not the grant.
    #[error(transparent)]
    GrantDir(#[from] crate::grant_dir::GrantUnavailable),
    /// A granted directory opened, but its preopen could not be made.
    #[error("granted directory {path} (guest {guest}) cannot be opened: {reason}")]
    Preopen {
        path: String,
        guest: String,
        reason: String,
    },
    /// The hid device is granted, and no mediator stands behind it.
    #[error("the hid device is granted but this host runs no HID mediator")]
    NoHidMediator,
    /// A granted instrument this host does not have.
    #[error(
        "instrument {name} is granted but this host has none by that name (it has {})",
        hcp_instruments::AVAILABLE.join(", ")
    )]
    NoInstrument { name: String },
}

impl Unavailable {
    /// What the task's caller is told: no path of the host's (its
    /// `Display`, for the operator's log, names them).
    pub(crate) fn for_caller(&self) -> String {
        match self {
            Self::GrantDir(g) => g.for_caller(),
            Self::Preopen { guest, .. } => {
                format!("granted directory {guest} cannot be opened on this host")
            }
            Self::NoHidMediator | Self::NoInstrument { .. } => self.to_string(),
        }
    }
}

/// Builds the store data of one task.
pub(crate) fn state(
    manifest: &Manifest,
    request: &TaskRequest,
    meta: Arc<TaskMeta>,
    store: Arc<dyn TaskStore>,
    log: TaskLog,
    net: Arc<NetPolicy>,
    pep: Pep,
) -> Result<TaskState, Unavailable> {
    let wasi = wasi_ctx(manifest, &log, &net, &pep)?;
    let instruments = instruments(manifest, request)?;
    let hid = if manifest.grants.devices.iter().any(|d| d == "hid") {
        let broker = request.hid.clone().ok_or(Unavailable::NoHidMediator)?;
        Some(crate::hid_broker::HidLink {
            broker,
            deadline: std::time::Instant::now() + request.deadline,
        })
    } else {
        None
    };
    let fs_writes = WriteMeter::new(pep.clone(), log.clone());
    Ok(TaskState {
        wasi,
        table: crate::limits::task_table(),
        http: WasiHttpCtx::new(),
        http_hooks: GovernedHttp {
            policy: net.clone(),
            log: log.clone(),
            pep: pep.clone(),
        },
        net,
        limiter: TaskLimiter::new(&manifest.limits),
        hcp: HcpCtx {
            meta,
            log,
            store,
            artifacts: Vec::new(),
            artifact_bytes: 0,
            checkpoints: Vec::new(),
            host_calls: 0,
            risk_events: Vec::new(),
            instruments,
            pep,
            hid,
        },
        fs_paths: FsPaths::default(),
        fs_writes,
    })
}

/// Opens the granted instruments behind the session's envelope guard.
fn instruments(
    manifest: &Manifest,
    request: &TaskRequest,
) -> Result<hcp_instruments::session::Session, Unavailable> {
    // Simulated instruments are seeded from the task, so a run is repeatable.
    let seed = request
        .task_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    let mut opened = Vec::new();
    for name in &manifest.grants.instruments {
        let Some(instrument) = hcp_instruments::open(name, seed) else {
            return Err(Unavailable::NoInstrument { name: name.clone() });
        };
        opened.push(instrument);
    }
    Ok(hcp_instruments::session::Session::new(
        hcp_instruments::envelope::Guard::new(request.envelope.clone()),
        opened,
    ))
}

/// The WIT task record.
pub(crate) fn wit_task(manifest: &Manifest, request: &TaskRequest) -> wit::Task {
    wit::Task {
        task_id: request.task_id.clone(),
        session_id: request.session_id.clone(),
        capability: manifest.name().to_owned(),
        capability_version: manifest.version_str().to_owned(),
        caller_id: request.caller_id.clone(),
        intent: request.intent.clone(),
        inputs: request.inputs.to_string(),
        constraints: request.constraints.to_string(),
        context: request.context.as_ref().map(Value::to_string),
        resume_from: request.resume.as_ref().map(|r| r.checkpoint.clone()),
        risk_level: match request.risk_level {
            RiskLevel::R1 => wit::RiskLevel::R1,
            RiskLevel::R2 => wit::RiskLevel::R2,
            RiskLevel::R3 => wit::RiskLevel::R3,
            RiskLevel::R4 => wit::RiskLevel::R4,
            RiskLevel::R5 => wit::RiskLevel::R5,
        },
        data_classification: match request.data_classification {
            DataClass::T1 => wit::DataClassification::T1,
            DataClass::T2 => wit::DataClassification::T2,
            DataClass::T3 => wit::DataClassification::T3,
            DataClass::T4 => wit::DataClassification::T4,
        },
        deadline_ms: u64::try_from(request.deadline.as_millis()).unwrap_or(u64::MAX),
    }
}

/// The longest failure message a capability's failure keeps; past it the
/// message is cut, saying so.
const MAX_FAILURE_MESSAGE: usize = 4096;

/// The longest phase name a capability's failure keeps.
const MAX_PHASE: usize = 256;

/// What each warning counts against `limits.output_bytes` beside its text.
const WARNING_BYTES: u64 = 8;

/// `text` cut to at most `max` bytes (on a character boundary), saying so.
fn cut(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let at = text.floor_char_boundary(max);
    format!("{}… (cut at {at} of {} bytes)", &text[..at], text.len())
}

/// Turns `run`'s return value into a [`RunResult`]. Everything the
/// capability returns is bounded before it is parsed or kept: outputs and
/// warnings together by `limits.output_bytes`, a failure's partial outputs
/// by the same limit (dropped past it, saying so), its message and phase
/// by fixed lengths. They go into the task's record, its answer and its
/// event stream; unbounded, one return of a guest's whole memory was
/// copied, parsed (a JSON value per two bytes) and stored several times.
pub(crate) fn returned(result: Result<wit::Outcome, wit::Failure>, output_limit: u64) -> RunResult {
    match result {
        Ok(outcome) => {
            let warnings: u64 = outcome
                .warnings
                .iter()
                .map(|w| w.len() as u64 + WARNING_BYTES)
                .sum();
            let outputs = outcome.outputs.len() as u64;
            if outputs.saturating_add(warnings) > output_limit {
                let message = if warnings == 0 {
                    format!(
                        "outputs are {outputs} bytes, over limits.output_bytes ({output_limit})"
                    )
                } else {
                    format!(
                        "outputs ({outputs} bytes) and {} warnings ({warnings} bytes) are over limits.output_bytes ({output_limit})",
                        outcome.warnings.len()
                    )
                };
                return RunResult::Failed(RunFailure::new(ErrorCode::ExecutionError, message));
            }
            match serde_json::from_str::<Value>(&outcome.outputs) {
                Ok(outputs @ Value::Object(_)) => RunResult::Completed {
                    outputs,
                    warnings: outcome.warnings,
                },
                Ok(_) => RunResult::Failed(RunFailure::new(
                    ErrorCode::InternalError,
                    "the capability returned outputs that are not a JSON object",
                )),
                Err(e) => RunResult::Failed(RunFailure::new(
                    ErrorCode::InternalError,
                    format!("the capability returned outputs that are not JSON: {e}"),
                )),
            }
        }
        Err(f) => {
            let mut message = cut(f.message, MAX_FAILURE_MESSAGE);
            let partial_outputs = match f.partial_outputs {
                Some(p) if p.len() as u64 > output_limit => {
                    message.push_str(&format!(
                        " (partial outputs of {} bytes dropped: over limits.output_bytes ({output_limit}))",
                        p.len()
                    ));
                    None
                }
                p => p
                    .and_then(|p| serde_json::from_str::<Value>(&p).ok())
                    .filter(Value::is_object),
            };
            let (phase, step, recoverable) = match f.details {
                Some(d) => (
                    d.phase.map(|p| cut(p, MAX_PHASE)),
                    d.step.map(u64::from),
                    d.recoverable,
                ),
                None => (None, None, false),
            };
            RunResult::Failed(RunFailure {
                code: match f.code {
                    wit::ErrorCode::ExecutionError => ErrorCode::ExecutionError,
                    wit::ErrorCode::Timeout => ErrorCode::Timeout,
                    wit::ErrorCode::SafetyViolation => ErrorCode::SafetyViolation,
                    wit::ErrorCode::ResourceUnavailable => ErrorCode::ResourceUnavailable,
                    wit::ErrorCode::InternalError => ErrorCode::InternalError,
                    wit::ErrorCode::InputError => ErrorCode::InputError,
                },
                message,
                phase,
                step,
                recoverable,
                partial_outputs,
            })
        }
    }
}

/// Classifies a trap or host fault.
/// The PEP stopped the guest (see `Governor::stop_reason`).
#[derive(Debug)]
pub(crate) struct Stopped(pub(crate) String);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Stopped {}

/// Whether `error` is a trap of the guest's own code (a wasm trap, or the
/// PEP stopping it at an epoch tick) rather than a fault of the host.
pub(crate) fn is_guest_trap(error: &wasmtime::Error) -> bool {
    error.downcast_ref::<wasmtime::Trap>().is_some() || error.downcast_ref::<Stopped>().is_some()
}

pub(crate) fn trapped(
    error: &wasmtime::Error,
    limiter: &TaskLimiter,
    deadline: Duration,
    max_stack: usize,
) -> RunFailure {
    use wasmtime::Trap;
    if let Some(Stopped(why)) = error.downcast_ref::<Stopped>() {
        return RunFailure::new(ErrorCode::SafetyViolation, why.clone());
    }
    if matches!(
        error.downcast_ref::<wasmtime::component::ResourceTableError>(),
        Some(wasmtime::component::ResourceTableError::Full)
    ) {
        return RunFailure::new(
            ErrorCode::ExecutionError,
            format!(
                "resource limit: the task holds {} resources (descriptors, sockets, streams) and may open no more",
                crate::limits::MAX_TABLE_ENTRIES
            ),
        );
    }
    if let Some(trap) = error.downcast_ref::<Trap>() {
        match trap {
            Trap::Interrupt => {
                return RunFailure::new(
                    ErrorCode::Timeout,
                    format!("stopped at its deadline of {}", fmt_duration(deadline)),
                );
            }
            Trap::StackOverflow => {
                return RunFailure::new(
                    ErrorCode::ExecutionError,
                    format!(
                        "call stack exhausted (the host allows {} KiB of wasm stack)",
                        max_stack >> 10
                    ),
                );
            }
            _ => {}
        }
    }
    if let Some(total) = limiter.memory_refused {
        return RunFailure::new(
            ErrorCode::ExecutionError,
            format!(
                "memory limit exceeded: growing to {total} bytes was refused (limits.memory_bytes is {})",
                limiter.memory_limit()
            ),
        );
    }
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return RunFailure::new(
            ErrorCode::InternalError,
            format!("the capability exited with status {}", exit.0),
        );
    }
    let detail = match error.downcast_ref::<Trap>() {
        Some(trap) => bounded(&trap.to_string()),
        None => cause(error),
    };
    RunFailure::new(
        ErrorCode::InternalError,
        format!("the capability trapped: {detail}"),
    )
}

/// Longest cause an answer carries, in bytes.
pub(crate) const MAX_CAUSE: usize = 2048;

/// The whole cause of a host fault or trap, on one line and at most
/// [`MAX_CAUSE`] bytes: every message of the error's chain, outermost
/// first, without the wasm backtrace (frame addresses say nothing to a
/// caller).
pub(crate) fn cause(error: &wasmtime::Error) -> String {
    let parts: Vec<String> = error
        .chain()
        .map(ToString::to_string)
        .filter(|m| !m.contains("wasm backtrace:"))
        .collect();
    let text = if parts.is_empty() {
        format!("{error}")
    } else {
        parts.join(": ")
    };
    bounded(&text)
}

/// `text` on one line (control characters as spaces, runs of spaces
/// collapsed), cut at [`MAX_CAUSE`] bytes on a character boundary.
pub(crate) fn bounded(text: &str) -> String {
    let one_line = text
        .split(|c: char| c.is_control() || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if one_line.len() <= MAX_CAUSE {
        return one_line;
    }
    let mut end = MAX_CAUSE;
    while !one_line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut at {MAX_CAUSE} bytes)", &one_line[..end])
}

/// Bytes of the arguments `run` lowers into the guest's memory.
pub(crate) fn argument_bytes(task: &wit::Task) -> u64 {
    [
        task.task_id.len(),
        task.session_id.len(),
        task.capability.len(),
        task.capability_version.len(),
        task.caller_id.len(),
        task.intent.len(),
        task.inputs.len(),
        task.constraints.len(),
        task.context.as_ref().map_or(0, String::len),
        task.resume_from.as_ref().map_or(0, String::len),
    ]
    .into_iter()
    .map(|n| u64::try_from(n).unwrap_or(u64::MAX))
    .fold(0, u64::saturating_add)
}

fn fmt_duration(d: Duration) -> String {
    hcp_contracts::IsoDuration::from_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(run: RunResult) -> RunFailure {
        match run {
            RunResult::Failed(f) => f,
            RunResult::Completed { outputs, .. } => panic!("completed: {outputs}"),
        }
    }

    /// What a capability returns is bounded before it is parsed or kept:
    /// a failure of a whole memory's worth of partial outputs, message and
    /// phase was parsed and kept whole.
    #[test]
    fn a_failure_returned_is_bounded_before_it_is_kept() {
        let mib = 1 << 20;
        let f = failed(returned(
            Err(wit::Failure {
                code: wit::ErrorCode::ExecutionError,
                message: "é".repeat(mib),
                details: Some(wit::FailureDetails {
                    phase: Some("p".repeat(mib)),
                    step: Some(3),
                    recoverable: true,
                }),
                partial_outputs: Some(format!("{{\"a\":[{}0]}}", "0,".repeat(mib))),
            }),
            64 * 1024,
        ));
        assert!(
            f.message.len() < MAX_FAILURE_MESSAGE + 200,
            "{}",
            f.message.len()
        );
        assert!(
            f.message
                .contains(&format!("cut at 4096 of {} bytes", 2 * mib))
        );
        assert!(
            f.message.ends_with(
                "(partial outputs of 2097161 bytes dropped: over limits.output_bytes (65536))"
            ),
            "{}",
            &f.message[f.message.len() - 120..]
        );
        assert_eq!(f.partial_outputs, None);
        assert!(f.phase.as_ref().is_some_and(|p| p.len() < MAX_PHASE + 100));
        assert_eq!((f.step, f.recoverable), (Some(3), true));
        // Within the limit, partial outputs are kept.
        let f = failed(returned(
            Err(wit::Failure {
                code: wit::ErrorCode::Timeout,
                message: "slow".into(),
                details: None,
                partial_outputs: Some(r#"{"done":1}"#.into()),
            }),
            64 * 1024,
        ));
        assert_eq!(f.message, "slow");
        assert_eq!(f.partial_outputs, Some(serde_json::json!({"done": 1})));
    }

    /// Warnings count with the outputs against `limits.output_bytes`: a
    /// million empty warnings were free.
    #[test]
    fn warnings_count_with_the_outputs() {
        let f = failed(returned(
            Ok(wit::Outcome {
                outputs: "{}".into(),
                warnings: vec![String::new(); 1_000_000],
            }),
            1 << 20,
        ));
        assert_eq!(f.code, ErrorCode::ExecutionError);
        assert_eq!(
            f.message,
            "outputs (2 bytes) and 1000000 warnings (8000000 bytes) are over limits.output_bytes (1048576)"
        );
        let ok = returned(
            Ok(wit::Outcome {
                outputs: "{}".into(),
                warnings: vec!["careful".into(); 3],
            }),
            1 << 20,
        );
        assert!(matches!(ok, RunResult::Completed { ref warnings, .. } if warnings.len() == 3));
    }
}
