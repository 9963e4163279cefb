//! Proofs in a pack: generating them from the host's tree, and the binary
//! form of inclusion proofs.

use super::{ConsistencyProof, HostSection, InclusionProof, PackError};
use crate::hash::Digest;
use crate::merkle::{AuditPath, Tree};

/// Magic of the binary inclusion proof file.
pub(crate) const INCLUSION_MAGIC: &[u8; 8] = b"HCPINCL1";

/// Fills a section's proofs from `tree`, the host's whole log tree (leaves
/// from seq 0, at least up to the last checkpoint): each receipt is proven
/// against the first checkpoint of the section that covers it (receipts no
/// checkpoint covers get no proof, and verification reports them), and each
/// pair of successive checkpoints gets a consistency proof.
///
/// # Errors
///
/// The tree is smaller than a checkpoint, or a receipt's leaf in the tree
/// is not the receipt's hash.
pub fn prove(section: &mut HostSection, tree: &Tree) -> Result<(), PackError> {
    let fail = |e: &dyn std::fmt::Display| PackError::Write(format!("{}: {e}", section.host_id));
    let mut inclusion = Vec::with_capacity(section.receipts.len());
    for receipt in &section.receipts {
        let i = section
            .checkpoints
            .partition_point(|c| c.tree_size <= receipt.seq);
        let Some(cp) = section.checkpoints.get(i) else {
            continue;
        };
        inclusion.push(InclusionProof {
            seq: receipt.seq,
            tree_size: cp.tree_size,
            path: tree
                .inclusion_proof(receipt.seq, cp.tree_size)
                .map_err(|e| fail(&e))?,
        });
    }
    let mut consistency = Vec::new();
    for pair in section.checkpoints.windows(2) {
        let (from, to) = (pair[0].tree_size, pair[1].tree_size);
        consistency.push(ConsistencyProof {
            from,
            to,
            path: tree.consistency_proof(from, to).map_err(|e| fail(&e))?,
        });
    }
    section.inclusion = inclusion;
    section.consistency = consistency;
    Ok(())
}

/// The binary form of `proofs` (see the module doc of [`crate::pack`]).
pub(crate) fn encode_inclusion(proofs: &[InclusionProof]) -> Result<Vec<u8>, PackError> {
    let size: usize = proofs.iter().map(|p| 17 + 32 * p.path.len()).sum();
    let mut out = Vec::with_capacity(8 + size);
    out.extend_from_slice(INCLUSION_MAGIC);
    for p in proofs {
        let n = u8::try_from(p.path.len()).map_err(|_| {
            PackError::Write(format!("inclusion proof of seq {} is too long", p.seq))
        })?;
        out.extend_from_slice(&p.seq.to_be_bytes());
        out.extend_from_slice(&p.tree_size.to_be_bytes());
        out.push(n);
        for d in &p.path {
            out.extend_from_slice(&d.0);
        }
    }
    Ok(out)
}

/// An inclusion proof as stored in the proof file: its path is a slice of
/// the file, not a copy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InclusionRef<'a> {
    /// The receipt's seq.
    pub(crate) seq: u64,
    /// The checkpoint's tree size.
    pub(crate) tree_size: u64,
    /// Audit path, bottom-up.
    pub(crate) path: AuditPath<'a>,
}

impl<'a> InclusionRef<'a> {
    /// The proof, borrowed.
    pub(crate) fn of(proof: &'a InclusionProof) -> Self {
        Self {
            seq: proof.seq,
            tree_size: proof.tree_size,
            path: AuditPath::Digests(&proof.path),
        }
    }

    /// The proof, owned.
    pub(crate) fn to_owned_proof(self) -> InclusionProof {
        InclusionProof {
            seq: self.seq,
            tree_size: self.tree_size,
            path: match self.path {
                AuditPath::Digests(path) => path.to_vec(),
                AuditPath::Bytes(path) => path.iter().map(|h| Digest(*h)).collect(),
            },
        }
    }
}

/// Parses the binary form.
#[cfg(test)]
pub(crate) fn decode_inclusion(path: &str, bytes: &[u8]) -> Result<Vec<InclusionProof>, PackError> {
    Ok(decode_inclusion_refs(path, bytes)?
        .into_iter()
        .map(InclusionRef::to_owned_proof)
        .collect())
}

/// Parses the binary form, borrowing the paths from `bytes`.
pub(crate) fn decode_inclusion_refs<'a>(
    path: &str,
    bytes: &'a [u8],
) -> Result<Vec<InclusionRef<'a>>, PackError> {
    let bad = |reason: String| PackError::Content {
        path: path.to_owned(),
        line: None,
        reason,
    };
    let mut rest = bytes
        .strip_prefix(INCLUSION_MAGIC.as_slice())
        .ok_or_else(|| bad("does not start with HCPINCL1".into()))?;
    let mut proofs = Vec::new();
    while !rest.is_empty() {
        let record = proofs.len();
        let truncated = || bad(format!("record {record} is truncated"));
        let (head, tail) = rest.split_at_checked(17).ok_or_else(truncated)?;
        let seq = u64::from_be_bytes(head[0..8].try_into().map_err(|_| truncated())?);
        let tree_size = u64::from_be_bytes(head[8..16].try_into().map_err(|_| truncated())?);
        let n = usize::from(head[16]);
        let (hashes, tail) = tail.split_at_checked(32 * n).ok_or_else(truncated)?;
        let (hashes, _) = hashes.as_chunks::<32>();
        proofs.push(InclusionRef {
            seq,
            tree_size,
            path: AuditPath::Bytes(hashes),
        });
        rest = tail;
    }
    Ok(proofs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_round_trip_and_truncation() {
        let proofs = vec![
            InclusionProof {
                seq: 3,
                tree_size: 8,
                path: vec![Digest::of(b"a"), Digest::of(b"b")],
            },
            InclusionProof {
                seq: 0,
                tree_size: 1,
                path: vec![],
            },
        ];
        let bytes = encode_inclusion(&proofs).expect("encode");
        assert_eq!(bytes.len(), 8 + 17 + 64 + 17);
        assert_eq!(decode_inclusion("p", &bytes).expect("decode"), proofs);
        let err = decode_inclusion("p", &bytes[..bytes.len() - 20]).expect_err("cut");
        assert_eq!(err.to_string(), "p: record 0 is truncated");
        let err = decode_inclusion("p", &bytes[..bytes.len() - 5]).expect_err("cut");
        assert_eq!(err.to_string(), "p: record 1 is truncated");
        let err = decode_inclusion("p", b"NOTMAGIC").expect_err("magic");
        assert_eq!(err.to_string(), "p: does not start with HCPINCL1");
    }
}
