//! Shared helpers: a plugin directory to pack, a publisher key, and raw tar
//! archives built by hand (hostile ones included).

#![allow(dead_code, unreachable_pub, reason = "each test binary uses a part")]

use hcp_bundle::{Bundle, Limits, WitSource};
use hcp_receipts::HostKey;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn publisher_key() -> HostKey {
    HostKey::from_seed(&[7; 32])
}

pub fn other_key() -> HostKey {
    HostKey::from_seed(&[8; 32])
}

/// The manifest of the test plugin.
pub fn manifest() -> Value {
    json!({
        "capability": {
            "name": "probe",
            "version": "1.0.0",
            "description": "a test capability",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
            "safety": {"risk_ceiling": "R1", "requires_human_approval": false,
                       "involves_physical_resources": false}
        },
        "component": {"path": "build/probe.wasm", "world": "hcp:capability/capability@1.0.0"},
        "grants": {
            "filesystem": [{"path": "${manifest_dir}/samples", "guest_path": "/data", "access": "read-only"}]
        }
    })
}

/// A plugin directory: `manifest` as manifest.json, a component at
/// `build/probe.wasm`, and `samples/` with two files.
pub fn plugin_dir(manifest: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("build")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("samples/sub")).expect("mkdir");
    std::fs::copy(
        repo().join("schemas/fixtures/capability/fixture-component.wasm"),
        dir.path().join("build/probe.wasm"),
    )
    .expect("component");
    std::fs::write(dir.path().join("samples/a.md"), "# A\n").expect("write");
    std::fs::write(dir.path().join("samples/sub/b.txt"), "b\n").expect("write");
    std::fs::write(
        dir.path().join("manifest.json"),
        serde_json::to_string_pretty(manifest).expect("json"),
    )
    .expect("write");
    dir
}

/// The test plugin, packed.
pub fn packed() -> Bundle {
    let dir = plugin_dir(&manifest());
    hcp_bundle::pack_dir(dir.path(), WitSource::Host).unwrap_or_else(|e| panic!("{e}"))
}

/// The test plugin, packed and signed by [`publisher_key`] as `acme`.
pub fn signed() -> Bundle {
    let mut b = packed();
    b.sign(&publisher_key(), "acme".parse().expect("name"))
        .expect("sign");
    b
}

/// Reads archive bytes with the default limits.
pub fn read(bytes: &[u8]) -> Result<Bundle, String> {
    Bundle::read(bytes, &Limits::default()).map_err(|e| e.to_string())
}

/// The entries of a bundle's (uncompressed) archive, in order.
pub fn entries(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = tar::Archive::new(bytes);
    archive
        .entries()
        .expect("entries")
        .map(|e| {
            let mut e = e.expect("entry");
            let path = e.path().expect("path").display().to_string();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).expect("read");
            (path, data)
        })
        .collect()
}

/// One raw entry: the name is written as bytes, unchecked.
pub struct Raw<'a> {
    pub name: &'a [u8],
    pub kind: tar::EntryType,
    pub data: &'a [u8],
    pub link: Option<&'a [u8]>,
}

impl<'a> Raw<'a> {
    pub fn file(name: &'a str, data: &'a [u8]) -> Self {
        Self {
            name: name.as_bytes(),
            kind: tar::EntryType::Regular,
            data,
            link: None,
        }
    }
}

/// A ustar archive of `entries` exactly as given (no path checks).
pub fn raw_tar(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let mut h = tar::Header::new_ustar();
        {
            let old = h.as_old_mut();
            old.name[..e.name.len()].copy_from_slice(e.name);
            if let Some(link) = e.link {
                old.linkname[..link.len()].copy_from_slice(link);
            }
        }
        h.set_entry_type(e.kind);
        h.set_size(e.data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(e.data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

/// The entries of a good signed bundle, with `change` applied, re-archived
/// (raw: nothing re-checked on the way).
pub fn tampered(change: impl FnOnce(&mut Vec<(String, Vec<u8>)>)) -> Vec<u8> {
    let mut list = entries(&signed().to_archive().expect("archive"));
    change(&mut list);
    let raws: Vec<Raw<'_>> = list.iter().map(|(p, d)| Raw::file(p, d)).collect();
    raw_tar(&raws)
}
