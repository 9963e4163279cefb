//! The admission gate (HCP L3) in the host: message checks, capability
//! selection, input schema, the policy's decisions, approvals, sessions.
//!
//! Order: the message (envelope, payload, ranges and durations) → the
//! caller (authenticated by its transport or its credential) → a durable
//! record, once per `(caller_id, message_id)` → the capability (the highest
//! installed version the range admits) → the inputs against its
//! `input_schema` → the policy's gate (access, risk, data, Cedar,
//! equipment, envelope) → a resumed checkpoint that exists → human approval
//! when required → a session token and `task_accepted`.

use super::Host;
use super::receipts::GateFacts;
use crate::store::{Submitted, TaskRecord, TaskState, TaskUpdate};
use crate::token::{self, SessionClaims};
use anyhow::{Context as _, Result};
use hcp_contracts::message::{
    CheckedSubmit, Envelope, MessageType, RejectReason, TaskAccepted, TaskRejected, TaskSubmit,
};
use hcp_contracts::{IsoDuration, problem};
use hcp_policy::{Admission, AdmissionRequest, EquipmentState};
use serde_json::{Value, json};

/// How the caller was authenticated.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// By its transport: the local command line acting with the data
    /// directory's authority, naming the caller; AMQP's validated user id.
    Transport(&'a str),
    /// By a bearer credential checked against `callers.json`.
    Bearer(&'a str),
}

/// What a submission came to.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The task, once recorded (not for messages refused before that).
    pub task_id: Option<String>,
    /// The answer: `task_accepted`, `task_rejected`, or (pending approval or
    /// queued for equipment) a `job_status` object.
    pub answer: Value,
    /// The caller had sent this message before: this is the original answer.
    pub duplicate: bool,
    /// Admitted and ready to run now.
    pub runnable: bool,
}

fn refusal(
    reason_code: RejectReason,
    reason_message: String,
    level: Option<hcp_contracts::RiskLevel>,
) -> TaskRejected {
    TaskRejected {
        reason_code,
        reason_message,
        assessed_risk_level: level,
        suggestion: None,
    }
}

fn rejected(reason_code: RejectReason, reason_message: String) -> Result<Value> {
    let payload = refusal(reason_code, reason_message, None);
    Ok(serde_json::to_value(Envelope::new(
        MessageType::TaskRejected,
        None,
        payload,
    )?)?)
}

/// A `job_status` (seed 004's global contract) for a task that waits.
pub fn job_status(task: &TaskRecord, message: &str) -> Value {
    let status = match task.state {
        TaskState::Received | TaskState::PendingApproval | TaskState::Queued => "queued",
        TaskState::Running => "running",
        TaskState::Completed => "complete",
        TaskState::Failed | TaskState::Rejected => "failed",
    };
    let mut v = json!({
        "job_id": task.task_id,
        "status": status,
        "service": "hcp",
        "updated_at": task.updated_at,
        "message": message,
    });
    if let Some(result) = task.result.as_ref().or(task.answer.as_ref())
        && task.state.is_final()
    {
        v["result"] = result.clone();
    }
    v
}

impl Host {
    /// Takes a `task_submit` through the gate.
    ///
    /// # Errors
    ///
    /// Only host faults (the database); every refusal is a `task_rejected`.
    pub fn submit(&self, message: &Value, auth: Auth<'_>) -> Result<Submission> {
        let refuse = |code, text: String| -> Result<Submission> {
            Ok(Submission {
                task_id: None,
                answer: rejected(code, text)?,
                duplicate: false,
                runnable: false,
            })
        };
        let envelope = match Envelope::parse(message) {
            Ok(e) => e,
            Err(p) => {
                return refuse(
                    RejectReason::InvalidInput,
                    format!("not a valid HCP message:\n{}", problem::list(&p)),
                );
            }
        };
        if envelope.kind != MessageType::TaskSubmit {
            return refuse(
                RejectReason::InvalidInput,
                format!(
                    "expected a task_submit message, got {}",
                    envelope.kind.as_str()
                ),
            );
        }
        let submit: TaskSubmit = match envelope.payload_as() {
            Ok(s) => s,
            Err(p) => return refuse(RejectReason::InvalidInput, problem::list(&p)),
        };
        // The caller, before anything is recorded under its name; the whole
        // gate decides under the policy in force now.
        let policy = self.policy();
        let caller = match auth {
            Auth::Transport(id) => policy.caller(id).filter(|_| id == submit.caller_id),
            Auth::Bearer(credential) => policy.authenticate(&submit.caller_id, credential).ok(),
        };
        let Some(caller) = caller else {
            let who = match auth {
                Auth::Transport(id) if id != submit.caller_id => format!(
                    "the task names caller_id {:?} but was submitted as {id:?}",
                    submit.caller_id
                ),
                _ => format!(
                    "caller {:?} is not authenticated: unknown caller or wrong credential",
                    submit.caller_id
                ),
            };
            return refuse(RejectReason::Unauthorized, who);
        };
        let _serialized = self.submit_lock(caller.id.as_str(), &envelope.message_id);
        let task = match self.store.submit(
            caller.id.as_str(),
            &envelope.message_id,
            &submit.capability,
            message,
        )? {
            Submitted::Duplicate(task) => {
                let answered = self.duplicate(&policy, task.clone(), caller);
                return self.settle_submission(&task, answered);
            }
            Submitted::New(task) => task,
        };
        let answered = match submit.check() {
            Ok(checked) => self.admit(&policy, &task, caller, &checked),
            Err(p) => self.refuse_invalid(&policy, &task, caller, &p),
        };
        self.settle_submission(&task, answered)
    }

    /// Refuses a task whose `task_submit` does not check, with its receipt.
    fn refuse_invalid(
        &self,
        policy: &super::CurrentPolicy,
        task: &TaskRecord,
        caller: &hcp_policy::Caller,
        problems: &[hcp_contracts::Problem],
    ) -> Result<Submission> {
        let facts = GateFacts {
            policy,
            at: self.gate_now(),
            caller: caller.id.as_str(),
            busy: Vec::new(),
            manifest: None,
        };
        self.refuse_at_gate(
            task,
            &facts,
            refusal(
                RejectReason::InvalidInput,
                format!("the task_submit is invalid:\n{}", problem::list(problems)),
                None,
            ),
            true,
        )
    }

    /// The gate's clock.
    fn gate_now(&self) -> time::OffsetDateTime {
        self.config
            .gate_clock
            .unwrap_or_else(time::OffsetDateTime::now_utc)
    }

    /// Records the gate's refusal (the policy's, or the host's own check's
    /// when `host_check`) and answers `task_rejected`.
    fn refuse_at_gate(
        &self,
        task: &TaskRecord,
        facts: &GateFacts<'_>,
        payload: TaskRejected,
        host_check: bool,
    ) -> Result<Submission> {
        self.record_admission(task, facts, Err((&payload, host_check)))?;
        self.reject_task(task, payload)
    }

    /// The answer to a message submitted before. A task the gate never
    /// answered (the host stopped mid-gate) goes through the gate now.
    fn duplicate(
        &self,
        policy: &super::CurrentPolicy,
        task: TaskRecord,
        caller: &hcp_policy::Caller,
    ) -> Result<Submission> {
        if task.state == TaskState::Received && task.answer.is_none() {
            let submit: TaskSubmit = serde_json::from_value(task.submit["payload"].clone())?;
            let checked = match submit.check() {
                Ok(c) => c,
                Err(p) => return self.refuse_invalid(policy, &task, caller, &p),
            };
            return self.admit(policy, &task, caller, &checked);
        }
        let answer = match (&task.state, &task.answer) {
            (TaskState::PendingApproval, _) => {
                job_status(&task, "waiting for an operator's approval")
            }
            (TaskState::Queued, _) if task.answer.is_none() => {
                job_status(&task, "waiting for equipment")
            }
            (_, Some(answer)) => answer.clone(),
            (TaskState::Received, None) => {
                job_status(&task, "received; the gate has not answered yet")
            }
            (_, None) => job_status(&task, "no answer recorded"),
        };
        Ok(Submission {
            task_id: Some(task.task_id),
            answer,
            duplicate: true,
            runnable: false,
        })
    }

    fn reject_task(&self, task: &TaskRecord, payload: TaskRejected) -> Result<Submission> {
        let risk = payload.assessed_risk_level.map(|l| l.as_str().to_owned());
        let answer =
            serde_json::to_value(Envelope::new(MessageType::TaskRejected, None, payload)?)?;
        self.store.update_task(
            &task.task_id,
            TaskState::Rejected,
            TaskUpdate {
                risk,
                answer: Some(answer.clone()),
                ..TaskUpdate::default()
            },
        )?;
        Ok(Submission {
            task_id: Some(task.task_id.clone()),
            answer,
            duplicate: false,
            runnable: false,
        })
    }

    fn admit(
        &self,
        policy: &super::CurrentPolicy,
        task: &TaskRecord,
        caller: &hcp_policy::Caller,
        checked: &CheckedSubmit,
    ) -> Result<Submission> {
        let submit = &checked.submit;
        let mut facts = GateFacts {
            policy,
            at: self.gate_now(),
            caller: caller.id.as_str(),
            busy: Vec::new(),
            manifest: None,
        };
        let refuse = |facts: &GateFacts<'_>, code, text: String| {
            self.refuse_at_gate(task, facts, refusal(code, text, None), true)
        };
        let Some(installed) = self
            .store
            .select(&submit.capability, &checked.version_req)?
        else {
            let versions: Vec<String> = self
                .store
                .installed()?
                .into_iter()
                .filter(|i| i.name == submit.capability)
                .map(|i| i.version.to_string())
                .collect();
            let have = if versions.is_empty() {
                "none is installed".to_owned()
            } else {
                format!("installed: {}", versions.join(", "))
            };
            return refuse(
                &facts,
                RejectReason::CapabilityNotFound,
                format!(
                    "no installed {} matches {} ({have})",
                    submit.capability, checked.version_req
                ),
            );
        };
        let manifest = self.manifest(&installed)?;
        facts.manifest = Some(&manifest);
        if let Err(p) = crate::lifecycle::check_inputs(&manifest, &submit.inputs) {
            return refuse(
                &facts,
                RejectReason::InvalidInput,
                format!(
                    "inputs do not match the input_schema of {}:\n{}",
                    manifest.id(),
                    problem::list(&p)
                ),
            );
        }
        let mut busy = Vec::new();
        for resource in &manifest.doc.capability.safety.resource_types {
            if self.store.resource_holder(resource)?.is_some() {
                busy.push(resource.clone());
            }
        }
        facts.busy.clone_from(&busy);
        let equipment = EquipmentState::busy(busy);
        let request = AdmissionRequest {
            submit,
            credential: "",
            manifest: &manifest.doc,
            now: facts.at,
            equipment: &equipment,
        };
        let admission = match policy.admit_authenticated(caller, &request) {
            Ok(a) => a,
            Err(rejection) => {
                return self.refuse_at_gate(task, &facts, rejection.payload(), false);
            }
        };
        if let Some(resume) = &submit.resume
            && let Some(problem) = self.resume_problem(task, resume)?
        {
            return refuse(&facts, RejectReason::InvalidInput, problem);
        }
        self.record_admission(task, &facts, Ok(admission.risk_level))?;
        let admission_json = serde_json::to_value(&admission)?;
        let update = TaskUpdate {
            version: Some(installed.version.to_string()),
            risk: Some(admission.risk_level.as_str().to_owned()),
            data_class: Some(admission.data_classification.as_str().to_owned()),
            admission: Some(admission_json),
            ..TaskUpdate::default()
        };
        if admission.approval_required {
            let expires = time::OffsetDateTime::now_utc() + self.config.approval_ttl;
            let expires = hcp_contracts::message::rfc3339(expires);
            let record =
                self.store
                    .update_task(&task.task_id, TaskState::PendingApproval, update)?;
            self.store.request_approval(
                &task.task_id,
                &expires,
                &approval_view(submit, &admission, &installed.id()),
            )?;
            return Ok(Submission {
                task_id: Some(task.task_id.clone()),
                answer: job_status(
                    &record,
                    &format!(
                        "waiting for an operator's approval ({} requires it at {}); expires at {expires}",
                        installed.id(),
                        admission.risk_level
                    ),
                ),
                duplicate: false,
                runnable: false,
            });
        }
        let record = self
            .store
            .update_task(&task.task_id, TaskState::Received, update)?;
        self.accept(&record, &manifest, checked, &admission)
    }

    /// Issues the session and answers `task_accepted`.
    pub(crate) fn accept(
        &self,
        task: &TaskRecord,
        manifest: &hcp_contracts::Manifest,
        checked: &CheckedSubmit,
        admission: &Admission,
    ) -> Result<Submission> {
        let deadline = crate::lifecycle::deadline(manifest, checked);
        let session_id = format!("session-{}", uuid::Uuid::new_v4());
        let iat = token::now();
        let exp = token::expiry(iat, deadline);
        let envelope = serde_json::to_value(&admission.envelope.envelope)?;
        let mut constraints = json!({
            "max_duration": IsoDuration::from_duration(deadline).to_string(),
        });
        if let Some(c) = &checked.submit.constraints {
            if let Some(t) = c.confidence_threshold {
                constraints["confidence_threshold"] = json!(t);
            }
            if let Some(p) = c.priority {
                constraints["priority"] = serde_json::to_value(p)?;
            }
        }
        let claims = SessionClaims {
            iss: self.host_id().to_owned(),
            sub: task.caller_id.clone(),
            aud: token::AUDIENCE.to_owned(),
            jti: session_id.clone(),
            iat,
            nbf: iat,
            exp,
            cap: manifest.name().to_owned(),
            cap_version: manifest.version.to_string(),
            risk: admission.risk_level,
            data_class: admission.data_classification,
            envelope_hash: hcp_contracts::jcs::sha256_tagged(&envelope)
                .map_err(anyhow::Error::msg)?,
            constraints: constraints.clone(),
        };
        let session_token = self.tokens().issue(&claims)?;
        let at = |secs: u64| {
            time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
                .map(hcp_contracts::message::rfc3339)
                .unwrap_or_default()
        };
        let payload = TaskAccepted {
            session_token,
            risk_level: admission.risk_level,
            data_classification: admission.data_classification,
            safety_envelope: envelope,
            constraints,
            issued_at: Some(at(iat)),
            expires_at: Some(at(exp)),
        };
        let answer = serde_json::to_value(Envelope::new(
            MessageType::TaskAccepted,
            Some(session_id.clone()),
            payload,
        )?)?;
        self.store.update_task(
            &task.task_id,
            TaskState::Queued,
            TaskUpdate {
                session_id: Some(session_id),
                answer: Some(answer.clone()),
                ..TaskUpdate::default()
            },
        )?;
        Ok(Submission {
            task_id: Some(task.task_id.clone()),
            answer,
            duplicate: false,
            runnable: admission.queued_for.is_empty(),
        })
    }

    /// Why a resume cannot be honoured, if it cannot: the session must be a
    /// task of the same caller and capability, and hold the checkpoint.
    fn resume_problem(
        &self,
        task: &TaskRecord,
        resume: &hcp_contracts::message::Resume,
    ) -> Result<Option<String>> {
        let earlier = self
            .store
            .tasks(None, usize::MAX)?
            .into_iter()
            .find(|t| t.session_id.as_deref() == Some(resume.session_id.as_str()));
        let Some(earlier) = earlier else {
            return Ok(Some(format!("resume: no session {}", resume.session_id)));
        };
        if earlier.caller_id != task.caller_id || earlier.capability != task.capability {
            return Ok(Some(format!(
                "resume: session {} is not a {} task of {}",
                resume.session_id, task.capability, task.caller_id
            )));
        }
        use hcp_sandbox::TaskStore as _;
        let exists = self
            .store
            .load_checkpoint(&resume.session_id, &resume.checkpoint)
            .map_err(anyhow::Error::msg)?
            .is_some();
        Ok((!exists).then(|| {
            format!(
                "resume: session {} has no checkpoint {}",
                resume.session_id, resume.checkpoint
            )
        }))
    }

    /// An operator approves or rejects a pending task (authenticated by the
    /// transport, or by credential when `credential` is given).
    ///
    /// # Errors
    ///
    /// No pending approval, expired, already decided, or the operator may not
    /// decide it (the refusal says why).
    pub fn decide(
        &self,
        task_id: &str,
        approved: bool,
        operator: Auth<'_>,
        operator_id: &str,
        reason: &str,
    ) -> Result<Submission> {
        self.expire_approvals()?;
        let task = self
            .store
            .task(task_id)?
            .with_context(|| format!("no task {task_id}"))?;
        if task.state != TaskState::PendingApproval {
            anyhow::bail!(
                "task {task_id} is not waiting for approval (it is {})",
                task.state.as_str()
            );
        }
        if reason.trim().is_empty() {
            anyhow::bail!("a decision needs a reason");
        }
        let admission: Admission = serde_json::from_value(
            task.admission
                .clone()
                .context("pending task without its admission")?,
        )?;
        let installed = self
            .store
            .installed_version(
                &task.capability,
                task.version.as_deref().unwrap_or_default(),
            )?
            .with_context(|| {
                format!(
                    "{} {} is no longer installed",
                    task.capability,
                    task.version.as_deref().unwrap_or("?")
                )
            })?;
        let manifest = self.manifest(&installed)?;
        let policy = self.policy();
        let op = match operator {
            Auth::Transport(id) => policy.caller(id).filter(|_| id == operator_id),
            Auth::Bearer(credential) => policy.authenticate(operator_id, credential).ok(),
        }
        .with_context(|| format!("operator {operator_id:?} is not authenticated"))?;
        if let Err(r) = policy.authorize_approval_by(op, &admission, &manifest.doc.capability) {
            self.record_approval(
                &policy,
                &task,
                &manifest,
                &admission,
                operator_id,
                approved,
                Some(r.reason_code),
            )?;
            anyhow::bail!("{}", r.reason_message);
        }
        self.store.decide(task_id, approved, operator_id, reason)?;
        self.record_approval(
            &policy,
            &task,
            &manifest,
            &admission,
            operator_id,
            approved,
            None,
        )?;
        if !approved {
            return self.reject_task(
                &task,
                refusal(
                    RejectReason::ApprovalRejected,
                    format!("operator {operator_id} rejected the task: {reason}"),
                    Some(admission.risk_level),
                ),
            );
        }
        let submit: TaskSubmit = serde_json::from_value(task.submit["payload"].clone())?;
        let checked = submit
            .check()
            .map_err(|p| anyhow::anyhow!(problem::list(&p)))?;
        let record = self
            .store
            .update_task(task_id, TaskState::Received, TaskUpdate::default())?;
        let accepted = self.accept(&record, &manifest, &checked, &admission);
        self.settle_submission(&record, accepted)
    }

    /// Rejects, with `approval_expired`, every task whose approval expired.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn expire_approvals(&self) -> Result<Vec<String>> {
        let now = hcp_contracts::message::now_rfc3339();
        let mut expired = Vec::new();
        for task in self
            .store
            .tasks(Some(TaskState::PendingApproval), usize::MAX)?
        {
            let Some(approval) = self.store.approval(&task.task_id)? else {
                continue;
            };
            // RFC 3339 UTC with fixed precision compares as text.
            if approval.decision.is_none() && approval.expires_at <= now {
                self.record_expiry(&task, &now, &approval.expires_at)?;
                let risk = task.risk.as_deref().and_then(|r| r.parse().ok());
                self.reject_task(
                    &task,
                    refusal(
                        RejectReason::ApprovalExpired,
                        format!(
                            "no operator decided before the approval expired at {}",
                            approval.expires_at
                        ),
                        risk,
                    ),
                )?;
                expired.push(task.task_id);
            }
        }
        Ok(expired)
    }
}

/// What an operator needs to decide: the intent, the inputs, the assessed
/// risk and the rules that fired, the envelope, the caller.
fn approval_view(submit: &TaskSubmit, admission: &Admission, capability: &str) -> Value {
    json!({
        "capability": capability,
        "caller_id": submit.caller_id,
        "intent": submit.intent,
        "inputs": submit.inputs,
        "risk_level": admission.risk_level,
        "data_classification": admission.data_classification,
        "fired_rules": admission.assessment.fired,
        "reasons": admission.reasons,
        "safety_envelope": admission.envelope.envelope,
    })
}
