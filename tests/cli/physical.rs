//! A capability involving physical resources on a data directory from
//! `hcp init` (its `risk.json` is empty): the CVD example (risk_ceiling R4,
//! requires_human_approval, involves_physical_resources) was accepted at
//! R1 and ran with no approval, and `hcp review` showed every check
//! passing. Seed 000's R4 is "operations involving physical resources":
//! the assessment starts there, so the task waits for an operator.

use super::author::{answers, hcp, ok};
use super::{code, stderr, stdout};
use hcp_tests::REPO_ROOT;
use serde_json::{Value, json};
use std::path::Path;

#[test]
fn a_physical_capability_waits_for_approval_under_the_policies_of_hcp_init() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let data = root.join("data");
    ok(&hcp(root, &data, &["init"]), "hcp init");
    // The operator admits the simulated rig (`hcp init` admits no
    // instrument); nothing else of the policy changes, `risk.json` stays
    // empty.
    let install = data.join("policies/install.json");
    let mut policy: Value =
        serde_json::from_str(&std::fs::read_to_string(&install).expect("install.json"))
            .expect("json");
    policy["instruments"] = json!(["cvd-rig"]);
    std::fs::write(&install, policy.to_string()).expect("write");
    let plugin = Path::new(REPO_ROOT).join("plugins/cvd-material-synthesis");
    let plugin = plugin.to_str().expect("utf8");
    ok(
        &hcp(root, &data, &["bundle", "pack", plugin, "-o", "cvd.hcpb"]),
        "hcp bundle pack",
    );
    let key = data.join("keys/publisher.key");
    ok(
        &hcp(
            root,
            &data,
            &[
                "bundle",
                "sign",
                "cvd.hcpb",
                "--key",
                key.to_str().expect("utf8"),
            ],
        ),
        "hcp bundle sign",
    );
    // The review says when approval is asked, and where the level comes from.
    let out = hcp(root, &data, &["review", "cvd.hcpb"]);
    ok(&out, "hcp review");
    assert!(
        stdout(&out).contains(
            "  pass  approval   asked for tasks assessed R4 or above (base R4 from the \
             declaration's involves_physical_resources; no escalation rule or unattended window \
             raises it; ceiling R4)\n"
        ),
        "{}",
        stdout(&out)
    );
    let out = hcp(root, &data, &["install", "cvd.hcpb"]);
    ok(&out, "hcp install");
    assert!(!stderr(&out).contains("WARNING"), "{}", stderr(&out));

    let example: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(plugin).join("examples/task_submit.json"))
            .expect("example"),
    )
    .expect("json");
    let submit = |caller: &str| {
        let mut m = example.clone();
        m["message_id"] = json!(format!("msg-cvd-{caller}"));
        m["payload"]["caller_id"] = json!(caller);
        let path = root.join(format!("{caller}.json"));
        std::fs::write(&path, m.to_string()).expect("write");
        hcp(
            root,
            &data,
            &["submit", "--as", caller, path.to_str().expect("utf8")],
        )
    };
    // The operator (up to R4): assessed R4, waiting for an approval.
    let out = submit("operator");
    ok(&out, "hcp submit --as operator");
    let docs = answers(&out);
    assert_eq!(docs.len(), 1, "{docs:#?}\n{}", stderr(&out));
    let answer = &docs[0];
    assert_eq!(answer["status"], "pending_approval", "{answer:#}");
    assert!(
        answer["message"].as_str().expect("message").starts_with(
            "waiting for an operator's approval (cvd-material-synthesis@1.0.0 requires it at R4)"
        ),
        "{answer:#}"
    );
    let out = hcp(root, &data, &["tasks", "list", "--json"]);
    ok(&out, "hcp tasks list");
    let tasks: Value = serde_json::from_str(&stdout(&out)).expect("json");
    let tasks = tasks.as_array().expect("tasks");
    assert_eq!(tasks.len(), 1, "{tasks:#?}");
    assert_eq!(tasks[0]["state"], "pending_approval", "{tasks:#?}");
    assert_eq!(tasks[0]["risk_level"], "R4", "{tasks:#?}");

    // The developer (up to R2) is refused: the task is R4.
    let out = submit("developer");
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let answer = answers(&out).pop().expect("an answer");
    assert_eq!(answer["type"], "task_rejected", "{answer:#}");
    assert_eq!(
        answer["payload"]["reason_code"], "risk_too_high",
        "{answer:#}"
    );
    assert_eq!(answer["payload"]["assessed_risk_level"], "R4", "{answer:#}");
}
