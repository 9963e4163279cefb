//! The pack as bytes: deterministic, fixed metadata, and hostile archives
//! refused with a clear error.

mod common;

use common::standard_pack;
use hcp_receipts::Digest;
use hcp_receipts::pack::{self, Index, IndexEntry, Pack, PackError, ReadLimits};
use hcp_receipts::{SigningPolicy, VerifyOptions, verify_bytes};

fn write(p: &Pack) -> Vec<u8> {
    pack::write(p).expect("write")
}

#[test]
fn two_exports_of_the_same_inputs_are_byte_identical() {
    let a = write(&standard_pack());
    let b = write(&standard_pack());
    assert_eq!(a, b);
    // And reading gives back the inputs, which write to the same bytes again.
    let read = pack::read(&a, &ReadLimits::default()).expect("read");
    assert_eq!(read, standard_pack());
    assert_eq!(write(&read), a);
}

#[test]
fn entry_metadata_is_fixed() {
    let bytes = write(&standard_pack());
    assert_eq!(bytes.len() % 512, 0);
    assert!(
        bytes[bytes.len() - 1024..].iter().all(|&b| b == 0),
        "end-of-archive marker"
    );
    let mut archive = tar::Archive::new(bytes.as_slice());
    let mut names = Vec::new();
    for entry in archive.entries().expect("entries").raw(true) {
        let entry = entry.expect("entry");
        let h = entry.header();
        let name = String::from_utf8(entry.path_bytes().into_owned()).expect("utf8");
        assert!(h.as_ustar().is_some(), "{name}: plain ustar header");
        assert_eq!(h.entry_type(), tar::EntryType::Regular, "{name}");
        assert_eq!(h.mode().expect("mode"), 0o644, "{name}");
        assert_eq!(
            (h.uid().expect("uid"), h.gid().expect("gid")),
            (0, 0),
            "{name}"
        );
        assert_eq!(h.mtime().expect("mtime"), 0, "{name}");
        assert_eq!(h.username_bytes(), Some(&b""[..]), "{name}");
        assert_eq!(h.groupname_bytes(), Some(&b""[..]), "{name}");
        names.push(name);
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "entries sorted by path");
    assert_eq!(
        names,
        [
            "checkpoints/host-a.jsonl",
            "checkpoints/host-b.jsonl",
            "index.json",
            "inputs/host-a.jsonl",
            "inputs/host-b.jsonl",
            &format!("keys/{}.pub", common::key_a().key_id()),
            &format!("keys/{}.pub", common::key_b().key_id()),
            "manifests/document-analysis/manifest.json",
            "manifests/wit/world.wit",
            "messages/task-s-1/task_submit.json",
            "pack.json",
            "policy/rules.json",
            "proofs/host-a.consistency.jsonl",
            "proofs/host-a.inclusion",
            "proofs/host-b.consistency.jsonl",
            "proofs/host-b.inclusion",
            "receipts/host-a.jsonl",
            "receipts/host-b.jsonl",
        ]
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
    );
}

/// A tar of raw entries (names written as given, no checks), then the end marker.
fn raw_tar(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, kind, data) in entries {
        let mut h = tar::Header::new_ustar();
        let field = &mut h.as_ustar_mut().expect("ustar").name;
        field[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

/// The standard pack's entries, plus `extra` (listed in the index when `indexed`).
fn with_extra(extra: &[(&str, tar::EntryType, &[u8])], indexed: bool) -> Vec<u8> {
    let bytes = write(&standard_pack());
    let mut archive = tar::Archive::new(bytes.as_slice());
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for entry in archive.entries().expect("entries") {
        let mut entry = entry.expect("entry");
        let name = String::from_utf8(entry.path_bytes().into_owned()).expect("utf8");
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).expect("read");
        files.push((name, data));
    }
    let mut index: Index = serde_json::from_slice(
        &files
            .iter()
            .find(|(n, _)| n == "index.json")
            .expect("index")
            .1,
    )
    .expect("index");
    if indexed {
        for (name, _, data) in extra {
            index.entries.push(IndexEntry {
                path: (*name).to_owned(),
                size: data.len() as u64,
                sha256: Digest::of(data),
            });
        }
    }
    let index_bytes = serde_json::to_vec(&index).expect("json");
    let mut all: Vec<(&str, tar::EntryType, &[u8])> = files
        .iter()
        .filter(|(n, _)| n != "index.json")
        .map(|(n, d)| (n.as_str(), tar::EntryType::Regular, d.as_slice()))
        .collect();
    all.push(("index.json", tar::EntryType::Regular, &index_bytes));
    all.extend_from_slice(extra);
    raw_tar(&all)
}

fn refused(bytes: &[u8]) -> String {
    refused_with(bytes, &ReadLimits::default())
}

fn refused_with(bytes: &[u8], limits: &ReadLimits) -> String {
    match pack::read(bytes, limits) {
        Ok(_) => panic!("a hostile pack was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_rebuilt_pack_is_accepted() {
    // The helper itself makes readable packs: the refusals below are the extras'.
    pack::read(&with_extra(&[], true), &ReadLimits::default()).expect("read");
}

#[test]
fn path_traversal_is_refused() {
    for name in ["../evil", "policy/../../evil", "/etc/passwd"] {
        let bytes = with_extra(&[(name, tar::EntryType::Regular, b"x")], true);
        assert_eq!(
            refused(&bytes),
            format!("entry {name:?} escapes the pack (absolute path or `..`)")
        );
    }
}

#[test]
fn links_and_other_non_regular_entries_are_refused() {
    for kind in [tar::EntryType::Symlink, tar::EntryType::Link] {
        let bytes = with_extra(&[("policy/link", kind, b"")], true);
        assert_eq!(
            refused(&bytes),
            "entry \"policy/link\" is a link; packs hold regular files only"
        );
    }
    let bytes = with_extra(&[("policy/dir", tar::EntryType::Directory, b"")], true);
    assert_eq!(
        refused(&bytes),
        "entry \"policy/dir\" is not a regular file (type '5')"
    );
    let bytes = with_extra(&[("policy/fifo", tar::EntryType::Fifo, b"")], true);
    assert_eq!(
        refused(&bytes),
        "entry \"policy/fifo\" is not a regular file (type '6')"
    );
    let bytes = with_extra(
        &[("pax", tar::EntryType::XHeader, b"20 mtime=1700000000\n")],
        true,
    );
    assert_eq!(
        refused(&bytes),
        "entry \"pax\" is a PAX or GNU extension header (type 'x'); packs use plain ustar headers"
    );
}

#[test]
fn oversized_entries_are_refused() {
    let big = vec![b'a'; 50_000];
    let bytes = with_extra(&[("policy/big", tar::EntryType::Regular, &big)], true);
    let limits = ReadLimits {
        max_entry_bytes: 40_000,
        ..ReadLimits::default()
    };
    assert_eq!(
        refused_with(&bytes, &limits),
        "entry \"policy/big\" has 50000 bytes, over the limit of 40000"
    );
}

#[test]
fn duplicate_names_are_refused() {
    let bytes = with_extra(
        &[("policy/rules.json", tar::EntryType::Regular, b"{}")],
        false,
    );
    assert_eq!(refused(&bytes), "entry \"policy/rules.json\" appears twice");
}

#[test]
fn entries_not_in_the_index_are_refused() {
    let bytes = with_extra(
        &[("policy/smuggled.json", tar::EntryType::Regular, b"{}")],
        false,
    );
    assert_eq!(
        refused(&bytes),
        "entry \"policy/smuggled.json\" is not in the index"
    );
}

#[test]
fn entries_outside_the_layout_are_refused() {
    let bytes = with_extra(&[("notes.txt", tar::EntryType::Regular, b"hi")], true);
    assert_eq!(
        refused(&bytes),
        "entry \"notes.txt\": not part of the pack layout (or of a host pack.json declares)"
    );
}

#[test]
fn index_hash_mismatch_is_refused() {
    let bytes = write(&standard_pack());
    let at = bytes
        .windows(10)
        .position(|w| w == b"max_risk\": ")
        .or_else(|| bytes.windows(8).position(|w| w == b"max_risk"))
        .expect("policy file");
    let mut bad = bytes;
    bad[at] = b'M';
    let message = refused(&bad);
    assert!(
        message.starts_with("entry \"policy/rules.json\" does not match the index: index says "),
        "{message}"
    );
}

#[test]
fn truncated_and_non_tar_input_is_refused() {
    let bytes = write(&standard_pack());
    assert_eq!(
        refused(&bytes[..bytes.len() - 100]),
        format!(
            "truncated pack: {} bytes is not a whole number of 512-byte tar blocks",
            bytes.len() - 100
        )
    );
    // Cut at a block boundary inside the last entry's data.
    let message = refused(&bytes[..bytes.len() - 1024 - 512]);
    assert!(message.starts_with("truncated pack: "), "{message}");
    // Cut right after the last entry: no end-of-archive marker.
    assert_eq!(
        refused(&bytes[..bytes.len() - 1024]),
        "truncated pack: the archive ends without its end-of-archive marker (two zero blocks)"
    );
    let message = refused(&[b'x'; 2048]);
    assert!(
        message.starts_with("not a tar archive, or a damaged one: "),
        "{message}"
    );
    let mut trailing = bytes.clone();
    trailing.extend_from_slice(&[1; 512]);
    assert_eq!(
        refused(&trailing),
        "not a tar archive, or a damaged one: data after the end-of-archive marker"
    );
}

#[test]
fn the_writer_refuses_bad_names() {
    let mut p = standard_pack();
    p.policy.insert("../escape".into(), b"x".to_vec());
    assert!(matches!(pack::write(&p), Err(PackError::Traversal { .. })));
    let mut p = standard_pack();
    p.messages
        .insert(format!("{}.json", "x".repeat(100)), b"x".to_vec());
    assert_eq!(
        pack::write(&p).expect_err("long").to_string(),
        format!(
            "entry \"messages/{}.json\": paths are 1 to 100 bytes",
            "x".repeat(100)
        )
    );
}

#[test]
fn a_host_declared_twice_is_refused() {
    let mut p = standard_pack();
    p.hosts.truncate(1);
    let bytes = write(&p);
    // Rewrite pack.json with the host listed twice (and fix the index).
    let mut files = tar_entries(&bytes);
    let manifest_at = files
        .iter()
        .position(|(n, _)| n == "pack.json")
        .expect("pack.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&files[manifest_at].1).expect("json");
    let host = manifest["hosts"][0].clone();
    manifest["hosts"].as_array_mut().expect("hosts").push(host);
    files[manifest_at].1 = serde_json::to_vec(&manifest).expect("json");
    assert_eq!(
        refused(&with_index(&files)),
        "pack.json: host host-a appears twice"
    );
}

/// The entries of a tar, in order: (path, data).
fn tar_entries(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = tar::Archive::new(bytes);
    let mut files = Vec::new();
    for entry in archive.entries().expect("entries") {
        let mut entry = entry.expect("entry");
        let name = String::from_utf8(entry.path_bytes().into_owned()).expect("utf8");
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).expect("read");
        files.push((name, data));
    }
    files
}

/// `files` as a tar in their order, `index.json` listing the others again.
fn with_index(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let index = Index {
        entries: files
            .iter()
            .filter(|(n, _)| n != "index.json")
            .map(|(n, d)| IndexEntry {
                path: n.clone(),
                size: d.len() as u64,
                sha256: Digest::of(d),
            })
            .collect(),
    };
    let index_bytes = serde_json::to_vec(&index).expect("json");
    let all: Vec<(&str, tar::EntryType, &[u8])> = files
        .iter()
        .map(|(n, d)| {
            let d = if n == "index.json" { &index_bytes } else { d };
            (n.as_str(), tar::EntryType::Regular, d.as_slice())
        })
        .collect();
    raw_tar(&all)
}

/// `bytes` with entry `path` replaced by `data`, the index updated.
fn with_entry(bytes: &[u8], path: &str, data: &[u8]) -> Vec<u8> {
    let mut files = tar_entries(bytes);
    for (name, old) in &mut files {
        if name == path {
            *old = data.to_vec();
        }
    }
    with_index(&files)
}

/// A receipts file with each line rewritten by `rewrite`.
fn rewritten(bytes: &[u8], rewrite: impl Fn(&str) -> String) -> Vec<u8> {
    let read = pack::read(bytes, &ReadLimits::default()).expect("read");
    let mut file = String::new();
    for r in &read.hosts[0].receipts {
        let line = String::from_utf8(r.canonical_bytes().expect("bytes")).expect("utf8");
        file.push_str(&rewrite(&line));
        file.push('\n');
    }
    with_entry(bytes, "receipts/host-a.jsonl", file.as_bytes())
}

#[test]
fn receipt_lines_in_another_json_form_verify_as_their_canonical_form() {
    let options = VerifyOptions {
        signing: Some(SigningPolicy::default()),
        ..VerifyOptions::default()
    };
    let verify = |bytes: &[u8]| verify_bytes(bytes, &ReadLimits::default(), &options);
    let good = write(&standard_pack());
    let mut tampered = standard_pack();
    tampered.hosts[0].receipts[2].lamport += 1;
    tampered.hosts[0].receipts[5].call = "fs.open/x".into();
    let tampered = write(&tampered);
    assert!(verify(&good).ok());
    assert!(!verify(&tampered).ok());
    type Rewrite = fn(&str) -> String;
    let rewrites: [(&str, Rewrite); 4] = [
        ("spaces", |l| {
            l.replace("\":", "\": ").replace(",\"", ", \"")
        }),
        ("keys in reverse order", |l| {
            let value: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(l).expect("object");
            let reversed: serde_json::Map<_, _> = value.into_iter().rev().collect();
            serde_json::to_string(&reversed).expect("json")
        }),
        ("escapes", |l| {
            l.replace("fs.open", "fs\\u002eopen").replace('/', "\\/")
        }),
        ("nulls left out", |l| l.replace(",\"task_id\":null", "")),
    ];
    for (what, rewrite) in rewrites {
        for bytes in [&good, &tampered] {
            let other = rewritten(bytes, rewrite);
            assert_ne!(&other, bytes, "{what}");
            assert_eq!(verify(&other), verify(bytes), "{what}");
        }
    }
    // What serde refuses is refused as before, with its message.
    let other = rewritten(&good, |l| l.replace("\"seq\":0,", "\"seq\":-0,"));
    assert_eq!(
        verify(&other).messages(),
        [
            "[pack] receipts/host-a.jsonl line 1: invalid type: floating point `-0.0`, expected u64 at line 1 column 466"
        ]
    );
}
