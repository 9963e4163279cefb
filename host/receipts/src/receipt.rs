//! The receipt: one record for every verdict, ALLOW and DENY.
//!
//! # Canonical form, hash and signature
//!
//! A receipt's **canonical form** is the RFC 8785 (JCS) serialization of its
//! JSON object with every field present (absent optionals are `null`); the
//! struct's fields are declared in RFC 8785 key order, so serde_json's
//! compact output *is* that form (a test checks it against
//! `hcp_contracts::jcs` on random receipts). Integers are at most 2^53 − 1.
//!
//! - **Receipt hash** = SHA-256 of the canonical form *including* `key_id` and
//!   `signature`. It is what `prev_hash`, `parents` and Merkle leaves refer to,
//!   so the chain also covers the previous receipt's signature.
//! - **Signature** = Ed25519 over `"hcp-receipt/1\n"` followed by the
//!   canonical form with `signature` set to `null` (`key_id` set, so it is
//!   signed). Unsigned receipts have `key_id` and `signature` both `null`.

use crate::hash::Digest;
use crate::keys::{HostKey, KeyId, PublicKey, Signature, SignatureFailure};
use hcp_contracts::RiskLevel;
use serde::{Deserialize, Serialize};

/// Format version of receipts written by this crate.
pub const RECEIPT_VERSION: u32 = 1;

/// Domain separation prefix of receipt signatures.
pub const RECEIPT_DOMAIN: &[u8] = b"hcp-receipt/1\n";

/// Most parents one receipt may name.
pub const MAX_PARENTS: usize = 64;

/// A verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Verdict {
    /// The call was admitted.
    #[serde(rename = "ALLOW")]
    Allow,
    /// The call was refused.
    #[serde(rename = "DENY")]
    Deny,
}

impl Verdict {
    /// `ALLOW` or `DENY`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "ALLOW",
            Self::Deny => "DENY",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One receipt. Fields are declared in RFC 8785 key order (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// `sha256:` of the RFC 8785 canonical arguments of the call.
    pub args_hash: Digest,
    /// What was decided: `fs.open`, `net.connect`, `hcp.artifacts.create`,
    /// `gate.admission`, `hid.execute`, ...
    pub call: String,
    /// The capability, `name@version`.
    pub capability: String,
    /// The host whose log holds the receipt.
    pub host_id: String,
    /// `sha256:` of the canonical decision input (what replay feeds the decider).
    pub input_hash: Digest,
    /// The signing key's id; `null` when unsigned.
    pub key_id: Option<KeyId>,
    /// Lamport clock: greater than every parent's and the previous receipt's.
    pub lamport: u64,
    /// Receipts this one follows from: the session's previous receipt and the
    /// receipts that caused it (e.g. the approval that admitted the task).
    pub parents: Vec<Digest>,
    /// Hash of the policy the verdict was decided under.
    pub policy_hash: Digest,
    /// Hash of the previous receipt of this host's log; `null` for the first.
    pub prev_hash: Option<Digest>,
    /// Stable reason code (`ALLOW` for allows; see [`crate::reason`]).
    pub reason_code: String,
    /// `<host_id>:<seq>`.
    pub receipt_id: String,
    /// Risk level of the call.
    pub risk: RiskLevel,
    /// Position in the host's log, from 0; also the Merkle leaf index.
    pub seq: u64,
    /// The session, `null` before one exists (admission).
    pub session_id: Option<String>,
    /// Ed25519 signature (see the module doc); `null` when unsigned.
    pub signature: Option<Signature>,
    /// The task, when there is one.
    pub task_id: Option<String>,
    /// RFC 3339 time of the verdict.
    pub timestamp: String,
    /// ALLOW or DENY.
    pub verdict: Verdict,
    /// [`RECEIPT_VERSION`].
    pub version: u32,
}

/// Errors of receipts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// A field breaks a rule of the format.
    #[error("receipt {receipt_id}: {reason}")]
    Invalid {
        /// The receipt's id as written.
        receipt_id: String,
        /// The rule it breaks.
        reason: String,
    },
    /// The receipt could not be serialized.
    #[error("receipt {receipt_id}: encoding canonical JSON: {reason}")]
    Encode {
        /// The receipt's id as written.
        receipt_id: String,
        /// What failed.
        reason: String,
    },
}

/// A parent reference as the log needs it: the hash to record, and its
/// Lamport clock so the child's clock is greater.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parent {
    /// The parent receipt's hash.
    pub hash: Digest,
    /// The parent receipt's Lamport clock.
    pub lamport: u64,
}

impl Receipt {
    /// A receipt to fill with [`crate::HostLog::append_into`]: every field
    /// empty or zero. It is not a receipt of any log, and breaks the
    /// format's rules as it is ([`Receipt::check`] refuses it).
    pub fn blank() -> Self {
        Self {
            args_hash: Digest([0; 32]),
            call: String::new(),
            capability: String::new(),
            host_id: String::new(),
            input_hash: Digest([0; 32]),
            key_id: None,
            lamport: 0,
            parents: Vec::new(),
            policy_hash: Digest([0; 32]),
            prev_hash: None,
            reason_code: String::new(),
            receipt_id: String::new(),
            risk: RiskLevel::R1,
            seq: 0,
            session_id: None,
            signature: None,
            task_id: None,
            timestamp: String::new(),
            verdict: Verdict::Allow,
            version: RECEIPT_VERSION,
        }
    }

    /// The canonical form (RFC 8785) with every field as it is.
    ///
    /// # Errors
    ///
    /// Serialization failed (cannot happen for these field types; reported
    /// rather than assumed).
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, ReceiptError> {
        let mut out = Vec::with_capacity(1024);
        self.write_form(&mut out, self.signature.as_ref())?;
        Ok(out)
    }

    /// Appends the canonical form to `out` ([`Receipt::canonical_bytes`]
    /// without a buffer of its own).
    ///
    /// # Errors
    ///
    /// As [`Receipt::canonical_bytes`].
    pub fn write_canonical(&self, out: &mut Vec<u8>) -> Result<(), ReceiptError> {
        self.write_form(out, self.signature.as_ref())
    }

    /// Writes the canonical form with `signature` in place of the
    /// receipt's own, field by field in RFC 8785 key order: what serde's
    /// output of the struct is (a property test checks both against
    /// `hcp_contracts::jcs`), without rendering a digest through the
    /// string escaper or a signature through a copy of the receipt.
    fn write_form(
        &self,
        out: &mut Vec<u8>,
        signature: Option<&Signature>,
    ) -> Result<(), ReceiptError> {
        let encode = |e| self.encode_error(e);
        out.reserve(1024);
        write_head(
            out,
            &self.args_hash,
            &self.call,
            &self.capability,
            &self.host_id,
            &self.input_hash,
        )
        .map_err(encode)?;
        self.write_from_key_id(out, signature)
    }

    /// A failure to write the canonical form, naming the receipt.
    fn encode_error(&self, e: serde_json::Error) -> ReceiptError {
        ReceiptError::Encode {
            receipt_id: self.receipt_id.clone(),
            reason: e.to_string(),
        }
    }

    /// The canonical form after a [`Head`] made for it: from `key_id` on
    /// when it is signed, else from the `lamport` value on.
    fn write_rest(&self, out: &mut Vec<u8>, signed: bool) -> Result<(), ReceiptError> {
        if signed {
            self.write_from_key_id(out, self.signature.as_ref())
        } else {
            uint(out, self.lamport);
            self.write_from_parents(out, self.signature.as_ref())
        }
    }

    fn write_from_key_id(
        &self,
        out: &mut Vec<u8>,
        signature: Option<&Signature>,
    ) -> Result<(), ReceiptError> {
        let encode = |e| self.encode_error(e);
        out.extend_from_slice(b",\"key_id\":");
        // 16 lowercase hex digits (`KeyId`'s text form).
        opt_string(out, self.key_id.as_ref().map(KeyId::as_str)).map_err(encode)?;
        out.extend_from_slice(b",\"lamport\":");
        uint(out, self.lamport);
        self.write_from_parents(out, signature)
    }

    fn write_from_parents(
        &self,
        out: &mut Vec<u8>,
        signature: Option<&Signature>,
    ) -> Result<(), ReceiptError> {
        let encode = |e| self.encode_error(e);
        out.extend_from_slice(b",\"parents\":[");
        for (i, p) in self.parents.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            digest(out, p);
        }
        out.extend_from_slice(b"],\"policy_hash\":");
        digest(out, &self.policy_hash);
        out.extend_from_slice(b",\"prev_hash\":");
        opt_digest(out, self.prev_hash.as_ref());
        out.extend_from_slice(b",\"reason_code\":");
        string(out, &self.reason_code).map_err(encode)?;
        out.extend_from_slice(b",\"receipt_id\":");
        string(out, &self.receipt_id).map_err(encode)?;
        out.extend_from_slice(b",\"risk\":\"");
        out.extend_from_slice(self.risk.as_str().as_bytes());
        out.extend_from_slice(b"\",\"seq\":");
        uint(out, self.seq);
        out.extend_from_slice(b",\"session_id\":");
        opt_string(out, self.session_id.as_deref()).map_err(encode)?;
        out.extend_from_slice(b",\"signature\":");
        match signature {
            // 128 lowercase hex digits (`Signature`'s text form).
            Some(sig) => {
                let mut buf = [0u8; 130];
                buf[0] = b'"';
                hex_into(&sig.0, &mut buf[1..129]);
                buf[129] = b'"';
                out.extend_from_slice(&buf);
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"task_id\":");
        opt_string(out, self.task_id.as_deref()).map_err(encode)?;
        out.extend_from_slice(b",\"timestamp\":");
        string(out, &self.timestamp).map_err(encode)?;
        out.extend_from_slice(b",\"verdict\":\"");
        out.extend_from_slice(self.verdict.as_str().as_bytes());
        out.extend_from_slice(b"\",\"version\":");
        uint(out, u64::from(self.version));
        out.push(b'}');
        Ok(())
    }

    /// The receipt hash: SHA-256 of [`Receipt::canonical_bytes`].
    ///
    /// # Errors
    ///
    /// As [`Receipt::canonical_bytes`].
    pub fn hash(&self) -> Result<Digest, ReceiptError> {
        Ok(Digest::of(&self.canonical_bytes()?))
    }

    /// What the signature covers: [`RECEIPT_DOMAIN`] then the canonical form
    /// with `signature` null.
    ///
    /// # Errors
    ///
    /// As [`Receipt::canonical_bytes`].
    pub fn signing_bytes(&self) -> Result<Vec<u8>, ReceiptError> {
        let mut out = Vec::with_capacity(1024);
        out.extend_from_slice(RECEIPT_DOMAIN);
        self.write_form(&mut out, None)?;
        Ok(out)
    }

    /// Signs the receipt with `key`, setting `key_id` and `signature`.
    ///
    /// # Errors
    ///
    /// As [`Receipt::canonical_bytes`].
    pub fn sign(&mut self, key: &HostKey) -> Result<(), ReceiptError> {
        self.key_id = Some(key.key_id().clone());
        self.signature = None;
        self.signature = Some(key.sign(&self.signing_bytes()?));
        Ok(())
    }

    /// Whether the receipt carries a signature.
    pub fn is_signed(&self) -> bool {
        self.signature.is_some()
    }

    /// Verifies the signature with `key` (strictly; see
    /// [`PublicKey::verify_strict`]).
    ///
    /// # Errors
    ///
    /// Why the signature is refused; [`SignatureFailure::Missing`] when unsigned.
    pub fn verify_signature(&self, key: &PublicKey) -> Result<(), SignatureFailure> {
        let signature = self.signature.as_ref().ok_or(SignatureFailure::Missing)?;
        let bytes = self
            .signing_bytes()
            .map_err(|_| SignatureFailure::Mismatch(key.key_id().clone()))?;
        key.verify_strict(&bytes, signature)
    }

    /// This receipt as a parent of another.
    ///
    /// # Errors
    ///
    /// As [`Receipt::hash`].
    pub fn as_parent(&self) -> Result<Parent, ReceiptError> {
        Ok(Parent {
            hash: self.hash()?,
            lamport: self.lamport,
        })
    }
}

/// Lowercase hex of `bytes` into `out` (twice as long).
fn digest(out: &mut Vec<u8>, d: &Digest) {
    let mut buf = [0u8; 73];
    buf[0] = b'"';
    buf[1..8].copy_from_slice(crate::hash::PREFIX.as_bytes());
    hex_into(&d.0, &mut buf[8..72]);
    buf[72] = b'"';
    out.extend_from_slice(&buf);
}
fn opt_digest(out: &mut Vec<u8>, d: Option<&Digest>) {
    match d {
        Some(d) => digest(out, d),
        None => out.extend_from_slice(b"null"),
    }
}
// A string as serde_json writes it (and RFC 8785): quoted, with
// `"`, `\\` and control characters below U+0020 escaped, everything
// else as it is. Most strings here have none of those and are
// copied whole; the rest go through serde_json.
fn string(out: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(out, s)
    }
}
fn opt_string(out: &mut Vec<u8>, s: Option<&str>) -> Result<(), serde_json::Error> {
    match s {
        Some(s) => string(out, s),
        None => {
            out.extend_from_slice(b"null");
            Ok(())
        }
    }
}
// An integer in decimal, as serde_json (itoa) writes it.
fn uint(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(crate::ids::decimal(v, &mut [0u8; 20]));
}

/// The canonical form's first five fields, which no log's chain decides:
/// `{"args_hash":…,"call":…,"capability":…,"host_id":…,"input_hash":…`.
fn write_head(
    out: &mut Vec<u8>,
    args_hash: &Digest,
    call: &str,
    capability: &str,
    host_id: &str,
    input_hash: &Digest,
) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"args_hash\":");
    digest(out, args_hash);
    out.extend_from_slice(b",\"call\":");
    string(out, call)?;
    out.extend_from_slice(b",\"capability\":");
    string(out, capability)?;
    out.extend_from_slice(b",\"host_id\":");
    string(out, host_id)?;
    out.extend_from_slice(b",\"input_hash\":");
    digest(out, input_hash);
    Ok(())
}

/// The start of a receipt's canonical form that does not depend on the
/// log's chain: its first five fields, and `"key_id":null,"lamport":`
/// when it will not be signed; hashed ahead, on the thread that decided
/// the call, beside the log's writer, which then renders and hashes only
/// the rest of the receipt ([`crate::HostLog::append_into_after`]).
///
/// A head is made from the values the receipt is then made from (the
/// call's hashes, its name, the capability, the host) by the function
/// that renders them in [`Receipt::canonical_bytes`]; in debug builds the
/// log checks every receipt hashed from a head against its whole form.
#[derive(Clone)]
pub struct Head {
    /// SHA-256 after the head's bytes (its whole blocks, and the rest in
    /// its buffer).
    state: sha2::Sha256,
    /// Whether the head stops before `key_id` (the receipt is signed).
    signed: bool,
    /// Whether the head was rendered (a string serde_json cannot write
    /// leaves none: the receipt is then hashed whole, and refused).
    whole: bool,
}

impl std::fmt::Debug for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Head")
            .field("signed", &self.signed)
            .finish_non_exhaustive()
    }
}

impl Head {
    /// The head of a receipt with these fields; `signed` is whether the
    /// log will sign it (then its `key_id` is not known ahead). `scratch`
    /// is a buffer to render into (emptied first).
    pub fn new(
        args_hash: &Digest,
        call: &str,
        capability: &str,
        host_id: &str,
        input_hash: &Digest,
        signed: bool,
        scratch: &mut Vec<u8>,
    ) -> Self {
        use sha2::Digest as _;
        scratch.clear();
        let whole = write_head(scratch, args_hash, call, capability, host_id, input_hash).is_ok();
        if !signed {
            scratch.extend_from_slice(HEAD_UNSIGNED);
        }
        let mut state = sha2::Sha256::new();
        state.update(&scratch[..]);
        Self {
            state,
            signed,
            whole,
        }
    }

    /// Whether the head was made for a receipt signed one by one.
    pub fn signed(&self) -> bool {
        self.signed
    }

    /// The SHA-256 of the head's bytes followed by `rest`.
    fn finish(&self, rest: &[u8]) -> Digest {
        use sha2::Digest as _;
        let mut state = self.state.clone();
        state.update(rest);
        Digest(state.finalize().into())
    }
}

/// What an unsigned receipt's head ends with.
const HEAD_UNSIGNED: &[u8] = b",\"key_id\":null,\"lamport\":";

impl Receipt {
    /// The receipt's hash taken on from `head`: its canonical form after
    /// the head's bytes rendered into `scratch` (emptied first) and
    /// hashed on from the head's state. `None` when the head was made for
    /// another signing (the receipt is then hashed whole).
    ///
    /// # Errors
    ///
    /// As [`Receipt::canonical_bytes`].
    pub fn hash_after(
        &self,
        head: &Head,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<Digest>, ReceiptError> {
        let unsigned = self.signature.is_none() && self.key_id.is_none();
        if head.signed == unsigned || !head.whole {
            return Ok(None);
        }
        scratch.clear();
        self.write_rest(scratch, head.signed)?;
        let hash = head.finish(scratch);
        debug_assert_eq!(
            Some(hash),
            self.hash().ok(),
            "a receipt's head is not the start of its form"
        );
        Ok(Some(hash))
    }
}

fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0x0f)];
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Receipt {
        Receipt {
            args_hash: Digest::of(b"args"),
            call: "fs.open".into(),
            capability: "document-analysis@1.0.0".into(),
            host_id: "host-a".into(),
            input_hash: Digest::of(b"input"),
            key_id: None,
            lamport: 7,
            parents: vec![Digest::of(b"p")],
            policy_hash: Digest::of(b"policy"),
            prev_hash: Some(Digest::of(b"prev")),
            reason_code: "ALLOW".into(),
            receipt_id: "host-a:3".into(),
            risk: RiskLevel::R1,
            seq: 3,
            session_id: Some("s-1".into()),
            signature: None,
            task_id: None,
            timestamp: "2026-01-02T03:04:05.678Z".into(),
            verdict: Verdict::Allow,
            version: RECEIPT_VERSION,
        }
    }

    #[test]
    fn canonical_form_is_rfc_8785() {
        let mut r = sample();
        let jcs = hcp_contracts::jcs::canonical_bytes(&r).expect("jcs");
        assert_eq!(r.canonical_bytes().expect("bytes"), jcs);
        r.sign(&HostKey::from_seed(&[3; 32])).expect("sign");
        let jcs = hcp_contracts::jcs::canonical_bytes(&r).expect("jcs");
        assert_eq!(r.canonical_bytes().expect("bytes"), jcs);
        let text = String::from_utf8(jcs).expect("utf8");
        assert!(text.starts_with(r#"{"args_hash":"sha256:"#), "{text}");
        assert!(
            text.ends_with(r#","verdict":"ALLOW","version":1}"#),
            "{text}"
        );
    }

    fn head_of(r: &Receipt, capability: &str, signed: bool) -> Head {
        Head::new(
            &r.args_hash,
            &r.call,
            capability,
            &r.host_id,
            &r.input_hash,
            signed,
            &mut Vec::new(),
        )
    }

    /// A receipt's hash taken on from a head made from its fields is its
    /// hash, signed or not; a head made for the other signing is not
    /// taken on.
    #[test]
    fn a_head_made_ahead_gives_the_receipts_hash() {
        let mut r = sample();
        let mut scratch = Vec::new();
        let unsigned = head_of(&r, &r.capability, false);
        let signed = head_of(&r, &r.capability, true);
        assert_eq!(
            r.hash_after(&unsigned, &mut scratch),
            Ok(Some(r.hash().expect("hash")))
        );
        assert_eq!(r.hash_after(&signed, &mut scratch), Ok(None));
        r.sign(&HostKey::from_seed(&[3; 32])).expect("sign");
        assert_eq!(
            r.hash_after(&signed, &mut scratch),
            Ok(Some(r.hash().expect("hash")))
        );
        assert_eq!(r.hash_after(&unsigned, &mut scratch), Ok(None));
    }

    /// A head made from other values than the receipt's is caught (in
    /// debug builds, as every test runs) rather than giving a hash of
    /// something else.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "a receipt's head is not the start of its form")]
    fn a_head_made_from_other_values_is_caught() {
        let r = sample();
        let other = head_of(&r, "document-analysis@1.0.1", false);
        let _ = r.hash_after(&other, &mut Vec::new());
    }

    #[test]
    fn signature_covers_everything_but_itself() {
        let key = HostKey::from_seed(&[3; 32]);
        let mut r = sample();
        r.sign(&key).expect("sign");
        assert_eq!(r.verify_signature(key.public()), Ok(()));
        let mut changed = r.clone();
        changed.lamport += 1;
        assert!(changed.verify_signature(key.public()).is_err());
        let unsigned_hash = sample().hash().expect("hash");
        assert_ne!(
            r.hash().expect("hash"),
            unsigned_hash,
            "hash covers the signature"
        );
    }

    #[test]
    fn rules() {
        type Mutation = fn(&mut Receipt);
        let cases: Vec<(Mutation, &str)> = vec![
            (|r| r.version = 2, "version 2 is not supported (expected 1)"),
            (
                |r| r.receipt_id = "x".into(),
                "receipt_id must be \"host-a:3\" (host_id:seq), not \"x\"",
            ),
            (
                |r| r.lamport = 1 << 53,
                "lamport 9007199254740992 is above 2^53 - 1",
            ),
            (
                |r| r.reason_code = "DENY_ARGS_INVALID".into(),
                "an ALLOW carries reason_code ALLOW, not DENY_ARGS_INVALID",
            ),
            (
                |r| r.verdict = Verdict::Deny,
                "a DENY cannot carry reason_code ALLOW",
            ),
            (|r| r.prev_hash = None, "seq 3 needs a prev_hash"),
            (
                |r| r.parents.push(r.parents[0]),
                "parent sha256:148de9c5a7a44d19e56cd9ae1a554bf67847afb0c58f6e12fa29ac7ddfca9940 is named twice",
            ),
            (
                |r| r.capability = "nover".into(),
                "capability \"nover\" must be name@version",
            ),
            (
                |r| r.host_id = "../x".into(),
                "host id \"../x\" must be 1 to 64 characters from [A-Za-z0-9._-], not . or ..",
            ),
        ];
        assert_eq!(sample().check(), Ok(()));
        for (mutate, message) in cases {
            let mut r = sample();
            mutate(&mut r);
            let err = r.check().expect_err(message);
            assert_eq!(
                err.to_string(),
                format!("receipt {}: {message}", r.receipt_id)
            );
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut value = serde_json::to_value(sample()).expect("value");
        value["extra"] = serde_json::json!(1);
        let err = serde_json::from_value::<Receipt>(value).expect_err("unknown");
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
    }
}
