//! Issue 41.6: what rests on disk and travels in evidence packs holds no
//! credential in clear. A task whose inputs hold `password=…`: its
//! `task_submit` rests sealed, its admission receipt and its host calls'
//! receipts keep keyed digests in place of the text, its pack carries none
//! of it, and `hcp replay` of the pack still re-derives every decision. A
//! T3 task's messages rest sealed. A guest that returns the value of an
//! environment variable it was granted returns a keyed digest instead.

use super::{REPO_ROOT, cache_dir, weekday_morning};
use hcp::engine::{Auth, Host, HostConfig, HostPaths};
use hcp::evidence::{self, Selection};
use hcp_policy::pep::PepDecider;
use hcp_receipts::pack;
use hcp_tests::{ProbeWorld, wire};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The credential the tests hide, and the text that carries it.
const SECRET: &str = "Hunter2-Secret-77";

/// A T3 task's text that is no credential.
const CONFIDENTIAL: &str = "confidential-sample-QX91";

/// The shipped policies, with `probe` among the capabilities of
/// `harness-alpha-001` (cleared for T3).
fn policies_with_the_probe(dir: &Path) {
    std::fs::create_dir_all(dir).expect("policies dir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
    }
    let path = dir.join("callers.json");
    let mut callers: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("callers")).expect("json");
    for caller in callers["callers"].as_array_mut().expect("callers") {
        if caller["id"] == "harness-alpha-001" {
            caller["capabilities"]
                .as_array_mut()
                .expect("capabilities")
                .push(json!("probe"));
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&callers).expect("json")).expect("write");
}

/// A host on a new data directory with the probe installed, granted `PATH`.
struct Lab {
    data: tempfile::TempDir,
    world: ProbeWorld,
    host: Host,
}

fn lab() -> Lab {
    lab_with_input_schema(None)
}

/// [`lab`], the probe declaring `input_schema` when one is given.
fn lab_with_input_schema(input_schema: Option<Value>) -> Lab {
    let world = ProbeWorld::new();
    let policies = world.tmp.path().join("policies");
    policies_with_the_probe(&policies);
    let mut manifest = world.manifest.clone().set("/grants/env", json!(["PATH"]));
    if let Some(schema) = input_schema {
        manifest = manifest.set("/capability/input_schema", schema);
    }
    let manifest = manifest.write(world.tmp.path());
    let data = tempfile::tempdir().expect("tempdir");
    let host = Host::open(
        HostPaths {
            data_dir: data.path().to_path_buf(),
            cache_dir: cache_dir(),
            policies_dir: policies,
        },
        HostConfig {
            gate_clock: Some(weekday_morning()),
            ..HostConfig::default()
        },
    )
    .expect("host");
    host.install_manifest(&manifest).expect("install the probe");
    Lab { data, world, host }
}

fn probe_task(message_id: &str, intent: &str, inputs: Value, class: &str) -> Value {
    json!({
        "hcp_version": "1.0",
        "message_id": message_id,
        "timestamp": "2026-11-18T10:00:00.000Z",
        "session_id": null,
        "type": "task_submit",
        "payload": {
            "capability": "probe",
            "caller_id": "harness-alpha-001",
            "intent": intent,
            "inputs": inputs,
            "constraints": {"max_duration": "PT30S", "data_classification": class}
        }
    })
}

/// Submits and runs `m`; its task id and final answer.
async fn run(host: &Host, m: &Value) -> (String, Value) {
    let s = host
        .submit(m, Auth::Transport("harness-alpha-001"))
        .expect("submit");
    assert!(s.runnable, "not runnable: {}", s.answer);
    let id = s.task_id.clone().expect("task id");
    let answer = host.run_task(&id).await.expect("run").expect("ran");
    (id, wire(&answer))
}

/// Every byte of the store's database and its write-ahead log, read after
/// a checkpoint of the log (and its pages left in the log as they are).
fn database_bytes(data: &Path) -> Vec<u8> {
    let db = rusqlite::Connection::open(data.join("hcp.db")).expect("open");
    db.busy_timeout(std::time::Duration::from_secs(10))
        .expect("timeout");
    db.query_row("PRAGMA wal_checkpoint(FULL)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(db);
    let mut bytes = std::fs::read(data.join("hcp.db")).expect("hcp.db");
    bytes.extend(std::fs::read(data.join("hcp.db-wal")).unwrap_or_default());
    bytes
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// `task`'s evidence pack written to a file, untarred: the pack's path and
/// every file in it with its bytes.
fn unpacked(host: &Host, task: &str, dir: &Path) -> (PathBuf, Vec<(PathBuf, Vec<u8>)>) {
    let pack = evidence::export(&host.store, &Selection::Task(task.to_owned())).expect("export");
    let path = dir.join(format!("{task}.tar"));
    std::fs::write(&path, pack::write(&pack).expect("write")).expect("write pack");
    let out = dir.join(format!("{task}.d"));
    std::fs::create_dir_all(&out).expect("mkdir");
    let mut archive = tar::Archive::new(std::fs::File::open(&path).expect("open pack"));
    archive.unpack(&out).expect("untar");
    let mut files = Vec::new();
    let mut todo = vec![out];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let bytes = std::fs::read(&p).expect("read");
                files.push((p, bytes));
            }
        }
    }
    assert!(
        files.iter().any(|(p, _)| p.ends_with("submit.json")),
        "the pack holds the task's messages: {:?}",
        files.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    (path, files)
}

/// `hcp replay` of the pack at `path`: every decision re-derived.
fn replays(path: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hcp"))
        .arg("replay")
        .arg(path)
        .output()
        .expect("run hcp replay");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.starts_with("ok: "), "{text}");
    let pack = pack::read(
        &std::fs::read(path).expect("pack"),
        &pack::ReadLimits::default(),
    )
    .expect("read pack");
    let report = hcp_receipts::replay(&pack, &PepDecider::new(&pack));
    assert!(report.ok(), "{:?}", report.issues);
    assert_eq!(report.matched, report.replayed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_credential_in_a_tasks_inputs_rests_sealed_and_travels_as_a_keyed_digest() {
    let lab = lab();
    let credential = format!("password={SECRET}");
    let inputs = json!({
        "action": "each",
        "actions": [
            {"action": "log", "message": format!("logging in with {credential}")},
            {"action": "output", "outputs": {"done": true}},
        ],
        "note": credential,
    });
    let m = probe_task(
        "msg-credential",
        &format!("log in with {credential}"),
        inputs,
        "T1",
    );
    let (task, answer) = run(&lab.host, &m).await;
    assert_eq!(answer["type"], "task_completed", "{answer}");
    // The caller's own task reads back whole (it rests sealed, not lost).
    let stored = lab.host.store.task(&task).expect("read").expect("task");
    assert_eq!(stored.submit, m);

    // Nowhere in the database's bytes: not in `tasks`, not in a receipt's
    // decision input, not in the write-ahead log.
    let bytes = database_bytes(lab.data.path());
    assert!(
        !holds(&bytes, SECRET),
        "the credential rests in clear in hcp.db"
    );

    // Nowhere in the task's pack, whose every decision replays.
    let (path, files) = unpacked(&lab.host, &task, lab.world.tmp.path());
    for (file, bytes) in &files {
        assert!(
            !holds(bytes, SECRET),
            "{} carries the credential in clear",
            file.display()
        );
    }
    let inputs = files
        .iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .collect::<String>();
    assert!(
        inputs.contains("[withheld: hmac-sha256:"),
        "the decision inputs keep a keyed digest in its place"
    );
    replays(&path);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_t3_tasks_messages_rest_sealed() {
    let lab = lab();
    let inputs = json!({"action": "output", "outputs": {"sample": CONFIDENTIAL}});
    let m = probe_task("msg-t3", &format!("record {CONFIDENTIAL}"), inputs, "T3");
    let (task, answer) = run(&lab.host, &m).await;
    assert_eq!(answer["type"], "task_completed", "{answer}");
    assert_eq!(answer["payload"]["outputs"]["sample"], CONFIDENTIAL);
    let stored = lab.host.store.task(&task).expect("read").expect("task");
    assert_eq!(stored.submit, m);
    assert_eq!(stored.result.as_ref().map(wire), Some(answer.clone()));
    let status = lab
        .host
        .store
        .task_status(&task)
        .expect("read")
        .expect("task");
    assert_eq!(status.result.as_ref().map(wire), Some(answer.clone()));
    let bytes = database_bytes(lab.data.path());
    assert!(
        !holds(&bytes, CONFIDENTIAL),
        "a T3 task's messages rest in clear in hcp.db"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_granted_env_vars_value_returned_by_a_guest_is_withheld() {
    let lab = lab();
    let value = std::env::var("PATH").expect("PATH is set");
    assert!(
        value.len() >= 6,
        "the host withholds values of 6 characters or more"
    );
    let inputs = json!({"action": "env", "name": "PATH"});
    let m = probe_task("msg-env", "report the environment", inputs, "T1");
    let (task, answer) = run(&lab.host, &m).await;
    assert_eq!(answer["type"], "task_completed", "{answer}");
    let returned = answer["payload"]["outputs"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("the probe read PATH: {answer}"));
    assert!(
        returned.starts_with("[withheld: hmac-sha256:"),
        "the caller is answered the operator's secret: {answer}"
    );
    let (_, files) = unpacked(&lab.host, &task, lab.world.tmp.path());
    let result = files
        .iter()
        .find(|(p, _)| p.ends_with("result.json"))
        .map(|(_, b)| b)
        .expect("result.json in the pack");
    assert!(!holds(result, &value), "result.json carries the value");
    for (file, bytes) in &files {
        assert!(
            !holds(bytes, &value),
            "{} carries the value",
            file.display()
        );
    }
}

/// A refused submission whose message holds a credential: the answer that
/// quotes it and what the task keeps of a large message (its prefix) rest
/// with the credential withheld or sealed, never in clear.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_submission_quoting_a_credential_rests_without_it() {
    let lab = lab_with_input_schema(Some(json!({
        "type": "object",
        "properties": {"action": {"enum": ["output", "each", "log"]}}
    })));
    let credential = format!("password={SECRET}");
    // Refused by the inputs' schema (no such action), whose message quotes
    // the value; large enough that the task keeps only its prefix.
    let inputs = json!({
        "action": credential,
        "padding": "x".repeat(6000),
    });
    let m = probe_task("msg-refused-credential", "refused", inputs, "T1");
    let s = lab
        .host
        .submit(&m, Auth::Transport("harness-alpha-001"))
        .expect("submit");
    assert_eq!(wire(&s.answer)["type"], "task_rejected", "{}", s.answer);
    let task = s.task_id.clone().expect("task id");
    // A duplicate is answered the same, from what rests.
    let again = lab
        .host
        .submit(&m, Auth::Transport("harness-alpha-001"))
        .expect("submit again");
    assert_eq!(again.answer, s.answer);
    let bytes = database_bytes(lab.data.path());
    assert!(
        !holds(&bytes, SECRET),
        "the refused message's credential rests in clear in hcp.db"
    );
    let (path, files) = unpacked(&lab.host, &task, lab.world.tmp.path());
    for (file, bytes) in &files {
        assert!(
            !holds(bytes, SECRET),
            "{} carries the credential in clear",
            file.display()
        );
    }
    replays(&path);
}
