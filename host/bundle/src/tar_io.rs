//! The tar container: deterministic writing, and reading that refuses
//! anything but plain ustar regular files with safe paths, within limits.

use crate::error::BundleError;
use crate::layout::{EntryKind, Limits, check_path};
use std::collections::BTreeMap;

/// Writes `entries` as a deterministic ustar archive: sorted by path, mode
/// 0644, uid and gid 0, no user or group names, mtime 0. The same entries
/// always give the same bytes.
///
/// # Errors
///
/// A path outside the naming rules.
pub(crate) fn write(entries: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, BundleError> {
    let total: usize = entries
        .values()
        .map(|b| 512 + b.len().next_multiple_of(512))
        .sum();
    let mut builder = tar::Builder::new(Vec::with_capacity(total + 1024));
    for (path, bytes) in entries {
        check_path(path)?;
        let header = header(path, bytes.len() as u64)?;
        builder
            .append(&header, bytes.as_slice())
            .map_err(|e| BundleError::Pack(format!("writing {path}: {e}")))?;
    }
    builder
        .into_inner()
        .map_err(|e| BundleError::Pack(format!("writing the bundle: {e}")))
}

fn header(path: &str, size: u64) -> Result<tar::Header, BundleError> {
    let err = |e: std::io::Error| BundleError::Pack(format!("{path}: {e}"));
    let mut h = tar::Header::new_ustar();
    h.set_path(path).map_err(err)?;
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_username("").map_err(err)?;
    h.set_groupname("").map_err(err)?;
    h.set_device_major(0).map_err(err)?;
    h.set_device_minor(0).map_err(err)?;
    h.set_cksum();
    Ok(h)
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
    if !bytes.len().is_multiple_of(512) {
        return Err(BundleError::Truncated(format!(
            "{} bytes is not a whole number of 512-byte tar blocks",
            bytes.len()
        )));
    }
    let mut archive = tar::Archive::new(std::io::Cursor::new(bytes));
    let iter = archive
        .entries_with_seek()
        .map_err(|e| BundleError::NotTar(format!("tar: {e}")))?
        .raw(true);
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    let mut end = 0u64;
    for entry in iter {
        let entry = entry.map_err(|e| BundleError::NotTar(format!("tar: {e}")))?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let flag = char::from(kind.as_byte());
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(BundleError::Link { path });
        }
        if kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink()
        {
            return Err(BundleError::Extension { path, kind: flag });
        }
        if !kind.is_file() {
            return Err(BundleError::NotRegular { path, kind: flag });
        }
        check_path(&path)?;
        let size = entry.size();
        let (limit, what) = EntryKind::of(&path).limit(limits);
        if size > limit {
            return Err(BundleError::TooLarge {
                path,
                size,
                limit,
                what,
            });
        }
        total = total.saturating_add(size);
        if total > limits.total_bytes {
            return Err(BundleError::TooMuch(format!(
                "its entries hold more than {} bytes",
                limits.total_bytes
            )));
        }
        if files.len() >= limits.entries {
            return Err(BundleError::TooMuch(format!(
                "more than {} entries",
                limits.entries
            )));
        }
        let start = entry.raw_file_position();
        let data = usize::try_from(start)
            .ok()
            .zip(usize::try_from(start.saturating_add(size)).ok())
            .and_then(|(from, to)| bytes.get(from..to))
            .ok_or_else(|| {
                BundleError::Truncated(format!(
                    "entry {path:?} declares {size} bytes, the archive holds {}",
                    (bytes.len() as u64).saturating_sub(start)
                ))
            })?;
        end = start + size.next_multiple_of(512);
        if files.contains_key(&path) {
            return Err(BundleError::Duplicate { path });
        }
        files.insert(path, data);
    }
    let tail = bytes
        .get(usize::try_from(end).unwrap_or(usize::MAX)..)
        .unwrap_or_default();
    if tail.len() < 1024 {
        return Err(BundleError::Truncated(
            "the archive ends without its end-of-archive marker (two zero blocks)".into(),
        ));
    }
    if tail.iter().any(|&b| b != 0) {
        return Err(BundleError::NotTar(
            "data after the tar's end-of-archive marker".into(),
        ));
    }
    Ok(files)
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
