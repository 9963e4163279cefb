//! What a service manager and a monitoring system ask the server:
//! `/readyz` (unauthenticated: may it take work now?) and `/metrics`
//! (operators only: the host's metrics, `hcp_store::metrics`, in the
//! Prometheus text format). `/healthz` (alive) is the API's own route.
//!
//! `/readyz` answers 200 `{"status":"ready", "checks": {...}}` when every
//! check passes, 503 `{"status":"not_ready", "checks": {...}, "not_ready":
//! [...]}` naming those that do not: `store` (the data directory takes a
//! write now: [`hcp_store::Store::probe_writable`]),
//! `policy` (a policy set is in force), `broker` (where AMQP is configured:
//! connected and consuming), `shutdown` (not draining). It names checks and
//! says nothing else of the host (no paths, no error text: those go to the
//! server's log).

use super::error::ApiError;
use super::request::operator;
use super::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use hcp_store::metrics::{CONTENT_TYPE, Gauges};
use serde_json::{Map, Value, json};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Longest a readiness probe waits for the store's write probe: a store
/// that does not answer by then is not ready.
const STORE_PROBE: Duration = Duration::from_secs(2);

/// `GET /readyz`.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let mut checks = Map::new();
    let store = state.host.store.clone();
    let probed = tokio::time::timeout(
        STORE_PROBE,
        tokio::task::spawn_blocking(move || store.probe_writable()),
    )
    .await;
    let store_ok = match probed {
        Ok(Ok(Ok(()))) => true,
        Ok(Ok(Err(e))) => {
            tracing::warn!(target: "hcp::ready", "not ready: the store takes no write: {e:#}");
            false
        }
        Ok(Err(e)) => {
            tracing::warn!(target: "hcp::ready", "not ready: the store probe: {e}");
            false
        }
        Err(_) => {
            tracing::warn!(target: "hcp::ready", "not ready: the store probe took over {STORE_PROBE:?}");
            false
        }
    };
    checks.insert("store".into(), verdict(store_ok));
    // The host holds the set it started with, or the last one a reload
    // accepted (a refused reload keeps the one in force): its files, as
    // receipts snapshot them, are there.
    let policy_ok = !state.host.policy().sources.is_empty();
    checks.insert("policy".into(), verdict(policy_ok));
    let readiness = state.readiness();
    if readiness.broker_configured.load(Ordering::SeqCst) {
        checks.insert(
            "broker".into(),
            verdict(readiness.broker_connected.load(Ordering::SeqCst)),
        );
    }
    let draining = readiness.draining.load(Ordering::SeqCst);
    checks.insert(
        "shutdown".into(),
        Value::from(if draining { "draining" } else { "ok" }),
    );
    let not_ready: Vec<&str> = checks
        .iter()
        .filter(|(_, v)| v.as_str() != Some("ok"))
        .map(|(k, _)| k.as_str())
        .collect();
    if not_ready.is_empty() {
        (
            StatusCode::OK,
            Json(json!({"status": "ready", "checks": checks})),
        )
            .into_response()
    } else {
        let body = json!({"status": "not_ready", "not_ready": not_ready, "checks": checks});
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}

fn verdict(ok: bool) -> Value {
    Value::from(if ok { "ok" } else { "failed" })
}

/// `GET /metrics`: operators only (the operator credential, as for the
/// operator's endpoints; a scraper sends it as `Authorization: Bearer`).
pub(crate) async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&state, &headers)?;
    let host = state.host.clone();
    let text = tokio::task::spawn_blocking(move || -> anyhow::Result<String> {
        let store = &host.store;
        let (approvals_waiting, oldest) = store.waiting_approvals()?;
        let tasks: Vec<(&'static str, String, i64)> = store
            .live_task_counts()?
            .into_iter()
            .map(|(s, c, n)| (s.as_str(), c, n))
            .collect();
        let slots_in_use = tasks
            .iter()
            .filter(|(s, _, _)| *s == "running")
            .map(|(_, _, n)| n)
            .sum();
        let oldest_approval_seconds = oldest.map_or(0.0, |t| {
            (time::OffsetDateTime::now_utc() - t)
                .as_seconds_f64()
                .max(0.0)
        });
        let status = host.hid.mediator().status();
        let execution = match status.execution {
            hcp_hid::mediator::Execution::Off => "off",
            hcp_hid::mediator::Execution::Armed { .. } => "armed",
            hcp_hid::mediator::Execution::Halted { .. } => "halted",
        };
        let archived = hcp_evidence::archive::summary(store)?;
        let gauges = Gauges {
            tasks,
            approvals_waiting,
            oldest_approval_seconds,
            slots_in_use,
            store_bytes: i64::try_from(store.size_bytes()).unwrap_or(i64::MAX),
            hid: Some((status.mode.as_str().to_owned(), execution.to_owned())),
            archives: i64::try_from(archived.archives).unwrap_or(i64::MAX),
            archived_tasks: i64::try_from(archived.tasks).unwrap_or(i64::MAX),
        };
        store
            .metrics()
            .encode(&gauges)
            .map_err(|e| anyhow::anyhow!("encoding the metrics: {e}"))
    })
    .await
    .map_err(|e| anyhow::anyhow!("metrics task: {e}"))??;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}
