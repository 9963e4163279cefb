//! Consistency proofs a merge must supply itself: when two stretches of one
//! host's log meet at a checkpoint, no input pack holds the proof from that
//! checkpoint to the next one. It is derived here from what the packs do
//! hold: the receipts of the joined stretch (their leaf hashes), the nodes
//! named by the inputs' inclusion and consistency proofs, and the
//! checkpoints' roots. A node is the RFC 9162 hash of a range of leaves
//! (`MTH(D[lo:hi])`), the same in every tree that holds it, so a node one
//! proof names can serve another. Nothing derived here is trusted:
//! verification checks every proof of the merged pack against the signed
//! roots.

use crate::hash::Digest;
use crate::merkle::{self, leaf_hash, node_hash};
use crate::pack::{ConsistencyProof, InclusionProof};
use std::collections::HashMap;

/// The largest power of two below `n` (`n` > 1): RFC 9162's split point,
/// as `merkle::Tree` computes it.
fn split(n: u64) -> u64 {
    1 << (63 - (n - 1).leading_zeros())
}

/// The ranges `[lo, hi)` whose nodes make up the inclusion proof of leaf
/// `index` in the tree of `size` leaves, bottom-up (RFC 9162 §2.1.3.1, as
/// `merkle::Tree::inclusion_proof` walks it).
pub(super) fn inclusion_ranges(index: u64, size: u64) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    if index >= size {
        return ranges;
    }
    let (mut start, mut end, mut m) = (0u64, size, index);
    while end - start > 1 {
        let k = split(end - start);
        if m < k {
            ranges.push((start + k, end));
            end = start + k;
        } else {
            ranges.push((start, start + k));
            start += k;
            m -= k;
        }
    }
    ranges.reverse();
    ranges
}

/// The ranges whose nodes make up the consistency proof from `old` leaves
/// to `new`, bottom-up (RFC 9162 §2.1.4.1, as
/// `merkle::Tree::consistency_proof` walks it).
pub(super) fn consistency_ranges(old: u64, new: u64) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    if old == 0 || old >= new {
        return ranges;
    }
    let (mut start, mut end, mut m, mut complete) = (0u64, new, old, true);
    loop {
        let n = end - start;
        if m == n {
            if !complete {
                ranges.push((start, end));
            }
            break;
        }
        let k = split(n);
        if m <= k {
            ranges.push((start + k, end));
            end = start + k;
        } else {
            ranges.push((start, start + k));
            start += k;
            m -= k;
            complete = false;
        }
    }
    ranges.reverse();
    ranges
}

/// What is known of one host's tree.
pub(super) struct Known<'a> {
    /// `seq` of the first leaf in `leaves`.
    first_seq: u64,
    /// Leaf hashes of the joined stretch's receipts, in seq order.
    leaves: &'a [Digest],
    /// Nodes named by proofs and checkpoints, by range.
    nodes: HashMap<(u64, u64), Digest>,
}

impl<'a> Known<'a> {
    /// The tree known from the leaf hashes ([`leaf_hash`] of each receipt
    /// hash) of the receipts from `first_seq` on.
    pub(super) fn new(first_seq: u64, leaves: &'a [Digest]) -> Self {
        Self {
            first_seq,
            leaves,
            nodes: HashMap::new(),
        }
    }

    /// Learns the nodes of an inclusion proof (one of the wrong length is
    /// not a proof of what it claims, and is ignored).
    pub(super) fn learn_inclusion(&mut self, proof: &InclusionProof) {
        self.learn(&inclusion_ranges(proof.seq, proof.tree_size), &proof.path);
    }

    /// Learns the nodes of a consistency proof.
    pub(super) fn learn_consistency(&mut self, proof: &ConsistencyProof) {
        self.learn(&consistency_ranges(proof.from, proof.to), &proof.path);
    }

    /// Learns a checkpoint's root: the node over its first `size` leaves.
    pub(super) fn learn_root(&mut self, size: u64, root: Digest) {
        if size > 0 {
            self.nodes.insert((0, size), root);
        }
    }

    fn learn(&mut self, ranges: &[(u64, u64)], path: &[Digest]) {
        if ranges.len() == path.len() {
            self.nodes
                .extend(ranges.iter().copied().zip(path.iter().copied()));
        }
    }

    /// The node over leaves `[lo, hi)`, if it is known or can be computed
    /// from what is known.
    pub(super) fn node(&mut self, lo: u64, hi: u64) -> Option<Digest> {
        if hi <= lo {
            return None;
        }
        if let Some(d) = self.nodes.get(&(lo, hi)) {
            return Some(*d);
        }
        let (a, b) = (
            self.first_seq,
            self.first_seq.saturating_add(self.leaves.len() as u64),
        );
        if a <= lo && hi <= b {
            // Every leaf is held: the range's own root.
            let at = |s: u64| usize::try_from(s - a).ok();
            let leaves = self.leaves.get(at(lo)?..at(hi)?)?;
            return Some(merkle::root(leaves));
        }
        if hi <= a || lo >= b || hi - lo == 1 {
            // No leaf of it is held, and no proof names it.
            return None;
        }
        let k = split(hi - lo);
        let left = self.node(lo, lo + k)?;
        let right = self.node(lo + k, hi)?;
        let d = node_hash(&left, &right);
        self.nodes.insert((lo, hi), d);
        Some(d)
    }

    /// The consistency proof from `old` leaves to `new`, if every node of
    /// it is known or can be computed.
    pub(super) fn consistency(&mut self, old: u64, new: u64) -> Option<Vec<Digest>> {
        consistency_ranges(old, new)
            .into_iter()
            .map(|(lo, hi)| self.node(lo, hi))
            .collect()
    }
}

/// The leaf hash of each receipt hash.
pub(super) fn leaves(hashes: &[Digest]) -> Vec<Digest> {
    crate::par::map(hashes, |_, h| leaf_hash(&h.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::Tree;

    fn data(n: u64) -> Vec<Digest> {
        (0..n).map(|i| Digest::of(&i.to_be_bytes())).collect()
    }

    #[test]
    fn ranges_name_the_nodes_the_tree_puts_in_its_proofs() {
        let hashes = data(37);
        let tree = Tree::from_data(hashes.iter().map(|h| h.0.as_slice()));
        let leaves = leaves(&hashes);
        let mut all = Known::new(0, &leaves);
        for size in 1..=37 {
            for index in 0..size {
                let proof = tree.inclusion_proof(index, size).expect("proof");
                let derived: Option<Vec<Digest>> = inclusion_ranges(index, size)
                    .into_iter()
                    .map(|(lo, hi)| all.node(lo, hi))
                    .collect();
                assert_eq!(derived, Some(proof), "inclusion {index} in {size}");
            }
            for old in 0..=size {
                let proof = tree.consistency_proof(old, size).expect("proof");
                assert_eq!(all.consistency(old, size), Some(proof), "{old} to {size}");
            }
        }
    }

    #[test]
    fn a_join_at_a_checkpoint_is_bridged_from_the_earlier_stretchs_proofs() {
        // Stretch A holds seqs 5..20 with a checkpoint at 20, stretch B
        // holds 20..37 with one at 37: the proof from 20 to 37 needs nodes
        // left of seq 5, which only A's inclusion proofs name.
        let hashes = data(37);
        let tree = Tree::from_data(hashes.iter().map(|h| h.0.as_slice()));
        let leaves = leaves(&hashes[5..]);
        let mut known = Known::new(5, &leaves);
        assert_eq!(known.consistency(20, 37), None, "nothing learnt yet");
        for seq in 5..20 {
            known.learn_inclusion(&InclusionProof {
                seq,
                tree_size: 20,
                path: tree.inclusion_proof(seq, 20).expect("proof"),
            });
        }
        let expected = tree.consistency_proof(20, 37).expect("proof");
        assert_eq!(known.consistency(20, 37), Some(expected));
        // A wrong-length proof teaches nothing.
        let mut other = Known::new(5, &leaves);
        other.learn_inclusion(&InclusionProof {
            seq: 19,
            tree_size: 20,
            path: vec![Digest::of(b"x")],
        });
        assert_eq!(other.consistency(20, 37), None);
    }
}
