//! Operator policy of the HCP host's admission gate (HCP L3): who may call,
//! with what credential; how risky a task is; whether Cedar allows it; what
//! envelope and budgets its session runs under.
//!
//! The policy lives in a directory of operator-editable files (the shipped
//! set is the repository's `policies/`): `callers.json`, `risk.json`,
//! `context.json`, `budgets.json`, `envelopes.json`, `authz.cedar` and
//! `dispatch.json`. Each JSON file has a JSON Schema in `schemas/policy/`;
//! `authz.cedar` is checked against `schemas/policy/authz.cedarschema`. [`PolicySet::load`] checks
//! them all and reports every problem with its file and JSON pointer;
//! [`PolicySet::policy_hash`] identifies the set in receipts.
//!
//! The gate's decisions ([`PolicySet::admit`] and its steps, in seed 000's
//! order) return an [`Admission`] or a [`Rejection`] that carries exactly
//! the fields of `task_rejected`.
//!
//! [`pep`] is the other decision point: the per-call decision of the
//! policy enforcement point, compiled per session from the admission, and
//! its replay.
//!
//! # What this crate must never do
//!
//! It is pure and replayable. It must never depend on wasmtime, HTTP,
//! SQLite or a serial port; never read the clock (the caller passes "now")
//! or the state of equipment (passed in as [`EquipmentState`]); hold no
//! global mutable state; and read no file but the policy files it is asked
//! to load. The same policy set and the same request give the same decision,
//! so receipts can be replayed. It never holds a caller's token: only its
//! SHA-256, compared in constant time.
#![deny(missing_docs)]

pub mod assess;
pub mod authz;
pub mod budget;
pub mod caller;
mod check;
pub mod credential;
mod dupkeys;
pub mod envelope;
pub mod file_kind;
pub mod files;
pub mod gate;
pub mod ids;
pub mod install;
pub mod install_limits;
mod load;
pub mod operator;
pub mod pep;
pub mod policy_set;
pub mod reply_to;
pub mod units;

pub use assess::{Assessment, BaseSource, FiredRule, RuleSource};
pub use authz::{AuthzAction, AuthzContext, AuthzDecision};
pub use budget::Budgets;
pub use caller::Caller;
pub use credential::{CredentialHash, hash_credential};
pub use envelope::{EffectiveEnvelope, EnvelopeError, tighten};
pub use file_kind::PolicyFile;
pub use files::CallerKind;
pub use gate::{
    Admission, AdmissionRequest, ApprovalReach, EquipmentState, Rejection, Stage, approval_required,
};
pub use ids::{CallerId, CapabilityName, IdError, ResourceType, RuleId};
pub use install::InstallPolicy;
pub use load::{FileProblem, PolicyError};
pub use pep::interfaces::{interface_files, secret_space, secret_spaces};
pub use policy_set::PolicySet;
