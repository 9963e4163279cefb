//! The checks of a section's checkpoints: each one's record, host,
//! signature, link to the one before and head; the consistency between
//! them; and that the pack neither rolls back nor forks away from the
//! checkpoints known before.

use super::Check;
use super::section::{Link, Record, Section};
use crate::checkpoint::{self, Checkpoint, CheckpointError};
use crate::hash::Digest;
use crate::merkle::Tree;
use crate::pack::ConsistencyProof;
use std::collections::HashMap;

/// A section's consistency proofs by the sizes they join (the first of
/// several alike): found once each, where a search of every proof for
/// every checkpoint took minutes on a pack of many of both.
type Proofs<'p> = HashMap<(u64, u64), &'p ConsistencyProof>;

impl<R: Record> Section<'_, '_, R> {
    /// Every check of every checkpoint of the section.
    pub(super) fn checkpoints(&mut self, nodes: &[Link<'_, R>]) {
        let s = self.s;
        let mut proofs = Proofs::with_capacity(s.consistency.len());
        for p in s.consistency {
            proofs.entry((p.from, p.to)).or_insert(p);
        }
        for (c, cp) in s.checkpoints.iter().enumerate() {
            self.checkpoint(c, cp, nodes, &proofs);
        }
    }

    /// The checks of checkpoint `c`: its record, host, signature, link to
    /// the one before, head, and that the section holds what it covers.
    fn checkpoint(
        &mut self,
        c: usize,
        cp: &Checkpoint,
        nodes: &[Link<'_, R>],
        proofs: &Proofs<'_>,
    ) {
        let s = self.s;
        let end = s.first_seq.saturating_add(s.receipts.len() as u64);
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
                    let show =
                        |d: Option<Digest>| d.map_or_else(|| "null".to_owned(), |d| d.to_string());
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
            Some(prev) => self.successor(c, prev, cp, proofs),
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

    /// The consistency of checkpoint `c` with the one before it.
    fn successor(&mut self, c: usize, prev: &Checkpoint, cp: &Checkpoint, proofs: &Proofs<'_>) {
        let proof = proofs.get(&(prev.tree_size, cp.tree_size));
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
    pub(super) fn known_checkpoints(&mut self, nodes: &[Link<'_, R>]) {
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
