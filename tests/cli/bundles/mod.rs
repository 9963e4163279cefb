//! Signed bundles end to end: `hcp keys generate`, `hcp bundle pack|sign`,
//! `hcp trust`, `hcp install`, `hcp list|inspect|remove`, `hcp review`.
//!
//! Every refused install asserts the exact message and that nothing was
//! left behind: no staging directory, no install directory, no registry
//! record.

mod bombs;
mod lifecycle;
mod oci;
mod refusals;
mod review;

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
