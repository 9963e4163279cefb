//! The gate's decisions, in seed 000's order, as pure functions. The host
//! calls [`PolicySet::admit`] (or the steps one by one) and does the rest:
//! input-schema validation, queuing, approval, tokens and storage.
//!
//! Order: authenticate (`unauthorized`) → capability access (`forbidden`) →
//! risk assessment (`invalid_input` for inputs a rule cannot compare) →
//! the capability's risk ceiling and the caller's allowed risk
//! (`risk_too_high`, with a suggestion) → data classification (`forbidden`)
//! → Cedar (`forbidden`, or a forbid policy's `@reason`; a policy error is
//! `internal_error`) → busy resources (`resource_unavailable`, or queued) →
//! effective envelope (`internal_error` when the policy cannot be merged) →
//! human approval needed iff the declaration requires it and the level is
//! R3 or above.

mod approval;
mod steps;
mod types;

pub use approval::ApprovalReach;
pub use types::{Admission, AdmissionRequest, EquipmentState, Rejection, Stage};

use crate::authz::{AuthzAction, AuthzContext};
use crate::caller::Caller;
use crate::ids::CapabilityName;
use crate::policy_set::PolicySet;
use hcp_contracts::RiskLevel;
use hcp_contracts::manifest::Declaration;
use hcp_contracts::message::RejectReason;
use std::collections::BTreeSet;

impl PolicySet {
    /// The whole gate: every step in order, the first refusal wins.
    ///
    /// # Errors
    ///
    /// The [`Rejection`] of the first step that refuses.
    pub fn admit(&self, request: &AdmissionRequest<'_>) -> Result<Admission, Rejection> {
        let caller = self.authenticate(&request.submit.caller_id, request.credential)?;
        self.admit_authenticated(caller, request)
    }

    /// The gate for a caller its transport already authenticated (the local
    /// command line acting with the data directory's authority; AMQP's
    /// validated `user-id`): every step after authentication.
    /// `request.credential` is not used.
    ///
    /// # Errors
    ///
    /// The [`Rejection`] of the first step that refuses.
    pub fn admit_authenticated(
        &self,
        caller: &Caller,
        request: &AdmissionRequest<'_>,
    ) -> Result<Admission, Rejection> {
        let submit = request.submit;
        let declaration = &request.manifest.capability;
        if submit.capability != declaration.name {
            return Err(Rejection::new(
                Stage::Access,
                RejectReason::InternalError,
                format!(
                    "the host matched task for {} with the declaration of {}",
                    submit.capability, declaration.name
                ),
            ));
        }
        if submit.caller_id != caller.id.as_str() {
            return Err(Rejection::new(
                Stage::Authentication,
                RejectReason::Unauthorized,
                format!(
                    "caller {} is authenticated, but the task names caller_id {:?}",
                    caller.id, submit.caller_id
                ),
            ));
        }
        let mut reasons = vec![format!(
            "caller {} ({}) authenticated",
            caller.id,
            caller.kind.as_str()
        )];
        self.check_access(caller, declaration)?;
        let named = caller
            .capabilities
            .iter()
            .any(|c| c.as_str() == declaration.name);
        reasons.push(if named {
            format!("{} lists {}", caller.id, declaration.name)
        } else {
            format!(
                "{} lists every capability (all_capabilities), {} included",
                caller.id, declaration.name
            )
        });
        let assessment = self.assess(declaration, &submit.inputs, request.now)?;
        reasons.push(format!(
            "base {} from {}",
            assessment.base,
            assessment.base_source.describe()
        ));
        for rule in &assessment.fired {
            reasons.push(format!(
                "rule {}: {} → {}",
                rule.id, rule.detail, rule.raises_to
            ));
        }
        self.check_risk(caller, declaration, &assessment)?;
        reasons.push(format!(
            "assessed {} within ceiling {} and caller limit {}",
            assessment.level, declaration.safety.risk_ceiling, caller.max_risk_level
        ));
        let claimed = submit
            .constraints
            .as_ref()
            .and_then(|c| c.data_classification);
        let data = self
            .check_data(caller, declaration, claimed)
            .assessed(assessment.level)?;
        reasons.push(format!(
            "data {data} within clearance {}",
            caller.max_data_classification
        ));
        let busy: BTreeSet<String> = declaration
            .safety
            .resource_types
            .iter()
            .filter(|r| request.equipment.is_busy(r))
            .cloned()
            .collect();
        let context = AuthzContext {
            risk: assessment.level,
            data,
            unattended: assessment.unattended,
            busy_resources: &busy,
            submitter: caller.id.as_str(),
        };
        let authorized_by = self
            .authorize(AuthzAction::Invoke, caller, declaration, &context)
            .map_err(|r| r.assessed(assessment.level))?;
        reasons.push(format!("cedar permits: {}", authorized_by.join(", ")));
        let queued_for = self
            .check_resources(declaration, request.equipment)
            .map_err(|r| r.assessed(assessment.level))?;
        if !queued_for.is_empty() {
            reasons.push(format!("queued until free: {}", queued_for.join(", ")));
        }
        let envelope = self
            .effective_envelope(request.manifest)
            .map_err(|r| r.assessed(assessment.level))?;
        let approval_required = approval_required(declaration, assessment.level);
        if approval_required {
            reasons.push(format!(
                "human approval required: the declaration requires it and {} ≥ R3",
                assessment.level
            ));
        }
        Ok(Admission {
            caller: caller.id.clone(),
            caller_kind: caller.kind,
            capability: CapabilityName::try_from(declaration.name.as_str()).map_err(|e| {
                Rejection::new(Stage::Access, RejectReason::InternalError, e.to_string())
            })?,
            risk_level: assessment.level,
            data_classification: data,
            approval_required,
            queued_for,
            envelope,
            budgets: self.budgets(caller.id.as_str(), declaration),
            assessment,
            authorized_by,
            reasons,
            policy_hash: self.policy_hash().to_owned(),
        })
    }
}

/// Seed 000: a task waits for a human iff the declaration requires approval
/// and the assessed level is R3 or above.
pub fn approval_required(declaration: &Declaration, level: RiskLevel) -> bool {
    declaration.safety.requires_human_approval && level >= RiskLevel::R3
}

trait Assessed<T> {
    fn assessed(self, level: RiskLevel) -> Result<T, Rejection>;
}

impl<T> Assessed<T> for Result<T, Rejection> {
    fn assessed(self, level: RiskLevel) -> Result<T, Rejection> {
        self.map_err(|r| r.assessed(level))
    }
}
