//! `tools/call` as an HCP task, and `resources/read` of its artifacts.
//!
//! A call becomes a `task_submit` ([`task_message`]): the capability is the
//! tool's name, the caller the transport's identity, the inputs the call's
//! arguments; the task's own fields travel in the request's `_meta`
//! (`hcp/intent`, `hcp/constraints`, `hcp/capability_version`,
//! `hcp/message_id`), else the gate's defaults. It enters the engine's one
//! submission path ([`crate::engine::Host::submit_task_carried`]), which
//! records it, decides it and answers it as for any transport; an admitted
//! task runs in the background as an HTTP one does, and the call waits
//! for its final answer (a bounded wait: [`super::DEFAULT_WAIT`]), sending
//! progress notifications while it waits, when the client asked for them.
//!
//! The answer becomes the tool's result ([`result_of`]): a completion is
//! `structuredContent` = the outputs (checked by the engine against the
//! `output_schema`) with a text rendering and its artifacts as resource
//! links; a rejection, a failure, and a task still waiting when the wait
//! ends are `isError` results that say why, with what the answer carries
//! (reason code, assessed risk, the seed's suggestion; error code,
//! message, partial outputs; the task's id and how to follow it).

use super::{Identity, Proof};
use crate::engine::{Answer, AnswerKind, Auth, Carried, NotATask, TaskMessage};
use crate::state::{AppState, spawn_run};
use crate::store::{TaskState, TaskStatus};
use hcp_contracts::message::{Envelope, MessageType};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, MetaObject, ProgressNotificationParam,
    ReadResourceResult, Resource, ResourceContents,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The request `_meta` keys a call may carry for its task.
const META_INTENT: &str = "hcp/intent";
const META_CONSTRAINTS: &str = "hcp/constraints";
const META_VERSION: &str = "hcp/capability_version";
const META_MESSAGE_ID: &str = "hcp/message_id";

/// Largest `hcp/intent` taken (bytes).
const MAX_INTENT: usize = 4096;

/// One `tools/call`, to its result.
pub(super) async fn call(
    state: &AppState,
    who: Identity,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
    wait: Duration,
) -> Result<CallToolResult, McpError> {
    let meta = |key: &str| -> Option<Value> {
        request
            .meta
            .as_ref()
            .and_then(|m| m.get(key))
            .or_else(|| context.meta.get(key))
            .cloned()
    };
    let message = task_message(&who, &request, meta)?;
    let message = match TaskMessage::parse(message) {
        Ok(m) => m,
        // What the call's `_meta` put into the message breaks the schema
        // (an hcp/constraints of the wrong shape, say): the client's error,
        // said where it is.
        Err(NotATask::Invalid(problems) | NotATask::Payload(problems)) => {
            return Err(McpError::invalid_params(
                format!(
                    "the call does not make a valid task_submit:\n{}",
                    hcp_contracts::problem::list(&problems)
                ),
                None,
            ));
        }
        Err(NotATask::WrongType(_)) => {
            return Err(McpError::internal_error("not a task_submit", None));
        }
    };
    let host = state.host.clone();
    let transport = who.transport;
    let submission = tokio::task::spawn_blocking(move || {
        let auth = match &who.proof {
            Proof::Transport(id) => Auth::Transport(id),
            Proof::Bearer {
                token,
                in_clear: true,
            } => Auth::BearerInClear(token),
            Proof::Bearer { token, .. } => Auth::Bearer(token),
        };
        host.submit_task_carried(
            message,
            auth,
            Carried {
                transport: Some(transport),
                ..Carried::default()
            },
        )
    })
    .await
    .map_err(|e| McpError::internal_error(format!("gate task: {e}"), None))?
    .map_err(|e| {
        tracing::error!("MCP tools/call: {e:#}");
        McpError::internal_error("the host could not take the task (its log says why)", None)
    })?;
    let task_id = submission.task_id.clone();
    if matches!(submission.kind, AnswerKind::Rejected(_)) || task_id.is_none() {
        return Ok(result_of(&submission.answer, task_id.as_deref()));
    }
    let Some(task_id) = task_id else {
        return Ok(result_of(&submission.answer, None));
    };
    if submission.runnable {
        spawn_run(state, task_id.clone());
    }
    if submission.kind == AnswerKind::Finished {
        return Ok(result_of(&submission.answer, Some(&task_id)));
    }
    // The client cancels the call, or goes away while it waits (its
    // request's stream closed: this future is dropped): the task's run
    // here is stopped, or, still waiting (for an approval, a slot), the
    // task is withdrawn; either way failed with its receipt.
    let mut cancel = CancelOnDrop {
        state,
        task_id: &task_id,
        transport,
        armed: true,
    };
    let waited = settle(state, &task_id, &context, wait).await;
    cancel.armed = matches!(waited, Ok(Waited::Cancelled));
    drop(cancel);
    match waited? {
        Waited::Final(answer) => Ok(result_of(&answer, Some(&task_id))),
        Waited::Pending(status) => Ok(still_waiting(&status, wait)),
        Waited::Cancelled => Err(McpError::invalid_request(
            format!("the client cancelled the call; task {task_id} was stopped or withdrawn"),
            None,
        )),
    }
}

/// Stops a call's task when the call ends without its answer: cancelled,
/// or dropped with its client's connection.
struct CancelOnDrop<'a> {
    state: &'a AppState,
    task_id: &'a str,
    transport: &'static str,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!(
                "task {}: its MCP call was cancelled; stopping or withdrawing it",
                self.task_id
            );
            self.state.cancel_task(
                self.task_id,
                "the MCP client cancelled its tools/call or closed the connection".to_owned(),
                self.transport,
            );
        }
    }
}

/// The `task_submit` of a call: the envelope and payload as a caller
/// would write them.
fn task_message(
    who: &Identity,
    request: &CallToolRequestParams,
    meta: impl Fn(&str) -> Option<Value>,
) -> Result<Value, McpError> {
    let text = |key: &str| -> Result<Option<String>, McpError> {
        match meta(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(McpError::invalid_params(
                format!("_meta {key} must be a string"),
                None,
            )),
        }
    };
    let intent = match text(META_INTENT)? {
        Some(i) if i.len() > MAX_INTENT => {
            return Err(McpError::invalid_params(
                format!("_meta {META_INTENT} is longer than {MAX_INTENT} bytes"),
                None,
            ));
        }
        Some(i) if !i.trim().is_empty() => i,
        _ => format!("MCP tools/call {}", request.name),
    };
    let mut payload = json!({
        "capability": request.name,
        "caller_id": who.caller.id.as_str(),
        "intent": intent,
        "inputs": Value::Object(request.arguments.clone().unwrap_or_default()),
    });
    if let Some(version) = text(META_VERSION)? {
        payload["capability_version"] = json!(version);
    }
    match meta(META_CONSTRAINTS) {
        None | Some(Value::Null) => {}
        Some(constraints) => payload["constraints"] = constraints,
    }
    let mut envelope = Envelope::new(MessageType::TaskSubmit, None, payload)
        .map_err(|e| McpError::internal_error(format!("task_submit: {e}"), None))?;
    if let Some(id) = text(META_MESSAGE_ID)? {
        envelope.message_id = id;
    }
    serde_json::to_value(&envelope)
        .map_err(|e| McpError::internal_error(format!("task_submit: {e}"), None))
}

/// How a wait for a task's final answer ended.
enum Waited {
    /// Its final answer.
    Final(Box<Answer>),
    /// The wait ran out; the task still waits (its status then).
    Pending(Box<TaskStatus>),
    /// The client cancelled the call.
    Cancelled,
}

/// Waits for `task_id`'s final answer, at most `wait`; sends a progress
/// notification at each change of its state when the call asked for
/// progress (a `progressToken`).
async fn settle(
    state: &AppState,
    task_id: &str,
    context: &RequestContext<RoleServer>,
    wait: Duration,
) -> Result<Waited, McpError> {
    let store = state.host.store.clone();
    let progress = context.meta.get_progress_token();
    let deadline = Instant::now() + wait;
    let mut changes = store.task_changes();
    changes.borrow_and_update();
    let mut last: Option<TaskState> = None;
    let mut step = 0u32;
    loop {
        let status = {
            let (store, id) = (store.clone(), task_id.to_owned());
            tokio::task::spawn_blocking(move || store.task_status(&id))
                .await
                .map_err(|e| McpError::internal_error(format!("task status: {e}"), None))?
                .map_err(|e| {
                    tracing::error!("MCP: task {task_id}: {e:#}");
                    McpError::internal_error("the task's status cannot be read", None)
                })?
                .ok_or_else(|| McpError::internal_error("the task is gone", None))?
        };
        if let Some(answer) = status.final_answer() {
            return Ok(Waited::Final(Box::new(answer.clone())));
        }
        if last != Some(status.state) {
            last = Some(status.state);
            if let Some(token) = &progress {
                step += 1;
                let mut note = ProgressNotificationParam::new(token.clone(), f64::from(step));
                note.message = Some(format!("task {task_id}: {}", state_words(status.state)));
                // A client that went away is seen by the cancellation.
                let _ = context.peer.notify_progress(note).await;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Waited::Pending(Box::new(status)));
        }
        tokio::select! {
            () = context.ct.cancelled() => return Ok(Waited::Cancelled),
            // Woken by this process's changes; the second catches another
            // process's (an operator's `hcp approvals approve`).
            _ = tokio::time::timeout(left.min(Duration::from_secs(1)), changes.changed()) => {}
        }
    }
}

/// What a waiting task waits for, in words.
fn state_words(state: TaskState) -> &'static str {
    match state {
        TaskState::Received => "received",
        TaskState::PendingApproval => "waiting for an operator's approval",
        TaskState::Queued => "admitted; waiting for a session slot or its equipment",
        TaskState::Running => "running",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Rejected => "rejected",
    }
}

/// The `status` of a waiting call's structured result: `pending_approval`
/// while its task waits for an operator, `waiting` otherwise.
fn waiting_status(pending_approval: bool) -> &'static str {
    if pending_approval {
        "pending_approval"
    } else {
        "waiting"
    }
}

/// The result of a call whose task still waits when the wait ends: an
/// error result (it has no outputs) naming the task and how to follow it.
fn still_waiting(status: &TaskStatus, wait: Duration) -> CallToolResult {
    let id = &status.task_id;
    let words = state_words(status.state);
    let text = format!(
        "task {id} is still {words} after {}s. Follow it with GET /v1/tasks/{id} (or its \
         /events) on the host's HTTP API, or `hcp tasks show {id}`; calling the tool again with \
         the same _meta hcp/message_id waits for the same task again.",
        wait.as_secs()
    );
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({
        "status": waiting_status(status.state == TaskState::PendingApproval),
        "task_id": id,
        "state": status.state.as_str(),
        "follow": format!("/v1/tasks/{id}"),
    }));
    result.with_meta(Some(task_meta(Some(id), None)))
}

/// `_meta` of a result: the task and its session.
fn task_meta(task_id: Option<&str>, session_id: Option<&str>) -> MetaObject {
    let mut meta = MetaObject::default();
    if let Some(id) = task_id {
        meta.insert("hcp/task_id".to_owned(), json!(id));
    }
    if let Some(id) = session_id {
        meta.insert("hcp/session_id".to_owned(), json!(id));
    }
    meta
}

/// A tool result of an answer.
pub(super) fn result_of(answer: &Answer, task_id: Option<&str>) -> CallToolResult {
    let meta = Some(task_meta(task_id, answer.session_id()));
    match answer {
        Answer::Completed(m) => {
            let p = &m.payload;
            let mut content = vec![ContentBlock::text(render(&p.outputs))];
            content.extend(p.artifacts.iter().map(artifact_link));
            let mut result = CallToolResult::success(content);
            result.structured_content = Some(p.outputs.clone());
            result.with_meta(meta)
        }
        Answer::Failed(m) => {
            let p = &m.payload;
            let code = name_of(&p.error_code);
            let mut text = format!("the task failed ({code}): {}", p.error_message);
            if let Some(partial) = &p.partial_outputs {
                text.push_str(&format!("\npartial outputs:\n{}", render(partial)));
            }
            let mut content = vec![ContentBlock::text(text)];
            content.extend(p.artifacts.iter().map(artifact_link));
            let mut result = CallToolResult::error(content);
            result.structured_content = Some(json!({
                "status": "failed",
                "error_code": code,
                "error_message": p.error_message,
                "error_details": p.error_details,
                "partial_outputs": p.partial_outputs,
            }));
            result.with_meta(meta)
        }
        Answer::Rejected(m) => {
            let p = &m.payload;
            let code = name_of(&p.reason_code);
            let mut text = format!(
                "the host's gate rejected the task ({code}): {}",
                p.reason_message
            );
            if let Some(level) = p.assessed_risk_level {
                text.push_str(&format!("\nassessed risk: {level}"));
            }
            if let Some(suggestion) = &p.suggestion {
                text.push_str(&format!("\nsuggestion: {suggestion}"));
            }
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content = Some(json!({
                "status": "rejected",
                "reason_code": code,
                "reason_message": p.reason_message,
                "assessed_risk_level": p.assessed_risk_level,
                "suggestion": p.suggestion,
            }));
            result.with_meta(meta)
        }
        // Not final: only a caller of this function that did not wait
        // gets here (the engine answered a duplicate with its status).
        Answer::Accepted(_) | Answer::Waiting(_) => {
            let pending = matches!(
                answer,
                Answer::Waiting(js) if js.status == hcp_contracts::answer::JobState::PendingApproval
            );
            let text = format!(
                "the task was admitted and has no final answer yet{}",
                task_id
                    .map(|t| format!(": follow /v1/tasks/{t}"))
                    .unwrap_or_default()
            );
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content =
                Some(json!({"status": waiting_status(pending), "task_id": task_id}));
            result.with_meta(meta)
        }
    }
}

/// A value's name as its JSON says it (`risk_too_high`, ...).
fn name_of(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "unknown".to_owned(),
    }
}

/// Outputs as text: pretty JSON.
fn render(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// An artifact as a resource link (read with `resources/read`).
fn artifact_link(artifact: &hcp_contracts::message::ArtifactRef) -> ContentBlock {
    let mut resource = Resource::new(artifact.uri.clone(), artifact.name.clone());
    resource.mime_type = Some(artifact.mime_type.clone());
    resource.size = Some(artifact.size_bytes);
    ContentBlock::resource_link(resource)
}

/// `resources/read` of an artifact (`hcp://<session>/artifacts/<name>`),
/// by the caller whose task made it only: anybody else's read is the
/// same "no such resource" as an artifact that does not exist.
pub(super) async fn read_artifact(
    state: &AppState,
    who: &Identity,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let not_found = || McpError::resource_not_found(format!("no resource {uri}"), None);
    let session = uri
        .strip_prefix("hcp://")
        .and_then(|rest| rest.split_once("/artifacts/"))
        .map(|(session, _)| session.to_owned())
        .filter(|s| !s.is_empty() && !s.contains('/'))
        .ok_or_else(not_found)?;
    let host = state.host.clone();
    let (caller, uri_owned) = (who.caller.id.as_str().to_owned(), uri.to_owned());
    let read = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<(String, Vec<u8>)>> {
        let owner = host.store.task_of_session(&session)?;
        if owner.is_none_or(|t| t.caller_id != caller) {
            return Ok(None);
        }
        let (stored, bytes, class) = match host.store.artifact(&uri_owned) {
            Ok(found) => found,
            Err(e) if e.is::<crate::store::NoSuchArtifact>() => return Ok(None),
            Err(e) => return Err(e),
        };
        if class >= hcp_contracts::DataClass::T2 {
            host.store
                .log_artifact_access(&uri_owned, &caller, "MCP resources/read")?;
        }
        Ok(Some((stored.mime_type, bytes)))
    })
    .await
    .map_err(|e| McpError::internal_error(format!("resources/read: {e}"), None))?
    .map_err(|e| {
        tracing::error!("MCP resources/read {uri}: {e:#}");
        McpError::internal_error(
            "the artifact cannot be read (the host's log says why)",
            None,
        )
    })?;
    let (mime, bytes) = read.ok_or_else(not_found)?;
    let contents = match String::from_utf8(bytes) {
        Ok(text) if mime.starts_with("text/") || mime.ends_with("json") => {
            ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: Some(mime),
                text,
                meta: None,
            }
        }
        Ok(text) => blob(uri, mime, text.as_bytes()),
        Err(e) => blob(uri, mime, e.as_bytes()),
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// Binary contents, base64.
fn blob(uri: &str, mime: String, bytes: &[u8]) -> ResourceContents {
    use base64::Engine as _;
    ResourceContents::BlobResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(mime),
        blob: base64::engine::general_purpose::STANDARD.encode(bytes),
        meta: None,
    }
}
