//! The checks of one host section, and the DAG across sections.

use super::{Check, CheckpointRef, Failure, ReceiptRef, Report, VerifyOptions};
use crate::checkpoint::{self, Checkpoint, CheckpointError};
use crate::dag::{self, ChainStart, Linked};
use crate::hash::Digest;
use crate::keys::{KeyId, PublicKey, SignatureFailure};
use crate::merkle::{self, AuditPath, InclusionVerifier, ProofError, Tree};
use crate::pack::{ConsistencyProof, InclusionRef, Pack, Read, StoredReceipt};
use crate::receipt::{Receipt, Verdict};
use crate::view::{Parents, ReceiptView};
use std::collections::{HashMap, HashSet};

type Keys<'a> = HashMap<&'a str, &'a PublicKey>;

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

/// A receipt as verification holds it.
pub(super) trait Record: Sync {
    fn view(&self) -> ReceiptView<'_>;
}

impl Record for Receipt {
    fn view(&self) -> ReceiptView<'_> {
        ReceiptView::of(self)
    }
}

impl Record for StoredReceipt<'_> {
    fn view(&self) -> ReceiptView<'_> {
        StoredReceipt::view(self)
    }
}

/// A host section, borrowed from a [`Pack`] or from a pack as read.
#[derive(Debug)]
struct SectionView<'a, R> {
    host_id: &'a str,
    keys: &'a [KeyId],
    first_seq: u64,
    prev_hash: Option<Digest>,
    prev_checkpoint: Option<Digest>,
    receipts: &'a [R],
    checkpoints: &'a [Checkpoint],
    inclusion: &'a [InclusionRef<'a>],
    consistency: &'a [ConsistencyProof],
}

/// A receipt with its hash and what the chain and DAG checks read most,
/// side by side for them to read in order.
struct Link<'a, R> {
    hash: Digest,
    prev_hash: Option<Digest>,
    seq: u64,
    lamport: u64,
    signed: bool,
    receipt: &'a R,
}

impl<R: Record> Linked for Link<'_, R> {
    fn hash(&self) -> Digest {
        self.hash
    }
    fn host_id(&self) -> &str {
        self.receipt.view().host_id
    }
    fn seq(&self) -> u64 {
        self.seq
    }
    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn prev_hash(&self) -> Option<Digest> {
        self.prev_hash
    }
    fn parents(&self) -> Parents<'_> {
        self.receipt.view().parents
    }
}

pub(super) fn verify_pack(pack: &Pack, options: &VerifyOptions) -> Report {
    let inclusion: Vec<Vec<InclusionRef<'_>>> = pack
        .hosts
        .iter()
        .map(|s| s.inclusion.iter().map(InclusionRef::of).collect())
        .collect();
    let sections: Vec<SectionView<'_, Receipt>> = pack
        .hosts
        .iter()
        .zip(&inclusion)
        .map(|(s, inclusion)| SectionView {
            host_id: &s.host_id,
            keys: &s.keys,
            first_seq: s.first_seq,
            prev_hash: s.prev_hash,
            prev_checkpoint: s.prev_checkpoint,
            receipts: &s.receipts,
            checkpoints: &s.checkpoints,
            inclusion,
            consistency: &s.consistency,
        })
        .collect();
    verify(
        &sections,
        &pack.public_keys,
        &pack.external_parents,
        options,
    )
}

pub(super) fn verify_read(read: &Read<'_, StoredReceipt<'_>>, options: &VerifyOptions) -> Report {
    let sections: Vec<SectionView<'_, StoredReceipt<'_>>> = read
        .hosts
        .iter()
        .map(|s| SectionView {
            host_id: &s.host_id,
            keys: &s.keys,
            first_seq: s.first_seq,
            prev_hash: s.prev_hash,
            prev_checkpoint: s.prev_checkpoint,
            receipts: &s.receipts,
            checkpoints: &s.checkpoints,
            inclusion: &s.inclusion,
            consistency: &s.consistency,
        })
        .collect();
    verify(
        &sections,
        &read.public_keys,
        &read.external_parents,
        options,
    )
}

fn verify<R: Record>(
    sections: &[SectionView<'_, R>],
    public_keys: &[PublicKey],
    external_parents: &[Digest],
    options: &VerifyOptions,
) -> Report {
    let mut report = Report {
        hosts: sections.len(),
        ..Report::default()
    };
    let keys: Keys<'_> = public_keys
        .iter()
        .map(|k| (k.key_id().as_str(), k))
        .collect();
    if let Some(trusted) = &options.trusted_keys {
        for key in public_keys {
            if !trusted.contains(key) {
                report.failures.push(failure(
                    Check::Key,
                    None,
                    None,
                    format!(
                        "key {} ({key}) is not one of the trusted keys",
                        key.key_id()
                    ),
                ));
            }
        }
    }
    let mut nodes = Vec::new();
    let mut starts = Vec::with_capacity(sections.len());
    for section in sections {
        let links = Section::new(section, &keys, options, &mut report).run();
        starts.push(nodes.len());
        if nodes.is_empty() {
            nodes = links;
        } else {
            nodes.extend(links);
        }
    }
    let external: HashSet<Digest> = external_parents.iter().copied().collect();
    for issue in dag::graph(&nodes, &external) {
        let s = starts.partition_point(|&start| start <= issue.node) - 1;
        let section = &sections[s];
        report.failures.push(failure(
            Check::Dag,
            Some(receipt_ref(section, issue.node - starts[s])),
            None,
            issue.problem.to_string(),
        ));
    }
    report
}

fn failure(
    check: Check,
    receipt: Option<ReceiptRef>,
    checkpoint: Option<CheckpointRef>,
    message: String,
) -> Failure {
    Failure {
        check,
        receipt,
        checkpoint,
        message,
    }
}

fn receipt_ref<R: Record>(section: &SectionView<'_, R>, index: usize) -> ReceiptRef {
    ReceiptRef {
        receipt_id: section.receipts[index].view().receipt_id.to_owned(),
        host_id: section.host_id.to_owned(),
        index,
    }
}

struct Section<'a, 'r, R> {
    s: &'a SectionView<'a, R>,
    all_keys: &'a Keys<'a>,
    host_keys: Keys<'a>,
    options: &'a VerifyOptions,
    report: &'r mut Report,
}

impl<'a, 'r, R: Record> Section<'a, 'r, R> {
    fn new(
        s: &'a SectionView<'a, R>,
        all_keys: &'a Keys<'a>,
        options: &'a VerifyOptions,
        report: &'r mut Report,
    ) -> Self {
        let mut host_keys = HashMap::new();
        for id in s.keys {
            match all_keys.get(id.as_str()) {
                Some(key) => {
                    host_keys.insert(id.as_str(), *key);
                }
                None => report.failures.push(failure(
                    Check::Key,
                    None,
                    None,
                    format!(
                        "host {} names key {id}, which the pack does not hold",
                        s.host_id
                    ),
                )),
            }
        }
        Self {
            s,
            all_keys,
            host_keys,
            options,
            report,
        }
    }

    fn key(&self, id: &str) -> Result<&'a PublicKey, SignatureFailure> {
        match (self.host_keys.get(id), self.all_keys.contains_key(id)) {
            (Some(key), _) => Ok(*key),
            (None, true) => Err(SignatureFailure::ForeignKey {
                key: KeyId::from_checked(id),
                host: self.s.host_id.to_owned(),
            }),
            (None, false) => Err(SignatureFailure::UnknownKey(KeyId::from_checked(id))),
        }
    }

    fn on_receipt(&mut self, check: Check, index: usize, message: String) {
        let r = receipt_ref(self.s, index);
        self.report
            .failures
            .push(failure(check, Some(r), None, message));
    }

    fn on_checkpoint(&mut self, check: Check, index: usize, message: String) {
        let c = CheckpointRef {
            host_id: self.s.host_id.to_owned(),
            index,
            tree_size: self.s.checkpoints[index].tree_size,
        };
        self.report
            .failures
            .push(failure(check, None, Some(c), message));
    }

    fn on_host(&mut self, check: Check, message: String) {
        let message = format!("host {}: {message}", self.s.host_id);
        self.report
            .failures
            .push(failure(check, None, None, message));
    }

    /// Runs every check of the section; returns the receipts with their hashes.
    fn run(mut self) -> Vec<Link<'a, R>> {
        let s = self.s;
        self.report.receipts += s.receipts.len();
        self.report.checkpoints += s.checkpoints.len();
        let nodes = self.receipts();
        let start = ChainStart {
            host_id: s.host_id.to_owned(),
            first_seq: s.first_seq,
            prev_hash: s.prev_hash,
        };
        for issue in dag::chain(&start, &nodes) {
            self.on_receipt(Check::Chain, issue.node, issue.problem.to_string());
        }
        self.checkpoints(&nodes);
        self.known_checkpoints(&nodes);
        nodes
    }

    /// Hash, signature and inclusion proof of every receipt, in parallel.
    fn receipts(&mut self) -> Vec<Link<'a, R>> {
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
        let this = &*self;
        // Each run keeps its inclusion verifier and the problems it found.
        type Found = Vec<(usize, Check, String)>;
        let state = || {
            (
                None::<InclusionVerifier>,
                Found::new(),
                Vec::<WrongLength<'a>>::new(),
            )
        };
        let (links, runs) = crate::par::map_init(
            s.receipts,
            state,
            |(verifier, found, wrong_length), i, receipt| {
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
                match r.key_id {
                    Some(id) if r.is_signed() => {
                        if let Err(e) = this.key(id).and_then(|k| r.verify_signature(k)) {
                            problems.push((Check::Signature, e.to_string()));
                        }
                    }
                    _ => {
                        if let Some(policy) = &this.options.signing
                            && policy.must_sign(r.verdict, r.risk)
                        {
                            let what = if r.verdict == Verdict::Deny {
                                "a DENY"
                            } else {
                                "a receipt"
                            };
                            problems.push((
                                Check::Signature,
                                format!("{what} at risk {} is unsigned; the signing policy signs every receipt at {} or above{}",
                                    r.risk, policy.sign_from_risk,
                                    if policy.sign_denies { " and every DENY" } else { "" }),
                            ));
                        }
                    }
                }
                let proof = if aligned {
                    s.inclusion.get(i)
                } else {
                    proof_of.get(&r.seq).map(|&p| &s.inclusion[p])
                };
                match proof {
                None if covered > r.seq => problems.push((
                    Check::Inclusion,
                    format!("no inclusion proof, though a checkpoint of size {covered} covers seq {}", r.seq),
                )),
                None => problems.push((
                    Check::Coverage,
                    if s.checkpoints.is_empty() {
                        "not covered by any checkpoint: the pack has no checkpoint of this host".to_owned()
                    } else {
                        format!("not covered by any checkpoint in the pack (the largest covers {covered} receipts)")
                    },
                )),
                Some(proof) => match checkpoint_of.get(&proof.tree_size) {
                    None => problems.push((
                        Check::Inclusion,
                        format!("inclusion proof names tree size {}, which no checkpoint of this host in the pack has", proof.tree_size),
                    )),
                    Some(&c) => {
                        let cp = &s.checkpoints[c];
                        // Receipts come in order: keep the current checkpoint's verifier.
                        let v = match verifier {
                            Some(v) if v.size() == cp.tree_size => v,
                            _ => verifier.insert(InclusionVerifier::new(cp.tree_size, cp.root_hash)),
                        };
                        if let Err(e) = v.verify_path(&hash.0, r.seq, proof.path) {
                            let message = format!(
                                "inclusion proof against checkpoint {c} (size {}) fails: {e}",
                                cp.tree_size
                            );
                            if matches!(e, ProofError::WrongLength { .. }) {
                                wrong_length.push(WrongLength {
                                    receipt: i,
                                    checkpoint: c,
                                    path: proof.path,
                                    message,
                                });
                            } else {
                                problems.push((Check::Inclusion, message));
                            }
                        }
                    }
                },
            }
                found.extend(
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
            },
        );
        self.report.signed_receipts += links.iter().filter(|l| l.signed).count();
        for (_, found, wrong_length) in runs {
            for (i, check, message) in found {
                self.on_receipt(check, i, message);
            }
            for w in wrong_length {
                let message = self
                    .inner_node_as_leaf(&links, &w)
                    .unwrap_or_else(|| w.message.clone());
                self.on_receipt(Check::Inclusion, w.receipt, message);
            }
        }
        if aligned {
            return links;
        }
        let seqs: HashSet<u64> = links.iter().map(|l| l.seq).collect();
        for proof in s.inclusion {
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
        links
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

    /// Index of receipt `seq` in the section, if it is there where expected.
    fn position(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.s.first_seq)?).ok()?;
        (self.s.receipts.get(i)?.view().seq == seq).then_some(i)
    }

    fn checkpoints(&mut self, nodes: &[Link<'_, R>]) {
        let s = self.s;
        let end = s.first_seq.saturating_add(s.receipts.len() as u64);
        for (c, cp) in s.checkpoints.iter().enumerate() {
            if let Err(e) = cp.check() {
                self.on_checkpoint(Check::Record, c, e.to_string());
            }
            if cp.host_id != s.host_id {
                self.on_checkpoint(
                    Check::Checkpoint,
                    c,
                    format!("belongs to host {}", cp.host_id),
                );
            }
            if let Err(e) = self
                .key(cp.key_id.as_str())
                .and_then(|k| cp.verify_signature(k))
            {
                self.on_checkpoint(Check::Checkpoint, c, format!("signature: {e}"));
            }
            match c.checked_sub(1).map(|p| &s.checkpoints[p]) {
                None => {
                    if cp.prev_checkpoint != s.prev_checkpoint {
                        let show = |d: Option<Digest>| {
                            d.map_or_else(|| "null".to_owned(), |d| d.to_string())
                        };
                        self.on_checkpoint(
                            Check::Checkpoint,
                            c,
                            format!(
                                "prev_checkpoint is {}, but the section is declared to follow {}",
                                show(cp.prev_checkpoint),
                                show(s.prev_checkpoint)
                            ),
                        );
                    }
                }
                Some(prev) => self.successor(c, prev, cp),
            }
            if let (Some(head), Some(seq)) = (cp.head, cp.tree_size.checked_sub(1))
                && let Some(i) = self.position(seq)
                && nodes[i].hash != head
            {
                self.on_checkpoint(
                    Check::Checkpoint,
                    c,
                    format!(
                        "head is {head}, but receipt seq {seq} hashes to {}",
                        nodes[i].hash
                    ),
                );
            }
            if cp.tree_size > end && !s.receipts.is_empty() {
                self.on_checkpoint(
                    Check::Checkpoint,
                    c,
                    format!(
                        "covers receipts up to seq {}, but the pack's receipts of {} end at seq {}: the chain is truncated",
                        cp.tree_size - 1,
                        s.host_id,
                        end.saturating_sub(1)
                    ),
                );
            }
        }
    }

    fn successor(&mut self, c: usize, prev: &Checkpoint, cp: &Checkpoint) {
        let proof = self
            .s
            .consistency
            .iter()
            .find(|p| p.from == prev.tree_size && p.to == cp.tree_size);
        let result = match proof {
            None if cp.tree_size > prev.tree_size => {
                match checkpoint::verify_successor(prev, cp, &[]) {
                    Err(e @ CheckpointError::NotLinked { .. }) => Err(e.to_string()),
                    _ => Err(format!(
                        "no consistency proof from size {} to size {}",
                        prev.tree_size, cp.tree_size
                    )),
                }
            }
            None => checkpoint::verify_successor(prev, cp, &[]).map_err(|e| e.to_string()),
            Some(p) => checkpoint::verify_successor(prev, cp, &p.path).map_err(|e| e.to_string()),
        };
        if let Err(message) = result {
            self.on_checkpoint(Check::Consistency, c, message);
        }
    }

    /// The pack must not roll back or fork away from checkpoints known before.
    fn known_checkpoints(&mut self, nodes: &[Link<'_, R>]) {
        let s = self.s;
        let known: Vec<&Checkpoint> = self
            .options
            .known_checkpoints
            .iter()
            .filter(|k| k.host_id == s.host_id)
            .collect();
        let Some(latest) = s.checkpoints.iter().max_by_key(|c| c.tree_size) else {
            if let Some(k) = known.first() {
                self.on_host(
                    Check::Consistency,
                    format!(
                        "the pack has no checkpoint, but one of size {} is known",
                        k.tree_size
                    ),
                );
            }
            return;
        };
        for k in known {
            if k.tree_size > latest.tree_size {
                let e = checkpoint::verify_extension(k, latest, &[]).err();
                self.on_host(
                    Check::Consistency,
                    e.map_or_else(|| "rollback".to_owned(), |e| e.to_string()),
                );
                continue;
            }
            if let Some(same) = s.checkpoints.iter().find(|c| c.tree_size == k.tree_size) {
                if same.root_hash != k.root_hash {
                    self.on_host(
                        Check::Consistency,
                        format!(
                            "fork: the pack's checkpoint at size {} has root {}, the known one {}",
                            k.tree_size, same.root_hash, k.root_hash
                        ),
                    );
                }
                continue;
            }
            // Recompute the known tree from the receipts, when the pack holds them all.
            if s.first_seq == 0 && (s.receipts.len() as u64) >= k.tree_size {
                let n = usize::try_from(k.tree_size).unwrap_or(usize::MAX);
                let tree = Tree::from_data(nodes[..n].iter().map(|l| l.hash.0.as_slice()));
                if tree.root_at(k.tree_size).ok() != Some(k.root_hash) {
                    self.on_host(
                        Check::Consistency,
                        format!(
                            "fork: the pack's first {} receipts do not have the known checkpoint's root {}",
                            k.tree_size, k.root_hash
                        ),
                    );
                }
                continue;
            }
            self.on_host(
                Check::Consistency,
                format!(
                    "the known checkpoint of size {} cannot be related to the pack: no checkpoint of that size and not all of its receipts",
                    k.tree_size
                ),
            );
        }
    }
}
