//! Publisher signatures (`signature.json`) and the trust decision.
//!
//! # What is signed
//!
//! The Ed25519 signature covers the RFC 8785 (JCS) canonical bytes of the
//! `signed` object:
//!
//! ```json
//! {
//!   "context": "hcp-bundle/1",
//!   "publisher": "hcp-examples",
//!   "key_id": "0123456789abcdef",
//!   "manifest": "sha256:<hex of the canonical manifest>",
//!   "files": { "component.wasm": "sha256:<hex>", "wit/log.wit": "sha256:<hex>", ... }
//! }
//! ```
//!
//! `manifest` pins the canonical manifest (which pins the component's
//! digest); `files` pins every other entry but `signature.json` itself (the
//! WIT package and bundled data), so nothing in a signed bundle can change
//! unnoticed. `publisher` and `key_id` are signed too: renaming the
//! publisher breaks the signature. `context` separates these signatures from
//! anything else the key might sign.
//!
//! Verification recomputes `manifest` and `files` from the bundle, so a
//! changed entry is named exactly; then checks the signature with
//! `verify_strict`. Whether the key is trusted is a separate question
//! ([`check_trust`]).

use crate::layout::PublisherName;
use hcp_receipts::keys::SignatureFailure;
use hcp_receipts::{HostKey, KeyId, PublicKey, Signature};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `format` of `signature.json`.
pub const SIGNATURE_FORMAT: &str = "hcp-bundle-signature/1";
/// `signed.context`: what the signature is for.
pub const SIGNING_CONTEXT: &str = "hcp-bundle/1";

/// `signature.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    /// [`SIGNATURE_FORMAT`].
    pub format: String,
    /// What the signature covers.
    pub signed: Signed,
    /// The signer's public key (`ed25519:<hex>`); trust is decided by the
    /// host's trust store, not by this field.
    pub public_key: PublicKey,
    /// Ed25519 over the canonical bytes of `signed`.
    pub signature: Signature,
}

/// The signed statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signed {
    /// [`SIGNING_CONTEXT`].
    pub context: String,
    /// Who signs.
    pub publisher: PublisherName,
    /// The id of the signing key.
    pub key_id: KeyId,
    /// `sha256:` of the canonical manifest.
    pub manifest: String,
    /// `sha256:` of every other entry but `signature.json`, by path.
    pub files: BTreeMap<String, String>,
}

impl Signed {
    /// The bytes the signature covers.
    ///
    /// # Errors
    ///
    /// Not expected: the statement holds only strings.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, String> {
        hcp_contracts::jcs::canonical_bytes(self)
    }
}

/// Who signed a bundle whose signature verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signer {
    /// The publisher's name as signed.
    pub publisher: PublisherName,
    /// The key that signed.
    pub public_key: PublicKey,
    /// Its id.
    pub key_id: KeyId,
}

/// The state of a bundle's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureStatus {
    /// No `signature.json`.
    Unsigned,
    /// The signature covers this bundle exactly and verifies.
    Verified(Box<Signer>),
    /// It does not; the message says why.
    Invalid(String),
}

/// Signs a statement.
pub(crate) fn sign(
    key: &HostKey,
    publisher: PublisherName,
    manifest: String,
    files: BTreeMap<String, String>,
) -> Result<SignatureFile, String> {
    let signed = Signed {
        context: SIGNING_CONTEXT.to_owned(),
        publisher,
        key_id: key.key_id().clone(),
        manifest,
        files,
    };
    let signature = key.sign(&signed.canonical_bytes()?);
    Ok(SignatureFile {
        format: SIGNATURE_FORMAT.to_owned(),
        signed,
        public_key: key.public().clone(),
        signature,
    })
}

/// Verifies `file` against what the bundle holds.
pub(crate) fn verify(
    file: &SignatureFile,
    manifest: &str,
    files: &BTreeMap<String, String>,
) -> SignatureStatus {
    match check(file, manifest, files) {
        Ok(()) => SignatureStatus::Verified(Box::new(Signer {
            publisher: file.signed.publisher.clone(),
            public_key: file.public_key.clone(),
            key_id: file.public_key.key_id().clone(),
        })),
        Err(reason) => SignatureStatus::Invalid(reason),
    }
}

fn check(
    file: &SignatureFile,
    manifest: &str,
    files: &BTreeMap<String, String>,
) -> Result<(), String> {
    let s = &file.signed;
    if s.context != SIGNING_CONTEXT {
        return Err(format!(
            "signature.json signs for {:?}, not {SIGNING_CONTEXT:?}",
            s.context
        ));
    }
    if &s.key_id != file.public_key.key_id() {
        return Err(format!(
            "signature.json names key {} but its public key has id {}",
            s.key_id,
            file.public_key.key_id()
        ));
    }
    if s.manifest != manifest {
        return Err(format!(
            "signature.json signs manifest {}, but this bundle's manifest is {manifest}: \
             the manifest changed after signing, or the signature belongs to another bundle",
            s.manifest
        ));
    }
    for (path, digest) in files {
        match s.files.get(path) {
            None => {
                return Err(format!(
                    "signature.json does not sign {path}, which the bundle holds"
                ));
            }
            Some(signed) if signed != digest => {
                return Err(format!(
                    "signature.json signs {path} as {signed}, but the bundle's is {digest}: \
                     it changed after signing"
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(path) = s.files.keys().find(|p| !files.contains_key(*p)) {
        return Err(format!(
            "signature.json signs {path}, which the bundle does not hold"
        ));
    }
    let bytes = s.canonical_bytes()?;
    let who = format!(
        "the signature of publisher {:?} (key {})",
        s.publisher.as_str(),
        s.key_id
    );
    file.public_key
        .verify_strict(&bytes, &file.signature)
        .map_err(|e| match e {
            SignatureFailure::Mismatch(_) => format!(
                "{who} does not verify: signature.json was changed, or another key signed it"
            ),
            other => format!("{who} is refused: {other}"),
        })
}

/// A publisher this host trusts: a name and its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrustedKey {
    /// The publisher's name.
    pub publisher: PublisherName,
    /// Its key.
    pub public_key: PublicKey,
}

/// Why a signer is not trusted on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// The key is trusted, under another publisher's name.
    #[error(
        "the bundle is signed by key {key_id} as publisher {:?}, but this host trusts that key as {:?}",
        .signed_as.as_str(),
        .trusted_as.as_str()
    )]
    KeyUnderOtherName {
        /// The signing key.
        key_id: KeyId,
        /// The name it signed with.
        signed_as: PublisherName,
        /// The name this host trusts it under.
        trusted_as: PublisherName,
    },
    /// The publisher is trusted, with another key.
    #[error(
        "the bundle is signed as publisher {:?} by key {key_id}, but this host trusts {:?} with key {trusted_key} only; \
         a name belongs to one key: another publisher signs under a name of its own \
         (`hcp bundle sign --publisher NAME`)",
        .publisher.as_str(),
        .publisher.as_str()
    )]
    OtherKey {
        /// The publisher.
        publisher: PublisherName,
        /// The signing key.
        key_id: KeyId,
        /// The key this host trusts for it.
        trusted_key: KeyId,
    },
    /// Neither the key nor the publisher is trusted.
    #[error(
        "publisher {:?} (key {key_id}) is not trusted on this host; get the publisher's public key \
         from the publisher and add it with `hcp trust add {publisher} <public key>` (the key, or \
         the file holding it: `hcp init` writes a host's as keys/publisher.pub)",
        .publisher.as_str()
    )]
    Untrusted {
        /// The publisher.
        publisher: PublisherName,
        /// The signing key.
        key_id: KeyId,
    },
}

/// Whether `signer` is one of the `trusted` publishers: its key must be
/// trusted, under the very name it signed with.
///
/// # Errors
///
/// Why not, naming the publisher and key.
pub fn check_trust<'t>(
    signer: &Signer,
    trusted: &'t [TrustedKey],
) -> Result<&'t TrustedKey, TrustError> {
    if let Some(t) = trusted.iter().find(|t| t.public_key == signer.public_key) {
        if t.publisher == signer.publisher {
            return Ok(t);
        }
        return Err(TrustError::KeyUnderOtherName {
            key_id: signer.key_id.clone(),
            signed_as: signer.publisher.clone(),
            trusted_as: t.publisher.clone(),
        });
    }
    if let Some(t) = trusted.iter().find(|t| t.publisher == signer.publisher) {
        return Err(TrustError::OtherKey {
            publisher: signer.publisher.clone(),
            key_id: signer.key_id.clone(),
            trusted_key: t.public_key.key_id().clone(),
        });
    }
    Err(TrustError::Untrusted {
        publisher: signer.publisher.clone(),
        key_id: signer.key_id.clone(),
    })
}
