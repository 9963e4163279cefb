//! The receipt pipeline's handle: the channel to the writer thread
//! ([`super::writer`]), and what the gate and the task engine call.

use super::channel::{Entry, Failure, Msg, Open, Spent, ToWriter};
use super::writer::Writer;
use crate::hostkey::HostIdentity;
use anyhow::{Context as _, Result};
use hcp_policy::PolicySet;
use hcp_policy::pep::{self, Decision, SessionFacts};
use hcp_receipts::{Digest, HostLog, LogState, Parent, SigningPolicy, Verdict};
use hcp_sandbox::pep::{DecidedCall, VerdictSink};
use hcp_store::Store;
use rusqlite::{Connection, params};
use std::path::Path;
use std::str::FromStr as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Verdicts waiting for the writer before the PEP's `record` blocks.
const CHANNEL: usize = 1 << 16;

/// What a sealed message of `task_messages` is bound to.
fn message_binding(task_id: &str, name: &str) -> String {
    format!("task_messages:{task_id}:{name}")
}

/// A body of `task_messages` as it was recorded: opened when it rests
/// sealed ([`Recorder::record_message`]).
///
/// # Errors
///
/// A sealed body that does not open with this host's data key.
pub(crate) fn open_message(
    key: &hcp_store::seal::DataKey,
    task_id: &str,
    name: &str,
    body: Vec<u8>,
) -> Result<Vec<u8>> {
    if !hcp_store::seal::is_sealed(&body) {
        return Ok(body);
    }
    key.open(&body, &message_binding(task_id, name))
        .with_context(|| format!("task {task_id}: message {name}"))
}

/// The sink PEP governors record into.
struct Sink {
    tx: ToWriter,
    failure: Arc<Failure>,
    spent: Arc<Spent>,
    /// The log's host and signing policy, for the receipts' heads.
    host_id: Arc<str>,
    signing: Arc<SigningPolicy>,
    /// What a call's receipt withholds of its arguments.
    withhold: Arc<hcp_store::withhold::Withhold>,
    /// The host's metrics: every decided call, counted as it is handed over.
    metrics: Arc<hcp_store::metrics::Metrics>,
}

impl VerdictSink for Sink {
    fn record(&self, decided: DecidedCall<'_>) {
        self.metrics.host_call(
            decided.call.op.interface(),
            decided.verdict.as_str(),
            decided.reason,
        );
        // The call's canonical form and the hashes of its arguments and
        // decision input are made here, on the deciding thread, beside the
        // writer's chain of receipts, from the call as the guest made it:
        // its text is not copied for the writer.
        // A spent message, if one is back from the writer, is used again
        // (its box and its call's buffer) rather than freed here while a
        // new one is allocated.
        let mut spare = self.spent.reuse();
        let buffer = match spare.as_deref_mut() {
            Some(super::channel::Decided {
                prepared: Ok(p), ..
            }) => p.take_buffer(),
            _ => Vec::new(),
        };
        let prepared = super::block::prepare(
            &decided,
            buffer,
            &self.host_id,
            &self.signing,
            &self.withhold,
        );
        let proposal = match &decided.call.args {
            pep::Args::Hid(args) if !args.proposal.is_empty() => Some(Box::from(&*args.proposal)),
            _ => None,
        };
        let decided = super::channel::Decided {
            call: super::channel::Recorded {
                scope: decided.scope,
                op: decided.call.op,
                proposal,
                at_ms: decided.at_ms,
                verdict: decided.verdict,
                reason: decided.reason,
                risk: decided.risk,
            },
            prepared,
        };
        let message = match spare {
            Some(mut spare) => {
                *spare = decided;
                spare
            }
            None => Box::new(decided),
        };
        if self.tx.send(Msg::Call(message)).is_err() {
            self.failure
                .set("the receipt writer stopped".into(), false, Vec::new());
        }
    }

    fn healthy(&self) -> bool {
        !self.failure.is_set()
    }
}

/// A handle that appends receipts of the host's own decisions (the HID
/// mediator's), for parts of the host that outlive a borrow of the
/// [`Recorder`].
#[derive(Clone)]
pub struct Appender {
    tx: ToWriter,
    failure: Arc<Failure>,
}

impl std::fmt::Debug for Appender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appender").finish_non_exhaustive()
    }
}

impl Appender {
    /// Appends `entry` and a checkpoint over every receipt so far, in one
    /// transaction: durable and covered by a signed checkpoint on return.
    ///
    /// # Errors
    ///
    /// The receipt breaks a rule of receipts, or cannot be stored.
    pub fn append_sealed(&self, entry: Entry) -> Result<Parent> {
        self.append_sealed_with(entry, None)
    }

    /// [`Appender::append_sealed`], and `write` made in the transaction
    /// that stores the receipt and the checkpoint covering it, after the
    /// receipt (and only if the log takes the receipt): one commit, durable
    /// before this returns.
    ///
    /// # Errors
    ///
    /// As [`Appender::append_sealed`]; `write` failing fails its batch.
    pub fn append_sealed_with(
        &self,
        entry: Entry,
        write: Option<super::StoreWrite>,
    ) -> Result<Parent> {
        ask(&self.tx, &self.failure, |tx| {
            Msg::Sealed(Box::new(entry), tx, write)
        })
    }

    /// The barrier ([`Recorder::flush`]): returns when every receipt handed
    /// to the writer before it, by any part of the host, is stored.
    ///
    /// # Errors
    ///
    /// Receipts could not be stored.
    pub fn flush(&self) -> Result<()> {
        ask(&self.tx, &self.failure, |tx| Msg::Flush(tx, None))
    }
}

/// Sends the writer the message `make` builds around a reply channel, and
/// waits for the reply.
fn ask<T>(
    writer: &ToWriter,
    failure: &Failure,
    make: impl FnOnce(Sender<Result<T, String>>) -> Msg,
) -> Result<T> {
    let stopped = || anyhow::anyhow!("receipts: the writer stopped");
    let (tx, rx) = channel();
    writer.send(make(tx)).map_err(|_| stopped())?;
    rx.recv()
        .map_err(|_| stopped())?
        .map_err(|e| failure.error(e))
}

/// The receipt pipeline of one data directory (see the module doc of
/// [`crate`]).
pub struct Recorder {
    tx: ToWriter,
    failure: Arc<Failure>,
    thread: Option<JoinHandle<()>>,
    store: Arc<Store>,
    host_id: String,
    /// The log's Lamport clock as last stored.
    clock: Arc<AtomicU64>,
    /// Host calls' messages the writer is done with, for sinks to free.
    spent: Arc<Spent>,
    /// The log's signing policy, for sinks to know which receipts it signs.
    signing: Arc<SigningPolicy>,
}

/// How far ahead of the host's own clock a received Lamport clock may be
/// (2^32): a caller brings it, so it is any number the caller likes, and
/// no single message moves the clock by more. A clock at or below the
/// host's own (one it sent, for one) is always taken: it changes nothing.
/// (Bounded at an absolute 2^48 instead, one message with exactly 2^48
/// moved the clock there, and every answer after it carried a clock the
/// host itself refused when a caller sent it back.)
pub const MAX_LAMPORT_LEAD: u64 = 1 << 32;

/// The largest Lamport clock the host moves to from outside (2^52).
/// Receipts' clocks end at 2^53 − 1 (their integers stay exact in JSON),
/// and the log moves to the larger of its clock and the one received, so a
/// clock near that end would leave the host no receipt to make, for good
/// (the stored log keeps it). Up to 2^52 leaves it 2^52 of its own, and
/// reaching 2^52 from 0 takes a million messages each 2^32 ahead.
pub const MAX_RECEIVED_LAMPORT: u64 = 1 << 52;

/// A Lamport clock from outside the host that it does not take: more than
/// [`MAX_LAMPORT_LEAD`] ahead of the host's own, or above
/// [`MAX_RECEIVED_LAMPORT`].
#[derive(Debug, thiserror::Error)]
#[error(
    "a Lamport clock brought from another host may be at most 2^32 (4294967296) ahead of this \
     host's ({own}) and at most 2^52; got {remote}"
)]
pub struct ClockOutOfRange {
    /// The clock received.
    pub remote: u64,
    /// The host's clock then.
    pub own: u64,
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
    let mut db = Connection::open(&path).with_context(|| format!("database {}", path.display()))?;
    hcp_store::busy::wait_for_lock(&mut db, hcp_store::busy::LOCK_WAIT)?;
    db.set_prepared_statement_cache_capacity(hcp_store::STATEMENT_CACHE);
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "FULL")?;
    // A batch holds up to thousands of receipts: keep its pages in memory
    // until the commit (instead of spilling them to the WAL mid-transaction),
    // and checkpoint the WAL less often (or leave it to the store's thread,
    // below).
    db.pragma_update(None, "cache_size", -65_536)?;
    db.pragma_update(None, "wal_autocheckpoint", 8_192)?;
    Ok(db)
}

impl Recorder {
    /// Opens the receipt log of `store`'s data directory for `identity`,
    /// and starts the writer. A log left with receipts after its last
    /// checkpoint (a process that stopped) is sealed with a checkpoint
    /// first. Other processes may write the same log at the same time
    /// (see [`super::writer`]).
    ///
    /// # Errors
    ///
    /// The stored log belongs to another host key or is inconsistent; the
    /// database fails.
    pub fn open(store: Arc<Store>, identity: HostIdentity, signing: SigningPolicy) -> Result<Self> {
        let dir = store.dir().to_path_buf();
        let mut db = open_db(&dir)?;
        store.watch_wal(&mut db)?;
        let HostIdentity { key, host_id } = identity;
        let empty = LogState {
            host_id: host_id.clone(),
            lamport: 0,
            head: None,
            tree: hcp_receipts::merkle::Frontier::default(),
            last_checkpoint: None,
        };
        // One transaction: another host on this data directory may commit
        // receipts meanwhile, and the log's state and its last receipt are
        // compared below as of one moment.
        let opening = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        opening.prepare_cached(
            "INSERT OR IGNORE INTO receipt_log (id, host_id, public_key, state) VALUES (1, ?1, ?2, ?3)")?.execute(
            params![
                host_id,
                key.public().to_string(),
                serde_json::to_string(&empty)?
            ],
        )?;
        let (stored_host, saved): (String, String) = opening
            .prepare_cached("SELECT host_id, state FROM receipt_log WHERE id = 1")?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let head = hcp_store::receipt_hashes::last(&opening)?.map(|(_, hash)| hash);
        opening.commit()?;
        if stored_host != host_id {
            anyhow::bail!(
                "{}: the receipts here were written by {stored_host}, but this host is {host_id} (its key changed)",
                dir.display()
            );
        }
        let state: LogState = serde_json::from_str(&saved).context("stored receipt log state")?;
        if head != state.head {
            anyhow::bail!(
                "{}: the receipt log's state does not end at its last stored receipt",
                dir.display()
            );
        }
        let sinks_signing = Arc::new(signing.clone());
        let log = HostLog::resume(state, key, signing)?;
        let failure = Arc::new(Failure::default());
        let clock = Arc::new(AtomicU64::new(0));
        let spent = Arc::new(Spent::default());
        let mut writer = Writer::new(
            db,
            log,
            saved,
            &dir,
            clock.clone(),
            spent.clone(),
            store.metrics().clone(),
        );
        writer.seal_on_open()?;
        let (tx, rx) = sync_channel(CHANNEL);
        let thread = std::thread::Builder::new()
            .name("hcp-receipts".into())
            .spawn({
                let failure = failure.clone();
                move || writer.run(&rx, &failure)
            })?;
        let tx = ToWriter::new(tx);
        tx.started(thread.thread().clone());
        Ok(Self {
            tx,
            failure,
            thread: Some(thread),
            store,
            host_id,
            clock,
            spent,
            signing: sinks_signing,
        })
    }

    /// The host's Lamport clock: that of its last stored receipt (or one
    /// received since). Answers carry it, so that a caller can hand it to
    /// another host.
    pub fn lamport(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }

    /// Moves the clock past `remote`, a clock a caller brought from another
    /// host: every receipt recorded after this returns (the admission of
    /// the message that brought it, for one) has a larger clock.
    ///
    /// # Errors
    ///
    /// `remote` is ahead of this host's clock by more than
    /// [`MAX_LAMPORT_LEAD`], or above [`MAX_RECEIVED_LAMPORT`]
    /// ([`ClockOutOfRange`]: never a clock at or below this host's own);
    /// the writer stopped.
    pub fn observe_lamport(&self, remote: u64) -> Result<()> {
        let own = self.lamport();
        if remote <= own {
            return Ok(());
        }
        if remote - own > MAX_LAMPORT_LEAD || remote > MAX_RECEIVED_LAMPORT {
            return Err(ClockOutOfRange { remote, own }.into());
        }
        self.tx
            .send(Msg::Observe(remote))
            .map_err(|_| anyhow::anyhow!("receipts: the writer stopped"))
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
            spent: self.spent.clone(),
            host_id: Arc::from(self.host_id.as_str()),
            signing: self.signing.clone(),
            withhold: self.store.withhold().clone(),
            metrics: self.store.metrics().clone(),
        })
    }

    /// Hands a message to the writer and waits for its answer. While the
    /// writer fails, it is tried all the same: the first that is stored
    /// ends the failure.
    fn ask<T>(&self, make: impl FnOnce(Sender<Result<T, String>>) -> Msg) -> Result<T> {
        ask(&self.tx, &self.failure, make)
    }

    /// A new store in `data` and its recorder, with a new host key (tests).
    #[cfg(test)]
    pub(crate) fn for_tests(data: &std::path::Path) -> (Arc<Store>, Self) {
        let store = Arc::new(Store::open(data).expect("store"));
        let key = hcp_receipts::HostKey::generate().expect("key");
        let host_id = format!("host-{}", key.key_id());
        let recorder = Self::open(
            store.clone(),
            crate::hostkey::HostIdentity { key, host_id },
            hcp_receipts::SigningPolicy::default(),
        )
        .expect("recorder");
        (store, recorder)
    }

    /// Appends a receipt of the gate's; durable when this returns.
    ///
    /// # Errors
    ///
    /// The receipt breaks a rule of receipts, or cannot be stored.
    pub fn append(&self, entry: Entry) -> Result<Parent> {
        self.ask(|tx| Msg::Append(Box::new(entry), tx))
    }

    /// [`Recorder::append`], and a checkpoint over every receipt so far in
    /// the same transaction: for decisions the host answers right away.
    ///
    /// # Errors
    ///
    /// As [`Recorder::append`].
    pub fn append_sealed(&self, entry: Entry) -> Result<Parent> {
        self.appender().append_sealed(entry)
    }

    /// [`Appender::append_sealed_with`].
    ///
    /// # Errors
    ///
    /// As [`Appender::append_sealed_with`].
    pub fn append_sealed_with(&self, entry: Entry, write: super::StoreWrite) -> Result<Parent> {
        self.appender().append_sealed_with(entry, Some(write))
    }

    /// A handle for [`Appender::append_sealed`].
    pub fn appender(&self) -> Appender {
        Appender {
            tx: self.tx.clone(),
            failure: self.failure.clone(),
        }
    }

    /// The receipts that admitted a task (its ALLOW admission and
    /// approval), as parents for the receipts that follow from them.
    ///
    /// # Errors
    ///
    /// The database fails, or a stored receipt does not read back.
    pub fn task_causes(&self, task_id: &str) -> Result<Vec<Parent>> {
        let db = self.store.db();
        let seqs: Vec<i64> = db
            .prepare_cached(
                "SELECT seq FROM receipt_marks WHERE task_id = ?1 AND call IN (?2, ?3) ORDER BY seq",
            )?
            .query_map(
                params![
                    task_id,
                    pep::gate::CALL_ADMISSION,
                    pep::gate::CALL_APPROVAL
                ],
                |r| r.get(0),
            )?
            .collect::<rusqlite::Result<_>>()?;
        let mut causes = Vec::new();
        for seq in seqs {
            let stored = super::stored::get(&db, u64::try_from(seq)?)?
                .with_context(|| format!("receipt {seq} is marked but not stored"))?;
            if stored.receipt.verdict == Verdict::Allow {
                causes.push(Parent {
                    hash: stored.hash,
                    lamport: stored.receipt.lamport,
                });
            }
        }
        Ok(causes)
    }

    /// Records a session's opening as the engine decided it
    /// (`hcp::engine`'s session): the `session.open` receipt (parents:
    /// `causes`, e.g. the admission receipt) with the facts, the decision
    /// taken at `at_ms`, the policy snapshot and the capability's
    /// `manifest` (bytes as written), durably. Decides nothing.
    ///
    /// # Errors
    ///
    /// The facts cannot be encoded, or the receipt cannot be stored.
    pub fn record_session_open(
        &self,
        policy: &PolicySet,
        facts: SessionFacts,
        at_ms: u64,
        decision: &Decision,
        manifest: &[u8],
        causes: Vec<Parent>,
    ) -> Result<Parent> {
        let open = session_open(policy, facts, at_ms, decision, manifest, causes, true)?;
        self.ask(|tx| Msg::Open(Box::new(open), tx))
    }

    /// [`Recorder::record_session_open`] without waiting: the receipt goes
    /// to the writer ahead of the session's host calls and is stored with
    /// them. The caller must flush ([`Recorder::flush`] or
    /// [`Recorder::flush_with`]) before it answers, and fail the task when
    /// the receipt (or any of the session's) was lost
    /// ([`Recorder::session_lost`], or `flush_with` leaving its write out).
    ///
    /// # Errors
    ///
    /// The facts cannot be encoded, or the writer stopped.
    pub fn queue_session_open(
        &self,
        policy: &PolicySet,
        facts: SessionFacts,
        at_ms: u64,
        decision: &Decision,
        manifest: &[u8],
        causes: Vec<Parent>,
    ) -> Result<()> {
        let open = session_open(policy, facts, at_ms, decision, manifest, causes, false)?;
        // Nobody waits for the answer: a failed batch marks the session
        // lost (see `Failure`), which the runner checks before answering.
        let (reply, _) = channel();
        self.tx
            .send(Msg::Open(Box::new(open), reply))
            .map_err(|_| anyhow::anyhow!("receipts: the writer stopped"))
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
        self.ask(|tx| Msg::Flush(tx, None))
    }

    /// [`Recorder::flush`], and `write` made in the flush's transaction,
    /// after every receipt handed over before it: what ends a session (its
    /// task's final state) in one commit with the session's last receipts
    /// and the checkpoint that covers them; `Ok(Some(_))` gives what
    /// `write` returned, durable with them. Unless receipts of `session`
    /// were lost to an earlier failed write (checked in that transaction):
    /// then `write` is left out, `Ok(None)`, and the caller must not write
    /// what it would have ([`Recorder::session_lost`] then says so, and
    /// forgets it).
    ///
    /// # Errors
    ///
    /// As [`Recorder::flush`]; `write` failing fails the flush (nothing of
    /// its batch is stored).
    pub fn flush_with<T: Send + 'static>(
        &self,
        session: &str,
        write: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<Option<T>> {
        let made = Arc::new(Mutex::new(None));
        let guarded: super::StoreWrite = {
            let (failure, made, session) = (self.failure.clone(), made.clone(), session.to_owned());
            Box::new(move |db| {
                if !failure.is_lost(&session) {
                    let out = write(db)?;
                    *made.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
                }
                Ok(())
            })
        };
        self.ask(|tx| Msg::Flush(tx, Some(guarded)))?;
        Ok(made.lock().unwrap_or_else(|e| e.into_inner()).take())
    }

    /// Whether receipts of `session` were lost to a failed write (a full
    /// disk) while it ran: its task must fail even once the writer
    /// recovered. Asked once, when the session ends.
    pub fn session_lost(&self, session_id: &str) -> bool {
        self.failure.take_lost(session_id)
    }

    /// Records a message of a task (`task_submit.json`, its answer) for
    /// evidence packs.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn record_message(&self, task_id: &str, name: &str, body: &[u8]) -> Result<()> {
        // A message that holds a credential, or claims T3/T4, rests sealed
        // (as `tasks` keeps such a task's messages).
        let sealed = match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(v) if hcp_store::seals_messages(&v) => Some(
                self.store
                    .data_key()
                    .seal(body, &message_binding(task_id, name))?,
            ),
            _ => None,
        };
        self.store
            .db()
            .prepare_cached(
                "INSERT OR REPLACE INTO task_messages (task_id, name, body) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![task_id, name, sealed.as_deref().unwrap_or(body)])?;
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

/// The writer's message for a session's opening.
fn session_open(
    policy: &PolicySet,
    facts: SessionFacts,
    at_ms: u64,
    decision: &Decision,
    manifest: &[u8],
    causes: Vec<Parent>,
    awaited: bool,
) -> Result<Open> {
    Ok(Open {
        facts_bytes: hcp_contracts::jcs::canonical_bytes(&facts)
            .map_err(|e| anyhow::anyhow!("session facts: {e}"))?,
        input: pep::input::open_input(&facts, at_ms)
            .map_err(|e| anyhow::anyhow!("session facts: {e}"))?,
        facts,
        at_ms,
        policy_hash: Digest::from_str(policy.policy_hash())
            .map_err(|e| anyhow::anyhow!("policy hash: {e}"))?,
        policy_sources: policy.sources_json().clone(),
        manifest: manifest.to_vec(),
        causes,
        decision: decision.clone(),
        awaited,
    })
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_contracts::RiskLevel;
    use hcp_store::{Submitted, TaskState, TaskUpdate, TaskWrite};
    use std::time::Duration;

    /// Receipts queued behind the writer's first batch: one batch of them.
    const QUEUED: usize = 400;

    struct Lab {
        _dir: tempfile::TempDir,
        data: std::path::PathBuf,
        store: Arc<Store>,
        recorder: Recorder,
    }

    impl Lab {
        fn new() -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            let data = dir.path().join("data");
            let (store, recorder) = Recorder::for_tests(&data);
            Self {
                _dir: dir,
                data,
                store,
                recorder,
            }
        }

        fn task(&self) -> String {
            match self
                .store
                .submit("caller-1", "message-1", "probe", &serde_json::json!({}))
                .expect("submit")
            {
                Submitted::New(t) => t.task_id,
                Submitted::Duplicate(_) => panic!("duplicate"),
            }
        }

        fn receipts(&self) -> u64 {
            let check = crate::verify_store(&self.store).expect("verify");
            assert!(check.problems.is_empty(), "{:?}", check.problems);
            check.receipts
        }

        /// Stores `entry` with `write`, in a batch with `QUEUED` other
        /// receipts queued while another connection held the write lock
        /// (one batch of many receipts).
        fn behind(&self, entry: Entry, write: super::super::StoreWrite) -> Result<Parent> {
            let lock = rusqlite::Connection::open(self.data.join("hcp.db")).expect("db");
            lock.busy_timeout(Duration::from_secs(10)).expect("timeout");
            lock.execute_batch("BEGIN IMMEDIATE").expect("lock");
            let mut replies = Vec::new();
            // The writer takes the first and waits for the lock with it ...
            let send = |i: usize| {
                let (tx, rx) = channel();
                self.recorder
                    .tx
                    .send(Msg::Append(Box::new(test_entry(i)), tx))
                    .expect("send");
                rx
            };
            replies.push(send(0));
            std::thread::sleep(Duration::from_millis(200));
            // ... while the rest queue up behind it, then the entry and
            // its write, the last of the batch.
            for i in 1..QUEUED {
                replies.push(send(i));
            }
            let appender = self.recorder.appender();
            let stored =
                std::thread::spawn(move || appender.append_sealed_with(entry, Some(write)));
            std::thread::sleep(Duration::from_millis(200));
            lock.execute_batch("COMMIT").expect("unlock");
            let stored = stored.join().expect("thread");
            for r in replies {
                let _ = r.recv();
            }
            stored
        }
    }

    fn test_entry(i: usize) -> Entry {
        Entry {
            session_id: None,
            task_id: Some(format!("task-{i}")),
            capability: "probe@1.0.0".into(),
            call: "test.entry".into(),
            args: serde_json::json!({ "i": i }),
            input: hcp_contracts::jcs::Canonical::of(&serde_json::json!({ "i": i }))
                .expect("canonical"),
            verdict: Verdict::Allow,
            reason_code: hcp_receipts::reason::ALLOW.into(),
            risk: RiskLevel::R1,
            policy_hash: Digest([7; 32]),
            parents: Vec::new(),
            manifest: None,
            policy_sources: None,
            follows: None,
        }
    }

    fn queued(task_id: &str) -> TaskWrite {
        TaskWrite::new(
            task_id,
            TaskState::Queued,
            TaskUpdate {
                session_id: Some("session-1".into()),
                ..TaskUpdate::default()
            },
        )
        .expect("write")
    }

    #[test]
    fn a_store_write_commits_with_the_receipts_of_its_batch() {
        let lab = Lab::new();
        let task = lab.task();
        let before = lab.receipts();
        let write = queued(&task);
        lab.behind(test_entry(QUEUED), Box::new(move |db| write.apply(db)))
            .expect("stored");
        assert_eq!(lab.receipts(), before + QUEUED as u64 + 1);
        let stored = lab.store.task(&task).expect("read").expect("task");
        assert_eq!(stored.state, TaskState::Queued);
        assert_eq!(stored.session_id.as_deref(), Some("session-1"));
    }

    #[test]
    fn a_store_write_that_fails_stores_nothing_of_its_batch() {
        let lab = Lab::new();
        let task = lab.task();
        let before = lab.receipts();
        // Moves the task, then fails: the move must not stay either.
        let write = queued(&task);
        let err = lab
            .behind(
                test_entry(QUEUED),
                Box::new(move |db| {
                    write.apply(db)?;
                    anyhow::bail!("the store refused")
                }),
            )
            .expect_err("stored");
        assert!(format!("{err:#}").contains("the store refused"), "{err:#}");
        // Only the first receipt, stored alone before the batch, is there;
        // the task is as it was; the log goes on without a gap.
        assert_eq!(lab.receipts(), before + 1);
        let stored = lab.store.task(&task).expect("read").expect("task");
        assert_eq!(stored.state, TaskState::Received);
        lab.recorder
            .append_sealed(test_entry(QUEUED + 1))
            .expect("the writer goes on");
        assert_eq!(lab.receipts(), before + 2);
    }

    #[test]
    fn a_flush_carries_its_write_in_the_commit_of_the_receipts_before_it() {
        let lab = Lab::new();
        let task = lab.task();
        let before = lab.receipts();
        let mut entry = test_entry(0);
        entry.session_id = Some("session-1".into());
        let (tx, rx) = channel();
        lab.recorder
            .tx
            .send(Msg::Append(Box::new(entry), tx))
            .expect("send");
        let write = queued(&task);
        let made = lab
            .recorder
            .flush_with("session-1", move |db| write.apply(db))
            .expect("flushed");
        assert!(made.is_some(), "the write was left out");
        rx.recv().expect("answer").expect("stored");
        assert_eq!(lab.receipts(), before + 1);
        let stored = lab.store.task(&task).expect("read").expect("task");
        assert_eq!(stored.state, TaskState::Queued);
        assert!(!lab.recorder.session_lost("session-1"));
    }

    #[test]
    fn a_flush_leaves_out_its_write_when_receipts_of_its_session_were_lost() {
        let lab = Lab::new();
        let task = lab.task();
        // A batch holding a receipt of the session fails ...
        let mut entry = test_entry(QUEUED);
        entry.session_id = Some("session-lost".into());
        lab.behind(entry, Box::new(|_| anyhow::bail!("the disk refused")))
            .expect_err("stored");
        // ... so the session's end is not written, though its flush (of
        // the receipts still to come) succeeds.
        let write = queued(&task);
        let made = lab
            .recorder
            .flush_with("session-lost", move |db| write.apply(db))
            .expect("the flush succeeds");
        assert!(made.is_none(), "written for a session with lost receipts");
        let stored = lab.store.task(&task).expect("read").expect("task");
        assert_eq!(stored.state, TaskState::Received);
        assert!(lab.recorder.session_lost("session-lost"));
        // Another session's end is written.
        let write = queued(&task);
        assert!(
            lab.recorder
                .flush_with("session-2", move |db| write.apply(db))
                .expect("flushed")
                .is_some()
        );
        let stored = lab.store.task(&task).expect("read").expect("task");
        assert_eq!(stored.state, TaskState::Queued);
    }

    #[test]
    fn a_flush_whose_write_fails_fails() {
        let lab = Lab::new();
        let before = lab.receipts();
        let err = lab
            .recorder
            .flush_with("session-1", |_| -> Result<()> {
                anyhow::bail!("the store refused")
            })
            .expect_err("flushed");
        assert!(format!("{err:#}").contains("the store refused"), "{err:#}");
        lab.recorder
            .append_sealed(test_entry(1))
            .expect("the writer goes on");
        assert_eq!(lab.receipts(), before + 1);
    }

    /// The receipt and what the store makes of it in one message: a
    /// receipt the log refuses has nothing written for it.
    #[test]
    fn a_store_write_is_left_out_with_the_receipt_the_log_refused() {
        let lab = Lab::new();
        let task = lab.task();
        let before = lab.receipts();
        let mut entry = test_entry(0);
        entry.follows = Some(super::super::Follows {
            proposal: "never-proposed".into(),
            last: false,
        });
        let write = queued(&task);
        let err = lab
            .recorder
            .append_sealed_with(entry, Box::new(move |db| write.apply(db)))
            .expect_err("stored");
        assert!(format!("{err:#}").contains("never-proposed"), "{err:#}");
        let stored = lab.store.task(&task).expect("read").expect("task");
        assert_eq!(stored.state, TaskState::Received);
        assert_eq!(lab.receipts(), before);
        // A receipt the log takes has its write made.
        let write = queued(&task);
        lab.recorder
            .append_sealed_with(test_entry(1), Box::new(move |db| write.apply(db)))
            .expect("stored");
        let stored = lab.store.task(&task).expect("read").expect("task");
        assert_eq!(stored.state, TaskState::Queued);
        assert_eq!(lab.receipts(), before + 1);
    }
}
