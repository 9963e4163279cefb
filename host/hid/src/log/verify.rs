//! Verification of the chain, as a pure function of the stored rows.

use super::LogEntry;
use std::collections::{BTreeMap, HashSet};

/// A chain that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many entries.
    pub entries: u64,
    /// The last entry's checksum.
    pub head: Option<String>,
}

/// How the chain is broken, and where. Entries are named by `sequence` and
/// `log_id`; `position` counts stored rows from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityError {
    /// A stored row is not an entry at all.
    #[error("row {position} is not a session-log entry: {reason}")]
    Unreadable {
        /// Its stored position.
        position: usize,
        /// Why.
        reason: String,
    },
    /// An entry's content no longer matches its checksum.
    #[error("entry {sequence} ({log_id}) was altered: its checksum does not match its content")]
    Altered {
        /// Its sequence.
        sequence: u64,
        /// Its id.
        log_id: String,
    },
    /// Entries are missing.
    #[error("{} deleted{}", deleted(*first, *last), before.as_ref().map(|b| format!(" (the chain resumes at {b})")).unwrap_or_else(|| " at the end of the log".into()))]
    Deleted {
        /// The first missing sequence.
        first: u64,
        /// The last missing sequence.
        last: u64,
        /// The entry right after the gap, if any.
        before: Option<String>,
    },
    /// An entry the chain does not account for.
    #[error(
        "entry {log_id} was inserted: it claims sequence {sequence}, which the chain does not link to it"
    )]
    Inserted {
        /// The sequence it claims.
        sequence: u64,
        /// Its id.
        log_id: String,
    },
    /// An entry stored out of order.
    #[error(
        "entry {sequence} ({log_id}) is out of order: stored at position {position}, after entry {after}"
    )]
    Reordered {
        /// Its sequence.
        sequence: u64,
        /// Its id.
        log_id: String,
        /// Where it is stored.
        position: usize,
        /// The sequence of the entry stored before it.
        after: u64,
    },
    /// Entries are stored but the head that counts them is gone.
    #[error("the log's head record is missing ({entries} entries stored)")]
    HeadMissing {
        /// How many entries are stored.
        entries: u64,
    },
    /// An entry does not link to the one before it although both match
    /// their checksums: one of them was rewritten and re-hashed.
    #[error(
        "entry {sequence} ({log_id}) does not chain to the entry before it: one of them was rewritten and re-hashed"
    )]
    ChainBroken {
        /// Its sequence.
        sequence: u64,
        /// Its id.
        log_id: String,
    },
}

fn deleted(first: u64, last: u64) -> String {
    if first == last {
        format!("entry {first} was")
    } else {
        format!("entries {first} to {last} were")
    }
}

/// Verifies stored rows (entry JSON, in stored order) against each other
/// and against the head (`count`, last `checksum`).
///
/// # Errors
///
/// The first problem found, checked in this order: unreadable rows, altered
/// entries, inserted entries (a sequence claimed twice, or past the head),
/// reordered entries, deleted entries (a gap, or short of the head), broken
/// links.
pub fn verify(rows: &[String], head: Option<(u64, &str)>) -> Result<Verified, IntegrityError> {
    let mut entries = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let entry: LogEntry =
            serde_json::from_str(row).map_err(|e| IntegrityError::Unreadable {
                position: i + 1,
                reason: e.to_string(),
            })?;
        entries.push(entry);
    }
    for e in &entries {
        if e.compute_checksum().ok().as_deref() != Some(e.checksum.as_str()) {
            return Err(IntegrityError::Altered {
                sequence: e.sequence,
                log_id: e.log_id.clone(),
            });
        }
    }
    // A sequence claimed twice: the impostor is the one nothing links to
    // (the later one stored, when the links do not tell).
    let linked: HashSet<&str> = entries
        .iter()
        .filter_map(|e| e.previous_log_checksum.as_deref())
        .collect();
    let mut by_sequence: BTreeMap<u64, Vec<&LogEntry>> = BTreeMap::new();
    for e in &entries {
        by_sequence.entry(e.sequence).or_default().push(e);
    }
    if let Some(claimants) = by_sequence.values().find(|c| c.len() > 1) {
        let impostor = claimants
            .iter()
            .find(|e| !linked.contains(e.checksum.as_str()))
            .or(claimants.last())
            .copied();
        if let Some(e) = impostor {
            return Err(IntegrityError::Inserted {
                sequence: e.sequence,
                log_id: e.log_id.clone(),
            });
        }
    }
    let count = entries.len() as u64;
    if let Some((head_count, _)) = head
        && count > head_count
    {
        let extra = entries
            .iter()
            .find(|e| e.sequence > head_count)
            .or(entries.last());
        if let Some(e) = extra {
            return Err(IntegrityError::Inserted {
                sequence: e.sequence,
                log_id: e.log_id.clone(),
            });
        }
    }
    for (i, pair) in entries.windows(2).enumerate() {
        if pair[1].sequence < pair[0].sequence {
            return Err(IntegrityError::Reordered {
                sequence: pair[1].sequence,
                log_id: pair[1].log_id.clone(),
                position: i + 2,
                after: pair[0].sequence,
            });
        }
    }
    for (expected, e) in (1..).zip(entries.iter()) {
        // Below the place it is stored at (sequence 0, or a repeated
        // sequence): an entry the chain does not account for.
        if e.sequence < expected {
            return Err(IntegrityError::Inserted {
                sequence: e.sequence,
                log_id: e.log_id.clone(),
            });
        }
        if e.sequence != expected {
            return Err(IntegrityError::Deleted {
                first: expected,
                last: e.sequence - 1,
                before: Some(e.log_id.clone()),
            });
        }
    }
    if let Some((head_count, _)) = head
        && head_count > count
    {
        return Err(IntegrityError::Deleted {
            first: count + 1,
            last: head_count,
            before: None,
        });
    }
    let mut previous: Option<&str> = None;
    for e in &entries {
        if e.previous_log_checksum.as_deref() != previous {
            return Err(IntegrityError::ChainBroken {
                sequence: e.sequence,
                log_id: e.log_id.clone(),
            });
        }
        previous = Some(&e.checksum);
    }
    if let (Some((_, head_checksum)), Some(last)) = (head, entries.last())
        && head_checksum != last.checksum
    {
        return Err(IntegrityError::ChainBroken {
            sequence: last.sequence,
            log_id: last.log_id.clone(),
        });
    }
    if head.is_none() && !entries.is_empty() {
        return Err(IntegrityError::HeadMissing { entries: count });
    }
    Ok(Verified {
        entries: count,
        head: entries.last().map(|e| e.checksum.clone()),
    })
}
