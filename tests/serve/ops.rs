//! What an operator's monitoring and service manager see of `hcp serve`:
//! `/metrics` scraped by a real Prometheus (Debian's `prometheus`, started
//! here on loopback with a generated configuration that sends the operator
//! credential from a file), its PromQL answers rising as tasks complete;
//! `/metrics` refused without the operator credential; `/readyz` ready after
//! start, not ready when the data directory takes no write, once a
//! shutdown drains, or (with AMQP) when the broker is gone; AMQP deliveries
//! and acknowledgements counted on a real RabbitMQ node.

use super::{ALPHA, LOCAL, OPERATOR, Server, example, lab, with_id};
use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `prometheus` binary: on PATH or where Debian installs it.
/// scripts/test installs the package; a machine without it fails here,
/// naming it (the test is never skipped).
fn prometheus_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("prometheus"))
            .collect::<Vec<_>>()
    });
    on_path
        .chain([PathBuf::from("/usr/bin/prometheus")])
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no prometheus binary: install Debian's prometheus package \
                 (scripts/test does: apt-get install prometheus)"
            )
        })
}

/// A free port on loopback (the listener is let go before it is used).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A Prometheus on loopback, stopped when dropped.
struct Prometheus {
    child: Child,
    base: String,
    agent: ureq::Agent,
    log: PathBuf,
}

impl Prometheus {
    /// Scrapes `target` (`host:port`) every second at `/metrics`, sending
    /// the bearer credential in `credentials`.
    fn start(dir: &Path, target: &str, credentials: &Path) -> Self {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: hcp\n    metrics_path: /metrics\n\
                 \x20   authorization:\n      type: Bearer\n      credentials_file: {}\n\
                 \x20   static_configs:\n      - targets: ['{target}']\n",
                credentials.display()
            ),
        )
        .expect("prometheus.yml");
        let port = free_port();
        let log = dir.join("prometheus.log");
        let child = Command::new(prometheus_binary())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("start prometheus");
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            agent,
            log,
        }
    }

    /// The value of an instant PromQL query that answers one sample, if it
    /// answers one (Prometheus may not be up yet, or not have scraped).
    fn value(&self, promql: &str) -> Option<f64> {
        let mut resp = self
            .agent
            .get(format!("{}/api/v1/query", self.base))
            .query("query", promql)
            .call()
            .ok()?;
        let body: Value = resp.body_mut().read_json().ok()?;
        let sample = body["data"]["result"].as_array()?.first()?.clone();
        sample["value"][1].as_str()?.parse().ok()
    }

    /// Waits until `promql` answers a value that `ok` takes.
    fn wait_for(&self, promql: &str, ok: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(v) = self.value(promql).filter(|v| ok(*v)) {
                return v;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                panic!(
                    "prometheus never answered {promql:?} as expected (last: {:?}); its log:\n{log}",
                    self.value(promql)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn prometheus_scrapes_the_host_and_sees_completed_tasks_rise() {
    let data = lab();
    let server = Server::start(data.path());
    let scratch = tempfile::tempdir().expect("tempdir");
    let credentials = scratch.path().join("operator.token");
    std::fs::write(&credentials, OPERATOR).expect("credentials");
    let target = server.base.strip_prefix("http://").expect("http base");
    let prometheus = Prometheus::start(scratch.path(), target, &credentials);

    // Scraped, with the operator's credential.
    prometheus.wait_for("up{job=\"hcp\"}", |v| v == 1.0);
    let completed = "sum(hcp_task_transitions_total{state=\"completed\"}) or vector(0)";
    let before = prometheus.wait_for(completed, |_| true);

    for i in 0..2 {
        let message = with_id(example("document-analysis"), &format!("metrics-{i}"));
        let (status, answer, task) = server.post("/v1/tasks", LOCAL, &message);
        assert_eq!(status, 200, "{answer}");
        let result = server.wait_result(&task.expect("task id"), LOCAL);
        assert_eq!(result["type"], "task_completed", "{result}");
    }
    let after = prometheus.wait_for(completed, |v| v >= before + 2.0);
    assert!(after >= before + 2.0, "{before} -> {after}");

    // The other families are there, counted where they happen.
    let accepted = prometheus.wait_for(
        "sum(hcp_admission_decisions_total{decision=\"accepted\"})",
        |v| v >= 2.0,
    );
    assert!(accepted >= 2.0);
    prometheus.wait_for("sum(hcp_receipt_flush_seconds_count)", |v| v >= 1.0);
    prometheus.wait_for("hcp_store_size_bytes", |v| v > 0.0);
    prometheus.wait_for("hcp_slots_in_use", |v| v == 0.0);
}

#[test]
fn metrics_take_the_operator_credential_only() {
    let data = lab();
    let server = Server::start(data.path());
    let (status, body) = server.get("/metrics", None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = server.get("/metrics", Some(LOCAL));
    assert_eq!(status, 403, "{body}");

    let message = with_id(example("document-analysis"), "metrics-text");
    let (status, answer, task) = server.post("/v1/tasks", LOCAL, &message);
    assert_eq!(status, 200, "{answer}");
    server.wait_result(&task.expect("task id"), LOCAL);
    let mut resp = server
        .agent
        .get(server.url("/metrics"))
        .header("Authorization", format!("Bearer {OPERATOR}"))
        .call()
        .expect("GET /metrics");
    assert_eq!(resp.status().as_u16(), 200);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = resp.body_mut().read_to_string().expect("body");
    for line in [
        "hcp_task_transitions_total{state=\"completed\"} 1",
        "hcp_admission_decisions_total{decision=\"accepted\",reason_code=\"\"} 1",
        "hcp_slots_in_use 0",
        "hcp_approvals_waiting 0",
        "hcp_hid_state{mode=\"OBSERVE\",execution=\"off\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("hcp_host_calls_total{interface=")),
        "no host call counted:\n{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");

    // A task waiting for an operator, and one the gate refuses.
    let (status, pending, _) = server.post("/v1/tasks", ALPHA, &example("cvd-material-synthesis"));
    assert_eq!(status, 202, "{pending}");
    let mut refused = with_id(example("cvd-material-synthesis"), "metrics-refused");
    refused["payload"]["caller_id"] = "harness-local-01".into();
    let (status, answer, _) = server.post("/v1/tasks", LOCAL, &refused);
    assert_eq!(answer["type"], "task_rejected", "{status} {answer}");
    let code = answer["payload"]["reason_code"]
        .as_str()
        .expect("reason code");
    std::thread::sleep(Duration::from_millis(1100));
    let text = metrics_text(&server);
    for line in [
        "hcp_approvals_waiting 1".to_owned(),
        "hcp_tasks{state=\"pending_approval\",capability=\"cvd-material-synthesis\"} 1".to_owned(),
        "hcp_admission_decisions_total{decision=\"waiting\",reason_code=\"\"} 1".to_owned(),
        format!("hcp_admission_decisions_total{{decision=\"rejected\",reason_code=\"{code}\"}} 1"),
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    }
    let age: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("hcp_approval_oldest_age_seconds "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no approval age in:\n{text}"));
    assert!((1.0..600.0).contains(&age), "{age}");
}

#[test]
fn ready_after_start_and_not_when_the_data_directory_takes_no_write() {
    let data = lab();
    let server = Server::start(data.path());
    let (status, body) = server.get("/readyz", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready", "{body}");
    assert_eq!(body["checks"]["store"], "ok", "{body}");
    assert_eq!(body["checks"]["policy"], "ok", "{body}");
    assert_eq!(body["checks"]["shutdown"], "ok", "{body}");
    assert!(body["checks"].get("broker").is_none(), "no AMQP: {body}");

    // The probe's file cannot be written (a directory is in its way: this
    // test may run as root, whom a directory's mode does not stop).
    let probe = data.path().join(".ready-probe");
    std::fs::create_dir(&probe).expect("in the way");
    let (status, body) = server.get("/readyz", None);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "not_ready", "{body}");
    assert_eq!(body["not_ready"], serde_json::json!(["store"]), "{body}");
    // It says which check, and nothing of the host (no path, no error).
    assert!(!body.to_string().contains(".ready-probe"), "{body}");
    // Alive all the same.
    let (status, _) = server.get("/healthz", None);
    assert_eq!(status, 200);

    std::fs::remove_dir(&probe).expect("out of the way");
    let (status, body) = server.get("/readyz", None);
    assert_eq!(status, 200, "{body}");

    // The OpenAPI document names both endpoints.
    let (_, openapi) = server.get("/openapi.json", None);
    for path in ["/readyz", "/metrics"] {
        assert!(
            openapi["paths"].get(path).is_some(),
            "openapi.json lacks {path}"
        );
    }
}

#[test]
fn not_ready_once_a_shutdown_drains() {
    let data = super::shutdown::sleeper_lab(None);
    let mut server = Server::start_with(data.path(), &["--shutdown-grace", "PT60S"]);
    let (status, body) = server.get("/readyz", None);
    assert_eq!(status, 200, "{body}");
    let task = super::shutdown::sleeping_task(&server, "drain-1");
    server.signal("-TERM");
    // The drain began: the task still runs (up to its minute) and the
    // process lives, but readiness is gone: the listener is closed (a
    // probe's connection is refused) or an answer says `shutdown`.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(data.path().join("serve.log")).expect("log");
        if log.contains("shutdown began") {
            break;
        }
        assert!(Instant::now() < deadline, "no shutdown began:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        server.child.try_wait().expect("try_wait").is_none(),
        "the server exited before its task ended"
    );
    let probe = server.agent.get(server.url("/readyz")).call();
    match probe {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("refused") || text.contains("Connection"),
                "{text}"
            );
        }
        Ok(mut resp) => {
            assert_eq!(resp.status().as_u16(), 503);
            let body: Value = resp.body_mut().read_json().expect("json");
            assert_eq!(body["checks"]["shutdown"], "draining", "{body}");
        }
    }
    // The task it drained for.
    let _ = task;
}

#[test]
fn amqp_deliveries_are_counted_and_readiness_follows_the_broker() {
    use super::amqp::{Caller, amqp_host, queue_ready};
    let broker = hcp_tests::broker::Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, server) = amqp_host(&broker, &["harness-local-01"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut local = Caller::connect(&broker, "harness-local-01", data.path()).await;
        let task = with_id(example("document-analysis"), "amqp-metrics");
        local
            .send(
                &serde_json::to_vec(&task).expect("encode"),
                Some("harness-local-01"),
            )
            .await;
        let (_, first) = local.answer().await;
        assert_eq!(first["type"], "task_accepted", "{first}");
        let (_, last) = local.answer().await;
        assert_eq!(last["type"], "task_completed", "{last}");
    });
    let (status, body) = server.get("/readyz", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["checks"]["broker"], "ok", "{body}");
    let text = metrics_text(&server);
    for line in [
        "hcp_amqp_deliveries_total{event=\"delivered\"} 1",
        "hcp_amqp_deliveries_total{event=\"acked\"} 1",
        "hcp_task_transitions_total{state=\"completed\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    }

    // The broker goes away: the host serves HTTP on, not ready.
    drop(broker);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = server.get("/readyz", None);
        if status == 503 {
            assert_eq!(body["not_ready"], serde_json::json!(["broker"]), "{body}");
            assert_eq!(body["checks"]["broker"], "failed", "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still ready without a broker: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, _) = server.get("/healthz", None);
    assert_eq!(status, 200);
}

/// `/metrics` as the operator reads it.
fn metrics_text(server: &Server) -> String {
    let mut resp = server
        .agent
        .get(server.url("/metrics"))
        .header("Authorization", format!("Bearer {OPERATOR}"))
        .call()
        .expect("GET /metrics");
    assert_eq!(resp.status().as_u16(), 200);
    resp.body_mut().read_to_string().expect("body")
}
