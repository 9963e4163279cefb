//! How a task ended ([`RunResult`]): what `run` returned, bounded before
//! it is parsed or kept ([`returned`]), or why the guest stopped: a trap,
//! a limit, its deadline, the PEP ([`trapped`]), with a host fault's
//! cause on one bounded line ([`cause`]).

use crate::bindings::hcp::capability::types as wit;
use crate::limits::TaskLimiter;
use hcp_contracts::message::ErrorCode;
use serde_json::Value;
use std::time::Duration;

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunResult {
    /// `run` returned `ok` with outputs that parse as a JSON object within
    /// `limits.output_bytes`. Schemas are the task engine's to check.
    Completed {
        /// The outputs.
        outputs: Value,
        /// Warnings the capability reported.
        warnings: Vec<String>,
    },
    /// `run` returned `err`, trapped, ran out of time or resources.
    Failed(RunFailure),
}

/// A failed task, ready for `task_failed`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFailure {
    /// Standard error code.
    pub code: ErrorCode,
    /// Explanation.
    pub message: String,
    /// Phase that failed.
    pub phase: Option<String>,
    /// Step that failed.
    pub step: Option<u64>,
    /// Whether a resubmission may succeed.
    pub recoverable: bool,
    /// Partial outputs (a JSON object).
    pub partial_outputs: Option<Value>,
}

impl RunFailure {
    /// A failure with a code and a message only.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            phase: None,
            step: None,
            recoverable: false,
            partial_outputs: None,
        }
    }
}

/// The longest failure message a capability's failure keeps; past it the
/// message is cut, saying so.
const MAX_FAILURE_MESSAGE: usize = 4096;

/// The longest phase name a capability's failure keeps.
const MAX_PHASE: usize = 256;

/// What each warning counts against `limits.output_bytes` beside its text.
const WARNING_BYTES: u64 = 8;

/// `text` cut to at most `max` bytes (on a character boundary), saying so.
fn cut(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let at = text.floor_char_boundary(max);
    format!("{}… (cut at {at} of {} bytes)", &text[..at], text.len())
}

/// Turns `run`'s return value into a [`RunResult`]. Everything the
/// capability returns is bounded before it is parsed or kept: outputs and
/// warnings together by `limits.output_bytes`, a failure's partial outputs
/// by the same limit (dropped past it, saying so), its message and phase
/// by fixed lengths. They go into the task's record, its answer and its
/// event stream; unbounded, one return of a guest's whole memory was
/// copied, parsed (a JSON value per two bytes) and stored several times.
pub(crate) fn returned(result: Result<wit::Outcome, wit::Failure>, output_limit: u64) -> RunResult {
    match result {
        Ok(outcome) => {
            let warnings: u64 = outcome
                .warnings
                .iter()
                .map(|w| w.len() as u64 + WARNING_BYTES)
                .sum();
            let outputs = outcome.outputs.len() as u64;
            if outputs.saturating_add(warnings) > output_limit {
                let message = if warnings == 0 {
                    format!(
                        "outputs are {outputs} bytes, over limits.output_bytes ({output_limit})"
                    )
                } else {
                    format!(
                        "outputs ({outputs} bytes) and {} warnings ({warnings} bytes) are over limits.output_bytes ({output_limit})",
                        outcome.warnings.len()
                    )
                };
                return RunResult::Failed(RunFailure::new(ErrorCode::ExecutionError, message));
            }
            match serde_json::from_str::<Value>(&outcome.outputs) {
                Ok(outputs @ Value::Object(_)) => RunResult::Completed {
                    outputs,
                    warnings: outcome.warnings,
                },
                Ok(_) => RunResult::Failed(RunFailure::new(
                    ErrorCode::InternalError,
                    "the capability returned outputs that are not a JSON object",
                )),
                Err(e) => RunResult::Failed(RunFailure::new(
                    ErrorCode::InternalError,
                    format!("the capability returned outputs that are not JSON: {e}"),
                )),
            }
        }
        Err(f) => {
            let mut message = cut(f.message, MAX_FAILURE_MESSAGE);
            let partial_outputs = match f.partial_outputs {
                Some(p) if p.len() as u64 > output_limit => {
                    message.push_str(&format!(
                        " (partial outputs of {} bytes dropped: over limits.output_bytes ({output_limit}))",
                        p.len()
                    ));
                    None
                }
                p => p
                    .and_then(|p| serde_json::from_str::<Value>(&p).ok())
                    .filter(Value::is_object),
            };
            let (phase, step, recoverable) = match f.details {
                Some(d) => (
                    d.phase.map(|p| cut(p, MAX_PHASE)),
                    d.step.map(u64::from),
                    d.recoverable,
                ),
                None => (None, None, false),
            };
            RunResult::Failed(RunFailure {
                code: match f.code {
                    wit::ErrorCode::ExecutionError => ErrorCode::ExecutionError,
                    wit::ErrorCode::Timeout => ErrorCode::Timeout,
                    wit::ErrorCode::SafetyViolation => ErrorCode::SafetyViolation,
                    wit::ErrorCode::ResourceUnavailable => ErrorCode::ResourceUnavailable,
                    wit::ErrorCode::InternalError => ErrorCode::InternalError,
                    wit::ErrorCode::InputError => ErrorCode::InputError,
                },
                message,
                phase,
                step,
                recoverable,
                partial_outputs,
            })
        }
    }
}

/// The PEP stopped the guest (see `Governor::stop_reason`).
#[derive(Debug)]
pub(crate) struct Stopped(pub(crate) String);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Stopped {}

/// Whether `error` is a trap of the guest's own code (a wasm trap, or the
/// PEP stopping it at an epoch tick) rather than a fault of the host.
pub(crate) fn is_guest_trap(error: &wasmtime::Error) -> bool {
    error.downcast_ref::<wasmtime::Trap>().is_some() || error.downcast_ref::<Stopped>().is_some()
}

/// Classifies a trap or host fault: the failure the task reports.
pub(crate) fn trapped(
    error: &wasmtime::Error,
    limiter: &TaskLimiter,
    deadline: Duration,
    max_stack: usize,
) -> RunFailure {
    use wasmtime::Trap;
    if let Some(Stopped(why)) = error.downcast_ref::<Stopped>() {
        return RunFailure::new(ErrorCode::SafetyViolation, why.clone());
    }
    if matches!(
        error.downcast_ref::<wasmtime::component::ResourceTableError>(),
        Some(wasmtime::component::ResourceTableError::Full)
    ) {
        return RunFailure::new(
            ErrorCode::ExecutionError,
            format!(
                "resource limit: the task holds {} resources (descriptors, sockets, streams) and may open no more",
                crate::limits::MAX_TABLE_ENTRIES
            ),
        );
    }
    if let Some(trap) = error.downcast_ref::<Trap>() {
        match trap {
            Trap::Interrupt => {
                return RunFailure::new(
                    ErrorCode::Timeout,
                    format!("stopped at its deadline of {}", fmt_duration(deadline)),
                );
            }
            Trap::StackOverflow => {
                return RunFailure::new(
                    ErrorCode::ExecutionError,
                    format!(
                        "call stack exhausted (the host allows {} KiB of wasm stack)",
                        max_stack >> 10
                    ),
                );
            }
            _ => {}
        }
    }
    if let Some(total) = limiter.memory_refused {
        return RunFailure::new(
            ErrorCode::ExecutionError,
            format!(
                "memory limit exceeded: growing to {total} bytes was refused (limits.memory_bytes is {})",
                limiter.memory_limit()
            ),
        );
    }
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return RunFailure::new(
            ErrorCode::InternalError,
            format!("the capability exited with status {}", exit.0),
        );
    }
    let detail = match error.downcast_ref::<Trap>() {
        Some(trap) => bounded(&trap.to_string()),
        None => cause(error),
    };
    RunFailure::new(
        ErrorCode::InternalError,
        format!("the capability trapped: {detail}"),
    )
}

/// Longest cause an answer carries, in bytes.
pub(crate) const MAX_CAUSE: usize = 2048;

/// The whole cause of a host fault or trap, on one line and at most
/// [`MAX_CAUSE`] bytes: every message of the error's chain, outermost
/// first, without the wasm backtrace (frame addresses say nothing to a
/// caller).
pub(crate) fn cause(error: &wasmtime::Error) -> String {
    let parts: Vec<String> = error
        .chain()
        .map(ToString::to_string)
        .filter(|m| !m.contains("wasm backtrace:"))
        .collect();
    let text = if parts.is_empty() {
        format!("{error}")
    } else {
        parts.join(": ")
    };
    bounded(&text)
}

/// `text` on one line (control characters as spaces, runs of spaces
/// collapsed), cut at [`MAX_CAUSE`] bytes on a character boundary.
pub(crate) fn bounded(text: &str) -> String {
    let one_line = text
        .split(|c: char| c.is_control() || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if one_line.len() <= MAX_CAUSE {
        return one_line;
    }
    let mut end = MAX_CAUSE;
    while !one_line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut at {MAX_CAUSE} bytes)", &one_line[..end])
}

fn fmt_duration(d: Duration) -> String {
    hcp_contracts::IsoDuration::from_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(run: RunResult) -> RunFailure {
        match run {
            RunResult::Failed(f) => f,
            RunResult::Completed { outputs, .. } => panic!("completed: {outputs}"),
        }
    }

    /// What a capability returns is bounded before it is parsed or kept:
    /// a failure of a whole memory's worth of partial outputs, message and
    /// phase was parsed and kept whole.
    #[test]
    fn a_failure_returned_is_bounded_before_it_is_kept() {
        let mib = 1 << 20;
        let f = failed(returned(
            Err(wit::Failure {
                code: wit::ErrorCode::ExecutionError,
                message: "é".repeat(mib),
                details: Some(wit::FailureDetails {
                    phase: Some("p".repeat(mib)),
                    step: Some(3),
                    recoverable: true,
                }),
                partial_outputs: Some(format!("{{\"a\":[{}0]}}", "0,".repeat(mib))),
            }),
            64 * 1024,
        ));
        assert!(
            f.message.len() < MAX_FAILURE_MESSAGE + 200,
            "{}",
            f.message.len()
        );
        assert!(
            f.message
                .contains(&format!("cut at 4096 of {} bytes", 2 * mib))
        );
        assert!(
            f.message.ends_with(
                "(partial outputs of 2097161 bytes dropped: over limits.output_bytes (65536))"
            ),
            "{}",
            &f.message[f.message.len() - 120..]
        );
        assert_eq!(f.partial_outputs, None);
        assert!(f.phase.as_ref().is_some_and(|p| p.len() < MAX_PHASE + 100));
        assert_eq!((f.step, f.recoverable), (Some(3), true));
        // Within the limit, partial outputs are kept.
        let f = failed(returned(
            Err(wit::Failure {
                code: wit::ErrorCode::Timeout,
                message: "slow".into(),
                details: None,
                partial_outputs: Some(r#"{"done":1}"#.into()),
            }),
            64 * 1024,
        ));
        assert_eq!(f.message, "slow");
        assert_eq!(f.partial_outputs, Some(serde_json::json!({"done": 1})));
    }

    /// Warnings count with the outputs against `limits.output_bytes`: a
    /// million empty warnings were free.
    #[test]
    fn warnings_count_with_the_outputs() {
        let f = failed(returned(
            Ok(wit::Outcome {
                outputs: "{}".into(),
                warnings: vec![String::new(); 1_000_000],
            }),
            1 << 20,
        ));
        assert_eq!(f.code, ErrorCode::ExecutionError);
        assert_eq!(
            f.message,
            "outputs (2 bytes) and 1000000 warnings (8000000 bytes) are over limits.output_bytes (1048576)"
        );
        let ok = returned(
            Ok(wit::Outcome {
                outputs: "{}".into(),
                warnings: vec!["careful".into(); 3],
            }),
            1 << 20,
        );
        assert!(matches!(ok, RunResult::Completed { ref warnings, .. } if warnings.len() == 3));
    }
}
