//! The operator's view of the receipt log: recent receipts (optionally of
//! one task or session) and a verification of every stored receipt.
//! Operators only; both read the database, neither needs the host key.

use super::error::ApiError;
use super::request::operator;
use super::state::AppState;
use crate::evidence::{ReceiptFilter, recent_receipts, verify_store};
use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReceiptQuery {
    task: Option<String>,
    session: Option<String>,
    limit: Option<usize>,
}

pub(crate) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ReceiptQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    let Query(q) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    if q.task.is_some() && q.session.is_some() {
        return Err(ApiError::bad_request(
            "invalid_query",
            "give task or session, not both",
        ));
    }
    let limit = q.limit.unwrap_or(50).min(1000);
    let store = state.host.store.clone();
    let receipts = tokio::task::spawn_blocking(move || {
        let filter = match (&q.task, &q.session) {
            (Some(t), _) => ReceiptFilter::Task(t),
            (_, Some(s)) => ReceiptFilter::Session(s),
            _ => ReceiptFilter::All,
        };
        recent_receipts(&store, filter, limit)
    })
    .await
    .map_err(|e| anyhow::anyhow!("receipts task: {e}"))??;
    Ok(Json(json!({"receipts": receipts})))
}

pub(crate) async fn verify(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    let store = state.host.store.clone();
    let check = tokio::task::spawn_blocking(move || verify_store(&store))
        .await
        .map_err(|e| anyhow::anyhow!("verify task: {e}"))??;
    Ok(Json(json!({
        "ok": check.ok(),
        "receipts": check.receipts,
        "covered": check.covered,
        "signed": check.signed,
        "checkpoints": check.checkpoints,
        "problems": check.problems,
    })))
}
