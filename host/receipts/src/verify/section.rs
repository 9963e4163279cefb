//! One host section as verification holds it, and the run of its checks:
//! its keys, where failures are reported, and the chain of its receipts.
//! The receipts' own checks are in `receipts.rs`, the checkpoints' in
//! `checkpoints.rs`.

use super::{Check, CheckpointRef, Failure, ReceiptRef, Report, VerifyOptions};
use crate::checkpoint::Checkpoint;
use crate::dag::{self, ChainStart, Linked};
use crate::hash::Digest;
use crate::keys::{KeyId, PublicKey, SignatureFailure};
use crate::pack::{ConsistencyProof, InclusionRef, StoredReceipt};
use crate::receipt::Receipt;
use crate::view::{Parents, ReceiptView};
use std::collections::HashMap;

/// Keys by key id.
pub(super) type Keys<'a> = HashMap<&'a str, &'a PublicKey>;

/// A receipt as verification holds it.
pub(super) trait Record: Sync {
    fn view(&self) -> ReceiptView<'_>;
}

impl Record for Receipt {
    fn view(&self) -> ReceiptView<'_> {
        ReceiptView::of(self)
    }
}

impl Record for StoredReceipt<'_> {
    fn view(&self) -> ReceiptView<'_> {
        StoredReceipt::view(self)
    }
}

/// A host section, borrowed from a [`crate::Pack`] or from a pack as read.
#[derive(Debug)]
pub(super) struct SectionView<'a, R> {
    pub(super) host_id: &'a str,
    pub(super) keys: &'a [KeyId],
    pub(super) first_seq: u64,
    pub(super) prev_hash: Option<Digest>,
    pub(super) prev_checkpoint: Option<Digest>,
    pub(super) receipts: &'a [R],
    pub(super) checkpoints: &'a [Checkpoint],
    pub(super) inclusion: &'a [InclusionRef<'a>],
    pub(super) consistency: &'a [ConsistencyProof],
}

/// A receipt with its hash and what the chain and DAG checks read most,
/// side by side for them to read in order.
pub(super) struct Link<'a, R> {
    pub(super) hash: Digest,
    pub(super) prev_hash: Option<Digest>,
    pub(super) seq: u64,
    pub(super) lamport: u64,
    pub(super) signed: bool,
    pub(super) receipt: &'a R,
}

impl<R: Record> Linked for Link<'_, R> {
    fn hash(&self) -> Digest {
        self.hash
    }
    fn host_id(&self) -> &str {
        self.receipt.view().host_id
    }
    fn seq(&self) -> u64 {
        self.seq
    }
    fn lamport(&self) -> u64 {
        self.lamport
    }
    fn prev_hash(&self) -> Option<Digest> {
        self.prev_hash
    }
    fn parents(&self) -> Parents<'_> {
        self.receipt.view().parents
    }
}

/// The checks of one section, each failure reported into `report`.
pub(super) struct Section<'a, 'r, R> {
    pub(super) s: &'a SectionView<'a, R>,
    all_keys: &'a Keys<'a>,
    host_keys: Keys<'a>,
    pub(super) options: &'a VerifyOptions,
    pub(super) report: &'r mut Report,
}

impl<'a, 'r, R: Record> Section<'a, 'r, R> {
    pub(super) fn new(
        s: &'a SectionView<'a, R>,
        all_keys: &'a Keys<'a>,
        options: &'a VerifyOptions,
        report: &'r mut Report,
    ) -> Self {
        let mut host_keys = HashMap::new();
        for id in s.keys {
            match all_keys.get(id.as_str()) {
                Some(key) => {
                    host_keys.insert(id.as_str(), *key);
                }
                None => report.failures.push(failure(
                    Check::Key,
                    None,
                    None,
                    format!(
                        "host {} names key {id}, which the pack does not hold",
                        s.host_id
                    ),
                )),
            }
        }
        Self {
            s,
            all_keys,
            host_keys,
            options,
            report,
        }
    }

    pub(super) fn key(&self, id: &str) -> Result<&'a PublicKey, SignatureFailure> {
        match (self.host_keys.get(id), self.all_keys.contains_key(id)) {
            (Some(key), _) => Ok(*key),
            (None, true) => Err(SignatureFailure::ForeignKey {
                key: KeyId::from_checked(id),
                host: self.s.host_id.to_owned(),
            }),
            (None, false) => Err(SignatureFailure::UnknownKey(KeyId::from_checked(id))),
        }
    }

    pub(super) fn on_receipt(&mut self, check: Check, index: usize, message: String) {
        let r = receipt_ref(self.s, index);
        self.report
            .failures
            .push(failure(check, Some(r), None, message));
    }

    pub(super) fn on_checkpoint(&mut self, check: Check, index: usize, message: String) {
        let c = CheckpointRef {
            host_id: self.s.host_id.to_owned(),
            index,
            tree_size: self.s.checkpoints[index].tree_size,
        };
        self.report
            .failures
            .push(failure(check, None, Some(c), message));
    }

    pub(super) fn on_host(&mut self, check: Check, message: String) {
        let message = format!("host {}: {message}", self.s.host_id);
        self.report
            .failures
            .push(failure(check, None, None, message));
    }

    /// Runs every check of the section; returns the receipts with their hashes.
    pub(super) fn run(mut self) -> Vec<Link<'a, R>> {
        let s = self.s;
        self.report.receipts += s.receipts.len();
        self.report.checkpoints += s.checkpoints.len();
        let nodes = self.receipts();
        let start = ChainStart {
            host_id: s.host_id.to_owned(),
            first_seq: s.first_seq,
            prev_hash: s.prev_hash,
        };
        for issue in dag::chain(&start, &nodes) {
            self.on_receipt(Check::Chain, issue.node, issue.problem.to_string());
        }
        self.checkpoints(&nodes);
        self.known_checkpoints(&nodes);
        nodes
    }

    /// Index of receipt `seq` in the section, if it is there where expected.
    pub(super) fn position(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.s.first_seq)?).ok()?;
        (self.s.receipts.get(i)?.view().seq == seq).then_some(i)
    }
}

pub(super) fn failure(
    check: Check,
    receipt: Option<ReceiptRef>,
    checkpoint: Option<CheckpointRef>,
    message: String,
) -> Failure {
    Failure {
        check,
        receipt,
        checkpoint,
        message,
    }
}

pub(super) fn receipt_ref<R: Record>(section: &SectionView<'_, R>, index: usize) -> ReceiptRef {
    ReceiptRef {
        receipt_id: section.receipts[index].view().receipt_id.to_owned(),
        host_id: section.host_id.to_owned(),
        index,
    }
}
