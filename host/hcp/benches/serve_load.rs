//! Load through `hcp serve`: R1 tasks (the seed's document-analysis example)
//! driven over HTTP with keep-alive, next to the same tasks run in-process
//! through the same engine without HTTP, side by side on the same machine.
//!
//! ```sh
//! cargo bench -p hcp --bench serve_load            # 400 tasks, 8 clients
//! cargo bench -p hcp --bench serve_load -- 1000 16 # tasks, clients
//! cargo bench -p hcp --bench serve_load -- 200 1 5  # tasks, clients, rounds
//! ```
//!
//! With several rounds, each runs the in-process side and then the HTTP
//! side (interleaved, so both see the same machine), and the ratios are
//! the medians of the per-round ratios.
//!
//! Each client submits a task (`POST /v1/tasks`) and follows it to its final
//! answer on the task's event stream (`GET /v1/tasks/{id}/events`), then
//! sends the next; latency is from the submission to the final answer. The
//! in-process baseline does the same with `Host::submit` and
//! `Host::run_task`, with as many concurrent clients. Both use a fresh data
//! directory (SQLite on disk) and the same compiled-code cache. Each HTTP
//! side also reports its floor: the median round trip of `GET /healthz`,
//! a request that does no work, with the same client on a kept-alive
//! connection (what each of a task's requests costs before the host's own
//! work).

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

mod common;

use common::{agent, example, http_task, in_process_task, median, open_host, range, runtime};
use std::time::{Duration, Instant};

struct Report {
    tasks: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Report {
    fn throughput(&self) -> f64 {
        self.tasks as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i]
    }

    fn print(&self, name: &str) {
        println!(
            "{name:<12} {:>5} tasks in {:>7.2} s  {:>8.1} tasks/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
            self.tasks,
            self.elapsed.as_secs_f64(),
            self.throughput(),
            self.percentile(0.50).as_secs_f64() * 1e3,
            self.percentile(0.99).as_secs_f64() * 1e3,
        );
    }
}

fn in_process(
    runtime: &tokio::runtime::Runtime,
    tasks: usize,
    clients: usize,
    prefix: &str,
) -> Report {
    let data = tempfile::tempdir().expect("tempdir");
    let host = open_host(data.path());
    let start = Instant::now();
    let latencies = runtime.block_on(async {
        let mut handles = Vec::new();
        for c in 0..clients {
            let host = host.clone();
            let prefix = prefix.to_owned();
            handles.push(tokio::spawn(async move {
                let mut out = Vec::new();
                for i in (c..tasks).step_by(clients) {
                    let m = example(&format!("{prefix}-{i}"));
                    let (_, wall, _) = in_process_task(&host, m).await;
                    out.push(wall);
                }
                out
            }));
        }
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await.expect("client"));
        }
        all
    });
    Report {
        tasks,
        elapsed: start.elapsed(),
        latencies,
    }
}

fn over_http(
    runtime: &tokio::runtime::Runtime,
    tasks: usize,
    clients: usize,
    prefix: &str,
) -> Report {
    let data = tempfile::tempdir().expect("tempdir");
    let host = open_host(data.path());
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(hcp::serve::serve(
        host,
        hcp::serve::ServeConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            ..hcp::serve::ServeConfig::default()
        },
        move |addr| {
            let _ = addr_tx.send(addr);
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("server address");
    let base = format!("http://{addr}");
    let floor = round_trip(&base, Duration::ZERO);
    let idle_floor = round_trip(&base, IDLE);
    let start = Instant::now();
    let latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let base = base.clone();
                s.spawn(move || {
                    // One agent per client: its connection is kept alive.
                    let agent = agent();
                    let mut out = Vec::new();
                    for i in (c..tasks).step_by(clients) {
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
            .flat_map(|h| h.join().expect("client"))
            .collect()
    });
    let elapsed = start.elapsed();
    let _ = stop_tx.send(());
    runtime
        .block_on(server)
        .expect("server task")
        .expect("server");
    println!(
        "http floor   GET /healthz round trip on a kept-alive connection, p50 {:.1} us back to back, {:.1} us after {} us idle",
        floor.as_secs_f64() * 1e6,
        idle_floor.as_secs_f64() * 1e6,
        IDLE.as_micros(),
    );
    Report {
        tasks,
        elapsed,
        latencies,
    }
}

/// How long the floor's second measure leaves the machine idle before each
/// request: about what a task's client and server leave between a task's
/// last event and the next submission, or while the task runs.
const IDLE: Duration = Duration::from_micros(500);

/// The median round trip of a request that does no work (`GET /healthz`)
/// with the clients' HTTP client on a kept-alive connection, each request
/// `idle` after the last answer: what one request costs on this machine
/// before any of the host's own work.
fn round_trip(base: &str, idle: Duration) -> Duration {
    let agent = agent();
    let mut times: Vec<Duration> = (0..300)
        .map(|_| {
            if !idle.is_zero() {
                std::thread::sleep(idle);
            }
            let t0 = Instant::now();
            let mut resp = agent
                .get(format!("{base}/healthz"))
                .call()
                .expect("GET /healthz");
            drop(resp.body_mut().read_to_string());
            t0.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let tasks = args.first().copied().unwrap_or(400).max(1);
    let clients = args.get(1).copied().unwrap_or(8).max(1);
    let rounds = args.get(2).copied().unwrap_or(1).max(1);
    let runtime = runtime();

    // Warm the compiled-code cache and the allocator once.
    let _ = in_process(&runtime, clients, clients, "warm");

    println!(
        "serve_load: {tasks} R1 tasks (document-analysis), {clients} concurrent clients, {rounds} round(s) in process then HTTP, {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let (mut base, mut http) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let b = in_process(&runtime, tasks, clients, &format!("inproc-{round}"));
        b.print("in-process");
        let h = over_http(&runtime, tasks, clients, &format!("http-{round}"));
        h.print("http");
        base.push(b);
        http.push(h);
    }
    let ratios = |f: &dyn Fn(&Report) -> f64| -> Vec<f64> {
        base.iter().zip(&http).map(|(b, h)| f(h) / f(b)).collect()
    };
    let throughput = ratios(&|r| r.throughput());
    let p50 = ratios(&|r| r.percentile(0.50).as_secs_f64());
    let p99 = ratios(&|r| r.percentile(0.99).as_secs_f64());
    println!(
        "ratio http/in-process (median of {rounds}): throughput {:.2}x, p50 {:.2}x, p99 {:.2}x",
        median(throughput.clone()),
        median(p50.clone()),
        median(p99),
    );
    let med = |v: &[Report], f: &dyn Fn(&Report) -> f64| median(v.iter().map(f).collect());
    let ms = |r: &Report| r.percentile(0.50).as_secs_f64() * 1e3;
    if clients == 1 {
        let (lo, hi) = range(&p50);
        println!(
            "row | the same over HTTP, 1 client | HTTP p50 {:.2} ms | in process p50 {:.2} ms | {:.2}x (rounds {lo:.2}x..{hi:.2}x), target <= 1.2x |",
            med(&http, &ms),
            med(&base, &ms),
            median(p50),
        );
    } else {
        let (b, h) = (
            med(&base, &Report::throughput),
            med(&http, &Report::throughput),
        );
        let (lo, hi) = range(&throughput);
        println!(
            "row | {clients} clients, in process / HTTP | in process {b:.1} tasks/s, {:.3}x the target 1,000 | HTTP {h:.1} tasks/s, {:.3}x the target 800 | HTTP/in process {:.2}x (rounds {lo:.2}x..{hi:.2}x) |",
            b / 1000.0,
            h / 800.0,
            median(throughput),
        );
    }
}
