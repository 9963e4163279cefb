//! Whatever bytes arrive, reading a bundle answers with a bundle or an
//! error, never a panic: arbitrary bytes, and good bundles (plain and
//! compressed) with bytes flipped, cut or inserted.

mod common;

use common::{packed, read, signed};
use proptest::prelude::*;
use std::sync::LazyLock;

static PLAIN: LazyLock<Vec<u8>> = LazyLock::new(|| signed().to_archive().expect("archive"));
static COMPRESSED: LazyLock<Vec<u8>> = LazyLock::new(|| packed().to_bytes().expect("bytes"));

/// Applies `edits` (position as a fraction of the length, byte) to `base`,
/// then cuts it at `cut` (a fraction) when given.
fn mutate(base: &[u8], edits: &[(f64, u8, u8)], cut: Option<f64>) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for &(at, byte, how) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = ((bytes.len() - 1) as f64 * at) as usize;
        match how % 3 {
            0 => bytes[i] = byte,
            1 => bytes[i] ^= 1 << (byte % 8),
            _ => bytes.insert(i, byte),
        }
    }
    if let Some(cut) = cut {
        bytes.truncate((bytes.len() as f64 * cut) as usize);
    }
    bytes
}

fn check(bytes: &[u8]) {
    if let Ok(bundle) = read(bytes) {
        // Whatever was accepted is a whole bundle again.
        let again = bundle.to_bytes().expect("bytes");
        read(&again).expect("a bundle read once reads again");
        let _ = bundle.signature_status();
        let _ = bundle.check_world();
    }
}

/// `PROPTEST_CASES` cases (256 by default; `scripts/fuzz` runs many more).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        check(&bytes);
        // With a zstd magic in front, and with a tar-looking first block.
        check(&[&[0x28, 0xb5, 0x2f, 0xfd][..], &bytes].concat());
        let mut tarish = PLAIN[..512].to_vec();
        tarish.extend_from_slice(&bytes);
        check(&tarish);
    }

    #[test]
    fn mutated_plain_bundles(
        edits in proptest::collection::vec((0.0..1.0f64, any::<u8>(), any::<u8>()), 0..8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        check(&mutate(&PLAIN, &edits, cut));
    }

    /// A first header declaring any size up to the largest octal field:
    /// refused by the bytes the archive holds and the limits, never
    /// allocated.
    #[test]
    fn declared_sizes_are_not_trusted(size in any::<u64>().prop_map(|s| s % 0o77_777_777_777)) {
        let mut bytes = PLAIN.clone();
        let mut header = tar::Header::from_byte_slice(&bytes[..512]).clone();
        prop_assume!(header.size().ok() != Some(size));
        header.set_size(size);
        header.set_cksum();
        bytes[..512].copy_from_slice(header.as_bytes());
        prop_assert!(read(&bytes).is_err());
    }

    #[test]
    fn mutated_compressed_bundles(
        edits in proptest::collection::vec((0.0..1.0f64, any::<u8>(), any::<u8>()), 0..8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        check(&mutate(&COMPRESSED, &edits, cut));
    }
}
