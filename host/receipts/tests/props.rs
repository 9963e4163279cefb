//! Property tests: Merkle proofs over random sizes, and the receipt's
//! canonical form against the reference RFC 8785 implementation.

use hcp_contracts::RiskLevel;
use hcp_receipts::merkle::{self, Frontier, InclusionVerifier, Tree, leaf_hash};
use hcp_receipts::receipt::{Head, RECEIPT_DOMAIN, RECEIPT_VERSION, Receipt, Verdict};
use hcp_receipts::{Digest, HostKey};
use proptest::prelude::*;

fn tree(size: u64) -> Tree {
    Tree::from_leaf_hashes((0..size).map(|i| leaf_hash(&i.to_le_bytes())).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn inclusion_proofs_verify_and_bind_leaf_and_index(size in 1u64..700, pick in any::<u64>(), flip in any::<usize>()) {
        let t = tree(size);
        let index = pick % size;
        let root = t.root_at(size).expect("root");
        let proof = t.inclusion_proof(index, size).expect("proof");
        let data = index.to_le_bytes();
        prop_assert_eq!(merkle::verify_inclusion(&data, index, size, &proof, &root), Ok(()));
        prop_assert!(merkle::verify_inclusion(&(index + 1).to_le_bytes(), index, size, &proof, &root).is_err());
        if size > 1 {
            let other = (index + 1 + pick % (size - 1)) % size;
            prop_assert!(merkle::verify_inclusion(&data, other, size, &proof, &root).is_err());
        }
        if !proof.is_empty() {
            let mut bad = proof.clone();
            let at = flip % bad.len();
            bad[at].0[flip % 32] ^= 0x80;
            prop_assert!(merkle::verify_inclusion(&data, index, size, &bad, &root).is_err());
            prop_assert!(merkle::verify_inclusion(&data, index, size, &proof[..proof.len() - 1], &root).is_err());
        }
    }

    #[test]
    fn consistency_proofs_verify_between_any_two_sizes(new in 1u64..700, pick in any::<u64>(), flip in any::<usize>()) {
        let t = tree(new);
        let old = pick % (new + 1);
        let (old_root, new_root) = (t.root_at(old).expect("old"), t.root_at(new).expect("new"));
        let proof = t.consistency_proof(old, new).expect("proof");
        prop_assert_eq!(merkle::verify_consistency(old, new, &old_root, &new_root, &proof), Ok(()));
        if !proof.is_empty() {
            let mut bad = proof.clone();
            let at = flip % bad.len();
            bad[at].0[flip % 32] ^= 1;
            prop_assert!(merkle::verify_consistency(old, new, &old_root, &new_root, &bad).is_err());
        }
        if old > 0 && old < new {
            // Another history of the same sizes is not consistent.
            let other = Tree::from_leaf_hashes((0..new).map(|i| leaf_hash(&(i + 1).to_le_bytes())).collect());
            let other_new = other.root_at(new).expect("root");
            prop_assert!(merkle::verify_consistency(old, new, &old_root, &other_new, &proof).is_err());
        }
    }

    #[test]
    fn the_memoized_verifier_agrees_with_the_one_off_check(size in 1u64..300, tamper in proptest::collection::vec(any::<(u64, usize, u8)>(), 0..8)) {
        let t = tree(size);
        let root = t.root_at(size).expect("root");
        let mut v = InclusionVerifier::new(size, root);
        for i in 0..size {
            let mut proof = t.inclusion_proof(i, size).expect("proof");
            // Now and then a tampered hash at a random height.
            if let Some(&(_, at, bit)) = tamper.iter().find(|(leaf, _, _)| leaf % size == i)
                && !proof.is_empty()
            {
                let at = at % proof.len();
                proof[at].0[usize::from(bit) % 32] ^= 1 << (bit % 8);
            }
            let data = i.to_le_bytes();
            prop_assert_eq!(v.verify(&data, i, &proof), merkle::verify_inclusion(&data, i, size, &proof, &root));
        }
    }

    #[test]
    fn frontier_and_tree_agree(size in 0u64..700) {
        let t = tree(size);
        let mut f = Frontier::default();
        for i in 0..size {
            f.push(leaf_hash(&i.to_le_bytes()));
        }
        prop_assert_eq!(f.root(), t.root_at(size).expect("root"));
        prop_assert_eq!(t.frontier_at(size).expect("frontier"), f);
    }

    #[test]
    fn canonical_form_matches_rfc_8785(
        call in "\\PC{1,20}",
        session in proptest::option::of(".{1,12}"),
        control in proptest::collection::vec(0u8..0x20, 0..4),
        suffix in prop_oneof![Just(""), Just("\u{7f}\u{2028}\"\\/é€😀"), Just("\\"), Just("\"")],
        task in proptest::option::of("[ -~]{1,12}"),
        seq in 1u64..(1 << 53),
        lamport in 0u64..(1 << 53),
        signed in any::<bool>(),
    ) {
        let control: String = control.into_iter().map(char::from).collect();
        let mut r = Receipt {
            args_hash: Digest::of(call.as_bytes()),
            call: format!("{call}{control}{suffix}"),
            capability: "x@1".into(),
            host_id: "h".into(),
            input_hash: Digest::of(b"i"),
            key_id: None,
            lamport,
            parents: vec![Digest::of(b"a"), Digest::of(b"b")],
            policy_hash: Digest::of(b"p"),
            prev_hash: Some(Digest::of(b"prev")),
            reason_code: "ALLOW".into(),
            receipt_id: format!("h:{seq}"),
            risk: RiskLevel::R3,
            seq,
            session_id: session,
            signature: None,
            task_id: task,
            timestamp: "2026-01-01T00:00:00Z".into(),
            verdict: Verdict::Allow,
            version: RECEIPT_VERSION,
        };
        if signed {
            r.sign(&HostKey::from_seed(&[9; 32])).expect("sign");
        }
        let reference = hcp_contracts::jcs::canonical_bytes(&r).expect("jcs");
        prop_assert_eq!(r.canonical_bytes().expect("bytes"), reference);
        // What the signature covers: the domain, then the canonical form
        // with `signature` null.
        let mut unsigned = r.clone();
        unsigned.signature = None;
        let mut signed_part = RECEIPT_DOMAIN.to_vec();
        signed_part.extend(hcp_contracts::jcs::canonical_bytes(&unsigned).expect("jcs"));
        prop_assert_eq!(r.signing_bytes().expect("signing bytes"), signed_part);
        let back: Receipt = serde_json::from_slice(&r.canonical_bytes().expect("bytes")).expect("parse");
        prop_assert_eq!(back, r);
    }

    /// A receipt's hash taken on from a head made ahead from its fields is
    /// its hash; a head made for the other signing is not taken on.
    #[test]
    fn a_head_hashes_as_the_whole_form(
        call in "\\PC{1,20}",
        capability in "[a-z-]{1,40}@[0-9.]{1,8}",
        host in "[a-z0-9-]{1,64}",
        control in proptest::collection::vec(0u8..0x20, 0..2),
        signed in any::<bool>(),
        guess_signed in any::<bool>(),
        seq in 1u64..(1 << 53),
    ) {
        let control: String = control.into_iter().map(char::from).collect();
        let mut r = Receipt::blank();
        r.args_hash = Digest::of(call.as_bytes());
        r.call = format!("{call}{control}");
        r.capability = capability;
        r.host_id = host.clone();
        r.input_hash = Digest::of(b"i");
        r.lamport = seq;
        r.parents = vec![Digest::of(b"a")];
        r.receipt_id = format!("{host}:{seq}");
        r.seq = seq;
        r.timestamp = "2026-01-01T00:00:00Z".into();
        if signed {
            r.sign(&HostKey::from_seed(&[9; 32])).expect("sign");
        }
        let whole = r.hash().expect("hash");
        let mut scratch = Vec::new();
        let head = Head::new(&r.args_hash, &r.call, &r.capability, &r.host_id, &r.input_hash, guess_signed, &mut scratch);
        let after = r.hash_after(&head, &mut scratch).expect("hash");
        prop_assert_eq!(after, (guess_signed == signed).then_some(whole));
    }
}
