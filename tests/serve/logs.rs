//! Issue 45 item 3: what `hcp serve` logs, read from the real process's
//! stderr at the default level. A startup line with the address, data
//! directory, policy set hash and transports; one line per approval
//! decision, policy reload and shutdown step; two lines per task (its
//! submission and its final answer); the operator page's polling at debug,
//! not info; `--log-format json` one object per line with the same fields;
//! colour only on a terminal and never with `NO_COLOR`.

use super::{ALPHA, LOCAL, OPERATOR, Server, example, lab, with_id};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `hcp serve` at the default log level (neither `HCP_LOG` nor
/// `RUST_LOG` set), its stderr into `data/serve.log`.
fn start_quiet(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let log = std::fs::File::create(data.join("serve.log")).expect("log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--shutdown-grace",
            "PT20S",
        ])
        .args(extra)
        .env("HCP_DATA_DIR", data)
        .env("HCP_CACHE_DIR", cache_dir())
        .env_remove("HCP_LOG")
        .env_remove("RUST_LOG")
        .env_remove("HCP_LOG_FORMAT")
        .envs(env.iter().copied())
        .current_dir(REPO_ROOT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn hcp serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("read the listening line");
    let base = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}: {}", read_log(data)))
        .to_owned();
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    Server { child, base, agent }
}

fn read_log(data: &Path) -> String {
    std::fs::read_to_string(data.join("serve.log")).unwrap_or_default()
}

/// SIGTERM, then the whole log once the server exited.
fn stop(mut server: Server, data: &Path) -> String {
    server.signal("-TERM");
    let status = server.wait_exit();
    assert!(status.success(), "{status}: {}", read_log(data));
    read_log(data)
}

/// The policy set in force: the old hash of a reload that changes nothing.
fn policy_hash(server: &Server) -> String {
    let (status, body, _) = server.post("/v1/policy/reload", OPERATOR, &json!({}));
    assert_eq!(status, 200, "{body}");
    body["old_hash"].as_str().expect("old_hash").to_owned()
}

/// A task that waits for an operator (ALPHA's synthesis), its id.
fn pending_task(server: &Server, id: &str) -> String {
    let cvd = with_id(example("cvd-material-synthesis"), id);
    let (status, body, task) = server.post("/v1/tasks", ALPHA, &cvd);
    assert_eq!(status, 202, "{body}");
    task.expect("x-hcp-task-id")
}

/// The operator's page, polling for a while: what its script asks every
/// few seconds, and a caller following its task.
fn poll_like_the_page(server: &Server, task: &str) {
    for _ in 0..5 {
        for path in [
            "/v1/approvals",
            "/v1/tasks?limit=50",
            "/v1/hid",
            "/v1/whoami",
        ] {
            let (status, body) = server.get(path, Some(OPERATOR));
            assert_eq!(status, 200, "{path}: {body}");
        }
        let (status, body) = server.get(&format!("/v1/tasks/{task}"), Some(ALPHA));
        assert_eq!(status, 200, "{body}");
    }
}

#[test]
fn serve_logs_startup_decisions_reloads_and_shutdown_and_not_the_polling() {
    let data = lab();
    let server = start_quiet(data.path(), &[], &[("NO_COLOR", "1")]);
    let hash = policy_hash(&server);

    // A task that runs: its submission and its final answer, two lines.
    let (status, body, done) = server.post(
        "/v1/tasks",
        LOCAL,
        &with_id(example("document-analysis"), "msg-logs-done"),
    );
    assert_eq!(status, 200, "{body}");
    let done = done.expect("x-hcp-task-id");
    let result = server.wait_result(&done, LOCAL);
    assert_eq!(result["type"], "task_completed", "{result}");

    let pending = pending_task(&server, "msg-logs-pending");
    poll_like_the_page(&server, &pending);
    let (status, body, _) = server.post(
        &format!("/v1/approvals/{pending}"),
        OPERATOR,
        &json!({"decision": "reject", "reason": "not today\nINFO forged line"}),
    );
    assert_eq!(status, 200, "{body}");
    let log = stop(server, data.path());

    assert!(!log.contains('\u{1b}'), "colour without a terminal:\n{log}");
    let lines: Vec<&str> = log.lines().collect();
    let line = |needle: &str| {
        lines
            .iter()
            .copied()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{log}"))
    };

    // The startup line: address, data directory, policy set, transports.
    let started = line("started: http://127.0.0.1:");
    for field in [
        format!("data_dir={}", data.path().display()),
        format!("policy_hash={hash}"),
        "transports=http,mcp".to_owned(),
        "addr=127.0.0.1:".to_owned(),
    ] {
        assert!(started.contains(&field), "{field} in {started}");
    }

    // The approval decision: who, which task, what; its reason quoted, so
    // an operator's newline cannot forge a line.
    let decided = line(&format!(
        "task {pending}: rejected by operator operator-lab-01"
    ));
    assert!(
        decided.contains("\"not today\\nINFO forged line\""),
        "{decided}"
    );
    assert!(!log.contains("\nINFO forged line"), "{log}");

    // The reload: who, the old and the new hash.
    let reloaded = line("policy reloaded by operator-lab-01");
    assert!(
        reloaded.contains(&format!("{hash} -> {hash}")),
        "{reloaded}"
    );

    // The shutdown's steps.
    line("shutdown began");
    line("shutdown ended: every task finished");
    line(&format!("store closed: {}", data.path().display()));

    // The polling: not one of its reads at the default level.
    let reads: Vec<&&str> = lines.iter().filter(|l| l.contains("method=GET")).collect();
    assert!(reads.is_empty(), "reads logged at info: {reads:#?}");

    // Per task: the submission and the final answer.
    let of_done = lines.iter().filter(|l| l.contains(&done)).count();
    assert_eq!(of_done, 1, "lines naming {done}:\n{log}");
    let submissions = lines
        .iter()
        .filter(|l| l.contains("method=POST") && l.contains("path=/v1/tasks "))
        .count();
    assert_eq!(submissions, 2, "one line per submission:\n{log}");
}

#[test]
fn json_logs_are_one_object_per_line_with_structured_fields() {
    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), policies.path().join(entry.file_name())).expect("copy");
    }
    let dir = policies.path().to_str().expect("utf-8 path");
    let server = start_quiet(
        data.path(),
        &["--log-format", "json", "--policies", dir],
        &[],
    );
    let hash = policy_hash(&server);
    // A reload refused: its line names the set kept and the error.
    std::fs::write(policies.path().join("callers.json"), "{").expect("break callers.json");
    let (status, body, _) = server.post("/v1/policy/reload", OPERATOR, &json!({}));
    assert_eq!(status, 422, "{body}");
    let pending = pending_task(&server, "msg-logs-json");
    let (status, body, _) = server.post(
        &format!("/v1/approvals/{pending}"),
        OPERATOR,
        &json!({"decision": "reject", "reason": "json"}),
    );
    assert_eq!(status, 200, "{body}");
    let log = stop(server, data.path());

    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    let find = |target: &str, message: &str| {
        events
            .iter()
            .find(|e| {
                e["target"] == target
                    && e["fields"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with(message))
            })
            .unwrap_or_else(|| panic!("no {target} event {message:?} in:\n{log}"))
    };
    let started = &find("hcp::serve", "started:")["fields"];
    assert_eq!(started["data_dir"], data.path().display().to_string());
    assert_eq!(started["policy_hash"], hash.as_str());
    assert_eq!(started["transports"], "http,mcp");
    assert!(
        started["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:")),
        "{started}"
    );
    let decided = &find("hcp::approval", &format!("task {pending}"))["fields"];
    assert_eq!(decided["task"], pending.as_str());
    assert_eq!(decided["operator"], "operator-lab-01");
    assert_eq!(decided["decision"], "rejected");
    let reloaded = &find("hcp::policy", "policy reloaded")["fields"];
    assert_eq!(reloaded["old_hash"], hash.as_str());
    assert_eq!(reloaded["new_hash"], hash.as_str());
    assert_eq!(reloaded["by"], "operator-lab-01");
    let refused = &find("hcp::policy", "policy reload by operator-lab-01 refused")["fields"];
    assert_eq!(refused["kept_hash"], hash.as_str());
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("callers.json")),
        "{refused}"
    );
    let request = &find("hcp::http", "request")["fields"];
    assert_eq!(request["method"], "POST", "{request}");
    find("hcp::shutdown", "shutdown began");
    let closed = &find("hcp::shutdown", "store closed")["fields"];
    assert_eq!(closed["data_dir"], data.path().display().to_string());
    assert!(
        events.iter().all(|e| e["level"] != "DEBUG"),
        "debug events at the default level:\n{log}"
    );
}

/// On a terminal (a pseudo-terminal from util-linux's `script`), log lines
/// are coloured, unless `NO_COLOR` says otherwise.
#[test]
fn colour_on_a_terminal_only_without_no_color() {
    fn startup_on_a_terminal(no_color: Option<&str>) -> String {
        let data = lab();
        let mut command = Command::new("script");
        // `exec`: the server is the shell's process, whose id it printed.
        command
            .args([
                "-qfec",
                "echo \"pid=$$\"; exec \"$HCP_BIN\" serve --listen 127.0.0.1:0",
                "/dev/null",
            ])
            .env("HCP_BIN", env!("CARGO_BIN_EXE_hcp"))
            .env("HCP_DATA_DIR", data.path())
            .env("HCP_CACHE_DIR", cache_dir())
            .env_remove("HCP_LOG")
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .current_dir(REPO_ROOT)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let mut child = command.spawn().expect("script (util-linux)");
        let (lines, read) = std::sync::mpsc::channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut reader = BufReader::new(out);
            let mut buf = Vec::new();
            while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
                let _ = lines.send(String::from_utf8_lossy(&buf).into_owned());
                buf.clear();
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut pid, mut text) = (None, String::new());
        let started = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = read
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no startup line on the terminal:\n{text}"));
            text.push_str(&line);
            if let Some(p) = line.trim().strip_prefix("pid=") {
                pid = Some(p.to_owned());
            }
            if line.contains("started:") {
                break line;
            }
        };
        let pid = pid.expect("the server's pid");
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = child.wait();
        started
    }
    let coloured = startup_on_a_terminal(None);
    assert!(
        coloured.contains('\u{1b}'),
        "no colour on a terminal: {coloured:?}"
    );
    let plain = startup_on_a_terminal(Some("1"));
    assert!(
        !plain.contains('\u{1b}'),
        "colour with NO_COLOR=1: {plain:?}"
    );
}
