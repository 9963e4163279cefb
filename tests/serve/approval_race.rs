//! Issue 16.3: two operators deciding one task at the same moment. The
//! first decision wins; the other is told 409 (the task is no longer
//! waiting for approval), as the API documents, not 403.

use super::{ALPHA, OPERATOR, Server, error_code, example, lab, with_id};
use hcp_tests::REPO_ROOT;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Barrier;

/// A second operator, as able as the shipped one.
const SECOND: &str = "demo-token-operator-lab-02-not-a-secret";

fn policies_with_a_second_operator(dir: &Path) {
    std::fs::create_dir_all(dir).expect("policies dir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
    }
    let path = dir.join("callers.json");
    let mut callers: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("callers")).expect("json");
    let list = callers["callers"].as_array_mut().expect("callers");
    let mut second = list
        .iter()
        .find(|c| c["id"] == "operator-lab-01")
        .expect("the shipped operator")
        .clone();
    second["id"] = json!("operator-lab-02");
    second["credential"] = json!(
        hcp_policy::hash_credential(SECOND)
            .expect("hash")
            .to_string()
    );
    list.push(second);
    std::fs::write(&path, serde_json::to_string_pretty(&callers).expect("json")).expect("write");
}

#[test]
fn the_losing_decision_of_a_race_is_a_conflict() {
    let data = lab();
    let policies = data.path().join("policies");
    policies_with_a_second_operator(&policies);
    let server = Server::start_with(
        data.path(),
        &["--policies", policies.to_str().expect("utf-8")],
    );
    // All submitted first: none waits for resources another one holds.
    let mut paths = Vec::new();
    for round in 0..6 {
        let cvd = with_id(
            example("cvd-material-synthesis"),
            &format!("msg-cvd-race-{round}"),
        );
        let (status, pending, task) = server.post("/v1/tasks", ALPHA, &cvd);
        assert_eq!(status, 202, "{pending}");
        paths.push(format!("/v1/approvals/{}", task.expect("task id")));
    }
    for (round, path) in paths.iter().enumerate() {
        let barrier = Barrier::new(2);
        let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
            let decide = |token: &'static str, decision: &'static str| {
                let (server, path, barrier) = (&server, &path, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let (status, body, _) = server.post(
                        path,
                        token,
                        &json!({"decision": decision, "reason": "race"}),
                    );
                    (status, body)
                })
            };
            let a = decide(OPERATOR, "approve");
            let b = decide(SECOND, "reject");
            vec![a.join().expect("a"), b.join().expect("b")]
        });
        // One decision wins (200, or 202 when the task waits for its
        // resources); the other is a conflict.
        let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
        statuses.sort_unstable();
        assert!(
            matches!(statuses[..], [200 | 202, 409]),
            "round {round}: {answers:?}"
        );
        let (_, lost) = answers.iter().find(|(s, _)| *s == 409).expect("the loser");
        assert_eq!(error_code(lost), "conflict", "{lost}");
        assert!(
            lost["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("is not waiting for approval"),
            "{lost}"
        );
    }
}
