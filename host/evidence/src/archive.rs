//! Archiving the hot log and pruning what was archived: `hcp evidence
//! archive` and the retention schedule of `hcp serve`.
//!
//! An archive run takes the oldest stretch of the hot log that holds only
//! settled tasks older than a cutoff (and receipts of no task), ends at a
//! checkpoint and at the end of a stored unit of receipts (a block), and
//! cuts through no task's receipts. It then, in this order:
//!
//! 1. writes that stretch as an evidence pack (the same pack `hcp evidence
//!    export --all` would write of it: deterministic, verifiable,
//!    replayable), through a temporary file that is synced, renamed and
//!    whose directory is synced;
//! 2. reads the pack back and verifies it with the host's key;
//! 3. in one transaction, prunes the stretch from the hot store (the
//!    receipts' bodies and decision inputs, their marks, sessions and
//!    checkpoints before the last, the tasks' rows, messages, approvals,
//!    AMQP routes, checkpoints and artifacts) and records a signed
//!    [`Anchor`]: the last checkpoint's size, root and hash, the Lamport
//!    clock, the pack's digest. The receipts' hashes go too: in their place
//!    the Merkle tree's frontier at the anchor (one root per set bit of its
//!    size, checked against the anchor's root before anything goes), from
//!    which the next checkpoints, the inclusion proofs of later receipts
//!    and the consistency proofs from the anchor are made
//!    (`hcp_store::receipt_hashes`);
//! 4. removes the blobs that only pruned artifacts named (listed in the
//!    anchor's row until they are gone, so a crash before this step leaves
//!    them to the next run).
//!
//! A crash at any point loses nothing: before step 3 commits, the store is
//! as it was (a pack may be on disk; the next run writes it again, the same
//! bytes); after, the pack is durable and verified. `HCP_FAULT=archive:<point>`
//! aborts the process at `after_pack_write`, `before_commit` (inside the
//! transaction) or `after_commit` (before the blobs are collected), for the
//! tests that show it.
//!
//! The next archive's pack starts at the anchor's checkpoint (it carries it
//! as its first checkpoint, with a consistency proof from it), so a series
//! of packs verifies unbroken: [`check_series`].

use crate::Selection;
use crate::export::build;
pub use crate::hot::hot_from;
use anyhow::{Context as _, Result, bail};
use hcp_receipts::checkpoint::Checkpoint;
use hcp_receipts::pack::{self, Pack};
use hcp_receipts::{Digest, HostKey, LogState, PublicKey, Signature};
use hcp_store::Store;
use rusqlite::{Connection, OptionalExtension as _, params};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write as _;
use std::path::Path;
use std::str::FromStr as _;

/// The `format` of an [`Anchor`].
pub const ANCHOR_FORMAT: &str = "hcp-archive-anchor/1";

/// What the host's signature of an anchor covers: this, then the anchor's
/// canonical JSON without its signature.
const SIGNING_DOMAIN: &[u8] = b"hcp-archive-anchor/1\n";

/// Most receipts one run archives (more are left to the next run).
pub const MAX_RUN_RECEIPTS: u64 = 1 << 18;

/// The environment variable of the fault hook (see the module doc).
pub const FAULT_ENV: &str = "HCP_FAULT";

/// Where an archive run ended and the hot log goes on: signed by the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// [`ANCHOR_FORMAT`].
    pub format: String,
    /// The host.
    pub host_id: String,
    /// The signing key's id.
    pub key_id: String,
    /// The archive's number: 1 for the first, one more for each after.
    pub number: u64,
    /// The first receipt archived (the end of the archive before).
    pub first_seq: u64,
    /// Receipts archived up to here: the size of the pack's last
    /// checkpoint, where the hot log goes on.
    pub tree_size: u64,
    /// That checkpoint's root.
    pub root_hash: Digest,
    /// That checkpoint's hash (the next checkpoint's `prev_checkpoint`).
    pub checkpoint: Digest,
    /// The last archived receipt's hash (the next one's `prev_hash`).
    pub head: Option<Digest>,
    /// The last archived receipt's Lamport clock.
    pub lamport: u64,
    /// SHA-256 of the pack's bytes.
    pub pack_sha256: Digest,
    /// The cutoff: tasks settled before it were archived.
    pub before: String,
    /// When the run pruned.
    pub archived_at: String,
    /// The host's signature (see [`Anchor::sign`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

impl Anchor {
    fn signed_bytes(&self) -> Result<Vec<u8>> {
        let unsigned = Self {
            signature: None,
            ..self.clone()
        };
        let mut out = SIGNING_DOMAIN.to_vec();
        out.extend(hcp_contracts::jcs::canonical_bytes(&unsigned).map_err(anyhow::Error::msg)?);
        Ok(out)
    }

    /// Signs the anchor with the host's key.
    ///
    /// # Errors
    ///
    /// The anchor does not serialize.
    pub fn sign(&mut self, key: &HostKey) -> Result<()> {
        self.signature = Some(key.sign(&self.signed_bytes()?));
        Ok(())
    }

    /// Checks the signature against `key`.
    ///
    /// # Errors
    ///
    /// Unsigned, signed by another key, or altered since.
    pub fn verify(&self, key: &PublicKey) -> Result<()> {
        let signature = self
            .signature
            .as_ref()
            .context("the anchor is not signed")?;
        if self.key_id != key.key_id().as_str() {
            bail!(
                "the anchor is signed by key {}, not {}",
                self.key_id,
                key.key_id()
            );
        }
        key.verify_strict(&self.signed_bytes()?, signature)
            .map_err(|e| anyhow::anyhow!("the anchor's signature: {e}"))
    }
}

/// An archive as the store lists it (`hcp evidence archives`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchiveRecord {
    /// The signed anchor.
    pub anchor: Anchor,
    /// The pack's path, as it was given.
    pub pack: String,
    /// Its size.
    pub pack_bytes: u64,
    /// Tasks pruned.
    pub tasks: u64,
    /// Receipts pruned.
    pub receipts: u64,
    /// Blobs still to be collected.
    pub blobs_pending: u64,
}

/// Totals of every archive, for status output and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Archive runs that pruned.
    pub archives: u64,
    /// Tasks archived and pruned.
    pub tasks: u64,
    /// Receipts archived (their bodies pruned).
    pub receipts: u64,
    /// Bytes of every pack written.
    pub pack_bytes: u64,
    /// Where the hot log starts: receipts before it are archived.
    pub hot_from: u64,
    /// When the last archive pruned.
    pub last_archived_at: Option<String>,
}

/// What an archive run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Archived {
    /// The archive, as now listed; `None` when nothing was old enough.
    pub archive: Option<ArchiveRecord>,
    /// Blobs removed (of this run's and of earlier runs' pruned artifacts).
    pub blobs_collected: u64,
}

/// The stretch an archive run would archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The first receipt (where the hot log starts now).
    pub first_seq: u64,
    /// One past the last: a checkpoint's size.
    pub end: u64,
    /// The tasks whose receipts are in it.
    pub tasks: BTreeSet<String>,
}

/// Aborts the process when `HCP_FAULT` names this point of the archive
/// (`archive:<point>`): the crash tests' hook. Does nothing otherwise.
fn fault(point: &str) {
    if let Ok(v) = std::env::var(FAULT_ENV)
        && v.strip_prefix("archive:") == Some(point)
    {
        eprintln!("HCP_FAULT: aborting at archive:{point}");
        std::process::abort();
    }
}

/// Every archive, oldest first.
///
/// # Errors
///
/// The database fails, or a stored anchor does not read.
pub fn archives(store: &Store) -> Result<Vec<ArchiveRecord>> {
    let db = store.db();
    let mut stmt = db.prepare(
        "SELECT anchor, pack, pack_bytes, tasks, receipts, blobs_pending
         FROM evidence_archives ORDER BY number",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, String>(5)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (anchor, pack, pack_bytes, tasks, receipts, pending) = row?;
        let pending: Vec<String> =
            serde_json::from_str(&pending).context("an archive's pending blobs")?;
        out.push(ArchiveRecord {
            anchor: serde_json::from_str(&anchor).context("a stored archive anchor")?,
            pack,
            pack_bytes: u64::try_from(pack_bytes)?,
            tasks: u64::try_from(tasks)?,
            receipts: u64::try_from(receipts)?,
            blobs_pending: pending.len() as u64,
        });
    }
    Ok(out)
}

/// The totals of every archive: what `hcp evidence archives`, status
/// output and a metrics exporter show.
///
/// # Errors
///
/// The database fails.
pub fn summary(store: &Store) -> Result<Summary> {
    let db = store.db();
    let (archives, tasks, receipts, pack_bytes, last): (i64, i64, i64, i64, Option<String>) = db
        .query_row(
            "SELECT COUNT(*), COALESCE(SUM(tasks), 0), COALESCE(SUM(receipts), 0),
                    COALESCE(SUM(pack_bytes), 0), MAX(archived_at)
             FROM evidence_archives",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
    Ok(Summary {
        archives: u64::try_from(archives)?,
        tasks: u64::try_from(tasks)?,
        receipts: u64::try_from(receipts)?,
        pack_bytes: u64::try_from(pack_bytes)?,
        hot_from: hot_from(&db)?,
        last_archived_at: last,
    })
}

/// The stored log's state and key; `None` before the first receipt.
fn log(db: &Connection) -> Result<Option<(String, PublicKey, LogState)>> {
    let row: Option<(String, String, String)> = db
        .query_row(
            "SELECT host_id, public_key, state FROM receipt_log WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((host_id, key, state)) = row else {
        return Ok(None);
    };
    let key = PublicKey::from_str(&key).map_err(|e| anyhow::anyhow!("stored host key: {e}"))?;
    let state: LogState = serde_json::from_str(&state).context("stored log state")?;
    Ok(Some((host_id, key, state)))
}

/// The stretch to archive for the cutoff `before` (RFC 3339, as the store
/// writes times): see the module doc. `None` when nothing is old enough.
///
/// # Errors
///
/// The database fails.
pub fn plan(store: &Store, before: &str) -> Result<Option<Plan>> {
    let db = store.db();
    plan_on(&db, before)
}

fn plan_on(db: &Connection, before: &str) -> Result<Option<Plan>> {
    let Some((_, _, state)) = log(db)? else {
        return Ok(None);
    };
    let covered = state.last_checkpoint.map_or(0, |c| c.tree_size);
    let from = hot_from(db)?;
    let from_i = i64::try_from(from)?;
    // Where a stored unit of receipts ends (a cut never splits a block).
    let mut unit_ends: HashSet<u64> = HashSet::new();
    {
        let mut stmt = db.prepare(
            "SELECT first_seq + count FROM receipt_blocks WHERE first_seq + count > ?1
             UNION ALL SELECT seq + 1 FROM receipts WHERE seq >= ?1",
        )?;
        for end in stmt.query_map(params![from_i], |r| r.get::<_, i64>(0))? {
            unit_ends.insert(u64::try_from(end?)?);
        }
    }
    let mut candidates: Vec<u64> = {
        let mut stmt = db.prepare(
            "SELECT tree_size FROM receipt_checkpoints WHERE tree_size > ?1 AND tree_size <= ?2
             ORDER BY tree_size",
        )?;
        let rows = stmt.query_map(params![from_i, i64::try_from(covered)?], |r| {
            r.get::<_, i64>(0)
        })?;
        let mut out = Vec::new();
        for size in rows {
            let size = u64::try_from(size?)?;
            if unit_ends.contains(&size) {
                out.push(size);
            }
        }
        out
    };
    // Each task's receipts in the hot log, and whether it may go.
    let mut blocker = u64::MAX;
    let mut spans: Vec<(u64, u64)> = Vec::new();
    let mut tasks: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    {
        let mut stmt = db.prepare(
            "SELECT r.task_id, MIN(r.lo), MAX(r.hi), t.state, t.updated_at
             FROM (SELECT task_id, seq AS lo, seq AS hi FROM receipt_marks
                     WHERE task_id IS NOT NULL AND seq >= ?1
                   UNION ALL
                   SELECT task_id, first_seq, last_seq FROM receipt_sessions WHERE last_seq >= ?1) r
             LEFT JOIN tasks t ON t.task_id = r.task_id
             GROUP BY r.task_id",
        )?;
        let mut rows = stmt.query(params![from_i])?;
        while let Some(row) = rows.next()? {
            let task: String = row.get(0)?;
            let lo = u64::try_from(row.get::<_, i64>(1)?)?;
            let hi = u64::try_from(row.get::<_, i64>(2)?)?;
            let state: Option<String> = row.get(3)?;
            let updated: Option<String> = row.get(4)?;
            // A task the gate recorded goes once it is settled before the
            // cutoff; one without a row (`hcp run`) with its receipts.
            let settled = match (state, updated) {
                (Some(state), Some(updated)) => {
                    hcp_store::TaskState::parse_name(&state)?.is_final()
                        && updated.as_str() < before
                }
                _ => true,
            };
            if settled {
                spans.push((lo, hi));
                tasks.insert(task, (lo, hi));
            } else {
                blocker = blocker.min(lo);
            }
        }
    }
    // A cut at `c` splits a task with `lo < c <= hi`.
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (lo, hi) in spans {
        let (a, b) = (lo.saturating_add(1), hi);
        if a > b {
            continue;
        }
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let splits = |c: u64| {
        let i = merged.partition_point(|&(a, _)| a <= c);
        i > 0 && merged[i - 1].1 >= c
    };
    candidates.retain(|&c| c <= blocker && !splits(c));
    // At most [`MAX_RUN_RECEIPTS`] a run (or the first stretch that can go,
    // when it alone is longer): the pack is built in memory, on the
    // store's connection.
    let cap = from.saturating_add(MAX_RUN_RECEIPTS);
    let Some(&end) = candidates
        .iter()
        .rev()
        .find(|&&c| c <= cap)
        .or(candidates.first())
    else {
        return Ok(None);
    };
    let tasks = tasks
        .into_iter()
        .filter(|(_, (lo, _))| *lo < end)
        .map(|(t, _)| t)
        .collect();
    Ok(Some(Plan {
        first_seq: from,
        end,
        tasks,
    }))
}

/// Writes `bytes` at `path` durably: a temporary file beside it, synced,
/// renamed over it, the directory synced.
///
/// # Errors
///
/// A write, sync or rename fails.
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("writing {}", path.display()))
}

/// Archives the settled tasks older than `before` to the pack `out` and
/// prunes them (see the module doc); `key` signs the anchor and must be
/// the log's.
///
/// # Errors
///
/// The key is not the log's, the pack cannot be built, written or does
/// not verify, or the database fails. Nothing is pruned then.
pub fn archive(store: &Store, key: &HostKey, before: &str, out: &Path) -> Result<Archived> {
    let mut blobs_collected = collect_blobs(store)?;
    let (plan, host_id, public_key, pack) = {
        let db = store.db();
        let Some((host_id, public_key, _)) = log(&db)? else {
            return Ok(Archived {
                archive: None,
                blobs_collected,
            });
        };
        if public_key.key_id() != key.key_id() {
            bail!(
                "the host key ({}) is not the key of this store's receipt log ({})",
                key.key_id(),
                public_key.key_id()
            );
        }
        let Some(plan) = plan_on(&db, before)? else {
            return Ok(Archived {
                archive: None,
                blobs_collected,
            });
        };
        let pack = build(
            store,
            &db,
            (host_id.clone(), public_key.clone()),
            (plan.first_seq, plan.end - 1),
            &Selection::All,
        )?;
        (plan, host_id, public_key, pack)
    };
    let section = pack.hosts.first().context("the pack has no host")?;
    let last_cp: &Checkpoint = section
        .checkpoints
        .last()
        .filter(|c| c.tree_size == plan.end)
        .context("the pack does not end at the archive's checkpoint")?;
    let last = section
        .receipts
        .last()
        .context("the archive holds no receipt")?;
    let bytes = pack::write(&pack)?;
    write_durably(out, &bytes)?;
    fault("after_pack_write");

    // Read back what is on disk, and verify it, before anything goes.
    let on_disk = std::fs::read(out).with_context(|| format!("{}", out.display()))?;
    if on_disk != bytes {
        bail!(
            "{}: the pack read back is not the one written",
            out.display()
        );
    }
    let report = hcp_receipts::verify_bytes(
        &on_disk,
        &pack::ReadLimits::default(),
        &hcp_receipts::VerifyOptions {
            signing: Some(hcp_receipts::SigningPolicy::default()),
            trusted_keys: Some(vec![public_key.clone()]),
            ..hcp_receipts::VerifyOptions::default()
        },
    );
    if !report.ok() {
        bail!("the archive's pack does not verify; nothing pruned:\n{report}");
    }

    let mut anchor = Anchor {
        format: ANCHOR_FORMAT.to_owned(),
        host_id,
        key_id: key.key_id().as_str().to_owned(),
        number: 0,
        first_seq: plan.first_seq,
        tree_size: plan.end,
        root_hash: last_cp.root_hash,
        checkpoint: last_cp
            .hash()
            .map_err(|e| anyhow::anyhow!("the archive's checkpoint: {e}"))?,
        head: last_cp.head,
        lamport: last.lamport,
        pack_sha256: Digest::of(&bytes),
        before: before.to_owned(),
        archived_at: hcp_store::now(),
        signature: None,
    };
    let receipts = plan.end - plan.first_seq;
    let record = prune(
        store,
        &plan,
        &mut anchor,
        key,
        out,
        bytes.len() as u64,
        receipts,
    )?;
    fault("after_commit");
    blobs_collected += collect_blobs(store)?;
    Ok(Archived {
        archive: Some(record),
        blobs_collected,
    })
}

/// Step 3 of the module doc: one transaction.
fn prune(
    store: &Store,
    plan: &Plan,
    anchor: &mut Anchor,
    key: &HostKey,
    out: &Path,
    pack_bytes: u64,
    receipts: u64,
) -> Result<ArchiveRecord> {
    let mut db = store.db();
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if hot_from(&tx)? != plan.first_seq {
        bail!("another archive run pruned meanwhile; nothing pruned by this one");
    }
    let number: i64 = tx.query_row(
        "SELECT COALESCE(MAX(number), 0) + 1 FROM evidence_archives",
        [],
        |r| r.get(0),
    )?;
    anchor.number = u64::try_from(number)?;
    anchor.sign(key)?;
    let (first, end) = (i64::try_from(plan.first_seq)?, i64::try_from(plan.end)?);
    // The blobs the pruned artifacts name.
    let mut blobs: BTreeSet<String> = BTreeSet::new();
    let mut pruned_tasks = 0u64;
    for task in &plan.tasks {
        {
            let mut stmt =
                tx.prepare_cached("SELECT checksum FROM artifacts WHERE task_id = ?1")?;
            for c in stmt.query_map(params![task], |r| r.get::<_, String>(0))? {
                blobs.insert(c?.trim_start_matches("sha256:").to_owned());
            }
        }
        tx.execute(
            "DELETE FROM artifact_access WHERE uri IN
               (SELECT 'hcp://' || session_id || '/artifacts/' || name FROM artifacts WHERE task_id = ?1)",
            params![task],
        )?;
        for sql in [
            "DELETE FROM artifacts WHERE task_id = ?1",
            "DELETE FROM checkpoints WHERE task_id = ?1",
            "DELETE FROM task_messages WHERE task_id = ?1",
            "DELETE FROM approvals WHERE task_id = ?1",
            "DELETE FROM amqp_replies WHERE task_id = ?1",
        ] {
            tx.prepare_cached(sql)?.execute(params![task])?;
        }
        pruned_tasks += tx
            .prepare_cached("DELETE FROM tasks WHERE task_id = ?1")?
            .execute(params![task])? as u64;
    }
    // The tree's frontier at the anchor, from the one kept before (or the
    // first leaf) and the hashes up to it; it must give the anchor's root.
    let frontier = {
        let mut frontier = hcp_store::receipt_hashes::pruned(&tx)?
            .map(|p| p.frontier)
            .unwrap_or_default();
        for hash in hcp_store::receipt_hashes::range(&tx, frontier.size, plan.end)? {
            frontier.push(hcp_receipts::merkle::leaf_hash(&hash.0));
        }
        if frontier.size != plan.end || frontier.root() != anchor.root_hash {
            bail!(
                "the stored hashes up to seq {} do not give the archive's checkpoint root; nothing pruned",
                plan.end
            );
        }
        frontier
    };
    // Every unit before the anchor goes, its hashes with it (also those an
    // archive before this one kept).
    tx.execute(
        "DELETE FROM receipt_blocks WHERE first_seq + count <= ?1",
        params![end],
    )?;
    tx.execute("DELETE FROM receipts WHERE seq < ?1", params![end])?;
    // Only the last archive's frontier is read (`receipt_hashes::pruned`).
    tx.execute(
        "UPDATE evidence_archives SET frontier = NULL WHERE frontier IS NOT NULL",
        [],
    )?;
    tx.execute(
        "DELETE FROM receipt_marks WHERE seq >= ?1 AND seq < ?2",
        params![first, end],
    )?;
    tx.execute(
        "DELETE FROM receipt_sessions WHERE last_seq < ?1",
        params![end],
    )?;
    tx.execute(
        "DELETE FROM receipt_checkpoints WHERE tree_size < ?1",
        params![end],
    )?;
    let record = ArchiveRecord {
        anchor: anchor.clone(),
        pack: out.display().to_string(),
        pack_bytes,
        tasks: pruned_tasks,
        receipts,
        blobs_pending: blobs.len() as u64,
    };
    tx.execute(
        "INSERT INTO evidence_archives
           (number, first_seq, tree_size, anchor, pack, pack_bytes, tasks, receipts, blobs_pending, archived_at,
            frontier)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            number,
            first,
            end,
            serde_json::to_string(&anchor)?,
            record.pack,
            i64::try_from(pack_bytes)?,
            i64::try_from(pruned_tasks)?,
            i64::try_from(receipts)?,
            serde_json::to_string(&blobs)?,
            anchor.archived_at,
            serde_json::to_string(&frontier)?,
        ],
    )?;
    fault("before_commit");
    tx.commit()?;
    Ok(record)
}

/// Step 4 of the module doc: removes each blob an archive listed that no
/// kept artifact names, then clears the list. Gives how many were removed.
fn collect_blobs(store: &Store) -> Result<u64> {
    let pending: Vec<(i64, String)> = {
        let db = store.db();
        let mut stmt = db.prepare(
            "SELECT number, blobs_pending FROM evidence_archives WHERE blobs_pending != '[]'",
        )?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    let mut removed = 0;
    for (number, list) in pending {
        let hexes: Vec<String> =
            serde_json::from_str(&list).context("an archive's pending blobs")?;
        for hex in hexes {
            // Only a digest names a blob: anything else is not a path.
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            let named: bool = store.db().query_row(
                "SELECT EXISTS (SELECT 1 FROM artifacts WHERE checksum = ?1)",
                params![format!("sha256:{hex}")],
                |r| r.get(0),
            )?;
            if named {
                continue;
            }
            for dir in ["blobs/sha256", "blobs/sealed"] {
                let path = store.dir().join(dir).join(&hex);
                match std::fs::remove_file(&path) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
                }
            }
        }
        store.db().execute(
            "UPDATE evidence_archives SET blobs_pending = '[]' WHERE number = ?1",
            params![number],
        )?;
    }
    Ok(removed)
}

/// The problems of the store's anchors: each signed by the log's key, each
/// starting where the one before ended, the last at a stored checkpoint
/// of its root and hash (the hot log's first), and the receipt hash before
/// the hot log its head. Empty when they hold.
///
/// # Errors
///
/// The database fails.
pub(crate) fn check_anchors(db: &Connection, key: &PublicKey) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut stmt = db.prepare("SELECT number, anchor FROM evidence_archives ORDER BY number")?;
    let rows: Vec<(i64, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut end = 0;
    let mut last: Option<Anchor> = None;
    for (number, text) in rows {
        let anchor: Anchor = match serde_json::from_str(&text) {
            Ok(a) => a,
            Err(e) => {
                problems.push(format!("archive {number}: its anchor does not read: {e}"));
                continue;
            }
        };
        if let Err(e) = anchor.verify(key) {
            problems.push(format!("archive {number}: {e:#}"));
        }
        if anchor.first_seq != end || u64::try_from(number).ok() != Some(anchor.number) {
            problems.push(format!(
                "archive {number}: starts at seq {} where {end} was archived",
                anchor.first_seq
            ));
        }
        end = anchor.tree_size;
        last = Some(anchor);
    }
    if let Some(anchor) = last {
        let stored: Option<Vec<u8>> = db
            .query_row(
                "SELECT body FROM receipt_checkpoints WHERE tree_size = ?1",
                params![i64::try_from(anchor.tree_size)?],
                |r| r.get(0),
            )
            .optional()?;
        let cp: Option<Checkpoint> = stored.and_then(|b| serde_json::from_slice(&b).ok());
        match cp {
            Some(cp)
                if cp.root_hash == anchor.root_hash
                    && cp.hash().ok() == Some(anchor.checkpoint) => {}
            _ => problems.push(format!(
                "archive {}: the hot log's first checkpoint (size {}) is not the anchor's",
                anchor.number, anchor.tree_size
            )),
        }
        // The hashes pruned with the archives: their frontier is the last
        // anchor's tree.
        if let Some(p) = hcp_store::receipt_hashes::pruned(db)?
            && (p.frontier.size != anchor.tree_size || p.frontier.root() != anchor.root_hash)
        {
            problems.push(format!(
                "archive {}: the kept Merkle frontier (size {}) does not give the anchor's root",
                anchor.number, p.frontier.size
            ));
        }
        if let Some(seq) = anchor.tree_size.checked_sub(1)
            && hcp_store::receipt_hashes::at(db, seq)? != anchor.head
        {
            problems.push(format!(
                "archive {}: the stored hash of receipt {seq} is not the anchor's head",
                anchor.number
            ));
        }
    }
    Ok(problems)
}

/// One pack of a series, as [`check_series`] reads it.
#[derive(Debug, Clone)]
pub struct SeriesPack<'a> {
    /// How to name it in a problem (its path).
    pub name: String,
    /// The pack.
    pub pack: &'a Pack,
}

/// Whether `packs`, in the order given, make one unbroken series of one
/// host's archive: each starts at the receipt after the last of the one
/// before, its first receipt names that one's hash as `prev_hash`, and its
/// first checkpoint is that one's last (so that the consistency proof from
/// it, checked by the verifier inside the pack, joins them). Each pack must
/// have been verified on its own. Gives every break found, naming the packs.
pub fn check_series(packs: &[SeriesPack<'_>]) -> Vec<String> {
    let mut problems = Vec::new();
    for pair in packs.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (Some(sa), Some(sb)) = (a.pack.hosts.first(), b.pack.hosts.first()) else {
            problems.push(format!(
                "{} or {}: holds no host's receipts",
                a.name, b.name
            ));
            continue;
        };
        if a.pack.hosts.len() != 1 || b.pack.hosts.len() != 1 || sa.host_id != sb.host_id {
            problems.push(format!(
                "{} and {}: not packs of one host's archive",
                a.name, b.name
            ));
            continue;
        }
        let a_end = sa.first_seq.saturating_add(sa.receipts.len() as u64);
        if sb.first_seq != a_end {
            let what = if sb.first_seq > a_end {
                format!(
                    "gap: receipts {} to {} are in neither",
                    a_end,
                    sb.first_seq - 1
                )
            } else {
                "out of order or overlapping".to_owned()
            };
            problems.push(format!(
                "{} ends at seq {}, {} starts at seq {}: {what}",
                a.name,
                a_end.saturating_sub(1),
                b.name,
                sb.first_seq
            ));
            continue;
        }
        let a_head = sa.receipts.last().and_then(|r| r.hash().ok());
        let b_prev = sb.receipts.first().and_then(|r| r.prev_hash);
        if a_head.is_none() || a_head != b_prev {
            problems.push(format!(
                "{}: its first receipt does not follow the last receipt of {}",
                b.name, a.name
            ));
        }
        match (sa.checkpoints.last(), sb.checkpoints.first()) {
            (Some(ca), Some(cb)) if ca == cb && ca.tree_size == a_end => {}
            _ => problems.push(format!(
                "{}: does not start from the last checkpoint of {} (size {a_end})",
                b.name, a.name
            )),
        }
    }
    problems
}

/// The last archive's Lamport clock (0 without one): where the hot log's
/// clock must go on from.
///
/// # Errors
///
/// The database fails, or the anchor does not read.
pub(crate) fn archives_lamport(db: &Connection) -> Result<u64> {
    let text: Option<String> = db
        .query_row(
            "SELECT anchor FROM evidence_archives ORDER BY number DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok(match text {
        Some(t) => {
            serde_json::from_str::<Anchor>(&t)
                .context("a stored archive anchor")?
                .lamport
        }
        None => 0,
    })
}

/// The cutoff of `--before` (and of a retention setting) as the store
/// writes times: an RFC 3339 time, or an age (`<n>d`, `<n>h`, `<n>m`,
/// `<n>s`) before `now`.
///
/// # Errors
///
/// Neither form, or a time out of range.
pub fn cutoff(text: &str, now: time::OffsetDateTime) -> Result<String> {
    let text = text.trim();
    if let Ok(t) = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
    {
        return Ok(hcp_contracts::timestamp::rfc3339(t));
    }
    let age = age_seconds(text).with_context(|| {
        format!("{text:?}: expected an RFC 3339 time or an age such as 30d, 12h, 45m, 90s")
    })?;
    let at = now
        .checked_sub(time::Duration::seconds(i64::try_from(age)?))
        .with_context(|| format!("{text:?}: too far back"))?;
    Ok(hcp_contracts::timestamp::rfc3339(at))
}

/// An age (`<n>d`, `<n>h`, `<n>m`, `<n>s`) in seconds.
///
/// # Errors
///
/// Not of that form, or too large.
pub fn age_seconds(text: &str) -> Result<u64> {
    let (n, unit) = text.split_at(text.len().saturating_sub(1));
    let scale: u64 = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => bail!("{text:?}: an age ends in d, h, m or s"),
    };
    let n: u64 = n
        .parse()
        .with_context(|| format!("{text:?}: not a whole number of {unit}"))?;
    n.checked_mul(scale)
        .filter(|s| i64::try_from(*s).is_ok())
        .with_context(|| format!("{text:?}: too large"))
}
