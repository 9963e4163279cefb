//! Running admitted tasks: equipment held for the session, a session slot
//! taken ([`super::slots`]), the session token checked, the session's decision scope compiled and its opening
//! recorded, the prepared capability run under the admitted risk,
//! classification and envelope with every host call passing the PEP, the
//! receipts made durable, and the L4 answer recorded.

use super::Host;
use super::answer::{failure, final_state, stopped};
use super::slots::{self, Claim, SlotLimits};
use crate::store::{SettleWrite, TaskRecord, TaskState};
use crate::token::SessionClaims;
use anyhow::{Context as _, Result};
use hcp_contracts::answer::Answer;
use hcp_contracts::message::ErrorCode;
use hcp_contracts::problem;
use hcp_policy::Admission;
use hcp_policy::pep::SessionFacts;
use hcp_receipts::Parent;
use hcp_sandbox::{ResumeFrom, TaskRequest, TaskStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Resources a session holds while it runs: the declaration's resource
/// types and the granted instruments.
fn resources(manifest: &hcp_contracts::Manifest) -> Vec<String> {
    let mut r: Vec<String> = manifest.doc.capability.safety.resource_types.clone();
    r.extend(manifest.grants.instruments.iter().cloned());
    r.sort();
    r.dedup();
    r
}

impl Host {
    /// Runs a queued task to its answer. `Ok(None)` when it cannot run now
    /// (equipment held by another session, no session slot free for its
    /// caller or capability, or another runner took it): it stays queued.
    /// A task whose session ended while it waited is answered `timeout`
    /// without running.
    ///
    /// # Errors
    ///
    /// No such task, or a host fault. A task that is not queued (another
    /// runner took it, or it waits for the gate or an operator) is `None`,
    /// as one that stays queued.
    pub async fn run_task(&self, task_id: &str) -> Result<Option<Answer>> {
        let load = phase!("run.load");
        // Accepted by this process just now: as it was written, while the
        // store still has it queued (another runner may have moved it on).
        let accepted = self.handoff.take(task_id).filter(|_| {
            matches!(
                self.store.task_stamp(task_id),
                Ok(Some((TaskState::Queued, _)))
            )
        });
        let (task, known) = match accepted {
            Some(a) => (a.task, Some((a.claims, a.causes))),
            None => {
                let task = self
                    .store
                    .task(task_id)?
                    .with_context(|| format!("no task {task_id}"))?;
                (task, None)
            }
        };
        if task.state.is_final() {
            return Ok(task.result.or(task.answer));
        }
        if task.state != TaskState::Queued {
            // Another runner (this process's, or another process's on the
            // data directory) took it since it was listed, or it waits for
            // the gate or an operator: not this call's to run.
            tracing::debug!(
                "task {task_id} is not queued (it is {}): not run here",
                task.state.as_str()
            );
            return Ok(None);
        }
        let session = task
            .session_id
            .clone()
            .context("queued task without a session")?;
        let admission = task
            .admission
            .clone()
            .context("queued task without its admission")?;
        let Some(installed) = self.store.installed_version(
            &task.capability,
            task.version.as_deref().unwrap_or_default(),
        )?
        else {
            // Removed after the task was admitted (`hcp remove` refuses a
            // version with unfinished tasks, but one admitted as it was
            // removed gets here): the task fails, instead of staying
            // queued for good.
            let answer = failed(
                &session,
                ErrorCode::ResourceUnavailable,
                format!(
                    "{}@{} was removed before the task could run",
                    task.capability,
                    task.version.as_deref().unwrap_or("?")
                ),
            );
            let moved = self.store.settle(
                task_id,
                TaskState::Queued,
                TaskState::Failed,
                answer.clone(),
            )?;
            return Ok(moved.then_some(answer));
        };
        let capability = self.capability(&installed)?;
        let manifest = &*capability.manifest;
        drop(load);
        // A session that ended while the task waited (for equipment or a
        // slot): the task fails now, without running.
        let token = phase!("run.token");
        let (claims, causes) = known.unzip();
        let claims = match self.ended_session(&task, &session, &admission, manifest, claims)? {
            Ok(claims) => claims,
            Err(answer) => return Ok(answer),
        };
        drop(token);
        let claim = phase!("run.claim");
        // This process's lease on the task, before its claim and until its
        // final state is written: a host starting beside it leaves the task
        // alone while it is held (`recover`).
        let Some(_lease) = self.store.take_lease(task_id)? else {
            return Ok(None);
        };
        let mut held = Held {
            host: self,
            session: &session,
            resources: Vec::new(),
        };
        for r in resources(manifest) {
            if !self.store.acquire_resource(&r, &session)? {
                return Ok(None);
            }
            held.resources.push(r);
        }
        match slots::claim(&self.store, &task, SlotLimits::of(&admission, manifest))? {
            Claim::Running => {}
            Claim::Waiting(why) => {
                tracing::debug!("task {task_id} stays queued: {why}");
                return Ok(None);
            }
            Claim::Lost => return Ok(None),
        }
        drop(claim);
        let ran = match self
            .run_admitted(
                &task,
                &session,
                &admission,
                &capability,
                Known { claims, causes },
                held,
            )
            .await
        {
            Ok(ran) => ran,
            Err(e) => Ran::unsettled(host_failure(&session, &format!("{e:#}"))),
        };
        if !ran.settled {
            // A final state the store cannot take now (a full disk) is
            // written once it can (`Store::settle_pending`).
            let _settle = phase!("run.settle");
            self.store.settle(
                task_id,
                TaskState::Running,
                final_state(&ran.answer),
                ran.answer.clone(),
            )?;
        }
        Ok(Some(ran.answer))
    }

    /// The session token's claims while the session lasts (`signed`: the
    /// claims this process signed it over, when it accepted the task just
    /// now; otherwise the token is verified). When the session ended
    /// while the task waited, fails the task `timeout` with a
    /// `session.token` receipt and returns its answer (`None` when another
    /// runner moved the task on first).
    fn ended_session(
        &self,
        task: &TaskRecord,
        session: &str,
        admission: &Admission,
        manifest: &hcp_contracts::Manifest,
        signed: Option<SessionClaims>,
    ) -> Result<Result<SessionClaims, Option<Answer>>> {
        let verified = match signed {
            Some(claims) => claims.still_valid(crate::token::now()).map(|()| claims),
            None => self.session_claims(task, session)?,
        };
        let e = match verified {
            Ok(claims) => return Ok(Ok(claims)),
            Err(e) => e,
        };
        // Another runner may have moved it on first.
        if self
            .store
            .task(&task.task_id)?
            .is_none_or(|t| t.state != TaskState::Queued)
        {
            return Ok(Err(None));
        }
        // The refusal's receipt and the task's failure with its final
        // answer, in one commit: the task is never final without that
        // answer (an outbox or event stream reading it then would send
        // its `task_accepted` as the last word), and a host that stops
        // first leaves it queued, to be refused again.
        let error = e.to_string();
        let answer = failed(
            session,
            ErrorCode::Timeout,
            format!("the session ended before the task could run: {error}"),
        );
        let settle = SettleWrite::new(
            self.store.data_key(),
            &task.task_id,
            TaskState::Queued,
            TaskState::Failed,
            &answer,
        )?;
        let moved = Arc::new(AtomicBool::new(false));
        let recorded = self.record_token_refusal(task, manifest, admission, session, &error, {
            let moved = moved.clone();
            Box::new(move |db| {
                moved.store(settle.apply(db)?, Ordering::SeqCst);
                Ok(())
            })
        });
        match recorded {
            Ok(_) if moved.load(Ordering::SeqCst) => {
                self.store.task_moved(&task.task_id, TaskState::Failed);
                Ok(Err(Some(answer)))
            }
            Ok(_) => Ok(Err(None)),
            Err(e) => {
                let answer = host_failure(
                    session,
                    &format!(
                        "the session ended before the task could run ({error}), and its receipt could not be stored: {e:#}"
                    ),
                );
                // Kept and written once the store takes writes again.
                match self.store.settle(
                    &task.task_id,
                    TaskState::Queued,
                    TaskState::Failed,
                    answer.clone(),
                ) {
                    Ok(true) => Ok(Err(Some(answer))),
                    Ok(false) => Ok(Err(None)),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Runs a task that holds its slot (and `held`, released once the
    /// guest is done) to its answer; with its final state written in the
    /// commit of its last receipts when they are stored.
    async fn run_admitted(
        &self,
        task: &TaskRecord,
        session: &str,
        admission: &Admission,
        capability: &super::Capability,
        known: Known,
        held: Held<'_>,
    ) -> Result<Ran> {
        let Known { claims, causes } = known;
        let claims = &claims;
        let manifest = &*capability.manifest;
        // As the gate checked it (handed over), or as the store read it:
        // not checked again.
        let check = phase!("run.check");
        let checked = task
            .checked()?
            .map_err(|p| anyhow::anyhow!(problem::list(p)))?;
        drop(check);
        let submit = &checked.submit;
        // The session token bounds the run: a task that waited past it fails.
        // Its signature was verified (or made by this process, just now)
        // before the slot was taken; only its expiry can have changed since.
        let token = phase!("run.token");
        if let Err(e) = claims.still_valid(crate::token::now()) {
            let error = e.to_string();
            // The task is running (its slot claimed): its failure is
            // settled by the caller, after this receipt.
            self.record_token_refusal(
                task,
                manifest,
                admission,
                session,
                &error,
                Box::new(|_| Ok(())),
            )?;
            return Ok(Ran::unsettled(failed(
                session,
                ErrorCode::Timeout,
                format!("the session ended before the task could run: {error}"),
            )));
        }
        // The deadline counts from admission (the time of `task_accepted`),
        // and never outlasts the session token.
        let full = crate::lifecycle::deadline(manifest, checked);
        let now = now_ms();
        let mut left = claims.exp.saturating_mul(1000).saturating_sub(now);
        if let Some(admitted) = task.session.as_ref().and_then(|s| unix_ms(&s.accepted_at)) {
            let full_ms = u64::try_from(full.as_millis()).unwrap_or(u64::MAX);
            left = left.min(admitted.saturating_add(full_ms).saturating_sub(now));
        }
        let deadline = full.min(Duration::from_millis(left));
        drop(token);
        // The session's decision scope, compiled once from the admission,
        // the grants and the policy; its opening is a receipt whose parents
        // are the admission and approval receipts.
        let facts = SessionFacts::admitted(
            admission,
            manifest,
            session,
            &task.task_id,
            claims.exp.saturating_mul(1000),
        );
        let causes_read = phase!("run.causes");
        let causes = match causes {
            Some(causes) => causes,
            None => self.recorder.task_causes(&task.task_id)?,
        };
        drop(causes_read);
        let open = phase!("run.open");
        let governor = match super::session::open_queued_session(
            &self.recorder,
            &self.policy(),
            facts,
            &capability.manifest_bytes,
            causes,
        ) {
            Ok(g) => Arc::new(g),
            Err(e) => {
                return Ok(Ran::unsettled(failed(
                    session,
                    ErrorCode::InternalError,
                    format!("the session could not start: {e:#}"),
                )));
            }
        };
        drop(open);
        let secrets = super::answer::operator_secret_names(Some(governor.scope()));
        let request = TaskRequest {
            task_id: task.task_id.clone(),
            session_id: session.to_owned(),
            caller_id: task.caller_id.clone(),
            intent: submit.intent.clone(),
            inputs: submit.inputs.clone(),
            constraints: serde_json::to_value(submit.constraints.clone().unwrap_or_default())?,
            context: submit.context.clone(),
            resume: submit.resume.as_ref().map(|r| ResumeFrom {
                session_id: r.session_id.clone(),
                checkpoint: r.checkpoint.clone(),
            }),
            risk_level: admission.risk_level,
            data_classification: admission.data_classification,
            deadline,
            envelope: admission.envelope.envelope.clone(),
            governor,
            hid: Some(self.hid.clone()),
        };
        let sandbox = phase!("run.sandbox");
        let prepared = capability.prepared(&self.sandbox).await;
        let run = match prepared {
            Ok(prepared) => {
                let store: Arc<dyn TaskStore> = self.store.clone();
                Ok(prepared.run(request, store).await)
            }
            Err(e) => Err(e),
        };
        drop(sandbox);
        // The answer, made before the receipts are stored so that the
        // task's final state goes in their commit.
        let building = phase!("run.answer");
        let answer = run.and_then(|mut run| {
            explain_deadline(&mut run, full, deadline);
            let answer = crate::lifecycle::answer(manifest, checked, session, &run);
            // The values of granted environment variables are the
            // operator's secrets: withheld from the caller's answer and
            // from all that keeps it (`crate::withhold`).
            super::answer::withhold_granted_env(self.store.withhold(), &manifest.grants.env, answer)
                .and_then(|answer| {
                    super::answer::withhold_operator_secrets(
                        &self.store,
                        manifest.name(),
                        &secrets,
                        answer,
                    )
                })
        });
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => host_failure(session, &format!("{e:#}")),
        };
        drop(building);
        // Receipts are durable, and covered by a checkpoint, before the
        // task is answered, and its final state with them, in one commit;
        // a task whose receipts cannot be stored fails instead (its final
        // state written on its own).
        let _flush = phase!("run.flush");
        self.recorder.close_session(session);
        let state = final_state(&answer);
        let settle = SettleWrite::new(
            self.store.data_key(),
            &task.task_id,
            TaskState::Running,
            state,
            &answer,
        )?;
        // The final status, for whoever follows the task's changes (its
        // event stream) to have without reading it back.
        let settled = self
            .store
            .followed()
            .then(|| settle.status(&task.caller_id, answer.clone()));
        let flushed = self
            .recorder
            .flush_with(session, move |db| settle.apply(db));
        // The guest is done and its receipts are stored (or will never be).
        drop(held);
        match flushed {
            Err(e) => {
                // The failed batch marked the session lost: forgotten here,
                // since the task fails for it now.
                self.recorder.session_lost(session);
                Ok(Ran::unsettled(failed(
                    session,
                    ErrorCode::InternalError,
                    format!("the task's receipts could not be stored: {e:#}"),
                )))
            }
            Ok(None) => {
                // Some of the session's receipts were lost to a failed
                // write before: the final state was left out.
                self.recorder.session_lost(session);
                Ok(Ran::unsettled(failed(
                    session,
                    ErrorCode::InternalError,
                    "the task's receipts could not be stored: some were lost to a failed write"
                        .to_owned(),
                )))
            }
            Ok(Some(moved)) => {
                if moved {
                    match settled {
                        Some(status) => self.store.task_settled(status),
                        None => self.store.task_moved(&task.task_id, state),
                    }
                }
                Ok(Ran {
                    answer,
                    settled: true,
                })
            }
        }
    }

    /// After a restart: tasks left running by a process that stopped are
    /// failed honestly (with their last checkpoint, so the caller can
    /// resume), and their resources freed. A task another live process on
    /// the data directory runs (it holds its lease) is left to it.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn recover(&self) -> Result<Vec<String>> {
        let mut failed = Vec::new();
        for task in self.store.tasks(Some(TaskState::Running), usize::MAX)? {
            // Another process on this data directory runs it: its own.
            if self.store.lease_held(&task.task_id)? {
                tracing::info!(
                    "task {} is running in another process on this data directory",
                    task.task_id
                );
                continue;
            }
            let session = task.session_id.clone().unwrap_or_default();
            let last = self.store.last_checkpoint(&session)?;
            let answer = stopped(
                session.clone(),
                "the host stopped while the task was running".to_owned(),
                last,
            );
            // Only from `running`: a task that ended meanwhile keeps its
            // end, and its equipment was released by its runner.
            if self
                .store
                .settle(&task.task_id, TaskState::Running, TaskState::Failed, answer)?
            {
                self.store.release_session_resources(&session)?;
                failed.push(task.task_id);
            }
        }
        Ok(failed)
    }
}

/// Resources a running task holds, released when it is dropped: once the
/// guest is done, or on any way out before.
struct Held<'a> {
    host: &'a Host,
    session: &'a str,
    resources: Vec<String>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for r in &self.resources {
            if let Err(e) = self.host.store.release_resource(r, self.session) {
                tracing::error!("releasing {r} of {}: {e:#}", self.session);
            }
        }
    }
}

/// What is known of a task's session: the claims its token was signed
/// over, and, when it was handed over by the gate, the receipts that
/// admitted it (otherwise they are read from the store).
struct Known {
    claims: SessionClaims,
    causes: Option<Vec<Parent>>,
}

/// What running an admitted task came to.
struct Ran {
    answer: Answer,
    /// Its final state is written.
    settled: bool,
}

impl Ran {
    /// An answer whose final state is still to be written.
    fn unsettled(answer: Answer) -> Self {
        Self {
            answer,
            settled: false,
        }
    }
}

/// The host's `task_failed` of `session` ([`failure`]).
fn failed(session: &str, code: ErrorCode, message: String) -> Answer {
    failure(Some(session.to_owned()), code, message, None)
}

fn host_failure(session: &str, message: &str) -> Answer {
    failed(
        session,
        ErrorCode::InternalError,
        format!("the host could not run the task: {message}"),
    )
}

/// Milliseconds since the epoch, now.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Milliseconds since the epoch of an RFC 3339 time.
fn unix_ms(text: &str) -> Option<u64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// A task stopped at a deadline its wait since admission shortened says
/// so: `max_duration` counts from `task_accepted`, not from the start (and
/// the session token, whose `exp` is a whole second no later than
/// `max_duration` after the second it was issued in, may end it earlier).
fn explain_deadline(run: &mut hcp_sandbox::TaskRun, full: Duration, given: Duration) {
    use hcp_contracts::IsoDuration;
    if let hcp_sandbox::RunResult::Failed(f) = &mut run.result
        && f.code == ErrorCode::Timeout
        && given < full
    {
        f.message.push_str(&format!(
            " (max_duration {} counts from admission; {} of it passed before the task started)",
            IsoDuration::from_duration(full),
            IsoDuration::from_duration(full.saturating_sub(given)),
        ));
    }
}
