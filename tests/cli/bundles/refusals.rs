//! Every refused bundle, with its exact message and nothing left behind:
//! signatures, hostile archives, world versions, the install policy, the
//! surface audit; malformed invocations.

use super::*;

#[test]
fn signatures_that_do_not_hold_are_refused() {
    let lab = Lab::new();
    let bundle = lab.trivial("1.0.0", json!({}));
    // Untrusted publisher: --allow-unsigned does not help a signed bundle.
    for flags in [&[][..], &["--allow-unsigned"][..]] {
        lab.refused(
            &bundle,
            flags,
            "publisher \"acme\" (key <key-id>) is not trusted on this host; get the publisher's \
             public key from the publisher and add it with `hcp trust add acme <public key>` (the key, \
         or the file holding it: `hcp init` writes a host's as keys/publisher.pub)",
        );
    }
    lab.trust("acme");
    // Tampered component: one byte appended, signature kept.
    let out = lab.work.path().join("tampered-component.hcpb");
    rewrite(&bundle, &out, |e| {
        for (p, d) in e.iter_mut() {
            if p == "component.wasm" {
                d.push(0);
            }
        }
    });
    lab.refused(
        &out,
        &[],
        "component.wasm does not match the manifest: it has sha256:<digest>, the manifest pins sha256:<digest>",
    );
    // Tampered manifest: a grant added after signing.
    let out = lab.work.path().join("tampered-manifest.hcpb");
    rewrite(&bundle, &out, |e| {
        edit_manifest(e, |m| {
            m["grants"] = json!({"network": [{"host": "example.com", "port": 443}]})
        });
    });
    lab.refused(
        &out,
        &[],
        "signature.json signs manifest sha256:<digest>, but this bundle's manifest is sha256:<digest>: \
         the manifest changed after signing, or the signature belongs to another bundle",
    );
    // A valid signature of another manifest (version 1.0.1 of the same
    // capability, same publisher) on this bundle.
    let other = lab.trivial("1.0.1", json!({}));
    let other_sig = entry(&other, "signature.json");
    let out = lab.work.path().join("foreign-signature.hcpb");
    rewrite(&bundle, &out, |e| {
        for (p, d) in e.iter_mut() {
            if p == "signature.json" {
                d.clone_from(&other_sig);
            }
        }
    });
    lab.refused(
        &out,
        &[],
        "signature.json signs manifest sha256:<digest>, but this bundle's manifest is sha256:<digest>: \
         the manifest changed after signing, or the signature belongs to another bundle",
    );
    // The statement forged to match the tampered manifest: the signature fails.
    let tampered = lab.work.path().join("tampered-manifest.hcpb");
    let digest = Bundle::read(&std::fs::read(&tampered).expect("read"), &Limits::default())
        .expect("readable")
        .manifest_digest()
        .to_owned();
    let out = lab.work.path().join("forged.hcpb");
    rewrite(&tampered, &out, |e| {
        for (p, d) in e.iter_mut() {
            if p == "signature.json" {
                let mut v: Value = serde_json::from_slice(d).expect("json");
                v["signed"]["manifest"] = json!(digest);
                *d = serde_json::to_vec(&v).expect("json");
            }
        }
    });
    lab.refused(
        &out,
        &[],
        "the signature of publisher \"acme\" (key <key-id>) does not verify: signature.json was \
         changed, or another key signed it",
    );
    // Signed by the trusted key under another name.
    let renamed = lab.work.path().join("renamed.hcpb");
    std::fs::copy(&bundle, &renamed).expect("copy");
    lab.sign(&renamed, "impostor");
    lab.refused(
        &renamed,
        &[],
        "the bundle is signed by key <key-id> as publisher \"impostor\", but this host trusts that key as \"acme\"",
    );
    lab.ok(&["install", s(&bundle)]);
    lab.nothing_half_installed(&["trivial@1.0.0".to_owned()]);
}

#[test]
fn hostile_archives_are_refused() {
    let lab = Lab::new();
    lab.trust("acme");
    let good = lab.trivial("1.0.0", json!({}));
    let compressed = std::fs::read(&good).expect("read");
    assert!(
        compressed.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]),
        "packed bundles are compressed"
    );
    let bytes = archive(&good);
    let write = |name: &str, data: &[u8]| {
        let p = lab.work.path().join(name);
        std::fs::write(&p, data).expect("write");
        p
    };
    let manifest = entry(&good, "manifest.json");
    let cases: Vec<(PathBuf, String)> = vec![
        (
            write("not-a-tar.hcpb", &br#"{"hello": "world"}"#.repeat(30)),
            "not a bundle: neither a zstd frame nor a tar archive (the first block is not a tar header)".into(),
        ),
        (
            write("empty.hcpb", b""),
            "not a bundle: 0 bytes, shorter than one 512-byte tar header".into(),
        ),
        (
            write("truncated.hcpb", &compressed[..compressed.len() / 2]),
            "truncated bundle: the zstd frame ends early".into(),
        ),
        (
            write("truncated-tar.hcpb", &bytes[..bytes.len() / 2 + 100]),
            format!(
                "truncated bundle: {} bytes is not a whole number of 512-byte tar blocks",
                bytes.len() / 2 + 100
            ),
        ),
        (
            write("trailing.hcpb", &[compressed.as_slice(), b"#!/bin/sh"].concat()),
            "not a bundle: 9 bytes after the zstd frame".into(),
        ),
        (
            write("no-end.hcpb", &bytes[..bytes.len() - 1024]),
            "truncated bundle: the archive ends without its end-of-archive marker (two zero blocks)".into(),
        ),
        (
            write("dotdot.hcpb", &raw_tar(&[(b"../../.bashrc", tar::EntryType::Regular, b"evil")])),
            "entry \"../../.bashrc\" escapes the bundle (absolute path or `..`)".into(),
        ),
        (
            write("absolute.hcpb", &raw_tar(&[(b"/etc/cron.d/evil", tar::EntryType::Regular, b"evil")])),
            "entry \"/etc/cron.d/evil\" escapes the bundle (absolute path or `..`)".into(),
        ),
        (
            write("symlink.hcpb", &raw_tar(&[(b"manifest.json", tar::EntryType::Symlink, b"")])),
            "entry \"manifest.json\" is a link; a bundle holds regular files only".into(),
        ),
        (
            write("hardlink.hcpb", &raw_tar(&[(b"component.wasm", tar::EntryType::Link, b"")])),
            "entry \"component.wasm\" is a link; a bundle holds regular files only".into(),
        ),
        (
            write("pax.hcpb", &raw_tar(&[(b"PaxHeader", tar::EntryType::XHeader, b"30 path=../../etc/passwd\n")])),
            "entry \"PaxHeader\" is a PAX or GNU extension header (tar type 'x'); bundles use plain ustar headers".into(),
        ),
        (
            write("directory.hcpb", &raw_tar(&[(b"wit/", tar::EntryType::Directory, b"")])),
            "entry \"wit/\" is not a regular file (tar type '5'); a bundle holds regular files only".into(),
        ),
        (
            write(
                "oversized.hcpb",
                &raw_tar(&[(b"manifest.json", tar::EntryType::Regular, &vec![b' '; (1 << 20) + 1])]),
            ),
            "entry \"manifest.json\" has 1048577 bytes, over the limit of 1048576 for the manifest".into(),
        ),
        (
            // A few hundred bytes that decompress to a manifest over its limit.
            write(
                "oversized-compressed.hcpb",
                &hcp_bundle::container::compress(&raw_tar(&[(
                    b"manifest.json",
                    tar::EntryType::Regular,
                    &vec![b' '; 4 << 20],
                )]))
                .expect("compress"),
            ),
            "entry \"manifest.json\" has 4194304 bytes, over the limit of 1048576 for the manifest".into(),
        ),
        (
            write(
                "duplicate.hcpb",
                &raw_tar(&[
                    (b"manifest.json", tar::EntryType::Regular, &manifest),
                    (b"manifest.json", tar::EntryType::Regular, &manifest),
                ]),
            ),
            "entry \"manifest.json\" appears twice".into(),
        ),
    ];
    for (path, message) in cases {
        lab.refused(&path, &[], &message);
    }
    let unexpected = lab.work.path().join("unexpected.hcpb");
    rewrite(&good, &unexpected, |e| {
        e.push(("install.sh".into(), b"#!/bin/sh\n".to_vec()))
    });
    lab.refused(
        &unexpected,
        &[],
        "unexpected entry \"install.sh\": a bundle holds manifest.json, component.wasm, wit/*.wit, \
         signature.json, and files under directories its manifest grants read-only as ${manifest_dir}/<dir>",
    );
    // Review refuses them the same way (exit 2: nothing to review).
    let out = lab
        .hcp
        .run(&["review", s(&lab.work.path().join("dotdot.hcpb"))]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        lab.portable(&stderr(&out)),
        "error: <work>/dotdot.hcpb: entry \"../../.bashrc\" escapes the bundle (absolute path or `..`)\n"
    );
}

/// Re-signs `bundle` with the lab key after `edit`, as a publisher would
/// sign a bundle this host must refuse on its merits.
fn resigned(lab: &Lab, bundle: &Path, out: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let raw = lab.work.path().join(format!("{out}.raw"));
    rewrite(bundle, &raw, |e| edit_manifest(e, edit));
    let mut b = Bundle::read(&std::fs::read(&raw).expect("read"), &Limits::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let key = hcp_receipts::HostKey::load(&lab.key).expect("key");
    b.sign(&key, "acme".parse().expect("name")).expect("sign");
    let path = lab.work.path().join(out);
    std::fs::write(&path, b.to_bytes().expect("bytes")).expect("write");
    path
}

#[test]
fn world_versions_policy_and_surface_are_checked() {
    let lab = Lab::new();
    lab.trust("acme");
    let good = lab.trivial("1.0.0", json!({}));
    for (version, expected) in [
        (
            "2.0.0",
            "the bundle targets hcp:capability@2.0.0 but this host implements hcp:capability@1.0.0: \
             a host runs components of the same major version, not newer than its own",
        ),
        (
            "1.1.0",
            "the bundle targets hcp:capability@1.1.0 but this host implements hcp:capability@1.0.0: \
             a host runs components of the same major version, not newer than its own",
        ),
    ] {
        let bundle = resigned(&lab, &good, &format!("world-{version}.hcpb"), |m| {
            m["component"]["world"] = json!(format!("hcp:capability/capability@{version}"));
        });
        lab.refused(&bundle, &[], expected);
    }
    // Beyond the install policy (policies/install.json): R5, a directory
    // outside its roots, a forbidden destination, one it does not list, an
    // environment variable it does not list.
    let risky = resigned(&lab, &good, "risky.hcpb", |m| {
        m["capability"]["safety"]["risk_ceiling"] = json!("R5");
        m["grants"] = json!({
            "filesystem": [{"path": "/etc", "access": "read-only"}],
            "network": [{"host": "169.254.169.254", "port": 80}, {"host": "example.org", "port": 443}],
            "env": ["AWS_SECRET_ACCESS_KEY"]
        });
    });
    lab.refused(
        &risky,
        &[],
        "refused by the install policy <repo>/policies/install.json:\n  \
         risk_ceiling R5 is above the highest this host installs (max_risk_ceiling R4)\n  \
         grants.filesystem[0] /etc (read-only): /etc is outside the allowed roots \
         (/srv/hcp/shared read-only, /srv/hcp/scratch read-write)\n  \
         grants.network[0] 169.254.169.254:80 is forbidden (network.deny \"169.254.169.254\")\n  \
         grants.network[1] example.org:443 is not a destination this host admits (network.allow)\n  \
         grants.env[0] AWS_SECRET_ACCESS_KEY is not admitted (env lists nothing)",
    );
    // An invalid manifest (a grant of a directory that does not exist).
    let missing = resigned(&lab, &good, "missing-dir.hcpb", |m| {
        m["grants"] = json!({"filesystem": [{"path": "/nonexistent/data", "access": "read-only"}]});
    });
    lab.refused(
        &missing,
        &[],
        "manifest.json: invalid manifest:\n  /grants/filesystem/0/path: /nonexistent/data: No such file or directory (os error 2)",
    );

    // A component importing what its grants do not allow: the report on
    // stdout, the refusal on stderr.
    let dir = lab.work.path().join("undeclared");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::copy(hcp_tests::UNDECLARED_IMPORT, dir.join("u.wasm")).expect("copy");
    ManifestBuilder::new("undeclared", "u.wasm").write(&dir);
    let bundle = lab.pack(&dir, "undeclared.hcpb");
    lab.sign(&bundle, "acme");
    let out = lab.install(&bundle, &[]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains(
        "REFUSED  evil:backdoor/shell@1.0.0  (evil:backdoor is not provided by this host)"
    ));
    assert_eq!(
        lab.portable(&stderr(&out)),
        "error: <work>/undeclared.hcpb: undeclared@1.0.0: the component imports interfaces its \
         manifest does not grant:\n  evil:backdoor/shell@1.0.0: evil:backdoor is not provided by this host\n\
         nothing was installed\n"
    );
    lab.nothing_half_installed(&[]);
}

#[test]
fn malformed_invocations_exit_2_with_a_clear_error() {
    let lab = Lab::new();
    let readme = format!("{REPO_ROOT}/README.md");
    let existing = s(&lab.key).to_owned();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["trust", "add", "acme", "ed25519:zz"],
            "error: \"ed25519:zz\" is not a public key (\"ed25519:<64 hex digits>\")\n".into(),
        ),
        (
            vec!["trust", "add", "acme", "/nonexistent.pub"],
            "error: \"/nonexistent.pub\" is neither a public key (ed25519:<64 hex digits>) nor a \
             file holding one\n"
                .into(),
        ),
        (
            vec!["trust", "remove", "nobody"],
            "error: publisher nobody is not trusted (hcp trust list)\n".into(),
        ),
        (
            vec!["inspect", "@"],
            "error: @ is not installed (hcp list)\n".into(),
        ),
        (
            vec!["remove", "a@b@c"],
            "error: a@b@c is not installed (hcp list)\n".into(),
        ),
        (
            vec!["keys", "generate", "--out", &existing],
            "error: <work>/publisher.key exists already: a key file is never replaced\n".into(),
        ),
        (
            vec!["bundle", "pack", "/nonexistent", "-o", "/nonexistent/x.hcpb"],
            "error: /nonexistent/manifest.json: cannot read manifest: No such file or directory \
             (os error 2)\n"
                .into(),
        ),
        (
            vec!["bundle", "sign", &readme, "--key", &existing, "--publisher", "acme"],
            "error: <repo>/README.md: not a bundle: neither a zstd frame nor a tar archive (the \
             first block is not a tar header)\n"
                .into(),
        ),
        (
            vec!["review", REPO_ROOT],
            "error: <repo>: cannot read bundle: Is a directory (os error 21)\n".into(),
        ),
        (
            vec!["install", "/nonexistent.hcpb"],
            "error: /nonexistent.hcpb: cannot read bundle: No such file or directory (os error 2)\n"
                .into(),
        ),
    ];
    for (args, expected) in cases {
        let out = lab.hcp.run(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_eq!(lab.portable(&stderr(&out)), expected, "{args:?}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    lab.nothing_half_installed(&[]);
}
