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

use crate::assess::{self, Assessment};
use crate::authz::{AuthzAction, AuthzContext};
use crate::budget::{self, Budgets};
use crate::credential::CredentialHash;
use crate::envelope::{self, EffectiveEnvelope};
use crate::files::{BusyAction, CallerKind};
use crate::ids::{CallerId, CapabilityName};
use crate::policy_set::{Caller, PolicySet};
use hcp_contracts::manifest::{Declaration, ManifestDoc};
use hcp_contracts::message::{RejectReason, TaskRejected, TaskSubmit};
use hcp_contracts::{DataClass, RiskLevel};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use time::OffsetDateTime;

/// The step of the gate that refused a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Who is calling.
    Authentication,
    /// May the caller invoke (or approve) the capability at all.
    Access,
    /// Assessing risk from inputs and context.
    Assessment,
    /// Assessed level against the ceiling and the caller's limit.
    Risk,
    /// The task's data classification.
    DataClassification,
    /// Cedar.
    Authorization,
    /// Equipment in use.
    Resources,
    /// Merging the safety envelope.
    Envelope,
}

/// A refusal: exactly the fields of `task_rejected`, plus the stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// Where the gate refused.
    pub stage: Stage,
    /// `task_rejected.reason_code`.
    pub reason_code: RejectReason,
    /// `task_rejected.reason_message`.
    pub reason_message: String,
    /// `task_rejected.assessed_risk_level`, once assessment ran.
    pub assessed_risk_level: Option<RiskLevel>,
    /// `task_rejected.suggestion`, when something in the task can change.
    pub suggestion: Option<String>,
}

impl Rejection {
    fn new(stage: Stage, reason_code: RejectReason, reason_message: String) -> Self {
        Self {
            stage,
            reason_code,
            reason_message,
            assessed_risk_level: None,
            suggestion: None,
        }
    }

    fn assessed(mut self, level: RiskLevel) -> Self {
        self.assessed_risk_level = Some(level);
        self
    }

    /// The `task_rejected` payload.
    pub fn payload(&self) -> TaskRejected {
        TaskRejected {
            reason_code: self.reason_code,
            reason_message: self.reason_message.clone(),
            assessed_risk_level: self.assessed_risk_level,
            suggestion: self.suggestion.clone(),
        }
    }
}

impl From<Rejection> for TaskRejected {
    fn from(r: Rejection) -> Self {
        r.payload()
    }
}

/// Which resources are in use right now; the host knows, the gate asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EquipmentState {
    busy: BTreeSet<String>,
}

impl EquipmentState {
    /// Nothing in use.
    pub fn idle() -> Self {
        Self::default()
    }

    /// These resource types in use.
    pub fn busy<S: Into<String>>(resources: impl IntoIterator<Item = S>) -> Self {
        Self {
            busy: resources.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether `resource` is in use.
    pub fn is_busy(&self, resource: &str) -> bool {
        self.busy.contains(resource)
    }
}

/// Everything the gate decides on. The host validated the message and the
/// inputs against the declaration's `input_schema` already.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequest<'a> {
    /// The `task_submit` payload.
    pub submit: &'a TaskSubmit,
    /// The bearer token the caller presented.
    pub credential: &'a str,
    /// The capability's manifest (declaration and default envelope).
    pub manifest: &'a ManifestDoc,
    /// The time of the decision.
    pub now: OffsetDateTime,
    /// Equipment in use.
    pub equipment: &'a EquipmentState,
}

/// An admitted task: what the session runs under.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Admission {
    /// The authenticated caller.
    pub caller: CallerId,
    /// Its kind.
    pub caller_kind: CallerKind,
    /// The capability.
    pub capability: CapabilityName,
    /// The assessed (and approved) risk level.
    pub risk_level: RiskLevel,
    /// The task's data classification (the caller's claim, default T1).
    pub data_classification: DataClass,
    /// The task waits for an operator's approval before it runs.
    pub approval_required: bool,
    /// Busy resources whose policy queues: the host runs the task once they
    /// are free.
    pub queued_for: Vec<String>,
    /// The safety envelope the session runs under.
    pub envelope: EffectiveEnvelope,
    /// What the task may spend.
    pub budgets: Budgets,
    /// How the level was reached.
    pub assessment: Assessment,
    /// The Cedar policies that permitted it.
    pub authorized_by: Vec<String>,
    /// Each decision, in order, for the log and the receipt.
    pub reasons: Vec<String>,
    /// The policy set's hash.
    pub policy_hash: String,
}

impl PolicySet {
    /// The whole gate: every step in order, the first refusal wins.
    ///
    /// # Errors
    ///
    /// The [`Rejection`] of the first step that refuses.
    pub fn admit(&self, request: &AdmissionRequest<'_>) -> Result<Admission, Rejection> {
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
        let caller = self.authenticate(&submit.caller_id, request.credential)?;
        let mut reasons = vec![format!(
            "caller {} ({}) authenticated",
            caller.id,
            caller.kind.as_str()
        )];
        self.check_access(caller, declaration)?;
        reasons.push(format!("{} lists {}", caller.id, declaration.name));
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
        rejection.suggestion = assessment.suggestion(allowed);
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
        if admission.risk_level > operator.max_risk_level
            || admission.data_classification > operator.max_data_classification
        {
            return refuse(format!(
                "operator {} may approve up to {} with {} data, not {} with {} data",
                operator.id,
                operator.max_risk_level,
                operator.max_data_classification,
                admission.risk_level,
                admission.data_classification
            ));
        }
        let busy: BTreeSet<String> = admission.queued_for.iter().cloned().collect();
        let context = AuthzContext {
            risk: admission.risk_level,
            data: admission.data_classification,
            unattended: admission.assessment.unattended,
            busy_resources: &busy,
            submitter: admission.caller.as_str(),
        };
        self.authorize(AuthzAction::Approve, operator, declaration, &context)?;
        Ok(operator)
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
