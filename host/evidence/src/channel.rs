//! What the receipt pipeline's handle (the `Recorder`) hands its writer
//! thread, and the state they share: the two sides meet here, and the
//! writer imports nothing of the handle's.

use anyhow::Result;
use hcp_contracts::RiskLevel;
use hcp_policy::pep::{Decision, Op, Scope, SessionFacts};
use hcp_receipts::{Digest, Parent, Verdict};
use hcp_store::durable::StorageFull;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SendError, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

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
    /// The decision input in canonical form, recorded for replay (its
    /// SHA-256 is the receipt's `input_hash`).
    pub input: hcp_contracts::jcs::Canonical,
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
    /// The capability's manifest as written, for evidence packs (when the
    /// decision concerns one).
    pub manifest: Option<Vec<u8>>,
    /// The policy files (`PolicySet::sources` as JSON), stored as the
    /// snapshot of `policy_hash` for evidence packs.
    pub policy_sources: Option<Arc<str>>,
    /// The HID proposal this receipt follows from: the receipts recorded
    /// so far about it (the guest's `hid.propose` call, the operator's
    /// decision) become parents too.
    pub follows: Option<Follows>,
}

/// A receipt's place among the receipts about one HID proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follows {
    /// The proposal (named by its `hid.propose` call's arguments).
    pub proposal: String,
    /// The proposal's last receipt: the writer forgets it afterwards.
    pub last: bool,
}

/// The session's opening, for the writer.
pub(super) struct Open {
    pub(super) facts: SessionFacts,
    pub(super) facts_bytes: Vec<u8>,
    pub(super) input: Vec<u8>,
    pub(super) at_ms: u64,
    pub(super) decision: Decision,
    pub(super) policy_hash: Digest,
    pub(super) policy_sources: Arc<str>,
    pub(super) manifest: Vec<u8>,
    pub(super) causes: Vec<Parent>,
    /// Whether its sender waits for it to be stored.
    pub(super) awaited: bool,
}

/// A write of the store's own rows, made in the transaction of a flush
/// (with the checkpoint that covers every receipt before it), after those
/// receipts: it is durable exactly when they are, in one commit. It fails
/// only as SQLite fails (the whole batch then fails with it).
pub type StoreWrite = Box<dyn FnOnce(&rusqlite::Connection) -> anyhow::Result<()> + Send>;

/// A host call's verdict, with what its receipt needs of the call made
/// on the thread that decided it (see [`super::block::prepare`]).
pub(super) struct Decided {
    pub(super) call: Recorded,
    pub(super) prepared: Result<super::block::Prepared, String>,
}

/// What the writer needs of a decided call besides its prepared form:
/// nothing of the call's text is copied for it but an HID proposal's id.
pub(super) struct Recorded {
    /// The session's scope.
    pub(super) scope: Arc<Scope>,
    pub(super) op: Op,
    /// The id of the proposal an `hid.propose` call makes (when it names
    /// one): the operator's decision and the execution follow from this
    /// call's receipt.
    pub(super) proposal: Option<Box<str>>,
    /// When it was decided (Unix milliseconds).
    pub(super) at_ms: u64,
    pub(super) verdict: Verdict,
    pub(super) reason: &'static str,
    pub(super) risk: RiskLevel,
}

/// Host calls' messages the writer is done with, handed back to the
/// deciding threads to be used again or freed there.
///
/// A [`Decided`] is allocated on the thread that decided the call (its
/// call's text, its canonical bytes, the box). Freed on the writer's
/// thread, each of those takes the lock of the allocator's arena that the
/// deciding thread is allocating from at the same moment: on the allow
/// path about a tenth of the writer's time went to waiting for that lock
/// (docs/benchmarks.md, "Eleventh round"). Freed by a deciding thread,
/// they go back to that thread's own cache, without a lock; used again
/// (the box and its call's buffer, [`Spent::reuse`]), they are neither
/// freed nor allocated (docs/benchmarks.md, "Fifteenth round").
pub(super) struct Spent<T = Box<Decided>> {
    pile: Mutex<Pile<T>>,
}

struct Pile<T> {
    items: Vec<T>,
    /// Whether a deciding thread took some since the writer last looked.
    taken: bool,
}

impl<T> Default for Spent<T> {
    fn default() -> Self {
        Self {
            pile: Mutex::new(Pile {
                items: Vec::new(),
                taken: false,
            }),
        }
    }
}

/// Spent messages kept for the deciding threads to use again: about a
/// batch's worth while calls come one after the other (a batch gathers
/// for 2 ms). Above it, each call also frees a few ([`FREE_PER_CALL`]), so
/// that the pile a burst left shrinks while calls come.
const KEEP: usize = 2048;

/// Most spent messages a call frees when the pile holds more than
/// [`KEEP`]: few, so that no call waits for a whole batch's worth.
const FREE_PER_CALL: usize = 3;

impl<T> Spent<T> {
    /// The writer hands back a batch's messages (`items` is left empty).
    /// The pile left since the last batch, if no deciding thread took any
    /// of it (no call came since), is freed here instead: nothing else
    /// would free it.
    pub(super) fn hand_back(&self, items: &mut Vec<T>) {
        let stale = {
            let mut pile = self.pile.lock().unwrap_or_else(|e| e.into_inner());
            let stale = if pile.taken {
                Vec::new()
            } else {
                std::mem::take(&mut pile.items)
            };
            pile.taken = false;
            pile.items.append(items);
            stale
        };
        drop(stale);
    }

    /// A deciding thread takes one spent message to use again for its
    /// next one (its box and buffers: nothing allocated, nothing freed);
    /// when the pile holds more than [`KEEP`], it frees up to
    /// [`FREE_PER_CALL`] others, after the lock. `None` when the pile is
    /// empty or the writer holds it.
    pub(super) fn reuse(&self) -> Option<T> {
        let mut extra: [Option<T>; FREE_PER_CALL] = std::array::from_fn(|_| None);
        let one = {
            let Ok(mut pile) = self.pile.try_lock() else {
                return None;
            };
            let one = pile.items.pop()?;
            pile.taken = true;
            if pile.items.len() > KEEP {
                for slot in &mut extra {
                    *slot = pile.items.pop();
                }
            }
            one
        };
        drop(extra);
        Some(one)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.pile.lock().expect("the pile's lock").items.len()
    }
}

/// What the writer thread is asked to do.
pub(super) enum Msg {
    Call(Box<Decided>),
    Append(Box<Entry>, Sender<Result<Parent, String>>),
    Open(Box<Open>, Sender<Result<Parent, String>>),
    Close(String),
    /// An `Append` and a `Flush` (with its write, made only when the
    /// receipt is) in one message, so that one batch takes both: answered
    /// once the receipt is durable and covered by a checkpoint.
    Sealed(
        Box<Entry>,
        Sender<Result<Parent, String>>,
        Option<StoreWrite>,
    ),
    /// The barrier: answered once everything before it is durable and
    /// covered by a checkpoint; with a [`StoreWrite`] made in that
    /// transaction, after everything before it.
    Flush(Sender<Result<(), String>>, Option<StoreWrite>),
    /// A Lamport clock seen on another host (a caller sent it back): the
    /// next receipt's clock is above it.
    Observe(u64),
    Stop,
}

/// Where to answer a message that was not stored.
pub(super) enum Refuser {
    Parent(Sender<Result<Parent, String>>),
    Done(Sender<Result<(), String>>),
}

impl Refuser {
    /// Answers `why` (an answer already sent is read first).
    pub(super) fn refuse(self, why: &str) {
        match self {
            Refuser::Parent(tx) => {
                let _ = tx.send(Err(why.to_owned()));
            }
            Refuser::Done(tx) => {
                let _ = tx.send(Err(why.to_owned()));
            }
        }
    }
}

/// Most messages stored in one transaction.
const BATCH: usize = 8192;

/// How long a batch that nobody waits for (host calls' verdicts, a queued
/// session opening) waits for more before it is stored: a task's verdicts
/// and its flush then take one commit instead of several.
const GATHER: Duration = Duration::from_millis(2);

/// The sending side of the writer's channel. A message somebody waits for
/// ([`Msg::awaited`]) also wakes the writer when it is gathering a batch
/// (see [`gather`]); one nobody waits for (a host call's verdict) does not:
/// the writer takes it when its window ends, instead of waking once per
/// host call while a task runs.
#[derive(Clone)]
pub(super) struct ToWriter {
    tx: SyncSender<Msg>,
    /// The writer's thread, set once it is started.
    writer: Arc<OnceLock<Thread>>,
}

impl ToWriter {
    pub(super) fn new(tx: SyncSender<Msg>) -> Self {
        Self {
            tx,
            writer: Arc::new(OnceLock::new()),
        }
    }

    /// Names the writer's thread, for the wake-ups of [`ToWriter::send`].
    pub(super) fn started(&self, writer: Thread) {
        let _ = self.writer.set(writer);
    }

    /// Hands `msg` to the writer (blocks while the channel is full).
    ///
    /// # Errors
    ///
    /// The writer stopped.
    pub(super) fn send(&self, msg: Msg) -> Result<(), SendError<Msg>> {
        let wake = msg.awaited();
        self.tx.send(msg)?;
        if wake && let Some(writer) = self.writer.get() {
            writer.unpark();
        }
        Ok(())
    }
}

/// The next batch: `first`, what is queued behind it, and, while no
/// message of the batch is waited for, what arrives within [`GATHER`].
pub(super) fn gather(rx: &Receiver<Msg>, first: Msg) -> Vec<Msg> {
    gather_for(rx, first, GATHER)
}

/// [`gather`] with a window of `window`. Meanwhile the writer is parked,
/// not waiting on the channel: only a message somebody waits for wakes it
/// ([`ToWriter::send`]); the others are taken when the window ends.
fn gather_for(rx: &Receiver<Msg>, first: Msg, window: Duration) -> Vec<Msg> {
    let mut awaited = first.awaited();
    let mut batch = vec![first];
    let until = Instant::now() + window;
    while batch.len() < BATCH {
        match rx.try_recv() {
            Ok(next) => {
                awaited |= next.awaited();
                batch.push(next);
            }
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                let left = until.saturating_duration_since(Instant::now());
                if awaited || left.is_zero() {
                    break;
                }
                // May return early (an unpark meant for an earlier
                // message, or none): the loop looks again.
                std::thread::park_timeout(left);
            }
        }
    }
    batch
}

impl Msg {
    /// Whether a sender waits for this message's batch to be stored.
    fn awaited(&self) -> bool {
        match self {
            Msg::Append(..) | Msg::Sealed(..) | Msg::Flush(..) | Msg::Stop => true,
            Msg::Open(open, _) => open.awaited,
            Msg::Call(_) | Msg::Close(_) | Msg::Observe(_) => false,
        }
    }

    /// Where to answer the message if its batch fails (whether or not the
    /// batch reached it).
    pub(super) fn refuser(&self) -> Option<Refuser> {
        match self {
            Msg::Append(_, reply) | Msg::Sealed(_, reply, _) | Msg::Open(_, reply) => {
                Some(Refuser::Parent(reply.clone()))
            }
            Msg::Flush(reply, _) => Some(Refuser::Done(reply.clone())),
            Msg::Call(_) | Msg::Close(_) | Msg::Observe(_) | Msg::Stop => None,
        }
    }

    /// The session whose receipt this is, if any.
    pub(super) fn session(&self) -> Option<&str> {
        match self {
            Msg::Call(d) => Some(&d.call.scope.facts().session_id),
            Msg::Open(o, _) => Some(&o.facts.session_id),
            Msg::Append(e, _) | Msg::Sealed(e, _, _) => e.session_id.as_deref(),
            Msg::Close(_) | Msg::Flush(..) | Msg::Observe(_) | Msg::Stop => None,
        }
    }
}

/// Set while the writer cannot store receipts (its last batch failed):
/// meanwhile every PEP decision fails closed. The next batch that commits
/// clears it; the sessions whose receipts were lost stay marked.
#[derive(Debug, Default)]
pub(super) struct Failure {
    set: AtomicBool,
    /// The failure is a full disk ([`StorageFull`]).
    full: AtomicBool,
    why: Mutex<Option<String>>,
    /// Sessions with receipts in a batch that failed.
    lost: Mutex<HashSet<String>>,
}

impl Failure {
    pub(super) fn set(&self, why: String, full: bool, lost: Vec<String>) {
        *self.why.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        self.lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(lost);
        self.full.store(full, Ordering::Release);
        self.set.store(true, Ordering::Release);
    }

    pub(super) fn clear(&self) {
        self.set.store(false, Ordering::Release);
    }

    pub(super) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    pub(super) fn why(&self) -> String {
        self.why
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| "the receipt writer stopped".into())
    }

    /// The error for a message the writer answered `why`: a full disk when
    /// `why` is the last failure's and that failure was a full disk. (A
    /// message refused for another reason, a draft the log does not take
    /// or a store write that fails, is not one, also after a full disk.)
    pub(super) fn error(&self, why: String) -> anyhow::Error {
        let full = self.full.load(Ordering::Acquire)
            && self
                .why
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_deref()
                == Some(&why);
        if full {
            anyhow::Error::new(StorageFull(format!("receipts: {why}")))
        } else {
            anyhow::anyhow!("receipts: {why}")
        }
    }

    /// Whether receipts of `session` were lost (and remembers it).
    pub(super) fn is_lost(&self, session: &str) -> bool {
        self.lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(session)
    }

    /// Whether receipts of `session` were lost (forgets it).
    pub(super) fn take_lost(&self, session: &str) -> bool {
        self.lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// While a batch nobody waits for is gathered, a message nobody waits
    /// for does not end the window, and one somebody waits for ends it at
    /// once (its send wakes the writer).
    #[test]
    fn only_an_awaited_message_wakes_a_gathering_writer() {
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        let to = ToWriter::new(tx);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            let first = rx.recv().expect("first");
            let long = Instant::now();
            let batch = gather_for(&rx, first, Duration::from_secs(10));
            let awaited = (batch.len(), long.elapsed());
            let _ = done_tx.send(());
            let first = rx.recv().expect("first");
            let short = Instant::now();
            let batch = gather_for(&rx, first, Duration::from_millis(200));
            (awaited, (batch.len(), short.elapsed()))
        });
        to.started(writer.thread().clone());
        // A window of 10 s, ended by the flush.
        to.send(Msg::Observe(1)).expect("send");
        std::thread::sleep(Duration::from_millis(20));
        to.send(Msg::Observe(2)).expect("send");
        std::thread::sleep(Duration::from_millis(20));
        let (reply, _answer) = std::sync::mpsc::channel();
        to.send(Msg::Flush(reply, None)).expect("send");
        done_rx.recv().expect("the first batch");
        // A window of 200 ms with nothing awaited: it runs to its end,
        // taking what came meanwhile.
        to.send(Msg::Observe(3)).expect("send");
        std::thread::sleep(Duration::from_millis(20));
        to.send(Msg::Observe(4)).expect("send");
        let ((n, woken), (m, waited)) = writer.join().expect("writer");
        assert_eq!(n, 3, "both verdicts and the flush in one batch");
        assert!(
            woken < Duration::from_secs(5),
            "the flush woke the writer: {woken:?}"
        );
        assert_eq!(m, 2);
        assert!(
            waited >= Duration::from_millis(200),
            "ended early: {waited:?}"
        );
    }

    /// The deciding side takes spent messages to use again, and frees a
    /// few per call while the pile is larger than a batch's worth; what no
    /// call came to take is freed by the writer at its next batch, so
    /// nothing stays held while the host is idle.
    #[test]
    fn spent_messages_are_used_again_or_freed_by_the_deciding_side_or_at_the_next_batch() {
        let freed = Arc::new(AtomicUsize::new(0));
        let spent = Spent::<Counted>::default();
        let batch = |n: usize| -> Vec<Counted> { (0..n).map(|_| Counted(freed.clone())).collect() };
        let freed_now = || freed.load(Ordering::SeqCst);

        let mut first = batch(KEEP + 10);
        spent.hand_back(&mut first);
        assert!(first.is_empty());
        assert_eq!(spent.len(), KEEP + 10);
        assert_eq!(freed_now(), 0, "the pile is new: nothing stale");

        // Above KEEP, a call takes one and frees a few.
        let kept = spent.reuse().expect("one to use again");
        assert_eq!(freed_now(), FREE_PER_CALL);
        assert_eq!(spent.len(), KEEP + 10 - 1 - FREE_PER_CALL);
        drop(kept);
        assert_eq!(freed_now(), FREE_PER_CALL + 1);
        while spent.len() > KEEP {
            drop(spent.reuse());
        }
        // At KEEP or below, a call only takes the one it uses.
        let (before, at) = (freed_now(), spent.len());
        let kept = spent.reuse().expect("one to use again");
        assert_eq!(freed_now(), before);
        assert_eq!(spent.len(), at - 1);
        drop(kept);

        // A call came since the last batch: the pile is not stale, and the
        // next batch's messages join it.
        let before = freed_now();
        spent.hand_back(&mut batch(3));
        assert_eq!(freed_now(), before);
        assert_eq!(spent.len(), at - 1 + 3);

        // No call came: the next batch frees the pile on the writer's side.
        spent.hand_back(&mut batch(2));
        assert_eq!(freed_now(), before + at - 1 + 3);
        assert_eq!(spent.len(), 2);

        // An empty batch: the pile is stale again and freed; a call then
        // finds nothing to take.
        spent.hand_back(&mut Vec::new());
        assert_eq!(spent.len(), 0);
        assert!(spent.reuse().is_none());
        assert_eq!(freed_now(), KEEP + 10 + 3 + 2);
    }

    /// A full disk is reported as such for the messages its failed batch
    /// refused; a message refused for another reason after the disk
    /// recovered is not answered "storage full, retry later".
    #[test]
    fn only_a_full_disks_refusals_are_reported_as_storage_full() {
        let failure = Failure::default();
        failure.set("disk full".into(), true, Vec::new());
        let full = failure.error(failure.why());
        assert!(full.downcast_ref::<StorageFull>().is_some(), "{full:#}");
        failure.clear();
        let other = failure.error("no receipt of this process records proposal \"p\"".into());
        assert!(other.downcast_ref::<StorageFull>().is_none(), "{other:#}");
        failure.set("database is locked".into(), false, Vec::new());
        let locked = failure.error(failure.why());
        assert!(locked.downcast_ref::<StorageFull>().is_none(), "{locked:#}");
    }
}
