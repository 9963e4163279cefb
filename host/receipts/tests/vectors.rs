//! Public vectors, kept in `tests/fixtures/`: the RFC 6962 test tree of the
//! Certificate Transparency implementations, and Wycheproof-style Ed25519
//! edge cases showing what `verify_strict` refuses.

use hcp_receipts::merkle::{self, ProofError, Tree, leaf_hash, node_hash};
use hcp_receipts::{Digest, HostKey, PublicKey, Signature};
use serde::Deserialize;
use std::path::Path;

fn fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn digest(hex: &str) -> Digest {
    Digest::from_hex(hex).expect("hex")
}

#[derive(Deserialize)]
struct TreeVectors {
    empty_root: String,
    leaf_inputs: Vec<String>,
    roots: Vec<String>,
    inclusion: Vec<Inclusion>,
    consistency: Vec<Consistency>,
}

#[derive(Deserialize)]
struct Inclusion {
    leaf_index: u64,
    tree_size: u64,
    path: Vec<String>,
}

#[derive(Deserialize)]
struct Consistency {
    old_size: u64,
    new_size: u64,
    path: Vec<String>,
}

fn rfc6962() -> (TreeVectors, Vec<Vec<u8>>, Tree) {
    let v: TreeVectors = fixture("rfc6962_vectors.json");
    let leaves: Vec<Vec<u8>> = v
        .leaf_inputs
        .iter()
        .map(|h| hex::decode(h).expect("hex"))
        .collect();
    let tree = Tree::from_data(leaves.iter().map(Vec::as_slice));
    (v, leaves, tree)
}

#[test]
fn rfc6962_roots_of_every_size() {
    let (v, leaves, tree) = rfc6962();
    assert_eq!(merkle::empty_root(), digest(&v.empty_root));
    assert_eq!(tree.root_at(0), Ok(digest(&v.empty_root)));
    for (n, root) in v.roots.iter().enumerate() {
        let size = n as u64 + 1;
        assert_eq!(tree.root_at(size), Ok(digest(root)), "size {size}");
        let hashes: Vec<Digest> = leaves[..=n].iter().map(|l| leaf_hash(l)).collect();
        assert_eq!(merkle::root(&hashes), digest(root), "size {size}");
    }
}

#[test]
fn rfc6962_inclusion_proofs() {
    let (v, leaves, tree) = rfc6962();
    for case in &v.inclusion {
        let path: Vec<Digest> = case.path.iter().map(|h| digest(h)).collect();
        let root = digest(&v.roots[case.tree_size as usize - 1]);
        let leaf = &leaves[case.leaf_index as usize];
        assert_eq!(
            tree.inclusion_proof(case.leaf_index, case.tree_size),
            Ok(path.clone())
        );
        assert_eq!(
            merkle::verify_inclusion(leaf, case.leaf_index, case.tree_size, &path, &root),
            Ok(())
        );
        // Any change fails: another leaf, another index, a shorter or altered path.
        assert!(
            merkle::verify_inclusion(b"other", case.leaf_index, case.tree_size, &path, &root)
                .is_err()
        );
        if case.tree_size > 1 {
            let other_index = (case.leaf_index + 1) % case.tree_size;
            assert!(
                merkle::verify_inclusion(leaf, other_index, case.tree_size, &path, &root).is_err()
            );
            assert!(
                merkle::verify_inclusion(leaf, case.leaf_index, case.tree_size, &path[1..], &root)
                    .is_err()
            );
            let mut altered = path.clone();
            altered[0].0[0] ^= 1;
            assert!(
                merkle::verify_inclusion(leaf, case.leaf_index, case.tree_size, &altered, &root)
                    .is_err()
            );
        }
    }
    assert_eq!(
        merkle::verify_inclusion(b"", 8, 8, &[], &digest(&v.roots[7])),
        Err(ProofError::IndexOutOfRange { index: 8, size: 8 })
    );
}

#[test]
fn rfc6962_consistency_proofs() {
    let (v, _, tree) = rfc6962();
    for case in &v.consistency {
        let path: Vec<Digest> = case.path.iter().map(|h| digest(h)).collect();
        let old = digest(&v.roots[case.old_size as usize - 1]);
        let new = digest(&v.roots[case.new_size as usize - 1]);
        assert_eq!(
            tree.consistency_proof(case.old_size, case.new_size),
            Ok(path.clone())
        );
        assert_eq!(
            merkle::verify_consistency(case.old_size, case.new_size, &old, &new, &path),
            Ok(())
        );
        if !path.is_empty() {
            let mut altered = path.clone();
            let last = altered.len() - 1;
            altered[last].0[31] ^= 1;
            assert!(
                merkle::verify_consistency(case.old_size, case.new_size, &old, &new, &altered)
                    .is_err()
            );
            // The new root of another tree: a fork.
            let other = digest(&v.roots[0]);
            assert!(
                merkle::verify_consistency(case.old_size, case.new_size, &old, &other, &path)
                    .is_err()
            );
        }
    }
    // A smaller tree is never an extension.
    assert_eq!(
        merkle::verify_consistency(5, 3, &digest(&v.roots[4]), &digest(&v.roots[2]), &[]),
        Err(ProofError::Shrunk { old: 5, new: 3 })
    );
}

#[test]
fn a_leaf_hash_passed_as_a_node_fails() {
    let (v, leaves, tree) = rfc6962();
    let root4 = digest(&v.roots[3]);
    let l: Vec<Digest> = leaves[..4].iter().map(|d| leaf_hash(d)).collect();
    let n01 = node_hash(&l[0], &l[1]);
    let n23 = node_hash(&l[2], &l[3]);
    assert_eq!(node_hash(&n01, &n23), root4);
    // Without distinct prefixes, "a tree of two leaves n01 and n23" would have
    // the same root: present n01 as leaf 0 of 2 with path [n23].
    // 1. As leaf data, n01 is hashed with the leaf prefix: refused.
    assert!(matches!(
        merkle::verify_inclusion(&n01.0, 0, 2, &[n23], &root4),
        Err(ProofError::RootMismatch { .. })
    ));
    // 2. The 64 bytes under n01 (l0 || l1) as one leaf: refused.
    let concatenated = [l[0].0, l[1].0].concat();
    assert!(merkle::verify_inclusion(&concatenated, 0, 2, &[n23], &root4).is_err());
    // 3. And against the real size 4 the shortened path is refused too.
    assert!(merkle::verify_inclusion(&n01.0, 0, 4, &[n23], &root4).is_err());
    // The genuine proof of leaf 0 passes.
    let proof = tree.inclusion_proof(0, 4).expect("proof");
    assert_eq!(
        merkle::verify_inclusion(&leaves[0], 0, 4, &proof, &root4),
        Ok(())
    );
}

#[derive(Deserialize)]
struct EdCases {
    tests: Vec<EdCase>,
}

#[derive(Deserialize)]
struct EdCase {
    #[serde(rename = "tcId")]
    tc_id: u32,
    comment: String,
    public_key: String,
    message: String,
    signature: String,
    strict: String,
    lax: String,
}

#[test]
fn ed25519_edge_cases() {
    let cases: EdCases = fixture("ed25519_edge_cases.json");
    assert!(cases.tests.len() >= 6);
    for case in &cases.tests {
        let what = format!("tcId {} ({})", case.tc_id, case.comment);
        let pk_bytes: [u8; 32] = hex::decode(&case.public_key)
            .expect("hex")
            .try_into()
            .expect("32");
        let sig_bytes: [u8; 64] = hex::decode(&case.signature)
            .expect("hex")
            .try_into()
            .expect("64");
        let message = hex::decode(&case.message).expect("hex");
        let key = PublicKey::from_bytes(&pk_bytes).expect(&what);
        let strict = match key.verify_strict(&message, &Signature(sig_bytes)) {
            Ok(()) => "valid".to_owned(),
            Err(e) => format!("{e:?}")
                .split('(')
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        assert_eq!(strict, case.strict, "{what}");
        // ed25519-dalek's own verify_strict agrees.
        let dalek = ed25519_dalek::VerifyingKey::from_bytes(&pk_bytes).expect("point");
        let dalek_strict = dalek
            .verify_strict(&message, &ed25519_dalek::Signature::from_bytes(&sig_bytes))
            .is_ok();
        assert_eq!(
            dalek_strict,
            case.strict == "valid",
            "{what}: dalek's own verify_strict agrees"
        );
        // What the plain (cofactorless, non-strict) check says, for contrast.
        let lax = ed25519_dalek::Verifier::verify(
            &dalek,
            &message,
            &ed25519_dalek::Signature::from_bytes(&sig_bytes),
        )
        .is_ok();
        assert_eq!(
            if lax { "valid" } else { "invalid" },
            case.lax,
            "{what}: plain verify"
        );
    }
}

#[test]
fn rfc8032_test_1_signs_deterministically() {
    let seed: [u8; 32] =
        hex::decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
            .expect("hex")
            .try_into()
            .expect("32");
    let key = HostKey::from_seed(&seed);
    assert_eq!(
        key.public().to_string(),
        "ed25519:d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    );
    assert_eq!(
        hex::encode(key.sign(b"").0),
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    );
}
