//! An operator's approval of an admitted task.

use super::{Admission, Rejection, Stage};
use crate::authz::{AuthzAction, AuthzContext};
use crate::caller::Caller;
use crate::policy_set::PolicySet;
use hcp_contracts::RiskLevel;
use hcp_contracts::manifest::Declaration;
use hcp_contracts::message::RejectReason;
use std::collections::BTreeSet;

impl PolicySet {
    /// May the operator `operator_id`, presenting `credential`, approve the
    /// admitted task? Authenticates, requires an operator listed for the
    /// capability with a risk and data limit at or above the task's, then
    /// asks Cedar (`approve`; the shipped policy forbids approving one's
    /// own task).
    ///
    /// # Errors
    ///
    /// The refusal of the approval (not of the task): `unauthorized`,
    /// `forbidden`, or Cedar's.
    pub fn authorize_approval(
        &self,
        operator_id: &str,
        credential: &str,
        admission: &Admission,
        declaration: &Declaration,
    ) -> Result<&Caller, Rejection> {
        let operator = self.authenticate(operator_id, credential)?;
        self.authorize_approval_by(operator, admission, declaration)?;
        Ok(operator)
    }

    /// [`PolicySet::authorize_approval`] for an operator its transport
    /// already authenticated (the local command line).
    ///
    /// # Errors
    ///
    /// As [`PolicySet::authorize_approval`], but never `unauthorized`.
    pub fn authorize_approval_by(
        &self,
        operator: &Caller,
        admission: &Admission,
        declaration: &Declaration,
    ) -> Result<(), Rejection> {
        let busy: BTreeSet<String> = admission.queued_for.iter().cloned().collect();
        let context = AuthzContext {
            risk: admission.risk_level,
            data: admission.data_classification,
            unattended: admission.assessment.unattended,
            busy_resources: &busy,
            submitter: admission.caller.as_str(),
        };
        self.authorize_approval_in(operator, declaration, &context)
    }

    /// The checks of [`PolicySet::authorize_approval_by`] on the facts of
    /// `context`: an operator listed for the capability, with a risk and data
    /// limit at or above the context's, then Cedar (`approve`). The HID
    /// mediator's decisions and mode changes ask the same question.
    ///
    /// # Errors
    ///
    /// As [`PolicySet::authorize_approval_by`].
    pub fn authorize_approval_in(
        &self,
        operator: &Caller,
        declaration: &Declaration,
        context: &AuthzContext<'_>,
    ) -> Result<(), Rejection> {
        let refuse = |message: String| {
            Err(Rejection::new(
                Stage::Access,
                RejectReason::Forbidden,
                message,
            ))
        };
        if !operator.is_operator() {
            return refuse(format!(
                "{} is not an operator and cannot approve tasks",
                operator.id
            ));
        }
        if !operator.lists(&declaration.name) {
            return refuse(format!(
                "operator {} may not approve {}",
                operator.id, declaration.name
            ));
        }
        if context.risk > operator.max_risk_level || context.data > operator.max_data_classification
        {
            return refuse(format!(
                "operator {} may approve up to {} with {} data, not {} with {} data",
                operator.id,
                operator.max_risk_level,
                operator.max_data_classification,
                context.risk,
                context.data
            ));
        }
        self.authorize(AuthzAction::Approve, operator, declaration, context)?;
        Ok(())
    }
}

/// Whether the policy can ever ask a human to approve a task of a
/// capability whose declaration requires approval
/// ([`PolicySet::approval_reach`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalReach {
    /// Some task can be assessed at a level that needs approval and is
    /// within the capability's ceiling.
    pub reachable: bool,
    /// Why, in words: the base, what raises it, the ceiling.
    pub detail: String,
}

impl PolicySet {
    /// For a declaration that requires human approval: whether any task of
    /// it can be admitted at a level the gate asks approval for
    /// ([`super::approval_required`]: R3 or above), whatever its inputs
    /// and time, under this policy. The levels a task can be assessed at
    /// are the assessment's own base ([`PolicySet::assess`]), alone or
    /// raised by one of the capability's escalation rules or unattended
    /// windows; those above the declared ceiling are refused, never asked.
    /// `None` for a declaration that requires no approval.
    ///
    /// `hcp review` and `hcp install` warn when it is not reachable: the
    /// declaration asks for a human the policy will never call.
    pub fn approval_reach(&self, declaration: &Declaration) -> Option<ApprovalReach> {
        if !declaration.safety.requires_human_approval {
            return None;
        }
        let profile = self.risk_profile(&declaration.name);
        let (base, source) = crate::assess::base(declaration, profile.and_then(|p| p.base));
        let rules = profile.map_or(&[][..], |p| &p.rules[..]);
        let mut raises: Vec<RiskLevel> = rules.iter().map(|r| r.raises_to).collect();
        raises.extend(
            self.context_rules()
                .unattended_hours
                .iter()
                .filter(|w| {
                    w.capabilities
                        .as_ref()
                        .is_none_or(|caps| caps.iter().any(|c| c.as_str() == declaration.name))
                })
                .map(|w| w.raises_to),
        );
        let ceiling = declaration.safety.risk_ceiling;
        let levels: BTreeSet<RiskLevel> = std::iter::once(base)
            .chain(raises.iter().map(|r| (*r).max(base)))
            .collect();
        let asked: Vec<RiskLevel> = levels
            .iter()
            .copied()
            .filter(|l| *l <= ceiling && super::approval_required(declaration, *l))
            .collect();
        let highest = levels.last().copied().unwrap_or(base);
        let raised = match raises.len() {
            0 => "no escalation rule or unattended window raises it".to_owned(),
            n => format!(
                "{n} escalation rule{} or unattended window{} raise it to at most {highest}",
                if n == 1 { "" } else { "s" },
                if n == 1 { "" } else { "s" }
            ),
        };
        let why = format!(
            "base {base} from {}; {raised}; ceiling {ceiling}",
            source.describe()
        );
        Some(if let Some(lowest) = asked.first() {
            ApprovalReach {
                reachable: true,
                detail: format!("asked for tasks assessed {lowest} or above ({why})"),
            }
        } else {
            ApprovalReach {
                reachable: false,
                detail: format!(
                    "the declaration requires human approval, but this policy never asks for it: \
                     approval is asked from R3, and no task of {} can be admitted at R3 or above \
                     ({why}); its tasks run without one. Give it a base of R3 or above in \
                     risk.json, or an escalation rule",
                    declaration.name
                ),
            }
        })
    }
}
