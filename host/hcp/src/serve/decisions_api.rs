//! What an approval decides and what was decided, for the operator's page:
//! the installed declaration beside each approval (equipment, hazards, the
//! publisher's own envelope, to set beside the effective one the gate
//! computed), and the decided approvals with who decided, when and why.
//! Operators only.

use super::AppState;
use super::api::{approval_json, operator};
use super::error::ApiError;
use crate::engine::Host;
use crate::store::TaskRecord;
use anyhow::Context as _;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use hcp_contracts::manifest::ManifestDoc;
use serde::Deserialize;
use serde_json::{Value, json};

/// Most decisions one request lists.
const MAX_DECISIONS: usize = 200;

/// The declaration of the version a task was admitted for, as installed:
/// `name`, `version`, `description`, `safety` (risk ceiling, resource types,
/// hazard categories, ...), the `instruments` and `devices` it is granted,
/// and the publisher's `declared_envelope`. A version that is gone or
/// cannot be read is shown as `unavailable`, saying so, never as an error
/// that hides the approval.
pub(crate) fn declaration_view(host: &Host, t: &TaskRecord) -> Value {
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

fn read_declaration(installed: &crate::store::Installed) -> anyhow::Result<ManifestDoc> {
    let path = installed.manifest_path();
    let text = std::fs::read(&path)
        .with_context(|| format!("installed {}: {}", installed.id(), path.display()))?;
    serde_json::from_slice(&text)
        .with_context(|| format!("installed {}: {}", installed.id(), path.display()))
}

fn unavailable(t: &TaskRecord, why: &str) -> Value {
    json!({"name": t.capability, "version": t.version, "unavailable": why})
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionsQuery {
    limit: Option<usize>,
}

/// `GET /v1/decisions`: approvals an operator decided, the most recent
/// first, each as `GET /v1/approvals/{id}` shows it (`decision`,
/// `operator_id`, `reason`, `decided_at` set).
pub(crate) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<DecisionsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    let Query(q) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    let limit = q.limit.unwrap_or(25).min(MAX_DECISIONS);
    let mut out = Vec::new();
    for a in state.host.store.decided_approvals(limit)? {
        if let Some(t) = state.host.store.task(&a.task_id)? {
            out.push(approval_json(&state, &t, &a));
        }
    }
    Ok(Json(json!({"decisions": out})))
}
