//! HID mediation end to end: `hcp hid sim` on a real pseudo-terminal as the
//! executor, `hcp serve --hid-device <pty>`, the `hid-assistant` plugin
//! proposing the steps of its task, an operator deciding over HTTP and the
//! `hcp hid` command line. What the simulator "typed" is read back from its
//! record file.

use super::{ALPHA, OPERATOR, Server, error_code, example, lab, with_id};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running `hcp hid sim`.
struct Sim {
    child: Child,
    pty: String,
}

impl Sim {
    fn start(record: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(["hid", "sim", "--record"])
            .arg(record)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn hcp hid sim");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("pty path");
        let pty = line.trim().to_owned();
        assert!(pty.starts_with("/dev/"), "not a pty path: {line:?}");
        Self { child, pty }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hcp(data: &Path, server: &Server, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(args)
        .env("HCP_DATA_DIR", data)
        .env("HCP_CACHE_DIR", cache_dir())
        .env("HCP_SERVER", &server.base)
        .env("HCP_CREDENTIAL", OPERATOR)
        .current_dir(REPO_ROOT)
        .output()
        .expect("run hcp")
}

fn performed(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("record line"))
        .collect()
}

/// Waits for the next undecided proposal of `session`.
fn next_pending(server: &Server, session: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, list) = server.get("/v1/hid/proposals", Some(OPERATOR));
        assert_eq!(status, 200, "{list}");
        if let Some(p) = list["proposals"]
            .as_array()
            .expect("proposals")
            .iter()
            .find(|p| p["session_id"] == session && p["outcome"].is_null())
        {
            return p.clone();
        }
        assert!(Instant::now() < deadline, "no pending proposal: {list}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn decide(server: &Server, id: &str, body: Value) -> (u16, Value) {
    let (status, answer, _) = server.post(&format!("/v1/hid/proposals/{id}"), OPERATOR, &body);
    (status, answer)
}

#[test]
fn approved_steps_reach_the_executor_rejected_ones_never_do() {
    let data = lab();
    let record = data.path().join("typed.jsonl");
    let sim = Sim::start(&record);
    let server = Server::start_with(data.path(), &["--hid-device", &sim.pty]);

    // OBSERVE by default; callers cannot touch the mediator.
    let (status, hid) = server.get("/v1/hid", Some(OPERATOR));
    assert_eq!(status, 200, "{hid}");
    assert_eq!(hid["mode"], "OBSERVE");
    let (status, _) = server.get("/v1/hid", Some(ALPHA));
    assert_eq!(status, 403);

    // The operator arms the executor from the command line.
    let out = hcp(data.path(), &server, &["hid", "mode", "EXECUTE"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("mode       EXECUTE") && text.contains("armed"),
        "{text}"
    );
    let out = hcp(data.path(), &server, &["hid", "status", "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(
        (&shown["mode"], &shown["execution"]["state"]),
        (&json!("EXECUTE"), &json!("armed")),
        "{shown}"
    );

    // The lab assistant's three steps, each approved.
    let (status, accepted, task) = server.post("/v1/tasks", ALPHA, &example("hid-assistant"));
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(accepted["type"], "task_accepted", "{accepted}");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    let task = task.expect("task id");
    let assistant_task = task.clone();
    let mut ids = Vec::new();
    for expected in ["MOUSE_CLICK", "TYPE_TEXT", "KEY_COMBO"] {
        let p = next_pending(&server, &session);
        assert_eq!(p["proposal"]["action_type"], expected, "{p}");
        assert_eq!(p["proposal"]["credential_warning"], false, "{p}");
        let id = p["proposal"]["proposal_id"]
            .as_str()
            .expect("id")
            .to_owned();
        let (status, outcome) = decide(&server, &id, json!({"decision": "approve"}));
        assert_eq!(status, 200, "{outcome}");
        assert_eq!(outcome["outcome"], "executed", "{outcome}");
        // Deciding again is refused: executed once only (404 once the task
        // has ended and its proposals are closed).
        let (status, again) = decide(&server, &id, json!({"decision": "approve"}));
        assert!(matches!(status, 404 | 409), "{status} {again}");
        ids.push(id);
    }
    let result = server.wait_result(&task, ALPHA);
    assert_eq!(result["type"], "task_completed", "{result}");
    assert_eq!(
        result["payload"]["outputs"]["all_executed"], true,
        "{result}"
    );
    let typed = performed(&record);
    let typed_ids: Vec<&str> = typed
        .iter()
        .map(|p| p["proposal_id"].as_str().expect("proposal id"))
        .collect();
    assert_eq!(typed_ids, ids, "in order, exactly once: {typed:?}");

    // A secret-looking text is flagged; approving it needs an
    // acknowledgement; rejected, it never reaches the device and the
    // assistant stops there.
    let mut secret = with_id(example("hid-assistant"), "msg-hid-secret");
    secret["payload"]["inputs"]["steps"] = json!([
        {"action_type": "TYPE_TEXT", "payload": {"text": "password=Tr0ub4dor&3xyzzy"}, "rationale": "log in to the instrument PC"},
        {"action_type": "KEY_COMBO", "payload": {"keys": ["enter"]}, "rationale": "submit the login form"}
    ]);
    let (status, accepted, task) = server.post("/v1/tasks", ALPHA, &secret);
    assert_eq!(status, 200, "{accepted}");
    let secret_task = task.clone().expect("task id");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    let p = next_pending(&server, &session);
    assert_eq!(p["proposal"]["credential_warning"], true, "{p}");
    let id = p["proposal"]["proposal_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, refused) = decide(&server, &id, json!({"decision": "approve"}));
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("credential"),
        "{refused}"
    );

    let out = hcp(data.path(), &server, &["hid", "proposals", "--pending"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains(&id) && listed.contains("CREDENTIAL WARNING"),
        "{listed}"
    );
    let out = hcp(
        data.path(),
        &server,
        &["hid", "proposals", "--pending", "--json"],
    );
    let pending: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert!(
        pending.as_array().is_some_and(|p| p
            .iter()
            .any(|p| p["proposal"]["proposal_id"] == id.as_str()
                && p["proposal"]["credential_warning"] == true)),
        "{pending}"
    );

    let out = hcp(
        data.path(),
        &server,
        &[
            "hid",
            "reject",
            &id,
            "--reason",
            "never type credentials through the assistant",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = server.wait_result(&task.expect("task id"), ALPHA);
    assert_eq!(result["type"], "task_completed", "{result}");
    let steps = &result["payload"]["outputs"]["steps"];
    assert_eq!(
        steps.as_array().map(Vec::len),
        Some(1),
        "stopped at the rejection: {result}"
    );
    assert_eq!(steps[0]["outcome"], "rejected", "{result}");
    assert_eq!(performed(&record).len(), 3, "nothing more was typed");

    // Back to OBSERVE: proposals are recorded, nothing is executed.
    let (status, s, _) = server.post("/v1/hid/mode", OPERATOR, &json!({"mode": "observe"}));
    assert_eq!((status, s["mode"].as_str()), (200, Some("OBSERVE")), "{s}");
    let (status, accepted, task) = server.post(
        "/v1/tasks",
        ALPHA,
        &with_id(example("hid-assistant"), "msg-hid-observe"),
    );
    assert_eq!(status, 200, "{accepted}");
    let result = server.wait_result(&task.expect("task id"), ALPHA);
    assert_eq!(result["payload"]["outputs"]["executed"], 0, "{result}");
    assert!(
        result["payload"]["outputs"]["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .all(|s| s["outcome"] == "not_executed"),
        "{result}"
    );
    assert_eq!(performed(&record).len(), 3);

    // Bad operator requests get JSON errors.
    let (status, body, _) = server.post("/v1/hid/mode", OPERATOR, &json!({"mode": "TURBO"}));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_mode")),
        "{body}"
    );
    let (status, body) = decide(&server, "prop-nothing-here", json!({"decision": "approve"}));
    assert_eq!(status, 404, "{body}");
    let (status, body) = decide(&server, &id, json!({"decision": "maybe"}));
    assert_eq!(status, 400, "{body}");

    // The session log verifies, over HTTP and offline.
    let (status, v) = server.get("/v1/hid/log/verify", Some(OPERATOR));
    assert_eq!((status, v["ok"].as_bool()), (200, Some(true)), "{v}");
    assert!(v["entries"].as_u64().unwrap_or(0) >= 10, "{v}");
    let out = hcp(data.path(), &server, &["hid", "log", "verify"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("chain intact"),
        "{text}"
    );

    // Every proposal and wait of the assistant passed the PEP: its receipts.
    let store = hcp::store::Store::open(data.path()).expect("store");
    let receipts = hcp::evidence::recent_receipts(
        &store,
        hcp::evidence::ReceiptFilter::Task(&assistant_task),
        1000,
    )
    .expect("receipts");
    let proposals = receipts
        .iter()
        .filter(|r| r.call == "hid.propose" && r.reason_code == "ALLOW")
        .count();
    assert_eq!(proposals, 3, "{receipts:?}");
    assert!(
        receipts.iter().any(|r| r.call == "hid.wait"),
        "{receipts:?}"
    );
    assert!(hcp::evidence::verify_store(&store).expect("check").ok());

    // The operator's decisions, and what came of them, are receipts too,
    // recorded before they took effect, each following from the receipt of
    // the guest's proposal (DAG parents: proposal -> decision -> execution).
    let approved = of_task(&store, &assistant_task);
    for id in &ids {
        let propose = approved.one("hid.propose", |i| i["call"]["args"]["proposal"] == *id);
        let decision = approved.one("hid.decision", |i| i["proposal"] == *id);
        assert_eq!(decision.0.reason_code, "ALLOW", "{:?}", decision.1);
        assert_eq!(decision.1["decision"], "approve");
        assert_eq!(
            decision.1["operator"], "operator-lab-01",
            "{:?}",
            decision.1
        );
        assert_eq!(decision.0.parents, vec![propose.2], "{id}");
        let execution = approved.one("hid.execution", |i| i["proposal"] == *id);
        assert_eq!(execution.0.reason_code, "ALLOW", "{:?}", execution.1);
        assert_eq!(execution.1["result"], "executed", "{:?}", execution.1);
        assert_eq!(execution.1["readiness"], "armed", "{:?}", execution.1);
        assert!(
            execution.0.parents.contains(&propose.2) && execution.0.parents.contains(&decision.2),
            "{id}: {:?}",
            execution.0.parents
        );
        assert!(decision.0.lamport < execution.0.lamport);
    }
    // The rejection: a DENY following from the proposal, and nothing ran.
    let secret = of_task(&store, &secret_task);
    let propose = secret.one("hid.propose", |i| i["call"]["args"]["proposal"] == *id);
    let rejection = secret.one("hid.decision", |i| {
        i["proposal"] == *id && i["decision"] == "reject"
    });
    assert_eq!(rejection.0.reason_code, "DENY_APPROVAL_REJECTED");
    assert_eq!(
        rejection.1["reason"],
        "never type credentials through the assistant"
    );
    assert!(rejection.0.parents.contains(&propose.2));
    assert!(rejection.0.signature.is_some(), "a DENY is signed");
    assert!(secret.calls("hid.execution").is_empty());
    // The refused approval (no acknowledgement) took no effect, and its
    // receipt says why (issue 12.10): DENY_ARGS_INVALID, before the
    // rejection, following from the proposal too.
    let decisions = secret.calls("hid.decision");
    assert_eq!(decisions.len(), 2);
    let refused = secret.one("hid.decision", |i| i["decision"] == "approve");
    assert_eq!(
        refused.0.reason_code, "DENY_ARGS_INVALID",
        "{:?}",
        refused.1
    );
    assert_eq!(refused.1["credential_warning"], true);
    assert_eq!(refused.1["credential_acknowledged"], false);
    assert_eq!(refused.0.parents, vec![propose.2]);
    assert!(refused.0.lamport < rejection.0.lamport);

    // Both packs verify offline and replay without a difference.
    for pack in [&approved.pack, &secret.pack] {
        let report = hcp_receipts::verify(
            pack,
            &hcp_receipts::VerifyOptions {
                signing: Some(hcp_receipts::SigningPolicy::default()),
                trusted_keys: Some(pack.public_keys.clone()),
                known_checkpoints: Vec::new(),
                host_keys: Vec::new(),
            },
        );
        assert!(report.ok(), "{report}");
        let replayed = hcp_receipts::replay(pack, &hcp_policy::pep::PepDecider::new(pack));
        assert!(replayed.ok(), "{:?}", replayed.issues);
        assert_eq!(replayed.matched, replayed.replayed);
    }
}

/// A task's evidence pack, and its receipts with their decision inputs.
struct TaskPack {
    pack: hcp_receipts::Pack,
}

fn of_task(store: &hcp::store::Store, task: &str) -> TaskPack {
    let pack = hcp::evidence::export(store, &hcp::evidence::Selection::Task(task.to_owned()))
        .expect("export");
    assert_eq!(pack.hosts.len(), 1);
    TaskPack { pack }
}

impl TaskPack {
    /// The receipts of `call`, each with its decision input and hash.
    fn calls(&self, call: &str) -> Vec<(&hcp_receipts::Receipt, &Value, hcp_receipts::Digest)> {
        let section = &self.pack.hosts[0];
        section
            .receipts
            .iter()
            .filter(|r| r.call == call)
            .map(|r| {
                let input = section
                    .inputs
                    .iter()
                    .find(|i| i.seq == r.seq)
                    .map(|i| &i.input)
                    .expect("every receipt has its input");
                (r, input, r.hash().expect("hash"))
            })
            .collect()
    }

    /// The one receipt of `call` whose input matches.
    fn one(
        &self,
        call: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> (&hcp_receipts::Receipt, &Value, hcp_receipts::Digest) {
        let mut found: Vec<_> = self
            .calls(call)
            .into_iter()
            .filter(|(_, i, _)| matches(i))
            .collect();
        assert_eq!(found.len(), 1, "one {call} receipt expected");
        found.remove(0)
    }
}

/// The token of `operator-docs-r1`, an operator the test adds.
const DOCS_OPERATOR: &str = "demo-token-operator-docs-r1-not-a-secret";

/// A copy of the shipped policies with one more operator, limited to
/// document-analysis at R1.
fn policies_with_a_limited_operator(dir: &Path) {
    std::fs::create_dir_all(dir).expect("policies dir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
    }
    let path = dir.join("callers.json");
    let mut callers: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("callers")).expect("json");
    callers["callers"]
        .as_array_mut()
        .expect("callers")
        .push(json!({
            "id": "operator-docs-r1",
            "description": "An operator for document analysis only, up to R1.",
            "kind": "operator",
            "credential": hcp_policy::hash_credential(DOCS_OPERATOR).expect("hash").to_string(),
            "capabilities": ["document-analysis"],
            "max_risk_level": "R1",
            "max_data_classification": "T1"
        }));
    std::fs::write(&path, serde_json::to_string_pretty(&callers).expect("json")).expect("write");
}

/// Issue 16.1: HID mode changes and decisions ask what a task approval
/// asks (the operator's capabilities, risk limit, four eyes), each a
/// receipt that replays. An operator limited to document-analysis at R1
/// can neither arm EXECUTE nor decide a `hid-assistant` proposal; an
/// operator cannot approve the proposals of a task it submitted.
#[test]
fn hid_decisions_and_arming_need_the_approval_of_a_task() {
    let data = lab();
    let policies = data.path().join("policies");
    policies_with_a_limited_operator(&policies);
    let record = data.path().join("typed.jsonl");
    let sim = Sim::start(&record);
    let server = Server::start_with(
        data.path(),
        &[
            "--hid-device",
            &sim.pty,
            "--policies",
            policies.to_str().expect("utf-8"),
        ],
    );
    let post = |token: &str, path: &str, body: Value| {
        let (status, body, _) = server.post(path, token, &body);
        (status, body)
    };

    // The limited operator cannot arm EXECUTE; the mode does not change.
    let (status, body) = post(DOCS_OPERATOR, "/v1/hid/mode", json!({"mode": "EXECUTE"}));
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");
    assert_eq!(
        body["error"]["message"],
        "refused by the policy: arming EXECUTE: operator operator-docs-r1 may not approve hid-assistant (DENY_FORBIDDEN)",
        "{body}"
    );
    let (_, hid) = server.get("/v1/hid", Some(OPERATOR));
    assert_eq!(hid["mode"], "OBSERVE", "{hid}");
    // SUGGEST executes nothing: any operator may choose it.
    let (status, body) = post(DOCS_OPERATOR, "/v1/hid/mode", json!({"mode": "SUGGEST"}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(OPERATOR, "/v1/hid/mode", json!({"mode": "EXECUTE"}));
    assert_eq!(
        (status, body["execution"]["state"].as_str()),
        (200, Some("armed")),
        "{body}"
    );

    // A proposal of a task someone else submitted: the limited operator may
    // neither approve nor reject it; it stays pending.
    let mut steps = with_id(example("hid-assistant"), "msg-hid-authz-1");
    steps["payload"]["inputs"]["steps"] = json!([
        {"action_type": "MOUSE_CLICK", "payload": {"button": "left"}, "rationale": "click the Save button"}
    ]);
    let (status, accepted, task) = server.post("/v1/tasks", ALPHA, &steps);
    assert_eq!(status, 200, "{accepted}");
    let alpha_task = task.expect("task id");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    let p = next_pending(&server, &session);
    let id = p["proposal"]["proposal_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let path = format!("/v1/hid/proposals/{id}");
    let (status, body) = post(DOCS_OPERATOR, &path, json!({"decision": "approve"}));
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");
    assert_eq!(
        body["error"]["message"],
        "refused by the policy: operator operator-docs-r1 may not approve hid-assistant (DENY_FORBIDDEN)",
        "{body}"
    );
    let (status, body) = post(
        DOCS_OPERATOR,
        &path,
        json!({"decision": "reject", "reason": "not on my watch"}),
    );
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");
    assert!(performed(&record).is_empty(), "nothing was typed");
    let still = next_pending(&server, &session);
    assert_eq!(still["proposal"]["proposal_id"], id.as_str());
    // The operator the policy lists for hid-assistant approves it.
    let (status, outcome) = post(OPERATOR, &path, json!({"decision": "approve"}));
    assert_eq!(
        (status, outcome["outcome"].as_str()),
        (200, Some("executed")),
        "{outcome}"
    );
    assert_eq!(
        server.wait_result(&alpha_task, ALPHA)["type"],
        "task_completed"
    );

    // The operator submits a hid-assistant task itself: it cannot approve
    // that task's proposals (four eyes).
    let mut own_steps = with_id(steps.clone(), "msg-hid-authz-own");
    own_steps["payload"]["caller_id"] = json!("operator-lab-01");
    // Nobody else decides: the task ends when its wait times out.
    own_steps["payload"]["inputs"]["decision_timeout_s"] = json!(20);
    let (status, accepted, task) = server.post("/v1/tasks", OPERATOR, &own_steps);
    assert_eq!(status, 200, "{accepted}");
    let own_task = task.expect("task id");
    let session = accepted["session_id"].as_str().expect("session").to_owned();
    let p = next_pending(&server, &session);
    let own = p["proposal"]["proposal_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, body) = post(
        OPERATOR,
        &format!("/v1/hid/proposals/{own}"),
        json!({"decision": "approve"}),
    );
    assert_eq!((status, error_code(&body)), (403, "forbidden"), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no-self-approval") && message.ends_with("(DENY_FORBIDDEN)"),
        "{body}"
    );
    assert_eq!(
        performed(&record).len(),
        1,
        "its own proposal was not typed"
    );

    // Leaving EXECUTE is any operator's.
    let (status, body) = post(DOCS_OPERATOR, "/v1/hid/mode", json!({"mode": "OBSERVE"}));
    assert_eq!(
        (status, body["mode"].as_str()),
        (200, Some("OBSERVE")),
        "{body}"
    );
    let _ = server.wait_result(&own_task, OPERATOR);

    // Every decision and mode change is a receipt, allowed or refused.
    let store = hcp::store::Store::open(data.path()).expect("store");
    let all = hcp::evidence::recent_receipts(&store, hcp::evidence::ReceiptFilter::All, 10_000)
        .expect("receipts");
    let modes: Vec<(String, String)> = all
        .iter()
        .rev()
        .filter(|r| r.call == "hid.mode")
        .map(|r| (r.reason_code.clone(), r.capability.clone()))
        .collect();
    assert_eq!(
        modes,
        [
            (
                "DENY_FORBIDDEN".to_owned(),
                "hid-assistant@1.0.0".to_owned()
            ),
            ("ALLOW".to_owned(), "hid-assistant@1.0.0".to_owned()),
            ("ALLOW".to_owned(), "hid-assistant@1.0.0".to_owned()),
            ("ALLOW".to_owned(), "hid-assistant@1.0.0".to_owned()),
        ]
    );
    let alpha = of_task(&store, &alpha_task);
    let codes: Vec<&str> = alpha
        .calls("hid.decision")
        .into_iter()
        .map(|(r, _, _)| r.reason_code.as_str())
        .collect();
    assert_eq!(codes, ["DENY_FORBIDDEN", "DENY_FORBIDDEN", "ALLOW"]);
    for (r, input, _) in alpha.calls("hid.decision") {
        assert_eq!(input["task"]["submitter"], "harness-alpha-001", "{input}");
        assert_eq!(input["task"]["declaration"]["name"], "hid-assistant");
        if r.reason_code != "ALLOW" {
            assert_eq!(input["operator"], "operator-docs-r1");
        }
    }
    let own = of_task(&store, &own_task);
    let refused = own.one("hid.decision", |i| i["operator"] == "operator-lab-01");
    assert_eq!(refused.0.reason_code, "DENY_FORBIDDEN");
    // Both packs replay without a difference: the verdicts are re-derived
    // from the recorded inputs and policy.
    for pack in [&alpha.pack, &own.pack] {
        let replayed = hcp_receipts::replay(pack, &hcp_policy::pep::PepDecider::new(pack));
        assert!(replayed.ok(), "{:?}", replayed.issues);
        assert_eq!(replayed.matched, replayed.replayed);
    }
}

/// While the mediator holds its state for a write that waits (here for
/// the database, held by another process), operators' status and
/// proposal polls wait off the server's threads: before, each poll waited
/// for that state on one of the server's few async threads, and with as
/// many polls as threads nothing else was answered, `/healthz` included,
/// until the database came free.
#[test]
fn hid_polls_wait_off_the_servers_threads() {
    let data = lab();
    let server = &Server::start(data.path());
    let (status, s) = server.get("/v1/hid", Some(OPERATOR));
    assert_eq!(status, 200, "{s}");
    // Another process holds the database's write lock.
    let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("db");
    db.execute_batch("BEGIN IMMEDIATE").expect("the write lock");
    std::thread::scope(|scope| {
        // The mode change waits for the database with the mediator's
        // state held.
        let change =
            scope.spawn(move || server.post("/v1/hid/mode", OPERATOR, &json!({"mode": "SUGGEST"})));
        std::thread::sleep(Duration::from_millis(500));
        let threads = std::thread::available_parallelism().map_or(2, usize::from);
        let polls: Vec<_> = (0..threads + 1)
            .map(|i| {
                scope.spawn(move || {
                    let path = if i % 2 == 0 {
                        "/v1/hid"
                    } else {
                        "/v1/hid/proposals"
                    };
                    server.get(path, Some(OPERATOR)).0
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let quick: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(3)))
            .build()
            .into();
        let started = Instant::now();
        let health = quick.get(server.url("/healthz")).call();
        let waited = started.elapsed();
        db.execute_batch("ROLLBACK").expect("release");
        let health = health.unwrap_or_else(|e| {
            panic!("/healthz went unanswered for {waited:?} while HID polls waited: {e}")
        });
        assert_eq!(health.status().as_u16(), 200);
        for poll in polls {
            assert_eq!(poll.join().expect("poll"), 200);
        }
        let (status, s, _) = change.join().expect("mode change");
        assert_eq!((status, s["mode"].as_str()), (200, Some("SUGGEST")), "{s}");
    });
}

/// Issue 41.6: a credential a guest proposes to type rests nowhere in
/// clear and travels in no pack: the session log withheld it already, and
/// now so do the `hid.propose` receipt (its arguments' hash and decision
/// input keep a keyed digest), the task's sealed `task_submit` and the
/// pack's messages; the pack still replays. Before, the receipt's decision
/// input held the text.
#[test]
fn a_proposed_credential_is_in_no_receipt_no_pack_and_not_in_the_database() {
    const SECRET: &str = "Tr0ub4dor&3xyzzy";
    let data = lab();
    let server = Server::start(data.path());
    let mut secret = with_id(example("hid-assistant"), "msg-hid-withheld");
    secret["payload"]["inputs"]["steps"] = json!([
        {"action_type": "TYPE_TEXT", "payload": {"text": format!("password={SECRET}")}, "rationale": "log in to the instrument PC"}
    ]);
    let (status, accepted, task) = server.post("/v1/tasks", ALPHA, &secret);
    assert_eq!(status, 200, "{accepted}");
    let task = task.expect("task id");
    // OBSERVE: the proposal is recorded and ends not executed at once.
    let result = server.wait_result(&task, ALPHA);
    assert_eq!(result["type"], "task_completed", "{result}");

    let pack = data.path().join("withheld.tar");
    let out = hcp(
        data.path(),
        &server,
        &[
            "evidence",
            "export",
            "--task",
            &task,
            "-o",
            pack.to_str().expect("utf-8"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unpacked = data.path().join("withheld.d");
    std::fs::create_dir_all(&unpacked).expect("mkdir");
    tar::Archive::new(std::fs::File::open(&pack).expect("pack"))
        .unpack(&unpacked)
        .expect("untar");
    let mut todo = vec![unpacked];
    let mut proposed = false;
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let text = String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned();
            assert!(
                !text.contains(SECRET),
                "{} holds the credential",
                path.display()
            );
            proposed |= text.contains("\"hid.propose\"");
        }
    }
    assert!(proposed, "the pack holds the hid.propose receipt");
    let out = hcp(
        data.path(),
        &server,
        &["replay", pack.to_str().expect("utf-8")],
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("open");
    db.busy_timeout(Duration::from_secs(10)).expect("timeout");
    db.query_row("PRAGMA wal_checkpoint(FULL)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(db);
    for file in ["hcp.db", "hcp.db-wal"] {
        let bytes = std::fs::read(data.path().join(file)).unwrap_or_default();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{file} holds the credential in clear"
        );
    }
}
