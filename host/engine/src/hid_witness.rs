//! The host's witness of the HID mediator: each decision, mode change and
//! execution as a receipt, decided by the functions `hcp replay` uses.

use crate::evidence::{Appender, Entry, Follows, RecordedSession};
use crate::store::Store;
use hcp_contracts::RiskLevel;
use hcp_contracts::jcs::Canonical;
use hcp_hid::mediator::witness::{
    self, Decided, Finished, ModeChange, Readiness, Witness, WitnessError,
};
use hcp_policy::pep::hid::{
    self as pep_hid, CALL_HID_DECISION, CALL_HID_EXECUTION, CALL_HID_MODE, HidAuthzFacts,
    HidDecisionInput, HidExecutionInput, HidModeInput, HidReadiness, HidResult, HidVerdict,
};
use hcp_policy::pep::{Decision, SessionFacts};
use hcp_receipts::{Verdict, reason};
use serde_json::{Value, json};
use std::sync::Arc;

/// Receipts of the mediator's decisions and executions (`hid.decision`,
/// `hid.execution`; see `hcp_policy::pep::hid`), each following from the
/// receipt of the guest's `hid.propose` call and decided by the same
/// functions `hcp replay` uses.
#[derive(Debug)]
pub(crate) struct HidReceipts {
    pub(crate) appender: Appender,
    pub(crate) store: Arc<Store>,
    /// The policy in force (read once per decision).
    pub(crate) policy: Arc<crate::LivePolicy>,
    /// The installed capabilities, read once (the engine's).
    pub(crate) capabilities: Arc<crate::Capabilities>,
}

/// What a session's receipts say of it.
struct SessionOf {
    task_id: String,
    capability: String,
    risk: RiskLevel,
    facts: SessionFacts,
}

/// The device grant of the HID mediator's guests.
const HID_GRANT: &str = "hid";

impl HidReceipts {
    /// The declaration of an installed `name@version`, from its manifest.
    fn declaration(&self, id: &str) -> Result<Arc<hcp_contracts::manifest::Manifest>, String> {
        let (name, version) = id
            .split_once('@')
            .ok_or_else(|| format!("capability {id:?} is not name@version"))?;
        let installed = self
            .store
            .installed_version(name, version)
            .map_err(|e| format!("{id}: {e:#}"))?
            .ok_or_else(|| format!("{id} is no longer installed"))?;
        self.load_manifest(&installed)
    }

    /// An installed capability's manifest (pinned to its recorded digest),
    /// from the engine's cache.
    fn load_manifest(
        &self,
        installed: &crate::store::Installed,
    ) -> Result<Arc<hcp_contracts::manifest::Manifest>, String> {
        self.capabilities
            .get(installed)
            .map(|c| c.manifest.clone())
            .map_err(|e| format!("{}: {e:#}", installed.id()))
    }

    /// The facts the policy's `approve` question looks at for a proposal of
    /// `session`: its task's capability, risk, data and submitter.
    fn task_facts(&self, session: &SessionOf) -> Result<HidAuthzFacts, String> {
        let manifest = self.declaration(&session.facts.capability)?;
        let unattended = self
            .store
            .task(&session.task_id)
            .map_err(|e| format!("task {}: {e:#}", session.task_id))?
            .and_then(|t| t.admission)
            .is_some_and(|a| a.assessment.unattended);
        Ok(HidAuthzFacts {
            declaration: manifest.doc.capability.clone(),
            risk: session.facts.risk_level,
            data: session.facts.data_classification,
            unattended,
            submitter: session.facts.caller.clone(),
        })
    }

    /// Every installed capability that holds the HID device grant, at its
    /// risk ceiling (what arming EXECUTE lets its tasks do).
    fn hid_capabilities(&self) -> Result<Vec<HidAuthzFacts>, String> {
        let installed = self.store.installed().map_err(|e| format!("{e:#}"))?;
        let mut out = Vec::new();
        for i in installed {
            let manifest = self.load_manifest(&i)?;
            if manifest.grants.devices.iter().any(|d| d == HID_GRANT) {
                let declaration = manifest.doc.capability.clone();
                out.push(HidAuthzFacts {
                    risk: declaration.safety.risk_ceiling,
                    declaration,
                    data: hcp_contracts::DataClass::T1,
                    unattended: false,
                    submitter: String::new(),
                });
            }
        }
        Ok(out)
    }

    fn session(&self, id: &str) -> Result<SessionOf, String> {
        let recorded = || {
            crate::evidence::recorded_session(&self.store, id)
                .map_err(|e| format!("session {id}: {e:#}"))
        };
        // A session's opening is queued to the writer, not waited for (see
        // `engine::open_queued_session`): an operator can decide on its
        // guest's proposal before it is stored. Everything handed to the
        // writer before now is stored once the barrier returns.
        let found = match recorded()? {
            Some(found) => Some(found),
            None => {
                self.appender
                    .flush()
                    .map_err(|e| format!("session {id}: {e:#}"))?;
                recorded()?
            }
        };
        let RecordedSession {
            task_id,
            capability,
            facts,
        } = found.ok_or_else(|| format!("no receipt opened session {id}"))?;
        let facts: SessionFacts =
            serde_json::from_slice(&facts).map_err(|e| format!("session {id}'s facts: {e}"))?;
        Ok(SessionOf {
            task_id,
            capability,
            risk: facts.risk_level,
            facts,
        })
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one receipt's fields and the policy it was decided under"
    )]
    fn record(
        &self,
        session_id: &str,
        call: &str,
        args: Value,
        input: Canonical,
        decision: &Decision,
        policy: &crate::CurrentPolicy,
        follows: Follows,
    ) -> Result<(), String> {
        let session = self.session(session_id)?;
        self.appender
            .append_sealed(Entry {
                session_id: Some(session_id.to_owned()),
                task_id: Some(session.task_id),
                capability: session.capability,
                call: call.to_owned(),
                args,
                input,
                verdict: decision.verdict,
                reason_code: decision.reason.to_owned(),
                risk: session.risk,
                policy_hash: policy.digest,
                parents: Vec::new(),
                manifest: None,
                policy_sources: Some(policy.sources.clone()),
                follows: Some(follows),
            })
            .map(|_| ())
            .map_err(|e| format!("its receipt could not be recorded: {e:#}"))
    }
}

impl Witness for HidReceipts {
    fn decided(&self, d: &Decided<'_>) -> Result<(), WitnessError> {
        let verdict = match d.verdict {
            witness::Verdict::Approve => HidVerdict::Approve,
            witness::Verdict::Reject => HidVerdict::Reject,
            witness::Verdict::Withdraw => HidVerdict::Withdraw,
        };
        // The proposing task's facts: what the policy asks about, as it
        // does for a task approval. Unknown facts are refused by it.
        let task = match verdict {
            HidVerdict::Withdraw => None,
            _ => match self.session(d.session).and_then(|s| self.task_facts(&s)) {
                Ok(facts) => Some(facts),
                Err(e) => {
                    tracing::warn!(proposal = %d.proposal, error = %e, "HID decision: the task's facts are unknown");
                    None
                }
            },
        };
        let input = HidDecisionInput {
            at: hcp_contracts::message::now_rfc3339(),
            credential_acknowledged: d.credential_acknowledged,
            credential_warning: d.credential_warning,
            decision: verdict,
            kind: CALL_HID_DECISION.to_owned(),
            mode: d.mode.as_str().to_owned(),
            operator: d.operator.to_owned(),
            proposal: d.proposal.to_string(),
            reason: d.reason.map(str::to_owned),
            session_id: d.session.to_owned(),
            task,
        };
        let policy = self.policy.current();
        let decision = pep_hid::decide_decision(&policy, &input);
        // A refused operator decision takes no effect: the proposal stays
        // pending. (A rejection is a DENY that takes effect.)
        let refused = verdict != HidVerdict::Withdraw
            && decision.verdict == Verdict::Deny
            && !(verdict == HidVerdict::Reject
                && decision.reason == reason::DENY_APPROVAL_REJECTED);
        let args = json!({
            "decision": verdict,
            "operator": d.operator,
            "proposal": d.proposal,
        });
        let input = Canonical::of(&input).map_err(WitnessError::Failed)?;
        self.record(
            d.session,
            CALL_HID_DECISION,
            args,
            input,
            &decision,
            &policy,
            Follows {
                proposal: d.proposal.to_string(),
                // An approval is followed by its execution's receipt; a
                // refused decision leaves the proposal pending.
                last: verdict != HidVerdict::Approve && !refused,
            },
        )
        .map_err(WitnessError::Failed)?;
        if refused {
            let message = format!("{} ({})", decision.message, decision.reason);
            return Err(if decision.reason == reason::DENY_ARGS_INVALID {
                WitnessError::Invalid(message)
            } else {
                WitnessError::Forbidden(message)
            });
        }
        Ok(())
    }

    fn mode_change(&self, c: &ModeChange<'_>) -> Result<(), WitnessError> {
        // Every mode change names them (OBSERVE and SUGGEST need none).
        let capabilities = self.hid_capabilities().map_err(WitnessError::Failed)?;
        let risk = capabilities
            .iter()
            .map(|f| f.risk)
            .max()
            .unwrap_or(RiskLevel::R1);
        let capability = capabilities
            .iter()
            .map(|f| format!("{}@{}", f.declaration.name, f.declaration.version))
            .next()
            .unwrap_or_else(|| format!("hid-mediator@{}", env!("CARGO_PKG_VERSION")));
        let input = HidModeInput {
            at: hcp_contracts::message::now_rfc3339(),
            capabilities,
            from: c.from.as_str().to_owned(),
            kind: CALL_HID_MODE.to_owned(),
            operator: c.operator.to_owned(),
            to: c.to.as_str().to_owned(),
        };
        let policy = self.policy.current();
        let decision = pep_hid::decide_mode(&policy, &input);
        let args = json!({"from": input.from, "operator": c.operator, "to": input.to});
        let input = Canonical::of(&input).map_err(WitnessError::Failed)?;
        self.appender
            .append_sealed(Entry {
                session_id: None,
                task_id: None,
                capability,
                call: CALL_HID_MODE.to_owned(),
                args,
                input,
                verdict: decision.verdict,
                reason_code: decision.reason.to_owned(),
                risk,
                policy_hash: policy.digest,
                parents: Vec::new(),
                manifest: None,
                policy_sources: Some(policy.sources.clone()),
                follows: None,
            })
            .map_err(|e| {
                WitnessError::Failed(format!("its receipt could not be recorded: {e:#}"))
            })?;
        if decision.verdict == Verdict::Deny {
            return Err(WitnessError::Forbidden(format!(
                "{} ({})",
                decision.message, decision.reason
            )));
        }
        Ok(())
    }

    fn finished(&self, f: &Finished<'_>) -> Result<(), WitnessError> {
        let (result, execution_id, sent, reason) = match f.result {
            witness::Result::Executed { execution_id } => {
                (HidResult::Executed, Some(execution_id), None, None)
            }
            witness::Result::Failed {
                execution_id,
                sent,
                reason,
            } => (
                HidResult::Failed,
                Some(execution_id),
                Some(sent),
                Some(reason),
            ),
            witness::Result::NotExecuted { reason } => {
                (HidResult::NotExecuted, None, None, Some(reason))
            }
        };
        let input = HidExecutionInput {
            action_type: f.action_type.to_owned(),
            at: hcp_contracts::message::now_rfc3339(),
            execution_id: execution_id.map(str::to_owned),
            kind: CALL_HID_EXECUTION.to_owned(),
            mode: f.mode.as_str().to_owned(),
            operator: f.operator.to_owned(),
            proposal: f.proposal.to_string(),
            proposed_in: Some(f.proposed_in.as_str().to_owned()),
            readiness: match f.readiness {
                Readiness::Armed => HidReadiness::Armed,
                Readiness::Off => HidReadiness::Off,
                Readiness::Halted => HidReadiness::Halted,
            },
            reason: reason.map(str::to_owned),
            result,
            sent,
            session_id: f.session.to_owned(),
        };
        let decision = pep_hid::decide_execution(&input);
        let args = json!({
            "execution_id": execution_id,
            "proposal": f.proposal,
            "result": result,
        });
        let input = Canonical::of(&input).map_err(WitnessError::Failed)?;
        self.record(
            f.session,
            CALL_HID_EXECUTION,
            args,
            input,
            &decision,
            &self.policy.current(),
            Follows {
                proposal: f.proposal.to_string(),
                last: true,
            },
        )
        .map_err(WitnessError::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::Recorder;
    use hcp_contracts::DataClass;
    use hcp_hid::action::{Mode, ProposalId};
    use hcp_policy::PolicySet;
    use hcp_policy::pep::BudgetCaps;
    use hcp_tests::{ManifestBuilder, REPO_ROOT};
    use std::path::Path;
    use std::time::Duration;

    /// An operator decides on a proposal while the opening of the
    /// proposing session is still queued to the writer (here: held behind
    /// another connection's write lock for a moment). The decision is
    /// recorded: its receipt does not go missing because the session's
    /// was not stored yet.
    #[test]
    fn a_decision_is_recorded_while_the_sessions_opening_is_still_queued() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let store = Arc::new(Store::open(&data).expect("store"));
        let key = hcp_receipts::HostKey::generate().expect("key");
        let host_id = format!("host-{}", key.key_id());
        let identity = crate::hostkey::HostIdentity { key, host_id };
        let signing = hcp_receipts::SigningPolicy::default();
        let recorder = Recorder::open(store.clone(), identity, signing).expect("recorder");
        let set = PolicySet::load(&Path::new(REPO_ROOT).join("policies")).expect("policies");
        let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE)
            .set("/grants/devices", json!([HID_GRANT]))
            .load(dir.path());
        let session = "session-hid-1";
        let at_ms = hcp_sandbox::pep::now_ms();
        let facts = SessionFacts {
            budgets: BudgetCaps {
                artifacts: 10,
                bytes: 1 << 20,
                host_calls: 100,
            },
            caller: "harness-local-01".into(),
            capability: manifest.id(),
            data_classification: DataClass::T1,
            envelope: manifest.doc.safety_envelope.clone(),
            expires_at_ms: at_ms + 3_600_000,
            limits: (&manifest.limits).into(),
            risk_level: RiskLevel::R1,
            session_id: session.into(),
            surface: hcp_policy::pep::Surface::of(&manifest.grants),
            task_id: "task-hid-1".into(),
        };
        let (scope, decision) = hcp_policy::pep::input::open(&set, facts.clone(), at_ms);
        assert!(decision.allowed(), "{decision:?}");
        let scope = scope.expect("scope");

        // Another connection holds the write lock: the writer waits for it
        // with the queued opening, and releases nothing before it has it.
        let lock = rusqlite::Connection::open(data.join("hcp.db")).expect("db");
        lock.busy_timeout(Duration::from_secs(10)).expect("timeout");
        lock.execute_batch("BEGIN IMMEDIATE").expect("lock");
        recorder
            .queue_session_open(&set, facts, at_ms, &decision, b"{}", Vec::new())
            .expect("queued");
        // The guest proposes (its call's receipt queued behind the opening).
        let proposal = ProposalId::new();
        let governor = hcp_sandbox::pep::PolicyGovernor::new(Arc::new(scope), recorder.sink());
        let payload = json!({"text": "ls"}).to_string();
        let id = proposal.to_string();
        hcp_sandbox::pep::Governor::check(
            &governor,
            &hcp_policy::pep::Call::hid_propose("TYPE_TEXT", &payload, &id, "list the files"),
        )
        .expect("proposal allowed");
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            lock.execute_batch("COMMIT").expect("unlock");
        });

        let witness = HidReceipts {
            appender: recorder.appender(),
            store: store.clone(),
            policy: Arc::new(crate::LivePolicy::new(set).expect("live policy")),
            capabilities: Arc::new(crate::Capabilities::load(&store).expect("caps")),
        };
        let decided = witness.decided(&Decided {
            proposal: &proposal,
            session,
            operator: "operator-lab-01",
            verdict: witness::Verdict::Reject,
            reason: Some("not now"),
            mode: Mode::Suggest,
            credential_warning: false,
            credential_acknowledged: false,
        });
        release.join().expect("release");
        assert!(
            !matches!(decided, Err(WitnessError::Failed(_))),
            "the decision's receipt was not recorded: {decided:?}"
        );
        recorder.flush().expect("flush");
        let pack = crate::evidence::export(
            &store,
            &crate::evidence::Selection::Task("task-hid-1".into()),
        )
        .expect("export");
        let calls: Vec<&str> = pack.hosts[0]
            .receipts
            .iter()
            .map(|r| r.call.as_str())
            .collect();
        assert_eq!(
            calls,
            ["session.open", "hid.propose", CALL_HID_DECISION],
            "{calls:?}"
        );
    }
}
