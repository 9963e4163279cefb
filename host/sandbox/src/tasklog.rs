//! The task log: `hcp:capability/log` lines, guest stdout and stderr, and the
//! host's own notes (denials), all within the manifest's `limits.log_bytes`.
//!
//! Past the bound, lines are dropped and counted, never buffered: a guest that
//! floods its output costs the host nothing but a counter.
//!
//! A kept line counts its text as kept (control characters escaped) plus
//! [`LINE_BYTES`], and each of its fields its key and value plus
//! [`FIELD_BYTES`]: empty lines, and lines of empty fields, are not free
//! (each is a host allocation; they were kept without end).

use bytes::Bytes;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Where a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSource {
    /// `hcp:capability/log`.
    Log,
    /// Guest stdout.
    Stdout,
    /// Guest stderr.
    Stderr,
    /// The host (denials, limits, notes).
    Host,
}

/// Severity, as `hcp:capability/log` defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Trace.
    Trace,
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Warn.
    Warn,
    /// Error.
    Error,
}

/// One line of the task log.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogEntry {
    /// Milliseconds since the task started.
    pub at_ms: u64,
    /// Origin.
    pub source: LogSource,
    /// Severity.
    pub level: LogLevel,
    /// The text, control characters escaped.
    pub message: String,
    /// Key/value fields, escaped likewise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<(String, String)>,
}

#[derive(Debug)]
struct Inner {
    started: Instant,
    limit: u64,
    used: u64,
    dropped_bytes: u64,
    dropped_lines: u64,
    entries: Vec<LogEntry>,
    partial_stdout: Vec<u8>,
    partial_stderr: Vec<u8>,
}

/// A bounded, shared task log. Cloning shares it.
#[derive(Debug, Clone)]
pub struct TaskLog(Arc<Mutex<Inner>>);

/// Longest partial stdout/stderr line kept before it is cut into an entry.
const MAX_PARTIAL_LINE: usize = 4096;

/// What a kept line counts against the bound beside its text.
pub const LINE_BYTES: u64 = 8;

/// What each field of a kept line counts beside its key and value.
pub const FIELD_BYTES: u64 = 8;

/// The most one stdout or stderr write may carry (what `check-write`
/// permits): a larger write is the guest ignoring its permit, a trap, as in
/// wasmtime-wasi's own streams.
const STREAM_PERMIT: usize = 64 * 1024;

impl TaskLog {
    /// A log that keeps at most `limit` bytes of messages and fields.
    pub fn new(limit: u64) -> Self {
        Self(Arc::new(Mutex::new(Inner {
            started: Instant::now(),
            limit,
            used: 0,
            dropped_bytes: 0,
            dropped_lines: 0,
            entries: Vec::new(),
            partial_stdout: Vec::new(),
            partial_stderr: Vec::new(),
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned log still holds valid lines; keep using it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a line; drops it (counting) past the bound.
    pub fn push(
        &self,
        source: LogSource,
        level: LogLevel,
        message: &str,
        fields: &[(String, String)],
    ) {
        let mut inner = self.lock();
        inner.push(source, level, message, fields);
    }

    /// A host note (always `warn`): denials and limits.
    pub fn host_note(&self, message: &str) {
        self.push(LogSource::Host, LogLevel::Warn, message, &[]);
    }

    /// Splits what the guest wrote to stdout or stderr into lines, in one
    /// pass over it (the partial line of the last write first).
    fn write_stream(&self, source: LogSource, bytes: &[u8]) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        // Past the bound nothing is buffered at all.
        if inner.used >= inner.limit {
            inner.dropped_bytes += bytes.len() as u64;
            return;
        }
        let level = if source == LogSource::Stderr {
            LogLevel::Warn
        } else {
            LogLevel::Info
        };
        let mut partial = std::mem::take(match source {
            LogSource::Stderr => &mut inner.partial_stderr,
            _ => &mut inner.partial_stdout,
        });
        let mut rest = bytes;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let line = if partial.is_empty() {
                &rest[..pos]
            } else {
                partial.extend_from_slice(&rest[..pos]);
                &partial[..]
            };
            inner.push(source, level, &String::from_utf8_lossy(line), &[]);
            partial.clear();
            rest = &rest[pos + 1..];
        }
        partial.extend_from_slice(rest);
        if partial.len() > MAX_PARTIAL_LINE {
            inner.push(source, level, &String::from_utf8_lossy(&partial), &[]);
            partial.clear();
        }
        match source {
            LogSource::Stderr => inner.partial_stderr = partial,
            _ => inner.partial_stdout = partial,
        }
    }

    /// Ends the log: flushes partial lines and notes what was dropped.
    pub fn finish(&self) -> LogSummary {
        let mut inner = self.lock();
        for source in [LogSource::Stdout, LogSource::Stderr] {
            let partial = match source {
                LogSource::Stderr => std::mem::take(&mut inner.partial_stderr),
                _ => std::mem::take(&mut inner.partial_stdout),
            };
            if !partial.is_empty() {
                let text = String::from_utf8_lossy(&partial).into_owned();
                inner.push(source, LogLevel::Info, &text, &[]);
            }
        }
        LogSummary {
            entries: inner.entries.clone(),
            dropped_bytes: inner.dropped_bytes,
            dropped_lines: inner.dropped_lines,
            limit: inner.limit,
        }
    }

    /// A stream for guest stdout.
    pub fn stdout(&self) -> TaskLogStream {
        TaskLogStream {
            log: self.clone(),
            source: LogSource::Stdout,
        }
    }

    /// A stream for guest stderr.
    pub fn stderr(&self) -> TaskLogStream {
        TaskLogStream {
            log: self.clone(),
            source: LogSource::Stderr,
        }
    }
}

impl Inner {
    fn drop_line(&mut self, text: u64) {
        self.dropped_bytes += text;
        self.dropped_lines += 1;
    }

    fn push(
        &mut self,
        source: LogSource,
        level: LogLevel,
        message: &str,
        fields: &[(String, String)],
    ) {
        let text = message.len() as u64
            + fields
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>();
        let size = |text: u64| LINE_BYTES + text + FIELD_BYTES * fields.len() as u64;
        // What escaping keeps is never shorter: a line too large as written
        // is dropped before it is escaped.
        if self.used.saturating_add(size(text)) > self.limit {
            self.drop_line(text);
            return;
        }
        let message = escape_controls(message);
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| (escape_controls(k), escape_controls(v)))
            .collect();
        let kept = message.len() as u64
            + fields
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>();
        if self.used + size(kept) > self.limit {
            self.drop_line(text);
            return;
        }
        self.used += size(kept);
        let at_ms = self.started.elapsed().as_millis() as u64;
        self.entries.push(LogEntry {
            at_ms,
            source,
            level,
            message,
            fields,
        });
    }
}

/// What the log held when the task ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LogSummary {
    /// Kept lines.
    pub entries: Vec<LogEntry>,
    /// Bytes dropped past the bound.
    pub dropped_bytes: u64,
    /// Lines dropped past the bound.
    pub dropped_lines: u64,
    /// The bound.
    pub limit: u64,
}

/// Escapes control characters (newlines, escape sequences, NUL) so one log
/// line can neither forge another nor drive a terminal.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Guest stdout or stderr, written into the task log.
#[derive(Debug, Clone)]
pub struct TaskLogStream {
    log: TaskLog,
    source: LogSource,
}

impl IsTerminal for TaskLogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TaskLogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for TaskLogStream {
    async fn ready(&mut self) {}
}

impl OutputStream for TaskLogStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if bytes.len() > STREAM_PERMIT {
            return Err(wasmtime_wasi::p2::StreamError::Trap(wasmtime::Error::msg(
                format!(
                    "a write of {} bytes to {} exceeds the {STREAM_PERMIT} bytes `check-write` permits",
                    bytes.len(),
                    if self.source == LogSource::Stderr {
                        "stderr"
                    } else {
                        "stdout"
                    },
                ),
            )));
        }
        self.log.write_stream(self.source, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(STREAM_PERMIT)
    }
}

impl tokio::io::AsyncWrite for TaskLogStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let taken = &buf[..buf.len().min(STREAM_PERMIT)];
        self.log.write_stream(self.source, taken);
        std::task::Poll::Ready(Ok(taken.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_past_the_bound_are_counted_not_kept() {
        // 13 and 13 bytes kept (text and `LINE_BYTES`); 14 more would not fit.
        let log = TaskLog::new(26);
        log.push(LogSource::Log, LogLevel::Info, "12345", &[]);
        log.push(LogSource::Log, LogLevel::Info, "123456", &[]);
        log.push(LogSource::Log, LogLevel::Info, "12345", &[]);
        let s = log.finish();
        assert_eq!(s.entries.len(), 2);
        assert_eq!(s.dropped_lines, 1);
        assert_eq!(s.dropped_bytes, 6);
    }

    #[test]
    fn stdout_is_split_into_lines_and_controls_escaped() {
        let log = TaskLog::new(1000);
        log.write_stream(LogSource::Stdout, b"one\ntw");
        log.write_stream(LogSource::Stdout, b"o\x1b[31m\nthree");
        let s = log.finish();
        let lines: Vec<&str> = s.entries.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(lines, ["one", "two\\u{1b}[31m", "three"]);
    }

    /// Empty lines, and lines of empty fields, count against the bound: they
    /// were kept without end (each a host allocation).
    #[test]
    fn empty_lines_and_fields_count_against_the_bound() {
        let log = TaskLog::new(4096);
        let empty = vec![(String::new(), String::new()); 100];
        for _ in 0..10_000 {
            log.push(LogSource::Log, LogLevel::Info, "", &empty);
            log.push(LogSource::Log, LogLevel::Info, "", &[]);
        }
        let s = log.finish();
        let fields: usize = s.entries.iter().map(|e| e.fields.len()).sum();
        assert!(
            s.entries.len() <= 4096 / 8,
            "{} lines kept",
            s.entries.len()
        );
        assert!(fields <= 4096 / 8, "{fields} fields kept");
        assert_eq!(s.dropped_lines as usize, 20_000 - s.entries.len());
    }

    /// What escaping makes of a line is what counts: control characters
    /// grow up to six times once escaped.
    #[test]
    fn a_line_counts_as_kept_escaped() {
        let log = TaskLog::new(1000);
        for _ in 0..10 {
            log.push(LogSource::Log, LogLevel::Info, &"\x01".repeat(100), &[]);
        }
        let s = log.finish();
        let kept: usize = s.entries.iter().map(|e| e.message.len()).sum();
        assert!(kept <= 1000, "{kept} bytes kept");
        assert_eq!(s.entries.len(), 1);
    }

    /// A stream of empty lines is split in one pass (it was cut one line at
    /// a time from the front of the buffer: quadratic) and bounded.
    #[test]
    fn a_write_of_many_lines_is_split_in_one_pass_and_bounded() {
        let log = TaskLog::new(4096);
        let mut stream = log.stdout();
        for _ in 0..16 {
            stream
                .write(Bytes::from(vec![b'\n'; STREAM_PERMIT]))
                .expect("within the permit");
        }
        let s = log.finish();
        assert!(
            s.entries.len() <= 4096 / 8,
            "{} lines kept",
            s.entries.len()
        );
        // Past its permit, a write is refused.
        assert!(
            stream
                .write(Bytes::from(vec![b'x'; STREAM_PERMIT + 1]))
                .is_err()
        );
    }

    #[test]
    fn a_flood_is_not_buffered() {
        let log = TaskLog::new(100);
        for _ in 0..10_000 {
            log.write_stream(LogSource::Stdout, &[b'x'; 1000]);
        }
        let s = log.finish();
        assert!(s.dropped_bytes >= 9_000_000);
        assert!(s.entries.iter().map(|e| e.message.len()).sum::<usize>() <= 100);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Escaped text holds no control character: no line can be forged.
        #[test]
        fn escaped_text_has_no_controls(s in "\\PC{0,40}[\\x00-\\x1f\\x7f]{0,5}\\PC{0,10}") {
            prop_assert!(!escape_controls(&s).chars().any(char::is_control));
        }
    }
}
