//! A task's session, in one place: issued with `task_accepted` (its id and
//! signed token, bounded by the task's deadline), checked before the task
//! runs (the token must still verify), opened (its decision scope compiled
//! from the admission, the grants and the policy in force, and the
//! `session.open` decision recorded), and checked on every host call (the
//! [`PolicyGovernor`] built on that scope, whose verdicts go to the
//! receipt writer).

use super::Host;
use super::submission::Submission;
use crate::evidence::{Parent, Recorder};
use crate::store::{TaskRecord, TaskState, TaskUpdate, TaskWrite};
use crate::token::{self, SessionClaims, TokenError};
use anyhow::{Context as _, Result};
use hcp_contracts::IsoDuration;
use hcp_contracts::answer::Answer;
use hcp_contracts::message::{CheckedSubmit, TaskAccepted};
use hcp_policy::pep::SessionFacts;
use hcp_policy::{Admission, PolicySet};
use hcp_sandbox::pep::{PolicyGovernor, now_ms};
use serde_json::json;
use std::sync::Arc;

/// Opens a session under `policy`: compiles its decision scope from
/// `facts`, decides its opening, records the `session.open` receipt
/// (parents: `causes`; with the capability's `manifest` as written)
/// durably, and returns the governor that checks each of its host calls.
///
/// # Errors
///
/// The session was refused (its facts do not compile, or it has expired):
/// the refusal is recorded, and the task must not run. Or the receipt
/// cannot be stored.
pub fn open_session(
    recorder: &Recorder,
    policy: &PolicySet,
    facts: SessionFacts,
    manifest: &[u8],
    causes: Vec<Parent>,
) -> Result<PolicyGovernor> {
    open(recorder, policy, facts, manifest, causes, true)
}

/// [`open_session`] for a task the engine answers itself once its
/// receipts are durable: an allowed opening's receipt is queued to the
/// writer ahead of the session's host calls and stored with them, instead
/// of being waited for (a commit fewer on the task's path). The caller
/// flushes (`Recorder::flush_with`), and fails the task when some of the
/// session's receipts were lost, before it answers. A refused opening is recorded durably, as by [`open_session`].
///
/// # Errors
///
/// As [`open_session`].
pub(crate) fn open_queued_session(
    recorder: &Recorder,
    policy: &PolicySet,
    facts: SessionFacts,
    manifest: &[u8],
    causes: Vec<Parent>,
) -> Result<PolicyGovernor> {
    open(recorder, policy, facts, manifest, causes, false)
}

fn open(
    recorder: &Recorder,
    policy: &PolicySet,
    facts: SessionFacts,
    manifest: &[u8],
    causes: Vec<Parent>,
    wait: bool,
) -> Result<PolicyGovernor> {
    let at_ms = now_ms();
    let (scope, decision) = hcp_policy::pep::input::open(policy, facts.clone(), at_ms);
    match scope {
        Ok(scope) if decision.allowed() => {
            if wait {
                recorder.record_session_open(policy, facts, at_ms, &decision, manifest, causes)?;
            } else {
                recorder.queue_session_open(policy, facts, at_ms, &decision, manifest, causes)?;
            }
            Ok(PolicyGovernor::new(Arc::new(scope), recorder.sink()))
        }
        _ => {
            recorder.record_session_open(policy, facts, at_ms, &decision, manifest, causes)?;
            anyhow::bail!(
                "session refused ({}): {}",
                decision.reason,
                decision.message
            )
        }
    }
}

impl Host {
    /// The claims of a task's session while its token verifies.
    ///
    /// # Errors
    ///
    /// The task was never accepted (a host fault), or (the inner error)
    /// its token no longer verifies: its session ended.
    pub(super) fn session_claims(
        &self,
        task: &TaskRecord,
        session: &str,
    ) -> Result<Result<SessionClaims, TokenError>> {
        let issued = task
            .session
            .as_ref()
            .context("accepted task without its session token")?;
        Ok(self.tokens().verify(&issued.token, Some(session)))
    }

    /// Issues the session and answers `task_accepted`, storing it with
    /// `admitted` (what the gate decided, when not stored yet) in one write;
    /// with `receipt` (the gate's, not stored yet), in the receipt writer's
    /// transaction that stores the receipt: one commit for both.
    pub(super) fn accept(
        &self,
        task: &TaskRecord,
        manifest: &hcp_contracts::Manifest,
        checked: &CheckedSubmit,
        admission: &Admission,
        admitted: TaskUpdate,
        receipt: Option<crate::evidence::Entry>,
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
        let issue = phase!("accept.token");
        let session_token = self.tokens().issue(&claims)?;
        drop(issue);
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
        // The one builder of a `task_accepted`.
        let answer = Answer::accepted(session_id.clone(), payload);
        let update = TaskUpdate {
            session_id: Some(session_id),
            answer: Some(answer.clone()),
            ..admitted
        };
        let runnable = admission.queued_for.is_empty();
        // What the run that follows needs of what is written here.
        let kept = (runnable && receipt.is_some()).then(|| update.clone());
        let write = TaskWrite::new(&task.task_id, TaskState::Queued, update)?;
        match receipt {
            Some(receipt) => {
                let _stored = phase!("gate.receipt");
                let (task_id, state) = (write.task_id().to_owned(), write.state());
                let admitted = self
                    .recorder
                    .append_sealed_with(receipt, Box::new(move |db| write.apply(db)))?;
                self.store.task_moved(&task_id, state);
                if let Some(update) = kept {
                    self.handoff.put(super::handoff::Accepted {
                        task: task.clone().accepted(update),
                        claims,
                        causes: vec![admitted],
                    });
                }
            }
            None => {
                let _stored = phase!("accept.record");
                // From the gate's hands only (see `reject_task`).
                if !self.store.write_task_from(&write, TaskState::Received)? {
                    anyhow::bail!(
                        "task {} left the gate before it was accepted; its state stands",
                        task.task_id
                    );
                }
            }
        }
        Ok(Submission::answered(task, answer, runnable))
    }
}
