//! Reading a tar archive that may come from a stranger.
//!
//! Only plain ustar regular files are accepted, each as a slice of the
//! input (nothing is copied). Refused, in this order for each entry: links;
//! PAX and GNU extension headers; other non-regular entries; paths the
//! caller's check refuses; entries over their limit (before reading them);
//! more bytes or entries than the limits; entries the archive does not hold
//! in full; duplicates. After the last entry the end-of-archive marker must
//! follow, and nothing else. Each caller words the problems in its own
//! errors.

use std::collections::BTreeMap;

/// What is wrong with an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TarProblem {
    /// The length is not a whole number of 512-byte blocks.
    NotBlocks(usize),
    /// The `tar` crate could not read a header (its message).
    NotTar(String),
    /// A symbolic or hard link.
    Link {
        /// The entry.
        path: String,
    },
    /// A PAX or GNU extension header.
    Extension {
        /// The entry.
        path: String,
        /// Its type flag.
        kind: char,
    },
    /// A directory, device, FIFO or other non-regular entry.
    NotRegular {
        /// The entry.
        path: String,
        /// Its type flag.
        kind: char,
    },
    /// An entry over its limit.
    TooLarge {
        /// The entry.
        path: String,
        /// Its declared size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The entries together hold more than this.
    TooManyBytes(u64),
    /// More entries than this.
    TooManyEntries(usize),
    /// An entry declares more bytes than the archive holds.
    ShortEntry {
        /// The entry.
        path: String,
        /// Its declared size.
        size: u64,
        /// What the archive holds from its start.
        held: u64,
    },
    /// Two entries of one name.
    Duplicate {
        /// The name.
        path: String,
    },
    /// The end-of-archive marker (two zero blocks) is missing.
    NoEndMarker,
    /// Something follows the end-of-archive marker.
    TrailingData,
}

/// The archive-wide limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TarLimits {
    /// Most entries.
    pub entries: usize,
    /// Largest sum of entry sizes.
    pub total_bytes: u64,
}

/// Reads every entry of `bytes` (see the module doc). `entry_limit` gives
/// each path's largest size; `check_path` refuses unsafe or unexpected
/// names; `problem` turns what is wrong into the caller's error.
///
/// # Errors
///
/// The first problem found.
pub fn read_entries<E>(
    bytes: &[u8],
    limits: TarLimits,
    entry_limit: impl Fn(&str) -> u64,
    check_path: impl Fn(&str) -> Result<(), E>,
    problem: impl Fn(TarProblem) -> E,
) -> Result<BTreeMap<String, &[u8]>, E> {
    if !bytes.len().is_multiple_of(512) {
        return Err(problem(TarProblem::NotBlocks(bytes.len())));
    }
    let mut archive = tar::Archive::new(std::io::Cursor::new(bytes));
    let iter = archive
        .entries_with_seek()
        .map_err(|e| problem(TarProblem::NotTar(e.to_string())))?
        .raw(true);
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    let mut end = 0u64;
    for entry in iter {
        let entry = entry.map_err(|e| problem(TarProblem::NotTar(e.to_string())))?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let flag = char::from(kind.as_byte());
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(problem(TarProblem::Link { path }));
        }
        if kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink()
        {
            return Err(problem(TarProblem::Extension { path, kind: flag }));
        }
        if !kind.is_file() {
            return Err(problem(TarProblem::NotRegular { path, kind: flag }));
        }
        check_path(&path)?;
        let size = entry.size();
        let limit = entry_limit(&path);
        if size > limit {
            return Err(problem(TarProblem::TooLarge { path, size, limit }));
        }
        total = total.saturating_add(size);
        if total > limits.total_bytes {
            return Err(problem(TarProblem::TooManyBytes(limits.total_bytes)));
        }
        if files.len() >= limits.entries {
            return Err(problem(TarProblem::TooManyEntries(limits.entries)));
        }
        let start = entry.raw_file_position();
        let Some(data) = usize::try_from(start)
            .ok()
            .zip(usize::try_from(start.saturating_add(size)).ok())
            .and_then(|(from, to)| bytes.get(from..to))
        else {
            let held = (bytes.len() as u64).saturating_sub(start);
            return Err(problem(TarProblem::ShortEntry { path, size, held }));
        };
        end = start + size.next_multiple_of(512);
        if files.contains_key(&path) {
            return Err(problem(TarProblem::Duplicate { path }));
        }
        files.insert(path, data);
    }
    let tail = bytes
        .get(usize::try_from(end).unwrap_or(usize::MAX)..)
        .unwrap_or_default();
    if tail.len() < 1024 {
        return Err(problem(TarProblem::NoEndMarker));
    }
    if tail.iter().any(|&b| b != 0) {
        return Err(problem(TarProblem::TrailingData));
    }
    Ok(files)
}
