//! A whole tree in memory, every perfect subtree's hash cached, to generate
//! inclusion and consistency proofs for any size up to the tree's.

use super::{Frontier, ProofError, empty_root, leaf_hash, node_hash};
use crate::hash::Digest;

/// A tree of leaf hashes with every complete aligned subtree hash cached
/// (about two hashes per leaf). Proofs are generated against any prefix.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// `levels[h][i]` is the hash of leaves `[i·2^h, (i+1)·2^h)`.
    levels: Vec<Vec<Digest>>,
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
        Self { levels }
    }

    /// A tree whose leaves hash `data` (e.g. receipt hashes).
    pub fn from_data<'a>(data: impl IntoIterator<Item = &'a [u8]>) -> Self {
        Self::from_leaf_hashes(data.into_iter().map(leaf_hash).collect())
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64)
    }

    /// Appends a leaf hash (recomputing the cached nodes it completes).
    pub fn push(&mut self, leaf: Digest) {
        if self.levels.is_empty() {
            self.levels.push(Vec::new());
        }
        self.levels[0].push(leaf);
        let mut h = 0;
        while self.levels[h].len().is_multiple_of(2) {
            let n = self.levels[h].len();
            let parent = node_hash(&self.levels[h][n - 2], &self.levels[h][n - 1]);
            if self.levels.len() == h + 1 {
                self.levels.push(Vec::new());
            }
            self.levels[h + 1].push(parent);
            h += 1;
        }
    }

    /// The leaf hash at `index`.
    pub fn leaf(&self, index: u64) -> Option<Digest> {
        self.levels
            .first()?
            .get(usize::try_from(index).ok()?)
            .copied()
    }

    /// The root of the first `size` leaves.
    ///
    /// # Errors
    ///
    /// `size` is larger than the tree.
    pub fn root_at(&self, size: u64) -> Result<Digest, ProofError> {
        self.check_size(size)?;
        Ok(if size == 0 {
            empty_root()
        } else {
            self.mth(0, size)
        })
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
                nodes.push(self.mth(start, start + width));
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
                proof.push(self.mth(start + k, end));
                end = start + k;
            } else {
                proof.push(self.mth(start, start + k));
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
                    proof.push(self.mth(start, end));
                }
                break;
            }
            let k = split(n);
            if m <= k {
                proof.push(self.mth(start + k, end));
                end = start + k;
            } else {
                proof.push(self.mth(start, start + k));
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
    fn mth(&self, start: u64, end: u64) -> Digest {
        let n = end - start;
        if n.is_power_of_two() && start.is_multiple_of(n) {
            let h = n.trailing_zeros() as usize;
            if let Some(d) = self
                .levels
                .get(h)
                .and_then(|l| l.get(usize::try_from(start >> h).ok()?))
            {
                return *d;
            }
        }
        let k = split(n);
        node_hash(&self.mth(start, start + k), &self.mth(start + k, end))
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
