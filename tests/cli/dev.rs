//! `hcp dev`, the author's loop, end to end: in a project `hcp new` made
//! (Rust and Python), `hcp dev` builds, installs into its own development
//! data directory and runs the example task; an edit to the source is
//! picked up and the changed capability runs; a build error is shown and
//! the loop waits; Ctrl-C stops it with exit 0; `--once` runs one cycle.
//! A host's data directory is refused as a development one. And the
//! progress indicator of long steps: never in a pipe, on a terminal only.
//!
//! The Rust build needs the crates of the plugins workspace's lock file,
//! fetched already (see `author.rs`); the Python build componentize-py
//! 0.25.1 (see `python.rs`).

use super::author::{hcp, ok, without_cargo_env};
use super::{code, stderr, stdout};
use hcp_tests::cache_dir;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a first build (and the component's first compile) may take
/// on a loaded two-core machine.
const FIRST: Duration = Duration::from_secs(1200);
/// How long a rebuild after an edit may take.
const AGAIN: Duration = Duration::from_secs(600);

/// `hcp dev` in `project`, its output read line by line (stdout and
/// stderr, as they come).
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Everything read so far, for failure messages.
    seen: Vec<String>,
}

impl Dev {
    fn start(project: &Path, args: &[&str]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcp"));
        cmd.arg("dev")
            .args(args)
            .current_dir(project)
            .env("HCP_CACHE_DIR", cache_dir())
            .env_remove("HCP_DATA_DIR")
            .env_remove("HCP_POLICIES")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        without_cargo_env(&mut cmd);
        let mut child = cmd.spawn().expect("start hcp dev");
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        for stream in [
            Box::new(out) as Box<dyn std::io::Read + Send>,
            Box::new(err) as Box<dyn std::io::Read + Send>,
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `want`; returns the lines read for
    /// it (that one last). Panics, showing the output, after `within`.
    fn until(&mut self, within: Duration, what: &str, want: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut read = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    read.push(line.clone());
                    if want(&line) {
                        return read;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "hcp dev: no {what} within {within:?}; its output:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Ctrl-C: the loop stops cleanly, exit 0.
    fn interrupt(mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
        self.until(Duration::from_secs(60), "\"stopped\"", |l| l == "stopped");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert_eq!(status.code(), Some(0), "{}", self.seen.join("\n"));
                return;
            }
            assert!(
                Instant::now() < deadline,
                "hcp dev did not exit after Ctrl-C"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        // A test that failed leaves no loop behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A line that ends a cycle with the example task's answer.
fn task_ended(line: &str) -> bool {
    line.starts_with("task ") && (line.contains(": task_") || line.contains("not run"))
}

/// Replaces `from` with `to` in the file at `path` (which must hold it).
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    std::fs::write(path, text.replace(from, to)).expect("write");
}

/// `hcp new NAME [--lang LANG]` in a fresh scratch directory; the project.
fn new_project(root: &Path, name: &str, lang: &str) -> PathBuf {
    let out = hcp(root, &root.join("unused"), &["new", name, "--lang", lang]);
    ok(&out, "hcp new");
    assert!(stdout(&out).contains("hcp dev"), "{}", stdout(&out));
    root.join(name)
}

/// The loop on one project: first run, an edit picked up, a build error
/// survived, then fixed, then Ctrl-C; then `--once`.
fn the_loop(project: &Path, source: &str, broken: &str) {
    let mut dev = Dev::start(project, &[]);
    let first = dev.until(FIRST, "first task", task_ended);
    let first_task = first.last().expect("a line");
    assert!(
        first_task.contains(": task_completed"),
        "{}",
        first.join("\n")
    );
    let watching = dev.until(AGAIN, "watching line", |l| l.starts_with("watching "));
    let report = [first, watching].concat().join("\n");
    assert!(
        report.contains("log      [info] counted file=sample.txt words="),
        "{report}"
    );
    assert!(report.contains("installed "), "{report}");
    assert!(
        report.contains("  receipts ") && report.contains(" allowed, 0 denied), session "),
        "{report}"
    );
    let data_dir = project.join("target/hcp-dev");
    assert!(data_dir.join("hcp-dev.json").is_file());

    // An edit: the log line the capability writes.
    let path = project.join(source);
    edit(&path, "\"counted\"", "\"tallied\"");
    let second = dev.until(AGAIN, "second task", task_ended);
    let second = second.join("\n");
    assert!(second.contains(": task_completed"), "{second}");
    assert!(
        second.contains(&format!("== changed: {source}")),
        "{second}"
    );
    assert!(
        second.contains("(replacing the previous build)"),
        "{second}"
    );
    dev.until(AGAIN, "the changed log line", |l| {
        l.contains("log      [info] tallied file=sample.txt words=")
    });
    dev.until(AGAIN, "watching line", |l| l.starts_with("watching "));

    // A build error: shown, and the loop waits for the next change.
    let good = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, format!("{good}\n{broken}\n")).expect("write");
    dev.until(AGAIN, "the build failure", |l| {
        l.starts_with("build failed (")
    });
    dev.until(AGAIN, "watching line", |l| l.starts_with("watching "));
    std::fs::write(&path, &good).expect("write");
    let fixed = dev.until(AGAIN, "the task after the fix", task_ended);
    assert!(
        fixed.last().is_some_and(|l| l.contains(": task_completed")),
        "{}",
        fixed.join("\n")
    );
    dev.until(AGAIN, "watching line", |l| l.starts_with("watching "));
    dev.interrupt();

    // --once: one cycle, the same version reinstalled, exit 0.
    let mut once = Command::new(env!("CARGO_BIN_EXE_hcp"));
    once.args(["dev", "--once"])
        .current_dir(project)
        .env("HCP_CACHE_DIR", cache_dir())
        .env_remove("HCP_DATA_DIR");
    without_cargo_env(&mut once);
    let out = once.output().expect("hcp dev --once");
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("(replacing the previous build)"), "{text}");
    assert!(text.contains("tallied file=sample.txt"), "{text}");
    assert!(!text.contains("watching"), "{text}");
}

#[test]
fn hcp_dev_rebuilds_and_reruns_a_rust_capability() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let project = new_project(scratch.path(), "word-count", "rust");
    the_loop(&project, "src/lib.rs", "fn broken( {");
}

#[test]
fn hcp_dev_rebuilds_and_reruns_a_python_capability() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let project = new_project(scratch.path(), "word-count", "python");
    the_loop(&project, "app.py", "def broken(:");
}

/// `hcp install` of an example bundle, its component compiled into an
/// empty cache (seconds: a long step), in a fresh data directory; run by
/// `wrapper` when given.
fn install_cold(wrapper: Option<&str>, json: bool) -> std::process::Output {
    let data = tempfile::tempdir().expect("tempdir");
    let cache = tempfile::tempdir().expect("tempdir");
    let bundle = data.path().join("document-analysis.hcpb");
    let hcp = env!("CARGO_BIN_EXE_hcp");
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .current_dir(hcp_tests::REPO_ROOT)
            .env("HCP_DATA_DIR", data.path())
            .env("HCP_CACHE_DIR", cache.path())
            .env("TERM", "xterm")
            .output()
            .expect("run")
    };
    let bundle = bundle.to_str().expect("utf-8");
    let out = run(
        hcp,
        &["bundle", "pack", "plugins/document-analysis", "-o", bundle],
    );
    ok(&out, "hcp bundle pack");
    let mut args = vec!["install", bundle, "--allow-unsigned"];
    if json {
        args.push("--json");
    }
    let out = match wrapper {
        None => run(hcp, &args),
        Some(script) => {
            let command = std::iter::once(hcp)
                .chain(args)
                .collect::<Vec<_>>()
                .join(" ");
            run(script, &["-q", "-e", "-c", &command, "/dev/null"])
        }
    };
    ok(&out, "hcp install");
    out
}

/// The progress indicator of a long step (here an install that compiles
/// its component): drawn on a terminal (a pseudo-terminal `script`
/// gives) and erased when the step ends; nothing of it into a pipe, nor
/// with --json.
#[test]
fn progress_is_shown_on_a_terminal_only() {
    let indicator = |text: &str| text.contains("checking and compiling ") || text.contains('\r');
    let piped = install_cold(None, false);
    assert!(
        !indicator(&stderr(&piped)) && !indicator(&stdout(&piped)),
        "an indicator in a pipe: {:?}",
        stderr(&piped)
    );
    // `script` gives the command a terminal and copies it to stdout.
    let shown = install_cold(Some("script"), false);
    let screen = stdout(&shown);
    assert!(
        screen.contains(" checking and compiling ") && screen.contains("\r\x1b[2K"),
        "no indicator on a terminal: {screen:?}"
    );
    let json = install_cold(Some("script"), true);
    assert!(
        !stdout(&json).contains("checking and compiling"),
        "an indicator with --json: {:?}",
        stdout(&json)
    );
}

/// `--once` exits 1 when the build fails, and says why.
#[test]
fn hcp_dev_once_exits_1_on_a_build_error() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let project = new_project(scratch.path(), "broken", "python");
    std::fs::write(project.join("app.py"), "def broken(:\n").expect("write");
    let mut once = Command::new(env!("CARGO_BIN_EXE_hcp"));
    once.args(["dev", "--once"])
        .current_dir(&project)
        .env("HCP_CACHE_DIR", cache_dir())
        .env_remove("HCP_DATA_DIR");
    let out = once.output().expect("hcp dev --once");
    assert_eq!(code(&out), 1, "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("build failed (componentize-py: exit status: "),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("installed"), "{}", stdout(&out));
}

/// A host's data directory (one `hcp init` made) is never used, nor
/// marked, as a development data directory: naming it with --data-dir is
/// refused before anything is built.
#[test]
fn hcp_dev_refuses_a_hosts_data_directory() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let host = root.join("host");
    ok(&hcp(root, &host, &["init"]), "hcp init");
    let project = new_project(root, "word-count", "python");
    let before = super::author::tree(&host.join("policies"));
    let out = hcp(
        &project,
        &host,
        &["dev", "--once", "--data-dir", host.to_str().expect("utf-8")],
    );
    assert_eq!(code(&out), 2, "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("is not a development data directory (it has no hcp-dev.json)"),
        "{}",
        stderr(&out)
    );
    assert!(
        !stdout(&out).contains("$ componentize-py"),
        "nothing was built"
    );
    assert!(!host.join("hcp-dev.json").exists());
    assert_eq!(super::author::tree(&host.join("policies")), before);
}

/// The "done when": from an empty directory, as a new author,
/// `hcp init`, `hcp new`, `hcp dev` reach a completed task, one command
/// each (`--once`, so that the third one ends).
#[test]
fn three_commands_from_an_empty_directory_reach_a_completed_task() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let run = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcp"));
        cmd.args(args)
            .current_dir(root)
            .env("HCP_CACHE_DIR", cache_dir())
            .env_remove("HCP_DATA_DIR")
            .env_remove("HCP_POLICIES");
        without_cargo_env(&mut cmd);
        cmd.output().expect("run hcp")
    };
    ok(&run(&["init"]), "hcp init");
    ok(&run(&["new", "word-count", "--lang", "python"]), "hcp new");
    let out = run(&["dev", "--once", "word-count"]);
    ok(&out, "hcp dev --once word-count");
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("task ") && l.contains(": task_completed in ")),
        "{text}"
    );
}
