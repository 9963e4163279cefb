//! Receipts as verification reads them: borrowed, from a line of a pack's
//! receipts file (read by [`crate::scan`]) or from a [`Receipt`]; and the
//! rules of the format one receipt can break alone, checked on such a view.

use crate::hash::Digest;
use crate::keys::{KeyId, PublicKey, Signature, SignatureFailure};
use crate::reason;
use crate::receipt::{
    MAX_PARENTS, RECEIPT_DOMAIN, RECEIPT_VERSION, Receipt, ReceiptError, Verdict,
};
use crate::{ids, ids::MAX_SAFE_INTEGER};
use hcp_contracts::RiskLevel;

/// What the checks of one receipt read (timestamps and the three hashes of
/// the call are covered by the receipt hash, but not checked one by one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiptView<'a> {
    pub(crate) call: &'a str,
    pub(crate) capability: &'a str,
    pub(crate) host_id: &'a str,
    pub(crate) key_id: Option<&'a str>,
    pub(crate) lamport: u64,
    pub(crate) parents: Parents<'a>,
    pub(crate) prev_hash: Option<Digest>,
    pub(crate) reason_code: &'a str,
    pub(crate) receipt_id: &'a str,
    pub(crate) risk: RiskLevel,
    pub(crate) seq: u64,
    pub(crate) session_id: Option<&'a str>,
    pub(crate) task_id: Option<&'a str>,
    pub(crate) verdict: Verdict,
    pub(crate) version: u32,
    pub(crate) origin: Origin<'a>,
}

/// Where a view's bytes are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// A canonical line (see [`crate::scan::scan`]); `signature_at` is where the
    /// signature's value (a quoted string of 128 hex digits) starts.
    Line {
        line: &'a str,
        signature_at: Option<usize>,
    },
    /// A receipt: its canonical form is written again when needed.
    Struct(&'a Receipt),
}

/// A receipt's parents.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Parents<'a> {
    /// The inside of a canonical JSON array of digests (`"sha256:<64 hex>"`
    /// joined by commas), checked by [`crate::scan::scan`].
    Text(&'a str),
    /// Parsed digests.
    Slice(&'a [Digest]),
}

/// Bytes of one `"sha256:<64 hex digits>"` and its comma.
const PARENT_STRIDE: usize = 74;

impl<'a> Parents<'a> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Text("") => 0,
            Self::Text(text) => (text.len() + 1) / PARENT_STRIDE,
            Self::Slice(slice) => slice.len(),
        }
    }

    /// Parent `i`, if there is one.
    pub(crate) fn get(&self, i: usize) -> Option<Digest> {
        match self {
            Self::Text(text) => {
                let at = i.checked_mul(PARENT_STRIDE)?;
                // Checked by `scan`: 64 lowercase hex digits after `"sha256:`.
                Digest::from_hex(text.get(at + 8..at + 72)?).ok()
            }
            Self::Slice(slice) => slice.get(i).copied(),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = Digest> + use<'a> {
        let this = *self;
        (0..this.len()).filter_map(move |i| this.get(i))
    }
}

impl<'a> ReceiptView<'a> {
    /// The view of a receipt.
    pub(crate) fn of(r: &'a Receipt) -> Self {
        Self {
            call: &r.call,
            capability: &r.capability,
            host_id: &r.host_id,
            key_id: r.key_id.as_ref().map(KeyId::as_str),
            lamport: r.lamport,
            parents: Parents::Slice(&r.parents),
            prev_hash: r.prev_hash,
            reason_code: &r.reason_code,
            receipt_id: &r.receipt_id,
            risk: r.risk,
            seq: r.seq,
            session_id: r.session_id.as_deref(),
            task_id: r.task_id.as_deref(),
            verdict: r.verdict,
            version: r.version,
            origin: Origin::Struct(r),
        }
    }

    /// Whether the receipt carries a signature.
    pub(crate) fn is_signed(&self) -> bool {
        match self.origin {
            Origin::Line { signature_at, .. } => signature_at.is_some(),
            Origin::Struct(r) => r.is_signed(),
        }
    }

    /// The receipt hash ([`Receipt::hash`]).
    pub(crate) fn hash(&self) -> Result<Digest, ReceiptError> {
        match self.origin {
            Origin::Line { line, .. } => Ok(Digest::of(line.as_bytes())),
            Origin::Struct(r) => r.hash(),
        }
    }

    /// As [`Receipt::verify_signature`].
    pub(crate) fn verify_signature(&self, key: &PublicKey) -> Result<(), SignatureFailure> {
        let (line, at) = match self.origin {
            Origin::Struct(r) => return r.verify_signature(key),
            Origin::Line { line, signature_at } => {
                (line, signature_at.ok_or(SignatureFailure::Missing)?)
            }
        };
        // `scan` checked the 128 lowercase hex digits, quoted, at `at`.
        let mismatch = || SignatureFailure::Mismatch(key.key_id().clone());
        let signature: Signature = line
            .get(at + 1..at + 129)
            .ok_or_else(mismatch)?
            .parse()
            .map_err(|_| mismatch())?;
        let (before, after) = (
            line.get(..at).ok_or_else(mismatch)?,
            line.get(at + 130..).ok_or_else(mismatch)?,
        );
        let mut message = Vec::with_capacity(RECEIPT_DOMAIN.len() + line.len());
        message.extend_from_slice(RECEIPT_DOMAIN);
        message.extend_from_slice(before.as_bytes());
        message.extend_from_slice(b"null");
        message.extend_from_slice(after.as_bytes());
        key.verify_strict(&message, &signature)
    }

    /// As [`Receipt::check`].
    pub(crate) fn check(&self) -> Result<(), ReceiptError> {
        self.rules().map_err(|reason| ReceiptError::Invalid {
            receipt_id: self.receipt_id.to_owned(),
            reason,
        })
    }

    fn rules(&self) -> Result<(), String> {
        if self.version != RECEIPT_VERSION {
            return Err(format!(
                "version {} is not supported (expected {RECEIPT_VERSION})",
                self.version
            ));
        }
        ids::check_host_id(self.host_id).map_err(|e| e.to_string())?;
        for (field, value) in [("seq", self.seq), ("lamport", self.lamport)] {
            if value > MAX_SAFE_INTEGER {
                return Err(format!("{field} {value} is above 2^53 - 1"));
            }
        }
        if !ids::is_receipt_id(self.receipt_id, self.host_id, self.seq) {
            return Err(format!(
                "receipt_id must be {:?} (host_id:seq), not {:?}",
                format!("{}:{}", self.host_id, self.seq),
                self.receipt_id
            ));
        }
        ids::check_text("call", self.call).map_err(|e| e.to_string())?;
        ids::check_text("capability", self.capability).map_err(|e| e.to_string())?;
        if !self.capability.contains('@') {
            return Err(format!(
                "capability {:?} must be name@version",
                self.capability
            ));
        }
        for (field, value) in [("session_id", self.session_id), ("task_id", self.task_id)] {
            if let Some(value) = value {
                ids::check_text(field, value).map_err(|e| e.to_string())?;
            }
        }
        if !reason::is_well_formed(self.reason_code) {
            return Err(format!(
                "reason_code {:?} must match [A-Z][A-Z0-9_]* (at most 64)",
                self.reason_code
            ));
        }
        match (self.verdict, self.reason_code == reason::ALLOW) {
            (Verdict::Allow, false) => {
                return Err(format!(
                    "an ALLOW carries reason_code ALLOW, not {}",
                    self.reason_code
                ));
            }
            (Verdict::Deny, true) => return Err("a DENY cannot carry reason_code ALLOW".into()),
            _ => {}
        }
        if self.key_id.is_some() != self.is_signed() {
            return Err("key_id and signature must be both set or both null".into());
        }
        let parents = self.parents.len();
        if parents > MAX_PARENTS {
            return Err(format!("more than {MAX_PARENTS} parents"));
        }
        // The first parent named before: at most 64, so pairwise.
        let dup = (1..parents).find_map(|i| {
            let p = self.parents.get(i)?;
            (0..i).any(|j| self.parents.get(j) == Some(p)).then_some(p)
        });
        if let Some(dup) = dup {
            return Err(format!("parent {dup} is named twice"));
        }
        match (self.seq, self.prev_hash) {
            (0, Some(_)) => Err("the first receipt of a log (seq 0) has no prev_hash".into()),
            (1.., None) => Err(format!("seq {} needs a prev_hash", self.seq)),
            _ => Ok(()),
        }
    }
}

impl Receipt {
    /// Checks the rules of the format that one receipt can break alone:
    /// version, identifiers, `receipt_id` = `<host_id>:<seq>`, integers
    /// within 2^53 − 1, reason code form, ALLOW ⇔ reason `ALLOW`, `key_id` and
    /// `signature` both set or both null, no duplicate parents, and the
    /// first receipt (seq 0) without `prev_hash`, any other with one.
    /// The timestamp is checked by the log when the receipt is made, not here.
    ///
    /// # Errors
    ///
    /// The first rule broken.
    pub fn check(&self) -> Result<(), ReceiptError> {
        ReceiptView::of(self).check()
    }
}
