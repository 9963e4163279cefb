//! The host's [`Decider`] for `hcp_receipts::replay`: re-derives the
//! verdict of every `session.open` and `host_call` receipt, of the gate's
//! receipts ([`super::gate`]), the HID mediator's ([`super::hid`]) and the
//! policy reloads ([`super::reload`]), from the receipt's own policy
//! snapshot and the recorded decision input. Each snapshot is loaded once,
//! and a session's scope compiled once per snapshot.
//!
//! A call's input names its session's facts by hash; the decider finds them
//! in the pack, either in the decision input of the session's
//! `session.open` receipt or in `manifests/scopes/<hex>.json` (written by
//! exports whose receipts start after a session opened). Facts are trusted
//! only when they hash to the name the (hash-covered) input gives.

use super::bound::FullArgs;
use super::decide::{Recorded, decide_recorded};
use super::error::InputError;
use super::input::{KIND_HOST_CALL, KIND_SESSION_OPEN, decide_open};
use super::interfaces::Call;
use super::scope::{Scope, SessionFacts};
use super::verdict::Counters;
use crate::PolicySet;
use hcp_receipts::Digest;
use hcp_receipts::pack::Pack;
use hcp_receipts::replay::{Decider, Decision, PolicySnapshot};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::str::FromStr as _;

/// Where an exported pack keeps session facts (under `manifests/`).
pub const SCOPES_DIR: &str = "scopes/";

/// The pack path (under `manifests/`) of facts with this hash.
pub fn scope_file(hash: &Digest) -> String {
    format!("{SCOPES_DIR}{}.json", hash.to_hex())
}

/// Replays PEP decisions from a pack. See the module doc.
#[derive(Debug)]
pub struct PepDecider {
    /// Snapshots loaded, by the policy hash they load to.
    policies: RefCell<HashMap<Digest, Rc<PolicySet>>>,
    facts: HashMap<Digest, SessionFacts>,
    /// Scopes compiled, by policy hash and facts hash.
    scopes: RefCell<HashMap<(Digest, Digest), Rc<Scope>>>,
}

impl PepDecider {
    /// A decider for `pack`: its session facts indexed by hash (policy
    /// snapshots are loaded as replay names them).
    pub fn new(pack: &Pack) -> Self {
        let mut facts = HashMap::new();
        let mut add = |value: &Value| {
            if let Ok(f) = serde_json::from_value::<SessionFacts>(value.clone())
                && let Ok(hash) = Digest::of_canonical(&f)
            {
                facts.insert(hash, f);
            }
        };
        for section in &pack.hosts {
            for input in &section.inputs {
                if input.input.get("kind").and_then(Value::as_str) == Some(KIND_SESSION_OPEN)
                    && let Some(f) = input.input.get("facts")
                {
                    add(f);
                }
            }
        }
        for (name, bytes) in &pack.manifests {
            if name.starts_with(SCOPES_DIR)
                && let Ok(value) = serde_json::from_slice::<Value>(bytes)
            {
                add(&value);
            }
        }
        Self {
            policies: RefCell::default(),
            facts,
            scopes: RefCell::default(),
        }
    }

    /// Loads a snapshot (and keeps it by its hash).
    fn load(&self, snapshot: &PolicySnapshot<'_>) -> Result<(Digest, Rc<PolicySet>), InputError> {
        let policy = load(snapshot.files)?;
        let hash = Digest::from_str(policy.policy_hash()).map_err(InputError::Digest)?;
        let policy = Rc::new(policy);
        self.policies.borrow_mut().insert(hash, policy.clone());
        Ok((hash, policy))
    }

    fn scope(&self, policy: &PolicySet, hash: Digest) -> Result<Rc<Scope>, InputError> {
        let policy_hash = Digest::from_str(policy.policy_hash()).map_err(InputError::Digest)?;
        if let Some(scope) = self.scopes.borrow().get(&(policy_hash, hash)) {
            return Ok(scope.clone());
        }
        let facts = self
            .facts
            .get(&hash)
            .ok_or(InputError::FactsMissing(hash))?;
        let scope = Rc::new(Scope::compile(policy, facts.clone())?);
        self.scopes
            .borrow_mut()
            .insert((policy_hash, hash), scope.clone());
        Ok(scope)
    }

    /// Decides `input` under `policy`.
    fn decide_with(&self, policy: &PolicySet, input: &Value) -> Result<Decision, InputError> {
        let kind = field(input, "kind")?.as_str().unwrap_or_default();
        let recorded = super::gate::decide(policy, kind, input)
            .or_else(|| super::hid::decide(policy, kind, input))
            .or_else(|| super::reload::decide(policy, kind, input));
        if let Some(decision) = recorded {
            let decision = decision?;
            return Ok(Decision {
                verdict: decision.verdict,
                reason_code: decision.reason.to_owned(),
            });
        }
        let decision = match kind {
            KIND_SESSION_OPEN => {
                let facts: SessionFacts = serde_json::from_value(field(input, "facts")?.clone())
                    .map_err(|e| part("session facts", &e))?;
                let scope = Scope::compile(policy, facts.clone());
                decide_open(&scope, &facts, at_ms(input)?)
            }
            KIND_HOST_CALL => {
                let hash = field(input, "scope")?
                    .as_str()
                    .and_then(|s| Digest::from_str(s).ok())
                    .ok_or(InputError::ScopeDigest)?;
                let scope = self.scope(policy, hash)?;
                let counters: Counters = serde_json::from_value(field(input, "counters")?.clone())
                    .map_err(|e| part("counters", &e))?;
                let call = Call::from_value(field(input, "call")?)?;
                // A bounded call: decided from the recorded facts of the
                // whole call (its bytes, its threat signals), not its text.
                let recorded = match input.get("full") {
                    None => None,
                    Some(full) => {
                        let full: FullArgs =
                            serde_json::from_value(full.clone()).map_err(|e| part("full", &e))?;
                        Some(Recorded {
                            bytes: full.bytes,
                            signals: full.signals()?,
                        })
                    }
                };
                decide_recorded(&scope, &counters, &call, at_ms(input)?, recorded.as_ref())
            }
            other => {
                return Err(InputError::UnknownKind {
                    kind: other.to_owned(),
                    known: format!(
                        "{KIND_SESSION_OPEN}, {KIND_HOST_CALL}, the gate's, the HID mediator's and policy reloads"
                    ),
                });
            }
        };
        Ok(Decision {
            verdict: decision.verdict,
            reason_code: decision.reason.to_owned(),
        })
    }
}

fn load(files: &BTreeMap<String, Vec<u8>>) -> Result<PolicySet, InputError> {
    let mut sources = BTreeMap::new();
    for (name, bytes) in files {
        let text =
            String::from_utf8(bytes.clone()).map_err(|_| InputError::NotUtf8(name.clone()))?;
        sources.insert(name.clone(), text);
    }
    Ok(PolicySet::from_sources("the pack's policy/", sources)?)
}

fn field<'a>(input: &'a Value, name: &str) -> Result<&'a Value, InputError> {
    input
        .get(name)
        .ok_or_else(|| InputError::Missing(name.to_owned()))
}

fn at_ms(input: &Value) -> Result<u64, InputError> {
    field(input, "at_ms")?.as_u64().ok_or(InputError::AtMs)
}

fn part(part: &'static str, e: &serde_json::Error) -> InputError {
    InputError::Part {
        part,
        reason: e.to_string(),
    }
}

impl Decider for PepDecider {
    type Error = InputError;

    fn decide(&self, policy: &PolicySnapshot<'_>, input: &Value) -> Result<Decision, InputError> {
        let (_, policy) = self.load(policy)?;
        self.decide_with(&policy, input)
    }

    fn decide_under(
        &self,
        policy: &PolicySnapshot<'_>,
        policy_hash: Option<Digest>,
        input: &Value,
    ) -> Result<Decision, InputError> {
        let loaded = policy_hash.and_then(|h| self.policies.borrow().get(&h).cloned());
        match loaded {
            Some(loaded) => self.decide_with(&loaded, input),
            None => self.decide(policy, input),
        }
    }

    fn policy_hash(&self, policy: &PolicySnapshot<'_>) -> Option<Digest> {
        self.load(policy).ok().map(|(hash, _)| hash)
    }
}
