//! Tampering with an evidence pack: each change is detected, with its own
//! precise message, and nothing else is blamed.

mod common;

use common::{HOST_A, HOST_B, HostRun, key_a, key_b, pack_of, standard_pack, world};
use hcp_receipts::checkpoint::{Checkpoint, CheckpointDraft};
use hcp_receipts::merkle::Tree;
use hcp_receipts::pack::{self, Pack, ReadLimits};
use hcp_receipts::receipt::Receipt;
use hcp_receipts::verify::{Check, Report};
use hcp_receipts::{HostKey, SigningPolicy, VerifyOptions, verify, verify_bytes};

fn options() -> VerifyOptions {
    VerifyOptions {
        signing: Some(SigningPolicy::default()),
        ..VerifyOptions::default()
    }
}

fn check(pack: &Pack) -> Report {
    verify_both(pack, &options())
}

/// Verifies `pack` in memory (receipts re-serialized for their hashes) and,
/// written out, as bytes (receipts hashed as stored): both report the same.
fn verify_both(pack: &Pack, options: &VerifyOptions) -> Report {
    let report = verify(pack, options);
    let bytes = pack::write(pack).expect("write");
    let from_bytes = verify_bytes(&bytes, &ReadLimits::default(), options);
    assert_eq!(
        from_bytes, report,
        "in memory:\n{report}\nas bytes:\n{from_bytes}"
    );
    report
}

/// (check, receipt index in host-a) of every failure that names a receipt.
fn blamed(report: &Report) -> Vec<(Check, usize)> {
    let mut out: Vec<(Check, usize)> = report
        .failures
        .iter()
        .filter_map(|f| f.receipt.as_ref().map(|r| (f.check, r.index)))
        .collect();
    out.sort_by_key(|(c, i)| (*i, c.as_str()));
    out
}

fn has(report: &Report, expected: &str) {
    assert!(
        report.messages().iter().any(|m| m == expected),
        "expected failure\n  {expected}\nin\n{report}"
    );
}

fn has_prefix(report: &Report, prefix: &str) {
    assert!(
        report.messages().iter().any(|m| m.starts_with(prefix)),
        "expected a failure starting with\n  {prefix}\nin\n{report}"
    );
}

fn a_receipts(pack: &mut Pack) -> &mut Vec<Receipt> {
    &mut pack.hosts[0].receipts
}

fn hash(r: &Receipt) -> String {
    r.hash().expect("hash").to_string()
}

#[test]
fn the_untouched_pack_verifies_in_memory_and_as_bytes() {
    let pack = standard_pack();
    let report = check(&pack);
    assert!(report.ok(), "{report}");
    assert_eq!(
        (
            report.hosts,
            report.receipts,
            report.signed_receipts,
            report.checkpoints
        ),
        (2, 15, 4, 5)
    );
    let bytes = pack::write(&pack).expect("write");
    let report = verify_bytes(&bytes, &ReadLimits::default(), &options());
    assert!(report.ok(), "{report}");
}

/// Changes one hex digit of `args_hash`, as a flipped byte in the file would.
fn flip_args_hash(r: &Receipt) -> Receipt {
    let mut text = String::from_utf8(r.canonical_bytes().expect("bytes")).expect("utf8");
    let at = text.find("\"args_hash\":\"sha256:").expect("field") + 20;
    let old = text.as_bytes()[at];
    let new = if old == b'0' { "1" } else { "0" };
    text.replace_range(at..=at, new);
    serde_json::from_str(&text).expect("still a receipt")
}

#[test]
fn a_flipped_byte_in_an_unsigned_receipt() {
    let mut pack = standard_pack();
    let original = a_receipts(&mut pack)[2].clone();
    let changed = flip_args_hash(&original);
    a_receipts(&mut pack)[2] = changed.clone();
    let report = check(&pack);
    has_prefix(
        &report,
        "[inclusion] receipt host-a:2 (receipts/host-a.jsonl index 2): inclusion proof against checkpoint 0 (size 4) fails: proof leads to root sha256:",
    );
    has(
        &report,
        &format!(
            "[chain] receipt host-a:3 (receipts/host-a.jsonl index 3): prev_hash is {} but the previous receipt (seq 2) hashes to {}: the hash chain is broken",
            hash(&original),
            hash(&changed)
        ),
    );
    has(
        &report,
        &format!(
            "[dag] receipt host-a:3 (receipts/host-a.jsonl index 3): parent {} is neither in the pack nor declared outside it",
            hash(&original)
        ),
    );
    assert_eq!(
        blamed(&report),
        vec![(Check::Inclusion, 2), (Check::Chain, 3), (Check::Dag, 3)],
        "{report}"
    );
}

#[test]
fn a_flipped_byte_in_a_signed_receipt() {
    let mut pack = standard_pack();
    let changed = flip_args_hash(&a_receipts(&mut pack)[5]);
    a_receipts(&mut pack)[5] = changed;
    let report = check(&pack);
    has(
        &report,
        &format!(
            "[signature] receipt host-a:5 (receipts/host-a.jsonl index 5): signature does not verify under key {}: signed by another key, or the signed content changed",
            key_a().key_id()
        ),
    );
    assert!(blamed(&report).contains(&(Check::Inclusion, 5)), "{report}");
}

#[test]
fn a_reordered_receipt() {
    let mut pack = standard_pack();
    a_receipts(&mut pack).swap(4, 5);
    let report = check(&pack);
    has(
        &report,
        "[chain] receipt host-a:5 (receipts/host-a.jsonl index 4): seq 5 where 4 was expected: receipt 4 comes later (reordered)",
    );
    has(
        &report,
        "[chain] receipt host-a:4 (receipts/host-a.jsonl index 5): seq 4 where 6 was expected: receipts out of order, repeated or inserted",
    );
}

#[test]
fn a_deleted_receipt() {
    let mut pack = standard_pack();
    let deleted = a_receipts(&mut pack).remove(6);
    let report = check(&pack);
    has(
        &report,
        "[chain] receipt host-a:7 (receipts/host-a.jsonl index 6): seq 7 where 6 was expected: receipt 6 is missing (deleted)",
    );
    has(
        &report,
        &format!(
            "[dag] receipt host-a:7 (receipts/host-a.jsonl index 6): parent {} is neither in the pack nor declared outside it",
            hash(&deleted)
        ),
    );
    has(
        &report,
        "[inclusion] host host-a: inclusion proof for seq 6, which the pack does not hold",
    );
}

#[test]
fn an_inserted_receipt() {
    let mut pack = standard_pack();
    let forged = flip_args_hash(&a_receipts(&mut pack)[6]);
    a_receipts(&mut pack).insert(6, forged);
    let report = check(&pack);
    has(
        &report,
        "[chain] receipt host-a:6 (receipts/host-a.jsonl index 7): seq 6 where 7 was expected: receipts out of order, repeated or inserted",
    );
    has_prefix(
        &report,
        "[inclusion] receipt host-a:6 (receipts/host-a.jsonl index 6): inclusion proof against checkpoint 1 (size 8) fails",
    );
    // The original receipt 6, now at index 7, still proves its inclusion.
    assert!(
        !blamed(&report).contains(&(Check::Inclusion, 7)),
        "{report}"
    );
}

/// Drops the `k` lowest hashes of the inclusion proof of host-a's `seq`.
fn drop_lowest(pack: &mut Pack, seq: u64, k: usize) {
    let proof = pack.hosts[0]
        .inclusion
        .iter_mut()
        .find(|p| p.seq == seq)
        .expect("proof");
    proof.path.drain(..k);
}

#[test]
fn an_inner_node_passed_off_as_a_receipts_leaf() {
    // Receipt 2's proof against checkpoint 0 (size 4) is [leaf 3, node 0-1];
    // without leaf 3 it is the path of the node over receipts 2 and 3.
    let mut pack = standard_pack();
    drop_lowest(&mut pack, 2, 1);
    let report = check(&pack);
    has(
        &report,
        "[inclusion] receipt host-a:2 (receipts/host-a.jsonl index 2): inclusion proof against checkpoint 0 (size 4) fails: an inner node passed off as the receipt's leaf: the proof leads to the signed root from the inner node over seqs 2 to 3 (height 1), not from leaf 2; it has 1 hashes, leaf 2 of a tree of 4 needs 2",
    );
    assert_eq!(blamed(&report), vec![(Check::Inclusion, 2)], "{report}");

    // Two levels up: receipt 4's proof against size 8 is [leaf 5, node 6-7,
    // node 0-3].
    let mut pack = standard_pack();
    drop_lowest(&mut pack, 4, 2);
    has(
        &check(&pack),
        "[inclusion] receipt host-a:4 (receipts/host-a.jsonl index 4): inclusion proof against checkpoint 1 (size 8) fails: an inner node passed off as the receipt's leaf: the proof leads to the signed root from the inner node over seqs 4 to 7 (height 2), not from leaf 4; it has 1 hashes, leaf 4 of a tree of 8 needs 3",
    );

    // On the right edge: receipt 12's proof against size 13 is [node 8-11,
    // node 0-7]; without its lowest hash it starts from the node over 8-12.
    let mut pack = standard_pack();
    drop_lowest(&mut pack, 12, 1);
    has(
        &check(&pack),
        "[inclusion] receipt host-a:12 (receipts/host-a.jsonl index 12): inclusion proof against checkpoint 3 (size 13) fails: an inner node passed off as the receipt's leaf: the proof leads to the signed root from the inner node over seqs 8 to 12 (height 3), not from leaf 12; it has 1 hashes, leaf 12 of a tree of 13 needs 2",
    );

    // A proof cut at the top instead is only too short, and says so.
    let mut pack = standard_pack();
    pack.hosts[0]
        .inclusion
        .iter_mut()
        .find(|p| p.seq == 4)
        .expect("proof")
        .path
        .pop();
    has(
        &check(&pack),
        "[inclusion] receipt host-a:4 (receipts/host-a.jsonl index 4): inclusion proof against checkpoint 1 (size 8) fails: proof has 2 hashes, wrong for leaf 4 of a tree of 8",
    );
}

#[test]
fn a_truncated_chain() {
    let mut pack = standard_pack();
    a_receipts(&mut pack).truncate(10);
    let report = check(&pack);
    has(
        &report,
        "[checkpoint] checkpoint 2 of host-a (size 12): covers receipts up to seq 11, but the pack's receipts of host-a end at seq 9: the chain is truncated",
    );
    has(
        &report,
        "[checkpoint] checkpoint 3 of host-a (size 13): covers receipts up to seq 12, but the pack's receipts of host-a end at seq 9: the chain is truncated",
    );
    assert!(
        blamed(&report).is_empty(),
        "no remaining receipt is blamed:\n{report}"
    );
}

#[test]
fn a_receipt_swapped_in_from_another_pack() {
    let mut pack = standard_pack();
    let other = standard_pack_with_salt("y");
    let stranger = other.hosts[0].receipts[2].clone();
    let previous = hash(&a_receipts(&mut pack)[1]);
    a_receipts(&mut pack)[2] = stranger.clone();
    let report = check(&pack);
    has_prefix(
        &report,
        "[inclusion] receipt host-a:2 (receipts/host-a.jsonl index 2): inclusion proof against checkpoint 0 (size 4) fails: proof leads to root",
    );
    has(
        &report,
        &format!(
            "[chain] receipt host-a:2 (receipts/host-a.jsonl index 2): prev_hash is {} but the previous receipt (seq 1) hashes to {previous}: the hash chain is broken",
            stranger.prev_hash.expect("prev")
        ),
    );
}

fn standard_pack_with_salt(salt: &str) -> Pack {
    let (a, b) = world(salt);
    pack_of(&a, &b)
}

/// An older export of the same history: host-a's first 8 receipts and the
/// checkpoints at 4 and 8.
fn older_export() -> Pack {
    let (a, b) = world("x");
    let mut old = HostRun::new(HOST_A, key_a(), 4);
    old.receipts = a.receipts[..8].to_vec();
    old.hashes = a.hashes[..8].to_vec();
    old.checkpoints = a.checkpoints[..2].to_vec();
    old.inputs = a.inputs[..8].to_vec();
    let mut pack = pack_of(&old, &b);
    pack.hosts.truncate(1);
    pack.public_keys.truncate(1);
    pack
}

#[test]
fn a_rollback_to_an_older_checkpoint() {
    let old = older_export();
    assert!(
        check(&old).ok(),
        "the older export is valid on its own:\n{}",
        check(&old)
    );
    let current = standard_pack();
    let known = current.hosts[0].checkpoints.last().expect("latest").clone();
    let report = verify_both(
        &old,
        &VerifyOptions {
            known_checkpoints: vec![known],
            ..options()
        },
    );
    has(
        &report,
        "[consistency] host host-a: rollback: host host-a's checkpoint covers 8 receipts, fewer than the 13 of a checkpoint already known",
    );
}

#[test]
fn a_fork_away_from_a_known_checkpoint() {
    let pack = standard_pack();
    let other = standard_pack_with_salt("y");
    // Same size, another history.
    let known = other.hosts[0].checkpoints[1].clone();
    let report = verify_both(
        &pack,
        &VerifyOptions {
            known_checkpoints: vec![known.clone()],
            ..options()
        },
    );
    has(
        &report,
        &format!(
            "[consistency] host host-a: fork: the pack's checkpoint at size 8 has root {}, the known one {}",
            pack.hosts[0].checkpoints[1].root_hash, known.root_hash
        ),
    );
    // A size the pack has no checkpoint of: recomputed from the receipts.
    let six = checkpoint_at_6(&other);
    let report = verify_both(
        &pack,
        &VerifyOptions {
            known_checkpoints: vec![six.clone()],
            ..options()
        },
    );
    has(
        &report,
        &format!(
            "[consistency] host host-a: fork: the pack's first 6 receipts do not have the known checkpoint's root {}",
            six.root_hash
        ),
    );
    // The same checkpoint of this history is fine.
    let same = checkpoint_at_6(&pack);
    let report = verify_both(
        &pack,
        &VerifyOptions {
            known_checkpoints: vec![same],
            ..options()
        },
    );
    assert!(report.ok(), "{report}");
}

/// A checkpoint of host-a at size 6, signed by host-a's key.
fn checkpoint_at_6(pack: &Pack) -> Checkpoint {
    let hashes: Vec<_> = pack.hosts[0]
        .receipts
        .iter()
        .map(|r| r.hash().expect("hash"))
        .collect();
    let tree = Tree::from_data(hashes.iter().map(|h| h.0.as_slice()));
    Checkpoint::sign(
        CheckpointDraft {
            host_id: HOST_A.into(),
            tree_size: 6,
            root_hash: tree.root_at(6).expect("root"),
            head: Some(hashes[5]),
            prev_checkpoint: None,
            timestamp: "2026-03-01T10:00:06Z".into(),
        },
        &key_a(),
    )
    .expect("sign")
}

/// Adds L to the S half of a signature (little-endian).
fn add_l(sig: &mut [u8; 64]) {
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut carry = 0u16;
    for i in 0..32 {
        let sum = u16::from(sig[32 + i]) + u16::from(L[i]) + carry;
        sig[32 + i] = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0);
}

#[test]
fn a_malleable_signature() {
    let mut pack = standard_pack();
    let r = &mut a_receipts(&mut pack)[5];
    let mut sig = r.signature.expect("signed");
    add_l(&mut sig.0);
    r.signature = Some(sig);
    // The lax check accepts the malleated copy when S + L still fits.
    let report = check(&pack);
    has(
        &report,
        "[signature] receipt host-a:5 (receipts/host-a.jsonl index 5): S is not reduced modulo L (non-canonical, malleable signature)",
    );
}

#[test]
fn a_signature_by_another_key() {
    let stranger = HostKey::from_seed(&[0x5e; 32]);
    let resign = |key: &HostKey, claim: Option<&HostKey>| {
        let mut pack = standard_pack();
        let r = &mut a_receipts(&mut pack)[5];
        r.sign(key).expect("sign");
        if let Some(claim) = claim {
            r.key_id = Some(claim.key_id().clone());
        }
        check(&pack)
    };
    has(
        &resign(&stranger, None),
        &format!(
            "[signature] receipt host-a:5 (receipts/host-a.jsonl index 5): key {} is not in the pack",
            stranger.key_id()
        ),
    );
    has(
        &resign(&key_b(), None),
        &format!(
            "[signature] receipt host-a:5 (receipts/host-a.jsonl index 5): key {} does not belong to host host-a",
            key_b().key_id()
        ),
    );
    has(
        &resign(&stranger, Some(&key_a())),
        &format!(
            "[signature] receipt host-a:5 (receipts/host-a.jsonl index 5): signature does not verify under key {}: signed by another key, or the signed content changed",
            key_a().key_id()
        ),
    );
}

#[test]
fn a_stripped_signature() {
    let mut pack = standard_pack();
    let r = &mut a_receipts(&mut pack)[3];
    r.signature = None;
    r.key_id = None;
    let report = check(&pack);
    has(
        &report,
        "[signature] receipt host-a:3 (receipts/host-a.jsonl index 3): a DENY at risk R2 is unsigned; the signing policy signs every receipt at R4 or above and every DENY",
    );
}

#[test]
fn an_untrusted_key() {
    let pack = standard_pack();
    let report = verify_both(
        &pack,
        &VerifyOptions {
            trusted_keys: Some(vec![key_a().public().clone()]),
            ..options()
        },
    );
    has(
        &report,
        &format!(
            "[key] key {} ({}) is not one of the trusted keys",
            key_b().key_id(),
            key_b().public()
        ),
    );
    assert_eq!(report.failures.len(), 1, "{report}");
}

/// A pack with no receipts is not evidence of anything: it fails, where
/// it verified "ok: 0 hosts" (an empty pack handed to an auditor passed,
/// with or without trusted keys), whether it has no host section or one
/// whose receipts and checkpoints were all left out.
#[test]
fn a_pack_without_receipts_verifies_nothing_and_fails() {
    let no_section = Pack {
        hosts: vec![],
        public_keys: vec![],
        ..standard_pack()
    };
    let mut emptied = standard_pack();
    emptied.hosts.truncate(1);
    let section = &mut emptied.hosts[0];
    section.receipts.clear();
    section.checkpoints.clear();
    section.inclusion.clear();
    section.consistency.clear();
    for pack in [no_section, emptied] {
        for options in [
            options(),
            VerifyOptions {
                trusted_keys: Some(vec![key_a().public().clone(), key_b().public().clone()]),
                ..options()
            },
        ] {
            let report = verify_both(&pack, &options);
            assert!(!report.ok(), "{report}");
            has(
                &report,
                "[pack] the pack holds no receipts: there is nothing to verify",
            );
        }
    }
}

/// A key trusted for one host signs for no other: host-b's key signing a
/// section that claims to be host-a's verified under a flat list of both
/// keys (merged after host-a's real pack, it would pass for its
/// continuation). Bound to their hosts (`--trust-key HOST=KEY`), it fails.
#[test]
fn a_key_trusted_for_one_host_signs_for_no_other() {
    let mut forged = HostRun::new(HOST_A, key_b(), 4);
    forged.call(
        "s-9",
        "fs.open",
        hcp_contracts::RiskLevel::R1,
        serde_json::json!({"path": "/documents/forged.md"}),
        vec![],
        0,
    );
    forged.seal(0);
    let template = standard_pack();
    let pack = Pack {
        hosts: vec![forged.section()],
        public_keys: vec![key_b().public().clone()],
        ..template
    };
    let flat = verify_both(
        &pack,
        &VerifyOptions {
            trusted_keys: Some(vec![key_a().public().clone(), key_b().public().clone()]),
            ..options()
        },
    );
    assert!(flat.ok(), "{flat}");
    let bound = VerifyOptions {
        host_keys: vec![
            (HOST_A.to_owned(), key_a().public().clone()),
            (HOST_B.to_owned(), key_b().public().clone()),
        ],
        ..options()
    };
    let report = verify_both(&pack, &bound);
    has(
        &report,
        &format!(
            "[key] host host-a declares key {}, which is trusted for host host-b only",
            key_b().key_id()
        ),
    );
    assert_eq!(report.failures.len(), 1, "{report}");
    // The real pack verifies under the same binding.
    let report = verify_both(&standard_pack(), &bound);
    assert!(report.ok(), "{report}");
}

#[test]
fn an_index_hash_mismatch() {
    let bytes = pack::write(&standard_pack()).expect("write");
    let mut bad = bytes.clone();
    // A byte inside host-a's receipts file: find a receipt's call name.
    let pattern = b"\"call\":\"fs.open\",\"capability\"";
    let at = bytes
        .windows(pattern.len())
        .position(|w| w == pattern)
        .expect("a receipt");
    bad[at + 9] = b'g';
    let report = verify_bytes(&bad, &ReadLimits::default(), &options());
    assert_eq!(report.failures.len(), 1, "{report}");
    let message = report.messages().remove(0);
    assert!(
        message.starts_with(
            "[pack] entry \"receipts/host-a.jsonl\" does not match the index: index says "
        ),
        "{message}"
    );
}

#[test]
fn a_receipt_breaking_its_own_rules_is_reported_and_the_rest_checked() {
    let mut pack = standard_pack();
    a_receipts(&mut pack)[2].reason_code = "allow".into();
    // Through the bytes: the reader parses it, verification reports it.
    let bytes = pack::write(&pack).expect("write");
    let report = verify_bytes(&bytes, &ReadLimits::default(), &options());
    has(
        &report,
        "[record] receipt host-a:2 (receipts/host-a.jsonl index 2): receipt host-a:2: reason_code \"allow\" must match [A-Z][A-Z0-9_]* (at most 64)",
    );
    // Its hash changed, so its inclusion proof and the next link fail too;
    // nothing else is blamed.
    assert_eq!(
        blamed(&report),
        vec![
            (Check::Inclusion, 2),
            (Check::Record, 2),
            (Check::Chain, 3),
            (Check::Dag, 3)
        ],
        "{report}"
    );
}
