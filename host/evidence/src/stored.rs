//! Reading the stored receipts back, by `seq`: the rows of `receipts`
//! that hosts before the blocks wrote (a prefix of the log), then
//! `receipt_blocks` ([`super::block`]). Every reader of the log goes
//! through here. Units whose receipts were archived and pruned
//! ([`super::archive`]) are gone, or, pruned by a host before the hashes
//! went too, hold their hashes only and are skipped.

use super::block::{self, Input, Stored};
use anyhow::{Context as _, Result};
use hcp_receipts::{Digest, Receipt};
use rusqlite::{Connection, params};

/// Which way a range is walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    Oldest,
    Newest,
}

/// Whether to go on.
pub(crate) type Go = bool;

/// Hands `f` every stored receipt with `lo <= seq <= hi`, in `order`,
/// until it says stop.
///
/// # Errors
///
/// The database fails, a receipt does not read back, or `f` fails.
pub(crate) fn each(
    db: &Connection,
    lo: u64,
    hi: u64,
    order: Order,
    mut f: impl FnMut(Stored) -> Result<Go>,
) -> Result<()> {
    if lo > hi {
        return Ok(());
    }
    let (lo_i, hi_i) = (i64::try_from(lo)?, i64::try_from(hi).unwrap_or(i64::MAX));
    // The legacy rows come first in the log: walked newest first, the
    // blocks go before them.
    if order == Order::Newest && !blocks(db, lo_i, hi_i, lo, hi, order, &mut f)? {
        return Ok(());
    }
    let sql = match order {
        Order::Oldest => {
            "SELECT seq, hash, body, input FROM receipts WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq"
        }
        Order::Newest => {
            "SELECT seq, hash, body, input FROM receipts WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq DESC"
        }
    };
    let mut stmt = db.prepare_cached(sql)?;
    let mut rows = stmt.query(params![lo_i, hi_i])?;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        if super::hot::is_pruned(row.get_ref(2)?.as_blob()?) {
            continue;
        }
        let hash = row.get_ref(1)?.as_blob()?;
        let hash = Digest(
            hash.try_into()
                .map_err(|_| anyhow::anyhow!("receipt {seq}: its stored hash is not 32 bytes"))?,
        );
        let receipt: Receipt = serde_json::from_slice(row.get_ref(2)?.as_blob()?)
            .with_context(|| format!("stored receipt {seq}"))?;
        let input = Input::Raw(row.get(3)?);
        if !f(Stored {
            hash,
            receipt,
            input,
        })? {
            return Ok(());
        }
    }
    drop(rows);
    if order == Order::Oldest {
        blocks(db, lo_i, hi_i, lo, hi, order, &mut f)?;
    }
    Ok(())
}

/// The blocks' part of [`each`]; gives whether `f` wants more.
fn blocks(
    db: &Connection,
    lo_i: i64,
    hi_i: i64,
    lo: u64,
    hi: u64,
    order: Order,
    f: &mut impl FnMut(Stored) -> Result<Go>,
) -> Result<Go> {
    // From the block that holds `lo` (the last to start at or before it).
    let sql = match order {
        Order::Oldest => {
            "SELECT first_seq, count, hashes, data FROM receipt_blocks
             WHERE first_seq >= (SELECT coalesce(max(first_seq), 0) FROM receipt_blocks WHERE first_seq <= ?1)
               AND first_seq <= ?2 ORDER BY first_seq"
        }
        Order::Newest => {
            "SELECT first_seq, count, hashes, data FROM receipt_blocks
             WHERE first_seq >= (SELECT coalesce(max(first_seq), 0) FROM receipt_blocks WHERE first_seq <= ?1)
               AND first_seq <= ?2 ORDER BY first_seq DESC"
        }
    };
    let mut stmt = db.prepare_cached(sql)?;
    let mut rows = stmt.query(params![lo_i, hi_i])?;
    while let Some(row) = rows.next()? {
        let first = u64::try_from(row.get::<_, i64>(0)?)?;
        let count = u64::try_from(row.get::<_, i64>(1)?)?;
        if super::hot::is_pruned(row.get_ref(3)?.as_blob()?) {
            continue;
        }
        let decoded = block::decode_with(
            first,
            count,
            row.get_ref(2)?.as_blob()?,
            row.get_ref(3)?.as_blob()?,
            &mut |task| super::submission::payload(db, task),
        )?;
        let selected = decoded
            .into_iter()
            .filter(|s| (lo..=hi).contains(&s.receipt.seq));
        let go = match order {
            Order::Oldest => walk(selected, f)?,
            Order::Newest => walk(selected.rev(), f)?,
        };
        if !go {
            return Ok(false);
        }
    }
    Ok(true)
}

fn walk(
    items: impl Iterator<Item = Stored>,
    f: &mut impl FnMut(Stored) -> Result<Go>,
) -> Result<Go> {
    for s in items {
        if !f(s)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Hands `f` the whole log in order, a unit at a time (a row of
/// `receipts`, or a block): its first `seq`, how many receipts it holds,
/// and its receipts, or why they do not read back, so that a check can
/// report a damaged unit and go on.
///
/// # Errors
///
/// The database fails, or `f` does.
pub(crate) fn each_unit(
    db: &Connection,
    mut f: impl FnMut(u64, u64, Result<Vec<Stored>>) -> Result<()>,
) -> Result<()> {
    {
        let mut stmt = db.prepare("SELECT seq, hash, body, input FROM receipts ORDER BY seq")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let seq = u64::try_from(row.get::<_, i64>(0)?)?;
            if super::hot::is_pruned(row.get_ref(2)?.as_blob()?) {
                continue;
            }
            let read = (|| -> Result<Vec<Stored>> {
                let hash = row.get_ref(1)?.as_blob()?;
                let hash = Digest(
                    hash.try_into()
                        .map_err(|_| anyhow::anyhow!("its stored hash is not 32 bytes"))?,
                );
                let receipt: Receipt = serde_json::from_slice(row.get_ref(2)?.as_blob()?)
                    .context("does not read back")?;
                Ok(vec![Stored {
                    hash,
                    receipt,
                    input: Input::Raw(row.get(3)?),
                }])
            })();
            f(seq, 1, read)?;
        }
    }
    let mut stmt =
        db.prepare("SELECT first_seq, count, hashes, data FROM receipt_blocks ORDER BY first_seq")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let first = u64::try_from(row.get::<_, i64>(0)?)?;
        let count = u64::try_from(row.get::<_, i64>(1)?)?;
        if super::hot::is_pruned(row.get_ref(3)?.as_blob()?) {
            continue;
        }
        let decoded = block::decode_with(
            first,
            count,
            row.get_ref(2)?.as_blob()?,
            row.get_ref(3)?.as_blob()?,
            &mut |task| super::submission::payload(db, task),
        );
        f(first, count, decoded)?;
    }
    Ok(())
}

/// Receipt `seq`, if it is stored.
///
/// # Errors
///
/// As [`each`].
pub(crate) fn get(db: &Connection, seq: u64) -> Result<Option<Stored>> {
    let mut found = None;
    each(db, seq, seq, Order::Oldest, |s| {
        found = Some(s);
        Ok(false)
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostkey::HostIdentity;
    use crate::{Entry, Recorder, Selection, export, verify_store};
    use hcp_contracts::RiskLevel;
    use hcp_receipts::{HostKey, SigningPolicy, Verdict};
    use hcp_store::Store;
    use std::sync::Arc;

    fn open(data: &std::path::Path) -> (Arc<Store>, Recorder) {
        let store = Arc::new(Store::open(data).expect("store"));
        let key = HostKey::from_seed(&[5; 32]);
        let host_id = format!("host-{}", key.key_id());
        let recorder = Recorder::open(
            store.clone(),
            HostIdentity { key, host_id },
            SigningPolicy::default(),
        )
        .expect("recorder");
        (store, recorder)
    }

    fn entry(i: usize) -> Entry {
        Entry {
            session_id: Some("session-1".into()),
            task_id: Some(format!("task-{i}")),
            capability: "probe@1.0.0".into(),
            call: "test.entry".into(),
            args: serde_json::json!({ "i": i }),
            input: hcp_contracts::jcs::Canonical::of(&serde_json::json!({ "i": i }))
                .expect("canonical"),
            // Every third refused: signed receipts among them.
            verdict: if i.is_multiple_of(3) {
                Verdict::Deny
            } else {
                Verdict::Allow
            },
            reason_code: if i.is_multiple_of(3) {
                hcp_receipts::reason::DENY_PROHIBITED_ACTION.into()
            } else {
                hcp_receipts::reason::ALLOW.into()
            },
            risk: RiskLevel::R1,
            policy_hash: Digest([7; 32]),
            parents: Vec::new(),
            manifest: None,
            policy_sources: None,
            follows: None,
        }
    }

    fn all(db: &Connection) -> Vec<Stored> {
        let mut out = Vec::new();
        each(db, 0, u64::MAX, Order::Oldest, |s| {
            out.push(s);
            Ok(true)
        })
        .expect("read");
        out
    }

    /// A data directory as a host before the blocks left it: its receipts
    /// one row each in `receipts` (canonical JSON, input JSON).
    fn as_before_the_blocks(data: &std::path::Path) {
        let db = Connection::open(data.join("hcp.db")).expect("db");
        let stored = all(&db);
        assert!(!stored.is_empty());
        let tx = db.unchecked_transaction().expect("tx");
        for s in stored {
            tx.execute(
                "INSERT INTO receipts (seq, hash, body, input) VALUES (?1, ?2, ?3, ?4)",
                params![
                    i64::try_from(s.receipt.seq).expect("seq"),
                    &s.hash.0[..],
                    s.receipt.canonical_bytes().expect("bytes"),
                    s.input.into_bytes()
                ],
            )
            .expect("insert");
        }
        tx.execute("DELETE FROM receipt_blocks", [])
            .expect("delete");
        tx.commit().expect("commit");
    }

    #[test]
    fn a_log_begun_in_rows_goes_on_in_blocks_and_reads_as_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        {
            let (_store, recorder) = open(&data);
            for i in 0..5 {
                recorder.append(entry(i)).expect("append");
            }
            recorder.close().expect("close");
        }
        as_before_the_blocks(&data);
        let (store, recorder) = open(&data);
        for i in 5..12 {
            recorder.append(entry(i)).expect("append");
        }
        recorder.flush().expect("flush");
        let db = store.db();
        let rows: i64 = db
            .query_row("SELECT count(*) FROM receipts", [], |r| r.get(0))
            .expect("rows");
        let blocks: i64 = db
            .query_row("SELECT count(*) FROM receipt_blocks", [], |r| r.get(0))
            .expect("blocks");
        assert!(rows >= 5 && blocks >= 1, "{rows} rows, {blocks} blocks");
        // One log, in order, across both.
        let stored = all(&db);
        for (i, s) in stored.iter().enumerate() {
            assert_eq!(s.receipt.seq, i as u64);
            assert_eq!(s.receipt.hash().expect("hash"), s.hash);
        }
        let newest: Vec<u64> = {
            let mut seqs = Vec::new();
            each(&db, 0, u64::MAX, Order::Newest, |s| {
                seqs.push(s.receipt.seq);
                Ok(true)
            })
            .expect("read");
            seqs
        };
        let mut oldest: Vec<u64> = stored.iter().map(|s| s.receipt.seq).collect();
        oldest.reverse();
        assert_eq!(newest, oldest);
        // A range across the boundary, and single receipts on both sides.
        let boundary = u64::try_from(rows).expect("rows");
        let mut across = Vec::new();
        each(&db, boundary - 2, boundary + 1, Order::Oldest, |s| {
            across.push(s.receipt.seq);
            Ok(true)
        })
        .expect("read");
        assert_eq!(across, (boundary - 2..=boundary + 1).collect::<Vec<_>>());
        for seq in [0, boundary - 1, boundary, stored.len() as u64 - 1] {
            assert_eq!(
                get(&db, seq).expect("get").expect("stored").receipt.seq,
                seq
            );
        }
        assert!(get(&db, stored.len() as u64).expect("get").is_none());
        drop(db);
        let check = verify_store(&store).expect("check");
        assert!(check.ok(), "{:?}", check.problems);
        assert_eq!(check.receipts, stored.len() as u64);
        let pack = export(&store, &Selection::All).expect("export");
        let report = hcp_receipts::verify(&pack, &hcp_receipts::VerifyOptions::default());
        assert!(report.ok(), "{report}");
        // A host opened again finds its log whole, and so does the mark.
        drop(recorder);
        drop(store);
        let (store, recorder) = open(&data);
        recorder.append(entry(12)).expect("append");
        recorder.flush().expect("flush");
        assert!(verify_store(&store).expect("check").ok());
    }

    #[test]
    fn a_damaged_block_is_reported_and_the_check_goes_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let (store, recorder) = open(&data);
        for i in 0..3 {
            recorder.append(entry(i)).expect("append");
        }
        recorder.flush().expect("flush");
        assert!(verify_store(&store).expect("check").ok());
        let first: i64 = store
            .db()
            .query_row("SELECT min(first_seq) FROM receipt_blocks", [], |r| {
                r.get(0)
            })
            .expect("first");
        // A byte of a receipt changed: its block still decodes, the
        // receipt no longer hashes to its stored hash.
        let data_of = |db: &Connection| -> Vec<u8> {
            db.query_row(
                "SELECT data FROM receipt_blocks WHERE first_seq = ?1",
                params![first],
                |r| r.get(0),
            )
            .expect("data")
        };
        let original = data_of(&store.db());
        let at = original
            .windows(4)
            .position(|w| w == b"task")
            .expect("a task id in the block");
        let mut changed = original.clone();
        changed[at] = b'T';
        let set = |bytes: &[u8]| {
            store
                .db()
                .execute(
                    "UPDATE receipt_blocks SET data = ?2 WHERE first_seq = ?1",
                    params![first, bytes],
                )
                .expect("update");
        };
        set(&changed);
        let check = verify_store(&store).expect("check");
        assert!(
            check
                .problems
                .iter()
                .any(|p| p.contains("the stored hash is not the receipt's")),
            "{:?}",
            check.problems
        );
        // Cut short: it does not read back, which the check says, naming
        // the receipts, and it goes on to the rest of the log.
        set(&original[..original.len() - 3]);
        let check = verify_store(&store).expect("check");
        assert!(
            check
                .problems
                .iter()
                .any(|p| p.contains("does not read back")),
            "{:?}",
            check.problems
        );
        assert!(check.receipts >= 3, "{check:?}");
        assert!(export(&store, &Selection::All).is_err());
        set(&original);
        assert!(verify_store(&store).expect("check").ok());
    }
}
