//! R1 tasks over AMQP (one and two `hcp serve` processes on one RabbitMQ
//! queue) side by side with the same tasks over HTTP, in interleaved
//! rounds on the same machine.
//!
//! ```sh
//! cargo bench -p hcp --bench amqp_load              # 200 tasks, 8 callers, 3 rounds
//! cargo bench -p hcp --bench amqp_load -- 400 16 5  # tasks, callers, rounds
//! ```
//!
//! Each caller sends the seed's document-analysis `task_submit` and waits for
//! its final answer, then sends the next (a closed loop); latency is from
//! the submission to the final answer. Over HTTP: `POST /v1/tasks`, then the
//! task's event stream until its result. Over AMQP: publish to
//! `hcp.tasks.document-analysis` with `user_id` and `reply_to` (publisher
//! confirms), then the caller's reply queue until `task_completed`. Every
//! host is the real `hcp` binary with its own fresh data directory (SQLite
//! on disk) and host key, started before the clock starts; the broker is a
//! real Debian RabbitMQ node on loopback (`hcp_tests::broker`). Each round
//! runs HTTP, AMQP with one host and AMQP with two hosts, in that order;
//! the figures pool every round.

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

mod common;

use common::{agent, example, http_task, open_host_with, runtime};

use futures_core::Stream;
use hcp_tests::broker::Broker;
use hcp_tests::{REPO_ROOT, cache_dir};
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CALLER: &str = "harness-local-01";
const QUEUE: &str = "hcp.tasks.document-analysis";

/// The shipped policies with harness-local-01 as a broker user.
fn policies(dir: &Path) {
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
        }
    }
    let path = dir.join("callers.json");
    let mut callers: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    for caller in callers["callers"].as_array_mut().expect("callers") {
        if caller["id"] == CALLER {
            caller["amqp_user"] = json!(CALLER);
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&callers).expect("json")).expect("write");
}

/// A running `hcp serve` on a fresh data directory.
struct Served {
    child: Child,
    base: String,
    _data: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(policies: &Path, amqp: Option<&str>) -> Served {
    let data = tempfile::tempdir().expect("tempdir");
    drop(open_host_with(data.path(), policies));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcp"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--policies"])
        .arg(policies)
        .env("HCP_DATA_DIR", data.path())
        .env("HCP_CACHE_DIR", cache_dir())
        .env("HCP_LOG", "warn")
        .current_dir(REPO_ROOT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(url) = amqp {
        cmd.args(["--amqp", url]);
    }
    let mut child = cmd.spawn().expect("spawn hcp serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("the listening line");
    let base = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    Served {
        child,
        base,
        _data: data,
    }
}

#[derive(Default)]
struct Figures {
    tasks: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Figures {
    fn add(&mut self, elapsed: Duration, latencies: Vec<Duration>) {
        self.tasks += latencies.len();
        self.elapsed += elapsed;
        self.latencies.extend(latencies);
    }

    fn throughput(&self) -> f64 {
        self.tasks as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i].as_secs_f64() * 1e3
    }

    fn print(&self, name: &str, base: &Figures) {
        println!(
            "{name:<14} {:>5} tasks {:>8.1} tasks/s  p50 {:>7.2} ms  p99 {:>7.2} ms   \
             vs http: throughput {:.2}x, p50 {:.2}x, p99 {:.2}x",
            self.tasks,
            self.throughput(),
            self.percentile(0.50),
            self.percentile(0.99),
            self.throughput() / base.throughput(),
            self.percentile(0.50) / base.percentile(0.50),
            self.percentile(0.99) / base.percentile(0.99),
        );
    }
}

/// `tasks` tasks over HTTP from `callers` concurrent callers.
fn http(served: &Served, tasks: usize, callers: usize, prefix: &str) -> (Duration, Vec<Duration>) {
    let start = Instant::now();
    let latencies = std::thread::scope(|s| {
        let handles: Vec<_> = (0..callers)
            .map(|c| {
                let base = served.base.clone();
                s.spawn(move || {
                    let agent = agent();
                    let mut out = Vec::new();
                    for i in (c..tasks).step_by(callers) {
                        let m = example(&format!("{prefix}-{i}"));
                        let t0 = Instant::now();
                        http_task(&agent, &base, &m);
                        out.push(t0.elapsed());
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("caller"))
            .collect()
    });
    (start.elapsed(), latencies)
}

/// Waits until `hosts` consumers are on the queue.
async fn consumers(connection: &Connection, hosts: u32) {
    for _ in 0..600 {
        let channel = connection.create_channel().await.expect("channel");
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        if let Ok(q) = channel
            .queue_declare(QUEUE.into(), passive, FieldTable::default())
            .await
            && q.consumer_count() >= hosts
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{hosts} host(s) did not consume {QUEUE} within a minute");
}

/// `tasks` tasks over AMQP from `callers` concurrent callers.
async fn amqp(
    url: &str,
    hosts: u32,
    tasks: usize,
    callers: usize,
    prefix: &str,
) -> (Duration, Vec<Duration>) {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("the callers connect");
    consumers(&connection, hosts).await;
    let mut setup = Vec::new();
    for c in 0..callers {
        let channel = connection.create_channel().await.expect("channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        // In the caller's own namespace, where the host answers it.
        let name = format!("{CALLER}.{prefix}-replies-{c}");
        let queue = channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("reply queue");
        let reply_to = queue.name().as_str().to_owned();
        let replies = channel
            .basic_consume(
                reply_to.as_str().into(),
                "replies".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("consume replies");
        setup.push((channel, reply_to, replies));
    }
    let start = Instant::now();
    let mut handles = Vec::new();
    for (c, (channel, reply_to, mut replies)) in setup.into_iter().enumerate() {
        let prefix = prefix.to_owned();
        handles.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in (c..tasks).step_by(callers) {
                let id = format!("{prefix}-{i}");
                let body = serde_json::to_vec(&example(&id)).expect("encode");
                let t0 = Instant::now();
                let props = BasicProperties::default()
                    .with_reply_to(reply_to.as_str().into())
                    .with_user_id(CALLER.into())
                    .with_content_type("application/json".into())
                    .with_delivery_mode(2);
                let confirm = channel
                    .basic_publish(
                        "".into(),
                        QUEUE.into(),
                        BasicPublishOptions::default(),
                        &body,
                        props,
                    )
                    .await
                    .expect("publish")
                    .await
                    .expect("confirm");
                assert!(confirm.is_ack());
                loop {
                    let delivery = tokio::time::timeout(
                        Duration::from_secs(120),
                        std::future::poll_fn(|cx| std::pin::Pin::new(&mut replies).poll_next(cx)),
                    )
                    .await
                    .expect("an answer within two minutes")
                    .expect("the reply stream is open")
                    .expect("a delivery");
                    let correlation = delivery
                        .properties
                        .correlation_id()
                        .as_ref()
                        .map(|c| c.as_str().to_owned());
                    if correlation.as_deref() != Some(id.as_str()) {
                        continue;
                    }
                    let answer: Value = serde_json::from_slice(&delivery.data).expect("JSON");
                    match answer["type"].as_str() {
                        Some("task_completed") => break,
                        Some("task_accepted") => {}
                        _ => panic!("{id}: {answer}"),
                    }
                }
                out.push(t0.elapsed());
            }
            out
        }));
    }
    let mut latencies = Vec::new();
    for h in handles {
        latencies.extend(h.await.expect("caller"));
    }
    let elapsed = start.elapsed();
    let _ = connection.close(200, "done".into()).await;
    (elapsed, latencies)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let tasks = args.first().copied().unwrap_or(200);
    let callers = args.get(1).copied().unwrap_or(8);
    let rounds = args.get(2).copied().unwrap_or(3);
    let runtime = runtime();

    let broker = Broker::start().expect("start a RabbitMQ node");
    let host_perms = [
        r"^(hcp\.|amq\.gen-).*",
        r"^(hcp\.|amq\.default$).*",
        r"^hcp\..*",
    ];
    let own = format!(r"^{}\..*", CALLER.replace('.', r"\."));
    let caller_perms = [own.as_str(), r"^amq\.default$", own.as_str()];
    broker
        .add_user_with("hcp-host", "hcp-host-secret", host_perms)
        .expect("host user");
    broker
        .add_user_with(CALLER, "caller-secret", caller_perms)
        .expect("caller user");
    let host_url = broker.url("hcp-host", "hcp-host-secret");
    let caller_url = broker.url(CALLER, "caller-secret");
    let policy_dir = tempfile::tempdir().expect("tempdir");
    policies(policy_dir.path());
    let policy_dir: PathBuf = policy_dir.path().to_path_buf();

    println!(
        "amqp_load: {tasks} R1 tasks (document-analysis) per run, {callers} concurrent callers, \
         {rounds} interleaved rounds, {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    // Warm the compiled-code cache once (every host shares it).
    {
        let warm = serve(&policy_dir, None);
        let _ = http(&warm, callers, callers, "warm");
    }
    let (mut over_http, mut one, mut two) =
        (Figures::default(), Figures::default(), Figures::default());
    for round in 0..rounds {
        {
            let host = serve(&policy_dir, None);
            let (e, l) = http(&host, tasks, callers, &format!("http-{round}"));
            over_http.add(e, l);
        }
        {
            let _host = serve(&policy_dir, Some(&host_url));
            let (e, l) = runtime.block_on(amqp(
                &caller_url,
                1,
                tasks,
                callers,
                &format!("amqp1-{round}"),
            ));
            one.add(e, l);
        }
        {
            let _a = serve(&policy_dir, Some(&host_url));
            let _b = serve(&policy_dir, Some(&host_url));
            let (e, l) = runtime.block_on(amqp(
                &caller_url,
                2,
                tasks,
                callers,
                &format!("amqp2-{round}"),
            ));
            two.add(e, l);
        }
        println!("round {} of {rounds} done", round + 1);
    }
    over_http.print("http, 1 host", &over_http);
    one.print("amqp, 1 host", &over_http);
    two.print("amqp, 2 hosts", &over_http);
}
