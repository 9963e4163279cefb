//! Reading the receipt log of a data directory: for `hcp serve`'s operator
//! page (the latest receipts, a task's receipts) and for health and
//! durability checks (is every stored receipt intact?).
//!
//! - [`recent_receipts`] lists receipts, newest first, optionally of one
//!   task or session: what was decided, when, why, and whether the receipt
//!   is signed on its own or covered by a signed checkpoint.
//! - [`verify_store`] checks every stored receipt: the hash chain, `seq`,
//!   Lamport clocks and each receipt's rules over the whole log (its tail
//!   not yet covered by a checkpoint included), that the stored log state
//!   ends where the receipts end, and then the evidence pack of every
//!   covered receipt as `hcp evidence verify` would (signatures with
//!   `verify_strict`, inclusion and consistency proofs, the DAG), with the
//!   host key the log was started with.
//!
//! Both only read the database; neither needs the host's private key.

use super::block::Stored;
use super::export::{Selection, export};
use super::stored::{self, Order};
use anyhow::{Context as _, Result};
use hcp_contracts::RiskLevel;
use hcp_receipts::{Digest, LogState, PublicKey, Receipt, Verdict, VerifyOptions};
use hcp_store::Store;
use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;
use std::str::FromStr as _;

/// Which receipts to list.
#[derive(Debug, Clone, Copy, Default)]
pub enum ReceiptFilter<'a> {
    /// Every receipt.
    #[default]
    All,
    /// The receipts of one task (its gate decisions and its sessions).
    Task(&'a str),
    /// The receipts of one session.
    Session(&'a str),
}

/// One receipt, as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReceiptSummary {
    /// Position in the host's log.
    pub seq: u64,
    /// `<host id>:<seq>`.
    pub receipt_id: String,
    /// When the verdict was given (RFC 3339).
    pub timestamp: String,
    /// What was decided: `gate.admission`, `session.open`, `fs.open`, ...
    pub call: String,
    /// `name@version` of the capability.
    pub capability: String,
    /// ALLOW or DENY.
    pub verdict: Verdict,
    /// The reason code.
    pub reason_code: String,
    /// The risk level recorded.
    pub risk: RiskLevel,
    /// The task, if any.
    pub task_id: Option<String>,
    /// The session, if any.
    pub session_id: Option<String>,
    /// The policy it was decided under.
    pub policy_hash: String,
    /// Signed one by one (DENY, or R4 and above).
    pub signed: bool,
    /// Covered by a signed checkpoint already.
    pub covered: bool,
}

/// The most recent receipts matching `filter`, newest first, at most
/// `limit`.
///
/// # Errors
///
/// The database fails, or a stored receipt does not read back.
pub fn recent_receipts(
    store: &Store,
    filter: ReceiptFilter<'_>,
    limit: usize,
) -> Result<Vec<ReceiptSummary>> {
    let db = store.db();
    let covered = covered(&db)?;
    let (selection, lo, hi) = match filter {
        ReceiptFilter::All => (Selection::All, 0, u64::MAX),
        ReceiptFilter::Task(id) | ReceiptFilter::Session(id) => {
            let selection = match filter {
                ReceiptFilter::Task(_) => Selection::Task(id.to_owned()),
                _ => Selection::Session(id.to_owned()),
            };
            match super::export::range_of(&db, &selection)? {
                Some((a, b)) => (selection, a, b),
                None => return Ok(Vec::new()),
            }
        }
    };
    // Newest first through the range, keeping the selection's own receipts
    // (other tasks' calls may interleave).
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    stored::each(&db, lo, hi, Order::Newest, |s| {
        let r = s.receipt;
        let selected = match &selection {
            Selection::All => true,
            Selection::Task(id) => r.task_id.as_deref() == Some(id.as_str()),
            Selection::Session(id) => r.session_id.as_deref() == Some(id.as_str()),
        };
        if !selected {
            return Ok(true);
        }
        out.push(ReceiptSummary {
            covered: r.seq < covered,
            signed: r.is_signed(),
            seq: r.seq,
            receipt_id: r.receipt_id,
            timestamp: r.timestamp,
            call: r.call,
            capability: r.capability,
            verdict: r.verdict,
            reason_code: r.reason_code,
            policy_hash: r.policy_hash.to_string(),
            risk: r.risk,
            task_id: r.task_id,
            session_id: r.session_id,
        });
        Ok(out.len() < limit)
    })?;
    Ok(out)
}

/// Receipts covered by the last checkpoint (0 without a log).
fn covered(db: &rusqlite::Connection) -> Result<u64> {
    let state: Option<String> = db
        .query_row("SELECT state FROM receipt_log WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(match state {
        Some(s) => serde_json::from_str::<LogState>(&s)
            .context("stored log state")?
            .last_checkpoint
            .map_or(0, |c| c.tree_size),
        None => 0,
    })
}

/// What [`verify_store`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StoreCheck {
    /// Receipts stored.
    pub receipts: u64,
    /// Of them, covered by a checkpoint (and verified as a pack).
    pub covered: u64,
    /// Of them, signed one by one.
    pub signed: u64,
    /// Checkpoints stored.
    pub checkpoints: u64,
    /// Every problem found, each naming the receipt or checkpoint it
    /// concerns; empty when the store is intact.
    pub problems: Vec<String>,
}

impl StoreCheck {
    /// Whether no problem was found.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks every stored receipt (see the module doc). An empty data
/// directory (no receipt yet) is intact.
///
/// # Errors
///
/// The database fails. Problems with the receipts themselves are reported
/// in [`StoreCheck::problems`], not as errors.
pub fn verify_store(store: &Store) -> Result<StoreCheck> {
    // One moment of the store: a batch committed while the log's state,
    // its receipts and its checkpoints are read would otherwise look like
    // a log that does not match its state.
    let store = &store.snapshot()?;
    let mut check = StoreCheck::default();
    let log: Option<(String, String, String)> = store
        .db()
        .query_row(
            "SELECT host_id, public_key, state FROM receipt_log WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((host_id, public_key, state)) = log else {
        return Ok(check);
    };
    let public_key = match PublicKey::from_str(&public_key) {
        Ok(k) => k,
        Err(e) => {
            check.problems.push(format!("the stored host key: {e}"));
            return Ok(check);
        }
    };
    let state: LogState = match serde_json::from_str(&state) {
        Ok(s) => s,
        Err(e) => {
            check.problems.push(format!("the stored log state: {e}"));
            return Ok(check);
        }
    };
    check_chain(store, &public_key, &host_id, &state, &mut check)?;
    check.checkpoints = store
        .db()
        .query_row("SELECT COUNT(*) FROM receipt_checkpoints", [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|n| u64::try_from(n).unwrap_or(0))?;
    check.covered = state.last_checkpoint.map_or(0, |c| c.tree_size);
    // Nothing hot covered yet (nothing at all, or all of it archived).
    if check.covered <= super::hot::hot_from(&store.db())? {
        return Ok(check);
    }
    let pack = match export(store, &Selection::All) {
        Ok(p) => p,
        Err(e) => {
            check
                .problems
                .push(format!("the covered receipts do not make a pack: {e:#}"));
            return Ok(check);
        }
    };
    let report = hcp_receipts::verify(
        &pack,
        &VerifyOptions {
            signing: Some(hcp_receipts::SigningPolicy::default()),
            trusted_keys: Some(vec![public_key]),
            ..VerifyOptions::default()
        },
    );
    check
        .problems
        .extend(report.failures.iter().map(ToString::to_string));
    Ok(check)
}

/// The whole stored log, receipt by receipt: each reads back, hashes to its
/// stored hash, follows the previous one (`seq`, `prev_hash`, Lamport
/// clock) and keeps the rules of receipts; the stored state ends there.
fn check_chain(
    store: &Store,
    public_key: &PublicKey,
    host_id: &str,
    state: &LogState,
    check: &mut StoreCheck,
) -> Result<()> {
    let db = store.db();
    // The archived prefix is pruned (its hashes to a frontier, older
    // stores' to hashes only): the chain is checked from
    // the last archive's signed anchor on.
    for problem in super::archive::check_anchors(&db, public_key)? {
        check.problems.push(problem);
    }
    let hot = super::hot::hot_from(&db)?;
    let mut head: Option<Digest> = match hot.checked_sub(1) {
        Some(seq) => hcp_store::receipt_hashes::at(&db, seq)?,
        None => None,
    };
    let mut lamport = super::archive::archives_lamport(&db)?;
    let mut next = hot;
    check.receipts = hot;
    stored::each_unit(&db, |first, count, receipts| {
        let receipts = match receipts {
            Ok(r) => r,
            Err(e) => {
                check.receipts += count;
                check.problems.push(format!(
                    "receipts {host_id}:{first} to {host_id}:{}: {e:#}",
                    first.saturating_add(count.saturating_sub(1))
                ));
                if first != next {
                    check.problems.push(format!(
                        "receipt {host_id}:{first}: seq {first} where {next} was expected"
                    ));
                }
                next = first.saturating_add(count);
                head = None;
                return Ok(());
            }
        };
        for s in receipts {
            check_one(host_id, s, check, &mut head, &mut lamport, &mut next);
        }
        Ok(())
    })?;
    if state.tree.size != check.receipts || state.head != head {
        check.problems.push(format!(
            "the stored log state ends at {} receipts, the log holds {}",
            state.tree.size, check.receipts
        ));
    }
    Ok(())
}

/// One receipt of [`check_chain`], after `head` (the hash before it).
fn check_one(
    host_id: &str,
    s: Stored,
    check: &mut StoreCheck,
    head: &mut Option<Digest>,
    lamport: &mut u64,
    next: &mut u64,
) {
    let (stored, r) = (s.hash, s.receipt);
    let seq = r.seq;
    let at = format!("receipt {host_id}:{seq}");
    check.receipts += 1;
    if seq != *next {
        check
            .problems
            .push(format!("{at}: seq {seq} where {next} was expected"));
    }
    *next = seq.saturating_add(1);
    if r.is_signed() {
        check.signed += 1;
    }
    if let Err(e) = r.check() {
        check.problems.push(format!("{at}: {e}"));
    }
    let hash = match r.hash() {
        Ok(h) => h,
        Err(e) => {
            check.problems.push(format!("{at}: {e}"));
            return;
        }
    };
    if stored != hash {
        check
            .problems
            .push(format!("{at}: the stored hash is not the receipt's"));
    }
    if r.host_id != host_id {
        check
            .problems
            .push(format!("{at}: the receipt says it is {}", r.receipt_id));
    }
    if r.prev_hash != *head {
        check.problems.push(format!(
            "{at}: prev_hash does not name the receipt before it"
        ));
    }
    if head.is_some() && r.lamport <= *lamport {
        check
            .problems
            .push(format!("{at}: the Lamport clock does not increase"));
    }
    *lamport = r.lamport;
    *head = Some(hash);
}

/// A session as its opening receipt recorded it (`receipt_sessions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedSession {
    /// Its task.
    pub task_id: String,
    /// Its capability, `name@version`.
    pub capability: String,
    /// Its facts, canonical JSON of `hcp_policy::pep::SessionFacts`.
    pub facts: Vec<u8>,
}

/// The session `session_id`, if a receipt of this data directory opened it.
///
/// # Errors
///
/// The database fails.
pub fn recorded_session(store: &Store, session_id: &str) -> Result<Option<RecordedSession>> {
    Ok(store
        .db()
        .query_row(
            "SELECT task_id, capability, facts FROM receipt_sessions WHERE session_id = ?1",
            [session_id],
            |r| {
                Ok(RecordedSession {
                    task_id: r.get(0)?,
                    capability: r.get(1)?,
                    facts: r.get(2)?,
                })
            },
        )
        .optional()?)
}

/// The receipts of `session_id`, in the order they were recorded, each with
/// the decision input it was decided on (`null` when none was kept).
///
/// # Errors
///
/// The database fails, or a stored receipt does not read back.
pub fn session_receipts(
    store: &Store,
    session_id: &str,
) -> Result<Vec<(Receipt, serde_json::Value)>> {
    let db = store.db();
    let range: Option<(i64, i64)> = db
        .query_row(
            "SELECT first_seq, last_seq FROM receipt_sessions WHERE session_id = ?1",
            params![session_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((first, last)) = range else {
        return Ok(Vec::new());
    };
    let mut receipts = Vec::new();
    stored::each(
        &db,
        u64::try_from(first)?,
        u64::try_from(last)?,
        Order::Oldest,
        |s| {
            if s.receipt.session_id.as_deref() == Some(session_id) {
                let input = serde_json::from_slice(&s.input.into_bytes())
                    .unwrap_or(serde_json::Value::Null);
                receipts.push((s.receipt, input));
            }
            Ok(true)
        },
    )?;
    Ok(receipts)
}
