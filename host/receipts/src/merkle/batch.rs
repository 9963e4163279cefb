//! Verifying many inclusion proofs against one tree, in leaf order, without
//! rehashing the path nodes they share.

use super::{AuditPath, ProofError, ProofHash, climb, inclusion_of_leaf_hash, leaf_hash};
use crate::hash::Digest;

/// The state of RFC 9162's inclusion verification after one proof hash:
/// `r` is the hash of the node that `(f, s)` designate.
#[derive(Debug, Clone, Copy)]
struct Step {
    f: u64,
    s: u64,
    r: Digest,
    consumed: usize,
}

/// Verifies inclusion proofs against the tree of `size` leaves with root
/// `root`, remembering the last accepted proof's path. A proof whose path
/// reaches a node of that path with the same hash, and whose remaining
/// hashes are the same as the accepted proof's, is accepted there: from that
/// state RFC 9162's algorithm would do exactly what it did for the accepted
/// proof. Anything else is verified in full. Consecutive leaves share all but
/// about two levels, so this costs about two hashes per leaf instead of
/// log2(size).
#[derive(Debug, Clone)]
pub struct InclusionVerifier {
    size: u64,
    root: Digest,
    trace: Vec<Step>,
    proof: Vec<Digest>,
    steps: Vec<Step>,
}

impl InclusionVerifier {
    /// A verifier for the tree of `size` leaves whose root is `root`.
    pub fn new(size: u64, root: Digest) -> Self {
        Self {
            size,
            root,
            trace: Vec::new(),
            proof: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// The tree size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// As [`super::verify_inclusion`] against this verifier's tree.
    ///
    /// # Errors
    ///
    /// Why the proof is refused (the same error as the one-off check).
    pub fn verify(
        &mut self,
        leaf_data: &[u8],
        index: u64,
        proof: &[Digest],
    ) -> Result<(), ProofError> {
        self.verify_hashes(leaf_data, index, proof)
    }

    /// As [`InclusionVerifier::verify`], for either form of a path.
    pub(crate) fn verify_path(
        &mut self,
        leaf_data: &[u8],
        index: u64,
        proof: AuditPath<'_>,
    ) -> Result<(), ProofError> {
        match proof {
            AuditPath::Digests(path) => self.verify_hashes(leaf_data, index, path),
            AuditPath::Bytes(path) => self.verify_hashes(leaf_data, index, path),
        }
    }

    fn verify_hashes<H: ProofHash>(
        &mut self,
        leaf_data: &[u8],
        index: u64,
        proof: &[H],
    ) -> Result<(), ProofError> {
        let leaf = leaf_hash(leaf_data);
        if index >= self.size {
            return Err(ProofError::IndexOutOfRange {
                index,
                size: self.size,
            });
        }
        self.steps.clear();
        let (mut f, mut s, mut r) = (index, self.size - 1, leaf);
        for (i, p) in proof.iter().enumerate() {
            if s == 0 {
                break;
            }
            r = climb(&mut f, &mut s, &r, p.bytes());
            let consumed = i + 1;
            self.steps.push(Step { f, s, r, consumed });
            if let Some(j) = self.trace.iter().position(|t| t.f == f && t.s == s) {
                let known = self.trace[j];
                if known.r == r && same_hashes(&proof[consumed..], &self.proof[known.consumed..]) {
                    // Same node, same hash, same way up: accepted before.
                    let shift = consumed as isize - known.consumed as isize;
                    let upper: Vec<Step> = self.trace[j + 1..]
                        .iter()
                        .map(|t| Step {
                            consumed: (t.consumed as isize + shift) as usize,
                            ..*t
                        })
                        .collect();
                    self.steps.extend(upper);
                    std::mem::swap(&mut self.trace, &mut self.steps);
                    self.keep(proof);
                    return Ok(());
                }
            }
        }
        // No shortcut: the full check decides, and gives the precise error.
        inclusion_of_leaf_hash(&leaf, index, self.size, proof, &self.root)?;
        std::mem::swap(&mut self.trace, &mut self.steps);
        self.keep(proof);
        Ok(())
    }

    /// Remembers the accepted proof.
    fn keep<H: ProofHash>(&mut self, proof: &[H]) {
        self.proof.clear();
        self.proof.extend(proof.iter().map(|h| Digest(*h.bytes())));
    }
}

fn same_hashes<H: ProofHash>(a: &[H], b: &[Digest]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.bytes() == &y.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::Tree;

    #[test]
    fn agrees_with_the_one_off_check_on_good_and_bad_proofs() {
        for size in [1u64, 2, 3, 5, 8, 13, 64, 100] {
            let tree = Tree::from_data(
                (0..size)
                    .map(|i| i.to_le_bytes().to_vec())
                    .collect::<Vec<_>>()
                    .iter()
                    .map(|v| v.as_slice()),
            );
            let root = tree.root_at(size).expect("root");
            let mut v = InclusionVerifier::new(size, root);
            for i in 0..size {
                let data = i.to_le_bytes();
                let proof = tree.inclusion_proof(i, size).expect("proof");
                assert_eq!(v.verify(&data, i, &proof), Ok(()), "size {size} leaf {i}");
                // A wrong leaf, a tampered upper hash, a wrong index: refused,
                // and the next good proof still passes.
                assert!(v.verify(b"other", i, &proof).is_err());
                if let Some(last) = proof.len().checked_sub(1) {
                    let mut bad = proof.clone();
                    bad[last].0[0] ^= 1;
                    assert_eq!(
                        v.verify(&data, i, &bad),
                        super::super::verify_inclusion(&data, i, size, &bad, &root)
                    );
                    assert!(v.verify(&data, i, &bad).is_err());
                }
                if size > 1 {
                    assert!(v.verify(&data, (i + 1) % size, &proof).is_err());
                }
                assert_eq!(v.verify(&data, i, &proof), Ok(()));
            }
        }
    }
}
