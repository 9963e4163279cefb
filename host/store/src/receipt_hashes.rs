//! The stored receipts' hashes, by `seq`, without the receipts: what the
//! store's mark, the receipt log's opening and evidence packs' proofs
//! read. The receipts themselves are `hcp_evidence`'s to read and write
//! (`evidence::block`); this module knows only where their hashes are:
//! `receipt_blocks.hashes` (32 bytes per receipt, in order, from the
//! block's `first_seq`), after the rows of `receipts` that hosts before
//! the blocks wrote (a prefix of the log, one row per receipt).
//!
//! Both tables may be missing: the store's mark is checked before the
//! schema is migrated.

use anyhow::{Context as _, Result, bail};
use hcp_receipts::Digest;
use rusqlite::{Connection, OptionalExtension as _, params};

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
    if !has_table(db, "receipts")? {
        return Ok(None);
    }
    let row: Option<(i64, Vec<u8>)> = db
        .prepare_cached("SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    row.map(|(seq, hash)| {
        let seq = u64::try_from(seq)?;
        Ok((seq, digest(seq, &hash)?))
    })
    .transpose()
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
    if !has_table(db, "receipts")? {
        return Ok(None);
    }
    let hash: Option<Vec<u8>> = db
        .prepare_cached("SELECT hash FROM receipts WHERE seq = ?1")?
        .query_row(params![at], |r| r.get(0))
        .optional()?;
    hash.map(|h| digest(seq, &h)).transpose()
}

/// The hashes of receipts `0..end`, in order.
///
/// # Errors
///
/// The database fails, or the stored log has a gap or ends before `end`.
pub fn below(db: &Connection, end: u64) -> Result<Vec<Digest>> {
    let mut out: Vec<Digest> = Vec::with_capacity(usize::try_from(end)?);
    let bound = i64::try_from(end)?;
    if has_table(db, "receipts")? {
        let mut stmt = db.prepare("SELECT seq, hash FROM receipts WHERE seq < ?1 ORDER BY seq")?;
        let mut rows = stmt.query(params![bound])?;
        while let Some(row) = rows.next()? {
            let seq = u64::try_from(row.get::<_, i64>(0)?)?;
            if seq != out.len() as u64 {
                bail!("the stored log has a gap before seq {seq}");
            }
            out.push(digest(seq, row.get_ref(1)?.as_blob()?)?);
        }
    }
    if has_table(db, "receipt_blocks")? {
        let mut stmt = db.prepare(
            "SELECT first_seq, count, hashes FROM receipt_blocks WHERE first_seq < ?1 ORDER BY first_seq",
        )?;
        let mut rows = stmt.query(params![bound])?;
        while let Some(row) = rows.next()? {
            let first = u64::try_from(row.get::<_, i64>(0)?)?;
            let count = u64::try_from(row.get::<_, i64>(1)?)?;
            let hashes = row.get_ref(2)?.as_blob()?;
            if first != out.len() as u64 {
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
                if seq >= end {
                    break;
                }
                out.push(digest(seq, h)?);
            }
        }
    }
    if (out.len() as u64) < end {
        bail!(
            "the stored log ends at {} receipts, before {end}",
            out.len()
        );
    }
    Ok(out)
}
