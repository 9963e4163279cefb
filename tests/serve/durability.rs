//! Durability of `hcp serve` on real files: a data directory on a small
//! filesystem (tmpfs, else an ext4 image on a loop device) that fills up
//! while tasks run and is freed again; a database damaged in each of the
//! ways the issue lists (emptied, truncated, its write-ahead log deleted or
//! truncated, random bytes mid-file), refused at startup with what is
//! wrong and how to recover; and a backup (SQLite's online backup) taken
//! while the server runs, restored in place of a lost store.

use super::{LOCAL, OPERATOR, Server, error_code, example, lab, tasks_with_message, with_id};
use serde_json::Value;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small filesystem mounted for one test, unmounted when dropped (also
/// when the test fails).
struct Mount {
    dir: PathBuf,
    image: Option<PathBuf>,
    _parent: tempfile::TempDir,
}

impl Mount {
    /// A filesystem of `bytes` at a fresh directory: tmpfs where the
    /// machine allows, else an ext4 image on a loop device; `None` (and a
    /// loud message) when neither mounts.
    fn small(bytes: u64) -> Option<Self> {
        let parent = tempfile::tempdir().expect("tempdir");
        let dir = parent.path().join("data");
        std::fs::create_dir(&dir).expect("mount point");
        let tmpfs = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&dir)
            .status();
        if tmpfs.is_ok_and(|s| s.success()) {
            return Some(Self {
                dir,
                image: None,
                _parent: parent,
            });
        }
        let image = parent.path().join("fs.img");
        let file = std::fs::File::create(&image).expect("image");
        file.set_len(bytes).expect("image size");
        let made = Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&image)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new("mount")
                .args(["-o", "loop"])
                .arg(&image)
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
        if made {
            return Some(Self {
                dir,
                image: Some(image),
                _parent: parent,
            });
        }
        eprintln!(
            "\n\n*** SKIPPED: neither a tmpfs nor a loop-mounted ext4 image can be mounted \
             here (run as root on a machine that allows mounts) ***\n\n"
        );
        None
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
        if let Some(image) = &self.image {
            let _ = std::fs::remove_file(image);
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .expect("cp");
    assert!(status.success(), "copying the data directory");
}

fn used_bytes(dir: &Path) -> u64 {
    let out = Command::new("du")
        .args(["-s", "-B1"])
        .arg(dir)
        .output()
        .expect("du");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("du output")
}

/// Fills the filesystem of `dir` until a write fails with ENOSPC.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("filler");
    let chunk = vec![0xA5u8; 4096];
    loop {
        match f.write_all(&chunk) {
            Ok(()) => {}
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(28), "filling: {e}");
                break;
            }
        }
    }
    let _ = f.sync_all();
    path
}

/// The task's `job_status` status as the server reports it.
fn state_of(server: &Server, task: &str) -> String {
    let (status, body) = server.get(&format!("/v1/tasks/{task}"), Some(LOCAL));
    assert_eq!(status, 200, "{body}");
    body["status"].as_str().unwrap_or_default().to_owned()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn verify_ok(server: &Server) {
    let (status, verdict) = server.get("/v1/receipts/verify", Some(OPERATOR));
    assert_eq!(
        (status, verdict["ok"].as_bool()),
        (200, Some(true)),
        "{verdict}"
    );
}

/// Prints the server's log when the test fails.
struct LogOnPanic(PathBuf);

impl Drop for LogOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.0).unwrap_or_default();
            eprintln!("--- {} ---\n{log}", self.0.display());
        }
    }
}

#[test]
fn a_full_disk_fails_closed_with_503_and_the_host_recovers_when_space_returns() {
    let lab = lab();
    let used = used_bytes(lab.path());
    // Room for the log, the database's growth and a few artifacts.
    let Some(mount) = Mount::small((used + (4 << 20)).next_multiple_of(1 << 20)) else {
        return;
    };
    let data = mount.dir.clone();
    copy_dir(lab.path(), &data);
    // The server's log lives off the small filesystem.
    let logs = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(logs.path().join("serve.log"), data.join("serve.log"))
        .expect("log link");
    let _log = LogOnPanic(logs.path().join("serve.log"));
    let server = Server::start(&data);
    let (status, answer, first) = server.post(
        "/v1/tasks",
        LOCAL,
        &with_id(example("document-analysis"), "msg-full-0"),
    );
    assert_eq!(status, 200, "{answer}");
    let first = first.expect("task id");

    // The disk fills while the task may still be running.
    let filler = fill(&data);
    let mut refused = Vec::new();
    for i in 1..=3 {
        let id = format!("msg-full-{i}");
        let (status, body, _) = server.post(
            "/v1/tasks",
            LOCAL,
            &with_id(example("document-analysis"), &id),
        );
        assert_eq!((status, error_code(&body)), (503, "storage_full"), "{body}");
        let message = body["error"]["message"].as_str().expect("message");
        assert!(
            message.starts_with("the host's storage is full (")
                && message
                    .ends_with("); the request was not carried out; try again once space is freed"),
            "{message}"
        );
        refused.push(id);
    }
    // Reading still works.
    let (status, _) = server.get(&format!("/v1/tasks/{first}"), Some(LOCAL));
    assert_eq!(status, 200);

    // Space returns: no restart.
    std::fs::remove_file(&filler).expect("free the space");
    let (status, answer, second) = server.post(
        "/v1/tasks",
        LOCAL,
        &with_id(example("document-analysis"), "msg-full-after"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_accepted", "{answer}");
    let result = server.wait_result(&second.expect("task id"), LOCAL);
    assert_eq!(result["type"], "task_completed", "{result}");

    // The acknowledged task got its final answer.
    let result = server.wait_result(&first, LOCAL);
    assert!(
        matches!(
            result["type"].as_str(),
            Some("task_completed" | "task_failed")
        ),
        "{result}"
    );
    // No refused submission is left waiting: there is no task, or it
    // failed with internal_error.
    for id in &refused {
        wait_until(&format!("{id} is settled"), || {
            tasks_with_message(&server, LOCAL, id)
                .iter()
                .all(|t| t["state"] == "failed")
        });
        for t in tasks_with_message(&server, LOCAL, id) {
            let task = t["task_id"].as_str().expect("id");
            assert_eq!(state_of(&server, task), "failed");
            let result = server.wait_result(task, LOCAL);
            assert_eq!(
                result["payload"]["error_code"], "internal_error",
                "{result}"
            );
        }
    }
    // The receipt chain has neither a gap nor a fork.
    verify_ok(&server);
    drop(server);
    let checked = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["store", "check"])
        .env("HCP_DATA_DIR", &data)
        .output()
        .expect("hcp store check");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}

#[test]
fn a_log_on_the_full_disk_does_not_stop_the_host() {
    let lab = lab();
    let used = used_bytes(lab.path());
    let Some(mount) = Mount::small((used + (4 << 20)).next_multiple_of(1 << 20)) else {
        return;
    };
    let data = mount.dir.clone();
    copy_dir(lab.path(), &data);
    // The server's stderr goes to `serve.log` on the same filesystem.
    let server = Server::start(&data);
    let filler = fill(&data);
    for i in 0..3 {
        let (status, body, _) = server.post(
            "/v1/tasks",
            LOCAL,
            &with_id(example("document-analysis"), &format!("msg-log-{i}")),
        );
        assert_eq!((status, error_code(&body)), (503, "storage_full"), "{body}");
    }
    std::fs::remove_file(&filler).expect("free the space");
    let (status, answer, task) = server.post(
        "/v1/tasks",
        LOCAL,
        &with_id(example("document-analysis"), "msg-log-after"),
    );
    assert_eq!(status, 200, "{answer}");
    let result = server.wait_result(&task.expect("task id"), LOCAL);
    assert_eq!(result["type"], "task_completed", "{result}");
    verify_ok(&server);
}

/// Runs `hcp serve` on a data directory it must refuse: its exit code and
/// stderr.
fn refused(data: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("HCP_DATA_DIR", data)
        .env("HCP_CACHE_DIR", hcp_tests::cache_dir())
        .current_dir(hcp_tests::REPO_ROOT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hcp serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let mut out = String::new();
            let _ = child.stdout.take().map(|mut o| o.read_to_string(&mut out));
            panic!("hcp serve started on a damaged store: {out}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    (status.code(), err)
}

/// A data directory with `n` completed tasks; the server stopped by
/// SIGTERM (the write-ahead log folded into the database) or SIGKILL (it
/// stays).
fn with_tasks(n: usize, kill: bool) -> (tempfile::TempDir, Vec<String>) {
    let data = lab();
    let mut server = Server::start(data.path());
    let mut tasks = Vec::new();
    for i in 0..n {
        let (status, answer, task) = server.post(
            "/v1/tasks",
            LOCAL,
            &with_id(example("document-analysis"), &format!("msg-ack-{i}")),
        );
        assert_eq!(status, 200, "{answer}");
        let task = task.expect("task id");
        let result = server.wait_result(&task, LOCAL);
        assert_eq!(result["type"], "task_completed", "{result}");
        tasks.push(task);
    }
    verify_ok(&server);
    server.signal(if kill { "-KILL" } else { "-TERM" });
    let exit = server.wait_exit();
    assert_eq!(exit.success(), !kill, "{exit:?}");
    (data, tasks)
}

const RECOVERY: &str = "The host will not serve from this store.\nRecovery: stop every hcp \
process using this data directory, then restore the database from a backup with `hcp store \
restore <backup>` (see \"Durability, backup and restore\" in the README), and start again";

fn assert_refused(data: &Path, what: &str) {
    let (code, err) = refused(data);
    let db = data.join("hcp.db");
    let expected = format!("error: {}: {what}", db.display());
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with(&expected),
        "expected {expected:?} in:\n{err}"
    );
    assert!(err.contains(RECOVERY), "{err}");
}

fn overwrite(path: &Path, at: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    f.seek(SeekFrom::Start(at)).expect("seek");
    f.write_all(bytes).expect("write");
    f.sync_all().expect("sync");
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open")
        .set_len(len)
        .expect("truncate");
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("metadata").len()
}

/// The receipts the mark recorded: the larger of its two records (lines of
/// JSON; the host checks each record's checksum, a test only reads them).
fn marked(data: &Path) -> u64 {
    let text = std::fs::read_to_string(data.join("hcp.db.mark")).expect("mark");
    text.lines()
        .map(|line| {
            let record: Value = serde_json::from_str(line).expect("mark record json");
            record["receipts"].as_u64().expect("receipts")
        })
        .max()
        .expect("a mark record")
}

#[test]
fn an_emptied_database_is_refused_at_startup() {
    let (data, _) = with_tasks(4, false);
    let marked = marked(data.path());
    assert!(marked > 0);
    truncate(&data.path().join("hcp.db"), 0);
    assert_refused(
        data.path(),
        &format!(
            "the database is missing or empty, but hcp.db.mark recorded {marked} receipts: \
             acknowledged data is lost."
        ),
    );
}

#[test]
fn a_truncated_database_is_refused_at_startup() {
    let (data, _) = with_tasks(4, false);
    let db = data.path().join("hcp.db");
    truncate(&db, (len(&db) / 2).next_multiple_of(4096));
    assert_refused(data.path(), "the database is damaged (quick_check: ");
}

#[test]
fn random_bytes_in_the_database_are_refused_at_startup() {
    let (data, _) = with_tasks(4, false);
    let db = data.path().join("hcp.db");
    // 16 KiB of pseudo-random bytes, page-aligned, in the middle.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let noise: Vec<u8> = (0..16 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect();
    overwrite(&db, (len(&db) / 2) / 4096 * 4096, &noise);
    assert_refused(data.path(), "the database is damaged (quick_check: ");
}

/// `hcp store check --accept-loss` on `data`, which must succeed.
fn accept_loss(data: &Path) {
    let accepted = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["store", "check", "--accept-loss"])
        .env("HCP_DATA_DIR", data)
        .output()
        .expect("hcp store check --accept-loss");
    assert!(
        accepted.status.success(),
        "{}",
        String::from_utf8_lossy(&accepted.stderr)
    );
}

#[test]
fn a_deleted_write_ahead_log_is_refused_and_the_loss_can_be_accepted() {
    let (data, tasks) = with_tasks(4, true);
    let wal = data.path().join("hcp.db-wal");
    assert!(len(&wal) > 0, "the killed server left its write-ahead log");
    let marked = marked(data.path());
    std::fs::remove_file(&wal).expect("delete the WAL");
    let (code, err) = refused(data.path());
    assert_eq!(code, Some(2), "{err}");
    let expected = format!(
        "receipts, but hcp.db.mark recorded {marked} (the database or its write-ahead log \
         hcp.db-wal was emptied, truncated, deleted or replaced): acknowledged data is lost."
    );
    assert!(err.contains(&expected), "{err}");
    assert!(
        err.contains("or, to accept the loss and serve from the store as it is, run `hcp store check --accept-loss`."),
        "{err}"
    );
    // The operator accepts the loss explicitly: the host serves again, and
    // says what it holds.
    accept_loss(data.path());
    let server = Server::start(data.path());
    verify_ok(&server);
    let _ = tasks;
}

/// A mark file that holds no mark (damaged or replaced) stops the host,
/// which says how to go on, and the recovery it names works: accepting the
/// store as it is writes a new mark. (The recovery commands read the old
/// mark first and failed on it too, so the operator had to delete the
/// file by hand.)
#[test]
fn a_damaged_mark_is_refused_and_the_store_can_be_accepted() {
    let (data, tasks) = with_tasks(2, false);
    std::fs::write(data.path().join("hcp.db.mark"), b"{\"receipts\": \"torn")
        .expect("damage the mark");
    let (code, err) = refused(data.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("hcp.db.mark is not a store mark"), "{err}");
    assert!(err.contains("`hcp store check --accept-loss`"), "{err}");
    accept_loss(data.path());
    assert!(marked(data.path()) > 0, "a new mark");
    let server = Server::start(data.path());
    verify_ok(&server);
    let _ = tasks;
}

#[test]
fn a_truncated_write_ahead_log_is_refused_at_startup() {
    let (data, _) = with_tasks(4, true);
    let wal = data.path().join("hcp.db-wal");
    let marked = marked(data.path());
    truncate(&wal, len(&wal) / 2);
    let (code, err) = refused(data.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("receipts, but hcp.db.mark recorded {marked} ")),
        "{err}"
    );
}

#[test]
fn a_backup_restored_serves_the_same_tasks_and_its_receipts_verify() {
    let data = lab();
    let server = Server::start(data.path());
    let mut tasks = Vec::new();
    for i in 0..3 {
        let (status, answer, task) = server.post(
            "/v1/tasks",
            LOCAL,
            &with_id(example("document-analysis"), &format!("msg-backup-{i}")),
        );
        assert_eq!(status, 200, "{answer}");
        let task = task.expect("task id");
        let result = server.wait_result(&task, LOCAL);
        tasks.push((task, result));
    }
    // The online backup, while the server runs.
    let backups = tempfile::tempdir().expect("tempdir");
    let backup = backups.path().join("hcp-backup.db");
    let out = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["store", "backup"])
        .arg(&backup)
        .env("HCP_DATA_DIR", data.path())
        .output()
        .expect("hcp store backup");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut server = server;
    server.signal("-TERM");
    assert!(server.wait_exit().success());

    // The store is lost; the host refuses it; the backup is restored.
    truncate(&data.path().join("hcp.db"), 0);
    let (code, _) = refused(data.path());
    assert_eq!(code, Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["store", "restore"])
        .arg(&backup)
        .env("HCP_DATA_DIR", data.path())
        .output()
        .expect("hcp store restore");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Server::start(data.path());
    for (task, result) in &tasks {
        assert_eq!(&server.wait_result(task, LOCAL), result);
    }
    verify_ok(&server);
    let (status, answer, _) = server.post(
        "/v1/tasks",
        LOCAL,
        &with_id(example("document-analysis"), "msg-after-restore"),
    );
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn a_task_the_gate_never_answered_is_failed_at_startup_not_queued_forever() {
    let data = lab();
    // A submission recorded, then the host stopped (or failed) before the
    // gate answered it.
    let task = {
        let store = hcp::store::Store::open(data.path()).expect("store");
        match store
            .submit(
                "harness-local-01",
                "msg-unanswered",
                "document-analysis",
                &with_id(example("document-analysis"), "msg-unanswered"),
            )
            .expect("submit")
        {
            hcp::store::Submitted::New(t) => t.task_id,
            hcp::store::Submitted::Duplicate(t) => panic!("duplicate {}", t.task_id),
        }
    };
    let server = Server::start(data.path());
    assert_eq!(state_of(&server, &task), "failed");
    let (status, result) = server.get(&format!("/v1/tasks/{task}/result"), Some(LOCAL));
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["type"], "task_failed", "{result}");
    assert_eq!(
        (
            result["payload"]["error_code"].as_str(),
            result["payload"]["error_message"].as_str()
        ),
        (
            Some("internal_error"),
            Some(
                "the host stopped or failed before the gate answered the task, so it never \
                 ran; its message_id is free again: send the same message again to submit it"
            )
        ),
        "{result}"
    );
    // Nothing ran and nobody had an answer: the caller's retry of the same
    // message is a new task, admitted.
    let (status, answer, retry) = server.post(
        "/v1/tasks",
        LOCAL,
        &with_id(example("document-analysis"), "msg-unanswered"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_accepted", "{answer}");
    assert_ne!(retry.as_deref(), Some(task.as_str()), "a new task");
}

/// The receipt writer itself: refuses while the disk is full (a typed
/// `StorageFull`), stores again once space returns, and the log it leaves
/// verifies (no gap, no fork).
#[test]
fn the_receipt_writer_fails_closed_while_the_disk_is_full_and_goes_on_after() {
    let Some(mount) = Mount::small(4 << 20) else {
        return;
    };
    let dir = mount.dir.clone();
    let store = std::sync::Arc::new(hcp::store::Store::open(&dir).expect("store"));
    let identity = hcp::hostkey::load_or_init(&dir).expect("host key");
    let recorder = hcp::evidence::Recorder::open(
        store.clone(),
        identity,
        hcp_receipts::SigningPolicy::default(),
    )
    .expect("recorder");
    let entry = |i: u32| hcp::evidence::Entry {
        session_id: None,
        task_id: Some(format!("task-{i}")),
        capability: "probe@1.0.0".into(),
        call: "gate.admission".into(),
        args: serde_json::json!({ "i": i }),
        input: hcp_contracts::jcs::Canonical::of(&serde_json::json!({ "i": i }))
            .expect("canonical"),
        verdict: hcp_receipts::Verdict::Allow,
        reason_code: "ALLOW".into(),
        risk: hcp_contracts::RiskLevel::R1,
        policy_hash: hcp_receipts::Digest::of(b"policy"),
        parents: Vec::new(),
        manifest: None,
        policy_sources: None,
        follows: None,
    };
    recorder.append_sealed(entry(0)).expect("stored");
    let filler = fill(&dir);
    for i in 1..=3 {
        let err = recorder
            .append_sealed(entry(i))
            .expect_err("stored on a full disk");
        assert_eq!(
            err.to_string(),
            "the host's storage is full: receipts: database or disk is full: Error code 13: \
             database or disk is full"
        );
        assert!(hcp::store::durable::storage_full(&err).is_some());
    }
    std::fs::remove_file(&filler).expect("free the space");
    recorder
        .append_sealed(entry(4))
        .expect("stored once space returns");
    recorder.close().expect("close");
    let check = hcp::evidence::verify_store(&store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    assert_eq!(check.receipts, 2, "{check:?}");
    // The mark follows the store.
    assert_eq!(marked(&dir), 2);
}

/// A final state the full disk refuses is kept and written once space
/// returns: the task never stays `running` for good.
#[test]
fn a_final_state_refused_by_the_full_disk_is_written_once_space_returns() {
    use hcp::store::{Submitted, TaskState};
    let Some(mount) = Mount::small(4 << 20) else {
        return;
    };
    let dir = mount.dir.clone();
    let store = hcp::store::Store::open(&dir).expect("store");
    let Submitted::New(task) = store
        .submit("caller", "msg-settle", "cap", &serde_json::json!({}))
        .expect("submit")
    else {
        panic!("not a new task")
    };
    store
        .update_task(&task.task_id, TaskState::Running, Default::default())
        .expect("running");
    let filler = fill(&dir);
    let answer = hcp_contracts::answer::Answer::failed(
        None,
        hcp_contracts::message::TaskFailed {
            error_code: hcp_contracts::message::ErrorCode::InternalError,
            error_message: "failed".into(),
            error_details: None,
            partial_outputs: None,
            artifacts: Vec::new(),
            execution_summary: None,
        },
    );
    let err = store
        .settle(
            &task.task_id,
            TaskState::Running,
            TaskState::Failed,
            answer.clone(),
        )
        .expect_err("written on a full disk");
    assert_eq!(
        hcp::store::durable::storage_full(&err).as_deref(),
        Some("database or disk is full")
    );
    assert_eq!(store.settle_pending(), 0, "written on a full disk");
    let t = store.task(&task.task_id).expect("read").expect("task");
    assert_eq!(t.state, TaskState::Running);
    std::fs::remove_file(&filler).expect("free the space");
    assert_eq!(store.settle_pending(), 1);
    let t = store.task(&task.task_id).expect("read").expect("task");
    assert_eq!((t.state, t.result), (TaskState::Failed, Some(answer)));
    assert_eq!(store.settle_pending(), 0);
}
