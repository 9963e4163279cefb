//! The policy files as written: serde types with unknown fields refused.
//! They mirror the JSON Schemas in `schemas/policy/`; [`crate::PolicySet::load`] checks
//! them together into a [`crate::PolicySet`].

pub mod budgets;
pub mod callers;
pub mod context;
pub mod dispatch;
pub mod envelopes;
pub mod risk;

pub use budgets::{
    BudgetLimits, BudgetOverride, BudgetsFile, Retention, SubmissionLimits, SubmissionOverride,
    SubmissionsSection,
};
pub use callers::{CallerDoc, CallerKind, CallersFile};
pub use context::{BusyAction, ContextFile, LocalTime, ResourceRule, UnattendedRule, Weekday};
pub use dispatch::{DispatchFile, DispatchOverride, ThreatScan, ThreatScanOverride};
pub use envelopes::EnvelopesFile;
pub use risk::{CapabilityRisk, Comparison, EscalationRule, RiskFile};
