//! A host's append-only receipt log as a pure state machine.
//!
//! [`HostLog::append`] turns a [`Draft`] (what the PEP decided) into a
//! [`Receipt`]: it assigns `seq`, `receipt_id`, `prev_hash` and the Lamport
//! clock, signs the receipt when the [`SigningPolicy`] says so (DENY, or
//! risk R4 and above, by default), adds it to the Merkle tree, and emits a
//! signed [`Checkpoint`] every `checkpoint_every` receipts. Low-risk ALLOWs
//! stay unsigned: checkpoints cover them.
//!
//! Storage is the caller's. After each append the caller stores the receipt
//! (and checkpoint, if any) and may store [`HostLog::state`] (serde) in the
//! same transaction; after a restart, [`HostLog::resume`] takes that state
//! back, or [`HostLog::recover`] rebuilds it from the stored receipts and
//! checkpoints. If a store fails, drop the `HostLog` and resume from what was
//! stored: the log's state has already moved on.

use crate::checkpoint::{Checkpoint, CheckpointDraft, CheckpointError};
use crate::hash::Digest;
use crate::ids::{self, MAX_SAFE_INTEGER};
use crate::keys::{HostKey, PublicKey};
use crate::merkle::{Frontier, leaf_hash};
use crate::receipt::{Head, Parent, RECEIPT_VERSION, Receipt, ReceiptError, Verdict};
use hcp_contracts::RiskLevel;
use serde::{Deserialize, Serialize};

/// Which receipts are signed one by one, and how often checkpoints are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigningPolicy {
    /// Receipts at this risk level or above are signed.
    pub sign_from_risk: RiskLevel,
    /// DENY receipts are signed.
    pub sign_denies: bool,
    /// A checkpoint is emitted after this many receipts since the last one.
    pub checkpoint_every: Option<u64>,
}

impl Default for SigningPolicy {
    /// R4 and above signed, every DENY signed, a checkpoint every 1024 receipts.
    fn default() -> Self {
        Self {
            sign_from_risk: RiskLevel::R4,
            sign_denies: true,
            checkpoint_every: Some(1024),
        }
    }
}

impl SigningPolicy {
    /// Whether a receipt with this verdict and risk is signed one by one.
    pub fn must_sign(&self, verdict: Verdict, risk: RiskLevel) -> bool {
        risk >= self.sign_from_risk || (self.sign_denies && verdict == Verdict::Deny)
    }
}

/// What the caller knows of a verdict; the log fills in the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// The session, if any.
    pub session_id: Option<String>,
    /// The task, if any.
    pub task_id: Option<String>,
    /// `name@version`.
    pub capability: String,
    /// The call decided (`fs.open`, `gate.admission`, ...).
    pub call: String,
    /// `sha256:` of the canonical arguments ([`Digest::of_canonical`]).
    pub args_hash: Digest,
    /// `sha256:` of the canonical decision input.
    pub input_hash: Digest,
    /// The verdict.
    pub verdict: Verdict,
    /// Its reason code.
    pub reason_code: String,
    /// The call's risk level.
    pub risk: RiskLevel,
    /// Hash of the policy in force.
    pub policy_hash: Digest,
    /// The session's previous receipt and the receipts that caused this one
    /// (local or of other hosts); the new clock is above all of theirs.
    pub parents: Vec<Parent>,
    /// RFC 3339 time of the verdict.
    pub timestamp: String,
}

/// A [`Draft`] with borrowed fields, for [`HostLog::append_into`]: what a
/// caller that keeps the strings of its verdicts hands the log without
/// copying them first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DraftRef<'a> {
    /// The session, if any.
    pub session_id: Option<&'a str>,
    /// The task, if any.
    pub task_id: Option<&'a str>,
    /// `name@version`.
    pub capability: &'a str,
    /// The call decided.
    pub call: &'a str,
    /// `sha256:` of the canonical arguments.
    pub args_hash: Digest,
    /// `sha256:` of the canonical decision input.
    pub input_hash: Digest,
    /// The verdict.
    pub verdict: Verdict,
    /// Its reason code.
    pub reason_code: &'a str,
    /// The call's risk level.
    pub risk: RiskLevel,
    /// Hash of the policy in force.
    pub policy_hash: Digest,
    /// As [`Draft::parents`].
    pub parents: &'a [Parent],
    /// RFC 3339 time of the verdict.
    pub timestamp: &'a str,
}

impl Draft {
    /// The draft, borrowed.
    pub fn as_ref(&self) -> DraftRef<'_> {
        DraftRef {
            session_id: self.session_id.as_deref(),
            task_id: self.task_id.as_deref(),
            capability: &self.capability,
            call: &self.call,
            args_hash: self.args_hash,
            input_hash: self.input_hash,
            verdict: self.verdict,
            reason_code: &self.reason_code,
            risk: self.risk,
            policy_hash: self.policy_hash,
            parents: &self.parents,
            timestamp: &self.timestamp,
        }
    }
}

/// What [`HostLog::append_into`] made beside the receipt it wrote.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The receipt's hash (as [`Appended::hash`]).
    pub hash: Digest,
    /// A checkpoint to store, when one was due.
    pub checkpoint: Option<Checkpoint>,
}

/// The last checkpoint as the log remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointMark {
    /// Its hash.
    pub hash: Digest,
    /// Its size.
    pub tree_size: u64,
}

/// Everything the log needs to go on after a restart. Serializable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogState {
    /// The host.
    pub host_id: String,
    /// The Lamport clock: the last receipt's, or a larger one received.
    pub lamport: u64,
    /// Hash of the last receipt.
    pub head: Option<Digest>,
    /// The Merkle tree's compact state; its size is the next `seq`.
    pub tree: Frontier,
    /// The last checkpoint.
    pub last_checkpoint: Option<CheckpointMark>,
}

/// Errors of the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The draft breaks a rule of receipts.
    #[error("log {host_id}: refusing a draft: {source}")]
    Draft {
        /// The host.
        host_id: String,
        /// The rule broken.
        source: ReceiptError,
    },
    /// The draft's timestamp is not RFC 3339, or a field is malformed.
    #[error("log {host_id}: refusing a draft: {reason}")]
    Field {
        /// The host.
        host_id: String,
        /// What is wrong.
        reason: String,
    },
    /// A checkpoint could not be made.
    #[error("log {host_id}: {source}")]
    Checkpoint {
        /// The host.
        host_id: String,
        /// What failed.
        source: Box<CheckpointError>,
    },
    /// The saved state or the stored receipts do not make a valid log.
    #[error("log {host_id}: cannot recover: {reason}")]
    Recovery {
        /// The host.
        host_id: String,
        /// What is wrong.
        reason: String,
    },
    /// The Lamport clock would pass 2^53 − 1.
    #[error("log {host_id}: Lamport clock exhausted")]
    ClockExhausted {
        /// The host.
        host_id: String,
    },
}

/// A receipt just appended, with its hash and the checkpoint it triggered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The receipt to store.
    pub receipt: Receipt,
    /// Its hash, over its canonical form ([`Receipt::canonical_bytes`]):
    /// store it, it is the next receipt's `prev_hash`, and a parent.
    pub hash: Digest,
    /// A checkpoint to store, when one was due.
    pub checkpoint: Option<Checkpoint>,
}

/// A host's log: its state, its key, its signing policy.
#[derive(Debug)]
pub struct HostLog {
    state: LogState,
    key: HostKey,
    policy: SigningPolicy,
    /// Where each receipt's canonical form is written to be hashed.
    scratch: Vec<u8>,
    /// The last draft timestamp found to be RFC 3339: drafts come many
    /// to a millisecond, and each is checked once.
    checked_stamp: String,
}

impl HostLog {
    /// An empty log.
    ///
    /// # Errors
    ///
    /// An invalid host id.
    pub fn new(host_id: &str, key: HostKey, policy: SigningPolicy) -> Result<Self, LogError> {
        let state = LogState {
            host_id: host_id.to_owned(),
            lamport: 0,
            head: None,
            tree: Frontier::default(),
            last_checkpoint: None,
        };
        Self::resume(state, key, policy)
    }

    /// A log that goes on from a saved state.
    ///
    /// # Errors
    ///
    /// An inconsistent state (host id, tree, head).
    pub fn resume(state: LogState, key: HostKey, policy: SigningPolicy) -> Result<Self, LogError> {
        check_state(&state)?;
        Ok(Self {
            state,
            key,
            policy,
            scratch: Vec::with_capacity(1024),
            checked_stamp: String::new(),
        })
    }

    /// Goes on from `state` instead of its own, with the same key: for
    /// hosts where several processes append to one stored log, each taking
    /// the stored state under the store's write lock before appending.
    ///
    /// # Errors
    ///
    /// An inconsistent state, or one of another host; the log is unchanged.
    pub fn resync(&mut self, state: LogState) -> Result<(), LogError> {
        check_state(&state)?;
        if state.host_id != self.state.host_id {
            return Err(LogError::Recovery {
                host_id: self.state.host_id.clone(),
                reason: format!("the stored state is the log of {}", state.host_id),
            });
        }
        self.state = state;
        Ok(())
    }

    /// Rebuilds the state from the stored log: `receipts` must be the whole
    /// log in `seq` order from 0, `checkpoints` the host's checkpoints in
    /// order. Checks the hash chain, the Lamport order, each receipt's rules,
    /// the checkpoint chain and that each checkpoint's root is the tree's.
    /// Signatures are not checked here (that is [`crate::verify`]'s job).
    ///
    /// # Errors
    ///
    /// The first receipt or checkpoint that does not fit.
    pub fn recover(
        host_id: &str,
        key: HostKey,
        policy: SigningPolicy,
        receipts: &[Receipt],
        checkpoints: &[Checkpoint],
    ) -> Result<Self, LogError> {
        let mut log = Self::new(host_id, key, policy)?;
        let bad = |reason: String| LogError::Recovery {
            host_id: host_id.to_owned(),
            reason,
        };
        let mut pending = checkpoints.iter().peekable();
        let mut check_checkpoints = |log: &mut Self| -> Result<(), LogError> {
            while let Some(cp) = pending.next_if(|cp| cp.tree_size == log.state.tree.size) {
                let hash = cp.hash().map_err(|e| bad(e.to_string()))?;
                if cp.host_id != host_id || cp.root_hash != log.state.tree.root() {
                    return Err(bad(format!(
                        "checkpoint at size {} does not match the receipts",
                        cp.tree_size
                    )));
                }
                if cp.prev_checkpoint != log.state.last_checkpoint.map(|m| m.hash) {
                    return Err(bad(format!(
                        "checkpoint at size {} does not link to the previous one",
                        cp.tree_size
                    )));
                }
                log.state.last_checkpoint = Some(CheckpointMark {
                    hash,
                    tree_size: cp.tree_size,
                });
            }
            Ok(())
        };
        check_checkpoints(&mut log)?;
        for r in receipts {
            r.check().map_err(|e| bad(e.to_string()))?;
            let s = &log.state;
            if r.host_id != host_id || r.seq != s.tree.size {
                return Err(bad(format!(
                    "expected receipt {host_id}:{}, found {}",
                    s.tree.size, r.receipt_id
                )));
            }
            if r.prev_hash != s.head {
                return Err(bad(format!("{}: prev_hash breaks the chain", r.receipt_id)));
            }
            if s.head.is_some() && r.lamport <= s.lamport {
                return Err(bad(format!(
                    "{}: Lamport clock does not increase",
                    r.receipt_id
                )));
            }
            let hash = r.hash().map_err(|e| bad(e.to_string()))?;
            log.state.lamport = r.lamport;
            log.state.head = Some(hash);
            log.state.tree.push(leaf_hash(&hash.0));
            check_checkpoints(&mut log)?;
        }
        if let Some(cp) = pending.next() {
            return Err(bad(format!(
                "checkpoint at size {} is out of order or beyond the {} receipts",
                cp.tree_size,
                receipts.len()
            )));
        }
        Ok(log)
    }

    /// The state to save.
    pub fn state(&self) -> &LogState {
        &self.state
    }

    /// Receipts in the log so far (the next `seq`).
    pub fn size(&self) -> u64 {
        self.state.tree.size
    }

    /// The Merkle root of the log so far.
    pub fn root(&self) -> Digest {
        self.state.tree.root()
    }

    /// The host's public key.
    pub fn public_key(&self) -> &PublicKey {
        self.key.public()
    }

    /// The signing policy.
    pub fn policy(&self) -> &SigningPolicy {
        &self.policy
    }

    /// Merges a Lamport clock seen on another host (a message, a remote
    /// receipt): the next receipt's clock is above it.
    ///
    /// # Errors
    ///
    /// A clock above 2^53 − 1.
    pub fn receive(&mut self, remote_lamport: u64) -> Result<(), LogError> {
        if remote_lamport >= MAX_SAFE_INTEGER {
            return Err(LogError::ClockExhausted {
                host_id: self.state.host_id.clone(),
            });
        }
        self.state.lamport = self.state.lamport.max(remote_lamport);
        Ok(())
    }

    /// Appends a receipt for `draft`; see the module doc. The state changes
    /// only when this returns `Ok`.
    ///
    /// # Errors
    ///
    /// The draft breaks a rule of receipts, the clock is exhausted, or the
    /// due checkpoint cannot be made.
    pub fn append(&mut self, draft: Draft) -> Result<Appended, LogError> {
        let mut receipt = Receipt::blank();
        let Placed { hash, checkpoint } = self.append_into(draft.as_ref(), &mut receipt)?;
        Ok(Appended {
            receipt,
            hash,
            checkpoint,
        })
    }

    /// [`HostLog::append`] into `receipt`, whose fields are all written
    /// again (their strings' buffers reused): a caller that stores each
    /// receipt and moves on keeps one and allocates nothing per receipt.
    /// The state changes only when this returns `Ok`; on an error
    /// `receipt` holds no receipt of the log.
    ///
    /// # Errors
    ///
    /// As [`HostLog::append`].
    pub fn append_into(
        &mut self,
        draft: DraftRef<'_>,
        receipt: &mut Receipt,
    ) -> Result<Placed, LogError> {
        self.append_into_after(draft, receipt, None)
    }

    /// [`HostLog::append_into`], the receipt's hash taken on from `head`
    /// ([`Receipt::hash_after`]): the same hash, the same receipt, its
    /// start rendered and hashed on another thread.
    ///
    /// # Errors
    ///
    /// As [`HostLog::append`].
    pub fn append_into_after(
        &mut self,
        draft: DraftRef<'_>,
        receipt: &mut Receipt,
        head: Option<&Head>,
    ) -> Result<Placed, LogError> {
        if draft.timestamp != self.checked_stamp {
            ids::check_timestamp(draft.timestamp).map_err(|e| LogError::Field {
                host_id: self.state.host_id.clone(),
                reason: e.to_string(),
            })?;
            draft.timestamp.clone_into(&mut self.checked_stamp);
        }
        let host_id = &self.state.host_id;
        let clock = draft
            .parents
            .iter()
            .map(|p| p.lamport)
            .fold(self.state.lamport, u64::max);
        if clock >= MAX_SAFE_INTEGER {
            return Err(LogError::ClockExhausted {
                host_id: host_id.clone(),
            });
        }
        let seq = self.state.tree.size;
        fill(receipt, &draft, host_id, seq, clock + 1, self.state.head);
        let draft_error = |source| LogError::Draft {
            host_id: host_id.clone(),
            source,
        };
        receipt.check().map_err(draft_error)?;
        if self.policy.must_sign(receipt.verdict, receipt.risk) {
            receipt.sign(&self.key).map_err(draft_error)?;
        }
        let after = match head {
            Some(head) => receipt
                .hash_after(head, &mut self.scratch)
                .map_err(draft_error)?,
            None => None,
        };
        let hash = match after {
            Some(hash) => hash,
            None => {
                self.scratch.clear();
                receipt
                    .write_canonical(&mut self.scratch)
                    .map_err(draft_error)?;
                Digest::of(&self.scratch)
            }
        };

        let since = seq + 1 - self.state.last_checkpoint.map_or(0, |c| c.tree_size);
        let due = self
            .policy
            .checkpoint_every
            .is_some_and(|every| since >= every.max(1));
        let checkpoint = if due {
            // The checkpoint may fail: the state changes only after it.
            let mut next = self.state.clone();
            next.lamport = receipt.lamport;
            next.head = Some(hash);
            next.tree.push(leaf_hash(&hash.0));
            let cp = Self::make_checkpoint(&mut next, &self.key, &receipt.timestamp)?;
            self.state = next;
            Some(cp)
        } else {
            // Nothing below fails.
            self.state.lamport = receipt.lamport;
            self.state.head = Some(hash);
            self.state.tree.push(leaf_hash(&hash.0));
            None
        };
        Ok(Placed { hash, checkpoint })
    }

    /// Emits a signed checkpoint of the whole log now (e.g. before an export).
    ///
    /// # Errors
    ///
    /// An invalid timestamp.
    pub fn checkpoint(&mut self, timestamp: &str) -> Result<Checkpoint, LogError> {
        let mut next = self.state.clone();
        let cp = Self::make_checkpoint(&mut next, &self.key, timestamp)?;
        self.state = next;
        Ok(cp)
    }

    fn make_checkpoint(
        state: &mut LogState,
        key: &HostKey,
        timestamp: &str,
    ) -> Result<Checkpoint, LogError> {
        let error = |source| LogError::Checkpoint {
            host_id: state.host_id.clone(),
            source: Box::new(source),
        };
        let cp = Checkpoint::sign(
            CheckpointDraft {
                host_id: state.host_id.clone(),
                tree_size: state.tree.size,
                root_hash: state.tree.root(),
                head: state.head,
                prev_checkpoint: state.last_checkpoint.map(|c| c.hash),
                timestamp: timestamp.to_owned(),
            },
            key,
        )
        .map_err(error)?;
        let hash = cp.hash().map_err(error)?;
        state.last_checkpoint = Some(CheckpointMark {
            hash,
            tree_size: cp.tree_size,
        });
        Ok(cp)
    }
}

/// The checks of a saved state (host id, tree, head, last checkpoint).
fn check_state(state: &LogState) -> Result<(), LogError> {
    let bad = |reason: String| LogError::Recovery {
        host_id: state.host_id.clone(),
        reason,
    };
    ids::check_host_id(&state.host_id).map_err(|e| bad(e.to_string()))?;
    if !state.tree.is_well_formed() {
        return Err(bad(format!(
            "the tree state holds {} nodes for size {}",
            state.tree.nodes.len(),
            state.tree.size
        )));
    }
    if (state.tree.size == 0) != state.head.is_none() {
        return Err(bad("head must be null exactly when the log is empty".into()));
    }
    if state
        .last_checkpoint
        .is_some_and(|c| c.tree_size > state.tree.size)
    {
        return Err(bad("the last checkpoint is beyond the log".into()));
    }
    Ok(())
}

/// Writes every field of the receipt `draft` makes at `seq` into
/// `receipt`, reusing its strings' buffers; unsigned.
fn fill(
    receipt: &mut Receipt,
    draft: &DraftRef<'_>,
    host_id: &str,
    seq: u64,
    lamport: u64,
    prev_hash: Option<Digest>,
) {
    fn set(to: &mut Option<String>, from: Option<&str>) {
        match (to.as_mut(), from) {
            (Some(to), Some(from)) => from.clone_into(to),
            (_, from) => *to = from.map(str::to_owned),
        }
    }
    receipt.args_hash = draft.args_hash;
    draft.call.clone_into(&mut receipt.call);
    draft.capability.clone_into(&mut receipt.capability);
    host_id.clone_into(&mut receipt.host_id);
    receipt.input_hash = draft.input_hash;
    receipt.key_id = None;
    receipt.lamport = lamport;
    receipt.parents.clear();
    receipt.parents.extend(draft.parents.iter().map(|p| p.hash));
    receipt.policy_hash = draft.policy_hash;
    receipt.prev_hash = prev_hash;
    draft.reason_code.clone_into(&mut receipt.reason_code);
    receipt.receipt_id.clear();
    receipt.receipt_id.push_str(host_id);
    receipt.receipt_id.push(':');
    let mut digits = [0u8; 20];
    for d in ids::decimal(seq, &mut digits) {
        receipt.receipt_id.push(char::from(*d));
    }
    receipt.risk = draft.risk;
    receipt.seq = seq;
    set(&mut receipt.session_id, draft.session_id);
    receipt.signature = None;
    set(&mut receipt.task_id, draft.task_id);
    draft.timestamp.clone_into(&mut receipt.timestamp);
    receipt.verdict = draft.verdict;
    receipt.version = RECEIPT_VERSION;
}
