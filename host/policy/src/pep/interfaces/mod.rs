//! The PEP's rules, one module per interface of the table of interfaces
//! ([`hcp_contracts::interfaces::INTERFACES`]) that has operations: its
//! granted surface, its argument rules, its limits and, for instruments,
//! the safety envelope, behind one trait ([`InterfaceRules`]).
//!
//! The modules describe; [`super::decide`] decides: it runs the checks in
//! their fixed order (session, operator's dispatch, surface, arguments,
//! budgets, envelope, threat scan), asking the call's interface
//! ([`super::Op::rules`]) for its part of each, and the first failure
//! decides. Every rule here is pure, as `decide` is.

pub(super) mod artifacts;
pub(super) mod checkpoints;
pub(super) mod config;
pub(super) mod filesystem;
pub(super) mod hid;
pub(super) mod http;
pub(super) mod instrument;
pub(super) mod log;
pub(super) mod sockets;

use super::call::Call;
use super::decide::{Counters, Decision};
use super::scope::Scope;

/// One interface's part of the PEP's checks. A call reaches its
/// interface's rules only with an operation of that interface; arguments
/// that do not fit the operation fail [`InterfaceRules::surface`] closed
/// (`FAIL_CLOSED_ERROR`), so the later checks see them fitted.
pub(crate) trait InterfaceRules: Sync {
    /// Check 2: whether the call is within the session's granted surface
    /// (`DENY_TOOL_NOT_FOUND`).
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision>;

    /// Check 3: the pinned schema of the operation's arguments
    /// (`DENY_ARGS_INVALID`).
    fn arguments(&self, _call: &Call<'_>) -> Result<(), Decision> {
        Ok(())
    }

    /// Check 4, after the session's budgets: the interface's own limits
    /// (`BUDGET_EXCEEDED`).
    fn limits(&self, _scope: &Scope, _spent: &Counters, _call: &Call<'_>) -> Result<(), Decision> {
        Ok(())
    }

    /// Check 5: the safety envelope (`DENY_PROHIBITED_ACTION`,
    /// `DENY_ENVELOPE_HARD_LIMIT`).
    fn envelope(&self, _scope: &Scope, _call: &Call<'_>) -> Result<(), Decision> {
        Ok(())
    }
}
