//! Replay: re-derive every recorded verdict from the recorded policy.
//!
//! For each receipt of a pack, replay takes its decision input (from
//! `inputs/<host>.jsonl`), checks it against the receipt's `input_hash`,
//! asks a [`Decider`] for the verdict under the receipt's own policy
//! snapshot (the one of the pack's snapshots whose hash is the receipt's
//! `policy_hash`; a pack of one snapshot decides everything under it), and
//! reports every receipt whose verdict or reason code comes out different.
//! The real decider (the host's PDP) lives in another crate; this crate only
//! defines the trait.

use crate::hash::Digest;
use crate::pack::Pack;
use crate::receipt::Verdict;
use crate::verify::ReceiptRef;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The policy snapshot of a pack: its `policy/` files by name.
#[derive(Debug, Clone, Copy)]
pub struct PolicySnapshot<'a> {
    /// File name → bytes.
    pub files: &'a BTreeMap<String, Vec<u8>>,
}

impl PolicySnapshot<'_> {
    /// The snapshot's digest: SHA-256 of the RFC 8785 form of the object
    /// `{file name: "sha256:<hex of the file's bytes>"}`. The host should
    /// record this as `policy_hash` for replay to check it.
    pub fn digest(&self) -> Digest {
        let names: BTreeMap<&str, String> = self
            .files
            .iter()
            .map(|(name, bytes)| (name.as_str(), Digest::of(bytes).to_string()))
            .collect();
        // A map of strings always has a canonical form; fall back to the
        // plain hash of nothing rather than fail.
        Digest::of_canonical(&names).unwrap_or_else(|_| Digest::of(b""))
    }
}

/// A verdict and its reason code, as a decider gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// ALLOW or DENY.
    pub verdict: Verdict,
    /// The reason code.
    pub reason_code: String,
}

/// Decides one call again from the policy snapshot and the recorded input.
pub trait Decider {
    /// Why a call cannot be decided again (replay reports its message).
    type Error: std::error::Error;

    /// The verdict for `input` under `policy`.
    ///
    /// # Errors
    ///
    /// The policy or the input cannot be evaluated; replay reports it.
    fn decide(
        &self,
        policy: &PolicySnapshot<'_>,
        input: &serde_json::Value,
    ) -> Result<Decision, Self::Error>;

    /// The hash receipts record as `policy_hash` for this snapshot, or `None`
    /// to skip that check. By default [`PolicySnapshot::digest`].
    fn policy_hash(&self, policy: &PolicySnapshot<'_>) -> Option<Digest> {
        Some(policy.digest())
    }

    /// [`Decider::decide`] for a snapshot whose [`Decider::policy_hash`] was
    /// `policy_hash` (replay asks for it once per snapshot, then decides
    /// each receipt with it, so a decider can keep what it loaded by hash).
    ///
    /// # Errors
    ///
    /// As [`Decider::decide`].
    fn decide_under(
        &self,
        policy: &PolicySnapshot<'_>,
        policy_hash: Option<Digest>,
        input: &serde_json::Value,
    ) -> Result<Decision, Self::Error> {
        let _ = policy_hash;
        self.decide(policy, input)
    }
}

/// What replay found wrong with one receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The pack holds no decision input for the receipt.
    MissingInput,
    /// The decision input is not the one the receipt hashed.
    InputHashMismatch {
        /// `input_hash` of the receipt.
        recorded: Digest,
        /// Hash of the input in the pack.
        actual: Digest,
    },
    /// The receipt was decided under another policy than the snapshot.
    PolicyHashMismatch {
        /// `policy_hash` of the receipt.
        recorded: Digest,
        /// The snapshot's hash.
        snapshot: Digest,
    },
    /// The pack holds several policy snapshots and none of them is the one
    /// the receipt was decided under: it is not replayed.
    NoSnapshot {
        /// `policy_hash` of the receipt.
        recorded: Digest,
        /// The hashes of the pack's snapshots (those that have one).
        snapshots: Vec<Digest>,
    },
    /// The decider failed.
    DeciderFailed(String),
    /// The verdict (and maybe the reason) differs.
    VerdictChanged {
        /// Recorded verdict and reason.
        recorded: Decision,
        /// Replayed verdict and reason.
        replayed: Decision,
    },
    /// Same verdict, other reason code.
    ReasonChanged {
        /// Recorded reason.
        recorded: String,
        /// Replayed reason.
        replayed: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingInput => f.write_str("no decision input in the pack"),
            Self::InputHashMismatch { recorded, actual } => write!(
                f,
                "decision input hashes to {actual}, the receipt recorded {recorded}"
            ),
            Self::PolicyHashMismatch { recorded, snapshot } => write!(
                f,
                "decided under policy {recorded}, but the pack's policy snapshot is {snapshot}"
            ),
            Self::NoSnapshot {
                recorded,
                snapshots,
            } => write!(
                f,
                "decided under policy {recorded}, but the pack holds no snapshot of it (its snapshots: {})",
                snapshots
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::DeciderFailed(e) => write!(f, "the decider failed: {e}"),
            Self::VerdictChanged { recorded, replayed } => write!(
                f,
                "verdict changed: recorded {} {}, replayed {} {}",
                recorded.verdict, recorded.reason_code, replayed.verdict, replayed.reason_code
            ),
            Self::ReasonChanged { recorded, replayed } => {
                write!(
                    f,
                    "reason changed: recorded {recorded}, replayed {replayed}"
                )
            }
        }
    }
}

/// One receipt replay found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayIssue {
    /// The receipt.
    pub receipt: ReceiptRef,
    /// What is wrong.
    pub finding: Finding,
}

impl fmt::Display for ReplayIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "receipt {} (receipts/{}.jsonl index {}): {}",
            self.receipt.receipt_id, self.receipt.host_id, self.receipt.index, self.finding
        )
    }
}

/// The outcome of a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Receipts replayed (with an input whose hash matched).
    pub replayed: usize,
    /// Of those, receipts whose verdict and reason came out the same.
    pub matched: usize,
    /// Every receipt found wrong; a receipt may have several findings.
    pub issues: Vec<ReplayIssue>,
}

impl ReplayReport {
    /// Whether every receipt replayed to its recorded verdict.
    pub fn ok(&self) -> bool {
        self.issues.is_empty()
    }
}

/// Replays every receipt of `pack` with `decider` (see the module doc).
/// Receipts whose input is missing or does not match `input_hash` are
/// reported and not replayed.
pub fn replay<D: Decider + ?Sized>(pack: &Pack, decider: &D) -> ReplayReport {
    let mut groups = pack.policy_snapshots();
    if groups.is_empty() {
        groups.push(BTreeMap::new());
    }
    let snapshots: Vec<(PolicySnapshot<'_>, Option<Digest>)> = groups
        .iter()
        .map(|files| {
            let snapshot = PolicySnapshot { files };
            (snapshot, decider.policy_hash(&snapshot))
        })
        .collect();
    let by_hash: HashMap<Digest, usize> = snapshots
        .iter()
        .enumerate()
        .filter_map(|(i, (_, hash))| hash.map(|h| (h, i)))
        .collect();
    let mut report = ReplayReport::default();
    for section in &pack.hosts {
        let inputs: HashMap<u64, &serde_json::Value> =
            section.inputs.iter().map(|i| (i.seq, &i.input)).collect();
        for (index, receipt) in section.receipts.iter().enumerate() {
            let mut issue = |finding| {
                report.issues.push(ReplayIssue {
                    receipt: ReceiptRef {
                        receipt_id: receipt.receipt_id.clone(),
                        host_id: section.host_id.clone(),
                        index,
                    },
                    finding,
                });
            };
            let (snapshot, policy_hash) = match by_hash.get(&receipt.policy_hash) {
                Some(&i) => snapshots[i],
                None if snapshots.len() == 1 => {
                    if let Some(snapshot_hash) = snapshots[0].1 {
                        issue(Finding::PolicyHashMismatch {
                            recorded: receipt.policy_hash,
                            snapshot: snapshot_hash,
                        });
                    }
                    snapshots[0]
                }
                None => {
                    issue(Finding::NoSnapshot {
                        recorded: receipt.policy_hash,
                        snapshots: snapshots.iter().filter_map(|s| s.1).collect(),
                    });
                    continue;
                }
            };
            let Some(input) = inputs.get(&receipt.seq) else {
                issue(Finding::MissingInput);
                continue;
            };
            match Digest::of_canonical(input) {
                Ok(actual) if actual == receipt.input_hash => {}
                Ok(actual) => {
                    issue(Finding::InputHashMismatch {
                        recorded: receipt.input_hash,
                        actual,
                    });
                    continue;
                }
                Err(e) => {
                    issue(Finding::DeciderFailed(format!("decision input: {e}")));
                    continue;
                }
            }
            let replayed = match decider.decide_under(&snapshot, policy_hash, input) {
                Ok(d) => d,
                Err(e) => {
                    issue(Finding::DeciderFailed(e.to_string()));
                    continue;
                }
            };
            let recorded = Decision {
                verdict: receipt.verdict,
                reason_code: receipt.reason_code.clone(),
            };
            if replayed.verdict != recorded.verdict {
                issue(Finding::VerdictChanged { recorded, replayed });
            } else if replayed.reason_code != recorded.reason_code {
                issue(Finding::ReasonChanged {
                    recorded: recorded.reason_code,
                    replayed: replayed.reason_code,
                });
            } else {
                report.matched += 1;
            }
            report.replayed += 1;
        }
    }
    report
}
