//! One task: its store, its WASI context built from the grants alone, its
//! deadline, and how its end (return value or trap) is reported
//! ([`outcome`]).

mod outcome;

pub use outcome::{RunFailure, RunResult};
pub(crate) use outcome::{Stopped, cause, is_guest_trap, returned, trapped};

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
