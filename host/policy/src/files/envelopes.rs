//! `envelopes.json`: operators' tightening of capabilities' safety
//! envelopes, in seed 000's envelope shape.

use crate::ids::CapabilityName;
use hcp_contracts::manifest::SafetyEnvelope;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopesFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The operator's envelope by capability; merged with the declaration's
    /// so that the tighter bound always wins.
    pub capabilities: BTreeMap<CapabilityName, SafetyEnvelope>,
}
