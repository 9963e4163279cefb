//! The operator's policy in a running host: one current set, swapped whole
//! by an explicit reload (`hcp policy reload`, `POST /v1/policy/reload`,
//! SIGHUP to `hcp serve`), never by an edit on disk alone.
//!
//! A reload reads and checks every file of the policy directory first; on
//! any problem the set in force is kept and the problems are answered. Each
//! attempt is a `policy.reload` receipt, durable before the answer: an
//! accepted reload's carries the new set's hash and snapshot and is
//! recorded before the swap (a set nobody could audit never decides), so
//! every decision taken once the reload has answered names the new hash; a
//! refused one carries the kept set's hash and the problems.
//!
//! Each decision reads the current set once ([`Host::policy`]) and decides
//! under that one: the gate's decision on a task and its receipt name the
//! same set. A session's decision scope is compiled under the set in force
//! when it opens, and kept for the session's life: sessions already open
//! when a reload lands finish under the set they opened with.

use super::Host;
use crate::evidence::Entry;
use anyhow::Result;
use hcp_contracts::RiskLevel;
use hcp_policy::pep::reload::{CALL_POLICY_RELOAD, ReloadInput, decide_reload};
use hcp_policy::{PolicyError, PolicySet};
use hcp_receipts::Digest;
use std::str::FromStr as _;
use std::sync::{Arc, Mutex, RwLock};

/// The policy set in force, with what receipts record of it.
#[derive(Debug)]
pub struct CurrentPolicy {
    /// The set.
    pub set: PolicySet,
    /// Its hash, as receipts record it.
    pub digest: Digest,
    /// Its files as JSON, stored with receipts as its snapshot
    /// ([`PolicySet::sources_json`]).
    pub sources: std::sync::Arc<str>,
}

impl CurrentPolicy {
    fn new(set: PolicySet) -> Result<Self> {
        Ok(Self {
            digest: Digest::from_str(set.policy_hash())
                .map_err(|e| anyhow::anyhow!("policy hash: {e}"))?,
            sources: set.sources_json().clone(),
            set,
        })
    }
}

impl std::ops::Deref for CurrentPolicy {
    type Target = PolicySet;

    fn deref(&self) -> &PolicySet {
        &self.set
    }
}

/// The current set, shared by everything that decides (the engine, the HID
/// mediator's witness).
#[derive(Debug)]
pub struct LivePolicy {
    current: RwLock<Arc<CurrentPolicy>>,
    /// Reloads go one at a time.
    reloading: Mutex<()>,
}

impl LivePolicy {
    /// Holds `set` as the current set.
    ///
    /// # Errors
    ///
    /// Its hash or files cannot be encoded.
    pub fn new(set: PolicySet) -> Result<Self> {
        Ok(Self {
            current: RwLock::new(Arc::new(CurrentPolicy::new(set)?)),
            reloading: Mutex::new(()),
        })
    }

    /// The set in force now; decide a whole decision under it.
    pub fn current(&self) -> Arc<CurrentPolicy> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn replace(&self, new: Arc<CurrentPolicy>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = new;
    }
}

/// An accepted reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The hash of the set before.
    pub old_hash: String,
    /// The hash of the set in force now (the same when nothing changed).
    pub new_hash: String,
}

/// A refused reload.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The files do not check; the set in force is kept.
    #[error("{error}\nthe policy set in force ({kept}) is kept")]
    Invalid {
        /// The hash of the set kept.
        kept: String,
        /// Every problem of every file.
        error: PolicyError,
    },
    /// The reload could not be recorded; the set in force is kept.
    #[error("the policy reload could not be recorded: {0:#}; the policy set in force is kept")]
    Host(anyhow::Error),
}

/// At most this many problems, each of at most this many characters, go
/// into a refused reload's receipt (the answer carries them all): no set of
/// files, however broken, makes its own refusal unrecordable.
const RECORDED_PROBLEMS: usize = 50;
const RECORDED_PROBLEM_CHARS: usize = 300;

fn recorded_problems(error: &PolicyError) -> Vec<String> {
    let mut out: Vec<String> = error
        .problems
        .iter()
        .take(RECORDED_PROBLEMS)
        .map(|p| {
            let text = p.to_string();
            if text.chars().count() > RECORDED_PROBLEM_CHARS {
                let cut: String = text.chars().take(RECORDED_PROBLEM_CHARS).collect();
                format!("{cut}...")
            } else {
                text
            }
        })
        .collect();
    if error.problems.len() > RECORDED_PROBLEMS {
        out.push(format!(
            "... and {} more",
            error.problems.len() - RECORDED_PROBLEMS
        ));
    }
    out
}

/// The host itself, as the capability its own receipts name.
const HOST_CAPABILITY: &str = concat!("hcp@", env!("CARGO_PKG_VERSION"));

impl Host {
    /// The policy set in force now. Read it once per decision.
    pub fn policy(&self) -> Arc<CurrentPolicy> {
        self.policy.current()
    }

    /// Reloads the policy directory (see the module doc). `by` names who
    /// asked (an operator's id, or the signal).
    ///
    /// # Errors
    ///
    /// [`ReloadError::Invalid`] with every problem when the files do not
    /// check, [`ReloadError::Host`] when the receipt cannot be recorded; the
    /// set in force is kept either way.
    pub fn reload_policy(&self, by: &str) -> Result<Reloaded, ReloadError> {
        let _one = self
            .policy
            .reloading
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let old = self.policy.current();
        match PolicySet::load(&self.paths.policies_dir) {
            Ok(set) => {
                let new = Arc::new(CurrentPolicy::new(set).map_err(ReloadError::Host)?);
                self.record_reload(&old, &new, by, Vec::new())
                    .map_err(ReloadError::Host)?;
                self.policy.replace(new.clone());
                tracing::warn!(
                    target: "hcp::policy",
                    by = by,
                    old_hash = old.policy_hash(),
                    new_hash = new.policy_hash(),
                    "policy reloaded by {by}: {} -> {}",
                    old.policy_hash(),
                    new.policy_hash()
                );
                Ok(Reloaded {
                    old_hash: old.policy_hash().to_owned(),
                    new_hash: new.policy_hash().to_owned(),
                })
            }
            Err(error) => {
                let problems = recorded_problems(&error);
                self.record_reload(&old, &old, by, problems)
                    .map_err(ReloadError::Host)?;
                tracing::error!(
                    target: "hcp::policy",
                    by = by,
                    kept_hash = old.policy_hash(),
                    error = %error,
                    "policy reload by {by} refused, the set in force ({}) kept: {error}",
                    old.policy_hash()
                );
                Err(ReloadError::Invalid {
                    kept: old.policy_hash().to_owned(),
                    error,
                })
            }
        }
    }

    /// Records a reload decided under `new` (the set kept, when refused).
    fn record_reload(
        &self,
        old: &CurrentPolicy,
        new: &CurrentPolicy,
        by: &str,
        problems: Vec<String>,
    ) -> Result<()> {
        let input = ReloadInput {
            at: hcp_contracts::message::now_rfc3339(),
            by: by.to_owned(),
            kind: CALL_POLICY_RELOAD.to_owned(),
            new_hash: new.policy_hash().to_owned(),
            old_hash: old.policy_hash().to_owned(),
            problems,
        };
        let decision = decide_reload(new, &input);
        self.recorder.append_sealed(Entry {
            session_id: None,
            task_id: None,
            capability: HOST_CAPABILITY.to_owned(),
            call: CALL_POLICY_RELOAD.to_owned(),
            args: serde_json::json!({
                "by": input.by,
                "new_hash": input.new_hash,
                "old_hash": input.old_hash,
            }),
            input: super::receipts::canonical(&input)?,
            verdict: decision.verdict,
            reason_code: decision.reason.to_owned(),
            risk: RiskLevel::R4,
            policy_hash: new.digest,
            parents: Vec::new(),
            manifest: None,
            policy_sources: Some(new.sources.clone()),
            follows: None,
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_contracts::Problem;
    use hcp_policy::FileProblem;

    #[test]
    fn a_refusal_records_a_bounded_list_of_problems() {
        let error = PolicyError {
            origin: "policies".into(),
            problems: (0..120)
                .map(|i| FileProblem {
                    file: "callers.json".into(),
                    problem: Problem::new(format!("/callers/{i}"), "x".repeat(1000)),
                })
                .collect(),
        };
        let recorded = recorded_problems(&error);
        assert_eq!(recorded.len(), 51);
        assert_eq!(recorded[50], "... and 70 more");
        assert_eq!(recorded[0].chars().count(), 303);
        assert!(
            recorded[0].starts_with("callers.json: /callers/0: xxx"),
            "{}",
            recorded[0]
        );
    }
}
