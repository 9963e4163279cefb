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
    /// What one caller may submit: how fast, and how many bytes its
    /// submissions may leave in the store. Absent: the defaults of
    /// [`SubmissionLimits::DEFAULT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submissions: Option<SubmissionsSection>,
    /// How long a settled task's evidence (its receipts, messages,
    /// artifacts) stays in the hot store before `hcp serve` archives it to
    /// an evidence pack and prunes it. Absent: nothing is archived but by
    /// `hcp evidence archive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
}

/// `budgets.json` `retention`: `hcp serve` archives the settled tasks older
/// than `hot_seconds`, every `every_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// Seconds a settled task stays hot (at least 1).
    pub hot_seconds: std::num::NonZeroU64,
    /// Seconds between two archive runs (at least 1; 3600 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_seconds: Option<std::num::NonZeroU64>,
}

impl Retention {
    /// Seconds between two archive runs.
    pub fn every(&self) -> u64 {
        self.every_seconds.map_or(3600, std::num::NonZeroU64::get)
    }
}

/// `budgets.json` `submissions`: every caller's limits on what it submits,
/// rejected submissions included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionsSection {
    /// Every caller's, where `callers` sets nothing (each field absent:
    /// [`SubmissionLimits::DEFAULT`]'s).
    #[serde(default)]
    pub defaults: SubmissionOverride,
    /// By caller.
    #[serde(default)]
    pub callers: BTreeMap<CallerId, SubmissionOverride>,
}

/// Some of a caller's submission limits; the rest come from the section's
/// `defaults`, then from [`SubmissionLimits::DEFAULT`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionOverride {
    /// Submissions per second, sustained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u32>,
    /// Submissions at once above the sustained rate (the bucket's size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Bytes of submissions kept in the store over the last 24 hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_bytes_per_day: Option<u64>,
}

/// One caller's submission limits, every one set: a token bucket of
/// `burst` submissions refilled at `per_second`, and at most
/// `stored_bytes_per_day` bytes of its submissions recorded in any 24
/// hours. Every submission counts, whatever its answer (a refused one
/// costs the host its parse, its record and its receipt all the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionLimits {
    /// Submissions per second, sustained (at least 1).
    pub per_second: u32,
    /// Submissions at once above the sustained rate (at least 1).
    pub burst: u32,
    /// Bytes of submissions recorded in any 24 hours.
    pub stored_bytes_per_day: u64,
}

impl SubmissionLimits {
    /// The limits where `budgets.json` sets none: 500 submissions a second
    /// after a burst of 2,000 (above what one host gates: they bound a
    /// flood, not a busy caller), and 1 GiB of submissions a day (a
    /// thousand of the largest, 1 MiB, messages).
    pub const DEFAULT: Self = Self {
        per_second: 500,
        burst: 2_000,
        stored_bytes_per_day: 1 << 30,
    };

    /// These limits with what `o` sets in their place.
    #[must_use]
    pub fn with(self, o: &SubmissionOverride) -> Self {
        Self {
            per_second: o.per_second.unwrap_or(self.per_second),
            burst: o.burst.unwrap_or(self.burst),
            stored_bytes_per_day: o.stored_bytes_per_day.unwrap_or(self.stored_bytes_per_day),
        }
    }
}

impl BudgetsFile {
    /// The submission limits of `caller`: its own entry's, then the
    /// section's defaults, then [`SubmissionLimits::DEFAULT`], field by
    /// field.
    pub fn submission_limits(&self, caller: &str) -> SubmissionLimits {
        let Some(s) = &self.submissions else {
            return SubmissionLimits::DEFAULT;
        };
        let limits = SubmissionLimits::DEFAULT.with(&s.defaults);
        match s.callers.iter().find(|(id, _)| id.as_str() == caller) {
            Some((_, o)) => limits.with(o),
            None => limits,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PolicyFile;

    fn file(submissions: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "defaults": {"host_calls": 1, "bytes": 1, "artifacts": 1, "concurrent_sessions": 1},
            "submissions": submissions,
        })
    }

    #[test]
    fn a_file_without_submissions_has_the_host_defaults() {
        let f: BudgetsFile = serde_json::from_value(serde_json::json!({
            "defaults": {"host_calls": 1, "bytes": 1, "artifacts": 1, "concurrent_sessions": 1}
        }))
        .expect("parses");
        assert_eq!(f.submission_limits("anyone"), SubmissionLimits::DEFAULT);
    }

    #[test]
    fn a_callers_entry_wins_then_the_defaults_then_the_hosts_field_by_field() {
        let f: BudgetsFile = serde_json::from_value(file(serde_json::json!({
            "defaults": {"per_second": 5, "stored_bytes_per_day": 4096},
            "callers": {"pipe-1": {"burst": 3, "stored_bytes_per_day": 8192}},
        })))
        .expect("parses");
        assert_eq!(
            f.submission_limits("pipe-1"),
            SubmissionLimits {
                per_second: 5,
                burst: 3,
                stored_bytes_per_day: 8192
            }
        );
        assert_eq!(
            f.submission_limits("other"),
            SubmissionLimits {
                per_second: 5,
                burst: SubmissionLimits::DEFAULT.burst,
                stored_bytes_per_day: 4096
            }
        );
    }

    #[test]
    fn the_schema_refuses_a_zero_rate_and_unknown_fields_with_their_pointers() {
        let text = file(serde_json::json!({
            "defaults": {"per_second": 0, "burst": 0, "stored_bytes_per_day": 10},
            "callers": {"pipe-1": {"per_minute": 5}},
        }))
        .to_string();
        let problems = PolicyFile::Budgets.check(&text).expect_err("refused");
        let text = hcp_contracts::problem::list(&problems);
        for expected in [
            "/submissions/defaults/per_second: 0 is less than the minimum of 1",
            "/submissions/defaults/burst: 0 is less than the minimum of 1",
            "/submissions/defaults/stored_bytes_per_day: 10 is less than the minimum of 1024",
            "/submissions/callers/pipe-1: Additional properties are not allowed ('per_minute' was unexpected)",
        ] {
            assert!(text.contains(expected), "{expected} not in:\n{text}");
        }
    }
}
