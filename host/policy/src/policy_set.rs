//! The policy set: every file of a policy directory, checked together, with
//! its hash.
//!
//! # Ambient authority
//!
//! [`PolicySet::load`] reads the seven policy files (and the interfaces'
//! optional files, such as `config.json`) of the directory it is given,
//! and nothing else. Everything after loading is pure.

use crate::authz::Authz;
use crate::caller::Caller;
use crate::files::{
    BudgetsFile, CapabilityRisk, ContextFile, DispatchFile, EnvelopesFile, RiskFile,
};
use crate::ids::CallerId;
use crate::operator::{InterfaceFile, OperatorFile};
use hcp_contracts::manifest::SafetyEnvelope;
use std::collections::BTreeMap;

/// A loaded, checked policy set. Immutable: to change policy, load a new one.
#[derive(Debug, Clone)]
pub struct PolicySet {
    pub(crate) callers: BTreeMap<CallerId, Caller>,
    pub(crate) risk: RiskFile,
    pub(crate) context: ContextFile,
    pub(crate) budgets: BudgetsFile,
    pub(crate) envelopes: EnvelopesFile,
    pub(crate) authz: Authz,
    pub(crate) dispatch: DispatchFile,
    /// Each interface's own file, in the order of
    /// [`crate::interface_files`] (empty when the directory has
    /// none).
    pub(crate) interface_files: Vec<std::sync::Arc<dyn OperatorFile>>,
    pub(crate) hash: String,
    pub(crate) sources: BTreeMap<String, String>,
    /// `sources` as JSON (what [`PolicySet::sources_json`] gives).
    pub(crate) sources_json: std::sync::Arc<str>,
}

impl PolicySet {
    /// `sha256:<hex>` over the canonical content of every file: the JCS
    /// (RFC 8785) form of `{"<file name>": <content>, ...}`, where a JSON
    /// file's content is its parsed value and `authz.cedar`'s its text. The
    /// same policy, reformatted, has the same hash; receipts record it.
    pub fn policy_hash(&self) -> &str {
        &self.hash
    }

    /// The files' text by name, exactly as loaded (for evidence and replay:
    /// [`PolicySet::from_sources`] rebuilds the same set from them).
    pub fn sources(&self) -> &BTreeMap<String, String> {
        &self.sources
    }

    /// [`PolicySet::sources`] as a JSON object of file name to text, as
    /// receipts store the set's snapshot: written once, when the set was
    /// loaded, not for every receipt that names it.
    pub fn sources_json(&self) -> &std::sync::Arc<str> {
        &self.sources_json
    }

    /// Every caller, by id.
    pub fn callers(&self) -> &BTreeMap<CallerId, Caller> {
        &self.callers
    }

    /// The caller named `id`, if any. For transports that authenticate the
    /// caller themselves (AMQP's validated `user-id`); others must use
    /// [`PolicySet::authenticate`].
    pub fn caller(&self, id: &str) -> Option<&Caller> {
        CallerId::try_from(id)
            .ok()
            .and_then(|id| self.callers.get(&id))
    }

    /// The caller whose broker user is `user` (`amqp_user` in
    /// `callers.json`): the identity of an AMQP message, whose `user-id`
    /// the broker has checked against the connection's login.
    pub fn caller_for_amqp_user(&self, user: &str) -> Option<&Caller> {
        self.callers
            .values()
            .find(|c| c.amqp_user.as_deref() == Some(user))
    }

    /// The risk profile of a capability, if `risk.json` has one.
    pub fn risk_profile(&self, capability: &str) -> Option<&CapabilityRisk> {
        self.risk
            .capabilities
            .iter()
            .find(|(n, _)| n.as_str() == capability)
            .map(|(_, p)| p)
    }

    /// The JSON pointers into `task_submit.inputs` that any escalation
    /// rule of `risk.json` reads (its `pointer` and `unit_pointer`).
    pub fn risk_rule_pointers(&self) -> impl Iterator<Item = &str> {
        self.risk.capabilities.values().flat_map(|p| {
            p.rules
                .iter()
                .flat_map(|r| std::iter::once(r.pointer.as_str()).chain(r.unit_pointer.as_deref()))
        })
    }

    /// `context.json`.
    pub fn context_rules(&self) -> &ContextFile {
        &self.context
    }

    /// `budgets.json`.
    pub fn budget_rules(&self) -> &BudgetsFile {
        &self.budgets
    }

    /// What `caller` may submit (`budgets.json` `submissions`): its rate
    /// and the bytes its submissions may leave in the store a day.
    pub fn submission_limits(&self, caller: &str) -> crate::files::SubmissionLimits {
        self.budgets.submission_limits(caller)
    }

    /// The operator's envelope for a capability, if `envelopes.json` has one.
    pub fn envelope_policy(&self, capability: &str) -> Option<&SafetyEnvelope> {
        self.envelopes
            .capabilities
            .iter()
            .find(|(n, _)| n.as_str() == capability)
            .map(|(_, e)| e)
    }

    /// The Cedar policies.
    pub fn authz(&self) -> &Authz {
        &self.authz
    }

    /// `dispatch.json`: the PEP's threat scan and the calls turned off.
    pub fn dispatch_rules(&self) -> &DispatchFile {
        &self.dispatch
    }

    /// Each interface's own file with what it holds.
    pub(crate) fn interface_files(
        &self,
    ) -> impl Iterator<Item = (&'static InterfaceFile, &dyn OperatorFile)> {
        crate::interface_files()
            .iter()
            .zip(self.interface_files.iter().map(|d| &**d))
    }

    /// The budgets of a task of `declaration` from `caller` (the smaller of
    /// the capability's and the caller's value, or the default), as the gate
    /// computes them; for hosts that run tasks without the gate.
    pub fn budgets_for(
        &self,
        caller: &str,
        declaration: &hcp_contracts::manifest::Declaration,
    ) -> crate::Budgets {
        crate::budget::budgets(&self.budgets, caller, declaration)
    }
}
