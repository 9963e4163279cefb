//! Containment holds at run time: a task that replaces a directory another
//! grant names (with a link to `/etc`, a dangling link, or a directory of
//! its own) redirects nothing. The grant's next task fails with
//! `resource_unavailable`, naming what is wrong, and runs again once the
//! directory is back. And bytes written through the filesystem count
//! against the byte budget.

mod common;

use common::ProbeTask;
use hcp_contracts::message::ErrorCode;
use hcp_sandbox::pep::{BudgetCaps, MemorySink, UNLIMITED};
use hcp_sandbox::{
    MemoryStore, PreparedCapability, RunFailure, RunResult, Sandbox, SandboxConfig, TaskRun,
    TaskStore,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

static SANDBOX: LazyLock<Sandbox> =
    LazyLock::new(|| common::sandbox(SandboxConfig::default().pool_instances));

/// The probe granted `grants` (a `/grants/filesystem` array), from a
/// manifest in its own directory under `base`.
fn probe(base: &Path, name: &str, grants: Value) -> PreparedCapability {
    let dir = base.join(format!("manifest-{name}"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let manifest = hcp_tests::probe_granting_files(grants)
        .set("/limits/memory_bytes", json!(64 << 20))
        .load(&dir);
    SANDBOX.prepare(Arc::new(manifest)).expect("probe prepares")
}

async fn run_with(
    prepared: &PreparedCapability,
    inputs: Value,
    budget_bytes: u64,
    sink: Arc<MemorySink>,
) -> TaskRun {
    let task = ProbeTask {
        task_id: "task-1",
        session_id: "session-1",
        intent: "probe the containment",
        deadline: Duration::from_secs(60),
    };
    let budgets = BudgetCaps {
        artifacts: UNLIMITED,
        bytes: budget_bytes,
        host_calls: UNLIMITED,
    };
    let governor = task.governor(prepared, &Default::default(), budgets, 120_000, sink);
    let request = task.request(inputs, Default::default(), governor);
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    prepared.run(request, store).await
}

async fn run(prepared: &PreparedCapability, inputs: Value) -> TaskRun {
    run_with(prepared, inputs, UNLIMITED, Arc::new(MemorySink::new())).await
}

/// The outputs of a task that completed.
fn completed(run: &TaskRun) -> &Value {
    match &run.result {
        RunResult::Completed { outputs, .. } => outputs,
        RunResult::Failed(f) => panic!("the task failed: {f:?}"),
    }
}

fn failed(run: &TaskRun) -> &RunFailure {
    match &run.result {
        RunResult::Failed(f) => f,
        RunResult::Completed { outputs, .. } => panic!("the task completed: {outputs}"),
    }
}

/// `../` enough times to climb from `dir` to `/`, then `etc`.
fn up_to_etc(dir: &Path) -> String {
    let depth = dir.components().count() - 1;
    format!("{}etc", "../".repeat(depth))
}

/// `<tmp>/shared` granted read-write to one capability; `<tmp>/shared/sub`
/// read-only to another (two manifests: one manifest cannot grant both).
struct Pair {
    _tmp: tempfile::TempDir,
    shared: PathBuf,
    writer: PreparedCapability,
    reader: PreparedCapability,
}

impl Pair {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        let shared = base.join("shared");
        std::fs::create_dir_all(shared.join("sub")).expect("mkdir");
        std::fs::write(shared.join("sub/note.txt"), "granted note").expect("write");
        let writer = probe(
            &base,
            "writer",
            json!([{"path": shared, "guest_path": "/rw", "access": "read-write"}]),
        );
        let reader = probe(
            &base,
            "reader",
            json!([{"path": shared.join("sub"), "guest_path": "/sub", "access": "read-only"}]),
        );
        Self {
            _tmp: tmp,
            shared,
            writer,
            reader,
        }
    }

    /// The writer's task runs `actions`; each must succeed.
    async fn write(&self, actions: Value) {
        let run = run(&self.writer, json!({"action": "each", "actions": actions})).await;
        let reports = completed(&run)["value"]
            .as_array()
            .expect("reports")
            .clone();
        for r in reports {
            assert_eq!(r["ok"], true, "{r}");
        }
    }

    async fn read(&self, path: &str) -> TaskRun {
        run(&self.reader, json!({"action": "read_file", "path": path})).await
    }

    /// What the reader's caller is told: the guest path, never the host's
    /// (the operator's log has it).
    fn unavailable(&self, why: &str) -> String {
        format!("granted directory /sub is unavailable: {why}")
    }
}

#[tokio::test]
async fn a_link_planted_by_another_task_redirects_no_grant() {
    let pair = Pair::new();
    let before = pair.read("/sub/note.txt").await;
    assert_eq!(completed(&before)["value"], "granted note");

    // The attack of issue 12: the writer swaps the reader's directory for a
    // link to the host's /etc.
    pair.write(json!([
        {"action": "remove", "path": "/rw/sub/note.txt"},
        {"action": "remove_dir", "path": "/rw/sub"},
        {"action": "symlink", "preopen": "/rw", "target": up_to_etc(&pair.shared), "name": "sub"}
    ]))
    .await;
    assert_eq!(
        std::fs::canonicalize(pair.shared.join("sub")).expect("link"),
        Path::new("/etc")
    );
    let run = pair.read("/sub/passwd").await;
    let f = failed(&run);
    assert_eq!(f.code, ErrorCode::ResourceUnavailable);
    let link = "its host directory, or a directory on the way to it, is a symbolic link \
                (granted directories are opened without following links)";
    assert_eq!(f.message, pair.unavailable(link));

    // A dangling link: the same clear failure, and only for this grant.
    pair.write(json!([
        {"action": "remove", "path": "/rw/sub"},
        {"action": "symlink", "preopen": "/rw", "target": "gone", "name": "sub"}
    ]))
    .await;
    let run = pair.read("/sub/note.txt").await;
    let f = failed(&run);
    assert_eq!(f.code, ErrorCode::ResourceUnavailable);
    assert_eq!(f.message, pair.unavailable(link));
    // The writer's own grant is unaffected.
    pair.write(json!([{"action": "list_dir", "path": "/rw"}]))
        .await;
}

#[tokio::test]
async fn a_directory_swapped_for_another_is_not_the_grant() {
    let pair = Pair::new();
    pair.write(json!([
        {"action": "rename", "from": "/rw/sub", "to": "/rw/kept"},
        {"action": "mkdir", "path": "/rw/sub"},
        {"action": "write_file", "path": "/rw/sub/note.txt", "content": "planted"}
    ]))
    .await;
    let run = pair.read("/sub/note.txt").await;
    let f = failed(&run);
    assert_eq!(f.code, ErrorCode::ResourceUnavailable);
    assert_eq!(
        f.message,
        pair.unavailable(
            "it is not the directory recorded for this grant (the operator must reinstall \
             the capability to grant the new one)"
        )
    );

    // Put back, the granted directory serves its tasks again.
    pair.write(json!([
        {"action": "remove", "path": "/rw/sub/note.txt"},
        {"action": "remove_dir", "path": "/rw/sub"},
        {"action": "rename", "from": "/rw/kept", "to": "/rw/sub"}
    ]))
    .await;
    let run = pair.read("/sub/note.txt").await;
    assert_eq!(completed(&run)["value"], "granted note");
}

const MIB: u64 = 1 << 20;

/// The probe granted `<tmp>/out` read-write at `/out`.
fn writer() -> (tempfile::TempDir, PathBuf, PreparedCapability) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let out = base.join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let prepared = probe(
        &base,
        "out",
        json!([{"path": out, "guest_path": "/out", "access": "read-write"}]),
    );
    (tmp, out, prepared)
}

/// The `fs.write` verdicts the sink saw: `(allowed, bytes, reason)`.
fn write_verdicts(sink: &MemorySink) -> Vec<(bool, u64, &'static str)> {
    sink.decided()
        .into_iter()
        .filter(|d| d.call.op.name() == "fs.write")
        .map(|d| {
            let args = serde_json::to_value(&d.call.args).expect("json");
            (
                d.verdict == hcp_receipts::Verdict::Allow,
                args["bytes"].as_u64().expect("bytes"),
                d.reason,
            )
        })
        .collect()
}

#[tokio::test]
async fn file_writes_count_against_the_byte_budget() {
    let (_tmp, out, prepared) = writer();
    let sink = Arc::new(MemorySink::new());
    // 20 MiB in 4 KiB writes under an 8 MiB budget.
    let run = run_with(
        &prepared,
        json!({"action": "write_large", "path": "/out/big.bin", "bytes": 20 * MIB, "chunk": 4096}),
        8 * MIB,
        sink.clone(),
    )
    .await;
    let outputs = completed(&run);
    assert_eq!(outputs["ok"], false, "{outputs}");
    // std writes files through an output stream; wasi-libc reports a
    // failed stream write as EIO (the stream error's
    // `filesystem-error-code` is `quota`).
    assert_eq!(outputs["error"], "I/O error (os error 29)", "{outputs}");
    let written = outputs["written"].as_u64().expect("written");
    assert!(written <= 8 * MIB && written > 7 * MIB, "{written}");
    let on_disk = std::fs::metadata(out.join("big.bin")).expect("file").len();
    assert!(on_disk <= 8 * MIB, "{on_disk} bytes reached the disk");
    assert!(
        run.risk_events
            .contains(&"denied:BUDGET_EXCEEDED".to_owned()),
        "{:?}",
        run.risk_events
    );
    // Asked a quantum at a time, not once per write (halved near the end:
    // the paths of the task's filesystem calls count against the same
    // budget); the last request denied, with the stable reason code.
    let verdicts = write_verdicts(&sink);
    assert!(verdicts.len() <= 30, "{verdicts:?}");
    let allowed = verdicts.iter().filter(|v| v.0).map(|v| v.1).sum::<u64>();
    assert!(
        allowed <= 8 * MIB && allowed > 8 * MIB - 8192,
        "{allowed}: {verdicts:?}"
    );
    assert_eq!(
        verdicts.last().map(|v| (v.0, v.2)),
        Some((false, "BUDGET_EXCEEDED")),
        "{verdicts:?}"
    );
    let denied = sink
        .decided()
        .into_iter()
        .rfind(|d| d.reason == "BUDGET_EXCEEDED")
        .expect("a denial");
    assert_eq!(denied.call.target, "/out/big.bin");

    // Within the budget, a write goes through.
    let sink = Arc::new(MemorySink::new());
    let run = run_with(
        &prepared,
        json!({"action": "write_large", "path": "/out/small.bin", "bytes": 3 * MIB, "chunk": 65536}),
        8 * MIB,
        sink.clone(),
    )
    .await;
    assert_eq!(completed(&run)["value"], 3 * MIB);
    assert_eq!(
        std::fs::metadata(out.join("small.bin"))
            .expect("file")
            .len(),
        3 * MIB
    );
    assert!(write_verdicts(&sink).iter().all(|v| v.0));
}

#[tokio::test]
async fn growing_a_file_by_set_size_counts_as_written() {
    let (_tmp, out, prepared) = writer();
    let sink = Arc::new(MemorySink::new());
    let run = run_with(
        &prepared,
        json!({"action": "set_len", "path": "/out/sparse.bin", "len": 1u64 << 40}),
        8 * MIB,
        sink.clone(),
    )
    .await;
    let outputs = completed(&run);
    assert_eq!(
        outputs,
        &json!({"ok": false, "error": "Quota exceeded (os error 19)"})
    );
    assert_eq!(
        std::fs::metadata(out.join("sparse.bin"))
            .expect("file")
            .len(),
        0
    );
    // The file's entry (4 KiB) was paid from a quantum of 1 MiB; growing it
    // asks for the rest.
    assert_eq!(
        write_verdicts(&sink),
        [
            (true, MIB, "ALLOW"),
            (false, (1u64 << 40) - (MIB - 4096), "BUDGET_EXCEEDED")
        ]
    );
}

/// A write past the end of a file grows it over the hole: the hole counts
/// as written, as growing it by `set-size` does (one byte written at 1 TiB
/// was charged one byte, and left a file of a terabyte).
#[tokio::test]
async fn a_write_past_the_end_counts_its_hole_as_written() {
    let (_tmp, out, prepared) = writer();
    for stream in [false, true] {
        let sink = Arc::new(MemorySink::new());
        let run = run_with(
            &prepared,
            json!({"action": "write_at", "preopen": "/out", "name": "hole.bin",
                   "offset": 1u64 << 40, "data": "x", "stream": stream}),
            8 * MIB,
            sink.clone(),
        )
        .await;
        let outputs = completed(&run);
        assert_eq!(
            outputs,
            &json!({"ok": false, "error": "quota"}),
            "stream {stream}"
        );
        let len = std::fs::metadata(out.join("hole.bin")).map_or(0, |m| m.len());
        assert!(len < MIB, "stream {stream}: the file grew to {len} bytes");
        // Less what is left of the quantum the file's entry was paid from.
        assert!(
            write_verdicts(&sink)
                .iter()
                .any(|v| !v.0 && v.1 >= (1u64 << 40) - MIB),
            "stream {stream}: {:?}",
            write_verdicts(&sink)
        );
    }
    // Within the budget, a positioned write goes on.
    let sink = Arc::new(MemorySink::new());
    let run = run_with(
        &prepared,
        json!({"action": "write_at", "preopen": "/out", "name": "near.bin", "offset": 4096, "data": "x"}),
        8 * MIB,
        sink.clone(),
    )
    .await;
    assert_eq!(completed(&run)["ok"], true, "{:?}", completed(&run));
    assert_eq!(
        std::fs::metadata(out.join("near.bin")).expect("file").len(),
        4097
    );
}

#[tokio::test]
async fn a_stream_write_over_budget_reports_quota() {
    let (_tmp, out, prepared) = writer();
    let sink = Arc::new(MemorySink::new());
    let run = run_with(
        &prepared,
        json!({"action": "stream_write", "preopen": "/out", "name": "streamed.bin", "bytes": 4 * MIB}),
        2 * MIB,
        sink.clone(),
    )
    .await;
    // Up to the budget, less the file's own entry (a 4 KiB block) and the
    // last 4 KiB call that no longer fits once the paths of the task's
    // filesystem calls (counted against the same budget) are paid for.
    let outputs = completed(&run);
    assert_eq!(outputs["error"], "quota", "{outputs}");
    let written = outputs["written"].as_u64().expect("written");
    assert!(
        (2 * MIB - 2 * 4096..=2 * MIB - 4096).contains(&written),
        "{outputs}"
    );
    assert_eq!(
        std::fs::metadata(out.join("streamed.bin"))
            .expect("file")
            .len(),
        written
    );
    assert_eq!(
        write_verdicts(&sink).last(),
        Some(&(false, 4096, "BUDGET_EXCEEDED"))
    );
}

/// Frees whoever waits to open the FIFO at `path` (a reader for a writer,
/// a writer for a reader): each side's open returns once the other side
/// has opened, even if it closed again at once.
fn free_the_fifo(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open(path);
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nonblocking)
        .open(path);
    drop((reader, writer));
}

/// A FIFO in a granted directory (made there by another process: a guest
/// cannot make one) is refused when opened, for reading or for writing,
/// by its name or through a link to it. Opening one waits for the other
/// end: the task, and the host thread that opened it, would wait for good,
/// past the task's deadline.
#[test]
fn a_fifo_in_a_grant_is_refused_not_waited_on() {
    let (_tmp, out, prepared) = writer();
    let fifo = out.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo: {made}");
    std::os::unix::fs::symlink("pipe", out.join("to-pipe")).expect("a link to the FIFO");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    for path in ["/out/pipe", "/out/to-pipe"] {
        for inputs in [
            json!({"action": "read_file", "path": path}),
            json!({"action": "write_file", "path": path, "content": "x"}),
        ] {
            let ran = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(20), run(&prepared, inputs.clone())).await
            });
            // Whatever happened, nothing is left waiting on the FIFO.
            free_the_fifo(&fifo);
            let run = ran.unwrap_or_else(|_| panic!("{inputs}: the task still waits after 20 s"));
            assert_eq!(
                completed(&run),
                &json!({"ok": false, "error": "Not supported (os error 58)"}),
                "{inputs}"
            );
            assert!(
                run.log
                    .entries
                    .iter()
                    .any(|e| e.message.contains(path) && e.message.contains("FIFO")),
                "{inputs}: {:?}",
                run.log.entries
            );
        }
    }
    rt.shutdown_timeout(Duration::from_secs(5));
}

/// A sink whose first `fs.open` verdict holds the deciding thread until
/// released: a host call that does not return, as an open of a FIFO
/// swapped in after the look before it would not.
struct HeldOpen {
    held: std::sync::Mutex<bool>,
    release: std::sync::Condvar,
    reached: std::sync::atomic::AtomicBool,
}

impl HeldOpen {
    fn new() -> Self {
        Self {
            held: std::sync::Mutex::new(true),
            release: std::sync::Condvar::new(),
            reached: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn release(&self) {
        *self.held.lock().expect("lock") = false;
        self.release.notify_all();
    }
}

impl hcp_sandbox::pep::VerdictSink for HeldOpen {
    fn record(&self, decided: hcp_sandbox::pep::DecidedCall<'_>) {
        if decided.call.op.name() != "fs.open" {
            return;
        }
        self.reached
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut held = self.held.lock().expect("lock");
        while *held {
            held = self.release.wait(held).expect("wait");
        }
    }

    fn healthy(&self) -> bool {
        true
    }
}

/// A task whose thread never comes back from a host call (a filesystem
/// call made on the task's own thread that waits for good) ends at its
/// deadline, failed `timeout`, and holds none of the runtime's threads
/// meanwhile: another task on a runtime of one worker runs to its end while
/// the first is stuck.
#[test]
fn a_task_stuck_in_a_host_call_ends_at_its_deadline_and_holds_no_runtime_thread() {
    let (_tmp, out, prepared) = writer();
    std::fs::write(out.join("note.txt"), "a note").expect("write");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let held = Arc::new(HeldOpen::new());
    // Whatever the outcome, the held call is let go in the end: at the
    // test's end, or after 15 s (the stuck task then ends, late).
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let held = held.clone();
        std::thread::spawn(move || {
            let _ = watch.recv_timeout(Duration::from_secs(15));
            held.release();
        })
    };
    let task = ProbeTask {
        task_id: "task-stuck",
        session_id: "session-stuck",
        intent: "probe the containment",
        deadline: Duration::from_secs(1),
    };
    let stuck = {
        let governor = task.governor(
            &prepared,
            &Default::default(),
            BudgetCaps {
                artifacts: UNLIMITED,
                bytes: UNLIMITED,
                host_calls: UNLIMITED,
            },
            120_000,
            held.clone(),
        );
        let request = task.request(
            json!({"action": "read_file", "path": "/out/note.txt"}),
            Default::default(),
            governor,
        );
        let prepared = prepared.clone();
        let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
        rt.spawn(async move {
            let started = std::time::Instant::now();
            let run = prepared.run(request, store).await;
            (run, started.elapsed())
        })
    };
    while !held.reached.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The other task runs on the runtime's one worker meanwhile.
    let other = rt.block_on(async {
        let prepared = prepared.clone();
        let runs = tokio::spawn(async move {
            run(
                &prepared,
                json!({"action": "read_file", "path": "/out/note.txt"}),
            )
            .await
        });
        tokio::time::timeout(Duration::from_secs(10), runs).await
    });
    let other = other
        .expect("the other task ends while the first is stuck")
        .expect("joins");
    assert_eq!(completed(&other)["value"], "a note");
    let (run, took) = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), stuck).await })
        .expect("the stuck task ends")
        .expect("joins");
    let f = failed(&run);
    assert_eq!(f.code, ErrorCode::Timeout, "{f:?}");
    assert!(f.message.contains("left behind"), "{}", f.message);
    assert!(
        run.risk_events.iter().any(|e| e == "timeout"),
        "{:?}",
        run.risk_events
    );
    assert!(
        took < Duration::from_secs(5),
        "the stuck task ended after {took:?}, not at its deadline of 1 s"
    );
    drop(done);
    watchdog.join().expect("watchdog");
    rt.shutdown_timeout(Duration::from_secs(5));
}

/// A deadline longer than the clock can count is taken as it is (no
/// deadline to speak of), not a panic of the host's arithmetic: the task
/// runs to its end.
#[tokio::test]
async fn a_deadline_past_the_clocks_end_runs_the_task() {
    let (_tmp, out, prepared) = writer();
    std::fs::write(out.join("note.txt"), "a note").expect("write");
    let task = ProbeTask {
        task_id: "task-long",
        session_id: "session-long",
        intent: "probe the containment",
        deadline: Duration::MAX,
    };
    let budgets = BudgetCaps {
        artifacts: UNLIMITED,
        bytes: UNLIMITED,
        host_calls: UNLIMITED,
    };
    let governor = task.governor(
        &prepared,
        &Default::default(),
        budgets,
        120_000,
        Arc::new(MemorySink::new()),
    );
    let request = task.request(
        json!({"action": "read_file", "path": "/out/note.txt"}),
        Default::default(),
        governor,
    );
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let run = prepared.run(request, store).await;
    assert_eq!(completed(&run)["value"], "a note");
}

/// This process's peak resident memory (`VmHWM`), in bytes.
fn peak_resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// A listing of a directory (`read-directory`) is read from the directory
/// as the guest reads it, not loaded whole into the host's memory first. A
/// task holding 400 listings of a directory of 10,000 long names held 400
/// copies of it (about 600 MB), outside every limit of the task.
#[tokio::test]
async fn a_listing_is_read_as_the_guest_reads_it_not_held_whole() {
    let (_tmp, out, prepared) = writer();
    let names: Vec<String> = (0..10_000).map(|i| format!("{i:0>100}")).collect();
    for name in &names {
        std::fs::File::create(out.join(name)).expect("create");
    }
    std::fs::create_dir(out.join("a-directory")).expect("mkdir");
    // Listed whole, the directory is all there.
    let run1 = run(&prepared, json!({"action": "list_dir", "path": "/out"})).await;
    let mut expected: Vec<Value> = names.iter().map(|n| Value::from(n.as_str())).collect();
    expected.push(Value::from("a-directory"));
    expected.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    assert_eq!(completed(&run1)["value"], Value::Array(expected));
    // Held 400 times over, it costs the host next to nothing.
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak");
    let before = peak_resident();
    let run2 = run(
        &prepared,
        json!({"action": "hold_listings", "preopen": "/out", "count": 400}),
    )
    .await;
    let grew = peak_resident().saturating_sub(before);
    assert_eq!(completed(&run2), &json!({"ok": true, "value": 400}));
    assert!(
        grew < 100 * MIB,
        "the host's memory grew by {} MiB while the task held its listings",
        grew / MIB
    );
}

/// Each file, directory or link a task makes counts a block (4 KiB) against
/// the byte budget, as bytes written do: an empty one was free (its path's
/// bytes aside), so a task could fill a grant's filesystem with millions of
/// inodes (and a directory's 4 KiB each) under any budget.
#[tokio::test]
async fn each_entry_made_counts_a_block_against_the_byte_budget() {
    let (_tmp, out, prepared) = writer();
    let actions: Vec<Value> = (0..265)
        .map(|i| json!({"action": "mkdir", "path": format!("/out/d{i}")}))
        .collect();
    let sink = Arc::new(MemorySink::new());
    let run = run_with(
        &prepared,
        json!({"action": "each", "actions": actions}),
        MIB,
        sink.clone(),
    )
    .await;
    let reports = completed(&run)["value"]
        .as_array()
        .expect("reports")
        .clone();
    let made = reports.iter().filter(|r| r["ok"] == true).count();
    let on_disk = std::fs::read_dir(&out).expect("list").count();
    assert_eq!(on_disk, made);
    assert!(
        (240..256).contains(&made),
        "{made} directories made under a budget of 256 blocks"
    );
    for r in &reports[made..] {
        assert_eq!(r["error"], "Quota exceeded (os error 19)", "{r}");
    }
    assert_eq!(
        write_verdicts(&sink).last().map(|v| (v.0, v.2)),
        Some((false, "BUDGET_EXCEEDED"))
    );
    // Files made empty, and links, count the same.
    let (_tmp, out, prepared) = writer();
    let actions: Vec<Value> = (0..300)
        .map(|i| match i % 2 {
            0 => json!({"action": "write_file", "path": format!("/out/f{i}"), "content": ""}),
            _ => json!({"action": "symlink", "preopen": "/out", "target": "f0", "name": format!("l{i}")}),
        })
        .collect();
    let run = run_with(
        &prepared,
        json!({"action": "each", "actions": actions}),
        MIB / 2,
        Arc::new(MemorySink::new()),
    )
    .await;
    let made = match &run.result {
        RunResult::Completed { outputs, .. } => outputs["value"]
            .as_array()
            .expect("reports")
            .iter()
            .filter(|r| r["ok"] == true)
            .count(),
        // Stopped after its budget was refused 16 times in a row.
        RunResult::Failed(f) => {
            assert_eq!(f.code, ErrorCode::SafetyViolation, "{f:?}");
            std::fs::read_dir(&out).expect("list").count()
        }
    };
    assert!(
        (100..128).contains(&made),
        "{made} entries made under a budget of 128 blocks"
    );
    assert_eq!(std::fs::read_dir(&out).expect("list").count(), made);
}

/// A run on a thread of its own whose future is dropped (a server that
/// stops past its grace drops its runs, then its runtime) ends there: its
/// guest is never polled again. Before, the thread picked at random between
/// the guest and the drop's notice; woken late (a loaded machine) after the
/// runtime had begun to shut down, it polled the guest's timer and panicked
/// ("A Tokio 1.x context was found, but it is being shutdown"). Threads
/// spinning beside it make the late wake-up likely; each round drops one
/// sleeping run and then its runtime, every other one after waiting for
/// the run's thread to end as a server stopping does.
#[test]
fn a_dropped_run_on_its_own_thread_never_polls_its_guest_again() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.to_string().contains("being shutdown") {
            PANICS.fetch_add(1, Ordering::SeqCst);
        }
        previous(info);
    }));
    let tmp = tempfile::tempdir().expect("tempdir");
    let granted = tmp.path().join("granted");
    std::fs::create_dir_all(&granted).expect("mkdir");
    let dir = tmp.path().join("manifest");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let manifest = hcp_tests::ManifestBuilder::new("sleeper", hcp_tests::SLEEPER)
        .set(
            "/grants/filesystem",
            json!([{"path": granted, "guest_path": "/work", "access": "read-only"}]),
        )
        .load(&dir);
    // A sandbox of its own: its count of task threads is this test's.
    let sandbox = common::sandbox(SandboxConfig::default().pool_instances);
    let prepared = sandbox.prepare(Arc::new(manifest)).expect("prepares");
    let spinning = Arc::new(AtomicBool::new(true));
    let spinners: Vec<_> = (0..6)
        .map(|_| {
            let spinning = spinning.clone();
            std::thread::spawn(move || {
                while spinning.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    for round in 0..12 {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let prepared = prepared.clone();
        rt.block_on(async {
            let run = tokio::spawn(async move { run(&prepared, json!({"ms": 60_000})).await });
            tokio::time::sleep(Duration::from_millis(150)).await;
            assert_eq!(sandbox.task_threads(), 1, "the run has its thread");
            assert!(!sandbox.task_threads_ended(Duration::from_millis(20)).await);
            run.abort();
            assert!(run.await.is_err(), "the run was dropped, not finished");
            // What a server stopping waits for before its runtime goes
            // (every other round: the others drop the runtime at once).
            if round % 2 == 0 {
                assert!(
                    sandbox.task_threads_ended(Duration::from_secs(10)).await,
                    "the dropped run's thread ended"
                );
            }
        });
        // Waits for the runtime's threads, the run's own among them.
        drop(rt);
        assert_eq!(sandbox.task_threads(), 0, "round {round}");
    }
    spinning.store(false, Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().expect("spinner");
    }
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "a dropped run polled its guest on a runtime shutting down"
    );
}
