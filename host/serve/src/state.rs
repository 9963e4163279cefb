//! What every handler shares: the host, and the tasks running in the
//! background (each at most once; stopped and settled when a stopping
//! server's grace runs out: [`AppState::interrupt_runs`]).

use crate::engine::Host;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) host: Arc<Host>,
    tracker: TaskTracker,
    running: Arc<Mutex<HashSet<String>>>,
    /// Open event streams, by caller.
    streams: Arc<Mutex<std::collections::HashMap<String, usize>>>,
    /// The most event streams open at once, all callers together.
    streams_at_most: usize,
    /// Cancelled when a stopping server's grace ran out: the runs still
    /// going are dropped and their tasks settled.
    interrupt: CancellationToken,
    /// Why they were (what ran out), set before `interrupt` is cancelled.
    interrupted_why: Arc<OnceLock<String>>,
    /// How many tasks were stopped and failed so.
    interrupted: Arc<AtomicUsize>,
    /// The runs under way, each with what stops it alone (a caller's
    /// cancellation: [`AppState::cancel_run`]) and why.
    stops: Arc<Mutex<std::collections::HashMap<String, Stop>>>,
    /// What `/readyz` reports beyond the store and the policy.
    readiness: Arc<Readiness>,
}

/// What `/readyz` reads of the server itself.
#[derive(Debug, Default)]
pub(crate) struct Readiness {
    /// The shutdown began: running tasks finish, nothing new is taken.
    pub(crate) draining: AtomicBool,
    /// AMQP is configured ([`Readiness::broker_connected`] means something).
    pub(crate) broker_configured: AtomicBool,
    /// The AMQP transport is connected and consuming.
    pub(crate) broker_connected: AtomicBool,
}

/// What stops one run, and why once it did.
#[derive(Clone)]
struct Stop {
    token: CancellationToken,
    why: Arc<OnceLock<(String, String)>>,
}

/// The most event streams one caller may have open at once. A stream
/// lives as long as its task (an hour, waiting for an approval) and keeps
/// its connection busy (its keep-alives are activity): unbounded, one
/// caller with one waiting task took every connection of the server, the
/// operators' too.
pub(crate) const MAX_STREAMS_PER_CALLER: usize = 8;

impl AppState {
    /// The state of a server of `host`, with no task running yet.
    pub(crate) fn new(host: Arc<Host>) -> Self {
        Self {
            host,
            tracker: TaskTracker::new(),
            running: Arc::new(Mutex::new(HashSet::new())),
            streams: Arc::default(),
            streams_at_most: usize::MAX,
            interrupt: CancellationToken::new(),
            interrupted_why: Arc::default(),
            interrupted: Arc::default(),
            stops: Arc::default(),
            readiness: Arc::default(),
        }
    }

    /// What `/readyz` reads of the server itself (set by the shutdown and
    /// the AMQP transport).
    pub(crate) fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Stops `task_id`'s run in this process, if it runs here: the run is
    /// dropped (its guest stopped) and the task failed with a
    /// `gate.abandoned` receipt naming `why` and `transport`
    /// ([`Host::settle_cancelled`]). Whether a run was stopped.
    pub(crate) fn cancel_run(&self, task_id: &str, why: String, transport: &str) -> bool {
        let stops = self.stops.lock().unwrap_or_else(|e| e.into_inner());
        let Some(stop) = stops.get(task_id) else {
            return false;
        };
        let _ = stop.why.set((why, transport.to_owned()));
        stop.token.cancel();
        true
    }

    /// Stops `task_id` for its caller, who cancelled it over `transport`
    /// (an MCP client): a run of it in this process is stopped
    /// ([`AppState::cancel_run`]); a task still waiting (for an operator's
    /// approval, or queued for a slot) is withdrawn, in the background
    /// ([`Host::withdraw_waiting`]): failed with a `gate.abandoned` receipt
    /// naming `transport`, its approval gone from the operators' queue.
    /// Call it on a runtime.
    pub(crate) fn cancel_task(&self, task_id: &str, why: String, transport: &'static str) {
        // Not started from here on (unless a run of it is under way: that
        // run is stopped, and its stop withdraws the task if it was still
        // queued).
        // (A run that ended as this was called stops nothing: the task is
        // then withdrawn if it still waits.)
        let held = self.hold_start(task_id);
        if !held.held && self.cancel_run(task_id, why.clone(), transport) {
            return;
        }
        let (state, task_id) = (self.clone(), task_id.to_owned());
        self.tracker.spawn(async move {
            let host = state.host.clone();
            let id = task_id.clone();
            let withdrawn = tokio::task::spawn_blocking(move || {
                let _held = held;
                host.withdraw_waiting(&id, &why, transport)
            })
            .await;
            match withdrawn {
                Ok(Ok(true)) => tracing::info!(
                    "task {task_id}: its caller cancelled it while it waited; withdrawn, answered task_failed"
                ),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::error!(
                    "task {task_id}: cancelled while it waited, but its withdrawal could not be recorded: {e:#}"
                ),
                Err(e) => tracing::error!("task {task_id}: withdrawing it: {e}"),
            }
        });
    }

    /// Stops every task still running in the background (its run is
    /// dropped, which stops its guest) and fails it with a receipt saying
    /// `why` ([`Host::settle_interrupted`]); each settles as its run's
    /// background task ends (wait for [`AppState::tracker`]).
    pub(crate) fn interrupt_runs(&self, why: String) {
        let _ = self.interrupted_why.set(why);
        self.interrupt.cancel();
    }

    /// How many tasks [`AppState::interrupt_runs`] stopped and failed.
    pub(crate) fn interrupted(&self) -> usize {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// How many tasks run in the background now.
    pub(crate) fn running_count(&self) -> usize {
        self.running_set().len()
    }

    /// At most `n` event streams open at once, all callers together.
    pub(crate) fn with_streams_at_most(mut self, n: usize) -> Self {
        self.streams_at_most = n;
        self
    }

    /// A place for one more event stream of `caller`, held while the
    /// guard lives; `Err` with the limit it would pass.
    pub(crate) fn open_stream(&self, caller: &str) -> Result<StreamHeld, StreamLimit> {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let open: usize = streams.values().sum();
        let mine = streams.get(caller).copied().unwrap_or(0);
        if mine >= MAX_STREAMS_PER_CALLER {
            return Err(StreamLimit::Caller(mine));
        }
        if open >= self.streams_at_most {
            return Err(StreamLimit::Server(open));
        }
        *streams.entry(caller.to_owned()).or_default() += 1;
        Ok(StreamHeld {
            streams: self.streams.clone(),
            caller: caller.to_owned(),
        })
    }

    /// The background tasks, to close and wait for on shutdown.
    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// Keeps `task_id` from being started ([`spawn_run`], from any path)
    /// while the guard lives: a task whose AMQP delivery is being
    /// acknowledged becomes this host's to run only once that is done.
    pub(crate) fn hold_start(&self, task_id: &str) -> StartHeld {
        let held = self.running_set().insert(task_id.to_owned());
        StartHeld {
            state: self.clone(),
            task_id: task_id.to_owned(),
            held,
        }
    }

    fn running_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why [`AppState::open_stream`] refused: the caller's streams, or the
/// server's, are at their most (how many are open).
#[derive(Debug)]
pub(crate) enum StreamLimit {
    Caller(usize),
    Server(usize),
}

/// See [`AppState::open_stream`].
pub(crate) struct StreamHeld {
    streams: Arc<Mutex<std::collections::HashMap<String, usize>>>,
    caller: String,
}

impl Drop for StreamHeld {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = streams.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                streams.remove(&self.caller);
            }
        }
    }
}

/// See [`AppState::hold_start`].
pub(crate) struct StartHeld {
    state: AppState,
    task_id: String,
    /// False when the task was running already: nothing to let go then.
    held: bool,
}

impl Drop for StartHeld {
    fn drop(&mut self) {
        if self.held {
            self.state.running_set().remove(&self.task_id);
        }
    }
}

/// Runs a task in the background unless it is running already. When it
/// ends, the session slot it held is free: the tasks queued for a slot are
/// started then, not at the maintenance loop's next tick.
pub(crate) fn spawn_run(state: &AppState, task_id: String) {
    if !state.running_set().insert(task_id.clone()) {
        return;
    }
    let state = state.clone();
    let tracker = state.tracker.clone();
    let stop = Stop {
        token: CancellationToken::new(),
        why: Arc::default(),
    };
    state
        .stops
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(task_id.clone(), stop.clone());
    tracker.spawn(async move {
        /// Forgets the run's stop however the run ends.
        struct Forget(AppState, String);
        impl Drop for Forget {
            fn drop(&mut self) {
                self.0
                    .stops
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&self.1);
            }
        }
        let _forget = Forget(state.clone(), task_id.clone());
        let run = tokio::select! {
            biased;
            run = state.host.run_task(&task_id) => run,
            // Its caller cancelled it (an MCP client): the run is dropped
            // here, and the task failed with its receipt.
            () = stop.token.cancelled() => {
                let (why, transport) = stop.why.get().cloned().unwrap_or_default();
                let (host, id) = (state.host.clone(), task_id.clone());
                // Stopped before it took its slot: still queued, withdrawn.
                match tokio::task::spawn_blocking(move || {
                    Ok::<_, anyhow::Error>(
                        host.settle_cancelled(&id, &why, &transport)?
                            || host.withdraw_waiting(&id, &why, &transport)?,
                    )
                })
                .await
                {
                    Ok(Ok(true)) => tracing::info!("task {task_id}: cancelled by its caller, answered task_failed"),
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => tracing::error!("task {task_id}: cancelled, but its failure could not be recorded: {e:#}"),
                    Err(e) => tracing::error!("task {task_id}: settling its cancellation: {e}"),
                }
                state.running_set().remove(&task_id);
                start_queued(&state).await;
                return;
            }
            // The server stops and its grace ran out: the run is dropped
            // here, on a runtime still whole (dropped with the runtime,
            // its guest's timers panicked), and the task is failed with
            // its receipt.
            () = state.interrupt.cancelled() => {
                settle_interrupted_run(&state, &task_id).await;
                state.running_set().remove(&task_id);
                return;
            }
        };
        let ran = match run {
            Ok(Some(answer)) => {
                // At debug: the store logged the task's final state at info.
                tracing::debug!("task {task_id}: {}", answer.kind_name());
                true
            }
            Ok(None) => {
                tracing::info!("task {task_id}: queued (equipment in use or no session slot free)");
                false
            }
            Err(e) => {
                tracing::error!("task {task_id}: {e:#}");
                false
            }
        };
        state.running_set().remove(&task_id);
        if ran {
            start_queued(&state).await;
        }
    });
}

/// Fails a task whose run [`AppState::interrupt_runs`] stopped.
async fn settle_interrupted_run(state: &AppState, task_id: &str) {
    let why = state
        .interrupted_why
        .get()
        .cloned()
        .unwrap_or_else(|| "the server stopped".to_owned());
    let (host, id) = (state.host.clone(), task_id.to_owned());
    match tokio::task::spawn_blocking(move || host.settle_interrupted(&id, &why)).await {
        Ok(Ok(true)) => {
            state.interrupted.fetch_add(1, Ordering::SeqCst);
            tracing::warn!(
                "task {task_id}: still running when the shutdown grace ran out: stopped, \
                 answered task_failed (recorded as gate.abandoned)"
            );
        }
        Ok(Ok(false)) => {}
        Ok(Err(e)) => tracing::error!(
            "task {task_id}: stopped at shutdown, but its failure could not be recorded \
             (it is answered task_failed at the next start): {e:#}"
        ),
        Err(e) => tracing::error!("task {task_id}: settling it at shutdown: {e}"),
    }
}

/// After a task ended: at most this many of the oldest queued tasks are
/// tried at once (one ended task frees one slot; the rest wait for the
/// maintenance loop, which tries them all every second), so that a long
/// queue is not walked on every task's end.
const AFTER_A_TASK: usize = 4;

/// Starts the oldest queued tasks this host may start (a slot or the
/// equipment may have come free); each that still finds none stays queued.
async fn start_queued(state: &AppState) {
    let host = state.host.clone();
    match tokio::task::spawn_blocking(move || host.store.startable_tasks(AFTER_A_TASK)).await {
        Ok(Ok(ids)) => {
            for id in ids {
                spawn_run(state, id);
            }
        }
        Ok(Err(e)) => tracing::error!("queued tasks: {e:#}"),
        Err(e) => tracing::error!("queued tasks: {e}"),
    }
}
