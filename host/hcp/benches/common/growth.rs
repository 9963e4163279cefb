//! The growth benchmark's code (`benches/growth.rs`, and scaled down in CI
//! by `tests/serve/growth.rs`): a store filled to N tasks through the real
//! writer, measured side by side with an empty store in the same run.
//!
//! The fill runs R1 tasks (the seed's document-analysis example) through
//! the engine as `hcp serve` does (`Host::submit`, `Host::run_task`), many
//! clients at once, so that the receipt writer commits them in batches as
//! it does under load: every row, receipt, message and index entry of a
//! task is written by the host's own code, and whatever it stores per
//! task (archive, prune, what a receipt holds) the fill follows.
//!
//! Measured on each store ([`measure`]), each figure as `hcp serve` meets
//! it: the startup (the store's startup check, then `Host::open`), one
//! client's R1 tasks (p50), eight clients' (tasks/s), the query of
//! `GET /v1/tasks` (a caller's 100 newest, and an operator's), the queue of
//! approvals of `GET /v1/approvals` (the expiry pass, then the waiting
//! tasks), and the size of `hcp.db` (with its write-ahead log).
//!
//! [`steady`] runs the other question, the disk at a steady load: rounds
//! of tasks, each followed by the archive run a retention setting makes
//! (everything settled before the round archived and pruned), and the
//! store's size after each.

use super::common::{example, in_process_task, open_host, open_host_with};
use hcp::engine::{Host, HostConfig, HostPaths};
use hcp::store::TaskState;
use hcp_tests::{REPO_ROOT, cache_dir};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The caller of the tasks (`common::LOCAL`'s, policies/callers.json).
pub(crate) const CALLER: &str = "harness-local-01";

/// How many tasks one measure of each figure runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    /// One client's tasks, one after another.
    pub one: usize,
    /// Eight clients' tasks.
    pub eight: usize,
    /// Runs of each query.
    pub queries: usize,
}

/// What [`measure`] found on one store.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    /// Tasks the store held before the measure.
    pub tasks: u64,
    /// The startup check (`durable::check_at_startup`).
    pub check: Duration,
    /// `Host::open` after it.
    pub open: Duration,
    /// One client's R1 task, p50.
    pub one_p50: Duration,
    /// Eight clients' tasks per second.
    pub eight_rate: f64,
    /// A caller's 100 newest tasks (`GET /v1/tasks`), p50.
    pub list_caller: Duration,
    /// An operator's 100 newest tasks (`GET /v1/tasks`), p50.
    pub list_operator: Duration,
    /// The approvals' queue (`GET /v1/approvals`), p50.
    pub approvals: Duration,
    /// `hcp.db` and its write-ahead log, bytes.
    pub db_bytes: u64,
}

fn paths(data: &Path) -> HostPaths {
    HostPaths {
        data_dir: data.to_path_buf(),
        cache_dir: cache_dir(),
        policies_dir: Path::new(REPO_ROOT).join("policies"),
    }
}

/// A host on `data`, document-analysis installed the first time.
fn host(data: &Path) -> Arc<Host> {
    if data.join("hcp.db").exists() {
        Arc::new(Host::open(paths(data), HostConfig::default()).expect("open host"))
    } else {
        open_host(data)
    }
}

/// Fills the store of `data` with `tasks` more R1 tasks, `clients` at a
/// time through the engine; the tasks per second of the fill.
pub(crate) fn fill(
    runtime: &tokio::runtime::Runtime,
    data: &Path,
    tasks: usize,
    clients: usize,
) -> f64 {
    let host = host(data);
    let start = Instant::now();
    run_tasks(runtime, &host, tasks, clients, "fill");
    let rate = tasks as f64 / start.elapsed().as_secs_f64();
    drop(host);
    rate
}

/// Runs `tasks` tasks, `clients` at a time; each task's time to its final
/// answer.
fn run_tasks(
    runtime: &tokio::runtime::Runtime,
    host: &Arc<Host>,
    tasks: usize,
    clients: usize,
    prefix: &str,
) -> Vec<Duration> {
    let prefix = format!("{prefix}-{}", uuid::Uuid::new_v4());
    runtime.block_on(async {
        let mut handles = Vec::new();
        for c in 0..clients {
            let host = host.clone();
            let prefix = prefix.clone();
            handles.push(tokio::spawn(async move {
                let mut out = Vec::new();
                for i in (c..tasks).step_by(clients) {
                    // A task that fails (a write that waited out the lock
                    // under an I/O stall of the machine fails its task,
                    // closed) is counted, not the end of a fill of hours.
                    let (h, message) = (host.clone(), example(&format!("{prefix}-{i}")));
                    let task = tokio::spawn(async move { in_process_task(&h, message).await });
                    match task.await {
                        Ok((_, wall, _)) => out.push(wall),
                        Err(e) => eprintln!("{prefix}: task {i} failed: {e}"),
                    }
                }
                out
            }));
        }
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await.expect("client"));
        }
        all
    })
}

/// The median of `runs` runs of `f`.
fn timed(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The bytes of `hcp.db` and its write-ahead log.
pub(crate) fn db_bytes(data: &Path) -> u64 {
    ["hcp.db", "hcp.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(data.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

/// Measures the store of `data` (no host may have it open).
pub(crate) fn measure(runtime: &tokio::runtime::Runtime, data: &Path, sizes: Sizes) -> Figures {
    let db_bytes = db_bytes(data);
    // The startup of `hcp serve` before it listens: the store's check,
    // then the host (the store, its schema, the receipt log, the
    // capabilities, the policies).
    let check = timed(3, || {
        hcp::store::durable::check_at_startup(data).expect("startup check");
    });
    let open = timed(3, || {
        drop(Host::open(paths(data), HostConfig::default()).expect("open host"));
    });
    let host = host(data);
    let tasks: i64 = host
        .store
        .db()
        .query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
        .expect("count the tasks");
    let tasks = u64::try_from(tasks).expect("a count");
    let mut one = run_tasks(runtime, &host, sizes.one, 1, "one");
    one.sort();
    let one_p50 = one[one.len() / 2];
    let start = Instant::now();
    run_tasks(runtime, &host, sizes.eight, 8, "eight");
    let eight_rate = sizes.eight as f64 / start.elapsed().as_secs_f64();
    let list_caller = timed(sizes.queries, || {
        let listed = host
            .store
            .tasks_of(Some(CALLER), None, 100)
            .expect("a caller's tasks");
        assert!(!listed.is_empty());
    });
    let list_operator = timed(sizes.queries, || {
        let listed = host
            .store
            .tasks_of(None, None, 100)
            .expect("everybody's tasks");
        assert!(!listed.is_empty());
    });
    let approvals = timed(sizes.queries, || {
        host.expire_approvals().expect("expiry");
        for t in host
            .store
            .tasks(Some(TaskState::PendingApproval), usize::MAX)
            .expect("waiting tasks")
        {
            host.store.approval(&t.task_id).expect("approval");
        }
    });
    drop(host);
    Figures {
        tasks,
        check,
        open,
        one_p50,
        eight_rate,
        list_caller,
        list_operator,
        approvals,
        db_bytes,
    }
}

/// The store after one round of [`steady`].
#[derive(Debug, Clone)]
pub(crate) struct SteadyRound {
    /// Tasks run so far, this round's included.
    pub tasks_run: usize,
    /// Tasks the hot store holds after the round's archive run.
    pub hot_tasks: u64,
    /// `hcp.db` and its write-ahead log (after a checkpoint of the log).
    pub db_bytes: u64,
    /// The pages of `hcp.db` in use (its size less its free pages).
    pub used_bytes: u64,
    /// The archive packs written so far.
    pub pack_bytes: u64,
}

/// The disk at a steady load: `rounds` rounds of `per_round` R1 tasks
/// (`clients` at a time) on the store of `data`, each round followed by the
/// archive run of a retention that keeps one round hot (the policy's
/// `budgets.json` with a `retention`, `Host::archive_due` at the time the
/// retention makes the round's start the cutoff), then the store measured.
pub(crate) fn steady(
    runtime: &tokio::runtime::Runtime,
    data: &Path,
    rounds: usize,
    per_round: usize,
    clients: usize,
) -> Vec<SteadyRound> {
    const HOT_SECONDS: u64 = 3600;
    let policies = data.with_extension("policies");
    copy_dir(&Path::new(REPO_ROOT).join("policies"), &policies);
    let budgets = policies.join("budgets.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&budgets).expect("budgets.json"))
            .expect("budgets.json is JSON");
    doc["retention"] = serde_json::json!({ "hot_seconds": HOT_SECONDS });
    std::fs::write(&budgets, serde_json::to_vec_pretty(&doc).expect("JSON")).expect("budgets");
    let host = open_host_with(data, &policies);
    let mut out = Vec::new();
    for round in 0..rounds {
        // The cutoff lies between the last round's settlements and this
        // round's first submission (times are kept to the millisecond).
        std::thread::sleep(Duration::from_millis(5));
        let cutoff = time::OffsetDateTime::now_utc();
        std::thread::sleep(Duration::from_millis(5));
        run_tasks(runtime, &host, per_round, clients, "steady");
        let now = cutoff + time::Duration::seconds(HOT_SECONDS as i64);
        host.archive_due(now, usize::MAX).expect("archive run");
        let db = host.store.db();
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .expect("checkpoint the log");
        let pragma = |name: &str| -> u64 {
            let v: i64 = db
                .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .expect("pragma");
            u64::try_from(v).expect("a count")
        };
        let used_bytes = (pragma("page_count") - pragma("freelist_count")) * pragma("page_size");
        let hot: i64 = db
            .query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
            .expect("count the tasks");
        drop(db);
        let pack_bytes = std::fs::read_dir(data.join("archive"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        out.push(SteadyRound {
            tasks_run: (round + 1) * per_round,
            hot_tasks: u64::try_from(hot).expect("a count"),
            db_bytes: db_bytes(data),
            used_bytes,
            pack_bytes,
        });
    }
    drop(host);
    out
}

/// Copies the files of `from` (one level: a policy directory) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("policy directory");
    for entry in std::fs::read_dir(from).expect("policies") {
        let entry = entry.expect("a policy file");
        if entry.file_type().expect("file type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a policy file");
        }
    }
}
