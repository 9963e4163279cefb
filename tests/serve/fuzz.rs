//! Whatever body arrives, the API answers with a JSON status, never a
//! server error or a dropped connection: arbitrary bytes and mutated good
//! bodies (bytes flipped, inserted, deleted or cut) on every endpoint that
//! reads a body, against the real server on loopback. `PROPTEST_CASES` sets
//! the number of cases (64 by default; `scripts/fuzz` runs many more).

use super::{LOCAL, OPERATOR, Server, example, lab};
use hcp_fuzzkit::{config, mutate};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Value, json};

/// The endpoints that read a body, with a good body and who sends it.
fn endpoints() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let body = |v: Value| v.to_string().into_bytes();
    vec![
        ("/v1/tasks", LOCAL, body(example("document-analysis"))),
        (
            "/v1/approvals/task-none",
            OPERATOR,
            body(json!({"decision": "approve", "reason": "within the SOP"})),
        ),
        ("/v1/hid/mode", OPERATOR, body(json!({"mode": "SUGGEST"}))),
        (
            "/v1/hid/proposals/prop-none",
            OPERATOR,
            body(json!({"decision": "reject", "reason": "no"})),
        ),
        ("/v1/policy/reload", OPERATOR, body(json!({}))),
    ]
}

fn answer(server: &Server, path: &str, token: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
    let (status, value, _) = server.post_raw(path, Some(token), "application/json", body);
    // A refusal of any kind (401 for a message naming another caller, 409
    // for a state that does not allow it, ...) but never a server error.
    prop_assert!(
        (200..300).contains(&status) || (400..500).contains(&status),
        "{path}: {status} {value}"
    );
    if status >= 400 {
        let message = value["error"]["message"].as_str().unwrap_or_default();
        prop_assert!(!message.is_empty(), "{path}: {status} {value}");
    }
    Ok(())
}

#[test]
fn every_body_gets_a_json_answer() {
    let data = lab();
    let server = Server::start(data.path());
    let endpoints = endpoints();
    let mut runner = TestRunner::new(config());
    let mutated = (
        0..endpoints.len(),
        hcp_fuzzkit::edits(1, 8),
        proptest::option::of(0.0..1.0f64),
    );
    runner
        .run(&mutated, |(which, edits, cut)| {
            let (path, token, good) = &endpoints[which];
            answer(&server, path, token, mutate(good, &edits, cut))
        })
        .expect("mutated bodies");
    let arbitrary = (
        0..endpoints.len(),
        proptest::collection::vec(any::<u8>(), 0..1024),
    );
    runner
        .run(&arbitrary, |(which, bytes)| {
            let (path, token, _) = &endpoints[which];
            answer(&server, path, token, bytes)
        })
        .expect("arbitrary bodies");
    // The server is still there.
    let (status, _) = server.get("/healthz", None);
    assert_eq!(status, 200);
}
