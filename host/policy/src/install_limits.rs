//! `install.json` `limits`: the most a manifest may ask for each of its
//! limits. Every limit a task runs under is bounded at install: the
//! manifest's `limits` (memory, table elements, instances, output, log,
//! artifacts, checkpoints), its `max_duration` and its `concurrent_limit`.
//! Where `install.json` sets no bound, the built-in maximum
//! ([`BUILT_IN`]) applies; a limit the manifest does not set is checked at
//! the host's default for it.

use hcp_contracts::manifest::{LimitsDoc, Manifest};
use hcp_contracts::{IsoDuration, Problem};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The bounds as written; each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitBounds {
    /// Linear memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Elements of any one table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_elements: Option<u64>,
    /// Core instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u64>,
    /// Bytes of the `outputs` JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// Bytes of the task log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
    /// Number of artifacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<u64>,
    /// Bytes of all artifacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_bytes: Option<u64>,
    /// Number of checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<u64>,
    /// Bytes of one checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_bytes: Option<u64>,
    /// The longest `max_duration` (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<String>,
    /// The highest `concurrent_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_limit: Option<u64>,
}

/// The built-in maxima, where `install.json` sets no bound.
pub const BUILT_IN: BuiltIn = BuiltIn {
    memory_bytes: 1 << 30,
    table_elements: 1_000_000,
    instances: 256,
    output_bytes: 16 << 20,
    log_bytes: 16 << 20,
    artifacts: 1_024,
    artifact_bytes: 1 << 30,
    checkpoints: 1_024,
    checkpoint_bytes: 64 << 20,
    max_duration: Duration::from_secs(7 * 86_400),
    concurrent_limit: 64,
};

/// Every bound, set (see [`BUILT_IN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    /// Linear memory, bytes (1 GiB).
    pub memory_bytes: u64,
    /// Elements of any one table (1,000,000).
    pub table_elements: u64,
    /// Core instances (256).
    pub instances: u64,
    /// Bytes of the `outputs` JSON (16 MiB).
    pub output_bytes: u64,
    /// Bytes of the task log (16 MiB).
    pub log_bytes: u64,
    /// Number of artifacts (1,024).
    pub artifacts: u64,
    /// Bytes of all artifacts (1 GiB).
    pub artifact_bytes: u64,
    /// Number of checkpoints (1,024).
    pub checkpoints: u64,
    /// Bytes of one checkpoint (64 MiB).
    pub checkpoint_bytes: u64,
    /// The longest `max_duration` (P7D).
    pub max_duration: Duration,
    /// The highest `concurrent_limit` (64).
    pub concurrent_limit: u64,
}

impl LimitBounds {
    /// Problems of the bounds as written (`at`: the JSON pointer of
    /// `limits`).
    pub(crate) fn problems(&self, at: &str) -> Vec<Problem> {
        match self.max_duration.as_deref().map(IsoDuration::parse) {
            Some(Err(e)) => vec![Problem::new(format!("{at}/max_duration"), e)],
            _ => Vec::new(),
        }
    }

    /// Every limit of `manifest` above its bound, each with both values.
    pub(crate) fn check(&self, manifest: &Manifest) -> Vec<String> {
        let doc: &LimitsDoc = &manifest.doc.limits;
        let l = &manifest.limits;
        let b = &BUILT_IN;
        let mut reasons = Vec::new();
        let counts = [
            (
                "memory_bytes",
                doc.memory_bytes,
                l.memory_bytes,
                self.memory_bytes,
                b.memory_bytes,
            ),
            (
                "table_elements",
                doc.table_elements,
                l.table_elements,
                self.table_elements,
                b.table_elements,
            ),
            (
                "instances",
                doc.instances,
                l.instances,
                self.instances,
                b.instances,
            ),
            (
                "output_bytes",
                doc.output_bytes,
                l.output_bytes,
                self.output_bytes,
                b.output_bytes,
            ),
            (
                "log_bytes",
                doc.log_bytes,
                l.log_bytes,
                self.log_bytes,
                b.log_bytes,
            ),
            (
                "artifacts",
                doc.artifacts,
                l.artifacts,
                self.artifacts,
                b.artifacts,
            ),
            (
                "artifact_bytes",
                doc.artifact_bytes,
                l.artifact_bytes,
                self.artifact_bytes,
                b.artifact_bytes,
            ),
            (
                "checkpoints",
                doc.checkpoints,
                l.checkpoints,
                self.checkpoints,
                b.checkpoints,
            ),
            (
                "checkpoint_bytes",
                doc.checkpoint_bytes,
                l.checkpoint_bytes,
                self.checkpoint_bytes,
                b.checkpoint_bytes,
            ),
        ];
        for (name, written, asked, bound, built_in) in counts {
            let field = format!("limits.{name}");
            if let Some(reason) = above(&field, written.is_some(), asked, bound, built_in) {
                reasons.push(reason);
            }
        }
        let constraints = manifest.doc.capability.constraints.as_ref();
        let bound = self
            .max_duration
            .as_deref()
            .and_then(|t| IsoDuration::parse(t).ok())
            .map(IsoDuration::get);
        let limit = bound.unwrap_or(b.max_duration);
        if manifest.max_duration > limit {
            let asked = IsoDuration::from_duration(manifest.max_duration);
            reasons.push(format!(
                "capability.constraints.max_duration {}{asked} is above the most this host installs, {} {}",
                if constraints.and_then(|c| c.max_duration.as_ref()).is_some() {
                    ""
                } else {
                    "(the default) "
                },
                IsoDuration::from_duration(limit),
                source("limits.max_duration", bound.is_some()),
            ));
        }
        if let Some(reason) = above(
            "capability.constraints.concurrent_limit",
            constraints.and_then(|c| c.concurrent_limit).is_some(),
            u64::from(manifest.concurrent_limit),
            self.concurrent_limit,
            b.concurrent_limit,
        ) {
            reasons.push(reason);
        }
        reasons
    }
}

fn source(field: &str, set: bool) -> String {
    if set {
        format!("(install.json {field})")
    } else {
        format!("(the built-in maximum; install.json sets no {field})")
    }
}

fn above(
    field: &str,
    written: bool,
    asked: u64,
    bound: Option<u64>,
    built_in: u64,
) -> Option<String> {
    let limit = bound.unwrap_or(built_in);
    (asked > limit).then(|| {
        let bound_field = field.replace("capability.constraints.", "limits.");
        format!(
            "{field} {}{asked} is above the most this host installs, {limit} {}",
            if written { "" } else { "(the default) " },
            source(&bound_field, bound.is_some())
        )
    })
}
