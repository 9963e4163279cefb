//! `budgets.json`: what a task may spend, by default, per capability and
//! per caller. The sandbox enforces them; this crate parses and combines.

use crate::ids::{CallerId, CapabilityName};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetsFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Every limit, used where neither the capability nor the caller sets one.
    pub defaults: BudgetLimits,
    /// By capability.
    #[serde(default)]
    pub capabilities: BTreeMap<CapabilityName, BudgetOverride>,
    /// By caller.
    #[serde(default)]
    pub callers: BTreeMap<CallerId, BudgetOverride>,
}

/// Every limit, set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetLimits {
    /// Host calls one task may make.
    pub host_calls: u64,
    /// Bytes one task may move through host calls (reads, writes, network,
    /// artifacts, checkpoints).
    pub bytes: u64,
    /// Artifacts one task may create.
    pub artifacts: u64,
    /// Sessions at once (of one caller, or of one capability).
    pub concurrent_sessions: u32,
}

/// Some limits; the rest come from elsewhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetOverride {
    /// Host calls one task may make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_calls: Option<u64>,
    /// Bytes one task may move through host calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Artifacts one task may create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<u64>,
    /// Sessions at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_sessions: Option<u32>,
}
