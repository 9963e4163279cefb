//! The receipt writer: one thread, one channel, group commit.

use crate::hostkey::HostIdentity;
use crate::store::Store;
use anyhow::{Context as _, Result};
use hcp_contracts::RiskLevel;
use hcp_policy::PolicySet;
use hcp_policy::pep::{self, Decision, Scope, SessionFacts};
use hcp_receipts::{Digest, Draft, HostLog, LogState, Parent, SigningPolicy, Verdict};
use hcp_sandbox::pep::{DecidedCall, VerdictSink, now_ms};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::str::FromStr as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Verdicts waiting for the writer before the PEP's `record` blocks.
const CHANNEL: usize = 1 << 16;
/// Most messages stored in one transaction.
const BATCH: usize = 8192;

/// A receipt the gate appends (admission, rejection, approval, ...).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The session, if one exists yet.
    pub session_id: Option<String>,
    /// The task.
    pub task_id: Option<String>,
    /// `name@version`.
    pub capability: String,
    /// What was decided, e.g. `gate.admission`.
    pub call: String,
    /// The arguments (their RFC 8785 SHA-256 is recorded).
    pub args: Value,
    /// The decision input, recorded for replay.
    pub input: Value,
    /// The verdict.
    pub verdict: Verdict,
    /// Its reason code.
    pub reason_code: String,
    /// Risk level.
    pub risk: RiskLevel,
    /// The policy it was decided under.
    pub policy_hash: Digest,
    /// Receipts it follows from.
    pub parents: Vec<Parent>,
}

/// A session the recorder opened.
#[derive(Debug, Clone)]
pub struct SessionOpened {
    /// The compiled scope, for the task's `PolicyGovernor`.
    pub scope: Arc<Scope>,
    /// The `session.open` receipt.
    pub parent: Parent,
}

/// The session's opening, for the writer.
struct Open {
    facts: SessionFacts,
    facts_bytes: Vec<u8>,
    input: Vec<u8>,
    at_ms: u64,
    decision: Decision,
    policy_hash: Digest,
    policy_sources: String,
    manifest: Vec<u8>,
    causes: Vec<Parent>,
}

enum Msg {
    Call(Box<DecidedCall>),
    Append(Box<Entry>, Sender<Result<Parent, String>>),
    Open(Box<Open>, Sender<Result<Parent, String>>),
    Close(String),
    Flush(Sender<Result<(), String>>),
    Stop,
}

/// Set once the writer cannot store receipts; from then on every PEP
/// decision fails closed.
#[derive(Debug, Default)]
struct Failure {
    set: AtomicBool,
    why: Mutex<Option<String>>,
}

impl Failure {
    fn set(&self, why: String) {
        let mut slot = self.why.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(why);
        self.set.store(true, Ordering::Release);
    }

    fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    fn why(&self) -> String {
        self.why
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| "the receipt writer stopped".into())
    }
}

/// The sink PEP governors record into.
struct Sink {
    tx: SyncSender<Msg>,
    failure: Arc<Failure>,
}

impl VerdictSink for Sink {
    fn record(&self, decided: DecidedCall) {
        if self.tx.send(Msg::Call(Box::new(decided))).is_err() {
            self.failure.set("the receipt writer stopped".into());
        }
    }

    fn healthy(&self) -> bool {
        !self.failure.is_set()
    }
}

/// The receipt pipeline of one data directory (see the module doc of
/// [`crate::evidence`]).
pub struct Recorder {
    tx: SyncSender<Msg>,
    failure: Arc<Failure>,
    thread: Option<JoinHandle<()>>,
    store: Arc<Store>,
    host_id: String,
    _lock: File,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("host_id", &self.host_id)
            .finish_non_exhaustive()
    }
}

fn open_db(dir: &Path) -> Result<Connection> {
    let path = dir.join("hcp.db");
    let db = Connection::open(&path).with_context(|| format!("database {}", path.display()))?;
    db.busy_timeout(std::time::Duration::from_secs(10))?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "FULL")?;
    Ok(db)
}

/// RFC 3339 (UTC, milliseconds) of a Unix time in milliseconds.
pub(crate) fn rfc3339(at_ms: u64) -> String {
    let nanos = i128::from(at_ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}

impl Recorder {
    /// Opens the receipt log of `store`'s data directory for `identity`,
    /// and starts the writer. A log left with receipts after its last
    /// checkpoint (a crash) is sealed with a checkpoint first.
    ///
    /// # Errors
    ///
    /// Another process writes receipts in this data directory; the stored
    /// log belongs to another host key or is inconsistent; the database
    /// fails.
    pub fn open(store: Arc<Store>, identity: HostIdentity, signing: SigningPolicy) -> Result<Self> {
        let dir = store.dir().to_path_buf();
        let lock_path = dir.join("receipts.lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("{}", lock_path.display()))?;
        lock.try_lock().map_err(|_| {
            anyhow::anyhow!(
                "{}: another host process is writing receipts in this data directory",
                dir.display()
            )
        })?;
        let db = open_db(&dir)?;
        let HostIdentity { key, host_id } = identity;
        let stored: Option<(String, String)> = db
            .query_row(
                "SELECT host_id, state FROM receipt_log WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let log = match stored {
            None => {
                let log = HostLog::new(&host_id, key, signing)?;
                db.execute(
                    "INSERT INTO receipt_log (id, host_id, public_key, state) VALUES (1, ?1, ?2, ?3)",
                    params![
                        host_id,
                        log.public_key().to_string(),
                        serde_json::to_string(log.state())?
                    ],
                )?;
                log
            }
            Some((stored_host, state)) => {
                if stored_host != host_id {
                    anyhow::bail!(
                        "{}: the receipts here were written by {stored_host}, but this host is {host_id} (its key changed)",
                        dir.display()
                    );
                }
                let state: LogState =
                    serde_json::from_str(&state).context("stored receipt log state")?;
                let head: Option<Vec<u8>> = db
                    .query_row(
                        "SELECT hash FROM receipts ORDER BY seq DESC LIMIT 1",
                        [],
                        |r| r.get(0),
                    )
                    .optional()?;
                if head.as_deref() != state.head.as_ref().map(|d| &d.0[..]) {
                    anyhow::bail!(
                        "{}: the receipt log's state does not end at its last stored receipt",
                        dir.display()
                    );
                }
                HostLog::resume(state, key, signing)?
            }
        };
        let failure = Arc::new(Failure::default());
        let mut writer = Writer {
            db,
            log,
            sessions: HashMap::new(),
            stamp: (u64::MAX, String::new()),
        };
        writer.seal_on_open()?;
        let (tx, rx) = sync_channel(CHANNEL);
        let thread = std::thread::Builder::new()
            .name("hcp-receipts".into())
            .spawn({
                let failure = failure.clone();
                move || writer.run(&rx, &failure)
            })?;
        Ok(Self {
            tx,
            failure,
            thread: Some(thread),
            store,
            host_id,
            _lock: lock,
        })
    }

    /// This host's id (`host-<key id>`).
    pub fn host_id(&self) -> &str {
        &self.host_id
    }

    /// The sink for the `PolicyGovernor`s of this host's tasks.
    pub fn sink(&self) -> Arc<dyn VerdictSink> {
        Arc::new(Sink {
            tx: self.tx.clone(),
            failure: self.failure.clone(),
        })
    }

    fn ask<T>(&self, make: impl FnOnce(Sender<Result<T, String>>) -> Msg) -> Result<T> {
        if self.failure.is_set() {
            anyhow::bail!("receipts: {}", self.failure.why());
        }
        let (tx, rx) = channel();
        self.tx
            .send(make(tx))
            .map_err(|_| anyhow::anyhow!("receipts: the writer stopped"))?;
        rx.recv()
            .map_err(|_| anyhow::anyhow!("receipts: the writer stopped"))?
            .map_err(|e| anyhow::anyhow!("receipts: {e}"))
    }

    /// Appends a receipt of the gate's; durable when this returns.
    ///
    /// # Errors
    ///
    /// The receipt breaks a rule of receipts, or cannot be stored.
    pub fn append(&self, entry: Entry) -> Result<Parent> {
        self.ask(|tx| Msg::Append(Box::new(entry), tx))
    }

    /// Opens a session: compiles its scope under `policy`, records the
    /// `session.open` receipt (parents: `causes`, e.g. the admission
    /// receipt) with the facts, the policy snapshot and the capability's
    /// `manifest` (bytes as written), durably.
    ///
    /// # Errors
    ///
    /// The session was refused (its facts do not compile, or it has
    /// expired): the refusal is recorded, and the task must not run. Or the
    /// receipt cannot be stored.
    pub fn open_session(
        &self,
        policy: &PolicySet,
        facts: SessionFacts,
        manifest: &[u8],
        causes: Vec<Parent>,
    ) -> Result<SessionOpened> {
        let at_ms = now_ms();
        let (scope, decision) = pep::input::open(policy, facts.clone(), at_ms);
        let open = Open {
            facts_bytes: hcp_contracts::jcs::canonical_bytes(&facts)
                .map_err(|e| anyhow::anyhow!("session facts: {e}"))?,
            input: pep::input::open_input(&facts, at_ms)
                .map_err(|e| anyhow::anyhow!("session facts: {e}"))?,
            facts,
            at_ms,
            policy_hash: Digest::from_str(policy.policy_hash())
                .map_err(|e| anyhow::anyhow!("policy hash: {e}"))?,
            policy_sources: serde_json::to_string(policy.sources())?,
            manifest: manifest.to_vec(),
            causes,
            decision: decision.clone(),
        };
        let parent = self.ask(|tx| Msg::Open(Box::new(open), tx))?;
        match scope {
            Ok(scope) if decision.allowed() => Ok(SessionOpened {
                scope: Arc::new(scope),
                parent,
            }),
            _ => anyhow::bail!("session refused ({}): {}", decision.reason, decision.message),
        }
    }

    /// Forgets a session's chain (its receipts stay).
    pub fn close_session(&self, session_id: &str) {
        let _ = self.tx.send(Msg::Close(session_id.to_owned()));
    }

    /// The barrier: returns when every verdict handed over before it is
    /// durable and covered by a signed checkpoint.
    ///
    /// # Errors
    ///
    /// Receipts could not be stored: the host must not answer as if they
    /// were.
    pub fn flush(&self) -> Result<()> {
        self.ask(Msg::Flush)
    }

    /// Records a message of a task (`task_submit.json`, its answer) for
    /// evidence packs.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn record_message(&self, task_id: &str, name: &str, body: &[u8]) -> Result<()> {
        self.store.db().execute(
            "INSERT OR REPLACE INTO task_messages (task_id, name, body) VALUES (?1, ?2, ?3)",
            params![task_id, name, body],
        )?;
        Ok(())
    }

    /// Flushes and stops the writer.
    ///
    /// # Errors
    ///
    /// As [`Recorder::flush`].
    pub fn close(mut self) -> Result<()> {
        let flushed = self.flush();
        self.stop();
        flushed
    }

    fn stop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = self.tx.send(Msg::Stop);
            let _ = thread.join();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last receipt of a session, and its stored range.
struct Chain {
    last: Parent,
    last_seq: u64,
    dirty: bool,
}

struct Writer {
    db: Connection,
    log: HostLog,
    sessions: HashMap<String, Chain>,
    /// The last timestamp formatted: calls come many to a millisecond.
    stamp: (u64, String),
}

type Reply = Box<dyn FnOnce(Result<(), String>)>;

impl Writer {
    fn run(mut self, rx: &Receiver<Msg>, failure: &Failure) {
        loop {
            let Ok(first) = rx.recv() else { return };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            let stop = batch.iter().any(|m| matches!(m, Msg::Stop));
            if failure.is_set() {
                let why = failure.why();
                for m in batch {
                    refuse(m, &why);
                }
            } else {
                let mut replies: Vec<Reply> = Vec::new();
                if let Err(e) = self.batch(batch, &mut replies) {
                    failure.set(format!("{e:#}"));
                    let why = failure.why();
                    for reply in replies {
                        reply(Err(why.clone()));
                    }
                } else {
                    for reply in replies {
                        reply(Ok(()));
                    }
                }
            }
            if stop {
                return;
            }
        }
    }

    fn timestamp(&mut self, at_ms: u64) -> String {
        if self.stamp.0 != at_ms {
            self.stamp = (at_ms, rfc3339(at_ms));
        }
        self.stamp.1.clone()
    }

    /// Stores one batch in one transaction; `replies` are answered after.
    fn batch(&mut self, batch: Vec<Msg>, replies: &mut Vec<Reply>) -> Result<()> {
        let tx = self.db.unchecked_transaction()?;
        let mut flush = false;
        for m in batch {
            match m {
                Msg::Call(d) => self.call(&tx, &d)?,
                Msg::Append(entry, reply) => {
                    // A draft the log refuses refuses only its own receipt.
                    let parent = match self.append(&tx, &entry)? {
                        Ok(p) => Ok(p),
                        Err(refused) => Err(refused.to_string()),
                    };
                    replies.push(Box::new(move |r: Result<(), String>| {
                        let _ = reply.send(r.and(parent));
                    }));
                }
                Msg::Open(open, reply) => {
                    let parent = self.open(&tx, &open)?;
                    replies.push(Box::new(move |r: Result<(), String>| {
                        let _ = reply.send(r.map(|()| parent));
                    }));
                }
                Msg::Close(session) => {
                    self.save_session(&tx, &session)?;
                    self.sessions.remove(&session);
                }
                Msg::Flush(reply) => {
                    flush = true;
                    replies.push(Box::new(move |r| {
                        let _ = reply.send(r);
                    }));
                }
                Msg::Stop => flush = true,
            }
        }
        let dirty: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, c)| c.dirty)
            .map(|(s, _)| s.clone())
            .collect();
        for session in dirty {
            self.save_session(&tx, &session)?;
        }
        if flush {
            self.seal(&tx)?;
        }
        tx.execute(
            "UPDATE receipt_log SET state = ?1 WHERE id = 1",
            params![serde_json::to_string(self.log.state())?],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn save_session(&mut self, tx: &Connection, session: &str) -> Result<()> {
        if let Some(chain) = self.sessions.get_mut(session)
            && chain.dirty
        {
            tx.prepare_cached("UPDATE receipt_sessions SET last_seq = ?2 WHERE session_id = ?1")?
                .execute(params![session, chain.last_seq as i64])?;
            chain.dirty = false;
        }
        Ok(())
    }

    /// Appends a draft and stores the receipt (and checkpoint). The inner
    /// error is the log refusing the draft (nothing changed); the outer one
    /// a failure to store after the log moved on.
    fn try_store(
        &mut self,
        tx: &Connection,
        draft: Draft,
        input: &[u8],
    ) -> Result<Result<(Parent, u64), hcp_receipts::log::LogError>> {
        let appended = match self.log.append(draft) {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let r = &appended.receipt;
        let body = r.canonical_bytes()?;
        tx.prepare_cached(
            "INSERT INTO receipts (seq, hash, session_id, task_id, body, input) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            r.seq as i64,
            &appended.hash.0[..],
            r.session_id,
            r.task_id,
            body,
            input
        ])?;
        if let Some(cp) = &appended.checkpoint {
            insert_checkpoint(tx, cp)?;
        }
        Ok(Ok((
            Parent {
                hash: appended.hash,
                lamport: r.lamport,
            },
            r.seq,
        )))
    }

    /// [`Writer::try_store`] where a refused draft is a host fault.
    fn store(&mut self, tx: &Connection, draft: Draft, input: &[u8]) -> Result<(Parent, u64)> {
        Ok(self.try_store(tx, draft, input)??)
    }

    fn call(&mut self, tx: &Connection, d: &DecidedCall) -> Result<()> {
        let facts = d.scope.facts();
        let scope_hash = d.scope.facts_hash();
        let (call_bytes, input) =
            pep::input::call_record(d.at_ms, &d.call, &d.counters, &scope_hash)
                .map_err(|e| anyhow::anyhow!("{}: {e}", d.call.op))?;
        let chain = self.sessions.get(&facts.session_id);
        let draft = Draft {
            session_id: Some(facts.session_id.clone()),
            task_id: Some(facts.task_id.clone()),
            capability: facts.capability.clone(),
            call: d.call.op.name().to_owned(),
            args_hash: Digest::of(&call_bytes),
            input_hash: Digest::of(&input),
            verdict: d.verdict,
            reason_code: d.reason.to_owned(),
            risk: d.risk,
            policy_hash: d.scope.policy_hash(),
            parents: chain.map(|c| vec![c.last]).unwrap_or_default(),
            timestamp: self.timestamp(d.at_ms),
        };
        let known = chain.is_some();
        let (parent, seq) = self.store(tx, draft, &input)?;
        if !known {
            // A governor whose session was not opened here: keep its facts
            // so packs can replay it.
            let facts_bytes = hcp_contracts::jcs::canonical_bytes(facts)
                .map_err(|e| anyhow::anyhow!("session facts: {e}"))?;
            insert_session(tx, facts, &scope_hash, &facts_bytes, seq)?;
        }
        self.sessions.insert(
            facts.session_id.clone(),
            Chain {
                last: parent,
                last_seq: seq,
                dirty: known,
            },
        );
        Ok(())
    }

    fn append(
        &mut self,
        tx: &Connection,
        e: &Entry,
    ) -> Result<Result<Parent, hcp_receipts::log::LogError>> {
        let field = |m: String| hcp_receipts::log::LogError::Field {
            host_id: self.log.state().host_id.clone(),
            reason: m,
        };
        let args_hash = match Digest::of_canonical(&e.args) {
            Ok(h) => h,
            Err(m) => return Ok(Err(field(format!("args: {m}")))),
        };
        let input = match hcp_contracts::jcs::canonical_bytes(&e.input) {
            Ok(i) => i,
            Err(m) => return Ok(Err(field(format!("input: {m}")))),
        };
        let at_ms = now_ms();
        let draft = Draft {
            session_id: e.session_id.clone(),
            task_id: e.task_id.clone(),
            capability: e.capability.clone(),
            call: e.call.clone(),
            args_hash,
            input_hash: Digest::of(&input),
            verdict: e.verdict,
            reason_code: e.reason_code.clone(),
            risk: e.risk,
            policy_hash: e.policy_hash,
            parents: e.parents.clone(),
            timestamp: self.timestamp(at_ms),
        };
        Ok(self.try_store(tx, draft, &input)?.map(|(p, _)| p))
    }

    fn open(&mut self, tx: &Connection, o: &Open) -> Result<Parent> {
        let facts_hash = Digest::of(&o.facts_bytes);
        let draft = Draft {
            session_id: Some(o.facts.session_id.clone()),
            task_id: Some(o.facts.task_id.clone()),
            capability: o.facts.capability.clone(),
            call: pep::input::CALL_SESSION_OPEN.to_owned(),
            args_hash: facts_hash,
            input_hash: Digest::of(&o.input),
            verdict: o.decision.verdict,
            reason_code: o.decision.reason.to_owned(),
            risk: o.facts.risk_level,
            policy_hash: o.policy_hash,
            parents: o.causes.clone(),
            timestamp: self.timestamp(o.at_ms),
        };
        let (parent, seq) = self.store(tx, draft, &o.input)?;
        insert_session(tx, &o.facts, &facts_hash, &o.facts_bytes, seq)?;
        tx.prepare_cached(
            "INSERT OR IGNORE INTO policy_snapshots (policy_hash, sources) VALUES (?1, ?2)",
        )?
        .execute(params![o.policy_hash.to_string(), o.policy_sources])?;
        tx.prepare_cached(
            "INSERT OR REPLACE INTO capability_manifests (capability, manifest) VALUES (?1, ?2)",
        )?
        .execute(params![o.facts.capability, o.manifest])?;
        self.sessions.insert(
            o.facts.session_id.clone(),
            Chain {
                last: parent,
                last_seq: seq,
                dirty: false,
            },
        );
        Ok(parent)
    }

    /// A checkpoint over every receipt not yet covered by one.
    fn seal(&mut self, tx: &Connection) -> Result<()> {
        let covered = self.log.state().last_checkpoint.map_or(0, |c| c.tree_size);
        if self.log.size() > covered {
            let at = rfc3339(now_ms());
            let cp = self.log.checkpoint(&at)?;
            insert_checkpoint(tx, &cp)?;
        }
        Ok(())
    }

    fn seal_on_open(&mut self) -> Result<()> {
        let tx = self.db.unchecked_transaction()?;
        let covered = self.log.state().last_checkpoint.map_or(0, |c| c.tree_size);
        if self.log.size() > covered {
            self.seal(&tx)?;
            tx.execute(
                "UPDATE receipt_log SET state = ?1 WHERE id = 1",
                params![serde_json::to_string(self.log.state())?],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

fn insert_checkpoint(tx: &Connection, cp: &hcp_receipts::Checkpoint) -> Result<()> {
    tx.prepare_cached("INSERT INTO receipt_checkpoints (tree_size, body) VALUES (?1, ?2)")?
        .execute(params![cp.tree_size as i64, cp.canonical_bytes()?])?;
    Ok(())
}

fn insert_session(
    tx: &Connection,
    facts: &SessionFacts,
    hash: &Digest,
    bytes: &[u8],
    seq: u64,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO receipt_sessions (session_id, task_id, capability, facts_hash, facts, first_seq, last_seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
    )?
    .execute(params![
        facts.session_id,
        facts.task_id,
        facts.capability,
        hash.to_string(),
        bytes,
        seq as i64
    ])?;
    Ok(())
}

fn refuse(m: Msg, why: &str) {
    let why = why.to_owned();
    match m {
        Msg::Append(_, reply) | Msg::Open(_, reply) => {
            let _ = reply.send(Err(why));
        }
        Msg::Flush(reply) => {
            let _ = reply.send(Err(why));
        }
        Msg::Call(_) | Msg::Close(_) | Msg::Stop => {}
    }
}
