//! Policy reload on a running server: an edit on disk alone changes
//! nothing; `POST /v1/policy/reload` and SIGHUP swap the whole set, each a
//! `policy.reload` receipt under the new hash that later receipts carry; an
//! invalid edit is refused with every problem and the set in force kept.

use super::{ALPHA, LOCAL, OPERATOR, Server, error_code, example, lab};
use hcp_tests::REPO_ROOT;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

fn copy_policies(to: &Path) {
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

fn risk_of(server: &Server, token: &str) -> Value {
    let (status, who) = server.get("/v1/whoami", Some(token));
    assert_eq!(status, 200, "{who}");
    who["max_risk_level"].clone()
}

/// The newest receipts, newest first.
fn receipts(server: &Server) -> Vec<Value> {
    let (status, body) = server.get("/v1/receipts?limit=100", Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    body["receipts"].as_array().expect("receipts").clone()
}

fn reloads(server: &Server) -> Vec<Value> {
    receipts(server)
        .into_iter()
        .filter(|r| r["call"] == "policy.reload")
        .collect()
}

#[test]
fn reload_swaps_the_checked_set_records_it_and_keeps_it_on_a_bad_edit() {
    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    copy_policies(policies.path());
    let dir = policies.path().to_str().expect("utf-8 path");
    let server = Server::start_with(data.path(), &["--policies", dir]);
    let callers = policies.path().join("callers.json");
    let original = std::fs::read_to_string(&callers).expect("callers");
    assert_eq!(risk_of(&server, ALPHA), "R4");

    // An edit on disk alone changes nothing.
    let lowered = original.replacen(
        "\"max_risk_level\": \"R4\",\n      \"max_data_classification\": \"T3\"",
        "\"max_risk_level\": \"R3\",\n      \"max_data_classification\": \"T3\"",
        1,
    );
    assert_ne!(lowered, original, "the edit applies");
    std::fs::write(&callers, &lowered).expect("edit");
    assert_eq!(risk_of(&server, ALPHA), "R4");

    // Only an operator reloads.
    let (status, body, _) = server.post("/v1/policy/reload", ALPHA, &json!({}));
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");
    assert!(reloads(&server).is_empty());

    // The endpoint swaps the set: the old and new hash, the new set in force.
    let (status, body, _) = server.post("/v1/policy/reload", OPERATOR, &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["changed"], true, "{body}");
    let (first, second) = (
        body["old_hash"].as_str().expect("old").to_owned(),
        body["new_hash"].as_str().expect("new").to_owned(),
    );
    assert_ne!(first, second);
    assert!(second.starts_with("sha256:"), "{body}");
    assert_eq!(risk_of(&server, ALPHA), "R3");
    let recorded = reloads(&server);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        (
            &recorded[0]["verdict"],
            &recorded[0]["reason_code"],
            &recorded[0]["policy_hash"],
            &recorded[0]["signed"],
        ),
        (
            &json!("ALLOW"),
            &json!("ALLOW"),
            &json!(second),
            &json!(true)
        )
    );

    // An invalid edit is refused with every problem; the set is kept.
    std::fs::write(&callers, "{\"callers\": [").expect("break callers");
    std::fs::write(policies.path().join("risk.json"), "{\"no_such_field\": 1}")
        .expect("break risk");
    let (status, body, _) = server.post("/v1/policy/reload", OPERATOR, &json!({}));
    assert_eq!(status, 422, "{body}");
    assert_eq!(error_code(&body), "invalid_policy", "{body}");
    assert_eq!(body["policy_hash"], json!(second), "{body}");
    let files: Vec<&str> = body["error"]["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| p["file"].as_str().expect("file"))
        .collect();
    assert!(
        files.contains(&"callers.json") && files.contains(&"risk.json"),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .ends_with(&format!("the set in force ({second}) is kept")),
        "{body}"
    );
    assert_eq!(risk_of(&server, ALPHA), "R3");
    let recorded = reloads(&server);
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert_eq!(
        (
            &recorded[0]["verdict"],
            &recorded[0]["reason_code"],
            &recorded[0]["policy_hash"],
        ),
        (&json!("DENY"), &json!("DENY_ARGS_INVALID"), &json!(second))
    );

    // SIGHUP reloads (it does not stop the server): the repaired files
    // bring the first set back.
    std::fs::write(&callers, &original).expect("restore callers");
    std::fs::copy(
        Path::new(REPO_ROOT).join("policies/risk.json"),
        policies.path().join("risk.json"),
    )
    .expect("restore risk");
    server.signal("-HUP");
    let deadline = Instant::now() + Duration::from_secs(60);
    while risk_of(&server, ALPHA) != "R4" {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(100));
    }
    let recorded = reloads(&server);
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    assert_eq!(
        (&recorded[0]["verdict"], &recorded[0]["policy_hash"]),
        (&json!("ALLOW"), &json!(first))
    );

    // Receipts after the reload carry the set in force.
    let (status, answer, task) = server.post("/v1/tasks", LOCAL, &example("document-analysis"));
    assert_eq!(status, 200, "{answer}");
    let task = task.expect("task id");
    let result = server.wait_result(&task, LOCAL);
    assert_eq!(result["type"], "task_completed", "{result}");
    let (status, body) = server.get(&format!("/v1/receipts?task={task}"), Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    let hashes: Vec<&Value> = body["receipts"]
        .as_array()
        .expect("receipts")
        .iter()
        .map(|r| &r["policy_hash"])
        .collect();
    assert!(hashes.len() >= 3, "{body}");
    assert!(hashes.iter().all(|h| **h == json!(first)), "{body}");

    // `hcp policy reload` asks the server: nothing changed, then a refusal
    // with every problem (exit 1), the set kept.
    let cli = |token: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(["policy", "reload", "--server", &server.base])
            .env("HCP_CREDENTIAL", token)
            .output()
            .expect("hcp policy reload")
    };
    let out = cli(OPERATOR);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
        ),
        (Some(0), format!("policy unchanged: {first}\n"))
    );
    let json_cli = |token: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(["policy", "reload", "--json", "--server", &server.base])
            .env("HCP_CREDENTIAL", token)
            .output()
            .expect("hcp policy reload --json");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let body: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        (out.status.code(), body)
    };
    let (code, body) = json_cli(OPERATOR);
    assert_eq!(code, Some(0), "{body}");
    assert_eq!(
        (&body["changed"], &body["new_hash"]),
        (&json!(false), &json!(first))
    );
    std::fs::write(&callers, "{}").expect("break callers");
    let (code, body) = json_cli(OPERATOR);
    assert_eq!(code, Some(1), "{body}");
    assert!(
        body["error"]["problems"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "{body}"
    );
    let out = cli(OPERATOR);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with(&format!(
            "policy reload refused: the policy set does not check (1 problem); the set in force ({first}) is kept\n  callers.json: "
        )),
        "{text}"
    );
    let out = cli(ALPHA);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: POST /v1/policy/reload: 403: harness-alpha-001 is not an operator\n"
    );
    assert_eq!(risk_of(&server, ALPHA), "R4");
}
