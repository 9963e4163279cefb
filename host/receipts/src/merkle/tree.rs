//! A whole tree in memory, every perfect subtree's hash cached, to generate
//! inclusion and consistency proofs for any size up to the tree's.
//!
//! A tree may start from a pruned prefix kept as its frontier
//! ([`Tree::from_frontier`]: the roots of the perfect subtrees of its first
//! `A` leaves). Every node an inclusion proof of a leaf at or after `A`, or
//! a consistency proof from a size at or after `A`, reads is then known:
//! a node of the tree either lies after `A`, spans it, is one of the
//! frontier's roots, or lies strictly inside one of them, and only the last
//! kind is lost, which such proofs never read (a proof's nodes are the
//! siblings of a path to a leaf after `A`, or the perfect subtrees of a
//! size after `A`; neither fits strictly inside a perfect subtree of the
//! first `A` leaves). Anything else is refused ([`ProofError::Pruned`]).

use super::{Frontier, ProofError, empty_root, leaf_hash, node_hash};
use crate::hash::Digest;

/// A tree of leaf hashes with every complete aligned subtree hash cached
/// (about two hashes per leaf). Proofs are generated against any prefix.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// `levels[h][i]` is the hash of leaves `[j·2^h, (j+1)·2^h)` with
    /// `j = offsets[h] + i`.
    levels: Vec<Vec<Digest>>,
    /// The index of each level's first kept node: 0 for a whole tree; for
    /// one from a frontier of `A` leaves, `A >> h` rounded down to even
    /// (the frontier's root of height `h`, when `A` has that bit, first).
    /// Each level's kept nodes start at an even index: pairs stay aligned.
    offsets: Vec<u64>,
}

impl Tree {
    /// A tree over `leaves`, which are leaf hashes ([`leaf_hash`]).
    pub fn from_leaf_hashes(leaves: Vec<Digest>) -> Self {
        let mut levels = vec![leaves];
        while let Some(last) = levels.last() {
            if last.len() < 2 {
                break;
            }
            let next: Vec<Digest> = last
                .chunks_exact(2)
                .map(|pair| node_hash(&pair[0], &pair[1]))
                .collect();
            levels.push(next);
        }
        Self {
            offsets: vec![0; levels.len()],
            levels,
        }
    }

    /// A tree whose first `frontier.size` leaves are pruned, kept as
    /// `frontier` (their perfect subtrees' roots), followed by `leaves`
    /// (leaf hashes). See the module doc for the proofs it gives.
    ///
    /// # Errors
    ///
    /// The frontier is not well formed (one root per set bit of its size).
    pub fn from_frontier(frontier: &Frontier, leaves: Vec<Digest>) -> Result<Self, ProofError> {
        let pruned = frontier.size;
        if !frontier.is_well_formed() {
            return Err(ProofError::Pruned {
                start: 0,
                end: pruned,
                pruned,
            });
        }
        // The frontier's root of height `h`, if `pruned` has bit `h`.
        let root_of = |h: u32| -> Option<Digest> {
            if h >= 64 || pruned & (1 << h) == 0 {
                return None;
            }
            let above = (pruned >> h).count_ones() as usize - 1;
            frontier.nodes.get(above).copied()
        };
        let mut levels: Vec<Vec<Digest>> = Vec::new();
        let mut offsets: Vec<u64> = Vec::new();
        let mut below: Vec<Digest> = leaves;
        let mut h: u32 = 0;
        loop {
            let mut level = Vec::with_capacity(below.len() + 1);
            let offset = match root_of(h) {
                Some(root) => {
                    level.push(root);
                    (pruned >> h) - 1
                }
                None => pruned >> h,
            };
            level.append(&mut below);
            let next: Vec<Digest> = level
                .chunks_exact(2)
                .map(|pair| node_hash(&pair[0], &pair[1]))
                .collect();
            let higher = h < 63 && (pruned >> (h + 1)) != 0;
            let done = level.len() < 2 && !higher;
            levels.push(level);
            offsets.push(offset);
            if done {
                break;
            }
            below = next;
            h += 1;
        }
        Ok(Self { levels, offsets })
    }

    /// A tree whose leaves hash `data` (e.g. receipt hashes).
    pub fn from_data<'a>(data: impl IntoIterator<Item = &'a [u8]>) -> Self {
        Self::from_leaf_hashes(data.into_iter().map(leaf_hash).collect())
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64) + self.offset(0)
    }

    /// The index of level `h`'s first kept node.
    fn offset(&self, h: usize) -> u64 {
        self.offsets.get(h).copied().unwrap_or(0)
    }

    /// Appends a leaf hash (recomputing the cached nodes it completes).
    pub fn push(&mut self, leaf: Digest) {
        if self.levels.is_empty() {
            self.levels.push(Vec::new());
        }
        self.levels[0].push(leaf);
        let mut h = 0;
        // Kept nodes start at an even index: a level of an even count ends
        // with a pair.
        while (self.offset(h) + self.levels[h].len() as u64).is_multiple_of(2)
            && self.levels[h].len() >= 2
        {
            let n = self.levels[h].len();
            let parent = node_hash(&self.levels[h][n - 2], &self.levels[h][n - 1]);
            if self.levels.len() == h + 1 {
                self.levels.push(Vec::new());
            }
            if self.offsets.len() < self.levels.len() {
                let offset = self.offset(h) / 2;
                self.offsets.resize(self.levels.len(), offset);
            }
            self.levels[h + 1].push(parent);
            h += 1;
        }
    }

    /// The leaf hash at `index`.
    pub fn leaf(&self, index: u64) -> Option<Digest> {
        let at = index.checked_sub(self.offset(0))?;
        self.levels.first()?.get(usize::try_from(at).ok()?).copied()
    }

    /// The root of the first `size` leaves.
    ///
    /// # Errors
    ///
    /// `size` is larger than the tree.
    pub fn root_at(&self, size: u64) -> Result<Digest, ProofError> {
        self.check_size(size)?;
        if size == 0 {
            Ok(empty_root())
        } else {
            self.mth(0, size)
        }
    }

    /// The compact state of the first `size` leaves.
    ///
    /// # Errors
    ///
    /// `size` is larger than the tree.
    pub fn frontier_at(&self, size: u64) -> Result<Frontier, ProofError> {
        self.check_size(size)?;
        let mut nodes = Vec::new();
        let mut start = 0;
        for bit in (0..64).rev() {
            let width = 1u64 << bit;
            if size & width != 0 {
                nodes.push(self.mth(start, start + width)?);
                start += width;
            }
        }
        Ok(Frontier { size, nodes })
    }

    /// The inclusion proof of leaf `index` in the tree of the first `size`
    /// leaves (RFC 9162 §2.1.3.1, PATH).
    ///
    /// # Errors
    ///
    /// `index` ≥ `size`, or `size` is larger than the tree.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Digest>, ProofError> {
        self.check_size(size)?;
        if index >= size {
            return Err(ProofError::IndexOutOfRange { index, size });
        }
        let mut proof = Vec::new();
        // PATH(m, D[start:end]), iteratively; hashes are collected top-down
        // and reversed at the end (the proof lists them bottom-up).
        let (mut start, mut end, mut m) = (0u64, size, index);
        while end - start > 1 {
            let k = split(end - start);
            if m < k {
                proof.push(self.mth(start + k, end)?);
                end = start + k;
            } else {
                proof.push(self.mth(start, start + k)?);
                start += k;
                m -= k;
            }
        }
        proof.reverse();
        Ok(proof)
    }

    /// The consistency proof from the first `old_size` leaves to the first
    /// `new_size` (RFC 9162 §2.1.4.1, PROOF = SUBPROOF(m, D[n], true)); empty
    /// when the sizes are equal or `old_size` is 0.
    ///
    /// # Errors
    ///
    /// `old_size` > `new_size`, or `new_size` is larger than the tree.
    pub fn consistency_proof(
        &self,
        old_size: u64,
        new_size: u64,
    ) -> Result<Vec<Digest>, ProofError> {
        self.check_size(new_size)?;
        if old_size > new_size {
            return Err(ProofError::Shrunk {
                old: old_size,
                new: new_size,
            });
        }
        let mut proof = Vec::new();
        if old_size == 0 || old_size == new_size {
            return Ok(proof);
        }
        let (mut start, mut end, mut m, mut complete) = (0u64, new_size, old_size, true);
        loop {
            let n = end - start;
            if m == n {
                if !complete {
                    proof.push(self.mth(start, end)?);
                }
                break;
            }
            let k = split(n);
            if m <= k {
                proof.push(self.mth(start + k, end)?);
                end = start + k;
            } else {
                proof.push(self.mth(start, start + k)?);
                start += k;
                m -= k;
                complete = false;
            }
        }
        proof.reverse();
        Ok(proof)
    }

    fn check_size(&self, size: u64) -> Result<(), ProofError> {
        if size > self.size() {
            Err(ProofError::BeyondTree {
                size,
                tree_size: self.size(),
            })
        } else {
            Ok(())
        }
    }

    /// MTH of leaves `[start, end)`, `start < end ≤ size`.
    ///
    /// # Errors
    ///
    /// It lies strictly inside a pruned perfect subtree.
    fn mth(&self, start: u64, end: u64) -> Result<Digest, ProofError> {
        let n = end - start;
        if n.is_power_of_two() && start.is_multiple_of(n) {
            let h = n.trailing_zeros() as usize;
            if let Some(d) = (start >> h)
                .checked_sub(self.offset(h))
                .and_then(|i| self.levels.get(h)?.get(usize::try_from(i).ok()?))
            {
                return Ok(*d);
            }
            if n == 1 || start < self.offset(0) {
                return Err(ProofError::Pruned {
                    start,
                    end,
                    pruned: self.offset(0),
                });
            }
        }
        let k = split(n);
        Ok(node_hash(
            &self.mth(start, start + k)?,
            &self.mth(start + k, end)?,
        ))
    }
}

/// The largest power of two smaller than `n` (n ≥ 2).
pub(super) fn split(n: u64) -> u64 {
    1 << (63 - (n - 1).leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_the_largest_power_of_two_below() {
        assert_eq!(split(2), 1);
        assert_eq!(split(3), 2);
        assert_eq!(split(4), 2);
        assert_eq!(split(5), 4);
        assert_eq!(split(8), 4);
        assert_eq!(split(9), 8);
    }

    #[test]
    fn a_proof_without_its_lowest_hashes_is_the_proof_of_an_inner_node() {
        use super::super::{
            inclusion_proof_len, root, subtree_leaves, verify_inclusion_of_subtree,
        };
        let leaves: Vec<Digest> = (0u32..37).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let tree = Tree::from_leaf_hashes(leaves.clone());
        for size in 1..=37u64 {
            let top = tree.root_at(size).expect("root");
            for index in 0..size {
                let proof = tree.inclusion_proof(index, size).expect("proof");
                assert_eq!(inclusion_proof_len(index, size), Some(proof.len()));
                for height in 0..7 {
                    let under = subtree_leaves(height, index, size).expect("leaves");
                    assert!(under.contains(&index));
                    let node = root(&leaves[under.start as usize..under.end as usize]);
                    let width = ((size - 1) >> height) + 1;
                    let short = inclusion_proof_len(index >> height, width).expect("len");
                    let suffix = &proof[proof.len() - short..];
                    assert_eq!(
                        verify_inclusion_of_subtree(&node, height, index, size, suffix, &top),
                        Ok(()),
                        "size {size} leaf {index} height {height}"
                    );
                }
            }
        }
        assert_eq!(inclusion_proof_len(5, 5), None);
        assert_eq!(subtree_leaves(2, 9, 10), Some(8..10));
        assert_eq!(subtree_leaves(64, 0, 1), None);
    }

    #[test]
    fn a_tree_from_a_frontier_gives_every_proof_after_it_and_refuses_the_rest() {
        let leaves: Vec<Digest> = (0u32..37).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let whole = Tree::from_leaf_hashes(leaves.clone());
        for pruned in 0..=37u64 {
            let frontier = whole.frontier_at(pruned).expect("frontier");
            for size in pruned..=37u64 {
                let kept = leaves[pruned as usize..size as usize].to_vec();
                let mut tree = Tree::from_frontier(&frontier, kept.clone()).expect("tree");
                let mut pushed =
                    Tree::from_frontier(&frontier, Vec::new()).expect("tree from its frontier");
                for leaf in &kept {
                    pushed.push(*leaf);
                }
                for t in [&tree, &pushed] {
                    assert_eq!(t.size(), size);
                    for s in pruned.max(1)..=size {
                        assert_eq!(t.root_at(s), whole.root_at(s), "{pruned} {size} {s}");
                        assert_eq!(t.frontier_at(s), whole.frontier_at(s));
                        for index in pruned..s {
                            assert_eq!(
                                t.inclusion_proof(index, s),
                                whole.inclusion_proof(index, s),
                                "pruned {pruned}, leaf {index} of {s}"
                            );
                        }
                        for old in pruned..=s {
                            assert_eq!(
                                t.consistency_proof(old, s),
                                whole.consistency_proof(old, s),
                                "pruned {pruned}, {old} to {s}"
                            );
                        }
                    }
                    for index in pruned..size {
                        assert_eq!(t.leaf(index), whole.leaf(index));
                    }
                }
                // A leaf of the pruned prefix has no proof (but the last
                // one, a root of the frontier when the size is odd).
                if pruned >= 2 && size > pruned {
                    assert!(matches!(
                        tree.inclusion_proof(pruned - 2, size),
                        Err(ProofError::Pruned { .. })
                    ));
                }
                if size > 0 {
                    // Appending goes on as in the whole tree.
                    tree.push(leaf_hash(b"next"));
                    let mut more = leaves[..size as usize].to_vec();
                    more.push(leaf_hash(b"next"));
                    let next = Tree::from_leaf_hashes(more);
                    assert_eq!(tree.root_at(size + 1), next.root_at(size + 1));
                }
            }
        }
        let bad = Frontier {
            size: 3,
            nodes: vec![leaf_hash(b"one")],
        };
        assert!(Tree::from_frontier(&bad, Vec::new()).is_err());
    }

    #[test]
    fn push_matches_from_leaf_hashes_and_frontier() {
        let leaves: Vec<Digest> = (0u32..37).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let mut pushed = Tree::default();
        let mut frontier = Frontier::default();
        for (i, leaf) in leaves.iter().enumerate() {
            pushed.push(*leaf);
            frontier.push(*leaf);
            let whole = Tree::from_leaf_hashes(leaves[..=i].to_vec());
            let size = i as u64 + 1;
            assert_eq!(pushed.root_at(size), whole.root_at(size));
            assert_eq!(frontier.root(), whole.root_at(size).expect("root"));
            assert_eq!(pushed.frontier_at(size).expect("frontier"), frontier);
            assert!(frontier.is_well_formed());
        }
    }
}
