//! Layer C of the HCP host: verifiable receipts.
//!
//! Every verdict of the host's policy enforcement point, ALLOW and DENY,
//! becomes a [`Receipt`]: RFC 8785 canonical JSON, chained to the host's
//! previous receipt by hash, stamped with a Lamport clock, and linked to the
//! receipts that caused it, so the receipts of several hosts form one DAG.
//! High-risk and denied calls are signed one by one (Ed25519); low-risk
//! allows are covered by signed Merkle checkpoints (RFC 6962/9162 hashing).
//! Evidence packs are deterministic tar files that verify offline, and
//! replay re-derives each recorded verdict from the recorded policy.
//!
//! Modules: [`keys`] (Ed25519 keys and key files), [`receipt`], [`log`] (the
//! host's append-only log as a pure state machine), [`merkle`],
//! [`checkpoint`], [`dag`], [`pack`] (evidence packs), [`archive`] (the tar
//! writer, reader and path rule of packs and bundles), [`verify`] (offline
//! verification), [`replay`].
//!
//! This crate is pure logic. It must never depend on wasmtime, HTTP, SQLite
//! or any global state; it stores nothing itself (the caller stores
//! receipts, checkpoints and the log state); the only files it touches are
//! key files whose paths it is given. It must never print or log a private
//! key, and never accept a signature that `verify_strict` rejects.
#![deny(missing_docs)]

pub mod archive;
pub mod checkpoint;
pub mod dag;
pub mod hash;
pub mod ids;
pub mod keys;
pub mod log;
pub mod merkle;
pub mod pack;
mod par;
pub mod reason;
pub mod receipt;
pub mod replay;
mod scan;
pub mod verify;
mod view;

pub use checkpoint::Checkpoint;
pub use hash::Digest;
pub use keys::{HostKey, KeyId, PublicKey, Signature};
pub use log::{Appended, Draft, DraftRef, HostLog, LogState, Placed, SigningPolicy};
pub use pack::{Pack, ReadLimits};
pub use receipt::{Head, Parent, Receipt, Verdict};
pub use replay::{Decider, Decision, replay};
pub use verify::{Report, VerifyOptions, verify, verify_bytes};
