//! Signed Merkle checkpoints of a host's log.
//!
//! A checkpoint commits to the first `tree_size` receipts of a host's log:
//! `root_hash` is their RFC 9162 root, `head` the hash of receipt
//! `tree_size − 1`, and `prev_checkpoint` the hash of the host's previous
//! checkpoint, so checkpoints form a chain; successive ones are proven
//! consistent by RFC 9162 consistency proofs.
//!
//! Canonical form, hash and signature follow the receipt's rules (see
//! [`crate::receipt`]): RFC 8785 of every field, the hash covers the
//! signature, the signature covers `"hcp-checkpoint/1\n"` followed by the
//! canonical form with `signature` null. Checkpoints are always signed.

use crate::hash::Digest;
use crate::ids::{self, MAX_SAFE_INTEGER};
use crate::keys::{HostKey, KeyId, PublicKey, Signature, SignatureFailure};
use crate::merkle::{self, ProofError};
use serde::{Deserialize, Serialize};

/// Format version of checkpoints written by this crate.
pub const CHECKPOINT_VERSION: u32 = 1;

/// Domain separation prefix of checkpoint signatures.
pub const CHECKPOINT_DOMAIN: &[u8] = b"hcp-checkpoint/1\n";

/// A signed checkpoint. Fields are declared in RFC 8785 key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Hash of the last receipt covered (`seq = tree_size − 1`); null when empty.
    pub head: Option<Digest>,
    /// The host whose log this is.
    pub host_id: String,
    /// The signing key's id.
    pub key_id: KeyId,
    /// Hash of the host's previous checkpoint; null for its first.
    pub prev_checkpoint: Option<Digest>,
    /// RFC 9162 root of the first `tree_size` receipts.
    pub root_hash: Digest,
    /// Ed25519 signature; always present in a valid checkpoint.
    pub signature: Option<Signature>,
    /// RFC 3339 time the checkpoint was made.
    pub timestamp: String,
    /// Number of receipts covered.
    pub tree_size: u64,
    /// [`CHECKPOINT_VERSION`].
    pub version: u32,
}

/// What a new checkpoint commits to (the log fills it in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointDraft {
    /// The host.
    pub host_id: String,
    /// Receipts covered.
    pub tree_size: u64,
    /// Their root.
    pub root_hash: Digest,
    /// Hash of the last one.
    pub head: Option<Digest>,
    /// The previous checkpoint's hash.
    pub prev_checkpoint: Option<Digest>,
    /// RFC 3339 time.
    pub timestamp: String,
}

/// Errors of checkpoints and of checkpoint sequences.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// A field breaks a rule of the format.
    #[error("checkpoint of {host_id} at size {tree_size}: {reason}")]
    Invalid {
        /// The host.
        host_id: String,
        /// Its size.
        tree_size: u64,
        /// The rule broken.
        reason: String,
    },
    /// Serialization failed.
    #[error("checkpoint: encoding canonical JSON: {0}")]
    Encode(String),
    /// Two checkpoints of different hosts were compared.
    #[error("checkpoints of different hosts: {older} and {newer}")]
    HostMismatch {
        /// The older one's host.
        older: String,
        /// The newer one's host.
        newer: String,
    },
    /// `prev_checkpoint` does not name the previous checkpoint.
    #[error(
        "checkpoint at size {tree_size} names previous checkpoint {found}, but the previous one hashes to {expected}"
    )]
    NotLinked {
        /// The newer checkpoint's size.
        tree_size: u64,
        /// The previous checkpoint's hash.
        expected: Digest,
        /// What `prev_checkpoint` says (or `null`).
        found: String,
    },
    /// A checkpoint covers fewer receipts than one already known: a rollback.
    #[error(
        "rollback: host {host_id}'s checkpoint covers {size} receipts, fewer than the {known_size} of a checkpoint already known"
    )]
    Rollback {
        /// The host.
        host_id: String,
        /// The size already known.
        known_size: u64,
        /// The size presented.
        size: u64,
    },
    /// Two checkpoints that are not one tree's prefix and extension: a fork.
    #[error(
        "fork: host {host_id}'s checkpoints at sizes {old_size} and {new_size} are not consistent: {reason}"
    )]
    Fork {
        /// The host.
        host_id: String,
        /// The older size.
        old_size: u64,
        /// The newer size.
        new_size: u64,
        /// The failed proof.
        reason: ProofError,
    },
}

impl Checkpoint {
    /// Makes and signs a checkpoint.
    ///
    /// # Errors
    ///
    /// The draft breaks a rule ([`Checkpoint::check`]).
    pub fn sign(draft: CheckpointDraft, key: &HostKey) -> Result<Self, CheckpointError> {
        let mut cp = Self {
            head: draft.head,
            host_id: draft.host_id,
            key_id: key.key_id().clone(),
            prev_checkpoint: draft.prev_checkpoint,
            root_hash: draft.root_hash,
            signature: None,
            timestamp: draft.timestamp,
            tree_size: draft.tree_size,
            version: CHECKPOINT_VERSION,
        };
        cp.signature = Some(key.sign(&cp.signing_bytes()?));
        cp.check()?;
        Ok(cp)
    }

    /// The canonical form (RFC 8785).
    ///
    /// # Errors
    ///
    /// Serialization failed.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, CheckpointError> {
        serde_json::to_vec(self).map_err(|e| CheckpointError::Encode(e.to_string()))
    }

    /// SHA-256 of the canonical form (signature included).
    ///
    /// # Errors
    ///
    /// Serialization failed.
    pub fn hash(&self) -> Result<Digest, CheckpointError> {
        Ok(Digest::of(&self.canonical_bytes()?))
    }

    /// What the signature covers.
    ///
    /// # Errors
    ///
    /// Serialization failed.
    pub fn signing_bytes(&self) -> Result<Vec<u8>, CheckpointError> {
        let mut body = self.clone();
        body.signature = None;
        let mut out = CHECKPOINT_DOMAIN.to_vec();
        out.extend(body.canonical_bytes()?);
        Ok(out)
    }

    /// Verifies the signature with `key`, strictly.
    ///
    /// # Errors
    ///
    /// Why the signature is refused.
    pub fn verify_signature(&self, key: &PublicKey) -> Result<(), SignatureFailure> {
        let signature = self.signature.as_ref().ok_or(SignatureFailure::Missing)?;
        let bytes = self
            .signing_bytes()
            .map_err(|_| SignatureFailure::Mismatch(key.key_id().clone()))?;
        key.verify_strict(&bytes, signature)
    }

    /// Checks the rules one checkpoint can break alone: version, host id,
    /// size within 2^53 − 1, a signature, `head` null exactly when empty, the
    /// empty tree's root when empty, an RFC 3339 timestamp.
    ///
    /// # Errors
    ///
    /// The first rule broken.
    pub fn check(&self) -> Result<(), CheckpointError> {
        let invalid = |reason: String| CheckpointError::Invalid {
            host_id: self.host_id.clone(),
            tree_size: self.tree_size,
            reason,
        };
        if self.version != CHECKPOINT_VERSION {
            return Err(invalid(format!(
                "version {} is not supported",
                self.version
            )));
        }
        ids::check_host_id(&self.host_id).map_err(|e| invalid(e.to_string()))?;
        ids::check_timestamp(&self.timestamp).map_err(|e| invalid(e.to_string()))?;
        if self.tree_size > MAX_SAFE_INTEGER {
            return Err(invalid("tree_size is above 2^53 - 1".into()));
        }
        if self.signature.is_none() {
            return Err(invalid("unsigned".into()));
        }
        if (self.tree_size == 0) != self.head.is_none() {
            return Err(invalid(
                "head must be null exactly when the tree is empty".into(),
            ));
        }
        if self.tree_size == 0 && self.root_hash != merkle::empty_root() {
            return Err(invalid("an empty tree's root is SHA-256 of nothing".into()));
        }
        Ok(())
    }
}

/// Checks that `newer` follows `older` in a host's checkpoint chain: same
/// host, `newer.prev_checkpoint` is `older`'s hash, not smaller (else a
/// rollback), and consistent by `proof` (else a fork).
///
/// # Errors
///
/// The first of these that fails.
pub fn verify_successor(
    older: &Checkpoint,
    newer: &Checkpoint,
    proof: &[Digest],
) -> Result<(), CheckpointError> {
    let expected = older.hash()?;
    if newer.prev_checkpoint != Some(expected) {
        return Err(CheckpointError::NotLinked {
            tree_size: newer.tree_size,
            expected,
            found: newer
                .prev_checkpoint
                .map_or_else(|| "null".to_owned(), |d| d.to_string()),
        });
    }
    verify_extension(older, newer, proof)
}

/// Checks that `candidate` does not roll back or fork away from `known`, a
/// checkpoint of the same host seen before (linked or not): its tree is at
/// least as large and `proof` shows `known`'s tree is a prefix of it.
///
/// # Errors
///
/// [`CheckpointError::Rollback`] for a smaller tree,
/// [`CheckpointError::Fork`] for a tree that does not extend `known`'s.
pub fn verify_extension(
    known: &Checkpoint,
    candidate: &Checkpoint,
    proof: &[Digest],
) -> Result<(), CheckpointError> {
    if known.host_id != candidate.host_id {
        return Err(CheckpointError::HostMismatch {
            older: known.host_id.clone(),
            newer: candidate.host_id.clone(),
        });
    }
    if candidate.tree_size < known.tree_size {
        return Err(CheckpointError::Rollback {
            host_id: known.host_id.clone(),
            known_size: known.tree_size,
            size: candidate.tree_size,
        });
    }
    merkle::verify_consistency(
        known.tree_size,
        candidate.tree_size,
        &known.root_hash,
        &candidate.root_hash,
        proof,
    )
    .map_err(|reason| CheckpointError::Fork {
        host_id: known.host_id.clone(),
        old_size: known.tree_size,
        new_size: candidate.tree_size,
        reason,
    })
}
