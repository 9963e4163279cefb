//! Reading a pack, refusing anything hostile.

use super::proofs::{InclusionRef, decode_inclusion_refs};
use super::{
    ConsistencyProof, DecisionInput, HostPaths, HostSection, INDEX_PATH, Index, KEYS_DIR,
    MANIFEST_PATH, MANIFESTS_DIR, MESSAGES_DIR, PACK_FORMAT, POLICY_DIR, Pack, PackError,
    PackManifest, check_path,
};
use crate::archive::{TarLimits, TarProblem, read_entries};
use crate::checkpoint::Checkpoint;
use crate::hash::Digest;
use crate::ids;
use crate::keys::{KeyId, PublicKey};
use crate::receipt::Receipt;
use crate::scan;
use crate::view::ReceiptView;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};

/// Limits on what [`read`] accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLimits {
    /// Largest entry, in bytes.
    pub max_entry_bytes: u64,
    /// Largest sum of entry sizes.
    pub max_total_bytes: u64,
    /// Most entries.
    pub max_entries: usize,
}

impl Default for ReadLimits {
    /// 4 GiB per entry, 16 GiB in all, 100 000 entries: room for packs of
    /// several million receipts. Lower them for packs from strangers.
    fn default() -> Self {
        Self {
            max_entry_bytes: 4 << 30,
            max_total_bytes: 16 << 30,
            max_entries: 100_000,
        }
    }
}

/// Reads a pack. Refuses non-tar or truncated input, links and other
/// non-regular entries, PAX and GNU extension headers, absolute paths and
/// `..`, names outside the layout, entries over the limits, duplicate names,
/// entries the index does not list (or lists with another size or hash),
/// index lines without an entry, and malformed records.
///
/// # Errors
///
/// The first of these found.
pub fn read(bytes: &[u8], limits: &ReadLimits) -> Result<Pack, PackError> {
    let read: Read<'_, Receipt> = read_with(bytes, limits, true)?;
    Ok(Pack {
        hosts: read
            .hosts
            .into_iter()
            .map(|s| HostSection {
                host_id: s.host_id,
                keys: s.keys,
                first_seq: s.first_seq,
                prev_hash: s.prev_hash,
                prev_checkpoint: s.prev_checkpoint,
                receipts: s.receipts,
                checkpoints: s.checkpoints,
                inclusion: s
                    .inclusion
                    .into_iter()
                    .map(InclusionRef::to_owned_proof)
                    .collect(),
                consistency: s.consistency,
                inputs: s.inputs,
            })
            .collect(),
        external_parents: read.external_parents,
        public_keys: read.public_keys,
        policy: owned(read.policy),
        manifests: owned(read.manifests),
        messages: owned(read.messages),
    })
}

fn owned(files: BTreeMap<String, &[u8]>) -> BTreeMap<String, Vec<u8>> {
    files.into_iter().map(|(k, v)| (k, v.to_vec())).collect()
}

/// A pack as read, borrowing from its bytes: receipts as `R` (a [`Receipt`],
/// or a [`StoredReceipt`] that keeps its line), inclusion proofs and opaque
/// files as slices.
#[derive(Debug)]
pub(crate) struct Read<'b, R> {
    pub(crate) hosts: Vec<ReadSection<'b, R>>,
    pub(crate) external_parents: Vec<Digest>,
    pub(crate) public_keys: Vec<PublicKey>,
    pub(crate) policy: BTreeMap<String, &'b [u8]>,
    pub(crate) manifests: BTreeMap<String, &'b [u8]>,
    pub(crate) messages: BTreeMap<String, &'b [u8]>,
}

/// A [`HostSection`] as read.
#[derive(Debug)]
pub(crate) struct ReadSection<'b, R> {
    pub(crate) host_id: String,
    pub(crate) keys: Vec<KeyId>,
    pub(crate) first_seq: u64,
    pub(crate) prev_hash: Option<Digest>,
    pub(crate) prev_checkpoint: Option<Digest>,
    pub(crate) receipts: Vec<R>,
    pub(crate) checkpoints: Vec<Checkpoint>,
    pub(crate) inclusion: Vec<InclusionRef<'b>>,
    pub(crate) consistency: Vec<ConsistencyProof>,
    pub(crate) inputs: Vec<DecisionInput>,
}

/// How a line of a receipts file is read.
pub(crate) trait FromLine<'b>: Sized + Send {
    /// The record, or what serde found wrong.
    fn from_line(line: &'b str) -> Result<Self, serde_json::Error>;
}

impl FromLine<'_> for Receipt {
    fn from_line(line: &str) -> Result<Self, serde_json::Error> {
        match scan::scan(line) {
            Some(scanned) => Ok(scanned.to_receipt()),
            None => serde_json::from_str(line),
        }
    }
}

/// A receipt as verification keeps it: its canonical line, read in place
/// (see [`crate::scan`]), or what serde read from any other line.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "lines are the rule: boxing them would allocate once per receipt"
)]
pub(crate) enum StoredReceipt<'b> {
    /// A canonical line.
    Line(ReceiptView<'b>),
    /// Any other line.
    Parsed(Box<Receipt>),
}

impl<'b> FromLine<'b> for StoredReceipt<'b> {
    fn from_line(line: &'b str) -> Result<Self, serde_json::Error> {
        match scan::scan(line) {
            Some(scanned) => Ok(Self::Line(scanned.view())),
            None => serde_json::from_str(line).map(|r| Self::Parsed(Box::new(r))),
        }
    }
}

impl StoredReceipt<'_> {
    pub(crate) fn view(&self) -> ReceiptView<'_> {
        match self {
            Self::Line(view) => *view,
            Self::Parsed(r) => ReceiptView::of(r),
        }
    }
}

/// As [`read`], keeping receipts as `R`; with `decision_inputs` false the
/// decision inputs are checked against the index but not parsed, and the
/// sections' `inputs` stay empty (verification does not need them; replay
/// does).
pub(crate) fn read_with<'b, R: FromLine<'b>>(
    bytes: &'b [u8],
    limits: &ReadLimits,
    decision_inputs: bool,
) -> Result<Read<'b, R>, PackError> {
    let mut files = entries(bytes, limits)?;
    check_index(&mut files)?;
    parse(files, decision_inputs)
}

/// The entries, as slices of `bytes` (entry data is never copied).
fn entries<'b>(
    bytes: &'b [u8],
    limits: &ReadLimits,
) -> Result<BTreeMap<String, &'b [u8]>, PackError> {
    read_entries(
        bytes,
        TarLimits {
            entries: limits.max_entries,
            total_bytes: limits.max_total_bytes,
        },
        |_| limits.max_entry_bytes,
        check_path,
        |problem| match problem {
            TarProblem::NotBlocks(len) => PackError::Truncated(format!(
                "{len} bytes is not a whole number of 512-byte tar blocks"
            )),
            TarProblem::NotTar(e) => PackError::NotTar(e),
            TarProblem::Link { path } => PackError::Link { path },
            TarProblem::Extension { path, kind } => PackError::Extension { path, kind },
            TarProblem::NotRegular { path, kind } => PackError::NotRegular { path, kind },
            TarProblem::TooLarge { path, size, limit } => PackError::TooLarge { path, size, limit },
            TarProblem::TooManyBytes(limit) => {
                PackError::Limit(format!("entries hold more than {limit} bytes"))
            }
            TarProblem::TooManyEntries(limit) => {
                PackError::Limit(format!("more than {limit} entries"))
            }
            TarProblem::ShortEntry { path, size, held } => PackError::Truncated(format!(
                "entry {path:?} declares {size} bytes, the archive holds {held}"
            )),
            TarProblem::Duplicate { path } => PackError::Duplicate { path },
            TarProblem::NoEndMarker => PackError::Truncated(
                "the archive ends without its end-of-archive marker (two zero blocks)".into(),
            ),
            TarProblem::TrailingData => {
                PackError::NotTar("data after the end-of-archive marker".into())
            }
        },
    )
}

fn check_index(files: &mut BTreeMap<String, &[u8]>) -> Result<(), PackError> {
    let index_bytes = files
        .remove(INDEX_PATH)
        .ok_or_else(|| PackError::MissingEntry {
            path: INDEX_PATH.to_owned(),
        })?;
    let index: Index = parse_json(INDEX_PATH, index_bytes)?;
    let mut listed = HashMap::with_capacity(index.entries.len());
    for e in &index.entries {
        if listed.insert(e.path.as_str(), e).is_some() {
            return Err(PackError::Content {
                path: INDEX_PATH.to_owned(),
                line: None,
                reason: format!("{:?} is listed twice", e.path),
            });
        }
        if !files.contains_key(&e.path) {
            return Err(PackError::MissingEntry {
                path: e.path.clone(),
            });
        }
    }
    let items: Vec<(&String, &&[u8])> = files.iter().collect();
    // Largest first, one entry per thread at a time; then back in path order.
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(items[k].1.len()));
    let mut hashed = vec![Digest::default(); items.len()];
    let digests = crate::par::map_each(&order, |&k| Digest::of(items[k].1));
    for (k, digest) in order.into_iter().zip(digests) {
        hashed[k] = digest;
    }
    for ((path, bytes), actual) in items.into_iter().zip(hashed) {
        let Some(e) = listed.get(path.as_str()) else {
            return Err(PackError::NotInIndex { path: path.clone() });
        };
        if e.size != bytes.len() as u64 || e.sha256 != actual {
            return Err(PackError::IndexMismatch {
                path: path.clone(),
                expected: format!("{} bytes, {}", e.size, e.sha256),
                actual: format!("{} bytes, {actual}", bytes.len()),
            });
        }
    }
    Ok(())
}

fn parse_json<T: DeserializeOwned>(path: &str, bytes: &[u8]) -> Result<T, PackError> {
    serde_json::from_slice(bytes).map_err(|e| PackError::Content {
        path: path.to_owned(),
        line: None,
        reason: e.to_string(),
    })
}

/// Parses a JSON lines file in parallel.
fn parse_lines<T: DeserializeOwned + Send>(path: &str, bytes: &[u8]) -> Result<Vec<T>, PackError> {
    read_lines(path, bytes, None, serde_json::from_str)
}

/// Lines parsed at once, in parallel: what a lines file costs beyond its
/// own bytes before its first bad line is found.
const LINES_AT_ONCE: usize = 1 << 16;

/// Reads a lines file in parallel, each line with `read`, a block of
/// [`LINES_AT_ONCE`] lines at a time, stopping at the first block with a
/// bad line; with `declared`, a file with another number of lines is
/// refused before any is parsed.
///
/// Each line costs a slot of the parsed type (hundreds of bytes), and a
/// line may be one byte: read whole, a file of 100 MB of newlines asked
/// for tens of GB before its first line was found bad.
fn read_lines<'b, T: Send>(
    path: &str,
    bytes: &'b [u8],
    declared: Option<(u64, &str)>,
    read: impl Fn(&'b str) -> Result<T, serde_json::Error> + Sync,
) -> Result<Vec<T>, PackError> {
    let count = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    if let Some((declared, what)) = declared
        && count != declared
    {
        return Err(PackError::Content {
            path: path.to_owned(),
            line: None,
            reason: format!("holds {count} {what}, pack.json declares {declared}"),
        });
    }
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return Err(PackError::Content {
            path: path.to_owned(),
            line: None,
            reason: "does not end with a newline".into(),
        });
    };
    // UTF-8 is checked once for the whole file; lines are then split with
    // memchr and parsed without checking again.
    let body = std::str::from_utf8(body).map_err(|e| PackError::Content {
        path: path.to_owned(),
        line: Some(
            1 + body[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count(),
        ),
        reason: format!("not UTF-8: {e}"),
    })?;
    let mut out = Vec::new();
    let mut lines = body.split('\n');
    let mut block: Vec<&str> = Vec::with_capacity(LINES_AT_ONCE.min(count as usize));
    loop {
        block.clear();
        block.extend(lines.by_ref().take(LINES_AT_ONCE));
        if block.is_empty() {
            return Ok(out);
        }
        let first = out.len();
        for parsed in crate::par::map(&block, |i, line| read(line).map_err(|e| (i, e))) {
            match parsed {
                Ok(t) => out.push(t),
                Err((i, e)) => {
                    return Err(PackError::Content {
                        path: path.to_owned(),
                        line: Some(first + i + 1),
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
}

fn parse<'b, R: FromLine<'b>>(
    mut files: BTreeMap<String, &'b [u8]>,
    decision_inputs: bool,
) -> Result<Read<'b, R>, PackError> {
    let manifest_bytes = files
        .remove(MANIFEST_PATH)
        .ok_or_else(|| PackError::MissingEntry {
            path: MANIFEST_PATH.to_owned(),
        })?;
    let manifest: PackManifest = parse_json(MANIFEST_PATH, manifest_bytes)?;
    let bad_manifest = |reason: String| PackError::Content {
        path: MANIFEST_PATH.to_owned(),
        line: None,
        reason,
    };
    if manifest.format != PACK_FORMAT {
        return Err(bad_manifest(format!(
            "format {:?} is not {PACK_FORMAT:?}",
            manifest.format
        )));
    }
    let mut pack = Read {
        hosts: Vec::new(),
        external_parents: manifest.external_parents,
        public_keys: Vec::new(),
        policy: BTreeMap::new(),
        manifests: BTreeMap::new(),
        messages: BTreeMap::new(),
    };
    let mut seen = std::collections::HashSet::new();
    for host in manifest.hosts {
        ids::check_host_id(&host.host_id).map_err(|e| bad_manifest(e.to_string()))?;
        if !seen.insert(host.host_id.clone()) {
            return Err(bad_manifest(format!("host {} appears twice", host.host_id)));
        }
        let paths = HostPaths::of(&host.host_id);
        let mut take = |path: &str| {
            files.remove(path).ok_or_else(|| PackError::MissingEntry {
                path: path.to_owned(),
            })
        };
        // Each record's own rules are checked by verification, which goes on
        // past a bad record; here only the JSON form is.
        let receipts: Vec<R> = read_lines(
            &paths.receipts,
            take(&paths.receipts)?,
            Some((host.count, "receipts")),
            R::from_line,
        )?;
        let checkpoints: Vec<Checkpoint> =
            parse_lines(&paths.checkpoints, take(&paths.checkpoints)?)?;
        let inclusion = decode_inclusion_refs(&paths.inclusion, take(&paths.inclusion)?)?;
        let consistency: Vec<ConsistencyProof> =
            parse_lines(&paths.consistency, take(&paths.consistency)?)?;
        let input_bytes = take(&paths.inputs)?;
        let inputs: Vec<DecisionInput> = if decision_inputs {
            parse_lines(&paths.inputs, input_bytes)?
        } else {
            Vec::new()
        };
        pack.hosts.push(ReadSection {
            host_id: host.host_id,
            keys: host.keys,
            first_seq: host.first_seq,
            prev_hash: host.prev_hash,
            prev_checkpoint: host.prev_checkpoint,
            receipts,
            checkpoints,
            inclusion,
            consistency,
            inputs,
        });
    }
    for (path, bytes) in files {
        if let Some(name) = path.strip_prefix(KEYS_DIR) {
            let text = std::str::from_utf8(bytes).map_err(|e| PackError::Content {
                path: path.clone(),
                line: None,
                reason: e.to_string(),
            })?;
            let key: PublicKey = text
                .trim_end()
                .parse()
                .map_err(|reason| PackError::Content {
                    path: path.clone(),
                    line: None,
                    reason,
                })?;
            if name != format!("{}.pub", key.key_id()) {
                return Err(PackError::BadName {
                    path: path.clone(),
                    reason: format!("holds key {}, so it must be keys/{0}.pub", key.key_id()),
                });
            }
            pack.public_keys.push(key);
        } else if let Some(name) = path.strip_prefix(POLICY_DIR) {
            pack.policy.insert(name.to_owned(), bytes);
        } else if let Some(name) = path.strip_prefix(MANIFESTS_DIR) {
            pack.manifests.insert(name.to_owned(), bytes);
        } else if let Some(name) = path.strip_prefix(MESSAGES_DIR) {
            pack.messages.insert(name.to_owned(), bytes);
        } else {
            return Err(PackError::BadName {
                path,
                reason: "not part of the pack layout (or of a host pack.json declares)".into(),
            });
        }
    }
    Ok(pack)
}
