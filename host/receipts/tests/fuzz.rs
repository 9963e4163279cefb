//! Whatever bytes arrive as an evidence pack, reading, verifying and
//! replaying it answers with a pack, a report or a clear error, never a
//! panic, and never allocates what a header only declares: arbitrary
//! bytes, and a good pack with bytes flipped, inserted, deleted or cut.
//! `PROPTEST_CASES` sets the number of cases (64 by default; `scripts/fuzz`
//! runs many more).

mod common;

use common::{RulesDecider, standard_pack};
use hcp_receipts::pack::{self, ReadLimits};
use hcp_receipts::{VerifyOptions, replay, verify_bytes};
use proptest::prelude::*;
use std::sync::LazyLock;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Applies `edits` (position as a fraction of the length, byte, how) to
/// `base`: set, flip a bit, insert or delete; then cuts it at `cut`.
fn mutate(base: &[u8], edits: &[(f64, u8, u8)], cut: Option<f64>) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for &(at, byte, how) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = ((bytes.len() - 1) as f64 * at) as usize;
        match how % 4 {
            0 => bytes[i] = byte,
            1 => bytes[i] ^= 1 << (byte % 8),
            2 => bytes.insert(i, byte),
            _ => {
                bytes.remove(i);
            }
        }
    }
    if let Some(cut) = cut {
        bytes.truncate((bytes.len() as f64 * cut) as usize);
    }
    bytes
}

static PACK: LazyLock<Vec<u8>> = LazyLock::new(|| pack::write(&standard_pack()).expect("write"));

fn check(bytes: &[u8]) {
    let limits = ReadLimits::default();
    match pack::read(bytes, &limits) {
        Ok(p) => {
            let _ = replay(&p, &RulesDecider);
            let _ = p.policy_snapshots();
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
        edits in proptest::collection::vec((0.0..1.0f64, any::<u8>(), any::<u8>()), 1..8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        check(&mutate(&PACK, &edits, cut));
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
    let report = verify_bytes(&PACK, &ReadLimits::default(), &VerifyOptions::default());
    assert!(report.ok(), "{report}");
}
