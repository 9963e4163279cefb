//! An R1 tool call over MCP (Streamable HTTP, `/mcp`) side by side with the
//! same task over the HTTP API, on one server in one run: p50, p99,
//! tasks/s, and their ratios (target: MCP within 1.2x of the HTTP API).
//!
//! ```sh
//! cargo bench -p hcp --bench mcp_load             # 400 tasks, 8 clients, 3 rounds
//! cargo bench -p hcp --bench mcp_load -- 200 1 5  # tasks, clients, rounds
//! ```
//!
//! Each round runs the HTTP API side, then the MCP side, on the same
//! server (interleaved, so both see the same machine and the same store).
//! HTTP API: `POST /v1/tasks`, then the task's event stream to its final
//! answer (`common::http_task`). MCP: one `tools/call` of
//! document-analysis with the seed's inputs, as a 2026-07-28 client sends
//! it, whose answer (a server-sent event stream) carries the result.
//! Latency is from the request to the final answer; each client keeps its
//! connection alive.

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

mod common;

use common::{LOCAL, agent, example, http_task, median, open_host, runtime};
use serde_json::{Value, json};
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
            "{name:<10} {:>5} tasks in {:>7.2} s  {:>8.1} tasks/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
            self.tasks,
            self.elapsed.as_secs_f64(),
            self.throughput(),
            self.percentile(0.50).as_secs_f64() * 1e3,
            self.percentile(0.99).as_secs_f64() * 1e3,
        );
    }
}

/// One `tools/call` over `/mcp`, which must complete.
fn mcp_task(agent: &ureq::Agent, base: &str, message_id: &str, inputs: &Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "document-analysis",
    "arguments": inputs,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "hcp/message_id": message_id,
        "hcp/constraints": {"data_classification": "T1"},
    }}});
    let mut resp = agent
        .post(format!("{base}/mcp"))
        .header("Authorization", format!("Bearer {LOCAL}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "document-analysis")
        .send(body.to_string().as_bytes())
        .expect("POST /mcp");
    assert_eq!(resp.status().as_u16(), 200);
    let text = resp.body_mut().read_to_string().expect("answer");
    assert!(
        text.contains("\"isError\":false") && text.contains("\"findings\""),
        "the call did not complete: {text}"
    );
}

/// `clients` clients running `tasks` tasks with `one`, each on its own
/// kept-alive connection.
fn drive(tasks: usize, clients: usize, one: &(dyn Fn(&ureq::Agent, usize) + Sync)) -> Report {
    let start = Instant::now();
    let latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || {
                    let agent = agent();
                    (c..tasks)
                        .step_by(clients)
                        .map(|i| {
                            let t0 = Instant::now();
                            one(&agent, i);
                            t0.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client"))
            .collect()
    });
    Report {
        tasks,
        elapsed: start.elapsed(),
        latencies,
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let tasks = args.first().copied().unwrap_or(400).max(1);
    let clients = args.get(1).copied().unwrap_or(8).max(1);
    let rounds = args.get(2).copied().unwrap_or(3).max(1);
    let runtime = runtime();
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
    let inputs = example("inputs")["payload"]["inputs"].clone();

    // Warm the compiled-code cache and both paths once.
    let _ = drive(clients, clients, &|a, i| {
        http_task(a, &base, &example(&format!("warm-http-{i}")));
        mcp_task(a, &base, &format!("warm-mcp-{i}"), &inputs);
    });
    println!(
        "mcp_load: {tasks} R1 tasks (document-analysis), {clients} concurrent clients, {rounds} round(s) HTTP API then MCP, {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let (mut api, mut mcp) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let a = drive(tasks, clients, &|agent, i| {
            http_task(agent, &base, &example(&format!("api-{round}-{i}")));
        });
        a.print("http api");
        let m = drive(tasks, clients, &|agent, i| {
            mcp_task(agent, &base, &format!("mcp-{round}-{i}"), &inputs);
        });
        m.print("mcp");
        api.push(a);
        mcp.push(m);
    }
    let ratios = |f: &dyn Fn(&Report) -> f64| -> f64 {
        median(api.iter().zip(&mcp).map(|(a, m)| f(m) / f(a)).collect())
    };
    let med = |v: &[Report], f: &dyn Fn(&Report) -> f64| median(v.iter().map(f).collect());
    let p50 = |r: &Report| r.percentile(0.50).as_secs_f64() * 1e3;
    let p99 = |r: &Report| r.percentile(0.99).as_secs_f64() * 1e3;
    println!(
        "ratio mcp/http api (median of {rounds}): p50 {:.2}x, p99 {:.2}x, throughput {:.2}x (target: latency <= 1.2x)",
        ratios(&|r| r.percentile(0.50).as_secs_f64()),
        ratios(&|r| r.percentile(0.99).as_secs_f64()),
        ratios(&|r| r.throughput()),
    );
    println!(
        "row | an R1 tool call over MCP (HTTP), {clients} clients | MCP p50 {:.2} ms, p99 {:.2} ms, {:.0} tasks/s | HTTP API p50 {:.2} ms, p99 {:.2} ms, {:.0} tasks/s | target <= 1.2x |",
        med(&mcp, &p50),
        med(&mcp, &p99),
        med(&mcp, &|r| r.throughput()),
        med(&api, &p50),
        med(&api, &p99),
        med(&api, &|r| r.throughput()),
    );
    let _ = stop_tx.send(());
    let _ = runtime.block_on(server);
}
