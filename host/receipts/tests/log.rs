//! The host log: what it signs, when it checkpoints, how it recovers, and
//! how the clocks of several hosts merge into one DAG.

mod common;

use common::{HOST_A, key_a, world};
use hcp_contracts::RiskLevel;
use hcp_receipts::dag::{self, Node};
use hcp_receipts::log::LogError;
use hcp_receipts::receipt::Verdict;
use hcp_receipts::{Digest, Draft, HostLog, LogState, SigningPolicy, reason};

fn draft(timestamp: &str) -> Draft {
    Draft {
        session_id: Some("s-9".into()),
        task_id: None,
        capability: "document-analysis@1.0.0".into(),
        call: "fs.open".into(),
        args_hash: Digest::of(b"{}"),
        input_hash: Digest::of(b"{}"),
        verdict: Verdict::Allow,
        reason_code: reason::ALLOW.into(),
        risk: RiskLevel::R1,
        policy_hash: Digest::of(b"policy"),
        parents: vec![],
        timestamp: timestamp.into(),
    }
}

fn policy() -> SigningPolicy {
    SigningPolicy {
        checkpoint_every: Some(4),
        ..SigningPolicy::default()
    }
}

#[test]
fn denies_and_high_risk_are_signed_low_risk_allows_are_not() {
    let (a, b) = world("x");
    let signed: Vec<&str> = a
        .receipts
        .iter()
        .chain(&b.receipts)
        .filter(|r| r.is_signed())
        .map(|r| r.receipt_id.as_str())
        .collect();
    // host-a:3 net.connect DENY, :5 R4 ALLOW, :7 R5 DENY; host-b:1 net.connect DENY.
    assert_eq!(signed, ["host-a:3", "host-a:5", "host-a:7", "host-b:1"]);
    for r in a.receipts.iter().filter(|r| r.is_signed()) {
        assert_eq!(
            r.verify_signature(key_a().public()),
            Ok(()),
            "{}",
            r.receipt_id
        );
    }
}

#[test]
fn checkpoints_every_n_receipts_and_on_demand_are_linked() {
    let (a, _) = world("x");
    let sizes: Vec<u64> = a.checkpoints.iter().map(|c| c.tree_size).collect();
    assert_eq!(sizes, [4, 8, 12, 13]);
    assert_eq!(a.checkpoints[0].prev_checkpoint, None);
    for pair in a.checkpoints.windows(2) {
        assert_eq!(pair[1].prev_checkpoint, Some(pair[0].hash().expect("hash")));
    }
    for cp in &a.checkpoints {
        assert_eq!(cp.verify_signature(key_a().public()), Ok(()));
        assert_eq!(cp.head, Some(a.hashes[cp.tree_size as usize - 1]));
    }
    assert_eq!(a.checkpoints[3].root_hash, a.log.root());
}

#[test]
fn recovery_from_stored_receipts_and_from_saved_state_agree() {
    let (mut a, _) = world("x");
    let recovered =
        HostLog::recover(HOST_A, key_a(), policy(), &a.receipts, &a.checkpoints).expect("recover");
    assert_eq!(recovered.state(), a.log.state());
    let saved = serde_json::to_string(a.log.state()).expect("save");
    let state: LogState = serde_json::from_str(&saved).expect("load");
    let mut resumed = HostLog::resume(state, key_a(), policy()).expect("resume");
    let next = draft("2026-03-01T12:00:00Z");
    let live = a.log.append(next.clone()).expect("live");
    let again = resumed.append(next).expect("resumed");
    assert_eq!(live, again);
    assert_eq!(live.receipt.seq, 13);
    assert_eq!(live.receipt.prev_hash, Some(a.hashes[12]));
}

#[test]
fn recovery_refuses_a_broken_log() {
    let (a, _) = world("x");
    let mut swapped = a.receipts.clone();
    swapped.swap(2, 3);
    let err =
        HostLog::recover(HOST_A, key_a(), policy(), &swapped, &a.checkpoints).expect_err("broken");
    assert_eq!(
        err.to_string(),
        "log host-a: cannot recover: expected receipt host-a:2, found host-a:3"
    );
    let mut checkpoints = a.checkpoints.clone();
    checkpoints.swap(0, 1);
    let err = HostLog::recover(HOST_A, key_a(), policy(), &a.receipts, &checkpoints)
        .expect_err("out of order");
    assert_eq!(
        err.to_string(),
        "log host-a: cannot recover: checkpoint at size 8 does not link to the previous one"
    );
}

#[test]
fn a_refused_draft_leaves_the_state_alone() {
    let mut log = HostLog::new(HOST_A, key_a(), policy()).expect("log");
    log.append(draft("2026-03-01T12:00:00Z")).expect("first");
    let before = log.state().clone();
    let err = log.append(draft("yesterday")).expect_err("timestamp");
    assert!(
        err.to_string()
            .starts_with("log host-a: refusing a draft: timestamp \"yesterday\" is not RFC 3339"),
        "{err}"
    );
    let mut bad = draft("2026-03-01T12:00:01Z");
    bad.reason_code = reason::DENY_ARGS_INVALID.into();
    let err = log.append(bad).expect_err("allow with a deny reason");
    assert!(matches!(err, LogError::Draft { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "log host-a: refusing a draft: receipt host-a:1: an ALLOW carries reason_code ALLOW, not DENY_ARGS_INVALID"
    );
    assert_eq!(log.state(), &before);
    assert!(HostLog::new("../etc", key_a(), policy()).is_err());
}

#[test]
fn lamport_clocks_merge_across_hosts_into_one_dag() {
    let (a, b) = world("x");
    let admitted = &a.receipts[0];
    // host-b's first receipt names host-a's admission and comes after it.
    assert_eq!(b.receipts[0].parents, vec![a.hashes[0]]);
    assert_eq!(b.receipts[0].lamport, admitted.lamport + 1);
    // A parent with a larger clock pushes the local clock past it.
    let mut log = HostLog::new("host-c", key_a(), policy()).expect("log");
    let mut d = draft("2026-03-01T12:00:00Z");
    d.parents = vec![a.receipts[12].as_parent().expect("parent")];
    let r = log.append(d).expect("append").receipt;
    assert_eq!(r.lamport, a.receipts[12].lamport + 1);

    let nodes: Vec<Node<'_>> = a
        .receipts
        .iter()
        .zip(&a.hashes)
        .chain(b.receipts.iter().zip(&b.hashes))
        .map(|(receipt, hash)| Node {
            hash: *hash,
            receipt,
        })
        .collect();
    assert!(dag::check_graph(&nodes, &Default::default()).is_empty());
    let order = dag::merge_order(&nodes);
    let position: std::collections::HashMap<Digest, usize> = order
        .iter()
        .enumerate()
        .map(|(p, &i)| (nodes[i].hash, p))
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        for parent in node
            .receipt
            .parents
            .iter()
            .chain(node.receipt.prev_hash.as_ref())
        {
            assert!(
                position[parent] < position[&nodes[i].hash],
                "parents come first"
            );
        }
    }
    // Ties in the clock are broken by host id, then hash.
    let keys: Vec<(u64, &str)> = order
        .iter()
        .map(|&i| (nodes[i].receipt.lamport, nodes[i].receipt.host_id.as_str()))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[test]
fn a_cycle_and_a_clock_going_backwards_are_reported() {
    let (a, _) = world("x");
    let mut r0 = a.receipts[0].clone();
    let mut r1 = a.receipts[1].clone();
    // Forge hashes that point at each other (impossible with real hashes,
    // which is why check_graph takes them as given).
    let (h0, h1) = (Digest::of(b"zero"), Digest::of(b"one"));
    r0.parents = vec![h1];
    r1.parents = vec![h0];
    r1.prev_hash = None;
    let nodes = [
        Node {
            hash: h0,
            receipt: &r0,
        },
        Node {
            hash: h1,
            receipt: &r1,
        },
    ];
    let problems: Vec<String> = dag::check_graph(&nodes, &Default::default())
        .iter()
        .map(|i| format!("{}: {}", i.node, i.problem))
        .collect();
    assert_eq!(
        problems,
        [
            format!(
                "0: lamport {} is not above parent {h1}'s {}",
                r0.lamport, r1.lamport
            ),
            "0: is on a cycle of parent links".to_owned(),
            "1: is on a cycle of parent links".to_owned(),
        ]
    );
}

/// `append_into` a receipt kept from one append to the next makes the same
/// receipts, hashes and checkpoints as `append`: nothing of the receipt
/// before stays behind (a signature after a signed one, a session or task
/// after one with them, longer strings, more parents), also after a draft
/// the log refused.
#[test]
fn a_receipt_filled_again_is_the_receipt_append_makes() {
    let mut owned = HostLog::new(HOST_A, key_a(), policy()).expect("log");
    let mut reused = HostLog::new(HOST_A, key_a(), policy()).expect("log");
    let mut slot = hcp_receipts::Receipt::blank();
    let mut drafts = Vec::new();
    let mut d = draft("2026-03-01T12:00:00Z");
    d.task_id = Some("t-a-much-longer-task-id-than-the-next".into());
    d.parents = vec![
        hcp_receipts::Parent {
            hash: Digest::of(b"p1"),
            lamport: 7,
        },
        hcp_receipts::Parent {
            hash: Digest::of(b"p2"),
            lamport: 3,
        },
    ];
    drafts.push(d);
    let mut deny = draft("2026-03-01T12:00:00.5Z");
    deny.verdict = Verdict::Deny;
    deny.reason_code = reason::DENY_ARGS_INVALID.into();
    deny.call = "net.connect".into();
    drafts.push(deny);
    let mut plain = draft("2026-03-01T12:00:01Z");
    plain.session_id = None;
    plain.capability = "x@1".into();
    drafts.push(plain);
    let mut refused = draft("2026-03-01T12:00:01Z");
    refused.reason_code = reason::DENY_ARGS_INVALID.into();
    drafts.push(refused);
    let mut high = draft("2026-03-01T12:00:02Z");
    high.risk = RiskLevel::R4;
    high.task_id = Some("t".into());
    drafts.push(high);
    drafts.extend((0..6).map(|i| draft(&format!("2026-03-01T12:00:0{}Z", 3 + i % 2))));

    let mut stored = 0;
    for d in drafts {
        match (
            owned.append(d.clone()),
            reused.append_into(d.as_ref(), &mut slot),
        ) {
            (Ok(a), Ok(placed)) => {
                assert_eq!(slot, a.receipt, "{}", a.receipt.receipt_id);
                assert_eq!(placed.hash, a.hash);
                assert_eq!(placed.hash, slot.hash().expect("hash"));
                assert_eq!(placed.checkpoint, a.checkpoint);
                stored += 1;
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("append {a:?}, append_into {b:?}"),
        }
        assert_eq!(reused.state(), owned.state());
    }
    assert_eq!(stored, 10);
    assert!(
        owned.state().last_checkpoint.is_some(),
        "a checkpoint was made on the way"
    );
}
