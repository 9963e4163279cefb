//! Signed bundles end to end: `hcp keys generate`, `hcp bundle pack|sign`,
//! `hcp trust`, `hcp install`, `hcp list|inspect|remove`, `hcp review`.
//!
//! Every refused install asserts the exact message and that nothing was
//! left behind: no staging directory, no install directory, no registry
//! record.

use super::{Hcp, code, golden, portable, stderr, stdout};
use hcp_bundle::{Bundle, Limits};
use hcp_tests::{ManifestBuilder, REPO_ROOT};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A fresh data directory, a work directory and a publisher key.
struct Lab {
    hcp: Hcp,
    work: tempfile::TempDir,
    key: PathBuf,
    public_key: String,
    key_id: String,
}

impl Lab {
    fn new() -> Self {
        let hcp = Hcp::new();
        let work = tempfile::tempdir().expect("tempdir");
        let key = work.path().join("publisher.key");
        let out = hcp.run(&["keys", "generate", "--out", s(&key)]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let field = |name: &str| {
            stdout(&out)
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name:?} in {}", stdout(&out)))
                .to_owned()
        };
        let public_key = field("public    ");
        let key_id = field("key id    ");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&key).expect("key").permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "the publisher key is private");
        }
        Self {
            hcp,
            work,
            key,
            public_key,
            key_id,
        }
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.hcp.run(args);
        assert_eq!(code(&out), 0, "{args:?}\n{}{}", stdout(&out), stderr(&out));
        out
    }

    fn trust(&self, name: &str) {
        self.ok(&["trust", "add", name, &self.public_key]);
    }

    /// Packs `dir` into `<work>/<file>`.
    fn pack(&self, dir: &Path, file: &str) -> PathBuf {
        let out = self.work.path().join(file);
        self.ok(&["bundle", "pack", s(dir), "-o", s(&out)]);
        out
    }

    fn sign(&self, bundle: &Path, publisher: &str) {
        self.ok(&[
            "bundle",
            "sign",
            s(bundle),
            "--key",
            s(&self.key),
            "--publisher",
            publisher,
        ]);
    }

    /// Packs and signs an example plugin as `hcp-examples`.
    fn example(&self, plugin: &str) -> PathBuf {
        let bundle = self.pack(
            &Path::new(REPO_ROOT).join("plugins").join(plugin),
            &format!("{plugin}.hcpb"),
        );
        self.sign(&bundle, "hcp-examples");
        bundle
    }

    /// A plugin directory for the `trivial` guest with `manifest`'s changes.
    fn plugin(&self, dir: &str, edit: impl FnOnce(ManifestBuilder) -> ManifestBuilder) -> PathBuf {
        let dir = self.work.path().join(dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::copy(hcp_tests::TRIVIAL, dir.join("trivial.wasm")).expect("copy");
        edit(ManifestBuilder::new("trivial", "trivial.wasm")).write(&dir);
        dir
    }

    /// `trivial` at `version` with `grants`, packed and signed as `acme`.
    fn trivial(&self, version: &str, grants: Value) -> PathBuf {
        let dir = self.plugin(&format!("trivial-{version}"), |m| {
            m.set("/capability/version", json!(version))
                .set("/grants", grants)
        });
        let bundle = self.pack(&dir, &format!("trivial-{version}.hcpb"));
        self.sign(&bundle, "acme");
        bundle
    }

    fn install(&self, bundle: &Path, flags: &[&str]) -> Output {
        let mut args = vec!["install", s(bundle)];
        args.extend_from_slice(flags);
        self.hcp.run(&args)
    }

    /// Asserts the install was refused with exactly `message` and left
    /// nothing behind.
    fn refused(&self, bundle: &Path, flags: &[&str], message: &str) {
        let before = self.installed();
        let out = self.install(bundle, flags);
        assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
        let err = self.portable(&stderr(&out));
        assert_eq!(
            err,
            format!(
                "error: <work>/{}: {message}\nnothing was installed\n",
                name(bundle)
            )
        );
        self.nothing_half_installed(&before);
    }

    fn installed(&self) -> Vec<String> {
        let out = self.ok(&["list", "--json"]);
        let list: Vec<Value> = serde_json::from_str(&stdout(&out)).expect("json");
        list.iter()
            .map(|i| {
                format!(
                    "{}@{}",
                    i["name"].as_str().expect("name"),
                    i["version"].as_str().expect("v")
                )
            })
            .collect()
    }

    /// Only installed versions' directories exist; no staging or removal
    /// leftovers; the registry is unchanged.
    fn nothing_half_installed(&self, registered: &[String]) {
        assert_eq!(self.installed(), registered, "the registry changed");
        let caps = self.hcp.data.path().join("capabilities");
        let mut found = Vec::new();
        if caps.exists() {
            for entry in std::fs::read_dir(&caps).expect("read") {
                let entry = entry.expect("entry");
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == ".lock" {
                    continue;
                }
                assert!(!name.starts_with('.'), "leftover {name}");
                for v in std::fs::read_dir(entry.path()).expect("read") {
                    let v = v.expect("entry").file_name().to_string_lossy().into_owned();
                    found.push(format!("{name}@{v}"));
                }
            }
        }
        found.sort();
        let mut expected = registered.to_vec();
        expected.sort();
        assert_eq!(
            found, expected,
            "install directories differ from the registry"
        );
    }

    fn portable(&self, text: &str) -> String {
        let text = portable(text, Some(self.hcp.data.path()));
        let text = text
            .replace(&self.work.path().display().to_string(), "<work>")
            .replace(&self.public_key, "ed25519:<public-key>")
            .replace(&self.key_id, "<key-id>");
        keys(&text)
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

fn name(p: &Path) -> String {
    p.file_name().expect("name").to_string_lossy().into_owned()
}

/// Replaces key ids (`key <16 hex>`), host ids (`host-<16 hex>`) and public
/// keys (`ed25519:<64 hex>`).
fn keys(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    loop {
        let next = [
            ("key ", 16, "key <key-id>"),
            ("host-", 16, "host-<host-id>"),
            ("ed25519:", 64, "ed25519:<public-key>"),
        ]
        .into_iter()
        .filter_map(|(p, n, r)| rest.find(p).map(|i| (i, p, n, r)))
        .min_by_key(|(i, ..)| *i);
        let Some((i, prefix, n, replacement)) = next else {
            break;
        };
        out.push_str(&rest[..i]);
        let after = &rest[i + prefix.len()..];
        let hex = after.chars().take_while(|c| c.is_ascii_hexdigit()).count();
        if hex == n {
            out.push_str(replacement);
            rest = &after[n..];
        } else {
            out.push_str(prefix);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Replaces the number before ` bytes` on lines starting with `prefixes`.
fn sizes(text: &str, prefixes: &[&str]) -> String {
    text.lines()
        .map(|line| {
            if !prefixes.iter().any(|p| line.starts_with(p)) {
                return line.to_owned();
            }
            let mut out = line.to_owned();
            if let Some(end) = out.find(" bytes") {
                let start = out[..end]
                    .rfind(|c: char| !c.is_ascii_digit())
                    .map_or(0, |i| i + 1);
                out.replace_range(start..end, "<n>");
            }
            out
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The tar archive inside a (good) bundle file, compressed or not.
fn archive(bundle: &Path) -> Vec<u8> {
    let bytes = std::fs::read(bundle).expect("read");
    Bundle::read(&bytes, &Limits::default())
        .unwrap_or_else(|e| panic!("{}: {e}", bundle.display()))
        .to_archive()
        .expect("archive")
}

/// Rewrites the entries of a bundle into a plain tar (raw: nothing
/// re-checked).
fn rewrite(bundle: &Path, out: &Path, edit: impl FnOnce(&mut Vec<(String, Vec<u8>)>)) {
    let bytes = archive(bundle);
    let mut entries: Vec<(String, Vec<u8>)> = tar::Archive::new(bytes.as_slice())
        .entries()
        .expect("entries")
        .map(|e| {
            let mut e = e.expect("entry");
            let path = e.path().expect("path").display().to_string();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).expect("read");
            (path, data)
        })
        .collect();
    edit(&mut entries);
    let raw: Vec<(&[u8], tar::EntryType, &[u8])> = entries
        .iter()
        .map(|(p, d)| (p.as_bytes(), tar::EntryType::Regular, d.as_slice()))
        .collect();
    std::fs::write(out, raw_tar(&raw)).expect("write");
}

/// A ustar archive of `(name, type, data)` exactly as given.
fn raw_tar(entries: &[(&[u8], tar::EntryType, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, kind, data) in entries {
        let mut h = tar::Header::new_ustar();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        if kind.is_symlink() || kind.is_hard_link() {
            h.as_old_mut().linkname[..11].copy_from_slice(b"/etc/passwd");
        }
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

fn edit_manifest(entries: &mut [(String, Vec<u8>)], f: impl FnOnce(&mut Value)) {
    let (_, d) = entries
        .iter_mut()
        .find(|(p, _)| p == "manifest.json")
        .expect("manifest.json");
    let mut v: Value = serde_json::from_slice(d).expect("json");
    f(&mut v);
    *d = serde_json::to_vec_pretty(&v).expect("json");
}

#[test]
fn install_list_inspect_remove_on_a_fresh_data_directory() {
    let lab = Lab::new();
    let out = lab.ok(&["list"]);
    assert_eq!(
        stdout(&out),
        "nothing is installed (hcp install <bundle>)\n"
    );
    lab.trust("hcp-examples");
    let out = lab.ok(&["trust", "list"]);
    assert!(
        stdout(&out).starts_with("hcp-examples  key "),
        "{}",
        stdout(&out)
    );

    let doc = lab.example("document-analysis");
    let cvd = lab.example("cvd-material-synthesis");
    let out = lab.ok(&["install", s(&doc)]);
    let shown = lab.portable(&stdout(&out));
    assert_eq!(
        shown,
        "installed document-analysis@1.0.0\n  \
         publisher  hcp-examples (key <key-id>)\n  \
         component  sha256:<digest>\n  \
         directory  <tmp>/capabilities/document-analysis/1.0.0\n  \
         receipt    install-receipt.json, signed by host-<host-id> (key <key-id>)\n"
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    lab.ok(&["install", s(&cvd)]);

    // Installed as the bundle holds it, with the receipt; the bundled data
    // is where the manifest's ${manifest_dir} grant points.
    let dir = lab
        .hcp
        .data
        .path()
        .join("capabilities/document-analysis/1.0.0");
    for file in [
        "manifest.json",
        "component.wasm",
        "wit/world.wit",
        "samples/paper-123.md",
        "install-receipt.json",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    let m = hcp_contracts::manifest::load(
        &dir.join("manifest.json"),
        hcp_contracts::LoadOptions {
            require_digest: true,
        },
    )
    .expect("the installed manifest loads");
    assert_eq!(
        m.grants.filesystem[0].host_path,
        dir.join("samples").canonicalize().expect("c")
    );

    let out = lab.ok(&["list"]);
    assert_eq!(
        stdout(&out),
        "NAME                    VERSION  PUBLISHER\n\
         cvd-material-synthesis  1.0.0    hcp-examples\n\
         document-analysis       1.0.0    hcp-examples\n"
    );

    let out = lab.ok(&["inspect", "document-analysis"]);
    let text = lab.portable(&stdout(&out));
    for line in [
        "capability  document-analysis@1.0.0\n",
        "directory   <tmp>/capabilities/document-analysis/1.0.0\n",
        "publisher   hcp-examples (key <key-id>, ed25519:<public-key>)\n",
        "world       hcp:capability/capability@1.0.0\n",
        "risk        ceiling R1\n",
        "component   sha256:<digest> (matches the install)\n",
        "receipt     install-receipt.json: signed by this host (key <key-id>), verified\n",
        "  filesystem  ${manifest_dir}/samples -> /documents (read-only)\n",
        "  network     example.com:443\n",
        "versions    1.0.0\n",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    let out = lab.ok(&["inspect", "--json", "cvd-material-synthesis@1.0.0"]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["receipt_verified"], true);
    assert_eq!(v["install_receipt"]["receipt"]["unsigned"], false);
    assert_eq!(
        v["install_receipt"]["receipt"]["publisher"]["name"],
        "hcp-examples"
    );
    assert_eq!(
        v["install_receipt"]["receipt"]["grants"]["instruments"],
        json!(["cvd-rig"])
    );

    // A changed component on disk is reported.
    let component = dir.join("component.wasm");
    let original = std::fs::read(&component).expect("read");
    std::fs::write(&component, b"\0asm").expect("write");
    let out = lab.hcp.run(&["inspect", "document-analysis@1.0.0"]);
    assert_eq!(code(&out), 1);
    assert!(
        lab.portable(&stdout(&out))
            .contains("component   CHANGED: sha256:<digest> on disk, sha256:<digest> installed\n")
    );
    std::fs::write(&component, original).expect("restore");

    // The same version twice: refused.
    lab.refused(
        &doc,
        &[],
        "document-analysis@1.0.0 is already installed (hcp remove document-analysis@1.0.0 first to replace it)",
    );

    // Remove needs a version; then it is gone, files and record.
    let out = lab.hcp.run(&["remove", "document-analysis"]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out),
        "error: name the version to remove: document-analysis@<version> (installed: 1.0.0)\n"
    );
    let out = lab.ok(&["remove", "document-analysis@1.0.0"]);
    assert!(stdout(&out).starts_with("removed document-analysis@1.0.0 ("));
    assert!(
        !lab.hcp
            .data
            .path()
            .join("capabilities/document-analysis")
            .exists()
    );
    lab.nothing_half_installed(&["cvd-material-synthesis@1.0.0".to_owned()]);
    let out = lab.hcp.run(&["remove", "document-analysis@1.0.0"]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out),
        "error: document-analysis@1.0.0 is not installed (hcp list)\n"
    );
    let out = lab.hcp.run(&["inspect", "document-analysis"]);
    assert_eq!(code(&out), 2);

    // Trust removed: installed capabilities stay; new installs are refused.
    let out = lab.ok(&["trust", "remove", "hcp-examples"]);
    assert_eq!(
        lab.portable(&stdout(&out)),
        "hcp-examples (key <key-id>) is no longer trusted\n\
         installed capabilities it signed stay installed: cvd-material-synthesis@1.0.0 (hcp remove to remove them)\n"
    );
    lab.refused(
        &doc,
        &[],
        "publisher \"hcp-examples\" (key <key-id>) is not trusted on this host; get the publisher's \
         public key from the publisher and add it with `hcp trust add hcp-examples <public key>`",
    );
}

#[test]
fn several_versions_side_by_side_and_widening_upgrades() {
    let lab = Lab::new();
    lab.trust("acme");
    let v1 = lab.trivial("1.0.0", json!({}));
    let v2 = lab.trivial(
        "1.1.0",
        json!({"network": [{"host": "example.com", "port": 443}]}),
    );
    let v3 = lab.trivial("1.2.0", json!({}));
    lab.ok(&["install", s(&v1)]);
    lab.refused(
        &v2,
        &[],
        "trivial@1.1.0 may do more than the installed trivial@1.0.0:\n  \
         wider    grants.network: + example.com:443\n\
         review the difference (hcp review), then install with --accept-new-grants",
    );
    let out = lab.ok(&["install", s(&v2), "--accept-new-grants"]);
    assert!(
        stdout(&out).ends_with(
            "  accepted   (--accept-new-grants) beyond trivial@1.0.0:\n    grants.network: + example.com:443\n"
        ),
        "{}",
        stdout(&out)
    );
    // Narrowing needs nothing.
    let out = lab.ok(&["install", s(&v3)]);
    assert!(stdout(&out).ends_with("  compared   allows nothing trivial@1.1.0 did not\n"));
    lab.nothing_half_installed(&[
        "trivial@1.0.0".to_owned(),
        "trivial@1.1.0".to_owned(),
        "trivial@1.2.0".to_owned(),
    ]);
    let out = lab.ok(&["inspect", "--json", "trivial@1.1.0"]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["install_receipt"]["receipt"]["previous"], "trivial@1.0.0");
    assert_eq!(
        v["install_receipt"]["receipt"]["accepted_widening"],
        json!(["grants.network: + example.com:443"])
    );
    assert_eq!(v["versions"], json!(["1.0.0", "1.1.0", "1.2.0"]));
}

#[test]
fn unsigned_bundles_install_only_with_allow_unsigned() {
    let lab = Lab::new();
    let dir = lab.plugin("trivial", |m| m);
    let bundle = lab.pack(&dir, "trivial.hcpb");
    lab.refused(
        &bundle,
        &[],
        "the bundle is unsigned: install bundles signed by a trusted publisher (hcp bundle sign, \
         hcp trust add), or pass --allow-unsigned for local development",
    );
    let out = lab.install(&bundle, &["--allow-unsigned"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "WARNING: trivial@1.0.0 is UNSIGNED: no publisher vouches for it.\n\
         WARNING: installed only because of --allow-unsigned, for local development; its install \
         receipt records that it is unsigned.\n"
    );
    assert!(stdout(&out).contains("  publisher  UNSIGNED (--allow-unsigned)\n"));
    let out = lab.ok(&["inspect", "--json", "trivial"]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["install_receipt"]["receipt"]["unsigned"], true);
    assert_eq!(v["install_receipt"]["receipt"]["publisher"], Value::Null);
    assert_eq!(v["installed"]["unsigned"], true);
    let out = lab.ok(&["list"]);
    assert!(
        stdout(&out).ends_with("trivial  1.0.0    UNSIGNED\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn signatures_that_do_not_hold_are_refused() {
    let lab = Lab::new();
    let bundle = lab.trivial("1.0.0", json!({}));
    // Untrusted publisher.
    lab.refused(
        &bundle,
        &[],
        "publisher \"acme\" (key <key-id>) is not trusted on this host; get the publisher's \
         public key from the publisher and add it with `hcp trust add acme <public key>`",
    );
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

fn entry(bundle: &Path, name: &str) -> Vec<u8> {
    let bytes = archive(bundle);
    let mut archive = tar::Archive::new(bytes.as_slice());
    for e in archive.entries().expect("entries") {
        let mut e = e.expect("entry");
        if e.path().expect("path").to_str() == Some(name) {
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).expect("read");
            return data;
        }
    }
    panic!("no {name}");
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
    // undeclared device.
    let risky = resigned(&lab, &good, "risky.hcpb", |m| {
        m["capability"]["safety"]["risk_ceiling"] = json!("R5");
        m["grants"] = json!({
            "filesystem": [{"path": "/etc", "access": "read-only"}],
            "network": [{"host": "169.254.169.254", "port": 80}, {"host": "example.org", "port": 443}],
            "devices": ["hid"]
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
         grants.devices[0] hid is not admitted (devices lists nothing)",
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
fn review_of_each_example_bundle() {
    let lab = Lab::new();
    lab.trust("hcp-examples");
    for plugin in ["document-analysis", "cvd-material-synthesis"] {
        let bundle = lab.example(plugin);
        // Text, for a terminal.
        let out = lab.hcp.run(&["review", s(&bundle)]);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        let text = sizes(
            &lab.portable(&stdout(&out)),
            &["bundle ", "  component.wasm "],
        );
        golden(&format!("review-{plugin}.txt"), &text);
        // Markdown, for a ticket.
        let out = lab.hcp.run(&["review", "--markdown", s(&bundle)]);
        assert_eq!(code(&out), 0);
        let md = sizes(
            &lab.portable(&stdout(&out)),
            &["| bundle |", "| `component.wasm` ("],
        );
        golden(&format!("review-{plugin}.md"), &md);
        // JSON, for tools: sizes depend on the build, so they are replaced.
        let out = lab.hcp.run(&["review", "--json", s(&bundle)]);
        assert_eq!(code(&out), 0);
        let mut v: Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(v["outcome"], "pass");
        assert!(v["bytes"].as_u64().is_some() && v["component_bytes"].as_u64().is_some());
        v["bytes"] = json!("<n>");
        v["component_bytes"] = json!("<n>");
        let json = serde_json::to_string_pretty(&v).expect("json") + "\n";
        golden(&format!("review-{plugin}.json"), &lab.portable(&json));
        let checks: Vec<&str> = v["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .map(|c| c["check"].as_str().expect("check"))
            .collect();
        assert_eq!(
            checks,
            [
                "signature",
                "trust",
                "world",
                "manifest",
                "audit",
                "policy",
                "upgrade"
            ]
        );
    }
    let cvd = lab.work.path().join("cvd-material-synthesis.hcpb");
    let out = lab.hcp.run(&["review", "--json", s(&cvd)]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert!(v["imports"]
        .as_array()
        .expect("imports")
        .iter()
        .any(|i| i["name"] == "hcp:capability/instrument@1.0.0" && i["docs"]["source"] == "wit"));

    // Unsigned and untrusted bundles: the verdicts say so, exit 1.
    let unsigned = lab.pack(
        &Path::new(REPO_ROOT).join("plugins/document-analysis"),
        "unsigned.hcpb",
    );
    let out = lab.hcp.run(&["review", s(&unsigned)]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(
        text.contains("verdict: installable only with an explicit flag (see FLAG below)\n"),
        "{text}"
    );
    assert!(
        text.contains("  FLAG  signature  unsigned: nobody vouches for this bundle;"),
        "{text}"
    );
}

/// A copy of the document-analysis plugin at `version`, packed and signed
/// as `hcp-examples`.
fn document_analysis_at(lab: &Lab, version: &str) -> PathBuf {
    let src = Path::new(REPO_ROOT).join("plugins/document-analysis");
    let dir = lab.work.path().join(format!("document-analysis-{version}"));
    std::fs::create_dir_all(dir.join("samples")).expect("mkdir");
    std::fs::copy(
        src.join("samples/paper-123.md"),
        dir.join("samples/paper-123.md"),
    )
    .expect("copy");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("manifest.json")).expect("read"))
            .expect("json");
    m["capability"]["version"] = json!(version);
    m["component"]["path"] = json!(format!(
        "{REPO_ROOT}/plugins/target/wasm32-wasip2/release/document_analysis.wasm"
    ));
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&m).expect("json"),
    )
    .expect("write");
    let bundle = lab.pack(&dir, &format!("document-analysis-{version}.hcpb"));
    lab.sign(&bundle, "hcp-examples");
    bundle
}

#[test]
fn the_engine_runs_the_installed_version_a_range_picks() {
    let lab = Lab::new();
    lab.trust("hcp-examples");
    for version in ["1.0.0", "1.1.0"] {
        lab.ok(&["install", s(&document_analysis_at(&lab, version))]);
    }
    let submit = |n: usize, range: &str| -> (i32, Value) {
        let mut m = super::seed_submit();
        m["message_id"] = json!(format!("msg-range-{n}"));
        m["payload"]["capability_version"] = json!(range);
        let path = super::write_json(lab.work.path(), &format!("submit-{n}.json"), &m);
        let out = lab
            .hcp
            .run(&["submit", "--as", "harness-local-01", "--wait", s(&path)]);
        let answers: Vec<Value> = serde_json::Deserializer::from_str(&stdout(&out))
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (code(&out), answers.last().expect("an answer").clone())
    };
    // The version the engine ran submission `n` with (the newest task).
    let version_of = |n: usize| -> String {
        let out = lab.ok(&["tasks", "list", "--limit", "1"]);
        let id = stdout(&out)
            .split_whitespace()
            .next()
            .expect("task id")
            .to_owned();
        let out = lab.ok(&["tasks", "show", &id]);
        let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(v["message_id"], format!("msg-range-{n}"));
        v["version"].as_str().expect("version").to_owned()
    };
    let (c, answer) = submit(1, "1.0.x");
    assert_eq!(
        (c, answer["type"].as_str()),
        (0, Some("task_completed")),
        "{answer}"
    );
    assert_eq!(version_of(1), "1.0.0");
    let (c, answer) = submit(2, "1.x");
    assert_eq!(
        (c, answer["type"].as_str()),
        (0, Some("task_completed")),
        "{answer}"
    );
    assert_eq!(version_of(2), "1.1.0");
    // Removed: the range falls back to what is left, or to nothing.
    lab.ok(&["remove", "document-analysis@1.1.0"]);
    let (_, answer) = submit(3, "1.x");
    assert_eq!(answer["type"], "task_completed", "{answer}");
    assert_eq!(version_of(3), "1.0.0");
    let (c, answer) = submit(4, ">=1.1.0");
    assert_eq!(c, 1);
    assert_eq!(answer["type"], "task_rejected", "{answer}");
    assert_eq!(
        answer["payload"]["reason_message"],
        "no installed document-analysis matches >=1.1.0 (installed: 1.0.0)"
    );
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

#[test]
fn leftovers_of_an_interrupted_install_are_cleaned_up() {
    let lab = Lab::new();
    lab.trust("acme");
    let bundle = lab.trivial("1.0.0", json!({}));
    // A crash while staging, and one between the rename and the record.
    let caps = lab.hcp.data.path().join("capabilities");
    std::fs::create_dir_all(caps.join(".staging-crashed/wit")).expect("mkdir");
    std::fs::write(caps.join(".staging-crashed/component.wasm"), b"half").expect("write");
    std::fs::create_dir_all(caps.join("trivial/1.0.0")).expect("mkdir");
    std::fs::write(caps.join("trivial/1.0.0/component.wasm"), b"stale").expect("write");
    let out = lab.install(&bundle, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        lab.portable(&stderr(&out)),
        "note: replaced a leftover directory of an interrupted install at \
         <tmp>/capabilities/trivial/1.0.0\n"
    );
    lab.nothing_half_installed(&["trivial@1.0.0".to_owned()]);
    let out = lab.ok(&["inspect", "trivial@1.0.0"]);
    assert!(
        stdout(&out).contains("(matches the install)"),
        "{}",
        stdout(&out)
    );
}
