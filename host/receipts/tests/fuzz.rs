//! Whatever bytes arrive as an evidence pack, reading, verifying and
//! replaying it answers with a pack, a report or a clear error, never a
//! panic, and never allocates what a header only declares: arbitrary
//! bytes, and a good pack with bytes flipped, inserted, deleted or cut.
//! Merging a pack that reads with the good one (the way `hcp evidence
//! merge` would, were it not to verify first) is a pack or an error too.
//! `PROPTEST_CASES` sets the number of cases (64 by default; `scripts/fuzz`
//! runs many more).

mod common;

use common::{RulesDecider, standard_pack};
use hcp_fuzzkit::{config, mutate};
use hcp_receipts::pack::{self, ReadLimits};
use hcp_receipts::{VerifyOptions, replay, verify_bytes};
use proptest::prelude::*;
use std::sync::LazyLock;

static PACK: LazyLock<Vec<u8>> = LazyLock::new(|| pack::write(&standard_pack()).expect("write"));

/// The pack's entries, in order.
static ENTRIES: LazyLock<Vec<(String, Vec<u8>)>> = LazyLock::new(|| {
    let mut archive = tar::Archive::new(&PACK[..]);
    archive
        .entries()
        .expect("entries")
        .map(|e| {
            let mut e = e.expect("entry");
            let name = String::from_utf8(e.path_bytes().into_owned()).expect("utf8");
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).expect("read");
            (name, data)
        })
        .collect()
});

/// The pack with entry `which` replaced by `data` and a fresh, consistent
/// index, so that the content's own parsers see the change.
fn with_entry(which: usize, data: &[u8]) -> Vec<u8> {
    let mut files = ENTRIES.clone();
    files[which].1 = data.to_vec();
    let index = pack::Index {
        entries: files
            .iter()
            .filter(|(n, _)| n != pack::INDEX_PATH)
            .map(|(n, d)| pack::IndexEntry {
                path: n.clone(),
                size: d.len() as u64,
                sha256: hcp_receipts::Digest::of(d),
            })
            .collect(),
    };
    let index = serde_json::to_vec(&index).expect("index");
    let mut builder = tar::Builder::new(Vec::new());
    for (name, data) in &files {
        let data = if name == pack::INDEX_PATH {
            &index
        } else {
            data
        };
        let mut header = tar::Header::new_ustar();
        header.set_path(name).expect("path");
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append(&header, &data[..]).expect("append");
    }
    builder.into_inner().expect("tar")
}

fn check(bytes: &[u8]) {
    let limits = ReadLimits::default();
    match pack::read(bytes, &limits) {
        Ok(p) => {
            let _ = replay(&p, &RulesDecider);
            let _ = p.policy_snapshots();
            match pack::merge(vec![p, standard_pack()]) {
                Ok(merged) => {
                    let _ = pack::write(&merged);
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let report = verify_bytes(bytes, &limits, &VerifyOptions::default());
    assert!(report.failures.iter().all(|f| !f.message.is_empty()));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        check(&bytes);
        // With a tar-looking first block.
        let mut tarish = PACK[..512].to_vec();
        tarish.extend_from_slice(&bytes);
        check(&tarish);
    }

    #[test]
    fn mutated_packs(
        edits in hcp_fuzzkit::edits(1, 8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        check(&mutate(&PACK, &edits, cut));
    }

    /// One entry's content mutated under a consistent index: the receipts,
    /// checkpoints, proofs, inputs, keys and manifest parsers see it.
    #[test]
    fn mutated_entries_under_a_consistent_index(
        which in any::<prop::sample::Index>(),
        edits in hcp_fuzzkit::edits(1, 8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        let which = which.index(ENTRIES.len());
        check(&with_entry(which, &mutate(&ENTRIES[which].1, &edits, cut)));
    }

    /// A first header declaring any size up to the largest octal field: it
    /// is refused by the bytes the archive holds, not allocated.
    #[test]
    fn declared_sizes_are_not_trusted(size in any::<u64>().prop_map(|s| s % 0o77_777_777_777)) {
        let mut bytes = PACK.clone();
        let mut header = tar::Header::from_byte_slice(&bytes[..512]).clone();
        header.set_size(size);
        header.set_cksum();
        bytes[..512].copy_from_slice(header.as_bytes());
        check(&bytes);
    }
}

#[test]
fn the_unmutated_pack_reads_and_verifies() {
    pack::read(&PACK, &ReadLimits::default()).expect("reads");
    let rebuilt = with_entry(0, &ENTRIES[0].1);
    pack::read(&rebuilt, &ReadLimits::default()).expect("the rebuilt pack reads");
    let report = verify_bytes(&PACK, &ReadLimits::default(), &VerifyOptions::default());
    assert!(report.ok(), "{report}");
}

/// This process's peak resident memory (`VmHWM`), in bytes, after it is
/// reset to what is resident now.
fn peak_resident_from_now() -> impl Fn() -> u64 {
    fn read() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmHWM")
            * 1024
    }
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak");
    let before = read();
    move || read().saturating_sub(before)
}

/// A lines file of nothing but newlines (one byte a line) is refused
/// without a parsed slot for every line: read whole, 4 MiB of newlines
/// asked for more than a GiB before the first line was found bad, and a
/// pack of 100 MB for tens of GB.
#[test]
fn a_lines_file_of_newlines_is_refused_without_a_slot_per_line() {
    let newlines = vec![b'\n'; 4 << 20];
    let lines_files: Vec<usize> = ENTRIES
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| name.ends_with(".jsonl"))
        .map(|(i, _)| i)
        .collect();
    assert!(
        lines_files.len() >= 3,
        "{:?}",
        ENTRIES.iter().map(|e| &e.0).collect::<Vec<_>>()
    );
    for which in lines_files {
        let bytes = with_entry(which, &newlines);
        let grown = peak_resident_from_now();
        let read = pack::read(&bytes, &ReadLimits::default());
        let grew = grown();
        let name = &ENTRIES[which].0;
        let e = read.err().unwrap_or_else(|| panic!("{name}: read"));
        assert!(!e.to_string().is_empty());
        assert!(
            grew < 256 << 20,
            "{name}: reading grew the process by {} MiB ({e})",
            grew >> 20
        );
    }
}
