//! The receipt writer thread: takes verdicts in batches and stores each
//! batch in one SQLite transaction (group commit).
//!
//! Several processes may write the same data directory's log (`hcp serve`
//! and the command line). Each batch runs in an `IMMEDIATE` transaction,
//! which holds SQLite's write lock, and starts by reading the stored log
//! state: when another process moved the log on since this writer last
//! stored it, the writer goes on from the stored state
//! ([`HostLog::resync`]). A session's receipts are written by the one
//! process that runs it, so its chain stays in memory.
//!
//! A batch's receipts are stored in blocks (`super::block`): a row per
//! 1024 receipts, their hashes apart, the rest in a compact form, about a
//! fifth of their JSON. (Until the blocks, a large batch had its rows
//! inserted by a second thread; with a block per 1024 receipts the hand-over
//! cost more than it saved on two cores: docs/benchmarks.md, "Receipt
//! blocks".)

use super::block::{BlockWriter, Input, Prepared};
use super::channel::{Decided, Entry, Failure, Msg, Open, Refuser, Spent};
use anyhow::Result;
use hcp_contracts::timestamp::rfc3339_unix_ms;
use hcp_policy::pep::gate::CALL_ADMISSION;
use hcp_policy::pep::{self, SessionFacts};
use hcp_receipts::log::LogError;
use hcp_receipts::{Digest, DraftRef, Head, HostLog, LogState, Parent, Receipt, Verdict};
use hcp_sandbox::pep::now_ms;
use rusqlite::{Connection, Transaction, TransactionBehavior, params};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;

/// The last receipt of a session, and its stored range.
#[derive(Clone)]
struct Chain {
    last: Parent,
    last_seq: u64,
    dirty: bool,
    /// Receipts that caused the session (its admission, an approval): the
    /// parents of its first host call's receipt, with `last`.
    causes: Vec<Parent>,
}

/// The receipts about one HID proposal so far: the parents of the next.
#[derive(Clone)]
struct Thread {
    session: String,
    parents: Vec<Parent>,
}

/// Answers a message once its batch is committed (or failed).
pub(super) type Reply = Box<dyn FnOnce(Result<(), String>) + Send>;

/// The writer's connection and state.
pub(super) struct Writer {
    pub(super) db: Connection,
    pub(super) core: Core,
    /// The data directory, where the store's mark is written.
    dir: std::path::PathBuf,
    /// The receipts of the last mark handed to the marker.
    marked: Option<u64>,
    /// Writes the marks, off this thread.
    marker: super::marker::Marker,
    /// The log's Lamport clock as last stored, for answers to carry.
    clock: Arc<AtomicU64>,
    /// Where host calls' messages go once stored, to be freed by the
    /// threads that made them ([`Spent`]).
    spent: Arc<Spent>,
    /// The host's metrics: each stored batch's size and time.
    metrics: Arc<hcp_store::metrics::Metrics>,
}

/// Everything but the connection, so a transaction on it can be held while
/// the state changes.
pub(super) struct Core {
    pub(super) log: HostLog,
    /// The log state as this writer last stored it (its JSON).
    pub(super) saved: String,
    sessions: HashMap<String, Chain>,
    /// HID proposals by id, from their `hid.propose` call's receipt to
    /// their last receipt (see [`super::Follows`]).
    threads: HashMap<String, Thread>,
    /// The last timestamp formatted: calls come many to a millisecond.
    stamp: (u64, String),
    /// The receipt each append fills, stores and leaves
    /// ([`HostLog::append_into`]): its strings' buffers are reused, where
    /// a receipt of owned strings was allocated, moved and freed per call.
    slot: Receipt,
    /// A host call's parents, gathered for its draft.
    parents: Vec<Parent>,
    /// This batch's host calls' messages, once used ([`Spent`]): boxes as
    /// they came, to be freed where they were allocated.
    #[allow(clippy::vec_box)]
    spent: Vec<Box<Decided>>,
}

fn begin(db: &Connection) -> Result<Transaction<'_>> {
    Ok(Transaction::new_unchecked(
        db,
        TransactionBehavior::Immediate,
    )?)
}

impl Writer {
    pub(super) fn new(
        db: Connection,
        log: HostLog,
        saved: String,
        dir: &std::path::Path,
        clock: Arc<AtomicU64>,
        spent: Arc<Spent>,
        metrics: Arc<hcp_store::metrics::Metrics>,
    ) -> Self {
        clock.store(log.state().lamport, Ordering::Release);
        Self {
            db,
            dir: dir.to_path_buf(),
            marked: None,
            marker: super::marker::Marker::start(dir.to_path_buf()),
            clock,
            spent,
            metrics,
            core: Core {
                log,
                saved,
                sessions: HashMap::new(),
                threads: HashMap::new(),
                stamp: (u64::MAX, String::new()),
                slot: Receipt::blank(),
                parents: Vec::new(),
                spent: Vec::new(),
            },
        }
    }

    pub(super) fn run(mut self, rx: &Receiver<Msg>, failure: &Failure) {
        loop {
            let Ok(first) = rx.recv() else { return };
            let batch = super::channel::gather(rx, first);
            let stop = batch.iter().any(|m| matches!(m, Msg::Stop));
            // While writes fail (a full disk), each batch is tried again:
            // the first that commits ends the failure.
            let mut touched: Vec<String> = Vec::new();
            for s in batch.iter().filter_map(Msg::session) {
                // A session's receipts come in runs: one name per run.
                if touched.last().is_none_or(|t| t != s) {
                    touched.push(s.to_owned());
                }
            }
            let refusers: Vec<Refuser> = batch.iter().filter_map(Msg::refuser).collect();
            let closed: Vec<String> = batch
                .iter()
                .filter_map(|m| match m {
                    Msg::Close(s) => Some(s.clone()),
                    _ => None,
                })
                .collect();
            let sessions = self.core.sessions.clone();
            let threads = self.core.threads.clone();
            let mut replies: Vec<Reply> = Vec::new();
            let batched = phase!("writer.batch");
            let (size, started) = (batch.len(), std::time::Instant::now());
            let stored = self.batch(batch, &mut replies);
            if stored.is_ok() {
                self.metrics.receipt_batch(size, started.elapsed());
            }
            drop(batched);
            match stored {
                Err(e) => {
                    // Nothing of the batch is stored: the log and the
                    // chains go back to the stored state, so that no later
                    // receipt names a lost one as its parent (no gap, no
                    // fork), and the sessions whose receipts were lost are
                    // remembered (their tasks fail).
                    self.core.saved.clear();
                    self.core.sessions = sessions;
                    self.core.threads = threads;
                    // Every successful batch saved its sessions' ranges: a
                    // session that ended in this one is forgotten all the
                    // same.
                    for s in &closed {
                        self.core.sessions.remove(s);
                        self.core
                            .threads
                            .retain(|_, t| &t.session != s || t.parents.len() > 1);
                    }
                    let full = hcp_store::durable::storage_full(&e).is_some();
                    tracing::error!("receipts: {e:#}");
                    failure.set(format!("{e:#}"), full, touched);
                    // Every message of the batch is refused, also those the
                    // batch did not reach.
                    drop(replies);
                    let why = failure.why();
                    for r in refusers {
                        r.refuse(&why);
                    }
                }
                Ok(flushed) => {
                    drop(refusers);
                    failure.clear();
                    self.clock
                        .store(self.core.log.state().lamport, Ordering::Release);
                    for reply in replies {
                        reply(Ok(()));
                    }
                    if flushed {
                        let _mark = phase!("writer.mark");
                        self.mark();
                    }
                }
            }
            // After the answers: a pile freed here does not delay them.
            self.spent.hand_back(&mut self.core.spent);
            if stop {
                return;
            }
        }
    }

    /// Records what the store now holds in its mark (see
    /// [`hcp_store::durable`]), through the marker's thread; a mark that
    /// cannot be written stays behind the store, which the startup check
    /// allows.
    fn mark(&mut self) {
        let receipts = self.core.log.size();
        if self.marked == Some(receipts) {
            return;
        }
        let mark = hcp_store::durable::Mark {
            receipts,
            head: self.core.log.state().head.map(|d| hex::encode(d.0)),
        };
        self.marker.mark(&self.dir, mark);
        self.marked = Some(receipts);
    }

    /// Stores one batch in one transaction; `replies` are answered after.
    /// Returns whether a checkpoint sealed it.
    fn batch(&mut self, batch: Vec<Msg>, replies: &mut Vec<Reply>) -> Result<bool> {
        let begun = phase!("writer.begin");
        let tx = begin(&self.db)?;
        let core = &mut self.core;
        core.sync(&tx)?;
        drop(begun);
        let messages = phase!("writer.messages");
        let mut out = Rows::new(&tx);
        let flush = core.messages(&mut out, batch, replies)?;
        let state = core.store_state(&mut out)?;
        out.finish()?;
        drop(messages);
        let commit = phase!("writer.commit");
        tx.commit()?;
        drop(commit);
        self.core.saved = state;
        Ok(flush)
    }
}

impl Core {
    /// Turns a batch's messages into receipts and rows; gives whether a
    /// checkpoint is to seal the batch (it is made here).
    fn messages(
        &mut self,
        out: &mut Rows<'_>,
        batch: Vec<Msg>,
        replies: &mut Vec<Reply>,
    ) -> Result<bool> {
        let core = self;
        let tx = out;
        let mut flush = false;
        for m in batch {
            match m {
                Msg::Call(d) => {
                    core.call(tx, &d)?;
                    core.spent.push(d);
                }
                Msg::Append(entry, reply) => {
                    // A draft the log refuses refuses only its own receipt.
                    let parent = core.append(tx, *entry)?.map_err(|e| e.to_string());
                    replies.push(Box::new(move |r: Result<(), String>| {
                        let _ = reply.send(r.and(parent));
                    }));
                }
                Msg::Sealed(entry, reply, write) => {
                    let parent = core.append(tx, *entry)?.map_err(|e| e.to_string());
                    // What the store makes of a receipt the log refused is
                    // not written either.
                    if let (Some(write), Ok(_)) = (write, &parent) {
                        tx.write(Row::Store(write))?;
                    }
                    flush = true;
                    replies.push(Box::new(move |r: Result<(), String>| {
                        let _ = reply.send(r.and(parent));
                    }));
                }
                Msg::Open(open, reply) => {
                    let parent = core.open(tx, &open)?;
                    replies.push(Box::new(move |r: Result<(), String>| {
                        let _ = reply.send(r.map(|()| parent));
                    }));
                }
                Msg::Close(session) => {
                    core.save_session(tx, &session)?;
                    core.sessions.remove(&session);
                    // Proposals never decided end with their session; a
                    // decided one waits for its execution's receipt.
                    core.threads
                        .retain(|_, t| t.session != session || t.parents.len() > 1);
                }
                Msg::Flush(reply, write) => {
                    if let Some(write) = write {
                        tx.write(Row::Store(write))?;
                    }
                    flush = true;
                    replies.push(Box::new(move |r| {
                        let _ = reply.send(r);
                    }));
                }
                Msg::Observe(remote) => {
                    // The recorder refuses a clock far ahead of the
                    // host's or above 2^52 (`MAX_LAMPORT_LEAD`,
                    // `MAX_RECEIVED_LAMPORT`), so the log keeps room for
                    // its own receipts; one the log cannot take that got
                    // here all the same is only noted.
                    if let Err(e) = core.log.receive(remote) {
                        tracing::warn!("receipts: a Lamport clock received: {e}");
                    }
                }
                Msg::Stop => flush = true,
            }
        }
        let dirty: Vec<String> = core
            .sessions
            .iter()
            .filter(|(_, c)| c.dirty)
            .map(|(s, _)| s.clone())
            .collect();
        for session in dirty {
            core.save_session(tx, &session)?;
        }
        if flush {
            let _seal = phase!("writer.seal");
            core.seal(tx)?;
        }
        Ok(flush)
    }
}

impl Writer {
    /// Seals receipts a stopped process left without a checkpoint.
    pub(super) fn seal_on_open(&mut self) -> Result<()> {
        let tx = begin(&self.db)?;
        let core = &mut self.core;
        core.sync(&tx)?;
        if core.uncovered() {
            let mut out = Rows::new(&tx);
            core.seal(&mut out)?;
            let state = core.store_state(&mut out)?;
            out.finish()?;
            tx.commit()?;
            core.saved = state;
        } else {
            drop(tx);
        }
        self.mark();
        Ok(())
    }
}

impl Core {
    /// Goes on from the stored state if another process moved the log on.
    fn sync(&mut self, tx: &Connection) -> Result<()> {
        let stored: String = tx
            .prepare_cached("SELECT state FROM receipt_log WHERE id = 1")?
            .query_row([], |r| r.get(0))?;
        if stored != self.saved {
            let state: LogState = serde_json::from_str(&stored)?;
            self.log.resync(state)?;
            self.saved = stored;
        }
        Ok(())
    }

    fn store_state(&self, out: &mut Rows<'_>) -> Result<String> {
        let state = serde_json::to_string(self.log.state())?;
        out.write(Row::State(state.clone()))?;
        Ok(state)
    }

    fn uncovered(&self) -> bool {
        let covered = self.log.state().last_checkpoint.map_or(0, |c| c.tree_size);
        self.log.size() > covered
    }

    fn save_session(&mut self, out: &mut Rows<'_>, session: &str) -> Result<()> {
        if let Some(chain) = self.sessions.get_mut(session)
            && chain.dirty
        {
            out.write(Row::SessionEnd {
                session_id: session.to_owned(),
                last_seq: chain.last_seq,
            })?;
            chain.dirty = false;
        }
        Ok(())
    }

    fn call(&mut self, out: &mut Rows<'_>, decided: &Decided) -> Result<()> {
        let Decided { call: d, prepared } = decided;
        let facts = d.scope.facts();
        let scope_hash = d.scope.facts_hash();
        let Prepared {
            args_hash,
            input,
            input_hash,
            head,
        } = prepared
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{}: {e}", d.op))?;
        self.parents.clear();
        let known = match self.sessions.get_mut(&facts.session_id) {
            Some(chain) => {
                self.parents.push(chain.last);
                self.parents.append(&mut chain.causes);
                true
            }
            None => false,
        };
        let draft = DraftRef {
            session_id: Some(&facts.session_id),
            task_id: Some(&facts.task_id),
            capability: &facts.capability,
            call: d.op.name(),
            args_hash: *args_hash,
            input_hash: *input_hash,
            verdict: d.verdict,
            reason_code: d.reason,
            risk: d.risk,
            policy_hash: d.scope.policy_hash(),
            parents: &self.parents,
            timestamp: stamp(&mut self.stamp, d.at_ms),
        };
        let (parent, seq) = try_store(
            &mut self.log,
            &mut self.slot,
            out,
            draft,
            Some(head),
            input,
            d.at_ms,
            false,
        )??;
        if !known {
            // A governor whose session was not opened here: keep its facts
            // so packs can replay it.
            let facts_bytes = hcp_contracts::jcs::canonical_bytes(facts)
                .map_err(|e| anyhow::anyhow!("session facts: {e}"))?;
            out.write(session_row(facts, &scope_hash, facts_bytes, seq))?;
        }
        if let Some(proposal) = &d.proposal
            && d.verdict == hcp_receipts::Verdict::Allow
        {
            self.threads.insert(
                proposal.to_string(),
                Thread {
                    session: facts.session_id.clone(),
                    parents: vec![parent],
                },
            );
        }
        let chain = Chain {
            last: parent,
            last_seq: seq,
            dirty: known,
            causes: Vec::new(),
        };
        match self.sessions.get_mut(&facts.session_id) {
            Some(c) => *c = chain,
            None => {
                self.sessions.insert(facts.session_id.clone(), chain);
            }
        }
        Ok(())
    }

    fn append(&mut self, out: &mut Rows<'_>, e: Entry) -> Result<Result<Parent, LogError>> {
        let field = |m: String| LogError::Field {
            host_id: self.log.state().host_id.clone(),
            reason: m,
        };
        let args_hash = match Digest::of_canonical(&e.args) {
            Ok(h) => h,
            Err(m) => return Ok(Err(field(format!("args: {m}")))),
        };
        // Canonical already (made by whoever drafted the entry).
        let input = e.input.into_bytes();
        let mut parents = e.parents.clone();
        if let Some(follows) = &e.follows {
            match self.threads.get(&follows.proposal) {
                Some(t) => parents.extend(t.parents.iter().copied()),
                None => {
                    return Ok(Err(field(format!(
                        "no receipt of this process records proposal {:?} (its hid.propose call)",
                        follows.proposal
                    ))));
                }
            }
        }
        let at_ms = now_ms();
        let input_hash = Digest::of(&input);
        let input = stored_input(out.db, e.task_id.as_deref(), e.verdict, &e.call, input);
        let draft = DraftRef {
            session_id: e.session_id.as_deref(),
            task_id: e.task_id.as_deref(),
            capability: &e.capability,
            call: &e.call,
            args_hash,
            input_hash,
            verdict: e.verdict,
            reason_code: &e.reason_code,
            risk: e.risk,
            policy_hash: e.policy_hash,
            parents: &parents,
            timestamp: stamp(&mut self.stamp, at_ms),
        };
        let stored = try_store(
            &mut self.log,
            &mut self.slot,
            out,
            draft,
            None,
            &input,
            at_ms,
            true,
        )?;
        if let (Ok((parent, _)), Some(follows)) = (&stored, &e.follows) {
            if follows.last {
                self.threads.remove(&follows.proposal);
            } else if let Some(t) = self.threads.get_mut(&follows.proposal) {
                t.parents.push(*parent);
            }
        }
        if stored.is_ok() {
            if let Some(manifest) = e.manifest {
                out.write(Row::Manifest {
                    capability: e.capability,
                    manifest,
                })?;
            }
            if let Some(sources) = e.policy_sources {
                out.write(Row::Policy {
                    hash: e.policy_hash.to_string(),
                    sources,
                })?;
            }
        }
        Ok(stored.map(|(p, _)| p))
    }

    fn open(&mut self, out: &mut Rows<'_>, o: &Open) -> Result<Parent> {
        let facts_hash = Digest::of(&o.facts_bytes);
        let draft = DraftRef {
            session_id: Some(&o.facts.session_id),
            task_id: Some(&o.facts.task_id),
            capability: &o.facts.capability,
            call: pep::input::CALL_SESSION_OPEN,
            args_hash: facts_hash,
            input_hash: Digest::of(&o.input),
            verdict: o.decision.verdict,
            reason_code: o.decision.reason,
            risk: o.facts.risk_level,
            policy_hash: o.policy_hash,
            parents: &o.causes,
            timestamp: stamp(&mut self.stamp, o.at_ms),
        };
        // A refused opening is a host fault.
        let (parent, seq) = try_store(
            &mut self.log,
            &mut self.slot,
            out,
            draft,
            None,
            &Input::Raw(o.input.clone()),
            o.at_ms,
            true,
        )??;
        out.write(session_row(
            &o.facts,
            &facts_hash,
            o.facts_bytes.clone(),
            seq,
        ))?;
        out.write(Row::Policy {
            hash: o.policy_hash.to_string(),
            sources: o.policy_sources.clone(),
        })?;
        out.write(Row::Manifest {
            capability: o.facts.capability.clone(),
            manifest: o.manifest.clone(),
        })?;
        self.sessions.insert(
            o.facts.session_id.clone(),
            Chain {
                last: parent,
                last_seq: seq,
                dirty: false,
                causes: o.causes.clone(),
            },
        );
        Ok(parent)
    }

    /// A checkpoint over every receipt not yet covered by one.
    fn seal(&mut self, out: &mut Rows<'_>) -> Result<()> {
        if self.uncovered() {
            let at = rfc3339_unix_ms(now_ms());
            let cp = self.log.checkpoint(&at)?;
            out.write(checkpoint_row(&cp)?)?;
        }
        Ok(())
    }
}

/// The text of `at_ms`, rendered once per distinct millisecond into
/// `stamp`.
fn stamp(stamp: &mut (u64, String), at_ms: u64) -> &str {
    if stamp.0 != at_ms {
        *stamp = (at_ms, rfc3339_unix_ms(at_ms));
    }
    &stamp.1
}

/// Appends a draft to the log into `slot` and stores the receipt (and
/// checkpoint). The inner error is the log refusing the draft (nothing
/// changed); the outer one a failure to store after the log moved on.
/// `mark`: index the receipt by task and session (the gate's and the
/// sessions' receipts; a host call's is found through its session's
/// range). `at_ms`: the milliseconds the draft's timestamp was made from.
/// `head`: the receipt's start hashed ahead ([`Head`]).
#[expect(
    clippy::too_many_arguments,
    reason = "one receipt: the log and slot it is made in, its rows, what it is made of"
)]
fn try_store(
    log: &mut HostLog,
    slot: &mut Receipt,
    out: &mut Rows<'_>,
    draft: DraftRef<'_>,
    head: Option<&Head>,
    input: &Input,
    at_ms: u64,
    mark: bool,
) -> Result<Result<(Parent, u64), LogError>> {
    let placed = match log.append_into_after(draft, slot, head) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    let r = &*slot;
    if mark {
        out.write(Row::Mark {
            seq: r.seq,
            task_id: r.task_id.clone(),
            session_id: r.session_id.clone(),
            call: r.call.clone(),
        })?;
    }
    out.receipt(placed.hash, r, input, at_ms)?;
    if let Some(cp) = &placed.checkpoint {
        out.write(checkpoint_row(cp)?)?;
    }
    Ok(Ok((
        Parent {
            hash: placed.hash,
            lamport: r.lamport,
        },
        r.seq,
    )))
}

/// How an entry's canonical decision input `input` is stored: an admitted
/// task's, whose `submit` is the payload its row in `tasks` keeps, as the
/// bytes around it ([`crate::submission`]); any other whole. A row that
/// cannot be read leaves the input whole (the receipt is never refused for
/// it).
fn stored_input(
    db: &Connection,
    task: Option<&str>,
    verdict: Verdict,
    call: &str,
    input: Vec<u8>,
) -> Input {
    let Some(task) = task.filter(|_| verdict == Verdict::Allow && call == CALL_ADMISSION) else {
        return Input::Raw(input);
    };
    let payload = match crate::submission::payload(db, task) {
        Ok(Some(p)) => p,
        Ok(None) | Err(_) => return Input::Raw(input),
    };
    match crate::submission::find(&input, &payload) {
        Some(at) => Input::Spliced {
            bytes: input,
            at,
            len: payload.len(),
        },
        None => Input::Raw(input),
    }
}

/// Writes rows on a connection, gathering receipts into blocks
/// ([`super::block`]): a block is inserted when it is full and at
/// [`Rows::finish`], in the batch's transaction.
struct Rows<'a> {
    db: &'a Connection,
    block: BlockWriter,
}

impl<'a> Rows<'a> {
    fn new(db: &'a Connection) -> Self {
        Self {
            db,
            block: BlockWriter::new(),
        }
    }

    fn write(&mut self, row: Row) -> Result<()> {
        row.insert(self.db)
    }

    /// Gathers a receipt into the block. `at_ms`: the milliseconds its
    /// timestamp was made from.
    fn receipt(&mut self, hash: Digest, r: &Receipt, input: &Input, at_ms: u64) -> Result<()> {
        self.block.push(hash, r, input, Some(at_ms))?;
        if self.block.is_full() {
            self.insert_block()?;
        }
        Ok(())
    }

    fn insert_block(&mut self) -> Result<()> {
        if let Some(b) = self.block.take() {
            self.db
                .prepare_cached(
                    "INSERT INTO receipt_blocks (first_seq, count, hashes, data) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![
                    i64::try_from(b.first_seq)?,
                    i64::try_from(b.count)?,
                    b.hashes,
                    b.data
                ])?;
        }
        Ok(())
    }

    /// Inserts the receipts still gathered.
    fn finish(&mut self) -> Result<()> {
        self.insert_block()
    }
}

/// One row of the receipt tables.
enum Row {
    Mark {
        seq: u64,
        task_id: Option<String>,
        session_id: Option<String>,
        call: String,
    },
    Checkpoint {
        tree_size: u64,
        body: Vec<u8>,
    },
    Session {
        session_id: String,
        task_id: String,
        capability: String,
        facts_hash: String,
        facts: Vec<u8>,
        seq: u64,
    },
    /// A session's range extended to `last_seq`.
    SessionEnd {
        session_id: String,
        last_seq: u64,
    },
    Policy {
        hash: String,
        sources: std::sync::Arc<str>,
    },
    Manifest {
        capability: String,
        manifest: Vec<u8>,
    },
    /// The log's state.
    State(String),
    /// A write of the store's own rows (see [`super::channel::StoreWrite`]).
    Store(super::channel::StoreWrite),
}

impl Row {
    fn insert(self, tx: &Connection) -> Result<()> {
        let row = match self {
            Row::Store(write) => return write(tx),
            row => row,
        };
        match &row {
            Row::Mark {
                seq,
                task_id,
                session_id,
                call,
            } => tx
                .prepare_cached(
                    "INSERT INTO receipt_marks (seq, task_id, session_id, call) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![*seq as i64, task_id, session_id, call])?,
            Row::Checkpoint { tree_size, body } => tx
                .prepare_cached(
                    "INSERT INTO receipt_checkpoints (tree_size, body) VALUES (?1, ?2)",
                )?
                .execute(params![*tree_size as i64, body])?,
            Row::Session {
                session_id,
                task_id,
                capability,
                facts_hash,
                facts,
                seq,
            } => tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO receipt_sessions (session_id, task_id, capability, facts_hash, facts, first_seq, last_seq)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                )?
                .execute(params![
                    session_id,
                    task_id,
                    capability,
                    facts_hash,
                    facts,
                    *seq as i64
                ])?,
            Row::SessionEnd {
                session_id,
                last_seq,
            } => tx
                .prepare_cached(
                    "UPDATE receipt_sessions SET last_seq = ?2 WHERE session_id = ?1",
                )?
                .execute(params![session_id, *last_seq as i64])?,
            Row::Policy { hash, sources } => tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO policy_snapshots (policy_hash, sources) VALUES (?1, ?2)",
                )?
                .execute(params![hash, &**sources])?,
            Row::Manifest {
                capability,
                manifest,
            } => tx
                // Every admission names its manifest: the row is written
                // only when the manifest changed (a reinstall).
                .prepare_cached(
                    "INSERT INTO capability_manifests (capability, manifest) VALUES (?1, ?2)
                     ON CONFLICT (capability) DO UPDATE SET manifest = excluded.manifest
                     WHERE manifest IS NOT excluded.manifest",
                )?
                .execute(params![capability, manifest])?,
            Row::State(state) => tx
                .prepare_cached("UPDATE receipt_log SET state = ?1 WHERE id = 1")?
                .execute(params![state])?,
            Row::Store(_) => unreachable!("written above"),
        };
        Ok(())
    }
}

fn checkpoint_row(cp: &hcp_receipts::Checkpoint) -> Result<Row> {
    Ok(Row::Checkpoint {
        tree_size: cp.tree_size,
        body: cp.canonical_bytes()?,
    })
}

fn session_row(facts: &SessionFacts, hash: &Digest, bytes: Vec<u8>, seq: u64) -> Row {
    Row::Session {
        session_id: facts.session_id.clone(),
        task_id: facts.task_id.clone(),
        capability: facts.capability.clone(),
        facts_hash: hash.to_string(),
        facts: bytes,
        seq,
    }
}
