//! A progress indicator for the long steps of a command: compiling a
//! component the first time it runs (`hcp run`, `hcp submit`, `hcp dev`),
//! `hcp bundle pack`, `hcp bundle sign`, `hcp install`.
//!
//! A spinner on stderr with the step's name and the seconds it has taken,
//! redrawn in place. It is drawn only when stderr is a terminal (never
//! into a pipe, a file or a service's log), not with `--json`, not for
//! `TERM=dumb`, and only once the step has taken [`DELAY`]: a step that
//! ends sooner shows nothing. When the step ends its line is erased, so
//! what the command prints is the same with or without it.
//!
//! Nothing else may write to stderr while a step is shown (its line would
//! be torn): steps that print as they go (a build tool's own output, a
//! task's log) are not wrapped, and the compiling child's announcement of
//! a long compile is left out while the indicator is shown
//! ([`crate::compile_child::indicator_shown`]).

use std::io::{IsTerminal as _, Write as _};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a step runs before the indicator appears.
const DELAY: Duration = Duration::from_millis(300);

/// How often it is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// The spinner's frames.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Whether the indicator is drawn: on a terminal that understands it,
/// unless the command answers in JSON.
fn wanted(stderr_is_terminal: bool, json: bool, term: Option<&str>) -> bool {
    stderr_is_terminal && !json && term != Some("dumb")
}

/// A step being shown; the indicator goes when this is dropped.
#[derive(Debug)]
pub(crate) struct Progress {
    running: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Progress {
    /// Starts showing `label` (a short phrase: "compiling word-count@0.1.0")
    /// if stderr is a terminal and `json` is false; shows nothing otherwise.
    pub(crate) fn start(label: impl Into<String>, json: bool) -> Self {
        let term = std::env::var("TERM").ok();
        if !wanted(std::io::stderr().is_terminal(), json, term.as_deref()) {
            return Self { running: None };
        }
        let label = super::output::for_terminal(&label.into()).into_owned();
        let (stop, stopped) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("hcp-progress".to_owned())
            .spawn(move || spin(&label, &stopped));
        // No thread (the system refused one): no indicator.
        let running = spawned.ok().map(|thread| (stop, thread));
        crate::compile_child::indicator_shown(running.is_some());
        Self { running }
    }

    /// Runs `step` while showing `label`.
    pub(crate) fn during<T>(label: impl Into<String>, json: bool, step: impl FnOnce() -> T) -> T {
        let shown = Self::start(label, json);
        let out = step();
        drop(shown);
        out
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            let _ = stop.send(());
            // The thread ends at once: it waits on the channel.
            let _ = thread.join();
            crate::compile_child::indicator_shown(false);
        }
    }
}

/// Draws the indicator until told to stop (or the sender is gone), then
/// erases its line if it drew one.
fn spin(label: &str, stop: &mpsc::Receiver<()>) {
    let started = Instant::now();
    let mut drawn = false;
    let mut frame = 0usize;
    // Until told to stop, or the sender is gone.
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(TICK) {
        let elapsed = started.elapsed();
        if elapsed < DELAY {
            continue;
        }
        let glyph = FRAMES[frame % FRAMES.len()];
        frame = frame.wrapping_add(1);
        let mut err = std::io::stderr().lock();
        // Erase the line, then draw: a label shorter than the last one
        // leaves nothing behind. A write that fails is not retried.
        let _ = write!(err, "\r\x1b[2K{glyph} {label} ({}s)", elapsed.as_secs());
        let _ = err.flush();
        drawn = true;
    }
    if drawn {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_only_on_a_terminal_and_never_for_json() {
        assert!(wanted(true, false, Some("xterm-256color")));
        assert!(wanted(true, false, None));
        assert!(!wanted(false, false, Some("xterm")));
        assert!(!wanted(true, true, Some("xterm")));
        assert!(!wanted(true, false, Some("dumb")));
    }

    #[test]
    fn a_step_returns_its_value_and_the_indicator_stops() {
        let started = Instant::now();
        let v = Progress::during("a step", false, || 7);
        assert_eq!(v, 7);
        // The drop joined the thread (if any) without waiting a tick.
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
