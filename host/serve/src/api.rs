//! The HTTP API: HCP messages in and out, task status (seed 004's
//! `job_status`), server-sent events, artifacts, capability declarations,
//! and the operator's endpoints. `docs/openapi.json` describes it.
//!
//! Callers and operators authenticate with `Authorization: Bearer
//! <credential>`, checked against `callers.json` (see `super::request`).

use super::error::ApiError;
use super::listen::Transport;
use super::request::{PathArgs, bearer, caller, json_body};
use super::state::{AppState, spawn_run};
use crate::engine::{Answer, AnswerKind, Auth, NotATask, Submission, TaskMessage, job_status_of};
use crate::store::{TaskState, TaskStatus};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use hcp_contracts::message::MessageType;
use hcp_policy::Caller;
use serde::Deserialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// The API's routes. Every route but the event stream answers within
/// `timeout` (503 with a JSON error past it).
pub(crate) fn router(state: AppState, timeout: Duration) -> Router {
    // Every route under /v1 needs a caller, checked from the request's
    // head before its handler reads a body (`known_caller_first`).
    let authenticated =
        || axum::middleware::from_fn_with_state(state.clone(), super::request::known_caller_first);
    let public = Router::new()
        .route("/", get(super::page::operator_page))
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(super::ops_api::readyz))
        .route("/openapi.json", get(openapi));
    let timed = Router::new()
        .route("/v1/whoami", get(whoami))
        .route("/v1/tasks", post(submit).get(list_tasks))
        .route("/v1/tasks/{id}", get(status))
        .route("/v1/tasks/{id}/result", get(result))
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/artifacts/{session}/{name}", get(artifact))
        .route("/v1/approvals", get(super::approvals_api::list))
        .route(
            "/v1/approvals/{id}",
            get(super::approvals_api::show).post(super::approvals_api::decide),
        )
        .route("/v1/decisions", get(super::decisions_api::list))
        .route("/v1/receipts", get(super::receipts_api::list))
        .route("/v1/receipts/verify", get(super::receipts_api::verify))
        .route("/v1/hid", get(super::hid_api::status))
        .route("/v1/hid/mode", post(super::hid_api::set_mode))
        .route("/v1/hid/rearm", post(super::hid_api::rearm))
        .route("/v1/hid/proposals", get(super::hid_api::proposals))
        .route("/v1/hid/proposals/{id}", post(super::hid_api::decide))
        .route("/v1/hid/log/verify", get(super::hid_api::verify_log))
        .route("/v1/policy/reload", post(super::policy_api::reload))
        .route("/metrics", get(super::ops_api::metrics))
        .route_layer(authenticated())
        .merge(public)
        .layer(
            tower::ServiceBuilder::new()
                .layer(axum::error_handling::HandleErrorLayer::new(
                    |_: tower::BoxError| async { ApiError::timeout() },
                ))
                .layer(tower::timeout::TimeoutLayer::new(timeout)),
        );
    let streaming = Router::new()
        .route("/v1/tasks/{id}/events", get(events))
        .route_layer(authenticated());
    timed
        .merge(streaming)
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(axum::extract::DefaultBodyLimit::max(super::BODY_LIMIT))
        .with_state(state)
}

/// A task's status, if the requester may see the task: its own, or any
/// for an operator. Others read as not found. Only the task's status is
/// read ([`crate::store::Store::task_status`]): the status, the result
/// and the event stream show nothing else of it.
fn visible_status(state: &AppState, who: &Caller, id: &str) -> Result<TaskStatus, ApiError> {
    let task = state
        .host
        .store
        .task_status(id)?
        .filter(|t| who.is_operator() || t.caller_id == who.id.as_str())
        .ok_or_else(|| ApiError::not_found(format!("no task {id}")))?;
    Ok(task)
}

async fn submit(
    State(state): State<AppState>,
    transport: Option<Extension<Transport>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let token = bearer(&headers)?.to_owned();
    // Whether the credential and the task crossed a network in clear
    // (the engine refuses data above T2 so).
    let in_clear = transport.is_some_and(|Extension(t)| t.in_clear_beyond_loopback());
    // A credential that is no caller's is refused before its body is
    // parsed or checked: that work is for callers. (The gate checks the
    // credential against the caller the message names.)
    caller(&state, &headers)?;
    let message = json_body(&headers, body)?;
    // The type first: any other HCP message is a wrong type, whatever its
    // payload.
    if let Some(kind) = message.get("type").and_then(Value::as_str)
        && kind != MessageType::TaskSubmit.as_str()
    {
        return Err(ApiError::bad_request(
            "wrong_message_type",
            format!("POST /v1/tasks takes task_submit, not {kind:?}"),
        ));
    }
    // Parsed once, here: the engine takes the typed message.
    let submission = match TaskMessage::parse(message) {
        Ok(message) => {
            let host = state.host.clone();
            tokio::task::spawn_blocking(move || {
                let auth = if in_clear {
                    Auth::BearerInClear(&token)
                } else {
                    Auth::Bearer(&token)
                };
                host.submit_task(message, auth)
            })
            .await
            .map_err(|e| anyhow::anyhow!("gate task: {e}"))??
        }
        Err(NotATask::Invalid(p)) => {
            return Err(ApiError::invalid("not a valid HCP message", &p));
        }
        Err(not) => Submission::refused(not.refusal()),
    };
    if let AnswerKind::Rejected(reason) = submission.kind
        && let Some(error) = ApiError::rejected(
            reason,
            submission
                .answer
                .rejected_payload()
                .map_or("not authenticated", |r| r.reason_message.as_str()),
        )
    {
        return Err(error);
    }
    if submission.runnable
        && let Some(id) = &submission.task_id
    {
        spawn_run(&state, id.clone());
    }
    let status = match submission.kind {
        AnswerKind::Rejected(reason) => super::error::rejection_status(reason),
        kind if kind.is_final() => StatusCode::OK,
        _ => StatusCode::ACCEPTED,
    };
    let mut response = (status, Json(submission.answer)).into_response();
    if let Some(after) = submission.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, after.as_secs().max(1).into());
    }
    // The body is the HCP message as the seed defines it; where to follow
    // the task travels in headers.
    if let Some(id) = &submission.task_id {
        let h = response.headers_mut();
        if let Ok(v) = format!("/v1/tasks/{id}").parse() {
            h.insert(header::LOCATION, v);
        }
        if let Ok(v) = id.parse() {
            h.insert("x-hcp-task-id", v);
        }
        if submission.duplicate {
            h.insert(
                "x-hcp-duplicate",
                axum::http::HeaderValue::from_static("true"),
            );
        }
    }
    Ok(response)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    state: Option<String>,
    limit: Option<usize>,
}

async fn list_tasks(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let who = caller(&state, &headers)?;
    let Query(q) = query.map_err(|e| ApiError::bad_request("invalid_query", e.body_text()))?;
    let wanted = match q.state.as_deref() {
        None => None,
        Some(s) => Some(
            crate::store::TaskState::parse_name(s)
                .map_err(|e| ApiError::bad_request("invalid_query", e.to_string()))?,
        ),
    };
    let limit = q.limit.unwrap_or(100).min(1000);
    // A caller's own tasks, chosen by the query (however many other
    // callers' tasks are newer); an operator's, everybody's.
    let of = (!who.is_operator()).then_some(who.id.as_str());
    let tasks: Vec<Value> = state
        .host
        .store
        .tasks_of(of, wanted, limit)?
        .into_iter()
        .map(|t| t.summary())
        .collect();
    Ok(Json(json!({"tasks": tasks})))
}

fn status_message(state: TaskState) -> &'static str {
    match state {
        TaskState::Received => "received",
        TaskState::PendingApproval => "waiting for an operator's approval",
        TaskState::Queued => "admitted; waiting to run",
        TaskState::Running => "running",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Rejected => "rejected",
    }
}

async fn status(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathArgs(id): PathArgs<String>,
) -> Result<Json<Answer>, ApiError> {
    let who = caller(&state, &headers)?;
    let t = visible_status(&state, &who, &id)?;
    Ok(Json(job_status_of(&t, status_message(t.state))))
}

async fn result(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathArgs(id): PathArgs<String>,
) -> Result<Response, ApiError> {
    let who = caller(&state, &headers)?;
    let t = visible_status(&state, &who, &id)?;
    if let Some(answer) = t.result.as_ref().or_else(|| {
        (t.state == TaskState::Rejected)
            .then_some(t.answer.as_ref())
            .flatten()
    }) {
        return Ok((StatusCode::OK, Json(answer)).into_response());
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(job_status_of(&t, status_message(t.state))),
    )
        .into_response())
}

async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathArgs(id): PathArgs<String>,
) -> Result<Sse<impl futures_core::Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let who = caller(&state, &headers)?;
    let store = state.host.store.clone();
    // Subscribed before the task is read: a change made between the two
    // still wakes the stream, which then finds it by the task's stamp.
    let mut changes = store.task_changes();
    changes.borrow_and_update();
    // The task as the caller may see it is its first status: not read again.
    let mut first = Some(visible_status(&state, &who, &id)?);
    let held = state
        .open_stream(who.id.as_str())
        .map_err(|limit| match limit {
            crate::state::StreamLimit::Caller(n) => ApiError::too_many(format!(
                "{} has {n} event streams open, the most one caller may; close one first",
                who.id.as_str()
            )),
            crate::state::StreamLimit::Server(n) => ApiError::unavailable(format!(
                "the server has {n} event streams open, its most; try again later"
            )),
        })?;
    let stream = async_stream::stream! {
        // The stream's place, given back when it ends or is dropped.
        let _held = held;
        let mut last: Option<(TaskState, String)> = None;
        loop {
            let read = match first.take() {
                Some(task) => Some(task),
                None => {
                    // This task's final status, when settling it was the
                    // last change: as written, not read back (nothing
                    // changes a task after its final state).
                    let settled = changes
                        .borrow_and_update()
                        .settled
                        .clone()
                        .filter(|s| s.task_id == id);
                    // Any task's change wakes the stream: an event only
                    // when this task's own state or time moved. Its status
                    // alone is read, its answers only once it is final.
                    let status = match settled {
                        Some(s) => Arc::unwrap_or_clone(s),
                        None => match store.task_status(&id) {
                            Ok(Some(t)) => t,
                            _ => break,
                        },
                    };
                    let stamp = (status.state, status.updated_at.clone());
                    (last.as_ref() != Some(&stamp)).then_some(status)
                }
            };
            if let Some(task) = read {
                last = Some((task.state, task.updated_at.clone()));
                let status = job_status_of(&task, status_message(task.state));
                yield Ok(Event::default().event("status").data(status.to_string()));
                if task.state.is_final() {
                    if let Some(answer) = task.final_answer() {
                        yield Ok(Event::default().event("result").data(answer.to_string()));
                    }
                    break;
                }
            }
            // Woken by this process's changes; the timeout catches changes
            // made by another process (the command line) on the same data.
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

async fn capabilities(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let who = caller(&state, &headers)?;
    let mut out: Vec<Value> = Vec::new();
    let installed = state.host.store.installed()?;
    let mut names: Vec<&str> = installed.iter().map(|i| i.name.as_str()).collect();
    names.dedup();
    for name in names {
        if !who.is_operator() && !who.lists(name) {
            continue;
        }
        let versions: Vec<&crate::store::Installed> =
            installed.iter().filter(|i| i.name == name).collect();
        let Some(latest) = versions.last() else {
            continue;
        };
        let installed_versions: Vec<String> =
            versions.iter().map(|i| i.version.to_string()).collect();
        // One damaged install does not hide the others: it is listed as
        // unavailable, saying why.
        match state.host.manifest(latest) {
            Ok(manifest) => out.push(json!({
                "capability": manifest.doc.capability,
                "installed_versions": installed_versions,
            })),
            Err(e) => {
                tracing::warn!("{}: cannot be listed: {e:#}", latest.id());
                out.push(json!({
                    "capability": {"name": name},
                    "installed_versions": installed_versions,
                    "unavailable": format!(
                        "the installed files of {} cannot be loaded (the host's log says why)",
                        latest.id()
                    ),
                }));
            }
        }
    }
    Ok(Json(json!({"capabilities": out})))
}

async fn artifact(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathArgs((session, name)): PathArgs<(String, String)>,
) -> Result<Response, ApiError> {
    let who = caller(&state, &headers)?;
    let uri = format!("hcp://{session}/artifacts/{name}");
    // The session's task, by its index: one row, whatever the store holds.
    let owner = state.host.store.task_of_session(&session)?;
    let allowed = owner.is_some_and(|t| who.is_operator() || t.caller_id == who.id.as_str());
    if !allowed {
        return Err(ApiError::not_found(format!("no artifact {uri}")));
    }
    // Not found is a 404; a store that fails to read what it holds (its
    // content missing or damaged) is the host's fault.
    let (stored, bytes, class) = match state.host.store.artifact(&uri) {
        Ok(found) => found,
        Err(e) if e.is::<crate::store::NoSuchArtifact>() => {
            return Err(ApiError::not_found(format!("no artifact {uri}")));
        }
        Err(e) => return Err(e.into()),
    };
    if class >= hcp_contracts::DataClass::T2 {
        state
            .host
            .store
            .log_artifact_access(&uri, who.id.as_str(), "GET /v1/artifacts")?;
    }
    let mut response = bytes.into_response();
    let h = response.headers_mut();
    if let Ok(v) = stored.mime_type.parse() {
        h.insert(header::CONTENT_TYPE, v);
    }
    // The content is the capability's, its type too (`text/html`, an SVG
    // with a script): a download, never a page of this origin, should a
    // browser ever be sent to it.
    h.insert(
        header::CONTENT_DISPOSITION,
        header::HeaderValue::from_static("attachment"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    if let Ok(v) = stored.checksum.parse() {
        h.insert("x-hcp-checksum", v);
    }
    Ok(response)
}

async fn whoami(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let who = caller(&state, &headers)?;
    Ok(Json(json!({
        "caller_id": who.id.as_str(),
        "kind": who.kind.as_str(),
        "max_risk_level": who.max_risk_level,
        "max_data_classification": who.max_data_classification,
    })))
}

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("../../../docs/openapi.json"),
    )
        .into_response()
}
