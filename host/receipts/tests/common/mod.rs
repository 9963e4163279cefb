//! A small world for the integration tests: two hosts, a policy snapshot, a
//! decider of our own, and an evidence pack built the way the host will.
#![allow(dead_code, unreachable_pub)]

use hcp_contracts::RiskLevel;
use hcp_receipts::checkpoint::Checkpoint;
use hcp_receipts::merkle::Tree;
use hcp_receipts::pack::{self, DecisionInput, HostSection, Pack};
use hcp_receipts::receipt::{Parent, Receipt, Verdict};
use hcp_receipts::replay::{Decider, Decision, PolicySnapshot};
use hcp_receipts::{Digest, Draft, HostKey, HostLog, SigningPolicy, reason};
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const HOST_A: &str = "host-a";
pub const HOST_B: &str = "host-b";

pub fn key_a() -> HostKey {
    HostKey::from_seed(&[0xa1; 32])
}

pub fn key_b() -> HostKey {
    HostKey::from_seed(&[0xb2; 32])
}

pub fn policy_files() -> BTreeMap<String, Vec<u8>> {
    let rules = json!({"denied_calls": ["net.connect"], "max_risk": "R4"});
    BTreeMap::from([(
        "rules.json".to_owned(),
        serde_json::to_vec_pretty(&rules).expect("json"),
    )])
}

/// The test decider: `denied_calls` are DENY_TOOL_NOT_FOUND, a risk above
/// `max_risk` is DENY_ENVELOPE_HARD_LIMIT, anything else is ALLOW.
pub struct RulesDecider;

/// Why the test decider cannot decide.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(String);

impl From<&str> for RuleError {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

impl Decider for RulesDecider {
    type Error = RuleError;

    fn decide(&self, policy: &PolicySnapshot<'_>, input: &Value) -> Result<Decision, RuleError> {
        let rules: Value =
            serde_json::from_slice(policy.files.get("rules.json").ok_or("no rules.json")?)
                .map_err(|e| RuleError(e.to_string()))?;
        let call = input["call"].as_str().ok_or("input without call")?;
        let risk = input["risk"].as_str().ok_or("input without risk")?;
        let max = rules["max_risk"].as_str().ok_or("rules without max_risk")?;
        let denied = rules["denied_calls"]
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c == call));
        let (verdict, reason_code) = if denied {
            (Verdict::Deny, reason::DENY_TOOL_NOT_FOUND)
        } else if risk > max {
            (Verdict::Deny, reason::DENY_ENVELOPE_HARD_LIMIT)
        } else {
            (Verdict::Allow, reason::ALLOW)
        };
        Ok(Decision {
            verdict,
            reason_code: reason_code.to_owned(),
        })
    }
}

/// One host's log as the host stores it.
pub struct HostRun {
    pub log: HostLog,
    pub receipts: Vec<Receipt>,
    pub hashes: Vec<Digest>,
    pub checkpoints: Vec<Checkpoint>,
    pub inputs: Vec<DecisionInput>,
    pub policy_hash: Digest,
}

impl HostRun {
    pub fn new(host: &str, key: HostKey, checkpoint_every: u64) -> Self {
        let policy = SigningPolicy {
            checkpoint_every: Some(checkpoint_every),
            ..SigningPolicy::default()
        };
        let files = policy_files();
        Self {
            log: HostLog::new(host, key, policy).expect("log"),
            receipts: Vec::new(),
            hashes: Vec::new(),
            checkpoints: Vec::new(),
            inputs: Vec::new(),
            policy_hash: PolicySnapshot { files: &files }.digest(),
        }
    }

    /// Decides `call` with the test decider and appends the receipt.
    pub fn call(
        &mut self,
        session: &str,
        call: &str,
        risk: RiskLevel,
        args: Value,
        parents: Vec<Parent>,
        second: u32,
    ) -> Parent {
        let input = json!({"call": call, "risk": risk.as_str(), "args": args});
        let files = policy_files();
        let decision = RulesDecider
            .decide(&PolicySnapshot { files: &files }, &input)
            .expect("decide");
        let appended = self
            .log
            .append(Draft {
                session_id: Some(session.to_owned()),
                task_id: Some(format!("task-{session}")),
                capability: "document-analysis@1.0.0".into(),
                call: call.into(),
                args_hash: Digest::of_canonical(&args).expect("args"),
                input_hash: Digest::of_canonical(&input).expect("input"),
                verdict: decision.verdict,
                reason_code: decision.reason_code,
                risk,
                policy_hash: self.policy_hash,
                parents,
                timestamp: format!("2026-03-01T10:{:02}:{:02}Z", second / 60, second % 60),
            })
            .expect("append");
        self.inputs.push(DecisionInput {
            input,
            seq: appended.receipt.seq,
        });
        self.checkpoints.extend(appended.checkpoint);
        let parent = appended.receipt.as_parent().expect("parent");
        assert_eq!(parent.hash, appended.hash);
        self.receipts.push(appended.receipt);
        self.hashes.push(appended.hash);
        parent
    }

    /// A checkpoint now, as before an export.
    pub fn seal(&mut self, second: u32) {
        let cp = self
            .log
            .checkpoint(&format!(
                "2026-03-01T11:{:02}:{:02}Z",
                second / 60,
                second % 60
            ))
            .expect("checkpoint");
        self.checkpoints.push(cp);
    }

    /// The host's section of a pack, proofs included.
    pub fn section(&self) -> HostSection {
        let mut section = HostSection::new(
            self.log.state().host_id.as_str(),
            vec![self.log.public_key().key_id().clone()],
            self.receipts.clone(),
            self.checkpoints.clone(),
            self.inputs.clone(),
        );
        let tree = Tree::from_data(self.hashes.iter().map(|h| h.0.as_slice()));
        pack::prove(&mut section, &tree).expect("prove");
        section
    }
}

/// Two hosts: host-a runs a session of 13 calls (checkpoints every 4), and
/// host-b records a call caused by host-a's admission receipt. `salt`
/// changes the arguments, to make a second, different history.
pub fn world(salt: &str) -> (HostRun, HostRun) {
    let mut a = HostRun::new(HOST_A, key_a(), 4);
    let mut b = HostRun::new(HOST_B, key_b(), 4);
    let admitted = a.call(
        "s-1",
        "gate.admission",
        RiskLevel::R2,
        json!({"salt": salt}),
        vec![],
        0,
    );
    let mut last = admitted;
    let calls: [(&str, RiskLevel); 12] = [
        ("fs.open", RiskLevel::R1),
        ("fs.open", RiskLevel::R1),
        ("net.connect", RiskLevel::R2),
        ("fs.open", RiskLevel::R1),
        ("instrument.set", RiskLevel::R4),
        ("hcp.artifacts.create", RiskLevel::R1),
        ("instrument.set", RiskLevel::R5),
        ("fs.open", RiskLevel::R1),
        ("fs.open", RiskLevel::R1),
        ("hid.execute", RiskLevel::R3),
        ("fs.open", RiskLevel::R1),
        ("hcp.artifacts.create", RiskLevel::R1),
    ];
    for (i, (call, risk)) in calls.into_iter().enumerate() {
        let args = json!({"n": i, "path": format!("/documents/{salt}{i}.md")});
        last = a.call("s-1", call, risk, args, vec![last], i as u32 + 1);
    }
    // host-b learns of host-a's admission (a message) and acts on it.
    b.log.receive(admitted.lamport).expect("receive");
    let b1 = b.call(
        "s-2",
        "fs.open",
        RiskLevel::R1,
        json!({"salt": salt}),
        vec![admitted],
        30,
    );
    b.call("s-2", "net.connect", RiskLevel::R2, json!({}), vec![b1], 31);
    a.seal(0);
    b.seal(1);
    (a, b)
}

pub fn pack_of(a: &HostRun, b: &HostRun) -> Pack {
    Pack {
        hosts: vec![a.section(), b.section()],
        external_parents: vec![],
        public_keys: vec![a.log.public_key().clone(), b.log.public_key().clone()],
        policy: policy_files(),
        manifests: BTreeMap::from([
            (
                "document-analysis/manifest.json".to_owned(),
                b"{\"name\":\"document-analysis\"}\n".to_vec(),
            ),
            (
                "wit/world.wit".to_owned(),
                b"package hcp:capability@1.0.0;\n".to_vec(),
            ),
        ]),
        messages: BTreeMap::from([(
            "task-s-1/task_submit.json".to_owned(),
            b"{\"type\":\"task_submit\"}\n".to_vec(),
        )]),
    }
}

/// The standard pack of the tests.
pub fn standard_pack() -> Pack {
    let (a, b) = world("x");
    pack_of(&a, &b)
}
