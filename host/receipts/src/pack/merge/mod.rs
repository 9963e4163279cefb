//! Merging evidence packs: the packs of several hosts that share work (or
//! several packs of one host) joined into one pack whose receipt DAG spans
//! them all. Each host keeps its own chain, checkpoints and keys, so the
//! merged pack verifies with each host's own signatures; the receipts of
//! all hosts are ordered by their Lamport clocks when verified
//! ([`crate::dag::merge_order`]).
//!
//! # Rules
//!
//! - Sections of distinct hosts are kept side by side, sorted by host id.
//! - Sections of one host are joined into one: a pack holds one contiguous
//!   stretch of each host's log (`pack.json` names a host once), so the
//!   stretches must overlap or meet. Where they overlap they must agree
//!   receipt for receipt, and where they meet the later one must continue
//!   the earlier one's last receipt; otherwise the log forked
//!   ([`MergeError::Fork`]). Receipts missing between two stretches are a
//!   gap ([`MergeError::Gap`]): merge a pack that holds them too.
//! - Checkpoints are kept once each, in order (two different ones of one
//!   size are a fork), and must link to one another. Each receipt keeps
//!   an inclusion proof from its packs (the one against the smallest
//!   checkpoint when several); each pair of successive checkpoints keeps
//!   its consistency proof, or where two stretches meet at a checkpoint
//!   one is derived from the receipts and the proofs the packs hold.
//! - Decision inputs are kept once per receipt (two different ones for one
//!   receipt are an error).
//! - Public keys are kept once per key id (two different keys with one id
//!   are an error); a host section names the union of its packs' keys.
//! - `external_parents` is the union of the packs', less the receipts the
//!   merged pack now holds (a parent on another host becomes an edge).
//! - Every distinct policy snapshot is kept, laid out as the exporter lays
//!   them out: one snapshot's files directly under `policy/` when the
//!   receipts name one policy, each under `<hex of its hash>/` otherwise,
//!   so replay finds each receipt's own snapshot.
//! - Manifests and messages are unioned; one name with two contents is an
//!   error.
//!
//! The result does not depend on the order of the packs: the same packs in
//! any order give the same pack, so the same bytes once written.

mod files;
mod host;
mod nodes;

use super::Pack;
use crate::hash::Digest;
use host::Stretch;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Why packs cannot be merged. Packs are named by their labels
/// ([`merge_labeled`]; `pack 1`, `pack 2`, ... for [`merge`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// No pack to merge.
    #[error("nothing to merge: no pack given")]
    NoPacks,
    /// Two packs disagree on a host's log: it forked.
    #[error("host {host} forks at seq {seq} between {first} and {second}: {detail}")]
    Fork {
        /// The host.
        host: String,
        /// The first seq where they disagree.
        seq: u64,
        /// The pack holding the receipt joined first.
        first: String,
        /// The pack that disagrees.
        second: String,
        /// How they disagree.
        detail: String,
    },
    /// Two packs hold different checkpoints of one size of a host's tree.
    #[error(
        "host {host} forks at its checkpoint of size {tree_size}: {first} and {second} hold different checkpoints of that size"
    )]
    CheckpointFork {
        /// The host.
        host: String,
        /// The tree size.
        tree_size: u64,
        /// One pack.
        first: String,
        /// The other.
        second: String,
    },
    /// Receipts of a host are missing between two packs' stretches.
    #[error(
        "host {host}: {first} ends at seq {last} and {second} starts at seq {next}; the receipts between are in no pack, and a pack holds one contiguous stretch of each host's log (merge a pack that holds them too)"
    )]
    Gap {
        /// The host.
        host: String,
        /// The last seq before the gap.
        last: u64,
        /// The first seq after it.
        next: u64,
        /// The pack that ends before the gap.
        first: String,
        /// The pack that starts after it.
        second: String,
    },
    /// Two successive checkpoints of the merged section do not link.
    #[error(
        "host {host}: its checkpoint of size {to} (in {second}) does not follow the one of size {from} (in {first}); the checkpoints between are in no pack"
    )]
    CheckpointGap {
        /// The host.
        host: String,
        /// The earlier checkpoint's size.
        from: u64,
        /// The later checkpoint's size.
        to: u64,
        /// The pack of the earlier checkpoint.
        first: String,
        /// The pack of the later one.
        second: String,
    },
    /// No consistency proof between two checkpoints, and none can be derived.
    #[error(
        "host {host}: no pack holds a consistency proof from its checkpoint of size {from} (in {first}) to the one of size {to} (in {second}), and the packs do not hold enough of its tree to derive one"
    )]
    NoConsistency {
        /// The host.
        host: String,
        /// The older size.
        from: u64,
        /// The newer size.
        to: u64,
        /// The pack of the older checkpoint.
        first: String,
        /// The pack of the newer one.
        second: String,
    },
    /// Two packs hold different decision inputs for one receipt.
    #[error(
        "host {host}: {first} and {second} hold different decision inputs for the receipt at seq {seq}"
    )]
    InputConflict {
        /// The host.
        host: String,
        /// The receipt's seq.
        seq: u64,
        /// One pack.
        first: String,
        /// The other.
        second: String,
    },
    /// Two different public keys with one key id.
    #[error("{first} and {second} hold different public keys with the key id {key_id}")]
    KeyConflict {
        /// The key id.
        key_id: String,
        /// One pack.
        first: String,
        /// The other.
        second: String,
    },
    /// A file with one path and different bytes in two packs.
    #[error("{path}: {first} and {second} hold different contents")]
    FileConflict {
        /// The pack path.
        path: String,
        /// One pack.
        first: String,
        /// The other.
        second: String,
    },
    /// A pack's only policy snapshot cannot be told apart from others.
    #[error(
        "{pack}: its policy snapshot (the files directly under policy/) cannot be placed beside the other packs' snapshots: its receipts do not name exactly one policy hash, so which policy it is is unknown"
    )]
    UnnamedPolicy {
        /// The pack.
        pack: String,
    },
    /// A record of a pack cannot be encoded (and so not hashed).
    #[error("{pack}: {what}: {reason}")]
    Unreadable {
        /// The pack.
        pack: String,
        /// The record.
        what: String,
        /// Why.
        reason: String,
    },
}

/// Merges `packs`, naming them `pack 1`, `pack 2`, ... in errors; see
/// [`merge_labeled`].
///
/// # Errors
///
/// As [`merge_labeled`].
pub fn merge(packs: Vec<Pack>) -> Result<Pack, MergeError> {
    merge_labeled(
        packs
            .into_iter()
            .enumerate()
            .map(|(i, p)| (format!("pack {}", i + 1), p))
            .collect(),
    )
}

/// Merges packs (each with a label, say its file name, that errors use) by
/// the rules of the module doc. The packs should each verify: a merge
/// checks how they fit together, not their signatures or proofs, and the
/// merged pack verifies when they do.
///
/// # Errors
///
/// No pack, a fork, a gap, checkpoints that do not link, a consistency
/// proof that cannot be had, two different keys with one id, or two
/// different files (or decision inputs, or policy snapshots) with one name.
pub fn merge_labeled(mut packs: Vec<(String, Pack)>) -> Result<Pack, MergeError> {
    if packs.is_empty() {
        return Err(MergeError::NoPacks);
    }
    let public_keys = files::keys(&packs)?;
    let manifests = files::opaque(&packs, "manifests/", |p| &p.manifests)?;
    let messages = files::opaque(&packs, "messages/", |p| &p.messages)?;
    let named: BTreeSet<Digest> = packs
        .iter()
        .flat_map(|(_, p)| &p.hosts)
        .flat_map(|h| h.receipts.iter().map(|r| r.policy_hash))
        .collect();
    let policy = files::policy(&packs, &named)?;
    let mut external: BTreeSet<Digest> = BTreeSet::new();
    let mut by_host: BTreeMap<String, Vec<Stretch>> = BTreeMap::new();
    for (p, (_, pack)) in packs.iter_mut().enumerate() {
        external.extend(pack.external_parents.iter().copied());
        for section in std::mem::take(&mut pack.hosts) {
            by_host
                .entry(section.host_id.clone())
                .or_default()
                .push(Stretch { pack: p, section });
        }
    }
    let labels: Vec<String> = packs.into_iter().map(|(label, _)| label).collect();
    let mut hosts = Vec::with_capacity(by_host.len());
    let mut present: HashSet<Digest> = HashSet::new();
    for (host_id, stretches) in by_host {
        let joined = host::join(&host_id, stretches, &labels)?;
        present.extend(joined.hashes);
        hosts.push(joined.section);
    }
    external.retain(|d| !present.contains(d));
    Ok(Pack {
        hosts,
        external_parents: external.into_iter().collect(),
        public_keys,
        policy,
        manifests,
        messages,
    })
}
