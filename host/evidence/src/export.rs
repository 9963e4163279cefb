//! Evidence packs from the store: the receipts of a task, a session, or the
//! whole log, with everything needed to verify and replay them offline.
//!
//! A host section must be a contiguous stretch of the log that ends at a
//! checkpoint, so a pack of one task holds every receipt from the task's
//! first one up to the checkpoint that covers its last one (other tasks'
//! receipts in between included; their parents outside the stretch are
//! declared external). Only stored data is read: the same state always
//! gives the same bytes.

use super::wit_files;
use anyhow::{Context as _, Result};
use hcp_policy::pep::scope_file;
use hcp_receipts::checkpoint::Checkpoint;
use hcp_receipts::pack::{self, DecisionInput, HostSection, Pack};
use hcp_receipts::{Digest, LogState, PublicKey, Receipt};
use hcp_store::Store;
use rusqlite::{OptionalExtension, params};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::str::FromStr as _;

/// What to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every receipt of the hot log (after the last archive,
    /// [`crate::archive`]) covered by a checkpoint.
    All,
    /// The receipts of a task's sessions.
    Task(String),
    /// The receipts of a session.
    Session(String),
}

/// A pack path component: `[A-Za-z0-9._-]`, anything else as `_`.
fn component(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The first and last `seq` of the receipts of a task or a session: its
/// marked receipts (the gate's, the sessions' openings) and its sessions'
/// ranges. `None` when it has none (or for [`Selection::All`]).
///
/// # Errors
///
/// The database fails.
pub(crate) fn range_of(
    db: &rusqlite::Connection,
    selection: &Selection,
) -> Result<Option<(u64, u64)>> {
    let (column, id) = match selection {
        Selection::All => return Ok(None),
        Selection::Task(id) => ("task_id", id),
        Selection::Session(id) => ("session_id", id),
    };
    let (a, b): (Option<i64>, Option<i64>) = db.query_row(
        &format!(
            "SELECT MIN(lo), MAX(hi) FROM (
                 SELECT seq AS lo, seq AS hi FROM receipt_marks WHERE {column} = ?1
                 UNION ALL
                 SELECT first_seq, last_seq FROM receipt_sessions WHERE {column} = ?1)"
        ),
        params![id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(match (a, b) {
        (Some(a), Some(b)) => Some((u64::try_from(a)?, u64::try_from(b)?)),
        _ => None,
    })
}

/// Every policy snapshot the receipts name, as pack files: a snapshot's
/// files by name when they name one (the layout of every older pack), under
/// `<hex of its hash>/` for each when they name several. A hash whose
/// snapshot the store does not hold is left out (replay says so).
///
/// # Errors
///
/// The database fails, or a stored snapshot does not read.
fn policy_snapshots(
    db: &rusqlite::Connection,
    receipts: &[Receipt],
) -> Result<BTreeMap<String, Vec<u8>>> {
    let hashes: BTreeSet<Digest> = receipts.iter().map(|r| r.policy_hash).collect();
    let mut policy = BTreeMap::new();
    for hash in &hashes {
        let sources: Option<String> = db
            .query_row(
                "SELECT sources FROM policy_snapshots WHERE policy_hash = ?1",
                params![hash.to_string()],
                |r| r.get(0),
            )
            .optional()?;
        let Some(sources) = sources else { continue };
        let files: BTreeMap<String, String> = serde_json::from_str(&sources)
            .with_context(|| format!("stored policy snapshot {hash}"))?;
        for (name, text) in files {
            let path = if hashes.len() == 1 {
                component(&name)
            } else {
                format!("{}/{}", hash.to_hex(), component(&name))
            };
            policy.insert(path, text.into_bytes());
        }
    }
    Ok(policy)
}

/// A message as a pack carries it: a JSON message with every string the
/// credential detector flags withheld as its keyed digest; anything else
/// as it is.
fn withheld(withhold: &hcp_store::withhold::Withhold, body: Vec<u8>) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| withhold.json(&v))
    {
        Some(v) => v.to_string().into_bytes(),
        None => body,
    }
}

/// Builds the evidence pack of `selection` from `store`.
///
/// # Errors
///
/// Nothing to export (no receipt log, no receipt of the task or session,
/// receipts not yet covered by a checkpoint), or stored data that does not
/// read back.
pub fn export(store: &Store, selection: &Selection) -> Result<Pack> {
    let db = store.db();
    let (host_id, public_key, state): (String, String, String) = db
        .query_row(
            "SELECT host_id, public_key, state FROM receipt_log WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?
        .context("no receipts in this data directory")?;
    let state: LogState = serde_json::from_str(&state).context("stored log state")?;
    let public_key = PublicKey::from_str(&public_key).map_err(|e| anyhow::anyhow!("{e}"))?;
    let covered = state.last_checkpoint.map_or(0, |c| c.tree_size);

    // The hot log starts where the last archive ended (`super::archive`).
    let hot = super::hot::hot_from(&db)?;
    let (first, last) = match selection {
        Selection::All => {
            if covered <= hot {
                anyhow::bail!("no receipt is covered by a checkpoint yet");
            }
            (hot, covered - 1)
        }
        Selection::Task(id) | Selection::Session(id) => {
            let what = if matches!(selection, Selection::Task(_)) {
                "task"
            } else {
                "session"
            };
            let Some((a, b)) = range_of(&db, selection)? else {
                if hot > 0 {
                    anyhow::bail!(
                        "no receipts of {what} {id} in the hot store (archived and pruned, or none recorded)"
                    );
                }
                anyhow::bail!("no receipts of {what} {id}");
            };
            (a, b)
        }
    };
    build(store, &db, (host_id, public_key), (first, last), selection)
}

/// The pack of the receipts `first..=last` (extended to the checkpoint
/// that covers `last`) and of the tasks `selection` names among them. A
/// stretch that starts where an archive ended (`first > 0` and a
/// checkpoint of size `first`) carries that checkpoint first: the
/// consistency of the stretch with the archive before it is then proved
/// inside the pack.
pub(crate) fn build(
    store: &Store,
    db: &rusqlite::Connection,
    (host_id, public_key): (String, PublicKey),
    (first, last): (u64, u64),
    selection: &Selection,
) -> Result<Pack> {
    let from_anchor =
        matches!(selection, Selection::All) && first > 0 && super::hot::is_anchor(db, first)?;
    let checkpoints: Vec<Checkpoint> = {
        let mut stmt = db.prepare(
            "SELECT body FROM receipt_checkpoints WHERE tree_size >= ?1 ORDER BY tree_size",
        )?;
        let from = if from_anchor { first } else { first + 1 };
        let rows = stmt.query_map(params![from as i64], |r| r.get::<_, Vec<u8>>(0))?;
        let mut out = Vec::new();
        for body in rows {
            let cp: Checkpoint = serde_json::from_slice(&body?).context("stored checkpoint")?;
            let done = cp.tree_size > last;
            out.push(cp);
            if done {
                break;
            }
        }
        out
    };
    let end = match checkpoints.last() {
        Some(cp) if cp.tree_size > last => cp.tree_size,
        _ => anyhow::bail!(
            "receipts up to seq {last} are not covered by a checkpoint yet (the host seals them when it flushes)"
        ),
    };

    // The tree up to the last checkpoint, for the proofs: the archived
    // prefix as its frontier, every leaf after it.
    let tree = hcp_store::receipt_hashes::tree(db, end)?;
    let mut receipts = Vec::new();
    let mut inputs = Vec::new();
    let mut in_pack: HashSet<Digest> = HashSet::new();
    super::stored::each(db, first, end - 1, super::stored::Order::Oldest, |s| {
        let seq = s.receipt.seq;
        if tree.leaf(seq) != Some(hcp_receipts::merkle::leaf_hash(&s.hash.0)) {
            anyhow::bail!("receipt {seq}: its hash is not the one stored for it");
        }
        in_pack.insert(s.hash);
        inputs.push(DecisionInput {
            input: serde_json::from_slice(&s.input.into_bytes())
                .with_context(|| format!("stored decision input {seq}"))?,
            seq,
        });
        receipts.push(s.receipt);
        Ok(true)
    })?;
    if tree.size() != end || receipts.len() as u64 != end - first {
        anyhow::bail!("the stored log ends before its checkpoint of size {end}");
    }
    let external: BTreeSet<Digest> = receipts
        .iter()
        .flat_map(|r| r.parents.iter().copied())
        .filter(|p| !in_pack.contains(p))
        .collect();

    let mut section = HostSection::new(
        &host_id,
        vec![public_key.key_id().clone()],
        receipts,
        checkpoints,
        inputs,
    );
    pack::prove(&mut section, &tree)?;

    let policy = policy_snapshots(db, &section.receipts)?;

    // Manifests, WIT, and the facts of every session in the stretch.
    let mut manifests: BTreeMap<String, Vec<u8>> = wit_files()
        .map(|(name, text)| (format!("wit/{name}"), text.as_bytes().to_vec()))
        .collect();
    let capabilities: BTreeSet<&str> = section
        .receipts
        .iter()
        .map(|r| r.capability.as_str())
        .collect();
    for capability in capabilities {
        let manifest: Option<Vec<u8>> = db
            .query_row(
                "SELECT manifest FROM capability_manifests WHERE capability = ?1",
                params![capability],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(bytes) = manifest {
            manifests.insert(
                format!("capabilities/{}/manifest.json", component(capability)),
                bytes,
            );
        }
    }
    {
        let mut stmt = db.prepare(
            "SELECT facts_hash, facts FROM receipt_sessions
             WHERE first_seq < ?2 AND last_seq >= ?1 ORDER BY session_id",
        )?;
        let mut rows = stmt.query(params![first as i64, end as i64])?;
        while let Some(row) = rows.next()? {
            let hash = Digest::from_str(&row.get::<_, String>(0)?)
                .map_err(|e| anyhow::anyhow!("stored facts hash: {e}"))?;
            manifests.insert(scope_file(&hash), row.get(1)?);
        }
    }
    // The tasks selected: those of the selection's receipts.
    let selected_tasks: BTreeSet<String> = section
        .receipts
        .iter()
        .filter(|r| match selection {
            Selection::All => true,
            Selection::Task(id) => r.task_id.as_deref() == Some(id.as_str()),
            Selection::Session(id) => r.session_id.as_deref() == Some(id.as_str()),
        })
        .filter_map(|r| r.task_id.clone())
        .collect();

    // The messages of the selected tasks, opened when they rest sealed,
    // and their credentials withheld (`hcp_store::withhold`).
    let withhold = store.withhold();
    let mut messages = BTreeMap::new();
    for task in &selected_tasks {
        let mut stmt =
            db.prepare("SELECT name, body FROM task_messages WHERE task_id = ?1 ORDER BY name")?;
        let rows = stmt.query_map(params![task], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        for row in rows {
            let (name, body) = row?;
            let body = super::recorder::open_message(store.data_key(), task, &name, body)?;
            messages.insert(
                format!("{}/{}", component(task), component(&name)),
                withheld(withhold, body),
            );
        }
        if let Some((submit, answer, result)) =
            hcp_store::stored_messages(db, store.data_key(), task)?
        {
            for (name, body) in [
                ("submit.json", Some(submit)),
                ("answer.json", answer),
                ("result.json", result),
            ] {
                if let Some(body) = body {
                    messages.insert(
                        format!("{}/{name}", component(task)),
                        withheld(withhold, body.into_bytes()),
                    );
                }
            }
        }
    }

    Ok(Pack {
        hosts: vec![section],
        external_parents: external.into_iter().collect(),
        public_keys: vec![public_key],
        policy,
        manifests,
        messages,
    })
}
