//! Merging evidence packs: two hosts' packs become one that verifies and
//! replays, whatever the order; stretches of one host's log are joined;
//! forks, gaps and conflicts are refused with their own messages.

mod common;

use common::{HOST_A, HOST_B, HostRun, RulesDecider, key_a, key_b, pack_of, policy_files, world};
use hcp_contracts::RiskLevel;
use hcp_receipts::merkle::Tree;
use hcp_receipts::pack::{self, HostSection, MergeError, Pack, ReadLimits, merge};
use hcp_receipts::receipt::Parent;
use hcp_receipts::replay::PolicySnapshot;
use hcp_receipts::{Digest, SigningPolicy, VerifyOptions, replay, verify, verify_bytes};
use serde_json::json;
use std::collections::{BTreeMap, HashSet};

fn options() -> VerifyOptions {
    VerifyOptions {
        signing: Some(SigningPolicy::default()),
        ..VerifyOptions::default()
    }
}

/// Asserts `pack` verifies, in memory and as written bytes.
fn verifies(pack: &Pack) {
    let report = verify(pack, &options());
    assert!(report.ok(), "{report}");
    let bytes = pack::write(pack).expect("write");
    let report = verify_bytes(&bytes, &ReadLimits::default(), &options());
    assert!(report.ok(), "{report}");
}

fn bytes(pack: &Pack) -> Vec<u8> {
    pack::write(pack).expect("write")
}

/// The pack of receipts `from..to` of `run`, as the exporter makes it: the
/// checkpoints above `from` up to the one of size `to`, proofs against the
/// host's whole tree, parents outside the stretch declared external.
fn stretch(run: &HostRun, from: u64, to: u64) -> Pack {
    let (f, t) = (from as usize, to as usize);
    let checkpoints: Vec<_> = run
        .checkpoints
        .iter()
        .filter(|c| c.tree_size > from && c.tree_size <= to)
        .cloned()
        .collect();
    assert_eq!(
        checkpoints.last().map(|c| c.tree_size),
        Some(to),
        "ends at a checkpoint"
    );
    let mut section = HostSection::new(
        run.log.state().host_id.as_str(),
        vec![run.log.public_key().key_id().clone()],
        run.receipts[f..t].to_vec(),
        checkpoints,
        run.inputs[f..t].to_vec(),
    );
    let tree = Tree::from_data(run.hashes[..t].iter().map(|h| h.0.as_slice()));
    pack::prove(&mut section, &tree).expect("prove");
    let inside: HashSet<Digest> = run.hashes[f..t].iter().copied().collect();
    let mut external: Vec<Digest> = section
        .receipts
        .iter()
        .flat_map(|r| r.parents.iter().copied())
        .filter(|p| !inside.contains(p))
        .collect();
    external.sort();
    external.dedup();
    Pack {
        hosts: vec![section],
        external_parents: external,
        public_keys: vec![run.log.public_key().clone()],
        policy: policy_files(),
        ..Pack::default()
    }
}

/// The standard world's pack split by host: host-a's pack carries the
/// manifests, host-b's the messages and host-a's admission as an external
/// parent.
fn split(a: &HostRun, b: &HostRun) -> (Pack, Pack) {
    let whole = pack_of(a, b);
    let mut pa = stretch(a, 0, a.log.size());
    pa.manifests = whole.manifests.clone();
    let mut pb = stretch(b, 0, b.log.size());
    pb.messages = whole.messages;
    (pa, pb)
}

#[test]
fn two_hosts_packs_merge_into_the_pack_of_both() {
    let (a, b) = world("x");
    let (pa, pb) = split(&a, &b);
    verifies(&pa);
    verifies(&pb);
    // host-b's first receipt follows host-a's admission: a parent outside
    // host-b's pack, inside the merged one.
    assert_eq!(pb.external_parents, vec![a.hashes[0]]);

    let merged = merge(vec![pa.clone(), pb.clone()]).expect("merge");
    verifies(&merged);
    assert!(merged.external_parents.is_empty());
    let hosts: Vec<&str> = merged.hosts.iter().map(|h| h.host_id.as_str()).collect();
    assert_eq!(hosts, [HOST_A, HOST_B]);
    assert!(merged.hosts[1].receipts[0].parents.contains(&a.hashes[0]));
    // Exactly the pack built from both hosts at once.
    assert!(
        bytes(&merged) == bytes(&pack_of(&a, &b)),
        "differs from the pack of both"
    );
    let report = replay(&merged, &RulesDecider);
    assert!(report.ok(), "{:?}", report.issues);
    assert_eq!(report.replayed, 15);

    // Without host-a's pack, host-b's parent is still external.
    let alone = merge(vec![pb.clone()]).expect("merge one");
    assert!(bytes(&alone) == bytes(&pb));
}

#[test]
fn the_order_of_the_packs_does_not_matter() {
    let (a, b) = world("x");
    let (pa, pb) = split(&a, &b);
    let mut early = stretch(&a, 0, 8);
    early.manifests = pa.manifests.clone();
    let late = stretch(&a, 5, 13);
    let orders = [
        vec![pa.clone(), pb.clone()],
        vec![pb.clone(), pa.clone()],
        vec![early.clone(), pb.clone(), late.clone()],
        vec![late.clone(), early.clone(), pb.clone()],
        vec![pb, late, early, pa],
    ];
    let first = bytes(&merge(orders[0].clone()).expect("merge"));
    for packs in orders {
        assert!(bytes(&merge(packs).expect("merge")) == first);
    }
}

#[test]
fn stretches_of_one_host_are_joined_where_they_overlap_or_meet() {
    let (a, _) = world("x");
    // Checkpoints at 4, 8, 12 and 13.
    let sizes: Vec<u64> = a.checkpoints.iter().map(|c| c.tree_size).collect();
    assert_eq!(sizes, [4, 8, 12, 13]);
    let whole = bytes(&stretch(&a, 0, 13));

    // The same pack twice is that pack.
    let same = merge(vec![stretch(&a, 0, 13), stretch(&a, 0, 13)]).expect("merge");
    assert!(bytes(&same) == whole);
    // Overlapping: 0..8 and 5..13 (its parent at seq 4 is no longer external).
    let late = stretch(&a, 5, 13);
    assert_eq!(late.external_parents, vec![a.hashes[4]]);
    let joined = merge(vec![stretch(&a, 0, 8), late]).expect("merge");
    verifies(&joined);
    assert!(bytes(&joined) == whole);
    // Contained: 4..12 inside 0..13.
    let joined = merge(vec![stretch(&a, 4, 12), stretch(&a, 0, 13)]).expect("merge");
    assert!(bytes(&joined) == whole);
    // Meeting at a checkpoint: no pack holds the proof from 8 to 12; it is
    // derived, from the receipts alone (from seq 0) or with the earlier
    // stretch's proofs (from seq 2).
    let joined = merge(vec![stretch(&a, 0, 8), stretch(&a, 8, 13)]).expect("merge");
    verifies(&joined);
    assert!(bytes(&joined) == whole);
    let joined = merge(vec![stretch(&a, 2, 8), stretch(&a, 8, 12)]).expect("merge");
    verifies(&joined);
    assert!(bytes(&joined) == bytes(&stretch(&a, 2, 12)));
    // Three stretches meeting twice.
    let joined = merge(vec![
        stretch(&a, 8, 12),
        stretch(&a, 1, 4),
        stretch(&a, 4, 8),
        stretch(&a, 12, 13),
    ])
    .expect("merge");
    verifies(&joined);
    assert!(bytes(&joined) == bytes(&stretch(&a, 1, 13)));
}

#[test]
fn a_gap_between_stretches_is_refused() {
    let (a, _) = world("x");
    let err = merge(vec![stretch(&a, 8, 13), stretch(&a, 0, 4)]).expect_err("gap");
    assert_eq!(
        err.to_string(),
        "host host-a: pack 2 ends at seq 3 and pack 1 starts at seq 8; the receipts between are in no pack, and a pack holds one contiguous stretch of each host's log (merge a pack that holds them too)"
    );
    assert!(matches!(
        err,
        MergeError::Gap {
            last: 3,
            next: 8,
            ..
        }
    ));
}

/// host-a's log of `calls` calls after its admission, the last `diverge`
/// of them with other arguments when `other` is set.
fn history(calls: u32, diverge: u32, other: bool) -> HostRun {
    let mut a = HostRun::new(HOST_A, key_a(), 4);
    let mut last = a.call("s-1", "gate.admission", RiskLevel::R2, json!({}), vec![], 0);
    for i in 0..calls {
        let salt = if other && i >= calls - diverge {
            "y"
        } else {
            "x"
        };
        let args = json!({"n": i, "salt": salt});
        last = a.call("s-1", "fs.open", RiskLevel::R1, args, vec![last], i + 1);
    }
    a.seal(0);
    a
}

#[test]
fn a_fork_is_refused_with_the_host_and_the_seq() {
    // Two histories of host-a (same key) that part at seq 7.
    let x = history(12, 6, false);
    let y = history(12, 6, true);
    assert_eq!(x.hashes[..7], y.hashes[..7]);
    assert_ne!(x.hashes[7], y.hashes[7]);

    let err = merge(vec![stretch(&x, 0, 8), stretch(&y, 4, 12)]).expect_err("fork");
    assert_eq!(
        err.to_string(),
        "host host-a forks at seq 7 between pack 1 and pack 2: they hold different receipts there"
    );
    // Meeting at seq 8: the later stretch does not follow the earlier one.
    let err = merge(vec![stretch(&y, 8, 12), stretch(&x, 0, 8)]).expect_err("fork");
    assert_eq!(
        err.to_string(),
        format!(
            "host host-a forks at seq 8 between pack 2 and pack 1: the receipt at seq 8 names prev_hash {}, but the receipt at seq 7 hashes to {}",
            y.hashes[7], x.hashes[7]
        )
    );
    // Different checkpoints of one size, receipts that do not overlap.
    let mut late = stretch(&y, 4, 8);
    late.hosts[0].receipts.clear();
    late.hosts[0].inclusion.clear();
    late.hosts[0].inputs.clear();
    let err = merge(vec![stretch(&x, 0, 8), late]).expect_err("fork");
    assert_eq!(
        err.to_string(),
        "host host-a forks at its checkpoint of size 8: pack 1 and pack 2 hold different checkpoints of that size"
    );
}

#[test]
fn conflicting_files_and_inputs_are_refused_by_name() {
    let (a, b) = world("x");
    let (pa, mut pb) = split(&a, &b);
    let mut other = pa.clone();
    other
        .manifests
        .insert("wit/world.wit".into(), b"package other;\n".to_vec());
    let err = merge(vec![pa.clone(), other]).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        "manifests/wit/world.wit: pack 1 and pack 2 hold different contents"
    );
    pb.messages
        .insert("task-s-1/task_submit.json".into(), b"{}\n".to_vec());
    let mut with = pa.clone();
    with.messages
        .insert("task-s-1/task_submit.json".into(), b"{\"a\":1}\n".to_vec());
    let err = merge(vec![with, pb]).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        "messages/task-s-1/task_submit.json: pack 1 and pack 2 hold different contents"
    );
    let mut input = stretch(&a, 0, 8);
    input.hosts[0].inputs[6].input = json!({"call": "fs.open"});
    let err = merge(vec![stretch(&a, 4, 13), input]).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        "host host-a: pack 2 and pack 1 hold different decision inputs for the receipt at seq 6"
    );
    assert!(matches!(merge(vec![]), Err(MergeError::NoPacks)));
}

/// The policy of host-b in [`two_policies`]: host-a's rules and a note, so
/// another snapshot (another hash) that decides the same.
fn other_policy() -> BTreeMap<String, Vec<u8>> {
    let mut files = policy_files();
    files.insert("notes.txt".into(), b"host-b's copy\n".to_vec());
    files
}

/// host-a under the standard policy, host-b under [`other_policy`], each
/// pack with its one snapshot directly under `policy/`.
fn two_policies() -> (Pack, Pack) {
    let mut a = HostRun::new(HOST_A, key_a(), 4);
    let admitted: Parent = a.call("s-1", "gate.admission", RiskLevel::R2, json!({}), vec![], 0);
    a.call(
        "s-1",
        "net.connect",
        RiskLevel::R2,
        json!({}),
        vec![admitted],
        1,
    );
    a.seal(0);
    let mut b = HostRun::new(HOST_B, key_b(), 4);
    let files = other_policy();
    b.policy_hash = PolicySnapshot { files: &files }.digest();
    b.log.receive(admitted.lamport).expect("receive");
    b.call(
        "s-2",
        "fs.open",
        RiskLevel::R1,
        json!({}),
        vec![admitted],
        2,
    );
    b.call("s-2", "instrument.set", RiskLevel::R5, json!({}), vec![], 3);
    b.seal(1);
    let pa = stretch(&a, 0, 2);
    let mut pb = stretch(&b, 0, 2);
    pb.policy = files;
    (pa, pb)
}

#[test]
fn each_hosts_policy_snapshot_is_kept_where_replay_finds_it() {
    let (pa, pb) = two_policies();
    for pack in [&pa, &pb] {
        assert!(replay(pack, &RulesDecider).ok());
    }
    let merged = merge(vec![pb.clone(), pa.clone()]).expect("merge");
    verifies(&merged);
    let (ha, hb) = (
        PolicySnapshot {
            files: &policy_files(),
        }
        .digest()
        .to_hex(),
        PolicySnapshot {
            files: &other_policy(),
        }
        .digest()
        .to_hex(),
    );
    let paths: Vec<&str> = merged.policy.keys().map(String::as_str).collect();
    let mut expected = vec![
        format!("{ha}/rules.json"),
        format!("{hb}/notes.txt"),
        format!("{hb}/rules.json"),
    ];
    expected.sort();
    assert_eq!(paths, expected);
    let report = replay(&merged, &RulesDecider);
    assert!(report.ok(), "{:?}", report.issues);
    assert_eq!((report.replayed, report.matched), (4, 4));
    // Through the bytes too, and merged again with itself (snapshots
    // already under their hashes): the same pack.
    let read = pack::read(&bytes(&merged), &ReadLimits::default()).expect("read");
    assert!(replay(&read, &RulesDecider).ok());
    let again = merge(vec![read, pa.clone()]).expect("merge again");
    assert!(bytes(&again) == bytes(&merged));

    // The same snapshot under one name twice, with other bytes: refused.
    let forged = Pack {
        policy: merged
            .policy
            .iter()
            .map(|(k, v)| {
                let v = if k.ends_with("notes.txt") {
                    b"edited\n".to_vec()
                } else {
                    v.clone()
                };
                (k.clone(), v)
            })
            .collect(),
        ..Pack::default()
    };
    let err = merge(vec![merged.clone(), forged]).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        format!(
            "policy/{hb}/notes.txt (the policy snapshot {hb}): pack 1 and pack 2 hold different contents"
        )
    );
}

#[test]
fn one_shared_policy_stays_directly_under_policy() {
    let (a, b) = world("x");
    let (pa, pb) = split(&a, &b);
    let merged = merge(vec![pa, pb]).expect("merge");
    assert_eq!(merged.policy, policy_files());
}

#[test]
fn a_snapshot_that_cannot_be_named_is_not_guessed() {
    let (pa, _) = two_policies();
    // A pack with no receipts: its snapshot's hash is named nowhere.
    let bare = Pack {
        policy: other_policy(),
        ..Pack::default()
    };
    let err = merge(vec![pa.clone(), bare.clone()]).expect_err("unnamed");
    assert_eq!(
        err.to_string(),
        "pack 2: its policy snapshot (the files directly under policy/) cannot be placed beside the other packs' snapshots: its receipts do not name exactly one policy hash, so which policy it is is unknown"
    );
    // The same files as a named snapshot are that snapshot; alone, it is
    // the only one and stays as it is.
    let same = Pack {
        policy: policy_files(),
        ..Pack::default()
    };
    assert!(bytes(&merge(vec![same, pa.clone()]).expect("merge")) == bytes(&pa));
    let alone = merge(vec![bare.clone(), bare.clone()]).expect("merge");
    assert_eq!(alone.policy, other_policy());
}
