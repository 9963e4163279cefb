//! The sandbox: runs one capability component per task with exactly the
//! surface its manifest grants.
//!
//! - **Deny by default.** A task's WASI context starts empty: no arguments,
//!   no environment, no stdin, no preopened directory, no network. Each grant
//!   adds exactly one thing (a directory with its permissions, a destination,
//!   an environment variable); stdout and stderr go to the bounded task log.
//! - **Surface audit.** Before a component is compiled, its imports are
//!   read from its binary and compared with what its grants allow
//!   ([`audit`]); one import outside them refuses the component, naming it.
//!   The linker itself holds only the granted interfaces, plus
//!   `wasi:filesystem` and `wasi:sockets` linked inert when not granted (no
//!   directory, every socket denied by the PEP with a receipt).
//! - **Dispatch enforcement.** Every host call passes the task's policy
//!   enforcement point ([`pep`]) before dispatch; a denial reaches the guest
//!   as an error value, every verdict goes to the receipt pipeline.
//! - **Limits.** Memory, tables and instances through a resource limiter; an
//!   epoch deadline plus a wall-clock timeout from the task's deadline; a
//!   bounded wasm stack; bounded output and log.
//! - **Speed.** One engine with a pooling allocator, an `InstancePre` per
//!   component, compiled code cached on disk by digest and engine settings.
//!
//! This crate must never speak HTTP to callers, touch the host's database, or
//! open a serial port: it knows components, grants and the task store trait.
#![deny(missing_docs)]

pub mod audit;
mod bindings;
pub mod code_bounds;
mod engine;
mod fs;
mod fs_write;
mod grant_dir;
mod guest_root;
mod hid_broker;
mod limits;
mod net;
pub mod pep;
mod prepare;
pub mod store;
mod task;
pub mod tasklog;
mod units;

pub use audit::SurfaceReport;
pub use engine::{CompileGuard, EngineError, SandboxConfig};
pub use hid_broker::{HidBroker, HidOutcome, HidRefusal};
pub use limits::MAX_TABLE_ENTRIES;
pub use prepare::PrepareError;
pub use store::{
    MemoryStore, OperatorSecret, ResumeFrom, StateSpace, StateUpdate, StateUsage, StoredArtifact,
    TaskMeta, TaskStore, TaskStoreError,
};
pub use task::{RunFailure, RunResult, TaskRequest, TaskRun};
pub use units::types::reason_name;

use engine::SharedEngine;
use hcp_contracts::manifest::Manifest;
use hcp_contracts::message::ErrorCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tasklog::TaskLog;

/// The host's sandbox: one engine shared by every capability.
#[derive(Clone, Debug)]
pub struct Sandbox {
    engine: SharedEngine,
}

impl Sandbox {
    /// Builds the engine.
    ///
    /// # Errors
    ///
    /// wasmtime refused the configuration, or the cache directory is unusable.
    pub fn new(config: SandboxConfig) -> Result<Self, EngineError> {
        Ok(Self {
            engine: SharedEngine::new(config)?,
        })
    }

    /// The settings this sandbox was built with.
    pub fn config(&self) -> &SandboxConfig {
        &self.engine.config
    }

    /// Waits until no task of this sandbox runs on a thread of its own
    /// (see [`PreparedCapability::run`]), for at most `within`; says
    /// whether none does. A server stopping calls this after it dropped its
    /// runs, before its runtime goes: a thread still there then is one
    /// blocked in a host call, left behind.
    pub async fn task_threads_ended(&self, within: Duration) -> bool {
        self.engine.threads.ended(within).await
    }

    /// How many tasks of this sandbox run on a thread of their own now.
    #[must_use]
    pub fn task_threads(&self) -> usize {
        self.engine.threads.count()
    }

    /// Refuses a manifest whose filesystem grants reach one of the host's
    /// own directories ([`SandboxConfig::host_dirs`] and the cache): equal
    /// to one, inside one, or holding one. Paths are compared as resolved
    /// (a grant's host path has no link in it; a host directory is
    /// resolved when it exists).
    ///
    /// # Errors
    ///
    /// [`PrepareError::HostDirectory`] for the first grant that does.
    pub fn keeps_off_the_host(&self, manifest: &Manifest) -> Result<(), PrepareError> {
        let config = &self.engine.config;
        let resolved =
            |d: &std::path::PathBuf| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
        let host_dirs: Vec<std::path::PathBuf> = config
            .cache_dir
            .iter()
            .chain(&config.host_dirs)
            .map(resolved)
            .collect();
        let read_only_within: Vec<std::path::PathBuf> =
            config.read_only_within.iter().map(resolved).collect();
        for grant in &manifest.grants.filesystem {
            let granted = &grant.host_path;
            // A bundle's own data, installed with it: read-only, strictly
            // inside the installed capabilities' directory.
            let bundled = grant.access == hcp_contracts::manifest::Access::ReadOnly
                && read_only_within
                    .iter()
                    .any(|d| granted.starts_with(d) && granted != d);
            if bundled {
                continue;
            }
            if let Some(dir) = host_dirs
                .iter()
                .find(|d| granted.starts_with(d) || d.starts_with(granted))
            {
                return Err(PrepareError::HostDirectory {
                    capability: manifest.id(),
                    grant: granted.display().to_string(),
                    host_dir: dir.display().to_string(),
                });
            }
        }
        Ok(())
    }

    /// Audits the component's imports against its grants, without linking
    /// or running anything. The imports are read from the binary first: a
    /// refused component is reported without being compiled; an allowed one
    /// is compiled (through the cache), so that one that does not compile is
    /// an error here as it is when loaded.
    ///
    /// # Errors
    ///
    /// The component does not compile.
    pub fn audit(&self, manifest: &Manifest) -> Result<SurfaceReport, PrepareError> {
        self.audited(manifest).map(|(report, _)| report)
    }

    /// The audit, and for a component it allows, what comes before
    /// compiling it, without compiling it in this process: the bounds on
    /// code ([`code_bounds`]) and the compile guard
    /// ([`SandboxConfig::compile_guard`], which leaves the compiled code in
    /// the cache). A later [`Sandbox::prepare`] or [`Sandbox::audit`] of
    /// the same component compiles it from the cache: an install vets a
    /// bundle this way before it takes the capabilities' lock, so that the
    /// compile does not hold it.
    ///
    /// # Errors
    ///
    /// A function past the bounds, or the guard refused it.
    pub fn vet(&self, manifest: &Manifest) -> Result<SurfaceReport, PrepareError> {
        let report = prepare::audit(manifest);
        if let Some(report) = report.as_ref().filter(|r| !r.allowed) {
            return Ok(report.clone());
        }
        prepare::guard(
            &self.engine,
            &manifest.id(),
            &manifest.component.digest,
            &manifest.component.bytes,
        )?;
        match report {
            Some(report) => Ok(report),
            // Unreadable, yet it compiled: read what the compiled one says.
            None => self.audit(manifest),
        }
    }

    /// Compiles `bytes` (the component of `capability`) in this process,
    /// through the cache, after checking it against the bounds on code;
    /// nothing else (no audit, no compile guard). What the `hcp` child
    /// process that a compile guard starts does.
    ///
    /// # Errors
    ///
    /// A function past the bounds, or the component does not compile.
    pub fn compile_into_cache(&self, capability: &str, bytes: &[u8]) -> Result<(), PrepareError> {
        code_bounds::check(bytes).map_err(|error| PrepareError::CodeBounds {
            capability: capability.to_owned(),
            error,
        })?;
        wasmtime::component::Component::from_binary(&self.engine.engine, bytes)
            .map(drop)
            .map_err(|error| PrepareError::Compile {
                capability: capability.to_owned(),
                error,
            })
    }

    /// The audit, and the compiled component unless it was refused.
    fn audited(
        &self,
        manifest: &Manifest,
    ) -> Result<(SurfaceReport, Option<wasmtime::component::Component>), PrepareError> {
        match prepare::audit(manifest) {
            Some(report) if !report.allowed => Ok((report, None)),
            Some(report) => Ok((report, Some(prepare::compile(&self.engine, manifest)?))),
            None => {
                let component = prepare::compile(&self.engine, manifest)?;
                let report = prepare::audit_compiled(&self.engine, manifest, &component);
                Ok((report, Some(component)))
            }
        }
    }

    /// Audits, compiles, links and pre-instantiates a capability. The audit
    /// comes first and reads only the binary: a component importing what its
    /// grants do not allow is refused in milliseconds, whatever its size,
    /// and never compiled. CPU-bound on a cache miss: call it from a
    /// blocking context.
    ///
    /// # Errors
    ///
    /// The component imports interfaces its grants do not allow, does not
    /// compile, or does not implement the `capability` world.
    pub fn prepare(&self, manifest: Arc<Manifest>) -> Result<PreparedCapability, PrepareError> {
        self.keeps_off_the_host(&manifest)?;
        let (report, component) = self.audited(&manifest)?;
        let Some(component) = component.filter(|_| report.allowed) else {
            return Err(PrepareError::Refused(Box::new(report)));
        };
        let pre = prepare::instantiation(&self.engine, &manifest, &component)?;
        let permits = usize::try_from(manifest.concurrent_limit).unwrap_or(1);
        Ok(PreparedCapability {
            engine: self.engine.clone(),
            pre: Arc::new(pre),
            report: Arc::new(report),
            concurrency: Arc::new(tokio::sync::Semaphore::new(permits)),
            manifest,
        })
    }
}

/// A capability ready to run tasks: compiled, audited, pre-instantiated.
/// Cloning shares it (and its concurrency limit).
#[derive(Clone)]
pub struct PreparedCapability {
    engine: SharedEngine,
    manifest: Arc<Manifest>,
    pre: Arc<prepare::Instantiation>,
    report: Arc<SurfaceReport>,
    concurrency: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for PreparedCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedCapability")
            .field("capability", &self.manifest.id())
            .finish_non_exhaustive()
    }
}

/// Grace after the deadline before the wall-clock timeout cancels a task
/// blocked in a host call (the epoch interrupts running wasm at the deadline).
const WALL_CLOCK_GRACE: Duration = Duration::from_millis(250);

/// Grace after [`WALL_CLOCK_GRACE`] before a task whose thread is blocked
/// in a call that never returns to the runtime (a filesystem call made on
/// the task's thread) is failed without it.
const BLOCKED_GRACE: Duration = Duration::from_millis(750);

impl PreparedCapability {
    /// The manifest.
    pub fn manifest(&self) -> &Arc<Manifest> {
        &self.manifest
    }

    /// The surface audit it passed.
    pub fn report(&self) -> &SurfaceReport {
        &self.report
    }

    /// A governor for a task of this capability run without a gate (tests,
    /// benchmarks, tools): the manifest's grants and limits, `envelope` (the
    /// task's), the declaration's risk floor (`Safety::floor`), no budget beyond the manifest's
    /// limits, the default dispatch settings ([`pep::DEFAULT_SCAN`]),
    /// verdicts to `sink`.
    ///
    /// Facts that do not compile (never for a loaded manifest) give a
    /// governor that denies every call.
    pub fn standalone_governor(
        &self,
        task_id: &str,
        session_id: &str,
        deadline: Duration,
        envelope: &hcp_contracts::manifest::SafetyEnvelope,
        sink: Arc<dyn pep::VerdictSink>,
    ) -> Arc<dyn pep::Governor> {
        let facts = pep::Standalone {
            task_id,
            session_id,
            caller: "standalone",
            risk_level: self.manifest.doc.capability.safety.floor().0,
            data_classification: hcp_contracts::DataClass::T1,
            envelope,
            expires_at_ms: pep::now_ms()
                .saturating_add(u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX))
                .saturating_add(WALL_CLOCK_GRACE.as_millis() as u64 + 1000),
            budgets: pep::BudgetCaps {
                artifacts: pep::UNLIMITED,
                bytes: pep::UNLIMITED,
                host_calls: pep::UNLIMITED,
            },
        }
        .facts(&self.manifest);
        match pep::PolicyGovernor::standalone(facts, sink) {
            Ok(governor) => Arc::new(governor),
            Err(e) => Arc::new(pep::DenyAll(e.to_string())),
        }
    }

    /// Runs one task in a fresh instance, waiting for a slot when
    /// `concurrent_limit` tasks are running. Never panics on guest behaviour:
    /// every end, including traps and timeouts, is a [`TaskRun`].
    ///
    /// The task runs on a thread of its own (from the runtime's blocking
    /// pool), where the guest's filesystem calls are made as it makes them
    /// rather than each handed to another thread and back (a cross-core
    /// wake-up each way: about 0.3 ms of an R1 task, docs/benchmarks.md,
    /// "Fifteenth round"), and where a guest that only computes holds no
    /// thread of the runtime's. A call that waits for good on that thread
    /// (an open of a FIFO swapped in after the look before it) ends the
    /// task at its deadline all the same ([`BLOCKED_GRACE`] later), and
    /// frees its slot then, as a task stopped at its deadline does: the
    /// thread is left behind with what the task holds (its instance),
    /// until the call returns.
    ///
    /// A capability granted no directory has no filesystem calls to make:
    /// its tasks run on the calling thread, without the hand-off to a
    /// thread of their own and back (two wake-ups, more than a small
    /// task's whole run).
    pub async fn run(&self, request: TaskRequest, store: Arc<dyn TaskStore>) -> TaskRun {
        let _permit = self.concurrency.acquire().await;
        if self.manifest.grants.filesystem.is_empty() {
            return self.run_now(request, store).await;
        }
        let started = Instant::now();
        let deadline = request.deadline;
        let this = self.clone();
        let handle = tokio::runtime::Handle::current();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let alive = self.engine.threads.enter();
        drop(tokio::task::spawn_blocking(move || {
            let mut tx = tx;
            // A run nobody waits for any more (this future dropped: a
            // server stopping past its grace) stops its guest here too, at
            // its next await, instead of running on past its runtime.
            //
            // The drop's notice is looked at first, at every wake-up: a
            // thread woken late (a loaded machine) may find the runtime
            // shutting down, and one more poll of the guest would poll its
            // timers there, a panic ("A Tokio 1.x context was found, but
            // it is being shutdown").
            let _alive = alive;
            let run = handle.block_on(async {
                tokio::select! {
                    biased;
                    () = tx.closed() => None,
                    run = this.run_now(request, store) => Some(run),
                }
            });
            if let Some(run) = run {
                let _ = tx.send(run);
            }
        }));
        let answered_by = deadline
            .saturating_add(WALL_CLOCK_GRACE)
            .saturating_add(BLOCKED_GRACE);
        match tokio::time::timeout(answered_by, rx).await {
            Ok(Ok(run)) => run,
            Ok(Err(_)) => TaskRun::failed_before(RunFailure::new(
                ErrorCode::InternalError,
                "the task's thread ended without an answer".to_owned(),
            )),
            Err(_) => {
                let mut run = TaskRun::failed_before(RunFailure::new(
                    ErrorCode::Timeout,
                    format!(
                        "stopped at its deadline of {}: its thread is blocked in a host call \
                         and was left behind",
                        hcp_contracts::IsoDuration::from_duration(deadline)
                    ),
                ));
                run.risk_events.push("timeout".to_owned());
                run.duration = started.elapsed();
                run
            }
        }
    }

    async fn run_now(&self, request: TaskRequest, store: Arc<dyn TaskStore>) -> TaskRun {
        let started = Instant::now();
        let manifest = &self.manifest;
        let log = TaskLog::new(manifest.limits.log_bytes);
        let net = Arc::new(net::NetPolicy::new(&manifest.grants.network, &log));
        let pep = pep::Pep::new(
            self.engine
                .config
                .enforcement
                .then(|| request.governor.clone()),
        );
        let meta = Arc::new(TaskMeta {
            task_id: request.task_id.clone(),
            session_id: request.session_id.clone(),
            capability: manifest.name().to_owned(),
            version: manifest.version_str().to_owned(),
            resume: request.resume.clone(),
            data_classification: request.data_classification,
        });
        let failed = |failure: RunFailure, log: &TaskLog| TaskRun {
            result: RunResult::Failed(failure),
            log: log.finish(),
            artifacts: Vec::new(),
            checkpoints: Vec::new(),
            host_calls: 0,
            risk_events: Vec::new(),
            duration: started.elapsed(),
        };
        // Arguments the guest's memory cannot hold fail before it starts,
        // with both sizes (lowering them would only fail as a trap).
        let wit_task = task::wit_task(manifest, &request);
        let arguments = task::argument_bytes(&wit_task);
        if arguments > manifest.limits.memory_bytes {
            let message = format!(
                "arguments of {arguments} bytes exceed the guest's memory limit of {} bytes (limits.memory_bytes)",
                manifest.limits.memory_bytes
            );
            log.host_note(&message);
            return failed(RunFailure::new(ErrorCode::InputError, message), &log);
        }
        // Phases of the run, timed by a subscriber that asks for them
        // (target `hcp::phase`; the task-path bench).
        let setup = tracing::trace_span!(target: "hcp::phase", "sandbox.setup");
        let state = match task::state(manifest, &request, meta, store, log.clone(), net, pep) {
            Ok(s) => s,
            Err(e) => {
                // The operator's log names the host's directory; the
                // caller, whose grants speak of guest paths, is told the
                // guest path only.
                tracing::warn!(
                    target: "hcp::sandbox",
                    task = %request.task_id,
                    "task {} cannot start: {e}",
                    request.task_id
                );
                return failed(
                    RunFailure::new(ErrorCode::ResourceUnavailable, e.for_caller()),
                    &log,
                );
            }
        };
        let mut store = wasmtime::Store::new(&self.engine.engine, state);
        store.limiter(|s| &mut s.limiter);
        if self.engine.config.epoch_interruption {
            // Every tick: stop a guest the PEP says must stop, or one past
            // its deadline; otherwise hand the thread back before going on.
            // A guest that only computes on the runtime's thread (one
            // granted no directory, `run`) held it until its deadline, and
            // a server has few: two such tasks stalled everything else.
            // A deadline past what the clock can name is none.
            let deadline_at = started.checked_add(request.deadline);
            store.set_epoch_deadline(1);
            store.epoch_deadline_callback(move |ctx| {
                if let Some(why) = ctx.data().hcp.pep.stop_reason() {
                    return Err(task::Stopped(why).into());
                }
                if deadline_at.is_some_and(|at| Instant::now() >= at) {
                    return Err(wasmtime::Trap::Interrupt.into());
                }
                Ok(wasmtime::UpdateDeadline::Yield(1))
            });
        }
        drop(setup);
        let wall_clock = request.deadline.saturating_add(WALL_CLOCK_GRACE);
        let outcome = tokio::time::timeout(wall_clock, async {
            let instantiate = tracing::trace_span!(target: "hcp::phase", "sandbox.instantiate");
            let instance = match self.pre.instantiate(&mut store).await {
                Ok(i) => i,
                Err(e) => return Err((true, e)),
            };
            drop(instantiate);
            let _call = tracing::trace_span!(target: "hcp::phase", "sandbox.call");
            instance
                .call_run(&mut store, &wit_task)
                .await
                .map_err(|e| (false, e))
        })
        .await;
        let result = match outcome {
            Ok(Ok(returned)) => task::returned(returned, manifest.limits.output_bytes),
            // A trap while instantiating is the guest's own code running
            // (a core module's start function): it ends as the same trap
            // during the call would (a deadline is a `timeout`, a stop by
            // the PEP a `safety_violation`), saying where. Anything else
            // (a link or an allocation the host could not make) is the
            // host's `resource_unavailable`.
            Ok(Err((true, e))) if task::is_guest_trap(&e) => {
                let mut failure = task::trapped(
                    &e,
                    &store.data().limiter,
                    request.deadline,
                    self.engine.config.max_wasm_stack,
                );
                failure
                    .message
                    .push_str(" (while instantiating, in a start function)");
                RunResult::Failed(failure)
            }
            Ok(Err((true, e))) => RunResult::Failed(RunFailure::new(
                ErrorCode::ResourceUnavailable,
                format!(
                    "the capability could not be instantiated: {}",
                    task::cause(&e)
                ),
            )),
            Ok(Err((false, e))) => RunResult::Failed(task::trapped(
                &e,
                &store.data().limiter,
                request.deadline,
                self.engine.config.max_wasm_stack,
            )),
            Err(_) => RunResult::Failed(RunFailure::new(
                ErrorCode::Timeout,
                format!(
                    "stopped at its deadline of {} while waiting in a host call",
                    hcp_contracts::IsoDuration::from_duration(request.deadline)
                ),
            )),
        };
        if let RunResult::Failed(f) = &result
            && f.code == ErrorCode::InternalError
        {
            log.host_note(&f.message);
        }
        let hcp = &mut store.data_mut().hcp;
        // A breach of the safety envelope ends the task with safety_violation,
        // whatever the capability returned; what it produced is kept as
        // partial outputs.
        let result = match (hcp.instruments.breach(), result) {
            (None, result) => result,
            (Some(breach), RunResult::Completed { outputs, .. }) => RunResult::Failed(RunFailure {
                partial_outputs: Some(outputs),
                ..RunFailure::new(
                    ErrorCode::SafetyViolation,
                    format!("safety envelope breach: {breach}"),
                )
            }),
            (Some(breach), RunResult::Failed(f)) => RunResult::Failed(RunFailure {
                code: ErrorCode::SafetyViolation,
                message: format!("safety envelope breach: {breach}"),
                recoverable: true,
                ..f
            }),
        };
        // The session is over: its undecided HID proposals are withdrawn.
        if let Some(link) = hcp.hid.take() {
            let session = hcp.meta.session_id.clone();
            let _ = tokio::task::spawn_blocking(move || link.broker.close(&session)).await;
        }
        let write_events = store.data().fs_writes.take_events();
        let hcp = &mut store.data_mut().hcp;
        let mut risk_events = std::mem::take(&mut hcp.risk_events);
        risk_events.extend(write_events);
        if let RunResult::Failed(f) = &result
            && f.code == ErrorCode::Timeout
        {
            risk_events.push("timeout".to_owned());
        }
        let run = TaskRun {
            result,
            log: log.finish(),
            artifacts: std::mem::take(&mut hcp.artifacts),
            checkpoints: std::mem::take(&mut hcp.checkpoints),
            host_calls: hcp.host_calls,
            risk_events,
            duration: started.elapsed(),
        };
        // The instance's memory and tables back to the pool.
        let release = tracing::trace_span!(target: "hcp::phase", "sandbox.release");
        drop(store);
        drop(release);
        run
    }
}

#[cfg(test)]
mod tests;
