//! The compact state of an append-only tree: the roots of its perfect
//! subtrees, enough to append leaves and compute the root.

use super::{empty_root, node_hash};
use crate::hash::Digest;
use serde::{Deserialize, Serialize};

/// The roots of the perfect subtrees that make up a tree of `size` leaves,
/// one per set bit of `size`, largest (leftmost) first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frontier {
    /// Number of leaves.
    pub size: u64,
    /// Perfect subtree roots, largest first.
    pub nodes: Vec<Digest>,
}

impl Frontier {
    /// Whether `nodes` has one entry per set bit of `size`.
    pub fn is_well_formed(&self) -> bool {
        self.nodes.len() == self.size.count_ones() as usize
    }

    /// Appends one leaf hash.
    pub fn push(&mut self, leaf: Digest) {
        self.nodes.push(leaf);
        self.size += 1;
        for _ in 0..self.size.trailing_zeros() {
            match (self.nodes.pop(), self.nodes.pop()) {
                (Some(right), Some(left)) => self.nodes.push(node_hash(&left, &right)),
                // Unreachable when well formed; keep what was there.
                (Some(right), None) => self.nodes.push(right),
                _ => {}
            }
        }
    }

    /// The tree's root (RFC 9162 MTH).
    pub fn root(&self) -> Digest {
        let mut nodes = self.nodes.iter().rev();
        match nodes.next() {
            None => empty_root(),
            Some(last) => nodes.fold(*last, |acc, left| node_hash(left, &acc)),
        }
    }
}
