//! The gate's steps, one function each, in seed 000's order.

use super::{EquipmentState, Rejection, Stage};
use crate::assess::{self, Assessment};
use crate::authz::{AuthzAction, AuthzContext};
use crate::budget::{self, Budgets};
use crate::caller::Caller;
use crate::credential::CredentialHash;
use crate::envelope::{self, EffectiveEnvelope};
use crate::files::BusyAction;
use crate::policy_set::PolicySet;
use hcp_contracts::manifest::{Declaration, ManifestDoc};
use hcp_contracts::message::RejectReason;
use hcp_contracts::{DataClass, RiskLevel};
use serde_json::Value;
use time::OffsetDateTime;

impl PolicySet {
    /// Step 1: the caller named `caller_id` presented `credential`. An
    /// unknown caller costs the same time as a wrong token.
    ///
    /// # Errors
    ///
    /// `unauthorized`, saying which caller, never why (unknown or wrong).
    pub fn authenticate(&self, caller_id: &str, credential: &str) -> Result<&Caller, Rejection> {
        let found = self.caller(caller_id);
        let hash = found.map_or(&CredentialHash::DUMMY, |c| &c.credential);
        let verified = hash.verify(credential);
        match found {
            Some(caller) if verified => Ok(caller),
            _ => Err(Rejection::new(
                Stage::Authentication,
                RejectReason::Unauthorized,
                format!(
                    "caller {caller_id:?} is not authenticated: unknown caller or wrong credential"
                ),
            )),
        }
    }

    /// The caller a bearer credential belongs to, for requests that carry no
    /// caller id (status, artifacts, operator actions). Every caller's hash
    /// is checked, in constant time each, whatever matches.
    pub fn authenticate_bearer(&self, credential: &str) -> Option<&Caller> {
        let mut found = None;
        for caller in self.callers().values() {
            if caller.credential.verify(credential) && found.is_none() {
                found = Some(caller);
            }
        }
        found
    }

    /// Step 2: the caller is listed for the capability.
    ///
    /// # Errors
    ///
    /// `forbidden`.
    pub fn check_access(
        &self,
        caller: &Caller,
        declaration: &Declaration,
    ) -> Result<(), Rejection> {
        if caller.lists(&declaration.name) {
            return Ok(());
        }
        Err(Rejection::new(
            Stage::Access,
            RejectReason::Forbidden,
            format!("caller {} may not invoke {}", caller.id, declaration.name),
        ))
    }

    /// Step 3: the assessed risk level of a task with `inputs` at `now`.
    ///
    /// # Errors
    ///
    /// `invalid_input` when a rule cannot compare an input (not a number, a
    /// unit it cannot convert): refusing is safer than skipping the rule.
    pub fn assess(
        &self,
        declaration: &Declaration,
        inputs: &Value,
        now: OffsetDateTime,
    ) -> Result<Assessment, Rejection> {
        let profile = self.risk_profile(&declaration.name);
        let (base, base_source) = assess::base(declaration, profile.and_then(|p| p.base));
        let mut fired = Vec::new();
        for rule in profile.map_or(&[][..], |p| &p.rules[..]) {
            match assess::input_rule(rule, inputs) {
                Ok(Some(f)) => fired.push(f),
                Ok(None) => {}
                Err(e) => {
                    return Err(Rejection::new(
                        Stage::Assessment,
                        RejectReason::InvalidInput,
                        format!("inputs: {e}"),
                    ));
                }
            }
        }
        let mut unattended = false;
        for rule in &self.context.unattended_hours {
            let applies = rule
                .capabilities
                .as_ref()
                .is_none_or(|caps| caps.iter().any(|c| c.as_str() == declaration.name));
            if applies && assess::in_window(rule, now) {
                unattended = true;
                fired.push(assess::unattended(rule, now));
            }
        }
        let level = fired.iter().map(|f| f.raises_to).fold(base, Ord::max);
        Ok(Assessment {
            base,
            base_source,
            fired,
            level,
            unattended,
        })
    }

    /// Step 4: the assessed level is within the capability's ceiling and
    /// the caller's limit.
    ///
    /// # Errors
    ///
    /// `risk_too_high` with the assessed level and, when the task's inputs
    /// or timing caused it, a suggestion naming the rule's field and bound.
    pub fn check_risk(
        &self,
        caller: &Caller,
        declaration: &Declaration,
        assessment: &Assessment,
    ) -> Result<(), Rejection> {
        let level = assessment.level;
        let ceiling = declaration.safety.risk_ceiling;
        let (allowed, message) = if level > ceiling {
            (
                ceiling,
                format!(
                    "Task parameters indicate {level} risk level, above {}'s risk ceiling {ceiling}",
                    declaration.name
                ),
            )
        } else if level > caller.max_risk_level {
            let range = match caller.max_risk_level {
                RiskLevel::R1 => "R1".to_owned(),
                max => format!("R1-{max}"),
            };
            (
                caller.max_risk_level,
                format!(
                    "Task parameters indicate {level} risk level, but caller {} is only authorized for {range}",
                    caller.id
                ),
            )
        } else {
            return Ok(());
        };
        let mut rejection =
            Rejection::new(Stage::Risk, RejectReason::RiskTooHigh, message).assessed(level);
        // What this caller can get admitted at: the lower of both limits.
        rejection.suggestion = assessment.suggestion(allowed.min(caller.max_risk_level));
        Err(rejection)
    }

    /// Step 5: the task's data classification (`claimed`, default T1) is
    /// within the caller's clearance and the capability's limit in
    /// `risk.json`, if any.
    ///
    /// # Errors
    ///
    /// `forbidden`, naming the class and the limit.
    pub fn check_data(
        &self,
        caller: &Caller,
        declaration: &Declaration,
        claimed: Option<DataClass>,
    ) -> Result<DataClass, Rejection> {
        let data = claimed.unwrap_or(DataClass::T1);
        let refuse = |message: String| {
            Err(Rejection::new(
                Stage::DataClassification,
                RejectReason::Forbidden,
                message,
            ))
        };
        if data > caller.max_data_classification {
            return refuse(format!(
                "data classification {data} is above caller {}'s clearance {}",
                caller.id, caller.max_data_classification
            ));
        }
        if let Some(max) = self
            .risk_profile(&declaration.name)
            .and_then(|p| p.max_data_classification)
            && data > max
        {
            return refuse(format!(
                "data classification {data} is above what {} may handle ({max})",
                declaration.name
            ));
        }
        Ok(data)
    }

    /// Step 6: Cedar's decision; returns the `@id`s of the permits.
    ///
    /// # Errors
    ///
    /// A denial: `forbidden` when no permit matched; the forbid policies'
    /// `@reason` (default `forbidden`) when one matched; `internal_error`
    /// when a policy failed to evaluate (fail closed).
    pub fn authorize(
        &self,
        action: AuthzAction,
        caller: &Caller,
        declaration: &Declaration,
        context: &AuthzContext<'_>,
    ) -> Result<Vec<String>, Rejection> {
        let decision = self.authz.decide(action, caller, declaration, context);
        if decision.allowed {
            return Ok(decision.policies);
        }
        let what = format!(
            "{} {} {} at {} with {} data",
            caller.id,
            action.as_str(),
            declaration.name,
            context.risk,
            context.data
        );
        let rejection = if !decision.errors.is_empty() {
            Rejection::new(
                Stage::Authorization,
                RejectReason::InternalError,
                format!(
                    "authorization failed closed for {what}: {}",
                    decision.errors.join("; ")
                ),
            )
        } else if let Some(reason) = decision.reason {
            Rejection::new(
                Stage::Authorization,
                reason,
                format!(
                    "authz.cedar forbids {what} (policy {})",
                    decision.policies.join(", ")
                ),
            )
        } else {
            Rejection::new(
                Stage::Authorization,
                RejectReason::Forbidden,
                format!("no policy in authz.cedar permits {what}"),
            )
        };
        Err(rejection)
    }

    /// Step 7: the capability's declared resources that are in use; the
    /// ones whose policy queues are returned.
    ///
    /// # Errors
    ///
    /// `resource_unavailable` when a busy resource's policy rejects.
    pub fn check_resources(
        &self,
        declaration: &Declaration,
        equipment: &EquipmentState,
    ) -> Result<Vec<String>, Rejection> {
        let mut queued = Vec::new();
        let mut refused = Vec::new();
        for resource in &declaration.safety.resource_types {
            if !equipment.is_busy(resource) {
                continue;
            }
            let action = self
                .context
                .resources
                .iter()
                .find(|(r, _)| r.as_str() == resource)
                .map_or(self.context.default_when_busy, |(_, rule)| rule.when_busy);
            match action {
                BusyAction::Reject => refused.push(resource.clone()),
                BusyAction::Queue => queued.push(resource.clone()),
            }
        }
        if refused.is_empty() {
            return Ok(queued);
        }
        Err(Rejection::new(
            Stage::Resources,
            RejectReason::ResourceUnavailable,
            format!(
                "{} needs {} now in use; try again later",
                declaration.name,
                refused.join(", ")
            ),
        ))
    }

    /// The safety envelope a session of this capability runs under.
    ///
    /// # Errors
    ///
    /// `internal_error` when the operator's envelope cannot be merged (see
    /// [`envelope::tighten`]).
    pub fn effective_envelope(
        &self,
        manifest: &ManifestDoc,
    ) -> Result<EffectiveEnvelope, Rejection> {
        let policy = self.envelope_policy(&manifest.capability.name);
        envelope::tighten(&manifest.safety_envelope, policy).map_err(|e| {
            Rejection::new(
                Stage::Envelope,
                RejectReason::InternalError,
                format!("{}: envelopes.json: {e}", manifest.capability.name),
            )
        })
    }

    /// What a task of `caller` on this capability may spend.
    pub fn budgets(&self, caller: &str, declaration: &Declaration) -> Budgets {
        budget::budgets(&self.budgets, caller, declaration)
    }
}
