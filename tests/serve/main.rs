//! `hcp serve` end to end: the real binary listening on loopback, a real
//! HTTP client, SQLite on disk, the example capabilities installed in a
//! fresh data directory. Covers the API's answers to good and bad requests,
//! idempotent submissions (concurrent and across a restart), server-sent
//! events, the operator's approvals, graceful shutdown on SIGTERM, and
//! durability across SIGKILL.

mod amqp;
mod amqp_hosts;
mod approval_race;
mod browser;
mod durability;
mod fs_containment;
mod fuzz;
mod growth;
mod hid;
mod limits;
mod logs;
mod mcp;
mod openapi;
mod ops;
mod policy;
mod shutdown;
mod submissions;
mod tls;

use hcp::engine::{Host, HostConfig, HostPaths};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LOCAL: &str = "demo-token-harness-local-01-not-a-secret";
const ALPHA: &str = "demo-token-harness-alpha-001-not-a-secret";
const OPERATOR: &str = "demo-token-operator-lab-01-not-a-secret";

/// A data directory with the example capabilities installed.
fn lab() -> tempfile::TempDir {
    let data = tempfile::tempdir().expect("tempdir");
    let host = Host::open(paths(data.path()), HostConfig::default()).expect("host");
    for plugin in [
        "document-analysis",
        "cvd-material-synthesis",
        "hid-assistant",
    ] {
        host.install_manifest(
            &Path::new(REPO_ROOT)
                .join("plugins")
                .join(plugin)
                .join("manifest.json"),
        )
        .expect("install");
    }
    data
}

fn paths(data: &Path) -> HostPaths {
    HostPaths {
        data_dir: data.to_path_buf(),
        cache_dir: cache_dir(),
        policies_dir: Path::new(REPO_ROOT).join("policies"),
    }
}

/// Status, body and task id (`x-hcp-task-id`) of an answer.
type Answer = (u16, Value, Option<String>);

/// A running `hcp serve`.
struct Server {
    child: Child,
    base: String,
    agent: ureq::Agent,
}

impl Server {
    /// The process id of `hcp serve`.
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn start(data: &Path) -> Self {
        Self::start_with(data, &[])
    }

    fn start_with(data: &Path, extra: &[&str]) -> Self {
        Self::start_with_env(data, extra, &[])
    }

    /// [`Server::start_with`] with more environment variables.
    fn start_with_env(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data.join("serve.log"))
            .expect("log file");
        // A grace of 20 s unless `extra` names one.
        let grace: &[&str] = if extra.contains(&"--shutdown-grace") {
            &[]
        } else {
            &["--shutdown-grace", "PT20S"]
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(grace)
            .args(extra)
            .env("HCP_DATA_DIR", data)
            .env("HCP_CACHE_DIR", cache_dir())
            .env("HCP_LOG", "info")
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
            .unwrap_or_else(|| {
                let mut log = String::new();
                let _ = std::fs::File::open(data.join("serve.log"))
                    .and_then(|mut f| f.read_to_string(&mut log));
                panic!("unexpected first line {first:?}; log:\n{log}")
            })
            .to_owned();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Self { child, base, agent }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self.agent.get(self.url(path));
        if let Some(t) = token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let mut resp = req.call().expect("GET");
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn post_raw(
        &self,
        path: &str,
        token: Option<&str>,
        content_type: &str,
        body: Vec<u8>,
    ) -> Answer {
        let mut req = self
            .agent
            .post(self.url(path))
            .header("Content-Type", content_type);
        if let Some(t) = token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let mut resp = req.send(&body[..]).expect("POST");
        let status = resp.status().as_u16();
        let task = resp
            .headers()
            .get("x-hcp-task-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = resp.body_mut().read_to_string().expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
            task,
        )
    }

    /// Sends a body larger than the server takes, the way curl does: the
    /// server answers 413 as soon as it sees the length and may close the
    /// connection before the body is sent, so the write may fail; the
    /// answer is read anyway.
    fn post_oversized(&self, path: &str, token: &str, len: usize) -> Answer {
        use std::io::Write as _;
        let addr = self.base.strip_prefix("http://").expect("http base");
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )
        .expect("headers");
        let _ = stream.write_all(&vec![b' '; len]);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let status: u16 = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {answer:?}"));
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (
            status,
            serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())),
            None,
        )
    }

    fn post(&self, path: &str, token: &str, body: &Value) -> Answer {
        self.post_raw(
            path,
            Some(token),
            "application/json",
            body.to_string().into_bytes(),
        )
    }

    /// Polls the task's result until it is final.
    fn wait_result(&self, task: &str, token: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, body) = self.get(&format!("/v1/tasks/{task}/result"), Some(token));
            if status == 200 {
                return body;
            }
            assert_eq!(status, 202, "{body}");
            assert!(
                Instant::now() < deadline,
                "task {task} never finished: {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn example(plugin: &str) -> Value {
    let path = Path::new(REPO_ROOT)
        .join("plugins")
        .join(plugin)
        .join("examples/task_submit.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

fn with_id(mut m: Value, id: &str) -> Value {
    m["message_id"] = json!(id);
    m
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not a JSON error: {body}"))
}

#[test]
fn seed_example_over_http_completes_with_status_events_and_declarations() {
    let data = lab();
    let server = Server::start(data.path());

    let (status, health) = server.get("/healthz", None);
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));

    let (status, me) = server.get("/v1/whoami", Some(LOCAL));
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["caller_id"], "harness-local-01");

    // What a caller's model reads to pick a capability: only what the
    // caller may use.
    let (status, caps) = server.get("/v1/capabilities", Some(LOCAL));
    assert_eq!(status, 200, "{caps}");
    let names: Vec<&str> = caps["capabilities"]
        .as_array()
        .expect("list")
        .iter()
        .map(|c| c["capability"]["name"].as_str().expect("name"))
        .collect();
    assert!(names.contains(&"document-analysis"), "{caps}");
    assert!(!names.contains(&"cvd-material-synthesis"), "{caps}");

    // The seed's example, verbatim.
    let (status, answer, task) = server.post("/v1/tasks", LOCAL, &example("document-analysis"));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_accepted", "{answer}");
    let task = task.expect("x-hcp-task-id");

    // Server-sent events: status changes, then the final answer.
    let mut resp = server
        .agent
        .get(server.url(&format!("/v1/tasks/{task}/events")))
        .header("Authorization", format!("Bearer {LOCAL}"))
        .call()
        .expect("events");
    assert_eq!(resp.status().as_u16(), 200);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let mut stream = String::new();
    resp.body_mut()
        .as_reader()
        .read_to_string(&mut stream)
        .expect("stream ends after the result");
    assert!(stream.contains("event: status"), "{stream}");
    let result_line = stream
        .lines()
        .skip_while(|l| *l != "event: result")
        .nth(1)
        .unwrap_or_else(|| panic!("no result event in {stream}"));
    let from_events: Value =
        serde_json::from_str(result_line.strip_prefix("data: ").expect("data")).expect("json");

    let result = server.wait_result(&task, LOCAL);
    assert_eq!(result["type"], "task_completed", "{result}");
    assert_eq!(from_events, result);
    // The stream's last status is the task's stored status, field for
    // field (the stream has it from the final write, not read back).
    let last_status: Value = stream
        .lines()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == "event: status")
        .filter_map(|w| w[1].strip_prefix("data: "))
        .next_back()
        .map(|d| serde_json::from_str(d).expect("json"))
        .unwrap_or_else(|| panic!("no status event in {stream}"));
    let (code, stored) = server.get(&format!("/v1/tasks/{task}"), Some(LOCAL));
    assert_eq!(code, 200, "{stored}");
    assert_eq!(stored["status"], "complete", "{stored}");
    assert_eq!(last_status, stored);
    assert!(
        result["payload"]["outputs"]["findings"]
            .as_array()
            .is_some_and(|f| !f.is_empty()),
        "{result}"
    );

    let (status, job) = server.get(&format!("/v1/tasks/{task}"), Some(LOCAL));
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["job_id"], task.as_str());
    assert_eq!(job["status"], "complete");

    // Another caller cannot see the task.
    let (status, body) = server.get(&format!("/v1/tasks/{task}"), Some(ALPHA));
    assert_eq!((status, error_code(&body)), (404, "not_found"), "{body}");
    // An operator can.
    let (status, _) = server.get(&format!("/v1/tasks/{task}"), Some(OPERATOR));
    assert_eq!(status, 200);
}

#[test]
fn bad_requests_get_json_errors_and_the_server_keeps_serving() {
    let data = lab();
    let server = Server::start(data.path());
    let good = example("document-analysis");
    let json_ct = "application/json";

    let cases: Vec<(&str, Answer, u16, &str)> = vec![
        (
            "no credential",
            server.post_raw("/v1/tasks", None, json_ct, good.to_string().into_bytes()),
            401,
            "unauthorized",
        ),
        (
            "unknown credential",
            server.post("/v1/tasks", "demo-token-nobody-at-all-00000000", &good),
            401,
            "unauthorized",
        ),
        (
            // Refused before its body is parsed: a 400 told a stranger
            // the host had read it.
            "unknown credential, malformed body",
            server.post_raw(
                "/v1/tasks",
                Some("demo-token-nobody-at-all-00000000"),
                json_ct,
                b"{\"type\": ".to_vec(),
            ),
            401,
            "unauthorized",
        ),
        (
            "another caller's credential",
            server.post("/v1/tasks", ALPHA, &good),
            401,
            "unauthorized",
        ),
        (
            "malformed JSON",
            server.post_raw("/v1/tasks", Some(LOCAL), json_ct, b"{\"type\": ".to_vec()),
            400,
            "invalid_json",
        ),
        (
            "wrong type",
            server.post("/v1/tasks", LOCAL, &{
                let mut m = good.clone();
                m["type"] = json!("task_completed");
                m
            }),
            400,
            "wrong_message_type",
        ),
        (
            "not an envelope",
            server.post("/v1/tasks", LOCAL, &json!({"hello": "world"})),
            400,
            "invalid_message",
        ),
        (
            "oversized body",
            server.post_oversized("/v1/tasks", LOCAL, 2 << 20),
            413,
            "payload_too_large",
        ),
        (
            "not JSON at all",
            server.post_raw(
                "/v1/tasks",
                Some(LOCAL),
                "text/plain",
                b"run it please".to_vec(),
            ),
            415,
            "unsupported_media_type",
        ),
        (
            "decision by a caller",
            server.post(
                "/v1/approvals/task-nope",
                LOCAL,
                &json!({"decision": "approve", "reason": "mine"}),
            ),
            403,
            "forbidden",
        ),
        (
            "decision without a reason",
            server.post(
                "/v1/approvals/task-nope",
                OPERATOR,
                &json!({"decision": "approve", "reason": " "}),
            ),
            400,
            "invalid_decision",
        ),
        (
            "decision on an unknown task",
            server.post(
                "/v1/approvals/task-nope",
                OPERATOR,
                &json!({"decision": "approve", "reason": "fine"}),
            ),
            404,
            "not_found",
        ),
    ];
    for (what, (status, body, _), want_status, want_code) in cases {
        assert_eq!(status, want_status, "{what}: {body}");
        assert_eq!(error_code(&body), want_code, "{what}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}: {body}"
        );
    }

    let gets: &[(&str, Option<&str>, u16, &str)] = &[
        ("/v1/tasks/task-unknown", Some(LOCAL), 404, "not_found"),
        (
            "/v1/tasks/task-unknown/result",
            Some(LOCAL),
            404,
            "not_found",
        ),
        (
            "/v1/tasks/task-unknown/events",
            Some(LOCAL),
            404,
            "not_found",
        ),
        (
            "/v1/tasks?state=sleeping",
            Some(LOCAL),
            400,
            "invalid_query",
        ),
        ("/v1/tasks?limit=-1", Some(LOCAL), 400, "invalid_query"),
        ("/v1/tasks", None, 401, "unauthorized"),
        ("/v1/approvals", Some(LOCAL), 403, "forbidden"),
        ("/v1/artifacts/s/none.json", Some(LOCAL), 404, "not_found"),
        ("/v1/nothing-here", Some(LOCAL), 404, "not_found"),
        // A path segment that is not UTF-8 once decoded: JSON, as every
        // other error (axum's own answer was plain text).
        ("/v1/tasks/%FF", Some(LOCAL), 400, "invalid_path"),
        ("/v1/approvals/%FF", Some(OPERATOR), 400, "invalid_path"),
        ("/v1/artifacts/%FF/x", Some(LOCAL), 400, "invalid_path"),
    ];
    for (path, token, want_status, want_code) in gets {
        let (status, body) = server.get(path, *token);
        assert_eq!(status, *want_status, "GET {path}: {body}");
        assert_eq!(error_code(&body), *want_code, "GET {path}: {body}");
    }
    // The scheme's name is case-insensitive.
    let resp = server
        .agent
        .get(server.url("/v1/tasks"))
        .header("Authorization", format!("bearer {LOCAL}"))
        .call()
        .expect("GET");
    assert_eq!(resp.status().as_u16(), 200);
    let mut resp = server
        .agent
        .delete(server.url("/v1/tasks"))
        .call()
        .expect("DELETE");
    assert_eq!(resp.status().as_u16(), 405);
    let body: Value = resp.body_mut().read_json().expect("json error");
    assert_eq!(error_code(&body), "method_not_allowed");

    // An invalid task_submit that is a valid envelope is answered by the
    // gate, not by the transport.
    let mut bad_inputs = with_id(good.clone(), "msg-bad-inputs");
    bad_inputs["payload"]["inputs"] = json!({"document_uri": 7});
    let (status, answer, _) = server.post("/v1/tasks", LOCAL, &bad_inputs);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_rejected", "{answer}");

    // Still serving.
    let (status, answer, task) = server.post("/v1/tasks", LOCAL, &good);
    assert_eq!(status, 200, "{answer}");
    let result = server.wait_result(&task.expect("task id"), LOCAL);
    assert_eq!(result["type"], "task_completed", "{result}");

    // The OpenAPI document served is the one kept in the repository, and it
    // names every route exercised here.
    let (status, served) = server.get("/openapi.json", None);
    assert_eq!(status, 200);
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(REPO_ROOT).join("docs/openapi.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(served, kept);
    for path in [
        "/v1/tasks",
        "/v1/tasks/{id}",
        "/v1/tasks/{id}/result",
        "/v1/tasks/{id}/events",
        "/v1/capabilities",
        "/v1/artifacts/{session}/{name}",
        "/v1/approvals",
        "/v1/approvals/{id}",
        "/v1/decisions",
        "/v1/whoami",
        "/healthz",
        "/v1/hid",
        "/v1/hid/mode",
        "/v1/hid/rearm",
        "/v1/hid/proposals",
        "/v1/hid/proposals/{id}",
        "/v1/hid/log/verify",
        "/v1/receipts",
        "/v1/receipts/verify",
        "/mcp",
    ] {
        assert!(
            kept["paths"].get(path).is_some(),
            "openapi.json lacks {path}"
        );
    }
}

/// A caller lists its own tasks, however many tasks of other callers are
/// newer (the list took the newest of everybody's and kept the caller's
/// among them, so here it came back empty).
#[test]
fn a_caller_lists_its_own_tasks_however_many_of_others_are_newer() {
    let data = lab();
    let server = Server::start(data.path());
    let (status, answer, mine) = server.post(
        "/v1/tasks",
        LOCAL,
        &with_id(example("document-analysis"), "msg-mine"),
    );
    assert_eq!(status, 200, "{answer}");
    let mine = mine.expect("a task");
    for i in 0..12 {
        let (status, answer, _) = server.post(
            "/v1/tasks",
            ALPHA,
            &with_id(
                example("cvd-material-synthesis"),
                &format!("msg-theirs-{i}"),
            ),
        );
        // Held for an operator's approval.
        assert_eq!(status, 202, "{answer}");
    }
    let (status, list) = server.get("/v1/tasks?limit=1", Some(LOCAL));
    assert_eq!(status, 200, "{list}");
    let ids: Vec<_> = list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["task_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(ids, vec![mine]);
    let (status, list) = server.get("/v1/tasks?limit=5", Some(OPERATOR));
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["tasks"].as_array().map(Vec::len), Some(5), "{list}");
}

/// A decision the host fails to record (its receipt refused) is the
/// host's fault, a 500, not the operator's 403; the task gets its final
/// answer instead of waiting for a decision already taken.
#[test]
fn a_decision_the_host_fails_to_record_is_a_500_and_the_task_is_answered() {
    let data = lab();
    let server = Server::start(data.path());
    let (status, pending, task) =
        server.post("/v1/tasks", ALPHA, &example("cvd-material-synthesis"));
    assert_eq!(status, 202, "{pending}");
    let task = task.expect("task id");
    rusqlite::Connection::open(data.path().join("hcp.db"))
        .expect("db")
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON receipt_marks WHEN NEW.call = 'gate.approval'
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
        )
        .expect("trigger");
    let (status, body, _) = server.post(
        &format!("/v1/approvals/{task}"),
        OPERATOR,
        &json!({"decision": "approve", "reason": "recipe within the lab's SOP"}),
    );
    assert_eq!(
        (status, error_code(&body)),
        (500, "internal_error"),
        "{body}"
    );
    let result = server.wait_result(&task, ALPHA);
    assert_eq!(result["type"], "task_failed", "{result}");
    assert_eq!(
        result["payload"]["error_code"], "internal_error",
        "{result}"
    );
}

/// How many tasks the caller has with this message id.
fn tasks_with_message(server: &Server, token: &str, message_id: &str) -> Vec<Value> {
    let (status, list) = server.get("/v1/tasks?limit=1000", Some(token));
    assert_eq!(status, 200, "{list}");
    list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| t["message_id"] == message_id)
        .cloned()
        .collect()
}

#[test]
fn the_same_message_runs_once_concurrently_and_after_a_restart() {
    let data = lab();
    let message = with_id(example("document-analysis"), "msg-idempotent-1");
    let answers: Vec<Answer> = {
        let server = Server::start(data.path());
        let answers = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| server.post("/v1/tasks", LOCAL, &message)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect::<Vec<_>>()
        });
        let task = answers[0].2.clone().expect("task id");
        for (status, answer, id) in &answers {
            assert_eq!(*status, 200, "{answer}");
            assert_eq!(
                answer, &answers[0].1,
                "every sender gets the original answer"
            );
            assert_eq!(id.as_deref(), Some(task.as_str()));
        }
        let result = server.wait_result(&task, LOCAL);
        assert_eq!(result["type"], "task_completed", "{result}");
        assert_eq!(
            tasks_with_message(&server, LOCAL, "msg-idempotent-1").len(),
            1
        );
        answers
    };

    // After a restart: the original answer again, no second task, no
    // second run.
    let server = Server::start(data.path());
    let (status, again, id) = server.post("/v1/tasks", LOCAL, &message);
    assert_eq!(status, 200, "{again}");
    assert_eq!(again, answers[0].1);
    assert_eq!(id, answers[0].2);
    let tasks = tasks_with_message(&server, LOCAL, "msg-idempotent-1");
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0]["state"], "completed");
    let updated = tasks[0]["updated_at"].clone();
    std::thread::sleep(Duration::from_millis(1500));
    let tasks = tasks_with_message(&server, LOCAL, "msg-idempotent-1");
    assert_eq!(tasks[0]["updated_at"], updated, "the task ran again");

    // The same message id from another caller is another task.
    let mut theirs = message.clone();
    theirs["payload"]["caller_id"] = json!("harness-beta-002");
    let (status, answer, id) = server.post(
        "/v1/tasks",
        "demo-token-harness-beta-002-not-a-secret",
        &theirs,
    );
    assert_eq!(status, 200, "{answer}");
    assert_ne!(id, answers[0].2);
}

/// The artifacts of `result` (a task of ALPHA's; at least one) by URI:
/// for their owner and operators, not another caller; content the store
/// holds but cannot read back is the host's fault (500), not an artifact
/// that does not exist.
fn artifacts_for_their_owner_only(server: &Server, data: &Path, result: &Value) {
    let uris: Vec<&str> = result["payload"]["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["uri"].as_str())
        .collect();
    assert!(!uris.is_empty(), "no artifacts: {result}");
    for uri in uris {
        let rest = uri.strip_prefix("hcp://").expect("hcp uri");
        let (session, name) = rest.split_once("/artifacts/").expect("artifact uri");
        let path = format!("/v1/artifacts/{session}/{name}");
        let mut resp = server
            .agent
            .get(server.url(&path))
            .header("Authorization", format!("Bearer {ALPHA}"))
            .call()
            .expect("artifact");
        assert_eq!(resp.status().as_u16(), 200, "{uri}");
        // The capability's content, of the type it chose: a download, never
        // a page of the server's origin.
        for (name, value) in [
            ("content-disposition", "attachment"),
            ("x-content-type-options", "nosniff"),
            ("content-security-policy", "sandbox; default-src 'none'"),
        ] {
            assert_eq!(
                resp.headers().get(name).and_then(|v| v.to_str().ok()),
                Some(value),
                "{uri}: {name}"
            );
        }
        let checksum = resp.headers()["x-hcp-checksum"]
            .to_str()
            .expect("ascii")
            .to_owned();
        assert!(!resp.body_mut().read_to_vec().expect("bytes").is_empty());
        let (status, body) = server.get(&path, Some(LOCAL));
        assert_eq!((status, error_code(&body)), (404, "not_found"), "{body}");
        let (status, _) = server.get(&path, Some(OPERATOR));
        assert_eq!(status, 200, "{uri}");
        let blob = data
            .join("blobs/sha256")
            .join(checksum.trim_start_matches("sha256:"));
        std::fs::remove_file(&blob).expect("remove the content");
        let (status, body) = server.get(&path, Some(ALPHA));
        assert_eq!(
            (status, error_code(&body)),
            (500, "internal_error"),
            "{body}"
        );
    }
}

#[test]
fn operators_approve_and_reject_over_http() {
    let data = lab();
    let server = Server::start(data.path());
    let cvd = example("cvd-material-synthesis");

    let (status, pending, task) = server.post("/v1/tasks", ALPHA, &cvd);
    assert_eq!(status, 202, "{pending}");
    assert_eq!(pending["status"], "pending_approval", "{pending}");
    let task = task.expect("task id");

    let (status, queue) = server.get("/v1/approvals", Some(OPERATOR));
    assert_eq!(status, 200, "{queue}");
    let entry = queue["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .find(|a| a["task"]["task_id"] == task.as_str())
        .unwrap_or_else(|| panic!("{task} not queued: {queue}"))
        .clone();
    assert!(entry["assessment"].is_object(), "{entry}");
    // Beside the assessment, the installed declaration: the equipment and
    // the publisher's own envelope (the assessment's is the effective one).
    let declaration = &entry["declaration"];
    assert_eq!(declaration["name"], "cvd-material-synthesis", "{entry}");
    assert_eq!(declaration["version"], "1.0.0", "{entry}");
    assert_eq!(declaration["instruments"], json!(["cvd-rig"]), "{entry}");
    assert_eq!(
        declaration["safety"]["resource_types"],
        json!(["high_temperature_furnace", "gas_supply", "vacuum_system"]),
        "{entry}"
    );
    assert_eq!(
        declaration["declared_envelope"]["parameters"]["temperature"]["max"],
        1000.0
    );
    assert_eq!(
        entry["assessment"]["safety_envelope"]["parameters"]["temperature"]["max"],
        950.0
    );
    let (status, decided) = server.get("/v1/decisions", Some(OPERATOR));
    assert_eq!((status, decided["decisions"].clone()), (200, json!([])));

    // The caller cannot approve its own task.
    let (status, body, _) = server.post(
        &format!("/v1/approvals/{task}"),
        ALPHA,
        &json!({"decision": "approve", "reason": "trust me"}),
    );
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");

    let (status, accepted, _) = server.post(
        &format!("/v1/approvals/{task}"),
        OPERATOR,
        &json!({"decision": "approve", "reason": "recipe within the lab's SOP"}),
    );
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(accepted["type"], "task_accepted", "{accepted}");
    let result = server.wait_result(&task, ALPHA);
    assert_eq!(result["type"], "task_completed", "{result}");
    artifacts_for_their_owner_only(&server, data.path(), &result);

    // Deciding twice is a conflict.
    let (status, body, _) = server.post(
        &format!("/v1/approvals/{task}"),
        OPERATOR,
        &json!({"decision": "reject", "reason": "changed my mind"}),
    );
    assert_eq!((status, error_code(&body)), (409, "conflict"), "{body}");

    // A rejected task is answered task_rejected.
    let (status, _, second) = server.post("/v1/tasks", ALPHA, &with_id(cvd.clone(), "msg-cvd-2"));
    assert_eq!(status, 202);
    let second = second.expect("task id");
    let (status, rejected, _) = server.post(
        &format!("/v1/approvals/{second}"),
        OPERATOR,
        &json!({"decision": "reject", "reason": "furnace maintenance today"}),
    );
    assert_eq!(status, 200, "{rejected}");
    assert_eq!(rejected["type"], "task_rejected", "{rejected}");
    let result = server.wait_result(&second, ALPHA);
    assert_eq!(result["type"], "task_rejected", "{result}");

    // Decided approvals stay listed, the latest first: who, when, why.
    let (status, decided) = server.get("/v1/decisions", Some(OPERATOR));
    assert_eq!(status, 200, "{decided}");
    let list = decided["decisions"].as_array().expect("decisions");
    let summary: Vec<(&str, &str, &str, &str)> = list
        .iter()
        .map(|d| {
            (
                d["task"]["task_id"].as_str().unwrap_or(""),
                d["decision"].as_str().unwrap_or(""),
                d["operator_id"].as_str().unwrap_or(""),
                d["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                second.as_str(),
                "rejected",
                "operator-lab-01",
                "furnace maintenance today"
            ),
            (
                task.as_str(),
                "approved",
                "operator-lab-01",
                "recipe within the lab's SOP"
            ),
        ]
    );
    assert!(
        list.iter().all(|d| d["decided_at"].is_string()),
        "{decided}"
    );
    assert_eq!(list[1]["task"]["state"], "completed", "{decided}");
    let (status, decided) = server.get("/v1/decisions?limit=1", Some(OPERATOR));
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["decisions"].as_array().map(Vec::len), Some(1));
    // Operators only; a bad query is a clear 400.
    let (status, body) = server.get("/v1/decisions", Some(ALPHA));
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");
    for query in ["limit=many", "limit=-1", "state=approved"] {
        let (status, body) = server.get(&format!("/v1/decisions?{query}"), Some(OPERATOR));
        assert_eq!(
            (status, error_code(&body)),
            (400, "invalid_query"),
            "{query}: {body}"
        );
    }
}

/// The `key=value` of `line`'s field `key`.
fn field<'l>(line: &'l str, key: &str) -> Option<&'l str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

#[test]
fn the_server_logs_each_request_and_each_task_state() {
    let data = lab();
    // Each state at debug; at info only the final one (tests/serve/logs.rs).
    let server = Server::start_with_env(data.path(), &[], &[("HCP_LOG", "info,hcp::task=debug")]);
    let (status, answer, task) = server.post("/v1/tasks", LOCAL, &example("document-analysis"));
    assert_eq!(status, 200, "{answer}");
    let task = task.expect("x-hcp-task-id");
    let result = server.wait_result(&task, LOCAL);
    assert_eq!(result["type"], "task_completed", "{result}");
    drop(server);
    let log = std::fs::read_to_string(data.path().join("serve.log")).expect("log");
    let post = log
        .lines()
        .find(|l| l.contains("hcp::http") && field(l, "path") == Some("/v1/tasks"))
        .unwrap_or_else(|| panic!("no request line for POST /v1/tasks:\n{log}"));
    assert_eq!(field(post, "method"), Some("POST"), "{post}");
    assert_eq!(field(post, "status"), Some("200"), "{post}");
    assert!(
        field(post, "duration_ms").is_some_and(|d| d.parse::<u64>().is_ok()),
        "{post}"
    );
    let states: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("hcp::task") && field(l, "task_id") == Some(task.as_str()))
        .filter_map(|l| field(l, "state"))
        .collect();
    assert_eq!(states.first(), Some(&"received"), "{log}");
    assert!(states.contains(&"running"), "{states:?}");
    assert_eq!(states.last(), Some(&"completed"), "{states:?}");
}

#[test]
fn sigterm_stops_gracefully() {
    let data = lab();
    let mut server = Server::start(data.path());
    let (status, _, task) = server.post("/v1/tasks", LOCAL, &example("document-analysis"));
    assert_eq!(status, 200);
    server.signal("-TERM");
    let exit = server.wait_exit();
    assert!(exit.success(), "{exit:?}");
    // What was accepted before the signal finished or is picked up again.
    let server = Server::start(data.path());
    let result = server.wait_result(&task.expect("task id"), LOCAL);
    assert!(
        matches!(
            result["type"].as_str(),
            Some("task_completed" | "task_failed")
        ),
        "{result}"
    );
}

#[test]
fn no_acknowledged_task_is_lost_to_sigkill() {
    let data = lab();
    let mut acknowledged: Vec<String> = Vec::new();
    {
        let server = Server::start(data.path());
        let stop_after = 12;
        for i in 0.. {
            let m = with_id(example("document-analysis"), &format!("msg-stream-{i}"));
            // Kill mid-stream, while a submission is in flight.
            if i == stop_after {
                let pid = server.child.id();
                let killer = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    let _ = Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status();
                });
                let outcome = server
                    .agent
                    .post(server.url("/v1/tasks"))
                    .header("Authorization", format!("Bearer {LOCAL}"))
                    .header("Content-Type", "application/json")
                    .send(m.to_string().as_bytes());
                killer.join().expect("killer");
                if let Ok(resp) = outcome
                    && resp.status().as_u16() == 200
                    && let Some(id) = resp.headers().get("x-hcp-task-id")
                {
                    acknowledged.push(id.to_str().expect("id").to_owned());
                }
                break;
            }
            let (status, answer, task) = server.post("/v1/tasks", LOCAL, &m);
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer["type"], "task_accepted", "{answer}");
            acknowledged.push(task.expect("task id"));
        }
        let mut server = server;
        let exit = server.wait_exit();
        assert!(!exit.success(), "killed: {exit:?}");
    }
    assert!(acknowledged.len() >= 12);

    let server = Server::start(data.path());
    let mut completed = 0;
    for id in &acknowledged {
        let result = server.wait_result(id, LOCAL);
        match result["type"].as_str() {
            Some("task_completed") => completed += 1,
            Some("task_failed") => {
                // Failed honestly: said why.
                assert!(
                    result["payload"]["error_message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "{result}"
                );
            }
            _ => panic!("task {id}: {result}"),
        }
    }
    eprintln!(
        "{} acknowledged before SIGKILL: {completed} completed, {} failed honestly",
        acknowledged.len(),
        acknowledged.len() - completed
    );
    assert!(completed > 0, "nothing completed");
    // Nothing ran twice: one task per message id.
    for i in 0..acknowledged.len() {
        let n = tasks_with_message(&server, LOCAL, &format!("msg-stream-{i}")).len();
        assert_eq!(n, 1, "msg-stream-{i}");
    }
    // The receipt log survived the kill: every stored receipt is intact,
    // chained, covered and signed as it should be, and the log went on.
    let (status, verdict) = server.get("/v1/receipts/verify", Some(OPERATOR));
    assert_eq!(
        (status, verdict["ok"].as_bool()),
        (200, Some(true)),
        "{verdict}"
    );
    let (status, body) = server.get("/v1/receipts", Some(LOCAL));
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");
    let store = hcp::store::Store::open(data.path()).expect("store");
    let check = hcp::evidence::verify_store(&store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    assert!(check.receipts > 3 * acknowledged.len() as u64, "{check:?}");
    for id in &acknowledged {
        let receipts =
            hcp::evidence::recent_receipts(&store, hcp::evidence::ReceiptFilter::Task(id), 1000)
                .expect("receipts");
        assert!(
            receipts.iter().any(|r| r.call == "gate.admission"),
            "task {id}: {receipts:?}"
        );
    }
}
