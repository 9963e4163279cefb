//! `config.json`: the values of `wasi:config` the operator provides, per
//! capability and key: a plain value written here, or a secret, which this
//! file only marks (`{"secret": true}`): its value is sealed at rest in the
//! data directory (`hcp config secret set`), never written in a policy
//! file. A capability reads a key only where its manifest grants it
//! (`grants.config`) and this file provides it; the PEP decides both.
//!
//! The file is optional: a policy directory without it provides no value
//! (and hashes as it did before the file existed).

use crate::ids::CapabilityName;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// By capability name, by key.
    #[serde(default)]
    pub capabilities: BTreeMap<CapabilityName, BTreeMap<String, ConfigEntry>>,
}

/// One key's value: plain, or a secret sealed in the data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigEntry {
    /// The plain value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `true`: the value is a secret, set with `hcp config secret set`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

impl ConfigFile {
    /// The keys `capability` (a name, without version) is provided with.
    pub fn values(&self, capability: &str) -> Option<&BTreeMap<String, ConfigEntry>> {
        self.capabilities
            .iter()
            .find(|(n, _)| n.as_str() == capability)
            .map(|(_, v)| v)
    }
}

/// What the schema cannot say: an entry is a value or a secret, not both
/// nor neither.
pub(crate) fn check(file: &ConfigFile) -> Vec<hcp_contracts::Problem> {
    let mut problems = Vec::new();
    for (cap, keys) in &file.capabilities {
        for (key, entry) in keys {
            if entry.value.is_some() == entry.secret {
                problems.push(hcp_contracts::Problem::new(
                    format!(
                        "/capabilities/{}/{}",
                        cap.as_str(),
                        key.replace('~', "~0").replace('/', "~1")
                    ),
                    "give either a plain \"value\" or \"secret\": true".to_owned(),
                ));
            }
        }
    }
    problems
}
