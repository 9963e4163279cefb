//! The engine without the gate: one task straight from a manifest (`hcp
//! run`, for developing a capability). No caller authentication, no risk
//! assessment, no approval: a capability that requires approval is
//! refused. Everything after the gate is the engine's own: the session
//! opened and recorded by [`super::open_session`], every host call through
//! the PEP, the receipts durable before the answer.

use super::Host;
use super::submission::{TaskMessage, refusal};
use anyhow::{Context as _, Result};
use hcp_contracts::answer::Answer;
use hcp_contracts::manifest::Manifest;
use hcp_contracts::message::{CheckedSubmit, RejectReason, TaskRejected};
use hcp_contracts::{DataClass, problem};
use hcp_sandbox::pep::Standalone;
use hcp_sandbox::tasklog::LogEntry;
use hcp_sandbox::{TaskRequest, TaskStore};
use std::sync::Arc;

/// The session outlives the task's deadline by this much: the wall-clock
/// timeout's grace, so that calls the deadline has not stopped yet are
/// still decided under a valid session.
const SESSION_GRACE_MS: u64 = 1_000;

/// A task the engine runs without the gate, checked.
#[derive(Debug)]
pub struct UngatedTask {
    message: TaskMessage,
    checked: CheckedSubmit,
    manifest: Arc<Manifest>,
}

/// What running a task without the gate came to.
#[derive(Debug)]
pub struct UngatedRun {
    /// The answer (`task_completed` or `task_failed`).
    pub answer: Answer,
    /// The task's log.
    pub log: Vec<LogEntry>,
    /// The task.
    pub task_id: String,
    /// Its session.
    pub session_id: String,
}

impl UngatedTask {
    /// Checks `message` against `manifest` as the gate would check what it
    /// can without a caller or a policy: the `task_submit`, the capability
    /// and version asked for, approval, the inputs.
    ///
    /// # Errors
    ///
    /// The `task_rejected` payload that answers it.
    pub fn check(manifest: Arc<Manifest>, message: TaskMessage) -> Result<Self, TaskRejected> {
        let invalid = |text| refusal(RejectReason::InvalidInput, text, None);
        let checked = message.submit().clone().check().map_err(|p| {
            invalid(format!(
                "the task_submit is invalid:\n{}",
                problem::list(&p)
            ))
        })?;
        if checked.submit.capability != manifest.name() {
            return Err(refusal(
                RejectReason::CapabilityNotFound,
                format!(
                    "the task asks for capability {:?}, the manifest declares {:?}",
                    checked.submit.capability,
                    manifest.name()
                ),
                None,
            ));
        }
        if !checked.version_req.matches(&manifest.version) {
            return Err(refusal(
                RejectReason::CapabilityNotFound,
                format!(
                    "{} does not satisfy capability_version {}",
                    manifest.id(),
                    checked.version_req
                ),
                None,
            ));
        }
        if manifest.doc.capability.safety.requires_human_approval {
            return Err(refusal(
                RejectReason::Forbidden,
                format!(
                    "{} requires human approval; `hcp run` has no gate, submit the task through the host instead",
                    manifest.id()
                ),
                None,
            ));
        }
        if let Err(p) = crate::lifecycle::check_inputs(&manifest, &checked.submit.inputs) {
            return Err(invalid(format!(
                "inputs do not match the input_schema of {}:\n{}",
                manifest.id(),
                problem::list(&p)
            )));
        }
        Ok(Self {
            message,
            checked,
            manifest,
        })
    }
}

impl Host {
    /// Runs a checked task without the gate: at the declaration's risk
    /// floor (`Safety::floor`: its `risk_floor`, else R4 when it involves
    /// physical resources, else R1), the data class the caller claims (T1 when none),
    /// the manifest's envelope, the policy's budgets for the caller and the
    /// capability. Its messages and receipts are recorded like any task's.
    ///
    /// # Errors
    ///
    /// The session is refused, the capability cannot be prepared, or its
    /// receipts cannot be stored.
    pub async fn run_ungated(&self, task: UngatedTask) -> Result<UngatedRun> {
        let UngatedTask {
            message,
            checked,
            manifest,
        } = task;
        let submit = &checked.submit;
        let policy = self.policy();
        let session_id = format!("session-{}", uuid::Uuid::new_v4());
        let task_id = format!("task-{}", uuid::Uuid::now_v7());
        let deadline = crate::lifecycle::deadline(&manifest, &checked);
        let risk_level = manifest.doc.capability.safety.floor().0;
        let data_classification = submit
            .constraints
            .as_ref()
            .and_then(|c| c.data_classification)
            .unwrap_or(DataClass::T1);
        let facts = Standalone {
            task_id: &task_id,
            session_id: &session_id,
            caller: &submit.caller_id,
            risk_level,
            data_classification,
            envelope: &manifest.doc.safety_envelope,
            expires_at_ms: hcp_sandbox::pep::now_ms()
                .saturating_add(u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX))
                .saturating_add(SESSION_GRACE_MS),
            budgets: policy
                .budgets_for(&submit.caller_id, &manifest.doc.capability)
                .into(),
        }
        .facts(&manifest);
        self.recorder.record_message(
            &task_id,
            "task_submit.json",
            &serde_json::to_vec_pretty(message.message())?,
        )?;
        let governor = super::open_session(
            &self.recorder,
            &policy,
            facts,
            &super::receipts::manifest_bytes(&manifest)?,
            Vec::new(),
        )?;
        let secrets = super::answer::operator_secret_names(Some(governor.scope()));
        let request = TaskRequest {
            task_id: task_id.clone(),
            session_id: session_id.clone(),
            caller_id: submit.caller_id.clone(),
            intent: submit.intent.clone(),
            inputs: submit.inputs.clone(),
            constraints: serde_json::to_value(submit.constraints.clone().unwrap_or_default())?,
            context: submit.context.clone(),
            resume: None,
            risk_level,
            data_classification,
            deadline,
            envelope: manifest.doc.safety_envelope.clone(),
            governor: Arc::new(governor),
            // One task on its own: no operator, no HID mediator.
            hid: None,
        };
        let prepared = tokio::task::spawn_blocking({
            let manifest = manifest.clone();
            let sandbox = self.sandbox.clone();
            move || sandbox.prepare(manifest)
        })
        .await??;
        let store: Arc<dyn TaskStore> = self.store.clone();
        let run = prepared.run(request, store).await;
        let answer = crate::lifecycle::answer(&manifest, &checked, &session_id, &run);
        // Granted environment variables' values are withheld from the
        // answer (`crate::withhold`).
        let answer = super::answer::withhold_granted_env(
            self.store.withhold(),
            &manifest.grants.env,
            answer,
        )?;
        let answer = super::answer::withhold_operator_secrets(
            &self.store,
            manifest.name(),
            &secrets,
            answer,
        )?;
        // Receipts are durable before the task is answered, every one of
        // them: a session that lost some to a failed write while it ran (a
        // full disk that had space again by the end) is not answered as if
        // it had them.
        self.recorder.close_session(&session_id);
        let flushed = self.recorder.flush();
        let lost = self.recorder.session_lost(&session_id);
        flushed.context("the task's receipts could not be stored")?;
        if lost {
            anyhow::bail!(
                "the task's receipts could not be stored: some were lost to a failed write \
                 while it ran (see the errors above; is the disk full?), so task {task_id} \
                 is not answered"
            );
        }
        self.recorder.record_message(
            &task_id,
            &format!("{}.json", answer.kind_name()),
            &serde_json::to_vec_pretty(&answer)?,
        )?;
        Ok(UngatedRun {
            answer,
            log: run.log.entries,
            task_id,
            session_id,
        })
    }
}
