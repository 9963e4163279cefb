//! Where one R1 task's time goes: the seed's document-analysis task, run
//! in process one after another (one client, or each of several clients
//! one after another), with the host's phase spans (`tracing` target
//! `hcp::phase`, off unless a subscriber asks for them) timed from their
//! creation to their close.
//!
//! ```sh
//! cargo bench -p hcp --bench task_path            # 300 tasks
//! cargo bench -p hcp --bench task_path -- 1000    # tasks
//! cargo bench -p hcp --bench task_path -- 800 8   # tasks, clients
//! ```
//!
//! With several clients, a phase's time is still per task (each task's
//! own wait, whatever ran beside it), so the phases show where a task
//! waits when others run at the same time: the slot it waits for (a
//! client whose task finds its capability's slots taken tries again
//! after 1 ms, as `serve_load`'s in-process side does), the receipt
//! writer's queue, the write lock, the CPU.
//!
//! Reported per task: the wall time from `Host::submit` to the answer of
//! `Host::run_task` (p50, p99), then each phase's mean time per task and
//! its share of the mean task. Phases nest (the indentation); the
//! writer's phases run on the receipt writer's thread while the task waits
//! for it (in `gate.receipt`, `run.open` and `run.flush`).

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

mod common;

use common::{example, in_process_task, open_host, runtime};
use hcp::engine::Host;
use hcp_tests::phases::Phases;
use std::sync::Arc;
use std::time::Duration;

/// The phases in the order they are reported, with their depth.
const PHASES: &[(usize, &str)] = &[
    (0, "submit"),
    (1, "submit.record"),
    (1, "submit.check"),
    (1, "gate.capability"),
    (1, "gate.inputs"),
    (1, "gate.policy"),
    (1, "gate.receipt"),
    (1, "gate.record"),
    (1, "accept.token"),
    (1, "accept.record"),
    (0, "run"),
    (1, "run.load"),
    (1, "run.token"),
    (1, "run.claim"),
    (1, "run.check"),
    (1, "run.causes"),
    (1, "run.open"),
    (1, "run.sandbox"),
    (2, "sandbox.setup"),
    (2, "sandbox.instantiate"),
    (2, "sandbox.call"),
    (2, "sandbox.release"),
    (1, "run.flush"),
    (1, "run.answer"),
    (1, "run.settle"),
    (0, "writer.batch"),
    (1, "writer.begin"),
    (1, "writer.messages"),
    (2, "writer.seal"),
    (1, "writer.commit"),
    (1, "writer.mark"),
];

/// Runs `tasks` tasks, `clients` at a time, each client's one after
/// another; their wall times. The two calls of each (`Host::submit` on the
/// blocking pool, as `hcp serve` makes it, and `Host::run_task`) are
/// recorded as the phases `submit` and `run`.
fn run(
    runtime: &tokio::runtime::Runtime,
    host: &Arc<Host>,
    phases: &Phases,
    (tasks, clients): (usize, usize),
    prefix: &str,
) -> (Vec<Duration>, Duration) {
    runtime.block_on(async {
        let start = std::time::Instant::now();
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let host = host.clone();
                let phases = phases.clone();
                let prefix = prefix.to_owned();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for i in (c..tasks).step_by(clients) {
                        let (submitted, wall, _) =
                            in_process_task(&host, example(&format!("{prefix}-{i}"))).await;
                        phases.add("submit", submitted);
                        phases.add("run", wall - submitted);
                        out.push(wall);
                    }
                    out
                })
            })
            .collect();
        let mut out = Vec::with_capacity(tasks);
        for h in handles {
            out.extend(h.await.expect("client"));
        }
        (out, start.elapsed())
    })
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let tasks = args.first().copied().unwrap_or(300).max(1);
    let clients = args.get(1).copied().unwrap_or(1).max(1);
    let phases = Phases::default();
    tracing::subscriber::set_global_default(phases.subscriber()).expect("subscriber");
    let runtime = runtime();
    let data = tempfile::tempdir().expect("tempdir");
    let host = open_host(data.path());
    // Warm: compile (or load) the component, fill caches.
    run(&runtime, &host, &phases, (20.max(clients), clients), "warm");
    phases.take();
    let (mut walls, elapsed) = run(&runtime, &host, &phases, (tasks, clients), "task");
    let spans = phases.take();
    walls.sort();
    let mean = walls.iter().sum::<Duration>() / u32::try_from(tasks).unwrap_or(u32::MAX);
    let pct = |p: f64| walls[((walls.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "task_path: {tasks} R1 tasks (document-analysis) in process, {clients} client(s), {} cores, {:.1} tasks/s",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        tasks as f64 / elapsed.as_secs_f64()
    );
    println!(
        "task wall time: mean {:.0} µs, p50 {:.0} µs, p99 {:.0} µs",
        us(mean),
        us(pct(0.5)),
        us(pct(0.99))
    );
    println!(
        "{:<28} {:>8} {:>12} {:>12} {:>8}",
        "phase", "per task", "mean µs", "p50 µs", "share"
    );
    for (depth, name) in PHASES {
        let Some(times) = spans.get(name) else {
            println!("{:<28} (no span)", format!("{}{name}", "  ".repeat(*depth)));
            continue;
        };
        let total: Duration = times.iter().sum();
        let mut sorted = times.clone();
        sorted.sort();
        let per_task = us(total) / tasks as f64;
        println!(
            "{:<28} {:>8.2} {:>12.1} {:>12.1} {:>7.1}%",
            format!("{}{name}", "  ".repeat(*depth)),
            times.len() as f64 / tasks as f64,
            per_task,
            us(sorted[sorted.len() / 2]),
            100.0 * per_task / us(mean),
        );
    }
    for name in spans.keys() {
        if !PHASES.iter().any(|(_, n)| n == name) {
            println!("(unlisted phase {name})");
        }
    }
}
