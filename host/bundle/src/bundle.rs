//! A bundle in memory, every entry checked against the layout.

use crate::container::{self, Container};
use crate::error::BundleError;
use crate::layout::{
    COMPONENT, EntryKind, Limits, MANIFEST, MANIFEST_DIR_VAR, PublisherName, SIGNATURE, WIT_DIR,
    bundled_dir, check_path,
};
use crate::signature::{self, SignatureFile, SignatureStatus};
use crate::tar_io;
use crate::wit::WitPackage;
use hcp_contracts::manifest::{
    Access, HOST_WIT_PACKAGE, HOST_WIT_VERSION, HOST_WIT_WORLD, ManifestDoc,
};
use hcp_receipts::HostKey;
use serde_json::Value;
use std::collections::BTreeMap;

/// A bundle whose layout, manifest shape, component digest and WIT package
/// have been checked. Its signature is checked on demand
/// ([`Bundle::signature_status`]), so that a reviewer can see an invalid one.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Every entry but `signature.json`, by path.
    entries: BTreeMap<String, Vec<u8>>,
    manifest: Value,
    doc: ManifestDoc,
    manifest_digest: String,
    component_digest: String,
    wit: WitPackage,
    data_dirs: Vec<String>,
    signature: Option<SignatureFile>,
}

impl Bundle {
    /// Reads a bundle archive. Refuses anything that is not a plain ustar
    /// archive of regular files with safe paths within `limits`, and any
    /// entry the layout does not expect (see [`crate::layout`]).
    ///
    /// # Errors
    ///
    /// The first problem found, with an exact message.
    pub fn read(bytes: &[u8], limits: &Limits) -> Result<Self, BundleError> {
        Self::read_with_container(bytes, limits).map(|(bundle, _)| bundle)
    }

    /// [`Bundle::read`], also saying whether the file was compressed.
    ///
    /// # Errors
    ///
    /// As [`Bundle::read`].
    pub fn read_with_container(
        bytes: &[u8],
        limits: &Limits,
    ) -> Result<(Self, Container), BundleError> {
        let (archive, container) = container::decode(bytes, limits)?;
        let entries = tar_io::read(&archive, limits)?
            .into_iter()
            .map(|(p, b)| (p, b.to_vec()))
            .collect();
        Ok((Self::from_entries(entries)?, container))
    }

    /// Checks entries as [`Bundle::read`] does after the tar layer.
    pub(crate) fn from_entries(
        mut entries: BTreeMap<String, Vec<u8>>,
    ) -> Result<Self, BundleError> {
        for path in entries.keys() {
            check_path(path)?;
        }
        let signature = entries
            .remove(SIGNATURE)
            .map(|bytes| {
                serde_json::from_slice::<SignatureFile>(&bytes)
                    .map_err(|e| BundleError::Signature(e.to_string()))
            })
            .transpose()?;
        let manifest_bytes = entries.get(MANIFEST).ok_or(BundleError::Missing {
            what: "manifest.json",
        })?;
        let manifest: Value = serde_json::from_slice(manifest_bytes)
            .map_err(|e| BundleError::Manifest(format!("not valid JSON: {e}")))?;
        let doc: ManifestDoc = serde_json::from_value(manifest.clone())
            .map_err(|e| BundleError::Manifest(e.to_string()))?;
        if doc.component.path != COMPONENT {
            return Err(BundleError::Manifest(format!(
                "component.path is {:?}; in a bundle it must be {COMPONENT:?}",
                doc.component.path
            )));
        }
        let Some(pinned) = doc.component.digest.clone() else {
            return Err(BundleError::Manifest(
                "component.digest is required in a bundle".into(),
            ));
        };
        let component = entries.get(COMPONENT).ok_or(BundleError::Missing {
            what: "component.wasm",
        })?;
        let component_digest = hcp_contracts::jcs::sha256_bytes_tagged(component);
        if component_digest != pinned {
            return Err(BundleError::ComponentDigest {
                pinned,
                actual: component_digest,
            });
        }
        let wit = wit_package(&entries)?;
        let data_dirs = data_dirs(&doc)?;
        for path in entries.keys() {
            let expected = match EntryKind::of(path) {
                EntryKind::Manifest | EntryKind::Component | EntryKind::Wit => true,
                EntryKind::Signature => false,
                EntryKind::Other => data_dirs.iter().any(|d| {
                    path.strip_prefix(d.as_str())
                        .is_some_and(|r| r.starts_with('/'))
                }),
            };
            if !expected {
                return Err(BundleError::Unexpected { path: path.clone() });
            }
        }
        let manifest_digest =
            hcp_contracts::jcs::sha256_tagged(&manifest).map_err(BundleError::Manifest)?;
        Ok(Self {
            entries,
            manifest,
            doc,
            manifest_digest,
            component_digest,
            wit,
            data_dirs,
            signature,
        })
    }

    /// The bundle file: the archive, zstd-compressed when that pays (see
    /// [`crate::container`]). Deterministic: the same bundle always gives
    /// the same bytes.
    ///
    /// # Errors
    ///
    /// Not expected for a checked bundle.
    pub fn to_bytes(&self) -> Result<Vec<u8>, BundleError> {
        container::encode(self.to_archive()?)
    }

    /// The uncompressed tar archive.
    ///
    /// # Errors
    ///
    /// Not expected for a checked bundle.
    pub fn to_archive(&self) -> Result<Vec<u8>, BundleError> {
        let mut all = self.entries.clone();
        if let Some(sig) = &self.signature {
            let mut bytes = serde_json::to_vec_pretty(sig)
                .map_err(|e| BundleError::Signature(e.to_string()))?;
            bytes.push(b'\n');
            all.insert(SIGNATURE.to_owned(), bytes);
        }
        tar_io::write(&all)
    }

    /// `name@version` as the manifest declares it.
    pub fn id(&self) -> String {
        format!(
            "{}@{}",
            self.doc.capability.name, self.doc.capability.version
        )
    }

    /// The manifest document, key order as written.
    pub fn manifest(&self) -> &Value {
        &self.manifest
    }

    /// The manifest, typed (not yet checked beyond its shape: see
    /// `hcp_contracts::manifest::from_value`).
    pub fn doc(&self) -> &ManifestDoc {
        &self.doc
    }

    /// `sha256:` of the canonical (RFC 8785) manifest.
    pub fn manifest_digest(&self) -> &str {
        &self.manifest_digest
    }

    /// The component's bytes.
    pub fn component(&self) -> &[u8] {
        self.entries.get(COMPONENT).map_or(&[], Vec::as_slice)
    }

    /// `sha256:` of the component (equal to the manifest's pin).
    pub fn component_digest(&self) -> &str {
        &self.component_digest
    }

    /// The bundled WIT package.
    pub fn wit(&self) -> &WitPackage {
        &self.wit
    }

    /// Whether the bundled WIT files are exactly the host's own.
    pub fn wit_is_hosts(&self) -> bool {
        let bundled: Vec<(&str, &[u8])> = self
            .entries
            .iter()
            .filter(|(p, _)| EntryKind::of(p) == EntryKind::Wit)
            .map(|(p, b)| (p.trim_start_matches("wit/"), b.as_slice()))
            .collect();
        let host: Vec<(&str, &[u8])> = crate::wit::HOST_WIT
            .iter()
            .map(|(n, t)| (*n, t.as_bytes()))
            .collect();
        bundled == host
    }

    /// The directories of bundled data (`${manifest_dir}/<dir>` grants).
    pub fn data_dirs(&self) -> &[String] {
        &self.data_dirs
    }

    /// Every entry but `signature.json` (manifest, component, WIT, data),
    /// by path: what an install directory holds.
    pub fn entries(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.entries
    }

    /// `sha256:` of every entry the signature pins by file: all but
    /// `manifest.json` (pinned canonically) and `signature.json`.
    pub fn file_digests(&self) -> BTreeMap<String, String> {
        self.entries
            .iter()
            .filter(|(p, _)| p.as_str() != MANIFEST)
            .map(|(p, b)| (p.clone(), hcp_contracts::jcs::sha256_bytes_tagged(b)))
            .collect()
    }

    /// The signature file, if the bundle is signed.
    pub fn signature(&self) -> Option<&SignatureFile> {
        self.signature.as_ref()
    }

    /// Signs the bundle as `publisher` with `key`, replacing any signature.
    ///
    /// # Errors
    ///
    /// Not expected: the statement holds only strings.
    pub fn sign(&mut self, key: &HostKey, publisher: PublisherName) -> Result<(), BundleError> {
        let file = signature::sign(
            key,
            publisher,
            self.manifest_digest.clone(),
            self.file_digests(),
        )
        .map_err(BundleError::Signature)?;
        self.signature = Some(file);
        Ok(())
    }

    /// Whether the bundle is signed, and whether the signature covers
    /// exactly this bundle and verifies (not whether the key is trusted).
    pub fn signature_status(&self) -> SignatureStatus {
        match &self.signature {
            None => SignatureStatus::Unsigned,
            Some(file) => signature::verify(file, &self.manifest_digest, &self.file_digests()),
        }
    }

    /// Checks that the manifest's world is this host's world at a version
    /// the host runs (same major, not newer), and that the bundled WIT
    /// package is that very version.
    ///
    /// # Errors
    ///
    /// A message naming both versions.
    pub fn check_world(&self) -> Result<(), String> {
        let world = &self.doc.component.world;
        let parsed = world
            .split_once('@')
            .and_then(|(path, v)| Some((path.split_once('/')?, semver::Version::parse(v).ok()?)));
        let Some(((package, name), version)) = parsed else {
            return Err(format!(
                "component.world {world:?} is not <package>/<world>@<version>"
            ));
        };
        if package != HOST_WIT_PACKAGE || name != HOST_WIT_WORLD {
            return Err(format!(
                "the bundle targets world {package}/{name}; this host runs components of world \
                 {HOST_WIT_PACKAGE}/{HOST_WIT_WORLD}"
            ));
        }
        let host = semver::Version::parse(HOST_WIT_VERSION).map_err(|e| e.to_string())?;
        if version.major != host.major || version > host {
            return Err(format!(
                "the bundle targets {package}@{version} but this host implements {package}@{host}: \
                 a host runs components of the same major version, not newer than its own"
            ));
        }
        if self.wit.name != package || self.wit.version != version {
            return Err(format!(
                "the bundle's WIT package is {} but its manifest targets {package}@{version}",
                self.wit.id()
            ));
        }
        Ok(())
    }
}

/// The WIT files: at least one, UTF-8, one package.
fn wit_package(entries: &BTreeMap<String, Vec<u8>>) -> Result<WitPackage, BundleError> {
    let mut files = Vec::new();
    for (path, bytes) in entries {
        if EntryKind::of(path) != EntryKind::Wit {
            continue;
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| BundleError::Wit(format!("{path}: not UTF-8: {e}")))?;
        files.push((path.trim_start_matches("wit/"), text));
    }
    if files.is_empty() {
        return Err(BundleError::Missing {
            what: "WIT package (wit/*.wit)",
        });
    }
    WitPackage::parse(files).map_err(BundleError::Wit)
}

/// The bundled data directories the manifest grants, checked: read-only,
/// a subdirectory, not overlapping the bundle's own entries.
pub(crate) fn data_dirs(doc: &ManifestDoc) -> Result<Vec<String>, BundleError> {
    let mut dirs = Vec::new();
    for (i, grant) in doc.grants.filesystem.iter().enumerate() {
        let Some(dir) = bundled_dir(&grant.path) else {
            continue;
        };
        let at = format!("grants.filesystem[{i}] {}", grant.path);
        if dir.is_empty() {
            return Err(BundleError::Manifest(format!(
                "{at}: a bundle cannot grant {MANIFEST_DIR_VAR} itself (its own install \
                 directory); grant a subdirectory"
            )));
        }
        if grant.access != Access::ReadOnly {
            return Err(BundleError::Manifest(format!(
                "{at} is {}: a bundle ships read-only data only; grant a directory the \
                 operator provides for anything written",
                grant.access.as_str()
            )));
        }
        check_path(dir).map_err(|e| BundleError::Manifest(format!("{at}: {e}")))?;
        let first = dir.split('/').next().unwrap_or(dir);
        if [MANIFEST, COMPONENT, SIGNATURE, WIT_DIR].contains(&first) {
            return Err(BundleError::Manifest(format!(
                "{at} overlaps the bundle's own entries ({first})"
            )));
        }
        dirs.push(dir.to_owned());
    }
    Ok(dirs)
}
