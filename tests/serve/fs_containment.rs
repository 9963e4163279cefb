//! Issue 12 through `hcp serve`, with the shipped policies in force: a
//! grant redirected by another capability's task (to `/etc`, or to a
//! dangling link) fails only its own tasks, with `resource_unavailable`
//! and a clear message; the listing of capabilities keeps answering; every
//! task gets a final state, also after a restart. A manifest whose
//! read-write grant holds another grant is not installed.

use super::{LOCAL, Server, paths};
use hcp::engine::{Host, HostConfig};
use hcp_tests::ManifestBuilder;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The probe, as `document-analysis` (a name the shipped caller policy
/// lets `harness-local-01` use) at `version`, granted `grants`.
fn probe_manifest(dir: &Path, version: &str, grants: Value) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    ManifestBuilder::new("document-analysis", hcp_tests::PROBE)
        .set("/capability/version", json!(version))
        .set("/grants/filesystem", grants)
        // The probe imports every interface: the rest is granted too.
        .set(
            "/grants/network",
            json!([{"host": "localhost", "port": 9, "allow_private": true}]),
        )
        .set("/grants/instruments", json!(["cvd-rig"]))
        .write(dir)
}

fn submit(version: &str, message_id: &str, inputs: Value) -> Value {
    json!({
        "hcp_version": "1.0",
        "message_id": message_id,
        "timestamp": "2025-01-15T08:30:00.000Z",
        "session_id": null,
        "type": "task_submit",
        "payload": {
            "capability": "document-analysis",
            "capability_version": format!("={version}"),
            "caller_id": "harness-local-01",
            "intent": "Analyze the provided research paper and extract key findings",
            "inputs": inputs,
            "constraints": {"max_duration": "PT30S", "data_classification": "T1"}
        }
    })
}

/// Submits and waits for the final answer; returns it with the task id.
fn run(server: &Server, version: &str, message_id: &str, inputs: Value) -> (Value, String) {
    let (status, answer, task) =
        server.post("/v1/tasks", LOCAL, &submit(version, message_id, inputs));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_accepted", "{answer}");
    let task = task.expect("x-hcp-task-id");
    (server.wait_result(&task, LOCAL), task)
}

fn listing_answers(server: &Server) {
    let (status, caps) = server.get("/v1/capabilities", Some(LOCAL));
    assert_eq!(status, 200, "{caps}");
    assert_eq!(
        caps["capabilities"][0]["installed_versions"],
        json!(["1.0.0", "1.1.0"]),
        "{caps}"
    );
}

#[test]
fn a_redirected_grant_fails_only_its_own_tasks() {
    let data = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let rw = base.join("rw");
    let sub = rw.join("sub");
    std::fs::create_dir_all(&sub).expect("mkdir");
    std::fs::write(sub.join("note.txt"), "granted note").expect("write");
    {
        let host = Host::open(paths(data.path()), HostConfig::default()).expect("host");
        // One manifest granting both: the attack as reported, not installed.
        let both = probe_manifest(
            &base.join("both"),
            "0.9.0",
            json!([
                {"path": rw, "guest_path": "/rw", "access": "read-write"},
                {"path": sub, "guest_path": "/sub", "access": "read-only"}
            ]),
        );
        let refused = host.install_manifest(&both).expect_err("refused");
        assert!(
            format!("{refused:#}").contains(&format!(
                "/grants/filesystem/1/path: {} (guest /sub) lies within the read-write grant {} (guest /rw): \
                 a task could replace it with a link to any directory; \
                 grant directories that do not contain each other",
                sub.display(),
                rw.display()
            )),
            "{refused:#}"
        );
        // The same grants, held by two versions.
        for (version, grants) in [
            (
                "1.0.0",
                json!([{"path": rw, "guest_path": "/rw", "access": "read-write"}]),
            ),
            (
                "1.1.0",
                json!([{"path": sub, "guest_path": "/sub", "access": "read-only"}]),
            ),
        ] {
            let m = probe_manifest(&base.join(version), version, grants);
            host.install_manifest(&m).expect("install");
        }
    }
    let link_to_etc = format!("{}etc", "../".repeat(rw.components().count() - 1));
    // The caller is told the guest path; the operator's log has the
    // host's (checked below).
    let unavailable = "granted directory /sub is unavailable: its host directory, or a \
                       directory on the way to it, is a symbolic link (granted directories \
                       are opened without following links)"
        .to_owned();
    let failed_task = {
        let server = Server::start(data.path());
        let (answer, _) = run(
            &server,
            "1.1.0",
            "m-read-1",
            json!({"action": "read_file", "path": "/sub/note.txt"}),
        );
        assert_eq!(answer["type"], "task_completed", "{answer}");
        assert_eq!(answer["payload"]["outputs"]["value"], "granted note");

        let (answer, _) = run(
            &server,
            "1.0.0",
            "m-plant-1",
            json!({"action": "each", "actions": [
                {"action": "remove", "path": "/rw/sub/note.txt"},
                {"action": "remove_dir", "path": "/rw/sub"},
                {"action": "symlink", "preopen": "/rw", "target": link_to_etc, "name": "sub"}
            ]}),
        );
        assert_eq!(answer["type"], "task_completed", "{answer}");
        assert_eq!(
            answer["payload"]["outputs"]["value"],
            json!([{"ok": true, "value": null}, {"ok": true, "value": null}, {"ok": true, "value": null}])
        );

        let (answer, _) = run(
            &server,
            "1.1.0",
            "m-read-2",
            json!({"action": "read_file", "path": "/sub/passwd"}),
        );
        assert_eq!(answer["type"], "task_failed", "{answer}");
        assert_eq!(answer["payload"]["error_code"], "resource_unavailable");
        assert_eq!(answer["payload"]["error_message"], unavailable.as_str());
        listing_answers(&server);

        // A dangling link in its place: still a clear answer, not a 500.
        let (answer, _) = run(
            &server,
            "1.0.0",
            "m-plant-2",
            json!({"action": "each", "actions": [
                {"action": "remove", "path": "/rw/sub"},
                {"action": "symlink", "preopen": "/rw", "target": "gone", "name": "sub"}
            ]}),
        );
        assert_eq!(answer["type"], "task_completed", "{answer}");
        listing_answers(&server);
        let (answer, task) = run(
            &server,
            "1.1.0",
            "m-read-3",
            json!({"action": "read_file", "path": "/sub/note.txt"}),
        );
        assert_eq!(answer["type"], "task_failed", "{answer}");
        assert_eq!(answer["payload"]["error_code"], "resource_unavailable");
        assert_eq!(answer["payload"]["error_message"], unavailable.as_str());
        // The writer's version runs on.
        let (answer, _) = run(
            &server,
            "1.0.0",
            "m-list-1",
            json!({"action": "list_dir", "path": "/rw"}),
        );
        assert_eq!(
            answer["payload"]["outputs"]["value"],
            json!(["sub"]),
            "{answer}"
        );
        task
    };

    let log = std::fs::read_to_string(data.path().join("serve.log")).expect("log");
    assert!(
        log.contains(&format!(
            "granted directory {} (guest /sub) is unavailable: {} is a symbolic link",
            sub.display(),
            sub.display()
        )),
        "the operator's log does not name the host's directory:\n{log}"
    );

    // After a restart, the failed task is still final and nothing is queued.
    let server = Server::start(data.path());
    let answer = server.wait_result(&failed_task, LOCAL);
    assert_eq!(answer["payload"]["error_message"], unavailable.as_str());
    let (status, list) = server.get("/v1/tasks?limit=1000", Some(LOCAL));
    assert_eq!(status, 200, "{list}");
    for t in list["tasks"].as_array().expect("tasks") {
        assert!(
            matches!(t["state"].as_str(), Some("completed" | "failed")),
            "{t}"
        );
    }
    listing_answers(&server);
    drop(server);

    // A damaged install is listed as unavailable; the listing answers.
    let record = data
        .path()
        .join("capabilities/document-analysis/1.1.0/granted-dirs.json");
    assert!(record.is_file(), "{}", record.display());
    std::fs::write(&record, "not json").expect("damage");
    let server = Server::start(data.path());
    let (status, caps) = server.get("/v1/capabilities", Some(LOCAL));
    assert_eq!(status, 200, "{caps}");
    assert_eq!(
        caps["capabilities"][0],
        json!({
            "capability": {"name": "document-analysis"},
            "installed_versions": ["1.0.0", "1.1.0"],
            "unavailable": "the installed files of document-analysis@1.1.0 cannot be loaded (the host's log says why)"
        })
    );
}

/// After a grant's directory was replaced, reinstalling the capability
/// records the new directory, and the running host uses it (its prepared
/// capability is not reused).
#[tokio::test]
async fn a_reinstall_grants_the_new_directory() {
    use hcp::engine::Auth;
    let data = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let sub = base.join("sub");
    std::fs::create_dir(&sub).expect("mkdir");
    std::fs::write(sub.join("note.txt"), "first note").expect("write");
    let host = Host::open(paths(data.path()), HostConfig::default()).expect("host");
    let manifest = probe_manifest(
        &base.join("reader"),
        "1.1.0",
        json!([{"path": sub, "guest_path": "/sub", "access": "read-only"}]),
    );
    host.install_manifest(&manifest).expect("install");
    let read = |id: &str| {
        submit(
            "1.1.0",
            id,
            json!({"action": "read_file", "path": "/sub/note.txt"}),
        )
    };
    let run = |message: Value| {
        let host = &host;
        async move {
            let s = host
                .submit(&message, Auth::Transport("harness-local-01"))
                .expect("submit");
            assert!(s.runnable, "{}", s.answer);
            let id = s.task_id.expect("task id");
            hcp_tests::wire(&host.run_task(&id).await.expect("run").expect("ran"))
        }
    };
    let answer = run(read("m-1")).await;
    assert_eq!(
        answer["payload"]["outputs"]["value"], "first note",
        "{answer}"
    );

    std::fs::rename(&sub, base.join("old-sub")).expect("move aside");
    std::fs::create_dir(&sub).expect("mkdir");
    std::fs::write(sub.join("note.txt"), "second note").expect("write");
    let answer = run(read("m-2")).await;
    assert_eq!(
        answer["payload"]["error_code"], "resource_unavailable",
        "{answer}"
    );

    hcp::install::remove(&host.store, "document-analysis", "1.1.0").expect("remove");
    host.install_manifest(&manifest).expect("reinstall");
    let answer = run(read("m-3")).await;
    assert_eq!(
        answer["payload"]["outputs"]["value"], "second note",
        "{answer}"
    );
}

/// Issue 41, case 7: a task whose granted directory is missing on the host
/// is answered `resource_unavailable` naming the guest path only: the
/// caller knows its grants by their guest paths, and the host's
/// directories are the operator's. The operator's log names the host's
/// directory.
#[test]
fn a_missing_granted_directory_is_answered_with_its_guest_path_only() {
    let data = tempfile::tempdir().expect("tempdir");
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let granted = base.join("lab-share/inbox");
    std::fs::create_dir_all(&granted).expect("mkdir");
    {
        let host = Host::open(paths(data.path()), HostConfig::default()).expect("host");
        let m = probe_manifest(
            &base.join("manifest"),
            "1.0.0",
            json!([{"path": granted, "guest_path": "/inbox", "access": "read-only"}]),
        );
        host.install_manifest(&m).expect("install");
    }
    std::fs::remove_dir(&granted).expect("rmdir");
    let server = Server::start(data.path());
    let (answer, task) = run(
        &server,
        "1.0.0",
        "m-missing-1",
        json!({"action": "list_dir", "path": "/inbox"}),
    );
    assert_eq!(answer["type"], "task_failed", "{answer}");
    assert_eq!(answer["payload"]["error_code"], "resource_unavailable");
    assert_eq!(
        answer["payload"]["error_message"],
        "granted directory /inbox is unavailable: its host directory, or a directory on the \
         way to it, does not exist"
    );
    // Nothing the caller can read names the host's directories.
    let host_dir = base.to_string_lossy().into_owned();
    for path in [
        format!("/v1/tasks/{task}"),
        format!("/v1/tasks/{task}/result"),
    ] {
        let (status, body) = server.get(&path, Some(LOCAL));
        assert_eq!(status, 200, "{path}: {body}");
        assert!(!body.to_string().contains(&host_dir), "{path}: {body}");
    }
    drop(server);
    let log = std::fs::read_to_string(data.path().join("serve.log")).expect("log");
    assert!(
        log.contains(&format!(
            "granted directory {} (guest /inbox) is unavailable: {} does not exist",
            granted.display(),
            granted.display()
        )),
        "the operator's log does not name the host's directory:\n{log}"
    );
}
