//! Verification of the host sections of a pack, borrowed from a [`Pack`]
//! or from a pack as read, and the checks across them: trusted keys and
//! the DAG.

use super::section::{Keys, Record, Section, SectionView, failure, receipt_ref};
use super::{Check, Report, VerifyOptions};
use crate::dag;
use crate::hash::Digest;
use crate::keys::PublicKey;
use crate::pack::{InclusionRef, Pack, Read, StoredReceipt};
use crate::receipt::Receipt;
use std::collections::HashSet;

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
    let bound = &options.host_keys;
    if options.trusted_keys.is_some() || !bound.is_empty() {
        let plain = options.trusted_keys.as_deref().unwrap_or_default();
        for key in public_keys {
            if !plain.contains(key) && !bound.iter().any(|(_, k)| k == key) {
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
        // A key trusted for some hosts only signs for no other.
        for section in sections {
            for id in section.keys {
                let Some(&key) = keys.get(id.as_str()) else {
                    continue;
                };
                let hosts: Vec<&str> = bound
                    .iter()
                    .filter(|(_, k)| k == key)
                    .map(|(h, _)| h.as_str())
                    .collect();
                if plain.contains(key) || hosts.is_empty() || hosts.contains(&section.host_id) {
                    continue;
                }
                report.failures.push(failure(
                    Check::Key,
                    None,
                    None,
                    format!(
                        "host {} declares key {id}, which is trusted for {} only",
                        section.host_id,
                        hosts
                            .iter()
                            .map(|h| format!("host {h}"))
                            .collect::<Vec<_>>()
                            .join(", ")
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
    if report.receipts == 0 {
        // Nothing in it was checked (no section, or only empty ones): "ok"
        // would vouch for nothing.
        report.failures.push(failure(
            Check::Pack,
            None,
            None,
            "the pack holds no receipts: there is nothing to verify".to_owned(),
        ));
    }
    report
}
