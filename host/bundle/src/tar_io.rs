//! The tar container in the bundle's words: the shared deterministic
//! writer and hardened reader of [`hcp_receipts::archive`], with the
//! bundle's errors and per-kind limits.

use crate::error::BundleError;
use crate::layout::{EntryKind, Limits, check_path, path_error};
use hcp_receipts::archive::{self, TarLimits, TarProblem, WriteProblem, read_entries};
use std::collections::BTreeMap;

/// Writes `entries` as a deterministic ustar archive
/// ([`hcp_receipts::archive::write`]): sorted by path, mode 0644, uid and
/// gid 0, no user or group names, mtime 0. The same entries always give the
/// same bytes.
///
/// # Errors
///
/// A path outside the naming rules.
pub(crate) fn write(entries: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, BundleError> {
    archive::write(entries.iter().map(|(p, b)| (p.as_str(), b.as_slice()))).map_err(|e| match e {
        WriteProblem::Path { path, problem } => path_error(&path, problem),
        WriteProblem::Header { path, source } => BundleError::Pack(format!("{path}: {source}")),
        WriteProblem::Append { path, source } => {
            BundleError::Pack(format!("writing {path}: {source}"))
        }
        WriteProblem::Finish(source) => BundleError::Pack(format!("writing the bundle: {source}")),
    })
}

/// Whether the first block is a tar header with a valid checksum.
fn first_header_ok(bytes: &[u8]) -> Result<(), BundleError> {
    let Some(block) = bytes.get(..512) else {
        return Err(BundleError::NotTar(format!(
            "{} bytes, shorter than one 512-byte tar header",
            bytes.len()
        )));
    };
    let field = &block[148..156];
    let text = std::str::from_utf8(field).unwrap_or("");
    let stored = u32::from_str_radix(text.trim_matches(|c: char| c == '\0' || c == ' '), 8);
    let computed: u32 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(b)
            }
        })
        .sum();
    match stored {
        Ok(s) if s == computed => Ok(()),
        _ => Err(BundleError::NotTar(
            "neither a zstd frame nor a tar archive (the first block is not a tar header)".into(),
        )),
    }
}

/// Reads every entry of a bundle archive, as slices of `bytes`.
///
/// Refuses, in this order for each entry: links, PAX and GNU extension
/// headers and other non-regular entries; unsafe paths; entries over their
/// kind's limit (before reading them); more entries or bytes than the
/// limits; entries the archive does not hold in full; duplicates. After the
/// last entry, the end-of-archive marker must follow and nothing else.
///
/// # Errors
///
/// The first problem found.
pub(crate) fn read<'b>(
    bytes: &'b [u8],
    limits: &Limits,
) -> Result<BTreeMap<String, &'b [u8]>, BundleError> {
    first_header_ok(bytes)?;
    read_entries(
        bytes,
        TarLimits {
            entries: limits.entries,
            total_bytes: limits.total_bytes,
        },
        |path| EntryKind::of(path).limit(limits).0,
        check_path,
        |problem| match problem {
            TarProblem::NotBlocks(len) => BundleError::Truncated(format!(
                "{len} bytes is not a whole number of 512-byte tar blocks"
            )),
            TarProblem::NotTar(e) => BundleError::NotTar(format!("tar: {e}")),
            TarProblem::Link { path } => BundleError::Link { path },
            TarProblem::Extension { path, kind } => BundleError::Extension { path, kind },
            TarProblem::NotRegular { path, kind } => BundleError::NotRegular { path, kind },
            TarProblem::TooLarge { path, size, limit } => {
                let what = EntryKind::of(&path).limit(limits).1;
                BundleError::TooLarge {
                    path,
                    size,
                    limit,
                    what,
                }
            }
            TarProblem::TooManyBytes(limit) => {
                BundleError::TooMuch(format!("its entries hold more than {limit} bytes"))
            }
            TarProblem::TooManyEntries(limit) => {
                BundleError::TooMuch(format!("more than {limit} entries"))
            }
            TarProblem::ShortEntry { path, size, held } => BundleError::Truncated(format!(
                "entry {path:?} declares {size} bytes, the archive holds {held}"
            )),
            TarProblem::Duplicate { path } => BundleError::Duplicate { path },
            TarProblem::NoEndMarker => BundleError::Truncated(
                "the archive ends without its end-of-archive marker (two zero blocks)".into(),
            ),
            TarProblem::TrailingData => {
                BundleError::NotTar("data after the tar's end-of-archive marker".into())
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_deterministic() {
        let mut entries = BTreeMap::new();
        entries.insert("b.txt".to_owned(), b"two".to_vec());
        entries.insert("a.txt".to_owned(), b"one".to_vec());
        let one = write(&entries).expect("write");
        let two = write(&entries).expect("write");
        assert_eq!(one, two);
        let read = read(&one, &Limits::default()).expect("read");
        let paths: Vec<&str> = read.keys().map(String::as_str).collect();
        assert_eq!(paths, ["a.txt", "b.txt"]);
        assert_eq!(read["b.txt"], b"two");
    }
}
