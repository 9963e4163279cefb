//! RFC 6962 / RFC 9162 Merkle tree hashing: leaves are hashed as
//! `SHA-256(0x00 || data)`, inner nodes as `SHA-256(0x01 || left || right)`,
//! so a leaf can never be passed off as an inner node or the reverse. The
//! empty tree's root is `SHA-256("")`.
//!
//! The leaves of a host's log tree are its receipts in `seq` order; a leaf's
//! data is the 32-byte receipt hash.
//!
//! Verification follows RFC 9162 §2.1.3.2 (inclusion) and §2.1.4.2
//! (consistency) step by step; generation ([`Tree`]) follows §2.1.3.1 and
//! §2.1.4.1.

mod batch;
mod frontier;
mod tree;

pub use batch::InclusionVerifier;
pub use frontier::Frontier;
pub use tree::Tree;

use crate::hash::Digest;
use sha2::{Digest as _, Sha256};

/// Why a proof was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// The leaf index is outside the tree.
    #[error("leaf index {index} is not below tree size {size}")]
    IndexOutOfRange {
        /// The leaf index.
        index: u64,
        /// The tree size.
        size: u64,
    },
    /// A proof was asked for a size the tree has not reached.
    #[error("size {size} is beyond the tree's {tree_size} leaves")]
    BeyondTree {
        /// The size asked for.
        size: u64,
        /// The tree's size.
        tree_size: u64,
    },
    /// The proof has the wrong number of hashes for the sizes involved.
    #[error("proof has {found} hashes, wrong for {what}")]
    WrongLength {
        /// Hashes in the proof.
        found: usize,
        /// The sizes the proof is for.
        what: String,
    },
    /// The root computed from the proof differs from the expected one.
    #[error("proof leads to root {computed}, not to {expected}")]
    RootMismatch {
        /// What the proof computes.
        computed: Digest,
        /// The signed root.
        expected: Digest,
    },
    /// A consistency proof does not reproduce the older tree's root.
    #[error("proof does not reproduce the older root: computes {computed}, expected {expected}")]
    OldRootMismatch {
        /// What the proof computes.
        computed: Digest,
        /// The older root.
        expected: Digest,
    },
    /// The newer tree is smaller than the older one.
    #[error("tree size {new} is smaller than {old}: not an extension")]
    Shrunk {
        /// The older size.
        old: u64,
        /// The newer size.
        new: u64,
    },
    /// The proof needs the hash of leaves the tree holds only as part of
    /// its pruned prefix's frontier ([`Tree::from_frontier`]).
    #[error("leaves {start} to {end} are pruned: only the frontier of the first {pruned} is kept")]
    Pruned {
        /// The first leaf needed.
        start: u64,
        /// One past the last.
        end: u64,
        /// The pruned prefix's size.
        pruned: u64,
    },
}

/// The root of the empty tree, `SHA-256("")`.
pub fn empty_root() -> Digest {
    Digest::of(b"")
}

/// `SHA-256(0x00 || data)`.
pub fn leaf_hash(data: &[u8]) -> Digest {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    Digest(h.finalize().into())
}

/// `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Digest, right: &Digest) -> Digest {
    node_hash_of(&left.0, &right.0)
}

fn node_hash_of(left: &[u8; 32], right: &[u8; 32]) -> Digest {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    Digest(h.finalize().into())
}

/// A hash of a proof: a [`Digest`], or 32 bytes of a binary proof file.
pub(crate) trait ProofHash {
    /// The 32 bytes.
    fn bytes(&self) -> &[u8; 32];
}

impl ProofHash for Digest {
    fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl ProofHash for [u8; 32] {
    fn bytes(&self) -> &[u8; 32] {
        self
    }
}

/// An inclusion proof's audit path, parsed or as bytes of a proof file.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AuditPath<'a> {
    /// Parsed digests.
    Digests(&'a [Digest]),
    /// 32-byte hashes, as stored.
    Bytes(&'a [[u8; 32]]),
}

impl AuditPath<'_> {
    /// How many hashes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Digests(p) => p.len(),
            Self::Bytes(p) => p.len(),
        }
    }

    /// The hashes, copied (for the rare paths that need them owned).
    pub(crate) fn to_digests(self) -> Vec<Digest> {
        match self {
            Self::Digests(p) => p.to_vec(),
            Self::Bytes(p) => p.iter().map(|b| Digest(*b)).collect(),
        }
    }
}

/// The root of a tree whose leaf hashes are `leaves` (RFC 9162 MTH).
pub fn root(leaves: &[Digest]) -> Digest {
    let mut frontier = Frontier::default();
    for leaf in leaves {
        frontier.push(*leaf);
    }
    frontier.root()
}

/// Verifies that `leaf_data` is leaf `index` of the tree of `size` leaves
/// whose root is `root` (RFC 9162 §2.1.3.2). The leaf is hashed here, with
/// the leaf prefix: an inner node's hash passed as leaf data fails.
///
/// # Errors
///
/// Why the proof is refused.
pub fn verify_inclusion(
    leaf_data: &[u8],
    index: u64,
    size: u64,
    proof: &[Digest],
    root: &Digest,
) -> Result<(), ProofError> {
    verify_inclusion_of_leaf_hash(&leaf_hash(leaf_data), index, size, proof, root)
}

/// As [`verify_inclusion`], for a leaf hash computed by [`leaf_hash`].
///
/// # Errors
///
/// Why the proof is refused.
pub fn verify_inclusion_of_leaf_hash(
    leaf: &Digest,
    index: u64,
    size: u64,
    proof: &[Digest],
    root: &Digest,
) -> Result<(), ProofError> {
    inclusion_of_leaf_hash(leaf, index, size, proof, root)
}

/// One step of RFC 9162's inclusion check (section 2.1.3.2): hashes `r`
/// with the proof's next hash `p` on the side position `f` of last index
/// `s` says, and climbs `f` and `s` to the parent level.
#[inline]
fn climb(f: &mut u64, s: &mut u64, r: &Digest, p: &[u8; 32]) -> Digest {
    let r = if *f & 1 == 1 || *f == *s {
        let r = node_hash_of(p, &r.0);
        while *f & 1 == 0 && *f != 0 {
            *f >>= 1;
            *s >>= 1;
        }
        r
    } else {
        node_hash_of(&r.0, p)
    };
    *f >>= 1;
    *s >>= 1;
    r
}

fn inclusion_of_leaf_hash<H: ProofHash>(
    leaf: &Digest,
    index: u64,
    size: u64,
    proof: &[H],
    root: &Digest,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let wrong_length = || ProofError::WrongLength {
        found: proof.len(),
        what: format!("leaf {index} of a tree of {size}"),
    };
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return Err(wrong_length());
        }
        r = climb(&mut f, &mut s, &r, p.bytes());
    }
    if s != 0 {
        return Err(wrong_length());
    }
    if r != *root {
        return Err(ProofError::RootMismatch {
            computed: r,
            expected: *root,
        });
    }
    Ok(())
}

/// The number of hashes in the inclusion proof of leaf `index` in the tree
/// of `size` leaves (the length of RFC 9162's PATH); `None` when `index` is
/// not below `size`.
pub fn inclusion_proof_len(index: u64, size: u64) -> Option<usize> {
    if index >= size {
        return None;
    }
    let (mut m, mut n, mut len) = (index, size, 0);
    while n > 1 {
        let k = tree::split(n);
        if m < k {
            n = k;
        } else {
            m -= k;
            n -= k;
        }
        len += 1;
    }
    Some(len)
}

/// The leaves under the inner node at `height` above leaf `index` in the
/// tree of `size` leaves: the aligned block of `2^height` leaves that holds
/// `index`, cut at `size` (so the rightmost node of a level may cover fewer).
/// `None` when `index` is not below `size` or `height` is 64 or more.
pub fn subtree_leaves(height: u32, index: u64, size: u64) -> Option<std::ops::Range<u64>> {
    if index >= size {
        return None;
    }
    let first = index.checked_shr(height)?.checked_shl(height)?;
    let width = 1u64.checked_shl(height)?;
    Some(first..first.saturating_add(width).min(size))
}

/// Verifies that `proof` leads from `node`, the root of the leaves
/// [`subtree_leaves`]`(height, index, size)`, to `root`, the root of the
/// tree of `size` leaves. The tree's nodes at `height` (the root of each
/// such block, left to right) are the leaves of a tree with the same root,
/// in which that node is leaf `index >> height` of `((size - 1) >> height) +
/// 1`: this is [`verify_inclusion_of_leaf_hash`] there. A proof of leaf
/// `index` from which the `k` lowest hashes are dropped is such a proof, for
/// the lowest `height` whose proof has that many hashes.
///
/// # Errors
///
/// Why the proof is refused.
pub fn verify_inclusion_of_subtree(
    node: &Digest,
    height: u32,
    index: u64,
    size: u64,
    proof: &[Digest],
    root: &Digest,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let at = |v: u64| v.checked_shr(height).unwrap_or(0);
    verify_inclusion_of_leaf_hash(node, at(index), at(size - 1) + 1, proof, root)
}

/// Verifies that the tree of `old_size` leaves with root `old_root` is a
/// prefix of the tree of `new_size` leaves with root `new_root` (RFC 9162
/// §2.1.4.2; equal sizes need an empty proof and equal roots, the empty tree
/// is a prefix of every tree).
///
/// # Errors
///
/// Why the proof is refused.
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Digest,
    new_root: &Digest,
    proof: &[Digest],
) -> Result<(), ProofError> {
    let wrong_length = || ProofError::WrongLength {
        found: proof.len(),
        what: format!("sizes {old_size} to {new_size}"),
    };
    if new_size < old_size {
        return Err(ProofError::Shrunk {
            old: old_size,
            new: new_size,
        });
    }
    if old_size == new_size || old_size == 0 {
        if !proof.is_empty() {
            return Err(wrong_length());
        }
        if old_size == new_size && old_root != new_root {
            return Err(ProofError::RootMismatch {
                computed: *old_root,
                expected: *new_root,
            });
        }
        return Ok(());
    }
    if proof.is_empty() {
        return Err(wrong_length());
    }
    let mut path = proof.iter();
    let seed = if old_size.is_power_of_two() {
        *old_root
    } else {
        *path.next().ok_or_else(wrong_length)?
    };
    let (mut f, mut s) = (old_size - 1, new_size - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (seed, seed);
    for c in path {
        if s == 0 {
            return Err(wrong_length());
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if f & 1 == 0 {
                while f & 1 == 0 && f != 0 {
                    f >>= 1;
                    s >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(wrong_length());
    }
    if fr != *old_root {
        return Err(ProofError::OldRootMismatch {
            computed: fr,
            expected: *old_root,
        });
    }
    if sr != *new_root {
        return Err(ProofError::RootMismatch {
            computed: sr,
            expected: *new_root,
        });
    }
    Ok(())
}
