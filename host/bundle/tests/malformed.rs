//! Whatever bytes arrive, reading a bundle answers with a bundle or an
//! error, never a panic: arbitrary bytes, and good bundles (plain and
//! compressed) with bytes flipped, cut or inserted.

mod common;

use common::{packed, read, signed};
use hcp_fuzzkit::{config_or, mutate};
use proptest::prelude::*;
use std::sync::LazyLock;

static PLAIN: LazyLock<Vec<u8>> = LazyLock::new(|| signed().to_archive().expect("archive"));
static COMPRESSED: LazyLock<Vec<u8>> = LazyLock::new(|| packed().to_bytes().expect("bytes"));

fn check(bytes: &[u8]) {
    if let Ok(bundle) = read(bytes) {
        // Whatever was accepted is a whole bundle again.
        let again = bundle.to_bytes().expect("bytes");
        read(&again).expect("a bundle read once reads again");
        let _ = bundle.signature_status();
        let _ = bundle.check_world();
    }
}

proptest! {
    #![proptest_config(config_or(256))]

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
        edits in hcp_fuzzkit::edits(0, 8),
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
        edits in hcp_fuzzkit::edits(0, 8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        check(&mutate(&COMPRESSED, &edits, cut));
    }
}
