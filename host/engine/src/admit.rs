//! Admission (HCP L3): the gate a recorded task goes through.
//!
//! Order: the message (envelope, payload, ranges and durations) and the
//! caller, checked by [`super::submission`] → a durable record, once per
//! `(caller_id, message_id)` → the capability (the highest installed
//! version the range admits, from the host's cache) → the inputs against
//! its `input_schema` → the policy's decisions (access, risk, data, Cedar,
//! equipment, envelope) → a resumed checkpoint that exists → human
//! approval when required ([`super::approvals`]) → a session
//! ([`super::session`]) and `task_accepted`.
//!
//! "The gate" in this crate means this, and only this: the admission
//! decision on a task (its receipts are `gate.*`).

use super::Host;
use super::answers::job_status;
use super::receipts::AdmissionFacts;
use super::submission::{Submission, refusal};
use crate::store::{Selection, TaskRecord, TaskState, TaskUpdate, TaskWrite};
use anyhow::Result;
use hcp_contracts::message::{CheckedSubmit, RejectReason, TaskRejected, TaskSubmit};
use hcp_contracts::problem;
use hcp_policy::{Admission, AdmissionRequest, EquipmentState};
use serde_json::{Value, json};

/// The most tasks one caller may have waiting for an operator's approval at
/// once; the next is refused `resource_unavailable` until one is decided or
/// expires. Unbounded, one caller could bury the operators' queue (and
/// their page, which lists it every two seconds) under thousands of
/// approvals for an hour each.
pub const MAX_WAITING_PER_CALLER: u64 = 100;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

impl Host {
    /// Refuses a task whose `task_submit` does not check, with its receipt.
    pub(super) fn refuse_invalid(
        &self,
        policy: &super::CurrentPolicy,
        task: &TaskRecord,
        caller: &hcp_policy::Caller,
        problems: &[hcp_contracts::Problem],
        transport: Option<&str>,
    ) -> Result<Submission> {
        let facts = AdmissionFacts {
            policy,
            at: self.gate_now(),
            caller: caller.id.as_str(),
            busy: Vec::new(),
            capability: None,
            transport,
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
        facts: &AdmissionFacts<'_>,
        payload: TaskRejected,
        host_check: bool,
    ) -> Result<Submission> {
        self.record_admission(task, facts, Err((&payload, host_check)))?;
        self.reject_task(task, payload)
    }

    /// Admits a checked task: the gate's decisions in order (see the
    /// module doc), each refusal a receipt and a `task_rejected`.
    pub(super) fn admit(
        &self,
        policy: &super::CurrentPolicy,
        task: &TaskRecord,
        caller: &hcp_policy::Caller,
        checked: &CheckedSubmit,
        transport: Option<&str>,
    ) -> Result<Submission> {
        let submit = &checked.submit;
        let mut facts = AdmissionFacts {
            policy,
            at: self.gate_now(),
            caller: caller.id.as_str(),
            busy: Vec::new(),
            capability: None,
            transport,
        };
        let refuse = |facts: &AdmissionFacts<'_>, code, text: String| {
            self.refuse_at_gate(task, facts, refusal(code, text, None), true)
        };
        let lookup = phase!("gate.capability");
        let installed = match self
            .store
            .select(&submit.capability, &checked.version_req)?
        {
            Selection::One(installed) => Some(installed),
            Selection::None => None,
            Selection::Ambiguous(why) => {
                return refuse(&facts, RejectReason::CapabilityNotFound, why);
            }
        };
        let Some(installed) = installed else {
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
        let capability = self.capability(&installed)?;
        let manifest = &*capability.manifest;
        facts.capability = Some(capability.as_ref());
        drop(lookup);
        let inputs = phase!("gate.inputs");
        let inputs_checked = crate::lifecycle::check_inputs(manifest, &submit.inputs);
        drop(inputs);
        if let Err(p) = inputs_checked {
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
        let decide = phase!("gate.policy");
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
        drop(decide);
        if let Some(resume) = &submit.resume
            && let Some(problem) = self.resume_problem(task, resume)?
        {
            return refuse(&facts, RejectReason::InvalidInput, problem);
        }
        if admission.approval_required {
            let waiting = self.store.waiting_for_approval(facts.caller)?;
            if waiting >= MAX_WAITING_PER_CALLER {
                return refuse(
                    &facts,
                    RejectReason::ResourceUnavailable,
                    format!(
                        "{} has {waiting} tasks waiting for an operator's approval, the most one caller may have; \
                         submit again once one of them is decided or expires",
                        facts.caller
                    ),
                );
            }
        } else {
            let queued = self.store.queued_of(facts.caller)?;
            let most = self.config.max_queued_per_caller;
            if queued >= most {
                return refuse(
                    &facts,
                    RejectReason::ResourceUnavailable,
                    format!(
                        "{} has {queued} admitted tasks waiting to run, the most one caller may have \
                         (hcp serve --max-queued-per-caller {most}); submit again once some have started",
                        facts.caller
                    ),
                );
            }
        }
        let receipt = self.admission_entry(task, &facts, Ok(admission.risk_level))?;
        let update = TaskUpdate {
            version: Some(installed.version.to_string()),
            risk: Some(admission.risk_level.as_str().to_owned()),
            data_class: Some(admission.data_classification.as_str().to_owned()),
            admission: Some(admission.clone()),
            ..TaskUpdate::default()
        };
        if admission.approval_required {
            let expires = time::OffsetDateTime::now_utc() + self.config.approval_ttl;
            let expires = hcp_contracts::message::rfc3339(expires);
            // The admission's receipt, the task waiting and what the
            // operator is asked, in one commit: a host that stops before it
            // leaves the task `received` (failed at the next start), never
            // waiting for an approval nobody can give.
            let write = TaskWrite::new(&task.task_id, TaskState::PendingApproval, update)?;
            let view = approval_view(submit, &admission, &installed.id());
            let moved = Arc::new(AtomicBool::new(false));
            let stored = phase!("gate.receipt");
            self.recorder.append_sealed_with(receipt, {
                let (moved, expires) = (moved.clone(), expires.clone());
                Box::new(move |db| {
                    // From the gate's hands only (see `reject_task`).
                    if write.apply_from(db, TaskState::Received)? {
                        crate::store::request_approval(db, write.task_id(), &expires, &view)?;
                        moved.store(true, Ordering::SeqCst);
                    }
                    Ok(())
                })
            })?;
            drop(stored);
            if !moved.load(Ordering::SeqCst) {
                anyhow::bail!(
                    "task {} left the gate before it could wait for an approval; its state stands",
                    task.task_id
                );
            }
            self.store
                .task_moved(&task.task_id, TaskState::PendingApproval);
            let record = self
                .store
                .task(&task.task_id)?
                .ok_or_else(|| anyhow::anyhow!("no task {}", task.task_id))?;
            let waiting = job_status(
                &record,
                &format!(
                    "waiting for an operator's approval ({} requires it at {}); expires at {expires}",
                    installed.id(),
                    admission.risk_level
                ),
            );
            return Ok(Submission::answered(task, waiting, false));
        }
        // The admission's receipt, and what the gate decided stored with
        // the session, in one commit.
        self.accept(task, manifest, checked, &admission, update, Some(receipt))
    }

    /// Why a resume cannot be honoured, if it cannot: the session must be a
    /// task of the same caller and capability, and hold the checkpoint.
    fn resume_problem(
        &self,
        task: &TaskRecord,
        resume: &hcp_contracts::message::Resume,
    ) -> Result<Option<String>> {
        let earlier = self.store.task_of_session(&resume.session_id)?;
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
