//! `risk.json`: per capability, the base risk level, the highest data
//! classification it may handle, and input-driven escalation rules.

use crate::ids::{CapabilityName, RuleId};
use crate::units::Unit;
use hcp_contracts::{DataClass, RiskLevel};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Profiles by capability name; a capability not listed starts at its
    /// declaration's floor (its `risk_floor`, else R4 when it involves
    /// physical resources, else R1) and has no rules.
    pub capabilities: BTreeMap<CapabilityName, CapabilityRisk>,
}

/// One capability's risk profile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityRisk {
    /// Where assessment starts (the higher of this and the declaration's
    /// `risk_floor`; for a capability involving physical resources that
    /// declares no `risk_floor`, this replaces its R4 floor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<RiskLevel>,
    /// Highest data classification tasks of this capability may carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_data_classification: Option<DataClass>,
    /// Escalation rules; every rule that matches raises the level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<EscalationRule>,
}

/// One input-driven escalation rule: when the input at `pointer` compares
/// to `value` with `op`, the task is at least `raises_to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscalationRule {
    /// Unique within the capability; recorded when the rule fires.
    pub id: RuleId,
    /// JSON pointer into `task_submit.inputs`, e.g. `/temperature_range/max`.
    pub pointer: String,
    /// How the input compares with `value`.
    pub op: Comparison,
    /// The bound: a number for `gt`/`ge`/`lt`/`le`, an array for `in`, any
    /// JSON value for `eq`/`ne`.
    pub value: Value,
    /// Unit of `value` (ordering comparisons only); the input is converted
    /// to it first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// Pointer to the input's unit, e.g. `/temperature_range/unit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_pointer: Option<String>,
    /// The input's unit when `unit_pointer` finds nothing (default: `unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_default: Option<Unit>,
    /// The level the task is raised to when the rule matches.
    pub raises_to: RiskLevel,
}

/// A comparison between an input and a rule's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    /// Input greater than value.
    Gt,
    /// Greater than or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
    /// Equal (numbers by value, anything else as JSON).
    Eq,
    /// Not equal.
    Ne,
    /// Equal to one of the values of an array.
    In,
}

impl Comparison {
    /// Whether this compares numbers by order.
    pub fn is_ordering(self) -> bool {
        matches!(self, Self::Gt | Self::Ge | Self::Lt | Self::Le)
    }

    /// The operator's symbol, for messages.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Gt => ">",
            Self::Ge => "≥",
            Self::Lt => "<",
            Self::Le => "≤",
            Self::Eq => "=",
            Self::Ne => "≠",
            Self::In => "in",
        }
    }
}
