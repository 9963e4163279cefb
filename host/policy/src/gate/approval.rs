//! An operator's approval of an admitted task.

use super::{Admission, Rejection, Stage};
use crate::authz::{AuthzAction, AuthzContext};
use crate::caller::Caller;
use crate::policy_set::PolicySet;
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
