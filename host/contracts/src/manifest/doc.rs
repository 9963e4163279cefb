//! The manifest as written: serde types with unknown fields refused.
//!
//! These mirror `schemas/capability.schema.json`; [`super::load`] turns them
//! into the checked [`super::Manifest`].

use super::access::Access;
use super::table_grants::TableGrants;
use crate::levels::RiskLevel;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The whole manifest document.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestDoc {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The seed's Capability Declaration.
    pub capability: Declaration,
    /// The component.
    pub component: ComponentDoc,
    /// What the component may reach.
    #[serde(default)]
    pub grants: GrantsDoc,
    /// Resource limits.
    #[serde(default)]
    pub limits: super::LimitsDoc,
    /// Default safety envelope.
    #[serde(default)]
    pub safety_envelope: SafetyEnvelope,
}

/// The Capability Declaration of seed 000.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    /// Unique identifier.
    pub name: String,
    /// Semantic version.
    pub version: String,
    /// What it does.
    pub description: String,
    /// Schema of inputs.
    pub input_schema: Value,
    /// Schema of outputs.
    pub output_schema: Value,
    /// Safety characteristics.
    pub safety: Safety,
    /// Operational constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<DeclaredConstraints>,
}

/// Safety section of the declaration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Safety {
    /// Highest risk level a task may be assessed at.
    pub risk_ceiling: RiskLevel,
    /// Where assessment starts (not in the seed; default R1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_floor: Option<RiskLevel>,
    /// Whether tasks need a human's sign-off (at R3 and above).
    pub requires_human_approval: bool,
    /// Whether physical devices are controlled.
    pub involves_physical_resources: bool,
    /// Kinds of resources involved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_types: Vec<String>,
    /// Kinds of hazards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hazard_categories: Vec<String>,
}

/// Where a declaration's risk floor comes from ([`Safety::floor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorSource {
    /// Nothing declared one: R1.
    Default,
    /// `safety.risk_floor`.
    Declared,
    /// `safety.involves_physical_resources` without a `risk_floor`: R4.
    Physical,
}

impl Safety {
    /// The lowest level the declaration lets a task of this capability be
    /// assessed at: its `risk_floor` when it declares one; else R4 when
    /// it involves physical resources (seed 000: R4 is "operations
    /// involving physical resources"); else R1. The gate's assessment
    /// starts here (an operator's `risk.json` may set another base, never
    /// below a declared `risk_floor`).
    pub fn floor(&self) -> (RiskLevel, FloorSource) {
        match self.risk_floor {
            Some(floor) => (floor, FloorSource::Declared),
            None if self.involves_physical_resources => (RiskLevel::R4, FloorSource::Physical),
            None => (RiskLevel::R1, FloorSource::Default),
        }
    }
}

/// Constraints section of the declaration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredConstraints {
    /// Longest a task may run (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<String>,
    /// Tasks at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_limit: Option<u32>,
}

/// The component reference.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentDoc {
    /// Path to the `.wasm`, relative to the manifest or absolute.
    pub path: String,
    /// `sha256:<hex>` of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Targeted world, e.g. `hcp:capability/capability@1.0.0`.
    pub world: String,
}

/// Grants as written. The typed fields are the grants of the first
/// interfaces; the table's grants with a shape ([`crate::interfaces::Grant::shape`])
/// are entries of `table` (an unknown field is refused there).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GrantsDoc {
    /// Directories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystem: Vec<FsGrantDoc>,
    /// Destinations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetGrantDoc>,
    /// Environment variable names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Instruments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instruments: Vec<String>,
    /// Devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// The grants of the table by shape (`config`, ...), after the fields
    /// above.
    #[serde(flatten)]
    pub table: TableGrants,
}

/// A directory grant as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsGrantDoc {
    /// Host directory.
    pub path: String,
    /// Path the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_path: Option<String>,
    /// `read-only` or `read-write`.
    pub access: Access,
}

/// A network grant as written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetGrantDoc {
    /// Name or IP literal.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Admit private addresses a name resolves to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_private: bool,
}

/// The safety envelope of seed 000.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyEnvelope {
    /// Bounded parameters by name.
    #[serde(default)]
    pub parameters: BTreeMap<String, EnvelopeParameter>,
    /// Actions that never run.
    #[serde(default)]
    pub prohibited_actions: Vec<String>,
    /// Condition → procedure, e.g. `over_temperature` → `immediate_shutdown`.
    #[serde(default)]
    pub emergency_procedures: BTreeMap<String, String>,
}

/// One bounded parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeParameter {
    /// Lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Unit of the bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// A hard limit is never crossed.
    #[serde(default)]
    pub hard_limit: bool,
}
