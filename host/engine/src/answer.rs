//! The engine's builders of answers, one per kind of answer: a
//! `task_accepted` is built by [`super::session`] as it issues the session,
//! a `task_rejected` by [`Answer::rejected`] of a refusal (its message
//! bounded: [`super::refusal`]), a `job_status` by
//! [`super::job_status_of`], a run's
//! `task_completed` or `task_failed` by [`crate::lifecycle::answer`], and
//! the host's own `task_failed` (a task that fails without a run to report)
//! by [`failure`] and [`stopped`]. All of them are typed
//! ([`hcp_contracts::answer::Answer`]); JSON is made at the edges.

use crate::store::TaskState;
use crate::withhold::Withhold;
use anyhow::Result;
use hcp_contracts::answer::Answer;
use hcp_contracts::message::{ErrorCode, ErrorDetails, TaskFailed};

/// The host's `task_failed` of `session`: `code` and `message`, and
/// `details` when it knows where the task stood.
pub(super) fn failure(
    session: Option<String>,
    code: ErrorCode,
    message: String,
    details: Option<ErrorDetails>,
) -> Answer {
    Answer::failed(
        session,
        TaskFailed {
            error_code: code,
            error_message: message,
            error_details: details,
            partial_outputs: None,
            artifacts: Vec::new(),
            execution_summary: None,
        },
    )
}

/// The `task_failed` of a task the host stopped while it ran
/// (`internal_error`), with its last checkpoint to resume from.
pub(super) fn stopped(session: String, message: String, last_checkpoint: Option<String>) -> Answer {
    failure(
        Some(session),
        ErrorCode::InternalError,
        message,
        Some(ErrorDetails {
            phase: None,
            step: None,
            recoverable: last_checkpoint.is_some(),
            last_checkpoint,
        }),
    )
}

/// The final state a final answer puts its task in.
pub(super) fn final_state(answer: &Answer) -> TaskState {
    match answer {
        Answer::Completed(_) => TaskState::Completed,
        _ => TaskState::Failed,
    }
}

/// `answer` with the values of the environment variables `names` (those
/// the capability was granted: the operator's secrets) withheld from the
/// strings of its payload ([`Withhold::granted_env`]); as it was when
/// none is found.
///
/// # Errors
///
/// A value withheld from a name the payload is read by (a granted value
/// that is part of a field's name): the answer no longer reads as one.
pub(super) fn withhold_granted_env(
    withhold: &Withhold,
    names: &[String],
    answer: Answer,
) -> Result<Answer> {
    // Nothing to look for (no granted variable holds a value long enough
    // to withhold): the answer as it is, without writing it out.
    let long = |name: &String| {
        std::env::var(name).is_ok_and(|v| v.chars().count() >= crate::withhold::MIN_ENV_VALUE_CHARS)
    };
    if !names.iter().any(long) {
        return Ok(answer);
    }
    let mut value = answer.to_value()?;
    let Some(payload) = value.get_mut("payload") else {
        return Ok(answer);
    };
    if !withhold.granted_env(names, payload) {
        return Ok(answer);
    }
    Answer::from_value(value)
        .map_err(|e| anyhow::anyhow!("the answer with a granted environment value withheld: {e}"))
}

/// The operator's secrets the session may read, of every interface
/// (granted, and marked secret by the operator's policy,
/// `hcp_policy::operator`): (interface, name). Their values are withheld
/// from the task's answer.
pub(super) fn operator_secret_names(
    scope: Option<&hcp_policy::pep::Scope>,
) -> Vec<(&'static str, String)> {
    scope.map_or_else(Vec::new, |s| {
        s.operator_secrets()
            .map(|(interface, name)| (interface, name.to_owned()))
            .collect()
    })
}

/// `answer` with the values of `capability`'s operator secrets `names`
/// ([`operator_secret_names`]) withheld from the strings of its payload
/// (by their keyed digest, as [`withhold_granted_env`] does for the
/// environment): the operator's secrets never reach the caller, the
/// database nor a pack in clear. Values shorter than
/// `MIN_ENV_VALUE_CHARS` are not looked for.
///
/// # Errors
///
/// A secret that cannot be opened, or one withheld from a name the
/// payload is read by.
pub(super) fn withhold_operator_secrets(
    store: &crate::store::Store,
    capability: &str,
    names: &[(&'static str, String)],
    answer: Answer,
) -> Result<Answer> {
    let mut values = Vec::new();
    for (interface, name) in names {
        let opened = hcp_store::operator_secrets::open(
            store.dir(),
            store.data_key(),
            interface,
            capability,
            name,
        )?;
        if let Some(v) =
            opened.filter(|v| v.chars().count() >= crate::withhold::MIN_ENV_VALUE_CHARS)
        {
            values.push(v);
        }
    }
    if values.is_empty() {
        return Ok(answer);
    }
    let mut value = answer.to_value()?;
    let Some(payload) = value.get_mut("payload") else {
        return Ok(answer);
    };
    if !store.withhold().values(&values, payload) {
        return Ok(answer);
    }
    Answer::from_value(value)
        .map_err(|e| anyhow::anyhow!("the answer with an operator secret withheld: {e}"))
}
