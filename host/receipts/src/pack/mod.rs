//! Evidence packs: deterministic tar files that hold everything needed to
//! verify and replay a stretch of receipts offline.
//!
//! # Layout
//!
//! ```text
//! pack.json                         the pack manifest: format, hosts (segment start, count, keys), external parents
//! index.json                        every other entry: path, size, sha256
//! receipts/<host>.jsonl             the host's receipts in log order, canonical JSON, one per line
//! checkpoints/<host>.jsonl          the host's checkpoints in order, canonical JSON
//! proofs/<host>.inclusion           inclusion proof of every receipt (binary, see below)
//! proofs/<host>.consistency.jsonl   consistency proofs between successive checkpoints
//! inputs/<host>.jsonl               decision inputs, {"input":...,"seq":n} per line
//! keys/<key_id>.pub                 public keys, "ed25519:<hex>\n"
//! policy/<name>                     the policy snapshot (opaque files), when the receipts name one
//! policy/<hex>/<name>               each snapshot, by the hex of its hash, when they name several
//! manifests/<name>                  manifests and WIT files (opaque)
//! messages/<name>                   task messages (opaque)
//! ```
//!
//! Inclusion proofs are binary because there is one per receipt (about 20
//! hashes each at a million receipts): the magic `HCPINCL1`, then per
//! receipt, in log order, `seq` (u64 big-endian), the checkpoint's
//! `tree_size` (u64 big-endian), the number of hashes (u8) and the hashes
//! (32 bytes each), bottom-up as RFC 9162 lists them.
//!
//! # Determinism
//!
//! Entries are sorted by path; every header is a plain POSIX ustar header
//! with mode 0644, uid and gid 0, empty user and group names, mtime 0, no
//! PAX or GNU extension headers (paths are limited to 100 bytes so none is
//! ever needed), data padded with zeros to 512 bytes, and the archive ends
//! with two zero blocks. The same [`Pack`] always gives the same bytes.
//!
//! # Merging
//!
//! [`merge`] joins the packs of several hosts (or several packs of one
//! host) into one pack; see its module for the rules.

mod merge;
mod proofs;
mod read;
mod write;

pub use merge::{MergeError, merge, merge_labeled};
pub(crate) use proofs::InclusionRef;
pub use proofs::prove;
pub(crate) use read::{Read, StoredReceipt, read_with};
pub use read::{ReadLimits, read};
pub use write::write;

use crate::archive::PathProblem;
use crate::checkpoint::Checkpoint;
use crate::hash::Digest;
use crate::keys::{KeyId, PublicKey};
use crate::receipt::Receipt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Format name in `pack.json`.
pub const PACK_FORMAT: &str = "hcp-evidence-pack/1";
/// Path of the pack manifest.
pub const MANIFEST_PATH: &str = "pack.json";
/// Path of the index.
pub const INDEX_PATH: &str = "index.json";
/// Longest entry path (a ustar header's name field).
pub use crate::archive::MAX_PATH;

/// An evidence pack: what [`write`] takes and [`read`] returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pack {
    /// One section per host whose receipts the pack holds.
    pub hosts: Vec<HostSection>,
    /// Receipts named as parents that are deliberately not in the pack.
    pub external_parents: Vec<Digest>,
    /// Public keys of every signer.
    pub public_keys: Vec<PublicKey>,
    /// The policy snapshots, by path under `policy/`: `<name>` for a pack
    /// of one snapshot, `<dir>/<name>` for each of several (the exporter
    /// names each directory by the hex of the snapshot's hash; replay
    /// recomputes it). See [`Pack::policy_snapshots`].
    pub policy: BTreeMap<String, Vec<u8>>,
    /// Manifests and WIT files, by file name.
    pub manifests: BTreeMap<String, Vec<u8>>,
    /// Task messages, by file name.
    pub messages: BTreeMap<String, Vec<u8>>,
}

/// A pack's policy files as laid out: the files directly under `policy/`,
/// and those of each directory under it, by directory, each by file name.
pub(crate) type PolicyLayout<'a> = (
    BTreeMap<String, Vec<u8>>,
    BTreeMap<&'a str, BTreeMap<String, Vec<u8>>>,
);

impl Pack {
    /// [`Pack::policy`] split into the flat snapshot and the directories.
    pub(crate) fn policy_layout(&self) -> PolicyLayout<'_> {
        let mut flat = BTreeMap::new();
        let mut dirs: BTreeMap<&str, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
        for (path, bytes) in &self.policy {
            match path.split_once('/') {
                Some((dir, name)) => {
                    dirs.entry(dir)
                        .or_default()
                        .insert(name.to_owned(), bytes.clone());
                }
                None => {
                    flat.insert(path.clone(), bytes.clone());
                }
            }
        }
        (flat, dirs)
    }

    /// The policy snapshots of [`Pack::policy`], each by file name: the
    /// files directly under `policy/` (one snapshot, as every pack of one
    /// policy holds it), then one per directory under it, in name order.
    pub fn policy_snapshots(&self) -> Vec<BTreeMap<String, Vec<u8>>> {
        let (flat, dirs) = self.policy_layout();
        let mut out = Vec::with_capacity(dirs.len() + 1);
        if !flat.is_empty() {
            out.push(flat);
        }
        out.extend(dirs.into_values());
        out
    }
}

/// One host's contiguous stretch of its log, with its checkpoints and proofs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSection {
    /// The host.
    pub host_id: String,
    /// The host's signing keys (ids of keys in [`Pack::public_keys`]).
    pub keys: Vec<KeyId>,
    /// `seq` of the first receipt.
    pub first_seq: u64,
    /// `prev_hash` of the first receipt: the receipt before the stretch.
    pub prev_hash: Option<Digest>,
    /// `prev_checkpoint` of the first checkpoint.
    pub prev_checkpoint: Option<Digest>,
    /// Receipts in log order.
    pub receipts: Vec<Receipt>,
    /// Checkpoints in order.
    pub checkpoints: Vec<Checkpoint>,
    /// One inclusion proof per receipt (see [`prove`]).
    pub inclusion: Vec<InclusionProof>,
    /// One consistency proof per pair of successive checkpoints.
    pub consistency: Vec<ConsistencyProof>,
    /// Decision inputs, for replay.
    pub inputs: Vec<DecisionInput>,
}

impl HostSection {
    /// A section whose start (`first_seq`, `prev_hash`, `prev_checkpoint`) is
    /// taken from its first receipt and checkpoint; proofs are added by
    /// [`prove`].
    pub fn new(
        host_id: &str,
        keys: Vec<KeyId>,
        receipts: Vec<Receipt>,
        checkpoints: Vec<Checkpoint>,
        inputs: Vec<DecisionInput>,
    ) -> Self {
        Self {
            host_id: host_id.to_owned(),
            keys,
            first_seq: receipts.first().map_or(0, |r| r.seq),
            prev_hash: receipts.first().and_then(|r| r.prev_hash),
            prev_checkpoint: checkpoints.first().and_then(|c| c.prev_checkpoint),
            receipts,
            checkpoints,
            inclusion: Vec::new(),
            consistency: Vec::new(),
            inputs,
        }
    }
}

/// An RFC 9162 inclusion proof of receipt `seq` in the host's tree of
/// `tree_size` receipts (the size of a checkpoint in the pack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InclusionProof {
    /// The receipt's seq (its leaf index).
    pub seq: u64,
    /// The checkpoint's tree size.
    pub tree_size: u64,
    /// Audit path, bottom-up.
    pub path: Vec<Digest>,
}

/// An RFC 9162 consistency proof between two checkpoints' trees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsistencyProof {
    /// The older tree size.
    pub from: u64,
    /// The newer tree size.
    pub to: u64,
    /// The proof.
    pub path: Vec<Digest>,
}

/// The input the decider saw for one receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionInput {
    /// The input, as JSON; its RFC 8785 SHA-256 is the receipt's `input_hash`.
    pub input: serde_json::Value,
    /// The receipt's seq.
    pub seq: u64,
}

/// `pack.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackManifest {
    /// [`PACK_FORMAT`].
    pub format: String,
    /// One entry per host section.
    pub hosts: Vec<HostEntry>,
    /// Parents deliberately outside the pack.
    pub external_parents: Vec<Digest>,
}

/// A host's line in `pack.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// The host.
    pub host_id: String,
    /// Its signing keys.
    pub keys: Vec<KeyId>,
    /// `seq` of its first receipt.
    pub first_seq: u64,
    /// Number of receipts.
    pub count: u64,
    /// `prev_hash` of the first receipt.
    pub prev_hash: Option<Digest>,
    /// `prev_checkpoint` of the first checkpoint.
    pub prev_checkpoint: Option<Digest>,
}

/// A line of `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    /// Entry path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes.
    pub sha256: Digest,
}

/// `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// Every entry but the index itself, sorted by path.
    pub entries: Vec<IndexEntry>,
}

/// Errors of writing and reading packs.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// Not a tar archive, or a damaged one.
    #[error("not a tar archive, or a damaged one: {0}")]
    NotTar(String),
    /// The archive ends early.
    #[error("truncated pack: {0}")]
    Truncated(String),
    /// A symbolic or hard link.
    #[error("entry {path:?} is a link; packs hold regular files only")]
    Link {
        /// Entry path.
        path: String,
    },
    /// A directory, device, FIFO or other non-regular entry.
    #[error("entry {path:?} is not a regular file (type {kind:?})")]
    NotRegular {
        /// Entry path.
        path: String,
        /// The tar type flag.
        kind: char,
    },
    /// A PAX or GNU extension header.
    #[error(
        "entry {path:?} is a PAX or GNU extension header (type {kind:?}); packs use plain ustar headers"
    )]
    Extension {
        /// Entry path.
        path: String,
        /// The tar type flag.
        kind: char,
    },
    /// An absolute path or one with `..`.
    #[error("entry {path:?} escapes the pack (absolute path or `..`)")]
    Traversal {
        /// Entry path.
        path: String,
    },
    /// A path the layout does not allow.
    #[error("entry {path:?}: {reason}")]
    BadName {
        /// Entry path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An entry over the size limit.
    #[error("entry {path:?} has {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// Entry path.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Too many entries or bytes in all.
    #[error("pack too large: {0}")]
    Limit(String),
    /// The same path twice.
    #[error("entry {path:?} appears twice")]
    Duplicate {
        /// Entry path.
        path: String,
    },
    /// An entry the index does not list.
    #[error("entry {path:?} is not in the index")]
    NotInIndex {
        /// Entry path.
        path: String,
    },
    /// An index line without its entry.
    #[error("the index lists {path:?}, which the pack does not hold")]
    MissingEntry {
        /// Entry path.
        path: String,
    },
    /// An entry whose bytes do not match the index.
    #[error("entry {path:?} does not match the index: index says {expected}, entry is {actual}")]
    IndexMismatch {
        /// Entry path.
        path: String,
        /// What the index says (size and hash).
        expected: String,
        /// What the entry is.
        actual: String,
    },
    /// Malformed content.
    #[error("{path}{}: {reason}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Content {
        /// Entry path.
        path: String,
        /// 1-based line, for JSON lines files.
        line: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// The pack cannot be written as given.
    #[error("cannot write pack: {0}")]
    Write(String),
}

/// Checks an entry path against the archive rule ([`crate::archive`]): 1
/// to [`MAX_PATH`] bytes of `/`-separated components from `[A-Za-z0-9._-]`,
/// none empty, `.` or `..`, not absolute.
///
/// # Errors
///
/// [`PackError::Traversal`] for absolute paths and `..`,
/// [`PackError::BadName`] for anything else.
pub fn check_path(path: &str) -> Result<(), PackError> {
    crate::archive::check_path(path).map_err(|problem| path_error(path, problem))
}

/// The pack's words for an entry path that breaks the archive rule.
pub(crate) fn path_error(path: &str, problem: PathProblem) -> PackError {
    let path = path.to_owned();
    match problem {
        PathProblem::Traversal => PackError::Traversal { path },
        PathProblem::Bad(reason) => PackError::BadName {
            path,
            reason: reason.to_owned(),
        },
    }
}

/// Paths of a host's files.
pub(crate) struct HostPaths {
    pub(crate) receipts: String,
    pub(crate) checkpoints: String,
    pub(crate) inclusion: String,
    pub(crate) consistency: String,
    pub(crate) inputs: String,
}

impl HostPaths {
    pub(crate) fn of(host_id: &str) -> Self {
        Self {
            receipts: format!("receipts/{host_id}.jsonl"),
            checkpoints: format!("checkpoints/{host_id}.jsonl"),
            inclusion: format!("proofs/{host_id}.inclusion"),
            consistency: format!("proofs/{host_id}.consistency.jsonl"),
            inputs: format!("inputs/{host_id}.jsonl"),
        }
    }
}

/// Directories of opaque files.
pub(crate) const POLICY_DIR: &str = "policy/";
pub(crate) const MANIFESTS_DIR: &str = "manifests/";
pub(crate) const MESSAGES_DIR: &str = "messages/";
pub(crate) const KEYS_DIR: &str = "keys/";
