//! What a bundle holds, where, and how large each part may be.
//!
//! ```text
//! manifest.json        the manifest: component.path "component.wasm", component.digest pinned
//! component.wasm       the component
//! wit/<name>.wit       the WIT package the component targets (hcp:capability@<version>)
//! signature.json       the publisher's signature (absent: the bundle is unsigned)
//! <dir>/...            read-only data: only under a directory the manifest grants as
//!                      `${manifest_dir}/<dir>` with access read-only
//! ```
//!
//! Every entry is a regular file; directories are implied by paths. Paths
//! are relative, 1 to 100 bytes, of components made of `[A-Za-z0-9._-]`,
//! never `.` or `..`.

use crate::error::BundleError;
use hcp_receipts::archive::{self, PathProblem};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The manifest's entry.
pub const MANIFEST: &str = "manifest.json";
/// The component's entry; a bundled manifest's `component.path` is exactly this.
pub const COMPONENT: &str = "component.wasm";
/// The signature's entry.
pub const SIGNATURE: &str = "signature.json";
/// The directory of the WIT package.
pub const WIT_DIR: &str = "wit";
/// The grant-path prefix of data shipped in the bundle.
pub const MANIFEST_DIR_VAR: &str = "${manifest_dir}";

/// Longest entry path (a plain ustar name, no prefix field).
pub use hcp_receipts::archive::MAX_PATH;

/// How large a bundle and each of its entries may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `manifest.json`.
    pub manifest_bytes: u64,
    /// `signature.json`.
    pub signature_bytes: u64,
    /// Each `wit/*.wit` file.
    pub wit_file_bytes: u64,
    /// `component.wasm`.
    pub component_bytes: u64,
    /// Each data file.
    pub data_file_bytes: u64,
    /// All entries together.
    pub total_bytes: u64,
    /// Number of entries.
    pub entries: usize,
}

impl Limits {
    /// The size limit of the entry at `path` (by its kind: manifest,
    /// component, signature, WIT file, data file), and its kind's name for
    /// messages: what a reader that receives entries one by one (an OCI
    /// registry's layers) bounds each by before it downloads it.
    pub fn entry_bytes(&self, path: &str) -> (u64, &'static str) {
        EntryKind::of(path).limit(self)
    }

    /// The largest tar archive these limits admit: every entry's bytes, a
    /// header and at most a block of padding per entry, and the end marker.
    /// A compressed bundle is never decompressed past it.
    pub fn archive_bytes(&self) -> u64 {
        let entries = u64::try_from(self.entries).unwrap_or(u64::MAX);
        self.total_bytes
            .saturating_add(entries.saturating_mul(1024))
            .saturating_add(1024)
    }
}

impl Default for Limits {
    /// 1 MiB manifest, 64 KiB signature, 256 KiB per WIT file, 256 MiB
    /// component (the manifest loader's own limit), 64 MiB per data file,
    /// 512 MiB and 4096 entries in all.
    fn default() -> Self {
        Self {
            manifest_bytes: 1 << 20,
            signature_bytes: 64 << 10,
            wit_file_bytes: 256 << 10,
            component_bytes: 256 << 20,
            data_file_bytes: 64 << 20,
            total_bytes: 512 << 20,
            entries: 4096,
        }
    }
}

/// What an entry is, by its path alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    Manifest,
    Component,
    Signature,
    Wit,
    /// Anything else: data, if the manifest grants its directory.
    Other,
}

impl EntryKind {
    pub(crate) fn of(path: &str) -> Self {
        match path {
            MANIFEST => Self::Manifest,
            COMPONENT => Self::Component,
            SIGNATURE => Self::Signature,
            _ if is_wit_path(path) => Self::Wit,
            _ => Self::Other,
        }
    }

    /// The size limit of this kind, and its name for messages.
    pub(crate) fn limit(self, limits: &Limits) -> (u64, &'static str) {
        match self {
            Self::Manifest => (limits.manifest_bytes, "the manifest"),
            Self::Component => (limits.component_bytes, "the component"),
            Self::Signature => (limits.signature_bytes, "the signature"),
            Self::Wit => (limits.wit_file_bytes, "a WIT file"),
            Self::Other => (limits.data_file_bytes, "a data file"),
        }
    }
}

/// `wit/<name>.wit`, one level deep.
fn is_wit_path(path: &str) -> bool {
    path.strip_prefix("wit/")
        .and_then(|name| name.strip_suffix(".wit"))
        .is_some_and(|stem| !stem.is_empty() && !stem.contains('/'))
}

/// Checks one entry path against the archive rule
/// ([`hcp_receipts::archive`]): relative, no `..`, allowed characters.
///
/// # Errors
///
/// [`BundleError::Traversal`] for an absolute path or a `..` component,
/// [`BundleError::BadPath`] for anything else outside the rules.
pub fn check_path(path: &str) -> Result<(), BundleError> {
    archive::check_path(path).map_err(|problem| path_error(path, problem))
}

/// The bundle's words for an entry path that breaks the archive rule.
pub(crate) fn path_error(path: &str, problem: PathProblem) -> BundleError {
    let path = path.to_owned();
    match problem {
        PathProblem::Traversal => BundleError::Traversal { path },
        PathProblem::Bad(reason) => BundleError::BadPath {
            path,
            reason: reason.to_owned(),
        },
    }
}

/// The directory of a grant path `${manifest_dir}/<dir>`, if it is one.
/// `${manifest_dir}` alone yields `Some("")`.
pub fn bundled_dir(grant_path: &str) -> Option<&str> {
    let rest = grant_path.strip_prefix(MANIFEST_DIR_VAR)?;
    if rest.is_empty() {
        return Some("");
    }
    let rest = rest.strip_prefix('/')?;
    Some(rest.trim_end_matches('/'))
}

/// A publisher's name: 1 to 64 characters of `[A-Za-z0-9._-]`, starting
/// with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PublisherName(String);

impl PublisherName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for PublisherName {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        let ok = (1..=64).contains(&s.len())
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(Self(s))
        } else {
            Err(format!(
                "{s:?} is not a publisher name (1 to 64 of [A-Za-z0-9._-], starting with a letter or digit)"
            ))
        }
    }
}

impl std::str::FromStr for PublisherName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::try_from(s.to_owned())
    }
}

impl From<PublisherName> for String {
    fn from(n: PublisherName) -> String {
        n.0
    }
}

impl fmt::Display for PublisherName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for ok in [
            "manifest.json",
            "wit/world.wit",
            "samples/paper-123.md",
            "a/b/c_d.e",
        ] {
            assert!(check_path(ok).is_ok(), "{ok}");
        }
        for traversal in ["../x", "/etc/passwd", "a/../b", "a\\..\\b", "a/.."] {
            assert!(
                matches!(check_path(traversal), Err(BundleError::Traversal { .. })),
                "{traversal}"
            );
        }
        for bad in ["", "a//b", "./a", "a/", "sp ace", "ü", &"a".repeat(101)] {
            assert!(
                matches!(check_path(bad), Err(BundleError::BadPath { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn kinds_and_bundled_dirs() {
        assert_eq!(EntryKind::of("wit/log.wit"), EntryKind::Wit);
        assert_eq!(EntryKind::of("wit/sub/log.wit"), EntryKind::Other);
        assert_eq!(EntryKind::of("wit/.wit"), EntryKind::Other);
        assert_eq!(EntryKind::of("samples/a.md"), EntryKind::Other);
        assert_eq!(bundled_dir("${manifest_dir}/samples"), Some("samples"));
        assert_eq!(bundled_dir("${manifest_dir}/a/b/"), Some("a/b"));
        assert_eq!(bundled_dir("${manifest_dir}"), Some(""));
        assert_eq!(bundled_dir("${manifest_dir}x"), None);
        assert_eq!(bundled_dir("/srv/data"), None);
    }

    #[test]
    fn publisher_names() {
        assert!("hcp-examples".parse::<PublisherName>().is_ok());
        assert!("Acme.Labs_2".parse::<PublisherName>().is_ok());
        for bad in ["", "-x", "a b", "é", &"a".repeat(65)] {
            assert!(bad.parse::<PublisherName>().is_err(), "{bad}");
        }
    }
}
