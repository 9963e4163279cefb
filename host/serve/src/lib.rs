//! `hcp serve`: the host as callers and operators meet it every day.
//!
//! An HTTP API on loopback by default (axum; HTTPS with [`Tls`]), answering HCP messages and
//! serving status, events, artifacts, declarations, the operator's
//! endpoints and page. Accepted tasks run in the background; a maintenance
//! loop expires approvals and starts queued tasks whose equipment and
//! session slot are free. Connections are bounded (header-read and idle
//! timeouts, a cap on their number: [`ConnLimits`]).
//! On start, tasks a crash left running are failed honestly (with their last
//! checkpoint); on SIGTERM or Ctrl-C the server stops accepting, lets running
//! tasks finish (up to a grace period), fails those still running then
//! (each with a receipt) and exits, logging when the shutdown began and
//! how it ended ([`Stopped`]).
//!
//! The fourth layer of the host (store → evidence → engine → serve → cli):
//! it drives the engine (`hcp_engine`) and reads the store and the
//! receipts, and imports nothing of the command line (`hcp`), which starts
//! it (`hcp serve`). The AMQP transport ([`amqp`]) is here too.
#![deny(missing_docs)]

pub mod amqp;
mod api;
mod approvals_api;
mod decisions_api;
mod error;
mod hid_api;
mod listen;
pub mod mcp;
mod ops_api;
mod page;
mod policy_api;
mod receipts_api;
mod request;
mod state;
mod tls;

pub use listen::ConnLimits;
pub use mcp::http::McpHttpConfig;
pub use tls::{Tls, TlsFiles};

// The layers below, each a crate of its own, under the names the server's
// modules have always used.
use hcp_engine as engine;
use hcp_engine::{hid, views};
use hcp_evidence as evidence;
use hcp_store as store;

use crate::engine::Host;
use anyhow::{Context as _, Result};
use state::{AppState, spawn_run};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body accepted.
pub(crate) const BODY_LIMIT: usize = 1 << 20;

/// Settings of the server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen (loopback by default).
    pub listen: SocketAddr,
    /// Longest a request may take (server-sent events excepted).
    pub request_timeout: Duration,
    /// How long running tasks may take to finish on shutdown.
    pub shutdown_grace: Duration,
    /// Bounds on connections: header-read and idle timeouts, how many.
    pub connections: ConnLimits,
    /// Also consume tasks from a RabbitMQ broker.
    pub amqp: Option<amqp::AmqpConfig>,
    /// Serve HTTPS with this certificate and key (reloadable: [`Tls::reload`]).
    pub tls: Option<Arc<Tls>>,
    /// The MCP endpoint, `/mcp` ([`mcp`]).
    pub mcp: McpHttpConfig,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            request_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            connections: ConnLimits::default(),
            amqp: None,
            tls: None,
            mcp: McpHttpConfig::default(),
        }
    }
}

/// How a server stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stopped {
    /// Tasks still running when the shutdown grace ran out: stopped and
    /// answered `task_failed` (each with a `gate.abandoned` receipt).
    pub interrupted: usize,
    /// Tasks whose runs did not end even once stopped (their failure is
    /// written at the next start, as after a crash).
    pub left_running: usize,
}
/// How long a stopping server waits for the threads of the runs it
/// dropped to end (each ends at its guest's next wait).
const THREADS_WAIT: Duration = Duration::from_secs(2);

/// Longest wait, once the shutdown grace ran out and the running tasks
/// were stopped, for their failures to be written.
const INTERRUPT_WAIT: Duration = Duration::from_secs(30);

/// Serves until `shutdown` resolves; returns the address it listened on
/// through `bound` as soon as it is known, and, once stopped, how.
///
/// # Errors
///
/// The address cannot be bound, or recovery fails.
pub async fn serve(
    host: Arc<Host>,
    config: ServeConfig,
    bound: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Stopped> {
    for id in host.recover()? {
        tracing::warn!("task {id} was running when the host stopped: answered task_failed");
    }
    for id in host.settle_unanswered()? {
        tracing::warn!("task {id} was never answered by the gate: answered task_failed");
    }
    for id in host.abandon_unacknowledged()? {
        tracing::warn!(
            "task {id}: its AMQP delivery was not acknowledged before the host stopped; \
             failed here, answered by whoever takes the redelivery"
        );
    }
    // Event streams take at most half of the connections: the other half
    // stays for everything else (submissions, the operators' decisions).
    let state = AppState::new(host.clone())
        .with_streams_at_most((config.connections.max_connections / 2).max(1));
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    bound(addr);
    log_startup(&host, &config, addr);
    let maintenance = tokio::spawn(maintain(state.clone()));
    let amqp = config
        .amqp
        .clone()
        .map(|c| tokio::spawn(amqp::run(state.clone(), c)));
    let app = api::router(state.clone(), config.request_timeout)
        .merge(mcp::http::router(state.clone(), &config.mcp))
        .layer(axum::middleware::from_fn(log_request));
    let grace = config.shutdown_grace;
    let shutdown = {
        let state = state.clone();
        async move {
            shutdown.await;
            state
                .readiness()
                .draining
                .store(true, std::sync::atomic::Ordering::SeqCst);
            tracing::info!(
                target: "hcp::shutdown",
                running = state.running_count(),
                "shutdown began: no new connections or tasks; running tasks have {} to finish \
                 (--shutdown-grace)",
                hcp_contracts::IsoDuration::from_duration(grace)
            );
        }
    };
    listen::serve(
        listener,
        app,
        config.connections,
        config.tls.clone(),
        shutdown,
        config.shutdown_grace,
    )
    .await
    .context("serving")?;
    maintenance.abort();
    if let Some(amqp) = amqp {
        amqp.abort();
    }
    state.tracker().close();
    let mut stopped = Stopped::default();
    if tokio::time::timeout(grace, state.tracker().wait())
        .await
        .is_err()
    {
        let grace = hcp_contracts::IsoDuration::from_duration(grace);
        tracing::warn!(
            target: "hcp::shutdown",
            running = state.running_count(),
            "tasks still running after the shutdown grace of {grace}: stopping them; each is \
             answered task_failed"
        );
        // Stopped on this runtime while it is whole: a run left to the
        // runtime's own end was dropped as it shut down, and the guest's
        // timers panicked ("A Tokio 1.x context was found, but it is being
        // shutdown") with the task left running for the next start.
        state.interrupt_runs(format!(
            "it outlived the shutdown grace of {grace} (--shutdown-grace)"
        ));
        if tokio::time::timeout(INTERRUPT_WAIT, state.tracker().wait())
            .await
            .is_err()
        {
            stopped.left_running = state.running_count();
            tracing::error!(
                target: "hcp::shutdown",
                "{} tasks did not stop; they are answered task_failed at the next start",
                stopped.left_running
            );
        }
        stopped.interrupted = state.interrupted();
    }
    // A dropped run's thread ends at its guest's next wait; the runtime
    // goes only after it (polled on a runtime shutting down, the guest's
    // timers panic). One still there is blocked in a host call.
    if !state.host.task_threads_ended(THREADS_WAIT).await {
        tracing::warn!(
            target: "hcp::shutdown",
            threads = state.host.task_threads(),
            "task threads blocked in a host call are left behind"
        );
    }
    tracing::info!(
        target: "hcp::shutdown",
        interrupted = stopped.interrupted,
        left_running = stopped.left_running,
        "shutdown ended: {}",
        if stopped == Stopped::default() {
            "every task finished"
        } else {
            "tasks were stopped and answered task_failed"
        }
    );
    Ok(stopped)
}

/// The startup line (target `hcp::serve`, at info): the address and URL,
/// the data directory, the policy set in force, and the transports served
/// (`http` or `https`, `mcp` at /mcp, `amqp` with the broker's URL without
/// its password).
fn log_startup(host: &Host, config: &ServeConfig, addr: SocketAddr) {
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut transports = vec![scheme, "mcp"];
    if config.amqp.is_some() {
        transports.push("amqp");
    }
    let transports = transports.join(",");
    let amqp = config.amqp.as_ref().map(|c| amqp::redact(&c.url));
    let data_dir = host.paths().data_dir.display().to_string();
    let policy = host.policy();
    tracing::info!(
        target: "hcp::serve",
        addr = %addr,
        url = %format_args!("{scheme}://{addr}"),
        data_dir = %data_dir,
        policy_hash = %policy.policy_hash(),
        transports = %transports,
        amqp = amqp.as_deref(),
        "started: {scheme}://{addr} (API, operator's page, MCP at /mcp{}), data directory {data_dir}, \
         policy set {}",
        amqp.as_deref()
            .map(|url| format!(", AMQP from {url}"))
            .unwrap_or_default(),
        policy.policy_hash()
    );
}

/// Whether a request is logged at debug rather than info: a read that
/// succeeded (GET or HEAD, status below 400). The operator's page and
/// callers following a task poll these every few seconds; writes (a
/// submission, a decision, a reload) and refusals stay at info.
fn quiet_request(method: &axum::http::Method, status: axum::http::StatusCode) -> bool {
    (method == axum::http::Method::GET || method == axum::http::Method::HEAD)
        && status.as_u16() < 400
}

/// Logs each request (target `hcp::http`): method, path (never the query,
/// which may carry a token), status, duration in milliseconds; at info,
/// or at debug for the reads of [`quiet_request`].
async fn log_request(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status();
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if quiet_request(&method, status) {
        tracing::debug!(
            target: "hcp::http",
            method = %method,
            path = %path,
            status = status.as_u16(),
            duration_ms,
            "request"
        );
    } else {
        tracing::info!(
            target: "hcp::http",
            method = %method,
            path = %path,
            status = status.as_u16(),
            duration_ms,
            "request"
        );
    }
    response
}

/// Most archive runs in a row when a retention is due (each of at most
/// `MAX_RUN_RECEIPTS` receipts): a backlog is caught up over a few
/// intervals rather than in one long stall.
const ARCHIVE_RUNS: usize = 16;

/// Every `retention.every_seconds` ticks of [`maintain`], when the policy
/// sets a retention: archives and prunes what is older than it
/// (`Host::archive_retained`), on a thread of its own, one run at a time.
fn archive_when_due(state: &AppState, ticks: u64, archiving: &Arc<std::sync::atomic::AtomicBool>) {
    let Some(retention) = state.host.policy().set.budget_rules().retention else {
        return;
    };
    if !ticks.is_multiple_of(retention.every())
        || archiving.swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        return;
    }
    let (host, archiving) = (state.host.clone(), archiving.clone());
    tokio::task::spawn_blocking(move || {
        match host.archive_due(time::OffsetDateTime::now_utc(), ARCHIVE_RUNS) {
            Ok(runs) => {
                for done in &runs {
                    let Some(a) = &done.archive else { continue };
                    tracing::info!(
                        target: "hcp::archive",
                        number = a.anchor.number,
                        first_seq = a.anchor.first_seq,
                        tree_size = a.anchor.tree_size,
                        tasks = a.tasks,
                        pack = %a.pack,
                        pack_bytes = a.pack_bytes,
                        blobs_collected = done.blobs_collected,
                        "archived and pruned"
                    );
                }
            }
            Err(e) => tracing::error!(target: "hcp::archive", "archive: {e:#}"),
        }
        archiving.store(false, std::sync::atomic::Ordering::SeqCst);
    });
}

/// Every second: write final states a full disk held back, expire
/// approvals, start queued tasks; every five, while
/// HID execution is armed, ask the executor for its status (a disabled kill
/// switch or a silent device halts execution).
pub(crate) async fn maintain(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ticks: u64 = 0;
    // The device check under way, if any: it waits for the mediator's
    // state (held while an action runs or a write waits), so it runs on
    // its own, never holding up the rest of this loop or an async thread.
    let checking = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // An archive run under way (`budgets.json` `retention`).
    let archiving = Arc::new(std::sync::atomic::AtomicBool::new(false));
    loop {
        tick.tick().await;
        ticks += 1;
        archive_when_due(&state, ticks, &archiving);
        if ticks.is_multiple_of(5) && !checking.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let (hid, checking) = (state.host.hid.clone(), checking.clone());
            tokio::task::spawn_blocking(move || {
                /// Clears the flag however the check ends.
                struct Done(Arc<std::sync::atomic::AtomicBool>);
                impl Drop for Done {
                    fn drop(&mut self) {
                        self.0.store(false, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                let _done = Done(checking);
                let mediator = hid.mediator();
                if matches!(
                    mediator.status().execution,
                    hcp_hid::mediator::Execution::Armed { .. }
                ) && let Err(e) = mediator.check_device()
                {
                    tracing::error!("HID device check: {e}");
                }
            });
        }
        let host = state.host.clone();
        let queued = tokio::task::spawn_blocking(move || -> Result<Vec<String>> {
            // Final states a full disk held back, once it takes them.
            host.store.settle_pending();
            host.expire_approvals()?;
            host.store.startable_tasks(1_000)
        })
        .await;
        match queued {
            Ok(Ok(ids)) => {
                for id in ids {
                    spawn_run(&state, id);
                }
            }
            Ok(Err(e)) => tracing::error!("maintenance: {e:#}"),
            Err(e) => tracing::error!("maintenance task: {e}"),
        }
    }
}
