//! The stored receipts' hashes, by `seq`, without the receipts: what the
//! store's mark, the receipt log's opening and evidence packs' proofs
//! read. The receipts themselves are `hcp_evidence`'s to read and write
//! (`evidence::block`); this module knows only where their hashes are:
//! `receipt_blocks.hashes` (32 bytes per receipt, in order, from the
//! block's `first_seq`), after the rows of `receipts` that hosts before
//! the blocks wrote (a prefix of the log, one row per receipt).
//!
//! An archive run (`hcp_evidence::archive`) prunes the hashes of the
//! receipts it archived too, and keeps in their place the Merkle tree's
//! frontier at its end ([`Pruned`], in `evidence_archives.frontier`):
//! the stored hashes then start at the frontier's size, the last pruned
//! hash is the anchor's head, and [`tree`] makes every proof after it
//! from the frontier and the hashes kept (`hcp_receipts::merkle::Tree::from_frontier`).
//!
//! Both tables may be missing: the store's mark is checked before the
//! schema is migrated (and the frontier's column before its migration).

use anyhow::{Context as _, Result, bail};
use hcp_receipts::Digest;
use hcp_receipts::merkle::{Frontier, Tree, leaf_hash};
use rusqlite::{Connection, OptionalExtension as _, params};

/// What the last archive that pruned receipts' hashes kept of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// The Merkle tree's frontier over the pruned receipts: its size is the
    /// first stored hash's `seq`.
    pub frontier: Frontier,
    /// The last pruned receipt's hash (its anchor's head).
    pub head: Option<Digest>,
}

fn has_column(db: &Connection, table: &str, column: &str) -> Result<bool> {
    Ok(db
        .prepare_cached("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .query_row(params![table, column], |_| Ok(()))
        .optional()?
        .is_some())
}

/// What the last archive that pruned hashes kept of them; `None` when no
/// hash was pruned.
///
/// # Errors
///
/// The database fails, or the stored frontier or anchor does not read.
pub fn pruned(db: &Connection) -> Result<Option<Pruned>> {
    if !has_column(db, "evidence_archives", "frontier")? {
        return Ok(None);
    }
    let row: Option<(String, String)> = db
        .prepare_cached(
            "SELECT frontier, anchor FROM evidence_archives WHERE frontier IS NOT NULL
             ORDER BY number DESC LIMIT 1",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((frontier, anchor)) = row else {
        return Ok(None);
    };
    let frontier: Frontier =
        serde_json::from_str(&frontier).context("an archive's stored Merkle frontier")?;
    if !frontier.is_well_formed() {
        bail!(
            "an archive's stored Merkle frontier of size {} holds {} roots",
            frontier.size,
            frontier.nodes.len()
        );
    }
    let anchor: serde_json::Value =
        serde_json::from_str(&anchor).context("a stored archive anchor")?;
    let head: Option<Digest> =
        serde_json::from_value(anchor["head"].clone()).context("a stored archive anchor's head")?;
    Ok(Some(Pruned { frontier, head }))
}

/// The `seq` of the first stored hash: the size of the pruned prefix (0
/// when none was).
///
/// # Errors
///
/// As [`pruned`].
pub fn first_stored(db: &Connection) -> Result<u64> {
    Ok(pruned(db)?.map_or(0, |p| p.frontier.size))
}

fn has_table(db: &Connection, name: &str) -> Result<bool> {
    Ok(db
        .prepare_cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1")?
        .query_row(params![name], |_| Ok(()))
        .optional()?
        .is_some())
}

fn digest(seq: u64, bytes: &[u8]) -> Result<Digest> {
    Ok(Digest(bytes.try_into().map_err(|_| {
        anyhow::anyhow!("receipt {seq}: its stored hash is not 32 bytes")
    })?))
}

/// The hash of receipt `i` of a block's `hashes`.
fn in_block(first: i64, count: i64, hashes: &[u8], seq: u64) -> Result<Digest> {
    let first = u64::try_from(first)?;
    let count = u64::try_from(count)?;
    if hashes.len() as u64 != count.saturating_mul(32) {
        bail!(
            "the receipt block from seq {first} holds {} bytes of hashes for {count} receipts",
            hashes.len()
        );
    }
    let i = usize::try_from(seq - first)?;
    digest(seq, &hashes[i * 32..i * 32 + 32])
}

/// The last stored receipt's `seq` and hash.
///
/// # Errors
///
/// The database fails, or a block's hashes do not fit it.
pub fn last(db: &Connection) -> Result<Option<(u64, Digest)>> {
    if has_table(db, "receipt_blocks")? {
        let block: Option<(i64, i64, Vec<u8>)> = db
            .prepare_cached(
                "SELECT first_seq, count, hashes FROM receipt_blocks ORDER BY first_seq DESC LIMIT 1",
            )?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        if let Some((first, count, hashes)) = block {
            let seq = u64::try_from(first)?
                .checked_add(u64::try_from(count)?)
                .and_then(|end| end.checked_sub(1))
                .context("a receipt block of no receipts")?;
            return Ok(Some((seq, in_block(first, count, &hashes, seq)?)));
        }
    }
    if has_table(db, "receipts")? {
        let row: Option<(i64, Vec<u8>)> = db
            .prepare_cached("SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1")?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((seq, hash)) = row {
            let seq = u64::try_from(seq)?;
            return Ok(Some((seq, digest(seq, &hash)?)));
        }
    }
    // Every stored hash pruned: the last is the anchor's head.
    pruned_head(db)
}

/// The last pruned receipt's `seq` and hash, when hashes were pruned.
fn pruned_head(db: &Connection) -> Result<Option<(u64, Digest)>> {
    Ok(pruned(db)?.and_then(|p| {
        let seq = p.frontier.size.checked_sub(1)?;
        Some((seq, p.head?))
    }))
}

/// The hash of receipt `seq`, if it is stored.
///
/// # Errors
///
/// The database fails, or a block's hashes do not fit it.
pub fn at(db: &Connection, seq: u64) -> Result<Option<Digest>> {
    let at = i64::try_from(seq)?;
    if has_table(db, "receipt_blocks")? {
        let block: Option<(i64, i64, Vec<u8>)> = db
            .prepare_cached(
                "SELECT first_seq, count, hashes FROM receipt_blocks WHERE first_seq <= ?1
                 ORDER BY first_seq DESC LIMIT 1",
            )?
            .query_row(params![at], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        if let Some((first, count, hashes)) = block
            && at < first.saturating_add(count)
        {
            return Ok(Some(in_block(first, count, &hashes, seq)?));
        }
    }
    if has_table(db, "receipts")? {
        let hash: Option<Vec<u8>> = db
            .prepare_cached("SELECT hash FROM receipts WHERE seq = ?1")?
            .query_row(params![at], |r| r.get(0))
            .optional()?;
        if let Some(h) = hash {
            return Ok(Some(digest(seq, &h)?));
        }
    }
    // The last pruned one is known: the anchor's head.
    Ok(pruned_head(db)?
        .filter(|(last, _)| *last == seq)
        .map(|(_, hash)| hash))
}

/// The Merkle tree of receipts `0..end` as the store keeps it: the
/// frontier of the pruned prefix ([`Pruned`]) and the hashes after it.
///
/// # Errors
///
/// The database fails, `end` is inside the pruned prefix, or the stored
/// log has a gap or ends before `end`.
pub fn tree(db: &Connection, end: u64) -> Result<Tree> {
    let frontier = pruned(db)?.map(|p| p.frontier).unwrap_or_default();
    if end < frontier.size {
        bail!(
            "receipts before seq {} are archived and their hashes pruned: no tree of {end}",
            frontier.size
        );
    }
    let leaves = range(db, frontier.size, end)?
        .iter()
        .map(|h| leaf_hash(&h.0))
        .collect();
    Tree::from_frontier(&frontier, leaves).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The hashes of receipts `from..end`, in order.
///
/// # Errors
///
/// The database fails, or the stored log has a gap or ends before `end`
/// (or starts after `from`: pruned).
pub fn range(db: &Connection, from: u64, end: u64) -> Result<Vec<Digest>> {
    let mut out: Vec<Digest> = Vec::with_capacity(usize::try_from(end.saturating_sub(from))?);
    let (lo, bound) = (i64::try_from(from)?, i64::try_from(end)?);
    // The `seq` the next hash must have.
    let next = |out: &Vec<Digest>| from + out.len() as u64;
    if has_table(db, "receipts")? {
        let mut stmt =
            db.prepare("SELECT seq, hash FROM receipts WHERE seq >= ?1 AND seq < ?2 ORDER BY seq")?;
        let mut rows = stmt.query(params![lo, bound])?;
        while let Some(row) = rows.next()? {
            let seq = u64::try_from(row.get::<_, i64>(0)?)?;
            if seq != next(&out) {
                bail!("the stored log has a gap before seq {seq}");
            }
            out.push(digest(seq, row.get_ref(1)?.as_blob()?)?);
        }
    }
    if has_table(db, "receipt_blocks")? {
        let mut stmt = db.prepare(
            "SELECT first_seq, count, hashes FROM receipt_blocks
             WHERE first_seq + count > ?1 AND first_seq < ?2 ORDER BY first_seq",
        )?;
        let mut rows = stmt.query(params![lo, bound])?;
        while let Some(row) = rows.next()? {
            let first = u64::try_from(row.get::<_, i64>(0)?)?;
            let count = u64::try_from(row.get::<_, i64>(1)?)?;
            let hashes = row.get_ref(2)?.as_blob()?;
            if first > next(&out) || (first < next(&out) && !out.is_empty()) {
                bail!("the stored log has a gap before seq {first}");
            }
            if hashes.len() as u64 != count.saturating_mul(32) {
                bail!(
                    "the receipt block from seq {first} holds {} bytes of hashes for {count} receipts",
                    hashes.len()
                );
            }
            for (i, h) in hashes.chunks_exact(32).enumerate() {
                let seq = first + i as u64;
                if seq < from {
                    continue;
                }
                if seq >= end {
                    break;
                }
                out.push(digest(seq, h)?);
            }
        }
    }
    if next(&out) < end {
        bail!(
            "the stored log ends at {} receipts, before {end}",
            next(&out)
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of `count` receipts from `first` whose hashes are `seq`'s
    /// byte repeated; its data pruned (as an archive before the hashes
    /// went left it) when `pruned`.
    fn block(db: &Connection, first: u64, count: u64, pruned: bool) {
        let hashes: Vec<u8> = (first..first + count)
            .flat_map(|s| [u8::try_from(s).expect("small"); 32])
            .collect();
        let data: &[u8] = if pruned { b"" } else { b"\x01" };
        db.execute(
            "INSERT INTO receipt_blocks (first_seq, count, hashes, data) VALUES (?1, ?2, ?3, ?4)",
            params![
                i64::try_from(first).expect("seq"),
                i64::try_from(count).expect("count"),
                hashes,
                data
            ],
        )
        .expect("insert");
    }

    fn hash(seq: u64) -> Digest {
        Digest([u8::try_from(seq).expect("small"); 32])
    }

    fn archive(db: &Connection, number: i64, end: u64, frontier: Option<&Frontier>) {
        let anchor = serde_json::json!({ "head": hash(end - 1) });
        db.execute(
            "INSERT INTO evidence_archives
               (number, first_seq, tree_size, anchor, pack, pack_bytes, tasks, receipts,
                blobs_pending, archived_at, frontier)
             VALUES (?1, 0, ?2, ?3, 'p.tar', 1, 1, 1, '[]', 'now', ?4)",
            params![
                number,
                i64::try_from(end).expect("end"),
                anchor.to_string(),
                frontier.map(|f| serde_json::to_string(f).expect("json"))
            ],
        )
        .expect("insert");
    }

    #[test]
    fn a_store_archived_before_the_hashes_went_reads_whole_and_one_after_from_its_frontier() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::Store::open(dir.path()).expect("store");
        let db = store.db();
        let leaves: Vec<Digest> = (0..10u64).map(hash).collect();
        let whole = Tree::from_data(leaves.iter().map(|h| h.0.as_slice()));
        // As a host before left it: an archive of the first 4 receipts
        // that kept their hashes (no frontier), its blocks' data pruned.
        block(&db, 0, 4, true);
        block(&db, 4, 3, false);
        block(&db, 7, 3, false);
        archive(&db, 1, 4, None);
        assert_eq!(pruned(&db).expect("read"), None);
        assert_eq!(first_stored(&db).expect("read"), 0);
        let tree = super::tree(&db, 10).expect("tree");
        assert_eq!(tree.root_at(10), whole.root_at(10));
        assert_eq!(tree.inclusion_proof(2, 10), whole.inclusion_proof(2, 10));
        assert_eq!(last(&db).expect("last"), Some((9, hash(9))));
        // An archive now to 7: its frontier in place of every hash before.
        let frontier = whole.frontier_at(7).expect("frontier");
        db.execute(
            "DELETE FROM receipt_blocks WHERE first_seq + count <= 7",
            [],
        )
        .expect("delete");
        archive(&db, 2, 7, Some(&frontier));
        assert_eq!(first_stored(&db).expect("read"), 7);
        let tree = super::tree(&db, 10).expect("tree");
        assert_eq!(tree.root_at(10), whole.root_at(10));
        for index in 7..10 {
            assert_eq!(
                tree.inclusion_proof(index, 10),
                whole.inclusion_proof(index, 10)
            );
        }
        assert_eq!(
            tree.consistency_proof(7, 10),
            whole.consistency_proof(7, 10)
        );
        assert!(tree.inclusion_proof(2, 10).is_err());
        assert!(
            super::tree(&db, 5).is_err(),
            "no tree inside the pruned prefix"
        );
        // The anchor's head stands for the last pruned hash; the rest is gone.
        assert_eq!(at(&db, 6).expect("at"), Some(hash(6)));
        assert_eq!(at(&db, 5).expect("at"), None);
        assert_eq!(at(&db, 8).expect("at"), Some(hash(8)));
        // Everything pruned: the last hash is the anchor's head.
        db.execute("DELETE FROM receipt_blocks", [])
            .expect("delete");
        archive(&db, 3, 10, Some(&whole.frontier_at(10).expect("frontier")));
        assert_eq!(last(&db).expect("last"), Some((9, hash(9))));
    }
}
