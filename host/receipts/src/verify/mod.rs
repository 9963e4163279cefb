//! Offline verification of an evidence pack: no database, no network.
//!
//! What is checked, for every host section:
//! - each key the host names is in the pack (and trusted, when a trust list
//!   is given);
//! - every signed receipt's signature, with `verify_strict`, by one of its
//!   host's keys; receipts the signing policy requires to be signed are;
//! - the hash chain: seqs without gaps, `prev_hash` naming the previous
//!   receipt, clocks increasing, the first receipt continuing the declared
//!   start;
//! - every checkpoint: its signature (strict, one of the host's keys), its
//!   link to the previous one, a consistency proof from the previous one
//!   (so no rollback and no fork inside the pack), its `head`, and that the
//!   receipts it covers are all there (no truncated chain);
//! - every receipt is covered by a checkpoint and its inclusion proof leads
//!   from the receipt's own leaf to that checkpoint's signed root (a proof
//!   that starts from an inner node above the leaf instead, passing that
//!   node off as the receipt's leaf, is named as such);
//! - checkpoints the verifier already knows (`known_checkpoints`) are not
//!   rolled back or forked away from;
//!
//! and across hosts, the DAG: every parent in the pack or declared outside
//! it, every parent's clock below its child's, no cycles.
//!
//! Signatures are verified one by one with `verify_strict`, spread over the
//! cores. Batch verification (ed25519-dalek's `verify_batch`) is not used:
//! it skips the small-order checks of `verify_strict` and its random linear
//! combination can accept a signature whose error is a small torsion point
//! (with probability 1/2 for order 2), so it can accept what strict
//! verification rejects.
//!
//! Verification does not stop at the first failure: every failure is listed
//! with the receipt (id and index in its host's receipts file, from 0) or
//! checkpoint it concerns.

mod checkpoints;
mod receipts;
mod section;
mod sections;

use crate::checkpoint::Checkpoint;
use crate::keys::PublicKey;
use crate::log::SigningPolicy;
use crate::pack::{Pack, ReadLimits, StoredReceipt};
use std::fmt;

/// What verification is told beyond the pack.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// When set, receipts this policy signs must be signed.
    pub signing: Option<SigningPolicy>,
    /// When set, every key in the pack must be one of these (or of
    /// `host_keys`), for any host.
    pub trusted_keys: Option<Vec<PublicKey>>,
    /// Keys trusted for one host only (`--trust-key HOST=KEY`): a section
    /// of another host that declares one fails, unless the key is in
    /// `trusted_keys` too. With a flat list, one host's key could sign a
    /// section claiming to be another host's (and merged after that host's
    /// real pack, pass for its continuation).
    pub host_keys: Vec<(String, PublicKey)>,
    /// Checkpoints seen before (say, in an earlier pack): the pack's must not
    /// roll back or fork away from them.
    pub known_checkpoints: Vec<Checkpoint>,
}

/// Which check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Check {
    /// The pack cannot be read.
    Pack,
    /// A key is missing or not trusted.
    Key,
    /// A receipt or checkpoint breaks a rule of its format (see
    /// `Receipt::check`, `Checkpoint::check`).
    Record,
    /// A receipt's signature.
    Signature,
    /// A host's hash chain.
    Chain,
    /// The DAG across hosts.
    Dag,
    /// A checkpoint (signature, link, head, coverage of receipts).
    Checkpoint,
    /// A consistency proof between checkpoints, or a known checkpoint.
    Consistency,
    /// An inclusion proof.
    Inclusion,
    /// A receipt no checkpoint covers.
    Coverage,
}

impl Check {
    /// A short name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pack => "pack",
            Self::Key => "key",
            Self::Record => "record",
            Self::Signature => "signature",
            Self::Chain => "chain",
            Self::Dag => "dag",
            Self::Checkpoint => "checkpoint",
            Self::Consistency => "consistency",
            Self::Inclusion => "inclusion",
            Self::Coverage => "coverage",
        }
    }
}

/// The receipt a failure concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptRef {
    /// Its `receipt_id` as written.
    pub receipt_id: String,
    /// Its host section.
    pub host_id: String,
    /// Its index in the host's receipts file, from 0.
    pub index: usize,
}

/// The checkpoint a failure concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRef {
    /// Its host section.
    pub host_id: String,
    /// Its index in the host's checkpoints file, from 0.
    pub index: usize,
    /// Its tree size.
    pub tree_size: u64,
}

/// One failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Which check.
    pub check: Check,
    /// The receipt concerned, if one.
    pub receipt: Option<ReceiptRef>,
    /// The checkpoint concerned, if one.
    pub checkpoint: Option<CheckpointRef>,
    /// What is wrong, precisely.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] ", self.check.as_str())?;
        if let Some(r) = &self.receipt {
            write!(
                f,
                "receipt {} (receipts/{}.jsonl index {}): ",
                r.receipt_id, r.host_id, r.index
            )?;
        }
        if let Some(c) = &self.checkpoint {
            write!(
                f,
                "checkpoint {} of {} (size {}): ",
                c.index, c.host_id, c.tree_size
            )?;
        }
        f.write_str(&self.message)
    }
}

/// The outcome of verifying a pack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Host sections.
    pub hosts: usize,
    /// Receipts.
    pub receipts: usize,
    /// Receipts with a signature.
    pub signed_receipts: usize,
    /// Checkpoints.
    pub checkpoints: usize,
    /// Every failure found.
    pub failures: Vec<Failure>,
}

impl Report {
    /// Whether nothing failed.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// The failures' messages, for tests and logs.
    pub fn messages(&self) -> Vec<String> {
        self.failures.iter().map(ToString::to_string).collect()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} hosts, {} receipts ({} signed), {} checkpoints, {} failures",
            if self.ok() { "ok" } else { "FAILED" },
            self.hosts,
            self.receipts,
            self.signed_receipts,
            self.checkpoints,
            self.failures.len()
        )?;
        for failure in &self.failures {
            writeln!(f, "{failure}")?;
        }
        Ok(())
    }
}

/// Verifies a pack's bytes: a pack that cannot be read is one failure. The
/// decision inputs are checked against the index but not parsed (replay
/// reads them: [`crate::pack::read`], then [`crate::replay()`]). Receipts
/// are read in place: a line in canonical form is hashed as stored, any
/// other through serde and its canonical form, as [`verify`] does; the
/// report is the same either way.
pub fn verify_bytes(bytes: &[u8], limits: &ReadLimits, options: &VerifyOptions) -> Report {
    match crate::pack::read_with::<StoredReceipt<'_>>(bytes, limits, false) {
        Ok(read) => sections::verify_read(&read, options),
        Err(e) => Report {
            failures: vec![Failure {
                check: Check::Pack,
                receipt: None,
                checkpoint: None,
                message: e.to_string(),
            }],
            ..Report::default()
        },
    }
}

/// Verifies a pack that was read (see the module doc).
pub fn verify(pack: &Pack, options: &VerifyOptions) -> Report {
    sections::verify_pack(pack, options)
}
