//! What every handler shares: the host, and the tasks running in the
//! background (each at most once).

use crate::engine::Host;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio_util::task::TaskTracker;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) host: Arc<Host>,
    tracker: TaskTracker,
    running: Arc<Mutex<HashSet<String>>>,
}

impl AppState {
    /// The state of a server of `host`, with no task running yet.
    pub(crate) fn new(host: Arc<Host>) -> Self {
        Self {
            host,
            tracker: TaskTracker::new(),
            running: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// The background tasks, to close and wait for on shutdown.
    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }
}

/// Runs a task in the background unless it is running already.
pub(crate) fn spawn_run(state: &AppState, task_id: String) {
    {
        let mut running = state.running.lock().unwrap_or_else(|e| e.into_inner());
        if !running.insert(task_id.clone()) {
            return;
        }
    }
    let host = state.host.clone();
    let running = state.running.clone();
    state.tracker.spawn(async move {
        match host.run_task(&task_id).await {
            Ok(Some(answer)) => tracing::info!(
                "task {task_id}: {}",
                answer["type"].as_str().unwrap_or("answered")
            ),
            Ok(None) => {
                tracing::info!("task {task_id}: queued (equipment in use or no session slot free)")
            }
            Err(e) => tracing::error!("task {task_id}: {e:#}"),
        }
        running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&task_id);
    });
}
