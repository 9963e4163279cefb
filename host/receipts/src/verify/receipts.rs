//! The checks of a section's receipts, each on its own and in parallel: its
//! record, its hash, its signature (or why it needs one), and its inclusion
//! proof against the checkpoint that covers it.

use super::Check;
use super::section::{Link, Record, Section};
use crate::checkpoint::Checkpoint;
use crate::hash::Digest;
use crate::merkle::{self, AuditPath, InclusionVerifier, ProofError};
use crate::pack::InclusionRef;
use crate::receipt::Verdict;
use crate::view::ReceiptView;
use std::collections::{HashMap, HashSet};

/// The highest inner node a too-short inclusion proof is checked against
/// (see `Section::inner_node_as_leaf`): at most `2^6` receipts are hashed to
/// find it, so a pack of such proofs costs little more than a good one.
const MAX_INNER_HEIGHT: u32 = 6;

/// Receipt `receipt`'s inclusion proof against checkpoint `checkpoint` with
/// the wrong number of hashes, named once every receipt's hash is known.
struct WrongLength<'a> {
    receipt: usize,
    checkpoint: usize,
    path: AuditPath<'a>,
    message: String,
}

/// What one run of contiguous receipts (one thread) keeps: the inclusion
/// verifier of the current checkpoint, and the problems it found.
#[derive(Default)]
struct Run<'a> {
    verifier: Option<InclusionVerifier>,
    found: Vec<(usize, Check, String)>,
    wrong_length: Vec<WrongLength<'a>>,
}

/// Where each receipt's inclusion proof and each proof's checkpoint are.
struct Proofs {
    /// Proof `i` is receipt `i`'s (as a pack is written): no map by seq.
    aligned: bool,
    /// When not aligned: the proof of each seq.
    proof_of: HashMap<u64, usize>,
    /// The first checkpoint of each tree size.
    checkpoint_of: HashMap<u64, usize>,
    /// The largest tree size of the section's checkpoints.
    covered: u64,
}

impl<'a, R: Record> Section<'a, '_, R> {
    /// Hash, signature and inclusion proof of every receipt, in parallel;
    /// returns the receipts with their hashes.
    pub(super) fn receipts(&mut self) -> Vec<Link<'a, R>> {
        let proofs = self.proofs();
        let this = &*self;
        let (links, runs) =
            crate::par::map_init(self.s.receipts, Run::default, |run, i, receipt| {
                this.receipt(&proofs, run, i, receipt)
            });
        self.report.signed_receipts += links.iter().filter(|l| l.signed).count();
        for run in runs {
            for (i, check, message) in run.found {
                self.on_receipt(check, i, message);
            }
            for w in run.wrong_length {
                let message = self
                    .inner_node_as_leaf(&links, &w)
                    .unwrap_or_else(|| w.message.clone());
                self.on_receipt(Check::Inclusion, w.receipt, message);
            }
        }
        if !proofs.aligned {
            self.proofs_without_receipt(&links);
        }
        links
    }

    /// Indexes the section's proofs and checkpoints; a seq with two proofs
    /// is a failure.
    fn proofs(&mut self) -> Proofs {
        let s = self.s;
        // In a pack as written, proof i is receipt i's and seqs increase:
        // then each receipt has its proof and each proof its receipt, and
        // no map by seq is needed.
        let mut previous = None;
        let aligned = s.inclusion.len() == s.receipts.len()
            && s.inclusion.iter().zip(s.receipts).all(|(proof, r)| {
                let seq = r.view().seq;
                let increasing = previous.is_none_or(|p| p < seq);
                previous = Some(seq);
                increasing && proof.seq == seq
            });
        let mut proof_of: HashMap<u64, usize> = HashMap::new();
        if !aligned {
            proof_of.reserve(s.inclusion.len());
            for (p, proof) in s.inclusion.iter().enumerate() {
                if proof_of.insert(proof.seq, p).is_some() {
                    self.on_host(
                        Check::Inclusion,
                        format!("two inclusion proofs for seq {}", proof.seq),
                    );
                }
            }
        }
        let mut checkpoint_of: HashMap<u64, usize> = HashMap::new();
        for (c, cp) in s.checkpoints.iter().enumerate() {
            checkpoint_of.entry(cp.tree_size).or_insert(c);
        }
        let covered = s.checkpoints.iter().map(|c| c.tree_size).max().unwrap_or(0);
        Proofs {
            aligned,
            proof_of,
            checkpoint_of,
            covered,
        }
    }

    /// The checks of receipt `i`, in the order they are reported: its
    /// record, its hash, its signature, its inclusion proof.
    fn receipt(&self, proofs: &Proofs, run: &mut Run<'a>, i: usize, receipt: &'a R) -> Link<'a, R> {
        let r = receipt.view();
        let mut problems: Vec<(Check, String)> = Vec::new();
        if let Err(e) = r.check() {
            problems.push((Check::Record, e.to_string()));
        }
        let hash = match r.hash() {
            Ok(h) => h,
            Err(e) => {
                problems.push((Check::Chain, e.to_string()));
                Digest::default()
            }
        };
        if let Some(problem) = self.signature_problem(&r) {
            problems.push((Check::Signature, problem));
        }
        let proof = if proofs.aligned {
            self.s.inclusion.get(i)
        } else {
            proofs.proof_of.get(&r.seq).map(|&p| &self.s.inclusion[p])
        };
        if let Some(problem) = self.inclusion_problem(proofs, run, i, &r, &hash, proof) {
            problems.push(problem);
        }
        run.found.extend(
            problems
                .into_iter()
                .map(|(check, message)| (i, check, message)),
        );
        Link {
            hash,
            prev_hash: r.prev_hash,
            seq: r.seq,
            lamport: r.lamport,
            signed: r.is_signed(),
            receipt,
        }
    }

    /// Why the receipt's signature is refused, or why it needs one it does
    /// not carry (the signing policy, when given).
    fn signature_problem(&self, r: &ReceiptView<'_>) -> Option<String> {
        match r.key_id {
            Some(id) if r.is_signed() => self
                .key(id)
                .and_then(|k| r.verify_signature(k))
                .err()
                .map(|e| e.to_string()),
            _ => {
                let policy = self.options.signing.as_ref()?;
                if !policy.must_sign(r.verdict, r.risk) {
                    return None;
                }
                let what = if r.verdict == Verdict::Deny {
                    "a DENY"
                } else {
                    "a receipt"
                };
                Some(format!(
                    "{what} at risk {} is unsigned; the signing policy signs every receipt at {} or above{}",
                    r.risk,
                    policy.sign_from_risk,
                    if policy.sign_denies {
                        " and every DENY"
                    } else {
                        ""
                    }
                ))
            }
        }
    }

    /// What is wrong with receipt `i`'s inclusion proof `proof` (or its
    /// lack of one). A proof of the wrong length is kept in `run` instead,
    /// to be named once every hash is known.
    fn inclusion_problem(
        &self,
        proofs: &Proofs,
        run: &mut Run<'a>,
        i: usize,
        r: &ReceiptView<'_>,
        hash: &Digest,
        proof: Option<&'a InclusionRef<'a>>,
    ) -> Option<(Check, String)> {
        let covered = proofs.covered;
        let Some(proof) = proof else {
            return Some(if covered > r.seq {
                (
                    Check::Inclusion,
                    format!(
                        "no inclusion proof, though a checkpoint of size {covered} covers seq {}",
                        r.seq
                    ),
                )
            } else if self.s.checkpoints.is_empty() {
                (
                    Check::Coverage,
                    "not covered by any checkpoint: the pack has no checkpoint of this host"
                        .to_owned(),
                )
            } else {
                (
                    Check::Coverage,
                    format!(
                        "not covered by any checkpoint in the pack (the largest covers {covered} receipts)"
                    ),
                )
            });
        };
        let Some(&c) = proofs.checkpoint_of.get(&proof.tree_size) else {
            return Some((
                Check::Inclusion,
                format!(
                    "inclusion proof names tree size {}, which no checkpoint of this host in the pack has",
                    proof.tree_size
                ),
            ));
        };
        let cp: &Checkpoint = &self.s.checkpoints[c];
        // Receipts come in order: keep the current checkpoint's verifier.
        let verifier = &mut run.verifier;
        let v = match verifier {
            Some(v) if v.size() == cp.tree_size => v,
            _ => verifier.insert(InclusionVerifier::new(cp.tree_size, cp.root_hash)),
        };
        let e = v.verify_path(&hash.0, r.seq, proof.path).err()?;
        let message = format!(
            "inclusion proof against checkpoint {c} (size {}) fails: {e}",
            cp.tree_size
        );
        if matches!(e, ProofError::WrongLength { .. }) {
            run.wrong_length.push(WrongLength {
                receipt: i,
                checkpoint: c,
                path: proof.path,
                message,
            });
            None
        } else {
            Some((Check::Inclusion, message))
        }
    }

    /// Proofs of seqs the section does not hold.
    fn proofs_without_receipt(&mut self, links: &[Link<'a, R>]) {
        let seqs: HashSet<u64> = links.iter().map(|l| l.seq).collect();
        for proof in self.s.inclusion {
            if !seqs.contains(&proof.seq) {
                self.on_host(
                    Check::Inclusion,
                    format!(
                        "inclusion proof for seq {}, which the pack does not hold",
                        proof.seq
                    ),
                );
            }
        }
    }

    /// When a receipt's inclusion proof is too short because it is the path
    /// of an inner node above the receipt's leaf (the proof with its lowest
    /// hashes dropped), passing that node off as the receipt's leaf: what is
    /// wrong, in words. The inner node is recomputed from the section's
    /// receipts, up to [`MAX_INNER_HEIGHT`]; `None` when the proof is not
    /// such a path, or the receipts under the node are not all in the
    /// section.
    fn inner_node_as_leaf(&self, links: &[Link<'_, R>], w: &WrongLength<'_>) -> Option<String> {
        let seq = links[w.receipt].seq;
        let cp = &self.s.checkpoints[w.checkpoint];
        let size = cp.tree_size;
        let found = w.path.len();
        let needed = merkle::inclusion_proof_len(seq, size)?;
        if found >= needed {
            return None;
        }
        // The lowest height whose inner node's proof has `found` hashes.
        let height = (1..=MAX_INNER_HEIGHT).find(|&h| {
            let width = (size - 1).checked_shr(h).unwrap_or(0) + 1;
            merkle::inclusion_proof_len(seq.checked_shr(h).unwrap_or(0), width) == Some(found)
        })?;
        let under = merkle::subtree_leaves(height, seq, size)?;
        let leaves = under
            .clone()
            .map(|q| Some(merkle::leaf_hash(&links[self.position(q)?].hash.0)))
            .collect::<Option<Vec<Digest>>>()?;
        let node = merkle::root(&leaves);
        merkle::verify_inclusion_of_subtree(
            &node,
            height,
            seq,
            size,
            &w.path.to_digests(),
            &cp.root_hash,
        )
        .ok()?;
        Some(format!(
            "inclusion proof against checkpoint {} (size {size}) fails: an inner node passed off as the receipt's leaf: the proof leads to the signed root from the inner node over seqs {} to {} (height {height}), not from leaf {seq}; it has {found} hashes, leaf {seq} of a tree of {size} needs {needed}",
            w.checkpoint,
            under.start,
            under.end - 1
        ))
    }
}
