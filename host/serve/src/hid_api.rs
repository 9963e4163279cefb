//! The operator's HID endpoints: the mediator's status and mode, the
//! proposals with their credential warnings, decisions, re-arming, and the
//! session log's verification. Operators only.

use super::error::ApiError;
use super::request::{Decision, PathArgs, body_as, operator};
use super::state::AppState;
use crate::hid::{outcome_json, proposal_id};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use hcp_hid::mediator::MediatorError;
use serde::Deserialize;
use serde_json::{Value, json};

fn mediator_error(e: MediatorError) -> ApiError {
    match e {
        MediatorError::UnknownProposal(_) => ApiError::not_found(e.to_string()),
        MediatorError::BadReason => ApiError::bad_request("invalid_decision", e.to_string()),
        MediatorError::Log(ref l) => ApiError::internal(&anyhow::anyhow!("HID session log: {l}")),
        MediatorError::Witness(_) => ApiError::unavailable(e.to_string()),
        MediatorError::Forbidden(_) => ApiError::forbidden(e.to_string()),
        MediatorError::NotPending(_)
        | MediatorError::CredentialNotAcknowledged(_)
        | MediatorError::NoDevice
        | MediatorError::NotInExecute(_)
        | MediatorError::ArmRefused(_)
        | MediatorError::TooManyPending { .. }
        | MediatorError::DuplicateProposal(_)
        | MediatorError::SessionEnded(_)
        | MediatorError::Proposal(_) => ApiError::conflict(format!("{e:#}")),
    }
}

fn hcp_operator(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<hcp_hid::action::OperatorId, ApiError> {
    let op = operator(state, headers)?;
    crate::hid::operator(op.id.as_str()).map_err(ApiError::forbidden)
}

/// Runs a blocking mediator call off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MediatorError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| anyhow::anyhow!("HID task: {e}"))?
        .map_err(mediator_error)
}

/// What the mediator says of itself, read off the async threads: reading
/// waits for its state, which a decision or a mode change holds while its
/// writes wait (for the database, for the device).
async fn read<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&crate::hid::HidService) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let hid = state.host.hid.clone();
    Ok(tokio::task::spawn_blocking(move || f(&hid))
        .await
        .map_err(|e| anyhow::anyhow!("HID task: {e}"))?)
}

pub(crate) async fn status(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    Ok(Json(
        read(&state, crate::hid::HidService::status_json).await?,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeBody {
    mode: String,
}

pub(crate) async fn set_mode(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let op = hcp_operator(&state, &headers)?;
    let body: ModeBody = body_as(
        &headers,
        body,
        "invalid_mode",
        r#"{"mode": "OBSERVE"|"SUGGEST"|"EXECUTE"}"#,
    )?;
    let mode =
        crate::hid::mode(&body.mode).map_err(|m| ApiError::bad_request("invalid_mode", m))?;
    let hid = state.host.hid.clone();
    blocking(move || hid.mediator().set_mode(&op, mode)).await?;
    Ok(Json(
        read(&state, crate::hid::HidService::status_json).await?,
    ))
}

pub(crate) async fn rearm(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let op = hcp_operator(&state, &headers)?;
    let hid = state.host.hid.clone();
    blocking(move || hid.mediator().rearm(&op)).await?;
    Ok(Json(
        read(&state, crate::hid::HidService::status_json).await?,
    ))
}

pub(crate) async fn proposals(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    let proposals = read(&state, crate::hid::HidService::proposals_json).await?;
    Ok(Json(json!({"proposals": proposals})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
    /// Approving a text flagged `credential_warning` needs this.
    #[serde(default)]
    acknowledge_credential: bool,
}

pub(crate) async fn decide(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathArgs(id): PathArgs<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let op = hcp_operator(&state, &headers)?;
    let body: DecisionBody = body_as(
        &headers,
        body,
        "invalid_decision",
        r#"{"decision": "approve"|"reject", "reason"?, "acknowledge_credential"?}"#,
    )?;
    let id = proposal_id(&id).map_err(|_| ApiError::not_found(format!("no proposal {id}")))?;
    let hid = state.host.hid.clone();
    let outcome = match body.decision {
        Decision::Approve => {
            let ack = body.acknowledge_credential;
            blocking(move || hid.mediator().approve(&op, &id, ack)).await?
        }
        Decision::Reject => {
            let reason = body
                .reason
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| {
                    ApiError::bad_request("invalid_decision", "a rejection needs a reason")
                })?;
            blocking(move || hid.mediator().reject(&op, &id, &reason)).await?
        }
    };
    Ok(Json(outcome_json(&outcome)))
}

pub(crate) async fn verify_log(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    operator(&state, &headers)?;
    let hid = state.host.hid.clone();
    let verdict = tokio::task::spawn_blocking(move || hid.mediator().verify_log())
        .await
        .map_err(|e| anyhow::anyhow!("HID task: {e}"))?;
    Ok(Json(crate::views::log_verification(&verdict)))
}
