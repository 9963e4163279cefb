//! `hcp run` and the grants a task could redirect (issue 12): a manifest
//! whose read-write grant holds another grant is refused when it is loaded,
//! and so is a grant that reaches its directory through a symbolic link,
//! which is what a task of another capability leaves behind when it
//! replaces the directory with a link to `/etc`.

use super::{Hcp, code, parse_answer, stderr, stdout, write_json};
use hcp_tests::ManifestBuilder;
use serde_json::{Value, json};
use std::path::Path;

fn submit(inputs: Value) -> Value {
    json!({
        "hcp_version": "1.0",
        "message_id": "msg-containment",
        "timestamp": "2025-01-15T08:30:00.000Z",
        "session_id": null,
        "type": "task_submit",
        "payload": {
            "capability": "probe",
            "caller_id": "harness-local-01",
            "intent": "probe the containment of granted directories",
            "inputs": inputs,
            "constraints": {"max_duration": "PT30S", "data_classification": "T1"}
        }
    })
}

/// Runs the probe of the manifest in `dir` granting `grants`.
fn run(hcp: &Hcp, dir: &Path, grants: Value, inputs: Value) -> std::process::Output {
    std::fs::create_dir_all(dir).expect("mkdir");
    let manifest = hcp_tests::probe_granting_files(grants).write(dir);
    let input = write_json(dir, "submit.json", &submit(inputs));
    hcp.run(&[
        "run",
        "--quiet",
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ])
}

#[test]
fn a_grant_a_task_could_redirect_is_refused_by_hcp_run() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let rw = base.join("rw");
    std::fs::create_dir_all(rw.join("sub")).expect("mkdir");

    // The reproduction of the issue, in one manifest: refused as loaded.
    let both = json!([
        {"path": rw, "guest_path": "/rw", "access": "read-write"},
        {"path": rw.join("sub"), "guest_path": "/sub", "access": "read-only"}
    ]);
    let out = run(
        &hcp,
        &base.join("both"),
        both,
        json!({"action": "remove_dir", "path": "/rw/sub"}),
    );
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "/grants/filesystem/1/path: {}/sub (guest /sub) lies within the read-write grant {} (guest /rw): \
             a task could replace it with a link to any directory; \
             grant directories that do not contain each other",
            rw.display(),
            rw.display()
        )),
        "{}",
        stderr(&out)
    );
    assert!(rw.join("sub").is_dir(), "nothing ran");

    // The same attack from a capability granted only the outer directory.
    let depth = rw.components().count() - 1;
    let out = run(
        &hcp,
        &base.join("writer"),
        json!([{"path": rw, "guest_path": "/rw", "access": "read-write"}]),
        json!({"action": "each", "actions": [
            {"action": "remove_dir", "path": "/rw/sub"},
            {"action": "symlink", "preopen": "/rw",
             "target": format!("{}etc", "../".repeat(depth)), "name": "sub"}
        ]}),
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let reports = parse_answer(&out).payload["outputs"]["value"].clone();
    assert_eq!(
        reports,
        json!([{"ok": true, "value": null}, {"ok": true, "value": null}])
    );
    // The next run of the inner grant reads no host file.
    let out = run(
        &hcp,
        &base.join("reader"),
        json!([{"path": rw.join("sub"), "guest_path": "/sub", "access": "read-only"}]),
        json!({"action": "read_file", "path": "/sub/passwd"}),
    );
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "/grants/filesystem/0/path: {}/sub passes through a symbolic link (it resolves to /etc): \
             granted directories are opened without following links; grant /etc itself",
            rw.display()
        )),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("root:"), "{}", stdout(&out));
}

/// Issue 12, item 6: 200 MiB written into a read-write grant under the
/// shipped 64 MiB byte budget.
#[test]
fn file_writes_stop_at_the_shipped_byte_budget() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let out = base.join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let out_dir = base.join("writer");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE)
        .set(
            "/grants/filesystem",
            json!([{"path": out, "guest_path": "/out", "access": "read-write"}]),
        )
        .set(
            "/grants/network",
            json!([{"host": "localhost", "port": 9, "allow_private": true}]),
        )
        .set("/grants/instruments", json!(["cvd-rig"]))
        .set("/limits/log_bytes", json!(1 << 20))
        .write(&out_dir);
    let input = write_json(
        &out_dir,
        "submit.json",
        &submit(json!({"action": "write_large", "path": "/out/big.bin",
                       "bytes": 200u64 << 20, "chunk": 1 << 20})),
    );
    let out_run = hcp.run(&[
        "run",
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out_run), 0, "{}", stderr(&out_run));
    let outputs = parse_answer(&out_run).payload["outputs"].clone();
    assert_eq!(outputs["ok"], false, "{outputs}");
    let written = outputs["written"].as_u64().expect("written");
    assert!(written <= 64 << 20, "{written} bytes written");
    let on_disk = std::fs::metadata(out.join("big.bin")).expect("file").len();
    assert!(on_disk <= 64 << 20, "{on_disk} bytes on disk");
    assert!(
        stderr(&out_run).contains("denied (BUDGET_EXCEEDED): fs.write ("),
        "{}",
        stderr(&out_run)
    );
    // The bytes used when the write was refused include the paths of the
    // task's filesystem calls, which count against the same budget.
    assert!(
        stderr(&out_run).contains("the session may move 67108864 bytes through host calls, "),
        "{}",
        stderr(&out_run)
    );
    assert!(
        stderr(&out_run).contains(" are used (budgets.bytes)"),
        "{}",
        stderr(&out_run)
    );
    // The fs.write receipts verify and replay to the same verdicts.
    let pack = base.join("pack.tar");
    let o = hcp.run(&[
        "evidence",
        "export",
        "--all",
        "-o",
        pack.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = hcp.run(&["evidence", "verify", pack.to_str().expect("utf8")]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = hcp.run(&["replay", pack.to_str().expect("utf8")]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("ok: "), "{}", stdout(&o));
}

/// A grant may not reach the host's own directories: the data directory
/// (its private keys, its database, the installed components), the
/// compiled-code cache (whoever writes it runs code in the host) or the
/// policies. Granted read-only, the data directory handed the guest the
/// host's signing key; a `${manifest_dir}` grant run from a directory that
/// holds the data directory (`hcp run`'s default `./.hcp`) did the same.
#[test]
fn a_grant_that_reaches_the_hosts_own_directories_is_refused() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    // A first run makes the data directory and its keys.
    let apart = base.join("apart");
    std::fs::create_dir_all(&apart).expect("mkdir");
    let out = run(
        &hcp,
        &base.join("first"),
        json!([{"path": apart, "guest_path": "/apart", "access": "read-only"}]),
        json!({"action": "list_dir", "path": "/apart"}),
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let data = hcp.data.path().canonicalize().expect("data");
    let parent = data.parent().expect("parent").to_path_buf();
    for (case, granted, read) in [
        ("the data directory", data.clone(), "/host/keys/host.key"),
        ("a directory holding it", parent.clone(), "/host"),
        ("a directory inside it", data.join("keys"), "/host/host.key"),
    ] {
        let out = run(
            &hcp,
            &base.join(case.replace(' ', "-")),
            json!([{"path": granted, "guest_path": "/host", "access": "read-only"}]),
            json!({"action": "read_file", "path": read}),
        );
        assert_eq!(code(&out), 2, "{case}: {}{}", stdout(&out), stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "probe@1.0.0: the grant of {} reaches the host's own directory",
                granted.display()
            )),
            "{case}: {}",
            stderr(&out)
        );
    }
}

/// A command raises its soft limit of open files to the hard limit: each
/// task may hold 512 descriptors, and under a low soft limit (1,024 is
/// usual) two tasks holding theirs left the host none. Here the soft limit
/// is 64: a task opening 300 files got "too many open files" after a few
/// dozen.
#[test]
fn a_command_raises_its_open_files_limit_to_the_hard_limit() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let data = base.join("data");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::write(data.join("f.txt"), "one file").expect("write");
    let dir = base.join("opener");
    std::fs::create_dir(&dir).expect("mkdir");
    let manifest = hcp_tests::probe_granting_files(
        json!([{"path": data, "guest_path": "/data", "access": "read-only"}]),
    )
    .write(&dir);
    let input = write_json(
        &dir,
        "submit.json",
        &submit(json!({"action": "open_files", "path": "/data/f.txt", "count": 300})),
    );
    let out = hcp.run_under(
        &["prlimit", "--nofile=64:4096", "--"],
        &[
            "run",
            "--quiet",
            "--manifest",
            manifest.to_str().expect("utf8"),
            "--input",
            input.to_str().expect("utf8"),
        ],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        parse_answer(&out).payload["outputs"],
        json!({"ok": true, "value": 300}),
        "{}",
        stderr(&out)
    );
}
