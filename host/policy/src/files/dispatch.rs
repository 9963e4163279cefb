//! `dispatch.json`: how the PEP treats each host call beyond the grants:
//! the threat scan's detectors (deny, record or off), and host calls the
//! operator turns off for a capability even where its manifest grants them.

use crate::ids::CapabilityName;
use crate::pep::{Op, ScanMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Every detector's mode, where a capability does not set its own.
    pub threat_scan: ThreatScan,
    /// By capability.
    #[serde(default)]
    pub capabilities: BTreeMap<CapabilityName, DispatchOverride>,
}

/// Every detector's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreatScan {
    /// Terminal escapes in any string argument.
    pub terminal_escape: ScanMode,
    /// Phrases addressing a model, in free text.
    pub prompt_injection: ScanMode,
    /// Shell metacharacters in arguments bound for a command.
    pub shell_metacharacters: ScanMode,
}

/// Some detectors' modes; the rest come from the defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreatScanOverride {
    /// Terminal escapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_escape: Option<ScanMode>,
    /// Prompt injection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_injection: Option<ScanMode>,
    /// Shell metacharacters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_metacharacters: Option<ScanMode>,
}

/// One capability's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchOverride {
    /// Its detectors' modes.
    #[serde(default)]
    pub threat_scan: ThreatScanOverride,
    /// Host calls denied (`DENY_TOOL_NOT_FOUND`) even where granted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_calls: Vec<Op>,
}

impl DispatchFile {
    /// The detectors' modes and the calls turned off for `capability` (a
    /// name, without version).
    pub fn settings(&self, capability: &str) -> (ThreatScan, Vec<Op>) {
        let d = self.threat_scan;
        match self
            .capabilities
            .iter()
            .find(|(name, _)| name.as_str() == capability)
        {
            None => (d, Vec::new()),
            Some((_, o)) => (
                ThreatScan {
                    terminal_escape: o.threat_scan.terminal_escape.unwrap_or(d.terminal_escape),
                    prompt_injection: o.threat_scan.prompt_injection.unwrap_or(d.prompt_injection),
                    shell_metacharacters: o
                        .threat_scan
                        .shell_metacharacters
                        .unwrap_or(d.shell_metacharacters),
                },
                o.denied_calls.clone(),
            ),
        }
    }
}
