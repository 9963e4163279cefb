//! Session slots: how many sessions run at once.
//!
//! `budgets.json` bounds the sessions of one caller (its
//! `concurrent_sessions`, or the default's) and of one capability (the
//! smaller of its `concurrent_sessions` and the declaration's
//! `concurrent_limit`). A task takes its slot as it moves from `queued` to
//! `running`: one SQLite statement counts the running tasks of its caller
//! and of its capability and moves it only when both are below their
//! limits, so neither two runners of one process nor two processes on the
//! same data directory overrun a limit.
//!
//! A task without a slot stays `queued` (so `job_status`, `hcp tasks show`
//! and `GET /v1/tasks/{id}` report it) and is started again when a slot
//! frees: by `hcp serve`'s maintenance loop (every second) or `hcp tasks
//! run-queued`. Waiting is bounded by the session: a task whose session
//! token expired before it got a slot fails `timeout` without running (see
//! the runner). The sandbox's own `concurrent_limit` semaphore never makes a
//! `running` task wait, since the capability's slots are never more than
//! that limit.

use crate::store::{SlotClaim, Store, TaskRecord};
use anyhow::Result;
use hcp_policy::Admission;

/// The limits a task's slot is taken under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotLimits {
    /// Sessions of the task's caller at once.
    pub(crate) caller: u32,
    /// Sessions of the task's capability at once.
    pub(crate) capability: u32,
}

impl SlotLimits {
    /// The limits of an admitted task of `manifest`.
    pub(crate) fn of(admission: &Admission, manifest: &hcp_contracts::Manifest) -> Self {
        Self {
            caller: admission.budgets.caller_concurrent_sessions,
            capability: admission
                .budgets
                .capability_concurrent_sessions
                .min(manifest.concurrent_limit),
        }
    }
}

/// What claiming a slot came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The task holds its slot and is `running`.
    Running,
    /// No slot is free: the task stays `queued`; why.
    Waiting(String),
    /// The task is no longer `queued` (another runner took it).
    Lost,
}

/// Moves `task` from `queued` to `running` if its caller and its capability
/// each have fewer running sessions than `limits` admit.
///
/// # Errors
///
/// The database fails.
pub(crate) fn claim(store: &Store, task: &TaskRecord, limits: SlotLimits) -> Result<Claim> {
    let (by_caller, by_capability) =
        match store.claim_running(task, limits.caller, limits.capability)? {
            SlotClaim::Moved => return Ok(Claim::Running),
            SlotClaim::NotQueued => return Ok(Claim::Lost),
            SlotClaim::Full {
                by_caller,
                by_capability,
            } => (by_caller, by_capability),
        };
    let mut why = Vec::new();
    if by_caller >= limits.caller {
        why.push(format!(
            "caller {} has {by_caller} sessions running, its limit is {} (budgets.json concurrent_sessions)",
            task.caller_id, limits.caller
        ));
    }
    if by_capability >= limits.capability {
        why.push(format!(
            "{} has {by_capability} sessions running, its limit is {} (concurrent_limit, budgets.json concurrent_sessions)",
            task.capability, limits.capability
        ));
    }
    if why.is_empty() {
        // A slot freed between the two statements: the next attempt takes it.
        why.push("a session slot freed while it was claimed; retrying".to_owned());
    }
    Ok(Claim::Waiting(why.join("; ")))
}
