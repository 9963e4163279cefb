//! What commands print: JSON with `--json`, text for people otherwise; and
//! a standard output closed early (`hcp ... | head -1`) ends the command
//! quietly with exit 0.

use serde_json::Value;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{ErrorKind, Write as _};

/// Writes `value` as pretty JSON and a newline to stdout.
///
/// # Errors
///
/// Stdout cannot be written (a closed pipe: see [`is_broken_pipe`]).
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    // Serialized first, then written: a write error stays an `io::Error`
    // (serde_json's own error hides its kind from the error chain).
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    let mut out = std::io::stdout().lock();
    out.write_all(&text)?;
    out.flush()?;
    Ok(())
}

/// Prints a JSON object for people: one `key  value` line per field, the
/// keys aligned; nested objects indented under their key, lists of scalars
/// joined with commas, lists of objects as `-` items.
pub(crate) fn print_fields(value: &Value) {
    print!("{}", fields(value));
}

/// [`print_fields`]' text.
pub(crate) fn fields(value: &Value) -> String {
    let mut out = String::new();
    write_fields(&mut out, value, 0);
    out
}

fn write_fields(out: &mut String, value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    let Value::Object(map) = value else {
        let _ = writeln!(out, "{pad}{}", scalar(value));
        return;
    };
    let width = map.keys().map(String::len).max().unwrap_or(0);
    for (key, v) in map {
        match v {
            Value::Object(inner) if !inner.is_empty() => {
                let _ = writeln!(out, "{pad}{key}");
                write_fields(out, v, indent + 2);
            }
            Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array()) => {
                let _ = writeln!(out, "{pad}{key}");
                for item in items {
                    if item.is_object() {
                        let _ = writeln!(out, "{pad}  -");
                        write_fields(out, item, indent + 4);
                    } else {
                        let _ = writeln!(out, "{pad}  - {}", scalar(item));
                    }
                }
            }
            _ => {
                let _ = writeln!(out, "{pad}{key:<width$}  {}", scalar(v));
            }
        }
    }
}

/// A value on one line: strings as they are (but for what
/// [`for_terminal`] escapes, and newlines), `-` for null, lists of scalars
/// joined with commas (`none` when empty), anything else as JSON.
fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => escaped(s, true),
        Value::Array(items) if items.is_empty() => "none".to_owned(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Whether `error` comes from writing to a pipe whose reader is gone.
pub(crate) fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == ErrorKind::BrokenPipe)
    })
}

/// Makes `print!` and `eprint!` into a closed pipe end the process quietly
/// with exit 0, as `head` expects of the command feeding it.
///
/// Rust ignores SIGPIPE, so such a write fails with `EPIPE` and the print
/// macros panic with "failed printing to stdout: <the error>". The hook
/// recognises that panic (the error's OS code is the one whose kind is
/// [`ErrorKind::BrokenPipe`]: the message's text may be translated, its
/// code is not) and exits; every other panic goes to the default hook.
pub(crate) fn quiet_broken_pipes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_print_to_closed_pipe(message) {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn is_print_to_closed_pipe(message: &str) -> bool {
    let printing = message.starts_with("failed printing to stdout: ")
        || message.starts_with("failed printing to stderr: ");
    printing
        && (1..256)
            .find(|&code| std::io::Error::from_raw_os_error(code).kind() == ErrorKind::BrokenPipe)
            .is_some_and(|code| message.ends_with(&format!("(os error {code})")))
}

/// `text` safe to print for people on a terminal: every control character
/// but the newline and the tab (escape sequences that move the cursor,
/// erase a line or hide text; a carriage return that writes over a line)
/// and the Unicode marks that reorder what follows them, written as
/// `\u{..}`. What a bundle, an evidence pack, a guest or a caller wrote
/// then cannot forge, reorder or hide a line of a report: a description
/// ending in an escape sequence could print a clean verdict over the real
/// one.
pub(crate) fn for_terminal(text: &str) -> Cow<'_, str> {
    if text.chars().any(|c| unsafe_on_terminal(c, false)) {
        Cow::Owned(escaped(text, false))
    } else {
        Cow::Borrowed(text)
    }
}

fn unsafe_on_terminal(c: char, one_line: bool) -> bool {
    match c {
        '\n' => one_line,
        '\t' => false,
        // Bidirectional marks, embeddings, overrides and isolates.
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
            true
        }
        c => c.is_control(),
    }
}

/// `text` with what is unsafe on a terminal written as `\u{..}` (`\n`
/// for a newline on one line).
fn escaped(text: &str, one_line: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' if one_line => out.push_str("\\n"),
            c if unsafe_on_terminal(c, one_line) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What an escape sequence, a carriage return or a bidirectional
    /// override would do on a terminal is shown instead of done.
    #[test]
    fn what_would_forge_a_line_is_shown_not_done() {
        let forged = "fine\x1b[1A\x1b[2Kverdict: ok\r\u{202e}kcab\x1b[8m\nnext\tline";
        assert_eq!(
            for_terminal(forged),
            "fine\\u{1b}[1A\\u{1b}[2Kverdict: ok\\u{d}\\u{202e}kcab\\u{1b}[8m\nnext\tline"
        );
        assert!(matches!(for_terminal("plain\ntext"), Cow::Borrowed(_)));
        assert_eq!(
            fields(&serde_json::json!({"message": "two\nlines\x1b[31m"})),
            "message  two\\nlines\\u{1b}[31m\n"
        );
    }

    #[test]
    fn fields_align_keys_and_indent_what_is_nested() {
        let text = fields(&json!({
            "task_id": "task-1",
            "risk_level": null,
            "tags": ["a", "b"],
            "none": [],
            "answer": {"type": "task_completed", "n": 2},
            "steps": [{"id": 1}, "x"],
        }));
        assert_eq!(
            text,
            "task_id     task-1\nrisk_level  -\ntags        a, b\nnone        none\n\
             answer\n  type  task_completed\n  n     2\nsteps\n  -\n    id  1\n  - x\n"
        );
    }

    #[test]
    fn only_a_print_into_a_closed_pipe_is_quiet() {
        let epipe = std::io::Error::from(ErrorKind::BrokenPipe);
        let closed = (1..256)
            .map(std::io::Error::from_raw_os_error)
            .find(|e| e.kind() == epipe.kind())
            .expect("the platform has EPIPE");
        assert!(is_print_to_closed_pipe(&format!(
            "failed printing to stdout: {closed}"
        )));
        assert!(is_print_to_closed_pipe(&format!(
            "failed printing to stderr: {closed}"
        )));
        let other = std::io::Error::from_raw_os_error(5);
        assert!(!is_print_to_closed_pipe(&format!(
            "failed printing to stdout: {other}"
        )));
        assert!(!is_print_to_closed_pipe(&format!(
            "index out of bounds: {closed}"
        )));
        let chained = anyhow::Error::from(epipe).context("writing the report");
        assert!(is_broken_pipe(&chained));
        assert!(!is_broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
