//! The operator's policy endpoint: `POST /v1/policy/reload` reloads the
//! policy directory (see `crate::engine::Host::reload_policy`): 200 with
//! the old and new hash, 422 with every problem and the set in force kept.

use super::error::ApiError;
use super::request::operator;
use super::state::AppState;
use crate::engine::ReloadError;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

pub(crate) async fn reload(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let by = operator(&state, &headers)?.id.as_str().to_owned();
    let host = state.host.clone();
    let reloaded = tokio::task::spawn_blocking(move || host.reload_policy(&by))
        .await
        .map_err(|e| anyhow::anyhow!("policy reload: {e}"))?;
    match reloaded {
        Ok(r) => Ok(Json(json!({
            "changed": r.old_hash != r.new_hash,
            "new_hash": r.new_hash,
            "old_hash": r.old_hash,
        }))
        .into_response()),
        Err(ReloadError::Invalid { kept, error }) => {
            let problems: Vec<_> = error
                .problems
                .iter()
                .map(|p| {
                    json!({
                        "file": p.file,
                        "pointer": p.problem.pointer,
                        "message": p.problem.message,
                    })
                })
                .collect();
            let body = json!({
                "error": {
                    "code": "invalid_policy",
                    "message": format!(
                        "the policy set does not check ({} problem{}); the set in force ({kept}) is kept",
                        problems.len(),
                        if problems.len() == 1 { "" } else { "s" }
                    ),
                    "problems": problems,
                },
                "policy_hash": kept,
            });
            Ok((StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response())
        }
        Err(e @ ReloadError::Host(_)) => Err(ApiError::unavailable(format!("{e:#}"))),
    }
}
