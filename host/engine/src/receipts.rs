//! The gate's and the runner's receipts: every decision the engine makes on
//! a task (admission, an operator's decision, an approval's expiry, a
//! session refused) becomes a receipt before the answer goes out, and the
//! receipts that admitted a task are the DAG parents of its session's
//! receipts. The decision inputs are those of `hcp_policy::pep::gate`, so
//! `hcp replay` re-derives them.

use super::Host;
use crate::evidence::Entry;
use crate::store::TaskRecord;
use anyhow::Result;
use hcp_contracts::RiskLevel;
use hcp_contracts::jcs::Canonical;
use hcp_contracts::manifest::Manifest;
use hcp_contracts::message::{RejectReason, TaskRejected};
use hcp_policy::Admission;
use hcp_policy::pep::BoundedText;
use hcp_policy::pep::gate::{
    self, AbandonInput, AdmissionInput, ApprovalInput, CALL_ABANDONED, CALL_ADMISSION,
    CALL_APPROVAL, CALL_EXPIRY, CALL_SESSION_TOKEN, ExpiryInput, HostCheck, TokenInput,
};
use hcp_receipts::{Parent, Verdict, reason};

/// What the gate decided on, for the admission receipt.
pub(crate) struct AdmissionFacts<'a> {
    /// The policy the gate decided under.
    pub(crate) policy: &'a super::CurrentPolicy,
    /// The gate's clock.
    pub(crate) at: time::OffsetDateTime,
    /// The authenticated caller.
    pub(crate) caller: &'a str,
    /// Resources held by other sessions.
    pub(crate) busy: Vec<String>,
    /// The capability selected, once one was.
    pub(crate) capability: Option<&'a super::Capability>,
    /// The transport, where the receipt names it (MCP's).
    pub(crate) transport: Option<&'a str>,
}

/// The manifest as installed (its file), or its document.
pub(crate) fn manifest_bytes(manifest: &Manifest) -> Result<Vec<u8>> {
    match &manifest.source {
        Some(path) => Ok(std::fs::read(path)?),
        None => Ok(serde_json::to_vec_pretty(&manifest.doc)?),
    }
}

/// `name@version` of a task's capability: the version selected, or the
/// range asked for (`*` when none) before one was. What the caller sent is
/// kept printable and short, so that no message can make its own receipt
/// unrecordable.
fn task_capability(task: &TaskRecord) -> String {
    let version = match &task.version {
        Some(v) => v.as_str(),
        None => task.submit["payload"]["capability_version"]
            .as_str()
            .unwrap_or("*"),
    };
    format!("{}@{}", printable(&task.capability), printable(version))
}

/// The risk level the gate recorded for `task` (R1 before it assessed one).
fn recorded_risk(task: &TaskRecord) -> RiskLevel {
    task.risk
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(RiskLevel::R1)
}

/// At most 100 characters, control characters as `?`, never empty.
fn printable(s: &str) -> String {
    let out: String = s
        .chars()
        .take(100)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if out.is_empty() { "?".into() } else { out }
}

/// What an admission's decision input keeps of a `task_submit` payload:
/// what the decision reads, whole; the rest, when large, as a hash, a size
/// and a prefix ([`BoundedText`], as a large host call's arguments are
/// kept). A payload the host refused by its own check (`refused_by_host`)
/// is read no further, so a large one is kept bounded whole; otherwise a
/// large free-form `context`, which no decision reads, is.
fn bounded_payload(
    payload: &serde_json::Value,
    refused_by_host: bool,
) -> Result<(serde_json::Value, Option<BoundedText>, Option<BoundedText>)> {
    let text = |v: &serde_json::Value| -> Result<String> {
        Ok(String::from_utf8(canonical(v)?.as_bytes().to_vec())?)
    };
    if refused_by_host {
        if let Some(bounded) = BoundedText::of(&text(payload)?) {
            return Ok((serde_json::Value::Null, Some(bounded), None));
        }
    } else if let Some(context) = payload.get("context")
        && let Some(bounded) = BoundedText::of(&text(context)?)
    {
        let mut rest = payload.clone();
        if let Some(fields) = rest.as_object_mut() {
            fields.remove("context");
        }
        return Ok((rest, None, Some(bounded)));
    }
    Ok((payload.clone(), None, None))
}

/// The canonical form of a decision input, as its receipt records it.
pub(crate) fn canonical(input: &impl serde::Serialize) -> Result<Canonical> {
    Canonical::of(input).map_err(|e| anyhow::anyhow!("decision input: {e}"))
}

/// The receipt of an engine decision on `task` under `policy`: `call` on
/// `capability` with `args` and decision `input`, its verdict, reason code
/// and risk. No session, parents or manifest (a caller adds those).
fn decision(
    policy: &super::CurrentPolicy,
    task: &TaskRecord,
    capability: String,
    call: &str,
    args: serde_json::Value,
    input: Canonical,
    (verdict, reason_code, risk): (Verdict, &str, RiskLevel),
) -> Result<Entry> {
    Ok(Entry {
        session_id: None,
        task_id: Some(task.task_id.clone()),
        capability,
        call: call.to_owned(),
        args,
        input,
        verdict,
        reason_code: reason_code.to_owned(),
        risk,
        policy_hash: policy.digest,
        parents: Vec::new(),
        manifest: None,
        policy_sources: Some(policy.sources.clone()),
        follows: None,
    })
}

impl Host {
    /// Records the gate's decision on `task`: ALLOW at `risk`, or the
    /// refusal `rejected` (by the policy, or by the host's own check when
    /// `host_check`). Durable, and covered by a checkpoint, on return.
    pub(crate) fn record_admission(
        &self,
        task: &TaskRecord,
        facts: &AdmissionFacts<'_>,
        outcome: Result<RiskLevel, (&TaskRejected, bool)>,
    ) -> Result<Parent> {
        self.recorder
            .append_sealed(self.admission_entry(task, facts, outcome)?)
    }

    /// The receipt of the gate's decision on `task`, to be stored by the
    /// caller (see [`Host::record_admission`]).
    pub(crate) fn admission_entry(
        &self,
        task: &TaskRecord,
        facts: &AdmissionFacts<'_>,
        outcome: Result<RiskLevel, (&TaskRejected, bool)>,
    ) -> Result<Entry> {
        let host_check = match outcome {
            Err((r, true)) => Some(HostCheck {
                message: self
                    .store
                    .withhold()
                    .quoted(&task.submit["payload"], &r.reason_message),
                reason_code: r.reason_code,
            }),
            _ => None,
        };
        let (verdict, code, risk) = match outcome {
            Ok(risk) => (Verdict::Allow, reason::ALLOW, risk),
            Err((r, _)) => (
                Verdict::Deny,
                gate::gate_reason(r.reason_code),
                r.assessed_risk_level.unwrap_or(RiskLevel::R1),
            ),
        };
        // Credentials in the message are withheld (`crate::withhold`),
        // then what no decision reads is bounded.
        let payload = self.recorded_payload(task, facts.policy);
        let (submit, submit_bounded, context_bounded) =
            bounded_payload(&payload, host_check.is_some())?;
        // The manifest is not copied: its canonical form, made when the
        // capability was loaded, goes in its place.
        let input = AdmissionInput::<()> {
            at: hcp_contracts::timestamp::rfc3339_exact(facts.at),
            caller: facts.caller.to_owned(),
            equipment_busy: facts.busy.clone(),
            host_check,
            kind: CALL_ADMISSION.to_owned(),
            manifest: None,
            submit,
            submit_bounded,
            context_bounded,
            transport: facts.transport.map(str::to_owned),
        };
        let input = match facts.capability {
            Some(c) => Canonical::replacing(&input, "manifest", &c.manifest_canonical)
                .map_err(|e| anyhow::anyhow!("decision input: {e}"))?,
            None => canonical(&input)?,
        };
        let capability = match facts.capability {
            Some(c) => c.manifest.id(),
            None => task_capability(task),
        };
        let manifest = facts.capability.map(|c| c.manifest_bytes.to_vec());
        Ok(Entry {
            manifest,
            ..decision(
                facts.policy,
                task,
                capability,
                CALL_ADMISSION,
                payload,
                input,
                (verdict, code, risk),
            )?
        })
    }

    /// `task`'s `task_submit` payload as its admission receipt records it:
    /// flagged strings withheld as keyed digests, except the inputs a risk
    /// rule of `policy` reads (replay compares them again).
    fn recorded_payload(
        &self,
        task: &TaskRecord,
        policy: &super::CurrentPolicy,
    ) -> serde_json::Value {
        let payload = &task.submit["payload"];
        if !crate::withhold::holds_credential(payload) {
            return payload.clone();
        }
        let read: Vec<String> = policy.set.risk_rule_pointers().map(str::to_owned).collect();
        self.store
            .withhold()
            .payload(payload, &read)
            .unwrap_or_else(|| payload.clone())
    }

    /// Records an operator's decision (or a refusal of the operator),
    /// decided under `policy`.
    #[expect(clippy::too_many_arguments, reason = "the facts of one decision")]
    pub(crate) fn record_approval(
        &self,
        policy: &super::CurrentPolicy,
        task: &TaskRecord,
        manifest: &Manifest,
        admission: &Admission,
        operator: &str,
        approved: bool,
        refused: Option<RejectReason>,
    ) -> Result<Parent> {
        let input = ApprovalInput {
            admission: admission.clone(),
            approved,
            at: hcp_contracts::message::now_rfc3339(),
            declaration: manifest.doc.capability.clone(),
            kind: CALL_APPROVAL.to_owned(),
            operator: operator.to_owned(),
        };
        let (verdict, code) = match (refused, approved) {
            (Some(r), _) => (Verdict::Deny, gate::gate_reason(r)),
            (None, true) => (Verdict::Allow, reason::ALLOW),
            (None, false) => (Verdict::Deny, reason::DENY_APPROVAL_REJECTED),
        };
        self.recorder.append_sealed(Entry {
            parents: self.recorder.task_causes(&task.task_id)?,
            ..decision(
                policy,
                task,
                manifest.id(),
                CALL_APPROVAL,
                serde_json::json!({"approved": approved, "operator": operator}),
                canonical(&input)?,
                (verdict, code, admission.risk_level),
            )?
        })
    }

    /// Records that nobody decided before the approval expired.
    /// Records that `task`'s approval expired at `expires_at` (found at
    /// `at`), with `write` (the task's rejection) in the commit that stores
    /// the receipt.
    pub(crate) fn record_expiry(
        &self,
        task: &TaskRecord,
        at: &str,
        expires_at: &str,
        write: crate::evidence::StoreWrite,
    ) -> Result<Parent> {
        let input = ExpiryInput {
            at: at.to_owned(),
            expires_at: expires_at.to_owned(),
            kind: CALL_EXPIRY.to_owned(),
        };
        let capability = task_capability(task);
        let policy = self.policy();
        let risk = recorded_risk(task);
        self.recorder.append_sealed_with(
            Entry {
                parents: self.recorder.task_causes(&task.task_id)?,
                ..decision(
                    &policy,
                    task,
                    capability,
                    CALL_EXPIRY,
                    serde_json::json!({"expires_at": expires_at}),
                    canonical(&input)?,
                    (Verdict::Deny, reason::DENY_APPROVAL_EXPIRED, risk),
                )?
            },
            write,
        )
    }

    /// Records a session refused because its token no longer verifies,
    /// with `write` (the task's failure) in the commit that stores the
    /// receipt.
    pub(crate) fn record_token_refusal(
        &self,
        task: &TaskRecord,
        manifest: &Manifest,
        admission: &Admission,
        session: &str,
        error: &str,
        write: crate::evidence::StoreWrite,
    ) -> Result<Parent> {
        let input = TokenInput {
            error: error.to_owned(),
            kind: CALL_SESSION_TOKEN.to_owned(),
            session_id: session.to_owned(),
        };
        let policy = self.policy();
        self.recorder.append_sealed_with(
            Entry {
                session_id: Some(session.to_owned()),
                parents: self.recorder.task_causes(&task.task_id)?,
                ..decision(
                    &policy,
                    task,
                    manifest.id(),
                    CALL_SESSION_TOKEN,
                    serde_json::json!({"session_id": session}),
                    canonical(&input)?,
                    (
                        Verdict::Deny,
                        reason::DELEGATION_INVALID,
                        admission.risk_level,
                    ),
                )?
            },
            write,
        )
    }

    /// Records that this host abandoned its copy of `task` (it stopped
    /// before acknowledging the task's delivery over `transport`): the copy
    /// never runs here and this host never answers for it.
    pub(crate) fn record_abandoned(
        &self,
        task: &TaskRecord,
        transport: &str,
        reason: &str,
    ) -> Result<Parent> {
        self.recorder
            .append_sealed(self.abandoned_entry(task, transport, reason)?)
    }

    /// [`Host::record_abandoned`] for a task its caller withdrew (over
    /// `transport`) while it waited, with `write` (the task's failure) in
    /// the commit that stores the receipt.
    pub(crate) fn record_withdrawn(
        &self,
        task: &TaskRecord,
        transport: &str,
        reason: &str,
        write: crate::evidence::StoreWrite,
    ) -> Result<Parent> {
        self.recorder
            .append_sealed_with(self.abandoned_entry(task, transport, reason)?, write)
    }

    /// The `gate.abandoned` receipt of `task`.
    fn abandoned_entry(&self, task: &TaskRecord, transport: &str, reason: &str) -> Result<Entry> {
        let input = AbandonInput {
            at: hcp_contracts::message::now_rfc3339(),
            kind: CALL_ABANDONED.to_owned(),
            reason: reason.to_owned(),
            transport: transport.to_owned(),
        };
        let policy = self.policy();
        let risk = recorded_risk(task);
        Ok(Entry {
            parents: self.recorder.task_causes(&task.task_id)?,
            ..decision(
                &policy,
                task,
                task_capability(task),
                CALL_ABANDONED,
                serde_json::json!({"transport": transport}),
                canonical(&input)?,
                (Verdict::Deny, reason::FAIL_CLOSED_ERROR, risk),
            )?
        })
    }
}
