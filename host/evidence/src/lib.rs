//! Receipts of every verdict, durable in the data directory, and evidence
//! packs of them.
//!
//! The second layer of the host (store → evidence → engine → serve → cli):
//! it stands on `hcp_store` alone of the host's layers, and on the pure
//! crates (`hcp_receipts`, `hcp_policy`, `hcp_contracts`; the sandbox for
//! its verdict sink). Beside the receipts, the host's identity
//! ([`hostkey`]), the key that signs them.
//!
//! # The pipeline
//!
//! The PEP decides on the task's own thread (`hcp_sandbox::pep`) and hands
//! each verdict to the [`Recorder`]'s channel without waiting. One writer
//! thread per data directory takes verdicts in batches (group commit): for
//! each, the canonical arguments and decision input are hashed, the host's
//! [`hcp_receipts::HostLog`] turns it into a receipt (chained, Lamport
//! clock, signed when it is a DENY or at R4 and above, Merkle leaf,
//! checkpoints every 1024), and the batch is stored in one SQLite
//! transaction with the log's state. [`Recorder::flush`] is the barrier:
//! when it returns, every verdict handed over before it is durable and
//! covered by a signed checkpoint. The task engine calls it before it
//! answers a task.
//!
//! # What the gate calls
//!
//! - [`Recorder::append`]: appends one of its own receipts (admission,
//!   rejection, approval), durable when it returns, and gives its
//!   [`Parent`].
//! - [`Recorder::record_session_open`] with those parents as causes:
//!   records the `session.open` receipt the engine decided (its facts in
//!   full, the policy snapshot, the manifest); the engine compiles the
//!   session's decision scope and builds the task's `PolicyGovernor` on
//!   [`Recorder::sink`]. The recorder decides nothing.
//! - [`Recorder::record_message`]: the task's messages, for evidence packs.
//! - [`Recorder::flush`] before answering; [`Recorder::close_session`] when
//!   the session ends.
//!
//! # Reading the log
//!
//! [`view`]: [`recent_receipts`] for the operator's page, [`verify_store`]
//! for health and durability checks; [`export`] for evidence packs.
//!
//! # Storage
//!
//! Tables (their schema is in the data directory's schema history,
//! `hcp_store::schema`; only this crate reads or writes their rows,
//! but for the hashes `hcp_store::receipt_hashes` reads):
//! `receipt_blocks` (a batch's receipts, up to 1024 a row: their hashes,
//! then the receipts and their decision inputs in the compact form of
//! `block`, about a fifth of their JSON; read back through `stored`; an
//! admitted task's decision input without the submission its row in
//! `tasks` keeps, put back from it: `submission`),
//! `receipts` (one row per receipt, as hosts before the blocks wrote them:
//! a prefix of the log, read, never written), `receipt_marks` (the receipts that
//! are not host calls, by task and session: the gate's and the sessions'
//! openings), `receipt_checkpoints`,
//! `receipt_log` (the log's state, the host's public key),
//! `receipt_sessions` (each session's facts and its range of receipts),
//! `policy_snapshots`, `capability_manifests`, `task_messages`. Rows are
//! only ever inserted (and a session's range extended). Several processes
//! (`hcp serve`, the command line) may append to the same log: each batch
//! is written under SQLite's write lock from the stored log state.
#![deny(missing_docs)]

/// A phase of a task's path (`name`), as a span that lives until dropped:
/// timed by a subscriber that asks for target `hcp::phase` and level
/// TRACE (the `task_path` bench), free otherwise. The same as the `hcp`
/// crate's, so that the bench sees the writer's phases as before.
macro_rules! phase {
    ($name:literal) => {
        tracing::trace_span!(target: "hcp::phase", $name)
    };
}

pub mod archive;
mod block;
mod channel;
mod export;
pub mod hostkey;
mod hot;
mod marker;
mod recorder;
mod stored;
mod submission;
pub mod view;
mod writer;

pub use channel::StoreWrite;
pub use channel::{Entry, Follows};
pub use export::{Selection, export};
pub use recorder::{Appender, ClockOutOfRange, MAX_LAMPORT_LEAD, MAX_RECEIVED_LAMPORT, Recorder};
pub use view::{
    ReceiptFilter, ReceiptSummary, RecordedSession, StoreCheck, recent_receipts, recorded_session,
    session_receipts, verify_store,
};

pub use hcp_receipts::Parent;

/// The WASI packages the host implements beyond WASI 0.2's own, as
/// `wit/deps/` holds them (`wasi:config`, ...): every `.wit` file of its
/// folders, by path (listed by `build.rs`).
pub const WIT_DEPS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/wit_deps.rs"));

/// The WIT package, as evidence packs carry it (`manifests/wit/`) and
/// `hcp new` writes it: the host's own files (one list, the bundles'
/// [`hcp_bundle::wit::HOST_WIT`]), then [`WIT_DEPS`].
pub fn wit_files() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    hcp_bundle::wit::HOST_WIT.iter().chain(WIT_DEPS)
}
