//! What the property tests of every parser of outside input share (see
//! `docs/security.md`, "Every parser meets hostile bytes"): how many cases
//! run, and how a valid input is mutated.
//!
//! Only tests depend on this crate. `PROPTEST_CASES` sets the number of
//! cases; `scripts/test` runs the default, `scripts/fuzz` many more.

#![deny(missing_docs)]

use proptest::prelude::*;

/// `PROPTEST_CASES` cases (64 when unset), no failure persistence files.
pub fn config() -> ProptestConfig {
    config_or(64)
}

/// `PROPTEST_CASES` cases (`default` when unset or not a number), no
/// failure persistence files.
pub fn config_or(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Up to `max` edits for [`mutate`], at least `min`.
pub fn edits(min: usize, max: usize) -> impl Strategy<Value = Vec<(f64, u8, u8)>> {
    proptest::collection::vec((0.0..1.0f64, any::<u8>(), any::<u8>()), min..max)
}

/// Applies `edits` (position as a fraction of the length, a byte, how) to
/// `base`: set the byte, flip one of its bits, insert it or delete the byte
/// there; then cuts the result at `cut` (a fraction of its length).
pub fn mutate(base: &[u8], edits: &[(f64, u8, u8)], cut: Option<f64>) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::mutate;

    #[test]
    fn each_edit_does_what_it_says() {
        let base = b"abcd";
        assert_eq!(mutate(base, &[(0.0, b'x', 0)], None), b"xbcd");
        assert_eq!(mutate(base, &[(0.0, 1, 1)], None), b"cbcd");
        assert_eq!(mutate(base, &[(0.0, b'x', 2)], None), b"xabcd");
        assert_eq!(mutate(base, &[(0.0, 0, 3)], None), b"bcd");
        assert_eq!(mutate(base, &[], Some(0.5)), b"ab");
        assert!(mutate(b"", &[(0.5, 0, 0)], None).is_empty());
    }
}
