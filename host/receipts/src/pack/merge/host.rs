//! One host's stretches of its log, from several packs, joined into one
//! section: receipts once each (a fork where two packs disagree), no gap,
//! checkpoints once each in order, one inclusion proof per receipt, one
//! consistency proof per pair of successive checkpoints.

use super::MergeError;
use super::nodes::{Known, leaves};
use crate::checkpoint::Checkpoint;
use crate::hash::Digest;
use crate::pack::{ConsistencyProof, DecisionInput, HostSection, InclusionProof};
use crate::receipt::Receipt;
use std::cmp::Reverse;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// A host section and the pack it comes from (an index into the labels).
pub(super) struct Stretch {
    pub(super) pack: usize,
    pub(super) section: HostSection,
}

/// A merged section and the hashes of its receipts, in order.
pub(super) struct Joined {
    pub(super) section: HostSection,
    pub(super) hashes: Vec<Digest>,
}

/// Where each seq's receipt came from, for naming packs in errors.
struct Owners(Vec<(u64, usize)>);

impl Owners {
    fn of(&self, seq: u64) -> usize {
        let i = self.0.partition_point(|&(first, _)| first <= seq);
        self.0.get(i.saturating_sub(1)).map_or(0, |&(_, pack)| pack)
    }
}

/// The receipts joined so far, and where each came from.
struct Chain<'a> {
    host: &'a str,
    labels: &'a [String],
    /// `first_seq`, the declared `prev_hash` and the pack of the first stretch.
    start: Option<(u64, Option<Digest>, usize)>,
    receipts: Vec<Receipt>,
    owners: Owners,
}

impl Chain<'_> {
    fn label(&self, pack: usize) -> String {
        self.labels[pack].clone()
    }

    fn hash(&self, r: &Receipt) -> Result<Digest, MergeError> {
        r.hash().map_err(|e| MergeError::Unreadable {
            pack: self.label(self.owners.of(r.seq)),
            what: format!("receipt {} of host {}", r.seq, self.host),
            reason: e.to_string(),
        })
    }

    /// Adds a stretch that starts at or after the chain's first seq.
    fn add(
        &mut self,
        pack: usize,
        first: u64,
        declared: Option<Digest>,
        receipts: Vec<Receipt>,
    ) -> Result<(), MergeError> {
        if receipts.is_empty() {
            return Ok(());
        }
        let Some((first_seq, prev_hash, by)) = self.start else {
            self.start = Some((first, declared, pack));
            self.owners.0.push((first, pack));
            self.receipts = receipts;
            return Ok(());
        };
        let fork = |seq: u64, first: usize, detail: String| MergeError::Fork {
            host: self.host.to_owned(),
            seq,
            first: self.label(first),
            second: self.label(pack),
            detail,
        };
        if first == first_seq && declared != prev_hash {
            return Err(fork(
                first,
                by,
                "they declare different receipts before their first".into(),
            ));
        }
        let end = first_seq.saturating_add(self.receipts.len() as u64);
        if first > end {
            return Err(MergeError::Gap {
                host: self.host.to_owned(),
                last: end - 1,
                next: first,
                first: self.label(self.owners.of(end - 1)),
                second: self.label(pack),
            });
        }
        // The overlap must agree receipt for receipt.
        let overlap = usize::try_from(end - first).unwrap_or(usize::MAX);
        let at = usize::try_from(first - first_seq).unwrap_or(usize::MAX);
        for (i, r) in receipts.iter().take(overlap).enumerate() {
            if self.receipts[at + i] != *r {
                let seq = first + i as u64;
                return Err(fork(
                    seq,
                    self.owners.of(seq),
                    "they hold different receipts there".into(),
                ));
            }
        }
        let mut rest = receipts.into_iter().skip(overlap).peekable();
        let Some(next) = rest.peek() else {
            return Ok(());
        };
        // What continues the chain must follow its last receipt.
        let last = self.receipts.last().map(|r| self.hash(r)).transpose()?;
        if next.prev_hash != last {
            let show = |d: Option<Digest>| d.map_or_else(|| "null".to_owned(), |d| d.to_string());
            return Err(fork(
                end,
                self.owners.of(end - 1),
                format!(
                    "the receipt at seq {end} names prev_hash {}, but the receipt at seq {} hashes to {}",
                    show(next.prev_hash),
                    end - 1,
                    show(last)
                ),
            ));
        }
        self.owners.0.push((end, pack));
        self.receipts.extend(rest);
        Ok(())
    }
}

/// Joins the stretches of host `host` (all of them sections of that host).
pub(super) fn join(
    host: &str,
    mut stretches: Vec<Stretch>,
    labels: &[String],
) -> Result<Joined, MergeError> {
    let label = |pack: usize| labels[pack].clone();
    // Earliest first, the longest of those first: each later stretch then
    // overlaps, continues, or leaves a gap after what is joined so far.
    // (The declared previous checkpoint last, so that even a section
    // without checkpoints takes it from the same stretch in any order.)
    stretches.sort_by_key(|s| {
        (
            s.section.first_seq,
            Reverse(s.section.receipts.len()),
            s.section.prev_checkpoint,
        )
    });

    let mut chain = Chain {
        host,
        labels,
        start: None,
        receipts: Vec::new(),
        owners: Owners(Vec::new()),
    };
    let mut keys = Vec::new();
    let mut checkpoints: BTreeMap<u64, (Checkpoint, usize)> = BTreeMap::new();
    let mut inclusion: BTreeMap<u64, InclusionProof> = BTreeMap::new();
    let mut consistency: BTreeMap<(u64, u64), Vec<Digest>> = BTreeMap::new();
    let mut inputs: BTreeMap<u64, (DecisionInput, usize)> = BTreeMap::new();
    let mut prev_checkpoint = None;

    for Stretch { pack, section } in stretches {
        // Receipts first: a fork is named at the receipt where it starts.
        chain.add(pack, section.first_seq, section.prev_hash, section.receipts)?;
        keys.extend(section.keys);
        if prev_checkpoint.is_none() {
            prev_checkpoint = section.prev_checkpoint;
        }
        for cp in section.checkpoints {
            match checkpoints.get(&cp.tree_size) {
                Some((held, by)) if *held != cp => {
                    return Err(MergeError::CheckpointFork {
                        host: host.to_owned(),
                        tree_size: cp.tree_size,
                        first: label(*by),
                        second: label(pack),
                    });
                }
                Some(_) => {}
                None => {
                    checkpoints.insert(cp.tree_size, (cp, pack));
                }
            }
        }
        for proof in section.inclusion {
            match inclusion.get(&proof.seq) {
                Some(held) if (held.tree_size, &held.path) <= (proof.tree_size, &proof.path) => {}
                _ => {
                    inclusion.insert(proof.seq, proof);
                }
            }
        }
        for proof in section.consistency {
            match consistency.entry((proof.from, proof.to)) {
                Entry::Vacant(slot) => {
                    slot.insert(proof.path);
                }
                Entry::Occupied(mut slot) => {
                    if proof.path < *slot.get() {
                        slot.insert(proof.path);
                    }
                }
            }
        }
        for input in section.inputs {
            match inputs.get(&input.seq) {
                Some((held, by)) if held.input != input.input => {
                    return Err(MergeError::InputConflict {
                        host: host.to_owned(),
                        seq: input.seq,
                        first: label(*by),
                        second: label(pack),
                    });
                }
                Some(_) => {}
                None => {
                    inputs.insert(input.seq, (input, pack));
                }
            }
        }
    }

    let (first_seq, prev_hash) = chain.start.map_or((0, None), |(f, p, _)| (f, p));
    let receipts = std::mem::take(&mut chain.receipts);
    let hashes = crate::par::map(&receipts, |_, r| r.hash());
    let hashes: Vec<Digest> = hashes
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            h.map_err(|e| MergeError::Unreadable {
                pack: label(chain.owners.of(first_seq.saturating_add(i as u64))),
                what: format!(
                    "receipt {} of host {host}",
                    first_seq.saturating_add(i as u64)
                ),
                reason: e.to_string(),
            })
        })
        .collect::<Result<_, _>>()?;
    let checkpoints: Vec<(Checkpoint, usize)> = checkpoints.into_values().collect();
    for pair in checkpoints.windows(2) {
        let ((prev, by), (cp, pack)) = (&pair[0], &pair[1]);
        let linked = prev.hash().ok();
        if cp.prev_checkpoint.is_none() || cp.prev_checkpoint != linked {
            return Err(MergeError::CheckpointGap {
                host: host.to_owned(),
                from: prev.tree_size,
                to: cp.tree_size,
                first: label(*by),
                second: label(*pack),
            });
        }
    }
    let consistency = bridge(
        host,
        &checkpoints,
        consistency,
        &inclusion,
        first_seq,
        &hashes,
        labels,
    )?;
    let checkpoints: Vec<Checkpoint> = checkpoints.into_iter().map(|(c, _)| c).collect();
    if let Some(cp) = checkpoints.first() {
        prev_checkpoint = cp.prev_checkpoint;
    }
    keys.sort();
    keys.dedup();
    let held = first_seq..first_seq.saturating_add(receipts.len() as u64);
    let section = HostSection {
        host_id: host.to_owned(),
        keys,
        first_seq,
        prev_hash,
        prev_checkpoint,
        inclusion: inclusion
            .into_values()
            .filter(|p| held.contains(&p.seq))
            .collect(),
        receipts,
        checkpoints,
        consistency,
        inputs: inputs.into_values().map(|(i, _)| i).collect(),
    };
    Ok(Joined { section, hashes })
}

/// One consistency proof per pair of successive checkpoints: a pack's, or
/// where the stretches meet and no pack holds one, one derived from what
/// the packs hold (see [`super::nodes`]).
fn bridge(
    host: &str,
    checkpoints: &[(Checkpoint, usize)],
    mut held: BTreeMap<(u64, u64), Vec<Digest>>,
    inclusion: &BTreeMap<u64, InclusionProof>,
    first_seq: u64,
    hashes: &[Digest],
    labels: &[String],
) -> Result<Vec<ConsistencyProof>, MergeError> {
    let pairs: Vec<(u64, u64)> = checkpoints
        .windows(2)
        .map(|pair| (pair[0].0.tree_size, pair[1].0.tree_size))
        .collect();
    let missing: BTreeSet<u64> = pairs
        .iter()
        .filter(|pair| !held.contains_key(pair))
        .flat_map(|&(from, to)| [from, to])
        .collect();
    // Only where a proof is missing: the leaves, and the nodes named by
    // the proofs against the checkpoints it joins.
    let leaf_hashes = if missing.is_empty() {
        Vec::new()
    } else {
        leaves(hashes)
    };
    let mut known = Known::new(first_seq, &leaf_hashes);
    if !missing.is_empty() {
        for proof in inclusion.values() {
            if missing.contains(&proof.tree_size) {
                known.learn_inclusion(proof);
            }
        }
        for (&(from, to), path) in &held {
            known.learn_consistency(&ConsistencyProof {
                from,
                to,
                path: path.clone(),
            });
        }
        for (cp, _) in checkpoints {
            known.learn_root(cp.tree_size, cp.root_hash);
        }
    }
    let mut out = Vec::with_capacity(pairs.len());
    for (i, &(from, to)) in pairs.iter().enumerate() {
        let path = match held.remove(&(from, to)) {
            Some(path) => path,
            None => known
                .consistency(from, to)
                .ok_or_else(|| MergeError::NoConsistency {
                    host: host.to_owned(),
                    from,
                    to,
                    first: labels[checkpoints[i].1].clone(),
                    second: labels[checkpoints[i + 1].1].clone(),
                })?,
        };
        out.push(ConsistencyProof { from, to, path });
    }
    Ok(out)
}
