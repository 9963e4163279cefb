//! The L4 task lifecycle around one run: inputs checked against the
//! declaration, the run's deadline, and the answer (`task_completed` or
//! `task_failed`) with outputs checked against `output_schema` and the
//! caller's `expected_output`, and a measured `execution_summary`.

use hcp_contracts::answer::Answer;
use hcp_contracts::manifest::Manifest;
use hcp_contracts::message::{
    ArtifactRef, CheckedSubmit, ErrorCode, ErrorDetails, ExecutionSummary, TaskCompleted,
    TaskFailed,
};
use hcp_contracts::{IsoDuration, Problem, problem, schema};
use hcp_sandbox::{RunFailure, RunResult, StoredArtifact, TaskRun};
use serde_json::Value;
use std::time::Duration;

/// Checks `inputs` against the capability's `input_schema`.
///
/// # Errors
///
/// The problems, with pointers under `/payload/inputs`.
pub fn check_inputs(manifest: &Manifest, inputs: &Value) -> Result<(), Vec<Problem>> {
    schema::validate_user(&manifest.input_schema, inputs, "/payload/inputs")
}

/// The task's deadline: the caller's `max_duration` when given, never more
/// than the declaration's.
pub fn deadline(manifest: &Manifest, submit: &CheckedSubmit) -> Duration {
    match submit.max_duration {
        Some(d) => d.min(manifest.max_duration),
        None => manifest.max_duration,
    }
}

/// Checks completed outputs against the declaration and the caller's
/// expectation; a mismatch turns the run into a failure.
fn check_outputs(
    manifest: &Manifest,
    submit: &CheckedSubmit,
    outputs: &Value,
) -> Result<(), Box<RunFailure>> {
    if let Err(problems) = schema::validate_user(&manifest.output_schema, outputs, "/outputs") {
        return Err(Box::new(RunFailure::new(
            ErrorCode::InternalError,
            format!(
                "the capability's outputs do not match its output_schema:\n{}",
                problem::list(&problems)
            ),
        )));
    }
    if let Some(expected) = &submit.submit.expected_output {
        let missing: Vec<&str> = expected
            .required_fields
            .iter()
            .filter(|f| outputs.get(f.as_str()).is_none())
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Box::new(RunFailure::new(
                ErrorCode::ExecutionError,
                format!(
                    "outputs lack the required field{} {} (expected_output.required_fields)",
                    if missing.len() == 1 { "" } else { "s" },
                    missing.join(", ")
                ),
            )));
        }
    }
    if let Some(validator) = &submit.expected_schema
        && let Err(problems) = schema::validate_user(validator, outputs, "/outputs")
    {
        return Err(Box::new(RunFailure::new(
            ErrorCode::ExecutionError,
            format!(
                "outputs do not match expected_output.schema:\n{}",
                problem::list(&problems)
            ),
        )));
    }
    Ok(())
}

fn artifact_refs(artifacts: &[StoredArtifact]) -> Vec<ArtifactRef> {
    artifacts
        .iter()
        .map(|a| ArtifactRef {
            name: a.name.clone(),
            mime_type: a.mime_type.clone(),
            uri: a.uri.clone(),
            size_bytes: a.size_bytes,
            checksum: Some(a.checksum.clone()),
        })
        .collect()
}

/// Builds the answer to a finished run: the one builder of a
/// `task_completed`, and of a run's `task_failed` (with what the run
/// measured).
pub fn answer(
    manifest: &Manifest,
    submit: &CheckedSubmit,
    session_id: &str,
    run: &TaskRun,
) -> Answer {
    let mut warnings: Vec<String> = Vec::new();
    if run.log.dropped_lines > 0 || run.log.dropped_bytes > 0 {
        warnings.push(format!(
            "task log truncated at limits.log_bytes ({} bytes): {} bytes dropped",
            run.log.limit, run.log.dropped_bytes
        ));
    }
    let result = match &run.result {
        RunResult::Completed {
            outputs,
            warnings: w,
        } => {
            warnings.extend(w.iter().cloned());
            match check_outputs(manifest, submit, outputs) {
                Ok(()) => Ok(outputs.clone()),
                Err(f) => Err(*f),
            }
        }
        RunResult::Failed(f) => Err(f.clone()),
    };
    let summary = ExecutionSummary {
        duration: Some(IsoDuration::from_duration(run.duration).to_string()),
        steps_executed: Some(run.host_calls),
        checkpoints_created: Some(run.checkpoints.len() as u64),
        risk_events: Some(run.risk_events.clone()),
        warnings: (!warnings.is_empty()).then_some(warnings),
    };
    let session = Some(session_id.to_owned());
    match result {
        Ok(outputs) => Answer::completed(
            session,
            TaskCompleted {
                outputs,
                artifacts: artifact_refs(&run.artifacts),
                execution_summary: Some(summary),
            },
        ),
        Err(f) => Answer::failed(
            session,
            TaskFailed {
                error_code: f.code,
                error_message: f.message.clone(),
                error_details: Some(ErrorDetails {
                    phase: f.phase.clone(),
                    step: f.step,
                    last_checkpoint: run.checkpoints.last().cloned(),
                    recoverable: f.recoverable,
                }),
                partial_outputs: f.partial_outputs.clone(),
                artifacts: artifact_refs(&run.artifacts),
                execution_summary: Some(summary),
            },
        ),
    }
}
