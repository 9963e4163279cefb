//! Receipts at the command line: `hcp run` leaves receipts; `hcp evidence
//! export` packs them deterministically; `hcp evidence verify` and `hcp
//! replay` check them offline; every kind of tampering fails with its own
//! message.

use super::{Hcp, code, doc_manifest, stderr, stdout, write_json};
use hcp_receipts::pack::{self, Pack, ReadLimits};
use hcp_receipts::receipt::Receipt;
use hcp_receipts::{Verdict, reason};
use hcp_tests::{ProbeWorld, REPO_ROOT};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `receipts: task <id>, session <id>` from a run's stderr.
fn ids(out: &std::process::Output) -> (String, String) {
    let err = stderr(out);
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("receipts: task "))
        .unwrap_or_else(|| panic!("no receipts line in:\n{err}"));
    let (task, session) = line.split_once(", session ").expect("ids");
    (task.to_owned(), session.to_owned())
}

fn run_demo(hcp: &Hcp) -> (String, String) {
    let input = format!("{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json");
    let out = hcp.run(&[
        "run",
        "-q",
        "--manifest",
        &doc_manifest(),
        "--input",
        &input,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    ids(&out)
}

fn export(hcp: &Hcp, what: &[&str], out: &Path) -> Vec<u8> {
    let mut args = vec!["evidence", "export"];
    args.extend_from_slice(what);
    let path = out.to_str().expect("utf8");
    args.extend_from_slice(&["-o", path]);
    let o = hcp.run(&args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    std::fs::read(out).expect("pack")
}

fn verify(hcp: &Hcp, pack: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["evidence", "verify", pack.to_str().expect("utf8")];
    args.extend_from_slice(extra);
    let o = hcp.run(&args);
    (code(&o), stdout(&o) + &stderr(&o))
}

fn replay(hcp: &Hcp, pack: &Path) -> (i32, String) {
    let o = hcp.run(&["replay", pack.to_str().expect("utf8")]);
    (code(&o), stdout(&o) + &stderr(&o))
}

fn read(bytes: &[u8]) -> Pack {
    pack::read(bytes, &ReadLimits::default()).expect("pack reads")
}

/// Writes a changed pack the way a careful forger would: a fresh, consistent
/// index, so only the content's own checks can catch it.
fn forge(dir: &Path, name: &str, pack: &Pack) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pack::write(pack).expect("write")).expect("write");
    path
}

fn receipts(pack: &mut Pack) -> &mut Vec<Receipt> {
    &mut pack.hosts[0].receipts
}

/// One hex digit of `args_hash` changed, as a flipped byte would.
fn flip_args_hash(r: &Receipt) -> Receipt {
    let mut text = String::from_utf8(r.canonical_bytes().expect("bytes")).expect("utf8");
    let at = text.find("\"args_hash\":\"sha256:").expect("field") + 20;
    let c = if &text[at..=at] == "0" { "1" } else { "0" };
    text.replace_range(at..=at, c);
    serde_json::from_str(&text).expect("receipt")
}

fn id(r: &Receipt) -> String {
    r.receipt_id.clone()
}

#[test]
fn demo_runs_leave_receipts_that_verify_replay_and_export_deterministically() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let (task1, session1) = run_demo(&hcp);
    let (task2, _) = run_demo(&hcp);
    assert_ne!(task1, task2);

    // Two exports of the same state are byte-identical.
    let all = tmp.path().join("all.tar");
    let a = export(&hcp, &["--all"], &all);
    let b = export(&hcp, &["--all"], &tmp.path().join("again.tar"));
    assert!(a == b, "two exports of the same state differ");

    let (c, out) = verify(&hcp, &all, &[]);
    assert_eq!(c, 0, "{out}");
    assert!(out.starts_with("ok: 1 hosts, "), "{out}");
    let (c, out) = replay(&hcp, &all);
    assert_eq!(c, 0, "{out}");
    assert!(out.starts_with("ok: "), "{out}");

    // What the pack holds.
    let p = read(&a);
    let section = &p.hosts[0];
    let calls: Vec<&str> = section.receipts.iter().map(|r| r.call.as_str()).collect();
    assert_eq!(calls.iter().filter(|c| **c == "session.open").count(), 2);
    assert!(
        calls.contains(&"fs.open") && calls.contains(&"log.write"),
        "{calls:?}"
    );
    assert!(section.receipts.iter().all(|r| r.verdict == Verdict::Allow));
    assert_eq!(p.public_keys.len(), 1);
    for file in [
        "callers.json",
        "risk.json",
        "context.json",
        "budgets.json",
        "envelopes.json",
        "authz.cedar",
        "dispatch.json",
    ] {
        assert!(p.policy.contains_key(file), "policy/{file}");
    }
    assert!(
        p.manifests
            .contains_key("capabilities/document-analysis_1.0.0/manifest.json")
    );
    assert!(p.manifests.contains_key("wit/types.wit"));
    assert!(
        p.messages
            .contains_key(&format!("{task1}/task_submit.json"))
    );
    assert!(
        p.messages
            .contains_key(&format!("{task1}/task_completed.json"))
    );

    // The pack is the host's: pinned to the key `hcp keys show` prints.
    let keys = hcp.run(&["keys", "show"]);
    let key_file = tmp.path().join("host.pub");
    std::fs::write(&key_file, stdout(&keys)).expect("write");
    let (c, out) = verify(
        &hcp,
        &all,
        &["--trust-key", key_file.to_str().expect("utf8")],
    );
    assert_eq!(c, 0, "{out}");
    let other = Hcp::new();
    let other_key = other.run(&["keys", "init"]);
    let foreign = stdout(&other_key)
        .lines()
        .find_map(|l| l.strip_prefix("public").map(|k| k.trim().to_owned()))
        .expect("public key");
    let (c, out) = verify(&hcp, &all, &["--trust-key", &foreign]);
    assert_eq!(c, 1);
    assert!(
        out.contains("[key] key ") && out.contains("is not one of the trusted keys"),
        "{out}"
    );
    // Bound to its host (`HOST=KEY`), the key signs for that host only.
    let host = p.hosts[0].host_id.clone();
    let bound = format!("{host}={}", key_file.display());
    let (c, out) = verify(&hcp, &all, &["--trust-key", &bound]);
    assert_eq!(c, 0, "{out}");
    let elsewhere = format!("another-host={}", key_file.display());
    let (c, out) = verify(&hcp, &all, &["--trust-key", &elsewhere]);
    assert_eq!(c, 1, "{out}");
    assert!(
        out.contains(&format!("[key] host {host} declares key "))
            && out.contains(", which is trusted for host another-host only"),
        "{out}"
    );

    // One task, one session.
    let one = tmp.path().join("task.tar");
    let t = read(&export(&hcp, &["--task", &task1], &one));
    assert!(
        t.hosts[0]
            .receipts
            .iter()
            .any(|r| r.task_id.as_deref() == Some(task1.as_str()))
    );
    assert!(
        t.messages.keys().all(|k| k.starts_with(&task1)),
        "{:?}",
        t.messages.keys()
    );
    assert_eq!(verify(&hcp, &one, &[]).0, 0);
    assert_eq!(replay(&hcp, &one).0, 0);
    let s = tmp.path().join("session.tar");
    export(&hcp, &["--session", &session1], &s);
    assert_eq!(verify(&hcp, &s, &[]).0, 0);
    let o = hcp.run(&["evidence", "export", "--task", "task-none", "-o", "x.tar"]);
    assert_eq!(code(&o), 2);
    assert_eq!(stderr(&o), "error: no receipts of task task-none\n");
}

#[test]
fn every_host_call_kind_shows_up_in_receipts_allowed_and_denied() {
    let hcp = Hcp::new();
    let world = ProbeWorld::new();
    let (tmp, granted, other, web) = (&world.tmp, world.granted, world.other, world.web);
    let manifest = world
        .manifest
        .clone()
        .set("/limits/artifacts", json!(1))
        .set(
            "/safety_envelope",
            json!({"parameters": {"temperature": {"max": 1000, "unit": "celsius", "hard_limit": true}}}),
        )
        .write(tmp.path());
    let actions = json!([
        {"action": "log", "message": "hello"},
        {"action": "log", "message": "\u{1b}[2Jwiped"},
        {"action": "artifacts", "count": 2, "size": 3},
        {"action": "checkpoint", "label": "ramp", "state": {"t": 1}},
        {"action": "checkpoint", "label": "bad label", "state": {}},
        {"action": "load_checkpoint", "id": "ckpt-001"},
        {"action": "load_checkpoint", "id": "../x"},
        {"action": "read_file", "path": "/data/hello.txt"},
        {"action": "read_file", "path": "/data/../secret.txt"},
        {"action": "connect", "addr": granted.to_string()},
        {"action": "connect", "addr": other.to_string()},
        {"action": "udp", "addr": granted.to_string()},
        {"action": "lookup", "name": "localhost"},
        {"action": "lookup", "name": "example.com"},
        {"action": "http_get", "url": format!("http://localhost:{}/p", web.port())},
        {"action": "http_get", "url": format!("http://127.0.0.1:{}/p", other.port())},
        {"action": "instrument_read", "instrument": "cvd-rig"},
        {"action": "instrument_read", "instrument": "laser"},
        {"action": "instrument", "instrument": "cvd-rig", "command": "set_temperature", "arguments": {"target": 700}},
        {"action": "instrument", "instrument": "cvd-rig", "command": "set_temperature", "arguments": {"target": 1200}}
    ]);
    let mut submit: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json"
        ))
        .expect("example"),
    )
    .expect("json");
    submit["payload"]["capability"] = json!("probe");
    submit["payload"]["inputs"] = json!({"action": "each", "actions": actions});
    submit["payload"]
        .as_object_mut()
        .expect("payload")
        .remove("expected_output");
    let input = write_json(tmp.path(), "submit.json", &submit);
    let o = hcp.run(&[
        "run",
        "-q",
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    // The envelope breach ends the task with safety_violation.
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("\"safety_violation\""),
        "{}",
        stdout(&o)
    );
    let (task, _) = ids(&o);

    let path = tmp.path().join("probe.tar");
    let p = read(&export(&hcp, &["--task", &task], &path));
    let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for r in &p.hosts[0].receipts {
        *seen
            .entry((r.call.as_str(), r.reason_code.as_str()))
            .or_default() += 1;
        // Every DENY is signed one by one.
        assert!(
            r.verdict == Verdict::Allow || r.is_signed(),
            "{}",
            r.receipt_id
        );
    }
    for (call, code) in [
        ("log.write", reason::ALLOW),
        ("log.write", reason::THREAT_SIGNAL_DETECTED),
        ("artifacts.create", reason::ALLOW),
        ("artifacts.create", reason::BUDGET_EXCEEDED),
        ("checkpoints.save", reason::ALLOW),
        ("checkpoints.save", reason::DENY_ARGS_INVALID),
        ("checkpoints.load", reason::ALLOW),
        ("checkpoints.load", reason::DENY_ARGS_INVALID),
        ("fs.open", reason::ALLOW),
        ("fs.open", reason::DENY_IDENTITY_UNAUTHORIZED),
        ("net.connect", reason::ALLOW),
        ("net.connect", reason::DENY_TOOL_NOT_FOUND),
        ("net.udp", reason::DENY_TOOL_NOT_FOUND),
        ("net.lookup", reason::ALLOW),
        ("net.lookup", reason::DENY_TOOL_NOT_FOUND),
        ("http.request", reason::ALLOW),
        ("http.request", reason::DENY_TOOL_NOT_FOUND),
        ("instrument.read", reason::ALLOW),
        ("instrument.read", reason::DENY_TOOL_NOT_FOUND),
        ("instrument.command", reason::ALLOW),
        ("instrument.command", reason::DENY_ENVELOPE_HARD_LIMIT),
    ] {
        assert!(
            seen.contains_key(&(call, code)),
            "no {call} {code} in {seen:?}"
        );
    }
    let (c, out) = verify(&hcp, &path, &[]);
    assert_eq!(c, 0, "{out}");
    let (c, out) = replay(&hcp, &path);
    assert_eq!(c, 0, "{out}");
}

/// Two runs' pack, and a third run after it for the rollback case.
struct Packs {
    hcp: Hcp,
    tmp: tempfile::TempDir,
    bytes: Vec<u8>,
    pack: Pack,
}

fn packs() -> Packs {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    run_demo(&hcp);
    run_demo(&hcp);
    let bytes = export(&hcp, &["--all"], &tmp.path().join("pack.tar"));
    let pack = read(&bytes);
    Packs {
        hcp,
        tmp,
        bytes,
        pack,
    }
}

impl Packs {
    fn check(&self, name: &str, pack: &Pack) -> String {
        let path = forge(self.tmp.path(), name, pack);
        let (c, out) = verify(&self.hcp, &path, &[]);
        assert_eq!(c, 1, "{name} verified:\n{out}");
        assert!(out.starts_with("FAILED: "), "{out}");
        out
    }
}

fn has(out: &str, expected: &str) {
    assert!(
        out.lines().any(|l| l.starts_with(expected)),
        "expected a line starting with\n  {expected}\nin\n{out}"
    );
}

#[test]
fn tampering_fails_verification_with_its_own_message() {
    let p = packs();
    let host = p.pack.hosts[0].host_id.clone();
    let file = format!("receipts/{host}.jsonl");
    let at = |i: usize| format!("receipt {host}:{i} (receipts/{host}.jsonl index {i})");

    // A flipped byte, index left as it was: the index catches it.
    let mut raw = p.bytes.clone();
    let needle = b"\"args_hash\":\"sha256:";
    let pos = raw
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("a receipt")
        + needle.len();
    raw[pos] = if raw[pos] == b'0' { b'1' } else { b'0' };
    let flipped = p.tmp.path().join("flipped.tar");
    std::fs::write(&flipped, &raw).expect("write");
    let (c, out) = verify(&p.hcp, &flipped, &[]);
    assert_eq!(c, 1);
    has(
        &out,
        &format!("[pack] entry \"{file}\" does not match the index"),
    );

    // The same byte with a forged index: the chain and the proof catch it.
    let mut pack = p.pack.clone();
    receipts(&mut pack)[1] = flip_args_hash(&pack.hosts[0].receipts[1]);
    let out = p.check("flip.tar", &pack);
    has(
        &out,
        &format!("[inclusion] {}: inclusion proof against checkpoint", at(1)),
    );
    has(&out, &format!("[chain] {}: prev_hash is ", at(2)));

    // Reordered.
    let mut pack = p.pack.clone();
    receipts(&mut pack).swap(2, 3);
    let out = p.check("reorder.tar", &pack);
    has(
        &out,
        &format!(
            "[chain] receipt {host}:3 (receipts/{host}.jsonl index 2): seq 3 where 2 was expected: receipt 2 comes later (reordered)"
        ),
    );

    // Deleted.
    let mut pack = p.pack.clone();
    receipts(&mut pack).remove(2);
    let out = p.check("delete.tar", &pack);
    has(
        &out,
        &format!(
            "[chain] receipt {host}:3 (receipts/{host}.jsonl index 2): seq 3 where 2 was expected: receipt 2 is missing (deleted)"
        ),
    );

    // Inserted.
    let mut pack = p.pack.clone();
    let forged = flip_args_hash(&pack.hosts[0].receipts[2]);
    receipts(&mut pack).insert(2, forged);
    let out = p.check("insert.tar", &pack);
    has(
        &out,
        &format!(
            "[chain] receipt {host}:2 (receipts/{host}.jsonl index 3): seq 2 where 3 was expected: receipts out of order, repeated or inserted"
        ),
    );

    // Swapped in from another host's pack.
    let stranger_host = Hcp::new();
    run_demo(&stranger_host);
    let theirs = read(&export(
        &stranger_host,
        &["--all"],
        &p.tmp.path().join("theirs.tar"),
    ));
    let stranger = theirs.hosts[0].receipts[1].clone();
    let mut pack = p.pack.clone();
    receipts(&mut pack)[1] = stranger.clone();
    let out = p.check("swap.tar", &pack);
    has(
        &out,
        &format!(
            "[chain] receipt {} (receipts/{host}.jsonl index 1): ",
            id(&stranger)
        ),
    );

    // A checkpoint rolled back: a later export is known.
    run_demo(&p.hcp);
    let newer = p.tmp.path().join("newer.tar");
    export(&p.hcp, &["--all"], &newer);
    let old = p.tmp.path().join("pack.tar");
    let (c, out) = verify(
        &p.hcp,
        &old,
        &["--known-checkpoints", newer.to_str().expect("utf8")],
    );
    assert_eq!(c, 1, "{out}");
    has(&out, &format!("[consistency] host {host}: rollback: "));
    // ... and within one pack: the last checkpoint removed.
    let mut pack = p.pack.clone();
    let dropped = pack.hosts[0].checkpoints.pop().expect("a checkpoint");
    let last = pack.hosts[0].receipts.len() - 1;
    let out = p.check("rollback.tar", &pack);
    has(
        &out,
        &format!(
            "[inclusion] {}: inclusion proof names tree size {}, which no checkpoint of this host in the pack has",
            at(last),
            dropped.tree_size
        ),
    );
}

#[test]
fn an_edited_policy_snapshot_changes_replayed_verdicts() {
    let p = packs();
    let mut pack = p.pack.clone();
    let dispatch = String::from_utf8(pack.policy["dispatch.json"].clone())
        .expect("utf8")
        .replace(
            "\"capabilities\": {",
            "\"capabilities\": {\n    \"document-analysis\": {\"denied_calls\": [\"fs.open\"]},",
        );
    pack.policy
        .insert("dispatch.json".into(), dispatch.into_bytes());
    let path = forge(p.tmp.path(), "policy.tar", &pack);
    // The snapshot is not signed: verification passes, replay does not.
    assert_eq!(verify(&p.hcp, &path, &[]).0, 0);
    let (c, out) = replay(&p.hcp, &path);
    assert_eq!(c, 1, "{out}");
    let opens: Vec<&Receipt> = pack.hosts[0]
        .receipts
        .iter()
        .filter(|r| r.call == "fs.open")
        .collect();
    assert!(!opens.is_empty());
    for r in opens {
        assert!(
            out.contains(&format!(
                "receipt {} (receipts/{}.jsonl index {}): verdict changed: recorded ALLOW ALLOW, replayed DENY DENY_TOOL_NOT_FOUND",
                r.receipt_id, r.host_id, r.seq
            )),
            "{out}"
        );
    }
    assert!(
        out.contains("but the pack's policy snapshot is sha256:"),
        "{out}"
    );
    assert!(
        out.lines()
            .last()
            .is_some_and(|l| l.starts_with("DIFFERS: ")),
        "{out}"
    );
}

#[test]
fn a_pack_of_receipts_under_two_policies_carries_both_and_replays_the_same() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let policies = tmp.path().join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), policies.join(entry.file_name())).expect("copy");
    }
    let dir = policies.to_str().expect("utf8");
    let input = format!("{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json");
    let manifest = doc_manifest();
    let run = || {
        let out = hcp.run(&[
            "--policies",
            dir,
            "run",
            "-q",
            "--manifest",
            &manifest,
            "--input",
            &input,
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    };
    run();
    // The policy changes between the two tasks (a fact that decides
    // nothing here, so both tasks are allowed under either set).
    let callers = policies.join("callers.json");
    let text = std::fs::read_to_string(&callers).expect("callers");
    let edited = text.replacen(
        "\"description\": \"The seed's",
        "\"description\": \"Edited: the seed's",
        1,
    );
    assert_ne!(edited, text);
    std::fs::write(&callers, edited).expect("edit");
    run();

    let all = tmp.path().join("all.tar");
    let bytes = export(&hcp, &["--all"], &all);
    let p = read(&bytes);
    let hashes: std::collections::BTreeSet<String> = p.hosts[0]
        .receipts
        .iter()
        .map(|r| r.policy_hash.to_hex())
        .collect();
    assert_eq!(hashes.len(), 2, "{hashes:?}");
    // Each snapshot the receipts name, under the hex of its hash.
    let dirs: std::collections::BTreeSet<String> = p
        .policy
        .keys()
        .map(|k| k.split_once('/').expect("policy/<hex>/<file>").0.to_owned())
        .collect();
    assert_eq!(dirs, hashes);
    // Eight files each: the seven policy files and config.json (the
    // operator's wasi:config values, here the shipped empty one).
    assert_eq!(p.policy.len(), 16, "{:?}", p.policy.keys());
    assert_eq!(
        export(&hcp, &["--all"], &tmp.path().join("again.tar")),
        bytes
    );

    let (c, out) = verify(&hcp, &all, &[]);
    assert_eq!(c, 0, "{out}");
    let (c, out) = replay(&hcp, &all);
    assert_eq!(c, 0, "{out}");
    let total = p.hosts[0].receipts.len();
    assert_eq!(
        out.trim_end(),
        format!(
            "ok: {total} receipts, {total} replayed, {total} the same, 0 verdicts differ, 0 other findings"
        )
    );
}

mod merge;

/// Issue 41.6, for `hcp run` (no gate): a credential in the task's inputs
/// and in a log line of its guest rests sealed in `task_messages`, travels
/// as a keyed digest in the receipts and the pack, and the pack replays.
#[test]
fn a_credential_in_an_ungated_runs_inputs_is_withheld_from_the_store_and_the_pack() {
    const SECRET: &str = "Sw0rdfish-Run-4242";
    let hcp = Hcp::new();
    let world = ProbeWorld::new();
    let manifest = world.manifest.clone().write(world.tmp.path());
    let mut submit: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json"
        ))
        .expect("example"),
    )
    .expect("json");
    submit["payload"]["capability"] = json!("probe");
    submit["payload"]["intent"] = json!(format!("log in with password={SECRET}"));
    submit["payload"]["inputs"] =
        json!({"action": "log", "message": format!("connecting, api_key: {SECRET}")});
    submit["payload"]
        .as_object_mut()
        .expect("payload")
        .remove("expected_output");
    let input = write_json(world.tmp.path(), "submit.json", &submit);
    let o = hcp.run(&[
        "run",
        "-q",
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (task, _) = ids(&o);
    let path = world.tmp.path().join("run.tar");
    export(&hcp, &["--task", &task], &path);
    let unpacked = world.tmp.path().join("run.d");
    std::fs::create_dir_all(&unpacked).expect("mkdir");
    tar::Archive::new(std::fs::File::open(&path).expect("pack"))
        .unpack(&unpacked)
        .expect("untar");
    let mut todo = vec![unpacked];
    let mut files = 0;
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
                continue;
            }
            files += 1;
            let text = String::from_utf8_lossy(&std::fs::read(&p).expect("read")).into_owned();
            assert!(
                !text.contains(SECRET),
                "{} holds the credential",
                p.display()
            );
        }
    }
    assert!(files > 5, "the pack was unpacked");
    let (c, out) = replay(&hcp, &path);
    assert_eq!(c, 0, "{out}");
    let db = rusqlite::Connection::open(hcp.data.path().join("hcp.db")).expect("open");
    db.query_row("PRAGMA wal_checkpoint(FULL)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(db);
    for file in ["hcp.db", "hcp.db-wal"] {
        let bytes = std::fs::read(hcp.data.path().join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{file} holds the credential in clear"
        );
    }
}
