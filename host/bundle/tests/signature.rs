//! Publisher signatures: what they cover, every way they fail, the trust
//! decision; install receipts.

mod common;

use common::{other_key, packed, publisher_key, read, signed, tampered};
use hcp_bundle::receipt::{InstallReceipt, InstallRecord};
use hcp_bundle::{SignatureStatus, TrustedKey, check_trust};
use serde_json::{Value, json};

fn status(bytes: &[u8]) -> SignatureStatus {
    read(bytes).expect("readable").signature_status()
}

fn invalid(bytes: &[u8]) -> String {
    match status(bytes) {
        SignatureStatus::Invalid(reason) => reason,
        other => panic!("not invalid: {other:?}"),
    }
}

fn edit(path: &'static str, f: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    tampered(|l| {
        for (p, d) in l.iter_mut() {
            if p == path {
                f(d);
            }
        }
    })
}

fn edit_json(path: &'static str, f: impl Fn(&mut Value)) -> Vec<u8> {
    edit(path, |d| {
        let mut v: Value = serde_json::from_slice(d).expect("json");
        f(&mut v);
        *d = serde_json::to_vec_pretty(&v).expect("json");
    })
}

#[test]
fn a_signed_bundle_verifies_and_an_unsigned_one_says_so() {
    assert_eq!(packed().signature_status(), SignatureStatus::Unsigned);
    let SignatureStatus::Verified(s) = signed().signature_status() else {
        panic!("not verified");
    };
    assert_eq!(s.publisher.as_str(), "acme");
    assert_eq!(&s.public_key, publisher_key().public());
    // What is signed: the canonical manifest's digest and every other file.
    let b = signed();
    let sig = b.signature().expect("signed");
    assert_eq!(sig.signed.context, "hcp-bundle/1");
    assert_eq!(sig.signed.manifest, b.manifest_digest());
    let files: Vec<&str> = sig.signed.files.keys().map(String::as_str).collect();
    assert!(files.contains(&"component.wasm") && files.contains(&"samples/sub/b.txt"));
    assert!(!files.contains(&"manifest.json") && !files.contains(&"signature.json"));
    // Reformatting the manifest changes nothing signed (RFC 8785).
    let reformatted = edit("manifest.json", |d| {
        let v: Value = serde_json::from_slice(d).expect("json");
        *d = serde_json::to_vec(&v).expect("compact");
    });
    assert!(matches!(status(&reformatted), SignatureStatus::Verified(_)));
}

#[test]
fn a_tampered_manifest_is_named() {
    let widened = edit_json("manifest.json", |v| {
        v["grants"]["network"] = json!([{"host": "evil.example", "port": 443}]);
    });
    let b = read(&widened).expect("readable");
    assert_eq!(
        invalid(&widened),
        format!(
            "signature.json signs manifest {}, but this bundle's manifest is {}: the manifest \
             changed after signing, or the signature belongs to another bundle",
            signed().manifest_digest(),
            b.manifest_digest()
        )
    );
}

#[test]
fn a_signature_over_another_manifest_is_refused() {
    // The same publisher signs version 1.0.1; its signature is put on 1.0.0.
    let mut other = packed();
    let mut doc = other.manifest().clone();
    doc["capability"]["version"] = json!("1.0.1");
    let mut entries: Vec<(String, Vec<u8>)> =
        common::entries(&other.to_archive().expect("archive"));
    for (p, d) in &mut entries {
        if p == "manifest.json" {
            *d = serde_json::to_vec(&doc).expect("json");
        }
    }
    let raws: Vec<common::Raw<'_>> = entries
        .iter()
        .map(|(p, d)| common::Raw::file(p, d))
        .collect();
    other = read(&common::raw_tar(&raws)).expect("1.0.1");
    other
        .sign(&publisher_key(), "acme".parse().expect("name"))
        .expect("sign");
    let foreign = serde_json::to_vec_pretty(other.signature().expect("sig")).expect("json");
    let bytes = edit("signature.json", |d| d.clone_from(&foreign));
    assert_eq!(
        invalid(&bytes),
        format!(
            "signature.json signs manifest {}, but this bundle's manifest is {}: the manifest \
             changed after signing, or the signature belongs to another bundle",
            other.manifest_digest(),
            packed().manifest_digest()
        )
    );
}

#[test]
fn forged_statements_do_not_verify() {
    let key = publisher_key();
    // The statement edited to match a tampered manifest: the signature fails.
    let tampered_manifest = edit_json("manifest.json", |v| {
        v["capability"]["description"] = json!("x")
    });
    let new_digest = read(&tampered_manifest)
        .expect("readable")
        .manifest_digest()
        .to_owned();
    let forged = {
        let mut entries = common::entries(&tampered_manifest);
        for (p, d) in &mut entries {
            if p == "signature.json" {
                let mut v: Value = serde_json::from_slice(d).expect("json");
                v["signed"]["manifest"] = json!(new_digest);
                *d = serde_json::to_vec(&v).expect("json");
            }
        }
        let raws: Vec<common::Raw<'_>> = entries
            .iter()
            .map(|(p, d)| common::Raw::file(p, d))
            .collect();
        common::raw_tar(&raws)
    };
    assert_eq!(
        invalid(&forged),
        format!(
            "the signature of publisher \"acme\" (key {}) does not verify: signature.json was \
             changed, or another key signed it",
            key.key_id()
        )
    );
    // Renaming the publisher breaks it too.
    let renamed = edit_json("signature.json", |v| {
        v["signed"]["publisher"] = json!("trusted-co")
    });
    assert!(
        invalid(&renamed).starts_with("the signature of publisher \"trusted-co\""),
        "{}",
        invalid(&renamed)
    );
    // Another key's public key with the original signature.
    let swapped = edit_json("signature.json", |v| {
        v["public_key"] = json!(other_key().public().to_string());
    });
    assert_eq!(
        invalid(&swapped),
        format!(
            "signature.json names key {} but its public key has id {}",
            key.key_id(),
            other_key().key_id()
        )
    );
    // A changed data file.
    let data = edit("samples/a.md", |d| d.extend_from_slice(b"injected"));
    assert!(
        invalid(&data).starts_with("signature.json signs samples/a.md as sha256:"),
        "{}",
        invalid(&data)
    );
    // An unparsable signature file is a format error.
    let garbage = edit("signature.json", |d| *d = b"{}".to_vec());
    assert!(
        read(&garbage)
            .expect_err("garbage")
            .starts_with("signature.json: missing field `format`")
    );
}

#[test]
fn trust_is_by_key_and_name() {
    let SignatureStatus::Verified(signer) = signed().signature_status() else {
        panic!("not verified");
    };
    let key = publisher_key();
    let trusted = |name: &str, k: &hcp_receipts::HostKey| TrustedKey {
        publisher: name.parse().expect("name"),
        public_key: k.public().clone(),
    };
    assert!(check_trust(&signer, &[trusted("acme", &key)]).is_ok());
    assert_eq!(
        check_trust(&signer, &[])
            .expect_err("untrusted")
            .to_string(),
        format!(
            "publisher \"acme\" (key {}) is not trusted on this host; get the publisher's public \
             key from the publisher and add it with `hcp trust add acme <public key>` (the key, or \
             the file holding it: `hcp init` writes a host's as keys/publisher.pub)",
            key.key_id()
        )
    );
    assert_eq!(
        check_trust(&signer, &[trusted("other", &key)])
            .expect_err("renamed")
            .to_string(),
        format!(
            "the bundle is signed by key {} as publisher \"acme\", but this host trusts that key as \"other\"",
            key.key_id()
        )
    );
    assert_eq!(
        check_trust(&signer, &[trusted("acme", &other_key())])
            .expect_err("other key")
            .to_string(),
        format!(
            "the bundle is signed as publisher \"acme\" by key {}, but this host trusts \"acme\" with key {} only; \
             a name belongs to one key: another publisher signs under a name of its own \
             (`hcp bundle sign --publisher NAME`)",
            key.key_id(),
            other_key().key_id()
        )
    );
}

#[test]
fn install_receipts_verify_under_the_host_key_only() {
    let host = hcp_receipts::HostKey::from_seed(&[9; 32]);
    let b = signed();
    let record = InstallRecord {
        format: hcp_bundle::receipt::RECEIPT_FORMAT.into(),
        capability: "probe".into(),
        version: "1.0.0".into(),
        installed_at: "2026-01-01T00:00:00.000Z".into(),
        host_id: format!("host-{}", host.key_id()),
        bundle: Some("sha256:00".into()),
        manifest: b.manifest_digest().into(),
        component: b.component_digest().into(),
        files: b.file_digests(),
        world: b.doc().component.world.clone(),
        publisher: None,
        unsigned: true,
        grants: b.doc().grants.clone(),
        risk_ceiling: hcp_contracts::RiskLevel::R1,
        safety_envelope: b.doc().safety_envelope.clone(),
        imports: vec!["hcp:capability/log@1.0.0".into()],
        install_policy: Some("sha256:11".into()),
        previous: None,
        accepted_widening: vec![],
        origin: None,
    };
    let receipt = InstallReceipt::sign(record, &host).expect("sign");
    assert_eq!(receipt.verify(host.public()), Ok(()));
    let json = receipt.to_json().expect("json");
    let mut back: InstallReceipt = serde_json::from_slice(&json).expect("parse");
    assert_eq!(back.verify(host.public()), Ok(()));
    back.receipt.unsigned = false;
    assert_eq!(
        back.verify(host.public()).expect_err("changed"),
        format!(
            "signature does not verify under key {}: signed by another key, or the signed content changed",
            host.key_id()
        )
    );
    assert_eq!(
        receipt.verify(other_key().public()).expect_err("other"),
        format!(
            "signed by key {}, not this host's key {}",
            host.key_id(),
            other_key().key_id()
        )
    );
}
