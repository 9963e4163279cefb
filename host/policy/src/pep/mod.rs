//! The decision of the policy enforcement point (layer B of seed 003): is
//! this host call, with these arguments, now, under this session and this
//! policy, admissible?
//!
//! - A session's [`SessionFacts`] (grants, budgets and envelope from its
//!   admission, expiry) are compiled once, with the policy's
//!   `dispatch.json` settings, into a [`Scope`].
//! - Each host call is described as a [`Call`] (operation, target,
//!   canonical arguments) and decided by [`decide`] against the scope and
//!   the session's [`Counters`]: lookups and bounds checks, no I/O, no
//!   clock (the caller passes the time). Deny by default; every denial has
//!   a stable [`hcp_contracts::ReasonCode`].
//! - [`input`] builds the decision inputs receipts record, and
//!   [`PepDecider`] re-derives every recorded verdict from them for replay.
//!
//! Reason codes, and the WIT `reason-code` the guest sees:
//!
//! | code | WIT | when |
//! |---|---|---|
//! | `DELEGATION_INVALID` | `session-invalid` | the session expired or was revoked |
//! | `DENY_TOOL_NOT_FOUND` | `tool-not-found` | outside the granted surface, or turned off by `dispatch.json` |
//! | `DENY_ARGS_INVALID` | `args-invalid` | arguments off the operation's schema |
//! | `DENY_IDENTITY_UNAUTHORIZED` | `identity-unauthorized` | a path outside the granted directories, or a write into a read-only one |
//! | `BUDGET_EXCEEDED` | `budget-exceeded` | host calls, bytes, artifacts, checkpoints used up |
//! | `DENY_PROHIBITED_ACTION` | `prohibited-action` | an instrument command performs a prohibited action |
//! | `DENY_ENVELOPE_HARD_LIMIT` | `envelope-hard-limit` | an instrument command crosses a hard limit, or instruments are shut down |
//! | `THREAT_SIGNAL_DETECTED` | `threat-signal-detected` | a detector set to `deny` fired |
//! | `FAIL_CLOSED_ERROR` | `fail-closed-error` | the decision could not be made (malformed call, scope that does not compile) |

mod bound;
mod call;
mod cut;
mod decide;
mod error;
pub mod gate;
pub mod hid;
pub mod input;
pub mod interfaces;
pub mod reload;
mod replay;
mod scope;
pub mod threat;
mod verdict;

pub use bound::{ARGS_PREFIX_BYTES, BoundedText, FullArgs};
pub use cut::Text;
pub use decide::{Recorded, decide, decide_recorded};
pub use error::{CallError, CanonicalError, InputError};
pub use hcp_contracts::interfaces::Op;
pub use interfaces::artifacts::ArtifactArgs;
pub use interfaces::checkpoints::{CheckpointLoadArgs, CheckpointSaveArgs};
pub use interfaces::filesystem::{FsAccess, FsArgs, FsWriteArgs};
pub use interfaces::hid::HidArgs;
pub use interfaces::http::HttpArgs;
pub use interfaces::instrument::{InstrumentArgs, PlanArgs, SettingArgs};
pub use interfaces::keyvalue::KvArgs;
pub use interfaces::log::LogArgs;
pub use interfaces::sockets::{ConnectArgs, LookupArgs};
pub use interfaces::{Args, Call, Empty};
pub use replay::{PepDecider, SCOPES_DIR, scope_file};
pub use scope::{
    BudgetCaps, CallLimits, FsSurface, NetSurface, Scope, ScopeError, SessionFacts, Surface,
};
pub use threat::{Detector, ScanMode, Signals};
pub use verdict::{Counters, Decision};

use crate::gate::Admission;
use hcp_contracts::manifest::Manifest;

impl SessionFacts {
    /// The facts of a task the gate admitted: the admission's caller, risk,
    /// data classification, envelope and budgets; the manifest's grants and
    /// limits.
    pub fn admitted(
        admission: &Admission,
        manifest: &Manifest,
        session_id: &str,
        task_id: &str,
        expires_at_ms: u64,
    ) -> Self {
        Self {
            budgets: admission.budgets.into(),
            caller: admission.caller.as_str().to_owned(),
            capability: manifest.id(),
            data_classification: admission.data_classification,
            envelope: admission.envelope.envelope.clone(),
            expires_at_ms,
            limits: CallLimits::of(manifest),
            risk_level: admission.risk_level,
            session_id: session_id.to_owned(),
            surface: Surface::of(&manifest.grants),
            task_id: task_id.to_owned(),
        }
    }
}
