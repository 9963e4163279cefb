//! What was decided, for the operator's page: the decided approvals with
//! who decided, when and why, each beside the installed declaration
//! (equipment, hazards, the publisher's own envelope; see
//! [`crate::views::approval`]). Operators only.

use super::error::ApiError;
use super::request::operator;
use super::state::AppState;
use crate::views;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

/// Most decisions one request lists.
const MAX_DECISIONS: usize = 200;

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
            out.push(views::approval(&state.host, &t, &a));
        }
    }
    Ok(Json(json!({"decisions": out})))
}
