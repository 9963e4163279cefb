//! The operator's approvals: those waiting (`GET /v1/approvals`), one
//! (`GET /v1/approvals/{id}`), and deciding one (`POST
//! /v1/approvals/{id}`), which starts the task when it is approved and its
//! equipment is free. Operators only.

use super::error::ApiError;
use super::request::{Decision, PathArgs, body_as, operator};
use super::state::{AppState, spawn_run};
use crate::engine::{Auth, DecisionRefused};
use crate::store::TaskState;
use crate::views;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

pub(crate) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    state.host.expire_approvals()?;
    let mut out = Vec::new();
    for t in state
        .host
        .store
        .tasks(Some(TaskState::PendingApproval), usize::MAX)?
    {
        if let Some(a) = state.host.store.approval(&t.task_id)? {
            out.push(views::approval(&state.host, &t, &a));
        }
    }
    Ok(Json(json!({"approvals": out})))
}

pub(crate) async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathArgs(id): PathArgs<String>,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    let t = state
        .host
        .store
        .task(&id)?
        .ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
    let a = state
        .host
        .store
        .approval(&id)?
        .ok_or_else(|| ApiError::not_found(format!("task {id} has no approval request")))?;
    Ok(Json(views::approval(&state.host, &t, &a)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: Decision,
    reason: String,
}

pub(crate) async fn decide(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathArgs(id): PathArgs<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<crate::engine::Answer>, ApiError> {
    let op = operator(&state, &headers)?.id.as_str().to_owned();
    let body: DecisionBody = body_as(
        &headers,
        body,
        "invalid_decision",
        r#"{"decision": "approve"|"reject", "reason": "..."}"#,
    )?;
    if body.reason.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_decision",
            "a decision needs a reason",
        ));
    }
    let task = state
        .host
        .store
        .task(&id)?
        .ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
    if task.state != TaskState::PendingApproval {
        return Err(ApiError::conflict(format!(
            "task {id} is not waiting for approval (it is {})",
            task.state.as_str()
        )));
    }
    let approved = body.decision == Decision::Approve;
    let host = state.host.clone();
    let (task_id, reason) = (id.clone(), body.reason.clone());
    let submission = tokio::task::spawn_blocking(move || {
        host.decide(&task_id, approved, Auth::Transport(&op), &op, &reason)
    })
    .await
    .map_err(|e| anyhow::anyhow!("decision task: {e}"))?
    .map_err(|e| match e.downcast::<DecisionRefused>() {
        // Another decision or the approval's expiry won the race, or the
        // task moved on: it is no longer waiting (409, as when it was
        // decided before this request came).
        Ok(DecisionRefused::NotPending(why)) => {
            ApiError::conflict(format!("task {id} is not waiting for approval: {why}"))
        }
        Ok(DecisionRefused::Forbidden(why)) => ApiError::forbidden(why),
        Ok(DecisionRefused::Invalid(why)) => ApiError::bad_request("invalid_decision", why),
        // The host's own fault: 503 while its storage is full, else 500.
        Err(e) => ApiError::from(e),
    })?;
    if submission.runnable {
        spawn_run(&state, id);
    }
    Ok(Json(submission.answer))
}
