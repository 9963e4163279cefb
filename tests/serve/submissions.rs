//! One caller cannot fill the disk with submissions (issue 41, case 8):
//! `budgets.json` `submissions` limits each caller's rate and the bytes of
//! its messages recorded in a day, refused ones included; a refused large
//! submission is kept as a hash and a prefix, in its task and in its
//! receipt; and what is refused over a limit is answered 429 with
//! `Retry-After` and `rate_limited`, with nothing recorded. The limits are
//! set in a copy of the repository's policies (`HCP_POLICIES`).

use super::{LOCAL, Server, example, lab, with_id};
use hcp_tests::REPO_ROOT;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// The repository's policies with `submissions` set to `limits`.
fn policies_with(limits: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    let path = dir.path().join("budgets.json");
    let mut budgets: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    budgets["submissions"] = json!({ "defaults": limits });
    std::fs::write(&path, budgets.to_string()).expect("write");
    dir
}

/// The document-analysis example with a `document_uri` of `bytes` that is
/// no URI: refused `invalid_input` at the gate, by a schema error that
/// quotes the whole value.
fn invalid(id: &str, bytes: usize) -> Value {
    let mut m = with_id(example("document-analysis"), id);
    m["payload"]["inputs"]["document_uri"] = json!("x".repeat(bytes));
    m["payload"]["context"] = json!({"notes": "y".repeat(bytes / 4)});
    m
}

/// Status, body and `Retry-After` of a submission.
fn submit(server: &Server, m: &Value) -> (u16, Value, Option<u64>) {
    let mut resp = server
        .agent
        .post(server.url("/v1/tasks"))
        .header("Content-Type", "application/json")
        .header("Authorization", format!("Bearer {LOCAL}"))
        .send(m.to_string().as_bytes())
        .expect("POST");
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let text = resp.body_mut().read_to_string().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
        retry,
    )
}

/// `hcp.db` and its write-ahead log, in bytes.
fn db_bytes(data: &Path) -> u64 {
    ["hcp.db", "hcp.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(data.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

fn start(data: &Path, policies: &Path) -> Server {
    Server::start_with(data, &["--policies", policies.to_str().expect("utf8")])
}

fn reason(body: &Value) -> &str {
    body["payload"]["reason_code"].as_str().unwrap_or("")
}

#[test]
fn large_refused_submissions_are_bounded_and_a_caller_over_its_limits_gets_429() {
    const MIB: usize = 1 << 20;
    let data = lab();
    let policies = policies_with(json!({
        "per_second": 1,
        "burst": 10,
        "stored_bytes_per_day": 4 * MIB,
    }));
    let mut server = start(data.path(), policies.path());
    let before = db_bytes(data.path());

    // Four refused submissions of about 0.9 MB each (under the 1 MiB body
    // limit): each is answered, and each counts against the day's bytes.
    for i in 0..4 {
        let (status, body, _) = submit(&server, &invalid(&format!("big-{i}"), 700_000));
        assert_eq!(status, 200, "{body}");
        assert_eq!(reason(&body), "invalid_input", "{body}");
        let message = body["payload"]["reason_message"].as_str().expect("message");
        assert!(message.len() < 5_000, "{} bytes of reason", message.len());
    }
    // The fifth would pass 4 MiB: refused before anything is recorded.
    let (status, body, retry) = submit(&server, &invalid("big-4", 700_000));
    assert_eq!(status, 429, "{body}");
    assert_eq!(reason(&body), "rate_limited", "{body}");
    assert_eq!(body["type"], "task_rejected");
    let retry = retry.expect("Retry-After");
    assert!(
        retry > 3600,
        "the day's bytes free up in hours, not {retry} s"
    );

    // Small ones still fit the day's bytes, up to what is left of the
    // bucket (a burst of 10, five taken, one a second back): then the
    // rate refuses, for about a second.
    let mut accepted = 0;
    let (retry, id) = loop {
        let id = format!("small-{accepted}");
        let (status, body, retry) = submit(&server, &invalid(&id, 100));
        if status == 429 {
            assert_eq!(reason(&body), "rate_limited", "{body}");
            break (retry, id);
        }
        assert_eq!((status, reason(&body)), (200, "invalid_input"), "{body}");
        accepted += 1;
        assert!(
            accepted <= 10,
            "no 429 after {accepted} submissions at a burst of 10"
        );
    };
    assert!(accepted >= 3, "{accepted}");
    assert!(matches!(retry, Some(1..=2)), "{retry:?}");
    // Nothing of a refused one was recorded: the same message_id is free.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (status, body, _) = submit(&server, &invalid(&id, 100));
    assert_eq!((status, reason(&body)), (200, "invalid_input"), "{body}");

    server.signal("-TERM");
    assert!(server.wait_exit().success());
    let grown = db_bytes(data.path()).saturating_sub(before);
    // Four refused 0.9 MB messages kept whole in their task and their
    // receipt grow the database by 7 MB; bounded, by about one message
    // (the pages of the last one, freed once it was refused).
    assert!(
        grown < 3 * MIB as u64,
        "hcp.db grew by {grown} bytes for four refused submissions"
    );

    // The day's bytes are read back from the store: a restart does not
    // reset them.
    let server = start(data.path(), policies.path());
    let (status, body, _) = submit(&server, &invalid("big-5", 700_000));
    assert_eq!((status, reason(&body)), (429, "rate_limited"), "{body}");
    drop(server);

    // Every receipt still replays: a refusal's bounded payload and a
    // bounded context read nothing the decision needed.
    let pack = data.path().join("pack.tar");
    let hcp = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(args)
            .env("HCP_DATA_DIR", data.path())
            .env("HCP_POLICIES", policies.path())
            .current_dir(REPO_ROOT)
            .output()
            .expect("hcp")
    };
    let out = hcp(&[
        "evidence",
        "export",
        "--all",
        "-o",
        pack.to_str().expect("utf8"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = hcp(&["replay", pack.to_str().expect("utf8")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("ok: "), "{out:?}");
}
