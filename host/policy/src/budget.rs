//! A task's budgets from `budgets.json`: for each limit, the smaller of the
//! capability's and the caller's value, or the default when neither sets it.
//! The sandbox enforces them.

use crate::files::{BudgetOverride, BudgetsFile};
use hcp_contracts::manifest::Declaration;
use serde::{Deserialize, Serialize};

/// What one task may spend, and how many sessions may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Host calls the task may make.
    pub host_calls: u64,
    /// Bytes it may move through host calls.
    pub bytes: u64,
    /// Artifacts it may create.
    pub artifacts: u64,
    /// Sessions of this caller at once (any capability).
    pub caller_concurrent_sessions: u32,
    /// Sessions of this capability at once (any caller); never above the
    /// declaration's `concurrent_limit`.
    pub capability_concurrent_sessions: u32,
}

fn smaller<T: Ord + Copy>(a: Option<T>, b: Option<T>, default: T) -> T {
    match (a, b) {
        (Some(a), Some(b)) => a.min(b),
        (Some(v), None) | (None, Some(v)) => v,
        (None, None) => default,
    }
}

pub(crate) fn budgets(file: &BudgetsFile, caller: &str, declaration: &Declaration) -> Budgets {
    let none = BudgetOverride::default();
    let cap = file
        .capabilities
        .iter()
        .find(|(n, _)| n.as_str() == declaration.name)
        .map_or(&none, |(_, b)| b);
    let who = file
        .callers
        .iter()
        .find(|(id, _)| id.as_str() == caller)
        .map_or(&none, |(_, b)| b);
    let d = &file.defaults;
    let declared = declaration
        .constraints
        .as_ref()
        .and_then(|c| c.concurrent_limit);
    Budgets {
        host_calls: smaller(cap.host_calls, who.host_calls, d.host_calls),
        bytes: smaller(cap.bytes, who.bytes, d.bytes),
        artifacts: smaller(cap.artifacts, who.artifacts, d.artifacts),
        caller_concurrent_sessions: who.concurrent_sessions.unwrap_or(d.concurrent_sessions),
        capability_concurrent_sessions: smaller(
            cap.concurrent_sessions.or(Some(d.concurrent_sessions)),
            declared,
            d.concurrent_sessions,
        ),
    }
}
