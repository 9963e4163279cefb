//! Growth: does a host stay as fast with a large store as with an empty
//! one? A store is filled to N tasks through the real writer (R1 tasks
//! through the engine, many clients at once: `common/growth.rs`), then it
//! and an empty store are measured side by side, in interleaved rounds:
//! startup, one client's R1 p50, eight clients' tasks/s, the query of
//! `GET /v1/tasks`, the approvals' queue, the size of `hcp.db`.
//!
//! ```sh
//! cargo bench -p hcp --bench growth -- 100000        # tasks in the large store
//! cargo bench -p hcp --bench growth -- 100000 3      # tasks, rounds
//! HCP_BENCH_DIR=/big/disk cargo bench -p hcp --bench growth -- 1000000
//! cargo bench -p hcp --bench growth -- --steady 20 2000  # rounds, tasks a round
//! cargo bench -p hcp --bench growth -- --store DIR 3     # measure a data directory filled before
//! ```
//!
//! `--store DIR` measures the data directory DIR as it is (a store filled
//! by an earlier run, which was stopped, or a copy of a real host's: the
//! measure runs tasks in it) beside an empty store, with no fill.
//!
//! `--steady` measures the disk at a steady load instead: rounds of tasks,
//! each followed by the archive run of a retention that keeps the last
//! round hot, and the store's size after each (`common/growth.rs`,
//! `steady`): bounded by the retention, it stops growing.
//!
//! The stores are made in `HCP_BENCH_DIR` (default: `target/growth`, on
//! the disk, not a memory file system) and deleted at the end. An R1
//! task takes about 20 KB there: mind the disk before a large N.
//!
//! Ends with `row | ...` lines, each figure of the large store next to
//! the empty one's and their ratio (target: within 1.1x).

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

mod common;
#[path = "common/growth.rs"]
mod growth;

use common::{median, runtime};
use growth::{Figures, Sizes, fill, measure, steady};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let steady_load = argv.iter().any(|a| a == "--steady");
    let given = argv
        .iter()
        .position(|a| a == "--store")
        .map(|i| argv.get(i + 1).map(PathBuf::from));
    let given = match given {
        Some(None) => {
            eprintln!("growth: --store needs a data directory");
            std::process::exit(2);
        }
        Some(Some(dir)) if !dir.join("hcp.db").is_file() => {
            eprintln!("growth: --store {}: no hcp.db there", dir.display());
            std::process::exit(2);
        }
        Some(Some(dir)) => Some(dir),
        None => None,
    };
    let args: Vec<usize> = argv.iter().filter_map(|a| a.parse().ok()).collect();
    let (tasks, rounds) = if given.is_some() {
        (0, args.first().copied().unwrap_or(3).max(1))
    } else {
        (
            args.first().copied().unwrap_or(100_000).max(1),
            args.get(1).copied().unwrap_or(3).max(1),
        )
    };
    let sizes = Sizes {
        one: 100,
        eight: 400,
        queries: 50,
    };
    let root = std::env::var_os("HCP_BENCH_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/growth"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&root).expect("bench directory");
    let dir = tempfile::tempdir_in(&root).expect("bench directory");
    let empty = dir.path().join("empty");
    let large = given.clone().unwrap_or_else(|| dir.path().join("large"));
    let runtime = runtime();
    if steady_load {
        let rounds = args.first().copied().unwrap_or(20).max(2);
        let per_round = args.get(1).copied().unwrap_or(2000).max(1);
        return steady_rows(&runtime, &large, rounds, per_round);
    }
    // The empty store gets its capability installed (and the compiled
    // code's cache warmed) by one task, as the large one by its first.
    fill(&runtime, &empty, 8, 8);
    if let Some(dir) = &given {
        println!(
            "growth: an empty store and the store of {} as it is, {rounds} round(s), {} cores",
            dir.display(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    } else {
        println!(
            "growth: an empty store and one of {tasks} R1 tasks (document-analysis), {rounds} round(s), {} cores",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        let t0 = Instant::now();
        let rate = fill(&runtime, &large, tasks, 32);
        let bytes = growth::db_bytes(&large);
        println!(
            "fill         {tasks} tasks in {:.0} s ({rate:.0} tasks/s, 32 clients), hcp.db {:.1} MB, {:.1} KB per task",
            t0.elapsed().as_secs_f64(),
            bytes as f64 / 1e6,
            bytes as f64 / tasks as f64 / 1e3,
        );
    }
    let (mut e, mut l) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let a = measure(&runtime, &empty, sizes);
        let b = measure(&runtime, &large, sizes);
        print(round, &a);
        print(round, &b);
        e.push(a);
        l.push(b);
    }
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let rows: [(&str, Figure, &str); 8] = [
        ("startup check", &|f| ms(f.check), "ms"),
        ("startup Host::open", &|f| ms(f.open), "ms"),
        ("R1 p50, 1 client", &|f| ms(f.one_p50), "ms"),
        ("tasks/s, 8 clients", &|f| f.eight_rate, "tasks/s"),
        (
            "GET /v1/tasks query, a caller's 100",
            &|f| ms(f.list_caller),
            "ms",
        ),
        (
            "GET /v1/tasks query, operator's 100",
            &|f| ms(f.list_operator),
            "ms",
        ),
        ("GET /v1/approvals queue", &|f| ms(f.approvals), "ms"),
        ("hcp.db + WAL", &|f| f.db_bytes as f64 / 1e6, "MB"),
    ];
    let held = l.first().map_or(0, |f| f.tasks);
    for (name, figure, unit) in rows {
        let a = median(e.iter().map(figure).collect());
        let b = median(l.iter().map(figure).collect());
        println!(
            "row | growth: {name} | {held} tasks {b:.3} {unit} | empty {a:.3} {unit} | {:.2}x |",
            b / a
        );
    }
}

/// `--steady`: the store's size round after round, and whether it stopped
/// growing (the last round's pages in use against the second's).
fn steady_rows(
    runtime: &tokio::runtime::Runtime,
    data: &std::path::Path,
    rounds: usize,
    per_round: usize,
) {
    println!(
        "growth --steady: {rounds} rounds of {per_round} R1 tasks, each followed by the archive run of a retention keeping one round hot"
    );
    let t0 = Instant::now();
    let all = steady(runtime, data, rounds, per_round, 32);
    for r in &all {
        println!(
            "after {:>9} tasks  hot tasks {:>7}  hcp.db + WAL {:>9.1} MB  pages in use {:>9.1} MB  packs {:>9.1} MB",
            r.tasks_run,
            r.hot_tasks,
            r.db_bytes as f64 / 1e6,
            r.used_bytes as f64 / 1e6,
            r.pack_bytes as f64 / 1e6,
        );
    }
    println!("{:.0} s", t0.elapsed().as_secs_f64());
    if let (Some(second), Some(last)) = (all.get(1), all.last()) {
        let grew = last.used_bytes as f64 - second.used_bytes as f64;
        let tasks = (last.tasks_run - second.tasks_run) as f64;
        println!(
            "row | growth --steady: hot store after {} tasks | pages in use {:.1} MB, file {:.1} MB | after {} tasks: {:.1} MB, {:.1} MB | {:.2}x, {:.0} bytes per task run since |",
            last.tasks_run,
            last.used_bytes as f64 / 1e6,
            last.db_bytes as f64 / 1e6,
            second.tasks_run,
            second.used_bytes as f64 / 1e6,
            second.db_bytes as f64 / 1e6,
            last.used_bytes as f64 / second.used_bytes as f64,
            grew / tasks,
        );
    }
}

/// One figure of a store's measure.
type Figure<'a> = &'a dyn Fn(&Figures) -> f64;

fn print(round: usize, f: &Figures) {
    println!(
        "round {round} {:>9} tasks  startup check {:>7.2} ms, open {:>7.2} ms  R1 p50 {:>6.2} ms  8 clients {:>6.1} tasks/s  list {:>6.3} / {:>6.3} ms  approvals {:>6.3} ms  hcp.db {:>9.1} MB",
        f.tasks,
        f.check.as_secs_f64() * 1e3,
        f.open.as_secs_f64() * 1e3,
        f.one_p50.as_secs_f64() * 1e3,
        f.eight_rate,
        f.list_caller.as_secs_f64() * 1e3,
        f.list_operator.as_secs_f64() * 1e3,
        f.approvals.as_secs_f64() * 1e3,
        f.db_bytes as f64 / 1e6,
    );
}
