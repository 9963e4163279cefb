//! What both the HTTP API and the command line show of an approval and of
//! the HID session log's verification, built once here so that `hcp serve`
//! and `hcp approvals`/`hcp tasks`/`hcp hid` say the same thing in the
//! same order.

use crate::Host;
use crate::store::{ApprovalRecord, Installed, TaskRecord};
use anyhow::Context as _;
use hcp_contracts::manifest::ManifestDoc;
use serde_json::{Map, Value, json};

/// The decision side of an approval: `requested_at`, `expires_at`,
/// `decision`, `operator_id`, `reason`, `decided_at` (the last four null
/// until an operator decides; `decision` `expired` with `decided_at` once
/// nobody did in time). `hcp tasks show` shows this.
pub fn approval_decision(a: &ApprovalRecord) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("requested_at".into(), json!(a.requested_at));
    out.insert("expires_at".into(), json!(a.expires_at));
    out.insert("decision".into(), json!(a.decision));
    out.insert("operator_id".into(), json!(a.operator_id));
    out.insert("reason".into(), json!(a.reason));
    out.insert("decided_at".into(), json!(a.decided_at));
    out
}

/// `lead` (what names the task), then the decision, then what the gate
/// assessed for the operator.
fn approval_after(mut lead: Map<String, Value>, a: &ApprovalRecord) -> Value {
    lead.extend(approval_decision(a));
    lead.insert("assessment".into(), a.assessment.clone());
    Value::Object(lead)
}

/// An approval named by its task's id, as `hcp approvals show` prints it.
pub fn approval_record(a: &ApprovalRecord) -> Value {
    let mut lead = Map::new();
    lead.insert("task_id".into(), json!(a.task_id));
    approval_after(lead, a)
}

/// An approval as the operator's endpoints show it (`GET /v1/approvals`,
/// `GET /v1/approvals/{id}`, `GET /v1/decisions`): the task's summary and
/// its installed declaration (`declaration`) before the decision.
pub fn approval(host: &Host, t: &TaskRecord, a: &ApprovalRecord) -> Value {
    let mut lead = Map::new();
    lead.insert("task".into(), t.summary());
    lead.insert("declaration".into(), declaration(host, t));
    approval_after(lead, a)
}

/// The declaration of the version a task was admitted for, as installed:
/// `name`, `version`, `description`, `safety` (risk ceiling, resource types,
/// hazard categories, ...), the `instruments` and `devices` it is granted,
/// and the publisher's `declared_envelope`. A version that is gone or
/// cannot be read is shown as `unavailable`, saying so, never as an error
/// that hides the approval.
fn declaration(host: &Host, t: &TaskRecord) -> Value {
    let Some(version) = t.version.as_deref() else {
        return unavailable(t, "no version was chosen for this task");
    };
    let doc = host
        .store
        .installed_version(&t.capability, version)
        .and_then(|found| found.map(|i| read_declaration(&i)).transpose());
    match doc {
        Ok(Some(doc)) => json!({
            "name": doc.capability.name,
            "version": doc.capability.version,
            "description": doc.capability.description,
            "safety": doc.capability.safety,
            "instruments": doc.grants.instruments,
            "devices": doc.grants.devices,
            "declared_envelope": doc.safety_envelope,
        }),
        Ok(None) => unavailable(t, "this version is no longer installed"),
        Err(e) => {
            tracing::warn!("{}@{version}: declaration: {e:#}", t.capability);
            unavailable(
                t,
                "the installed declaration cannot be read (the host's log says why)",
            )
        }
    }
}

fn read_declaration(installed: &Installed) -> anyhow::Result<ManifestDoc> {
    let path = installed.manifest_path();
    let text = std::fs::read(&path)
        .with_context(|| format!("installed {}: {}", installed.id(), path.display()))?;
    serde_json::from_slice(&text)
        .with_context(|| format!("installed {}: {}", installed.id(), path.display()))
}

fn unavailable(t: &TaskRecord, why: &str) -> Value {
    json!({"name": t.capability, "version": t.version, "unavailable": why})
}

/// The HID session log's verification: `{"ok": true, "entries", "head"}`
/// when the chain holds, `{"ok": false, "error"}` with its first break.
pub fn log_verification<E: std::fmt::Display>(
    verdict: &Result<hcp_hid::log::Verified, E>,
) -> Value {
    match verdict {
        Ok(v) => json!({"ok": true, "entries": v.entries, "head": v.head}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ApprovalRecord {
        ApprovalRecord {
            task_id: "t-1".into(),
            requested_at: "2026-01-15T08:30:00.000Z".into(),
            expires_at: "2026-01-15T08:45:00.000Z".into(),
            assessment: json!({"risk": "R3"}),
            decision: Some("approved".into()),
            operator_id: Some("op".into()),
            reason: Some("checked".into()),
            decided_at: Some("2026-01-15T08:31:00.000Z".into()),
        }
    }

    #[test]
    fn an_approval_record_names_its_task_then_the_decision_then_the_assessment() {
        let shown = approval_record(&record()).to_string();
        assert_eq!(
            shown,
            r#"{"task_id":"t-1","requested_at":"2026-01-15T08:30:00.000Z","expires_at":"2026-01-15T08:45:00.000Z","decision":"approved","operator_id":"op","reason":"checked","decided_at":"2026-01-15T08:31:00.000Z","assessment":{"risk":"R3"}}"#
        );
    }

    #[test]
    fn the_decision_alone_has_no_assessment() {
        let shown = Value::Object(approval_decision(&record()));
        assert!(shown.get("assessment").is_none());
        assert_eq!(shown["decided_at"], "2026-01-15T08:31:00.000Z");
        assert_eq!(
            shown
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>()),
            Some(
                [
                    "requested_at",
                    "expires_at",
                    "decision",
                    "operator_id",
                    "reason",
                    "decided_at"
                ]
                .map(String::from)
                .to_vec()
            )
        );
    }

    #[test]
    fn a_broken_log_says_why() {
        let broken: Result<hcp_hid::log::Verified, &str> = Err("entry 3 altered");
        assert_eq!(
            log_verification(&broken),
            json!({"ok": false, "error": "entry 3 altered"})
        );
    }
}
