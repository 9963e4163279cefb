//! What `hcp submit` tells on stderr once a task has ended: the session's
//! log lines and its denials, as the receipts record them.
//!
//! Every host call of a session is decided by the PEP and becomes a receipt
//! whose decision input holds the call (`log.write` with its level, message
//! and fields; `fs.open` with its path; ...). The log lines are the
//! session's `log.write` calls (the component's `log`; text the component
//! wrote to stdout or stderr is no host call and is not among them); the
//! denials are its DENY receipts. Long calls are recorded cut to a prefix
//! (`[cut]` marks them). Only reads the database.

use crate::engine::Answer;
use crate::store::Store;
use anyhow::Result;
use hcp_receipts::{Receipt, Verdict};
use serde_json::Value;
use std::fmt::Write as _;

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Line {
    /// A `log.write` call: level, message and `key=value` fields.
    Log(String),
    /// A DENY receipt: call, target, reason, receipt id.
    Deny(String),
}

/// Control characters shown escaped, so a line cannot drive the terminal.
fn safe(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn log_line(call: &Value, cut: bool) -> String {
    let args = &call["args"];
    let level = args["level"].as_str().unwrap_or("?");
    let mut line = format!(
        "[{}] {}",
        safe(level),
        safe(args["message"].as_str().unwrap_or(""))
    );
    for field in args["fields"].as_array().into_iter().flatten() {
        if let [k, v] = field.as_array().map(Vec::as_slice).unwrap_or_default() {
            let _ = write!(
                line,
                " {}={}",
                safe(k.as_str().unwrap_or("")),
                safe(v.as_str().unwrap_or(""))
            );
        }
    }
    if cut {
        line.push_str(" [cut]");
    }
    line
}

fn deny_line(receipt: &Receipt, call: Option<&Value>) -> String {
    let target = call
        .and_then(|c| c["target"].as_str())
        .filter(|t| !t.is_empty())
        .map(|t| format!(" {}", safe(t)))
        .unwrap_or_default();
    format!(
        "{}{target}: {} (receipt {})",
        receipt.call, receipt.reason_code, receipt.receipt_id
    )
}

/// The log lines and denials of `session_id`, in the order they happened.
///
/// # Errors
///
/// The database fails, or a stored receipt does not read back.
pub(super) fn session_lines(store: &Store, session_id: &str) -> Result<Vec<Line>> {
    let mut lines = Vec::new();
    for (receipt, input) in crate::evidence::session_receipts(store, session_id)? {
        let call = input.get("call");
        if receipt.verdict == Verdict::Deny {
            lines.push(Line::Deny(deny_line(&receipt, call)));
        } else if receipt.call == "log.write"
            && let Some(call) = call
        {
            lines.push(Line::Log(log_line(call, input.get("full").is_some())));
        }
    }
    Ok(lines)
}

/// Prints the report of a task that ended with `answer` on stderr.
///
/// # Errors
///
/// As [`session_lines`].
pub(super) fn print(store: &Store, task_id: &str, answer: &Answer) -> Result<()> {
    let Some(session) = answer.session_id() else {
        return Ok(());
    };
    let lines = session_lines(store, session)?;
    let kind = answer.kind_name();
    let logs: Vec<&str> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Log(s) => Some(s.as_str()),
            Line::Deny(_) => None,
        })
        .collect();
    let denials: Vec<&str> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Deny(s) => Some(s.as_str()),
            Line::Log(_) => None,
        })
        .collect();
    let mut out = format!("task {task_id} ended: {kind} (session {session})\n");
    if logs.is_empty() {
        out.push_str("task log: no lines\n");
    } else {
        out.push_str("task log:\n");
        for l in &logs {
            let _ = writeln!(out, "  {l}");
        }
    }
    if denials.is_empty() {
        out.push_str("denials: none\n");
    } else {
        let _ = writeln!(out, "denials ({}):", denials.len());
        for d in &denials {
            let _ = writeln!(out, "  DENY {d}");
        }
    }
    eprint!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn log_lines_show_fields_and_escape_control_characters() {
        let call = json!({"args": {"level": "info", "message": "counted\u{1b}[2J",
                                    "fields": [["file", "a.txt"], ["words", "3"]]},
                          "op": "log.write", "target": ""});
        assert_eq!(
            log_line(&call, false),
            "[info] counted\\u{1b}[2J file=a.txt words=3"
        );
        assert_eq!(log_line(&call, true).rsplit(' ').next(), Some("[cut]"));
    }
}
