//! The artifact a bundle becomes in a registry, and reading one back.
//!
//! An OCI image manifest in the layout of the CNCF Wasm OCI artifact
//! (TAG Runtime): config `application/vnd.wasm.config.v0+json`, and the
//! component as the first layer, `application/wasm`, so that wkg, Wassette
//! or skopeo find the component where they look for it. Every other entry
//! of the bundle follows as a layer of its own with an HCP media type and
//! its path as `org.opencontainers.image.title`:
//!
//! | layer | media type |
//! |---|---|
//! | `component.wasm` | `application/wasm` |
//! | `manifest.json` | `application/vnd.hcp.bundle.manifest.v1+json` |
//! | `signature.json` (when signed) | `application/vnd.hcp.bundle.signature.v1+json` |
//! | `wit/*.wit`, bundled data | `application/vnd.hcp.bundle.file.v1` |
//!
//! Extra layers rather than a referrer: distribution 2.8 (Debian's
//! `docker-registry`) has no referrers API, and one manifest pins every
//! byte (its digest is all an operator needs to name). The signature
//! travels inside the artifact it signs, as in a bundle file.
//!
//! Reading ([`Plan::read`]) checks the whole manifest before a blob is
//! asked for: the media types, one component and one bundle manifest,
//! every path by the bundle's own rule, every declared size against the
//! bundle's limits for that kind of entry, the total and the count.

use crate::error::{OciError, printable};
use crate::reference::check_digest;
use hcp_bundle::layout::{COMPONENT, MANIFEST, SIGNATURE, check_path};
use hcp_bundle::{Bundle, Limits};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The OCI image manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The Wasm OCI artifact's config.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component's layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The bundle's `manifest.json`.
pub const HCP_MANIFEST_MEDIA_TYPE: &str = "application/vnd.hcp.bundle.manifest.v1+json";
/// The bundle's `signature.json`.
pub const HCP_SIGNATURE_MEDIA_TYPE: &str = "application/vnd.hcp.bundle.signature.v1+json";
/// Any other entry of the bundle (WIT files, bundled data).
pub const HCP_FILE_MEDIA_TYPE: &str = "application/vnd.hcp.bundle.file.v1";
/// The annotation naming a layer's path in the bundle.
pub const TITLE: &str = "org.opencontainers.image.title";
/// The manifest annotation naming the capability (`name@version`).
pub const CAPABILITY_ANNOTATION: &str = "dev.hcp.capability";

/// Largest image manifest read: a bundle's 4,096 entries at a few hundred
/// bytes each stay far below it.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the blob is.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
    /// Annotations (the layer's path as [`TITLE`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An OCI image manifest (the fields this host writes and reads).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// 2.
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What a push uploads: blobs by digest, then the manifest.
#[derive(Debug)]
pub struct Artifact {
    /// The config blob's bytes.
    pub config: Vec<u8>,
    /// Each layer's descriptor and bytes, in manifest order.
    pub layers: Vec<(Descriptor, Vec<u8>)>,
    /// The image manifest's bytes (what its digest is taken of).
    pub manifest: Vec<u8>,
    /// `sha256:` of [`Artifact::manifest`].
    pub digest: String,
}

fn sha256(bytes: &[u8]) -> String {
    hcp_contracts::jcs::sha256_bytes_tagged(bytes)
}

/// The artifact for `bundle`. Deterministic: the same bundle always gives
/// the same manifest digest.
///
/// # Errors
///
/// Not expected for a checked bundle (serializing fails).
pub fn artifact(bundle: &Bundle) -> Result<Artifact, OciError> {
    let signature = signature_bytes(bundle)?;
    let layer = |path: &str, media_type: &str, bytes: &[u8]| {
        let descriptor = Descriptor {
            media_type: media_type.to_owned(),
            digest: sha256(bytes),
            size: bytes.len() as u64,
            annotations: BTreeMap::from([(TITLE.to_owned(), path.to_owned())]),
        };
        (descriptor, bytes.to_vec())
    };
    let entries = bundle.entries();
    let get = |path: &str| {
        entries
            .get(path)
            .ok_or_else(|| OciError::Local(format!("the bundle has no {path}")))
    };
    let mut layers = vec![
        layer(COMPONENT, WASM_LAYER_MEDIA_TYPE, get(COMPONENT)?),
        layer(MANIFEST, HCP_MANIFEST_MEDIA_TYPE, get(MANIFEST)?),
    ];
    if let Some(signature) = &signature {
        layers.push(layer(SIGNATURE, HCP_SIGNATURE_MEDIA_TYPE, signature));
    }
    for (path, bytes) in entries {
        if path != COMPONENT && path != MANIFEST {
            layers.push(layer(path, HCP_FILE_MEDIA_TYPE, bytes));
        }
    }
    // The Wasm OCI artifact's config: what the component is for.
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [bundle.component_digest()],
    }))
    .map_err(|e| OciError::Local(e.to_string()))?;
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        config: Descriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.to_owned(),
            digest: sha256(&config),
            size: config.len() as u64,
            annotations: BTreeMap::new(),
        },
        layers: layers.iter().map(|(d, _)| d.clone()).collect(),
        annotations: BTreeMap::from([(CAPABILITY_ANNOTATION.to_owned(), bundle.id())]),
    };
    let manifest = serde_json::to_vec(&manifest).map_err(|e| OciError::Local(e.to_string()))?;
    Ok(Artifact {
        config,
        layers,
        digest: sha256(&manifest),
        manifest,
    })
}

/// `signature.json` as a bundle file holds it (as [`Bundle::to_archive`]
/// writes it), when the bundle is signed.
fn signature_bytes(bundle: &Bundle) -> Result<Option<Vec<u8>>, OciError> {
    bundle
        .signature()
        .map(|sig| {
            let mut bytes =
                serde_json::to_vec_pretty(sig).map_err(|e| OciError::Local(e.to_string()))?;
            bytes.push(b'\n');
            Ok(bytes)
        })
        .transpose()
}

/// The blobs to fetch for a bundle, every one bounded before it is asked for.
#[derive(Debug)]
pub struct Plan {
    /// `(path in the bundle, descriptor)`, in manifest order.
    pub entries: Vec<(String, Descriptor)>,
}

impl Plan {
    /// Reads the image manifest `bytes` as a bundle's artifact.
    ///
    /// # Errors
    ///
    /// [`OciError::Refused`]: not JSON, not an image manifest, not a
    /// bundle's layout, or a declared size beyond the bundle's limits.
    pub fn read(bytes: &[u8], limits: &Limits) -> Result<Self, OciError> {
        let refused = |why: String| OciError::Refused(format!("the image manifest {why}"));
        let manifest: ImageManifest = serde_json::from_slice(bytes)
            .map_err(|e| refused(format!("is not an OCI image manifest: {e}")))?;
        if manifest.schema_version != 2 {
            return Err(refused(format!(
                "has schemaVersion {}, not 2",
                manifest.schema_version
            )));
        }
        if let Some(media_type) = &manifest.media_type
            && media_type != MANIFEST_MEDIA_TYPE
        {
            return Err(refused(format!(
                "is of media type {:?}, not {MANIFEST_MEDIA_TYPE}",
                printable(media_type)
            )));
        }
        if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
            return Err(refused(format!(
                "has config of media type {:?}, not {WASM_CONFIG_MEDIA_TYPE}: not a Wasm artifact",
                printable(&manifest.config.media_type)
            )));
        }
        let count = u64::try_from(manifest.layers.len()).unwrap_or(u64::MAX);
        let most = u64::try_from(limits.entries).unwrap_or(u64::MAX);
        if count > most {
            return Err(refused(format!(
                "lists {count} layers, more than a bundle's {most} entries"
            )));
        }
        let mut entries = Vec::new();
        let mut paths = BTreeSet::new();
        let mut total: u64 = 0;
        for layer in &manifest.layers {
            check_digest(&layer.digest).map_err(|e| refused(format!("names a layer {e}")))?;
            let path = match layer.media_type.as_str() {
                WASM_LAYER_MEDIA_TYPE => COMPONENT.to_owned(),
                HCP_MANIFEST_MEDIA_TYPE => MANIFEST.to_owned(),
                HCP_SIGNATURE_MEDIA_TYPE => SIGNATURE.to_owned(),
                HCP_FILE_MEDIA_TYPE => layer.annotations.get(TITLE).cloned().ok_or_else(|| {
                    refused(format!(
                        "has a file layer {} without a {TITLE}",
                        layer.digest
                    ))
                })?,
                other => {
                    return Err(refused(format!(
                        "has a layer of media type {:?}, which no bundle holds",
                        printable(other)
                    )));
                }
            };
            if let Some(title) = layer.annotations.get(TITLE)
                && *title != path
            {
                return Err(refused(format!(
                    "titles its {} layer {:?}; in a bundle it is {path}",
                    layer.media_type,
                    printable(title)
                )));
            }
            check_path(&path).map_err(|e| refused(format!("names a layer path: {e}")))?;
            if !paths.insert(path.clone()) {
                return Err(refused(format!(
                    "lists {} twice (one component, one bundle manifest, one signature, each file once)",
                    printable(&path)
                )));
            }
            let (limit, what) = limits.entry_bytes(&path);
            if layer.size > limit {
                return Err(refused(format!(
                    "declares {} as {} bytes, larger than {what} may be ({limit})",
                    printable(&path),
                    layer.size
                )));
            }
            total = total.saturating_add(layer.size);
            if total > limits.total_bytes {
                return Err(refused(format!(
                    "declares layers of more than {} bytes in all, more than a bundle holds",
                    limits.total_bytes
                )));
            }
            entries.push((path, layer.clone()));
        }
        for needed in [COMPONENT, MANIFEST] {
            if !paths.contains(needed) {
                return Err(refused(format!(
                    "has no {needed} layer: not a bundle pushed by `hcp push`"
                )));
            }
        }
        Ok(Self { entries })
    }
}

/// The bundle file assembled from `entries` (path → bytes, each already
/// checked against its digest), read back with every check a bundle file
/// gets ([`Bundle::read`]).
///
/// # Errors
///
/// [`OciError::Refused`]: the entries are not a valid bundle.
pub fn assemble(
    entries: &BTreeMap<String, Vec<u8>>,
    limits: &Limits,
) -> Result<(Bundle, Vec<u8>), OciError> {
    let archive =
        hcp_receipts::archive::write(entries.iter().map(|(p, b)| (p.as_str(), b.as_slice())))
            .map_err(|e| OciError::Refused(format!("the layers do not form a bundle: {e}")))?;
    let bundle = Bundle::read(&archive, limits)
        .map_err(|e| OciError::Refused(format!("the layers do not form a valid bundle: {e}")))?;
    let file = bundle
        .to_bytes()
        .map_err(|e| OciError::Refused(format!("the layers do not form a valid bundle: {e}")))?;
    Ok((bundle, file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn layer(media_type: &str, title: &str, size: u64) -> Value {
        json!({
            "mediaType": media_type,
            "digest": format!("sha256:{}", "ab".repeat(32)),
            "size": size,
            "annotations": {TITLE: title},
        })
    }

    fn manifest(layers: Vec<Value>) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": format!("sha256:{}", "cd".repeat(32)), "size": 2},
            "layers": layers,
        }))
        .expect("json")
    }

    fn refusal(layers: Vec<Value>) -> String {
        Plan::read(&manifest(layers), &Limits::default())
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn a_bundles_layout_reads_as_its_entries() {
        let plan = Plan::read(
            &manifest(vec![
                layer(WASM_LAYER_MEDIA_TYPE, COMPONENT, 10),
                layer(HCP_MANIFEST_MEDIA_TYPE, MANIFEST, 5),
                layer(HCP_FILE_MEDIA_TYPE, "wit/log.wit", 3),
            ]),
            &Limits::default(),
        )
        .expect("plan");
        let paths: Vec<&str> = plan.entries.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, [COMPONENT, MANIFEST, "wit/log.wit"]);
    }

    #[test]
    fn layouts_no_bundle_has_are_refused_before_any_blob() {
        let base = || {
            vec![
                layer(WASM_LAYER_MEDIA_TYPE, COMPONENT, 10),
                layer(HCP_MANIFEST_MEDIA_TYPE, MANIFEST, 5),
            ]
        };
        let mut traversal = base();
        traversal.push(layer(HCP_FILE_MEDIA_TYPE, "../etc/passwd", 1));
        assert!(refusal(traversal).contains("names a layer path"));
        let mut twice = base();
        twice.push(layer(WASM_LAYER_MEDIA_TYPE, COMPONENT, 10));
        assert!(refusal(twice).contains("lists component.wasm twice"));
        let mut foreign = base();
        foreign.push(layer("application/vnd.oci.image.layer.v1.tar+gzip", "x", 1));
        assert!(refusal(foreign).contains("which no bundle holds"));
        assert!(
            refusal(vec![layer(WASM_LAYER_MEDIA_TYPE, COMPONENT, 10)])
                .contains("has no manifest.json layer")
        );
        let mut mistitled = base();
        mistitled[0] = layer(WASM_LAYER_MEDIA_TYPE, "other.wasm", 10);
        assert!(refusal(mistitled).contains("in a bundle it is component.wasm"));
        let mut big_manifest = base();
        big_manifest[1] = layer(HCP_MANIFEST_MEDIA_TYPE, MANIFEST, 2 << 20);
        assert!(refusal(big_manifest).contains("larger than the manifest may be"));
        let too_many: Vec<Value> = (0..5000)
            .map(|i| layer(HCP_FILE_MEDIA_TYPE, &format!("d/{i}"), 1))
            .collect();
        assert!(refusal(too_many).contains("more than a bundle's 4096 entries"));
        let image = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{}", "cd".repeat(32)), "size": 2},
            "layers": [],
        }))
        .expect("json");
        let e = Plan::read(&image, &Limits::default()).expect_err("an image");
        assert!(e.to_string().contains("not a Wasm artifact"), "{e}");
    }
}
