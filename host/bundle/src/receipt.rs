//! Install receipts: what was installed, from which bundle (or from a
//! manifest, for local development), signed by whom (or unsigned), with
//! which grants, accepted under which policy; signed by the installing
//! host's key and stored with the install (`install-receipt.json`).
//!
//! The host's signature covers the RFC 8785 canonical bytes of `receipt`.

use crate::signature::Signer;
use hcp_contracts::RiskLevel;
use hcp_contracts::manifest::{GrantsDoc, SafetyEnvelope};
use hcp_receipts::{HostKey, KeyId, PublicKey, Signature};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `format` of an install receipt.
pub const RECEIPT_FORMAT: &str = "hcp-install-receipt/1";
/// The file an install directory keeps it in.
pub const RECEIPT_FILE: &str = "install-receipt.json";

/// The record of one install.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallRecord {
    /// [`RECEIPT_FORMAT`].
    pub format: String,
    /// Capability name.
    pub capability: String,
    /// Version.
    pub version: String,
    /// RFC 3339 UTC.
    pub installed_at: String,
    /// The installing host.
    pub host_id: String,
    /// `sha256:` of the bundle file as installed; `None` when installed
    /// from a plugin's manifest without a bundle (local development: the
    /// record is then `unsigned`, and neither the install policy nor the
    /// installed versions were consulted).
    pub bundle: Option<String>,
    /// `sha256:` of the canonical manifest.
    pub manifest: String,
    /// `sha256:` of the component.
    pub component: String,
    /// `sha256:` of every other file, by path (WIT, data).
    pub files: BTreeMap<String, String>,
    /// `component.world`.
    pub world: String,
    /// The publisher whose trusted signature was verified; `None` when
    /// unsigned.
    pub publisher: Option<PublisherRecord>,
    /// Installed without a signature (`--allow-unsigned`).
    pub unsigned: bool,
    /// The grants as the manifest writes them.
    pub grants: GrantsDoc,
    /// The declaration's risk ceiling.
    pub risk_ceiling: RiskLevel,
    /// The declaration's default safety envelope.
    pub safety_envelope: SafetyEnvelope,
    /// The interfaces the component imports (all allowed by the audit).
    pub imports: Vec<String>,
    /// `sha256:` of the canonical install policy it was checked against;
    /// `None` when it was not (an install from a manifest).
    pub install_policy: Option<String>,
    /// The highest version installed before, when there was one.
    pub previous: Option<String>,
    /// Widening changes the operator accepted (`--accept-new-grants`).
    pub accepted_widening: Vec<String>,
    /// The OCI registry the bundle was fetched from (`hcp install
    /// oci://...`); absent for a bundle file or a manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<RegistryOrigin>,
}

/// Where an installed bundle came from in an OCI registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryOrigin {
    /// `host[:port]`.
    pub registry: String,
    /// The repository.
    pub repository: String,
    /// The tag, when one was resolved (once, to `digest`); `None` for an
    /// install by digest.
    pub tag: Option<String>,
    /// `sha256:` of the image manifest everything was fetched by.
    pub digest: String,
}

/// A publisher as recorded in a receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublisherRecord {
    /// Name.
    pub name: String,
    /// Key id.
    pub key_id: KeyId,
    /// Public key.
    pub public_key: PublicKey,
}

impl From<&Signer> for PublisherRecord {
    fn from(s: &Signer) -> Self {
        Self {
            name: s.publisher.to_string(),
            key_id: s.key_id.clone(),
            public_key: s.public_key.clone(),
        }
    }
}

/// `install-receipt.json`: the record and the host's signature over it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallReceipt {
    /// The record.
    pub receipt: InstallRecord,
    /// The host key that signed.
    pub key_id: KeyId,
    /// Ed25519 over the canonical bytes of `receipt`.
    pub signature: Signature,
}

impl InstallReceipt {
    /// Signs `receipt` with the host key.
    ///
    /// # Errors
    ///
    /// The record cannot be canonicalized (not expected).
    pub fn sign(receipt: InstallRecord, key: &HostKey) -> Result<Self, String> {
        let bytes = hcp_contracts::jcs::canonical_bytes(&receipt)?;
        Ok(Self {
            signature: key.sign(&bytes),
            key_id: key.key_id().clone(),
            receipt,
        })
    }

    /// Verifies the host's signature with `key`.
    ///
    /// # Errors
    ///
    /// Another key, or a changed record.
    pub fn verify(&self, key: &PublicKey) -> Result<(), String> {
        if &self.key_id != key.key_id() {
            return Err(format!(
                "signed by key {}, not this host's key {}",
                self.key_id,
                key.key_id()
            ));
        }
        let bytes = hcp_contracts::jcs::canonical_bytes(&self.receipt)?;
        key.verify_strict(&bytes, &self.signature)
            .map_err(|e| e.to_string())
    }

    /// Pretty JSON and a newline.
    ///
    /// # Errors
    ///
    /// Not expected.
    pub fn to_json(&self) -> Result<Vec<u8>, String> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
