//! Capability bundles in OCI registries.
//!
//! [`push`] uploads a bundle as a CNCF Wasm OCI artifact whose extra
//! layers carry the bundle's manifest, signature and other files (see
//! [`layout`]); [`fetch`] resolves a tag to a digest once, fetches the
//! image manifest and every blob by digest (each checked while it streams,
//! each bounded before it is asked for; see [`client`]) and assembles the
//! bundle file, read back with every check a bundle file gets. What to
//! trust is not decided here: the caller installs the fetched bundle file
//! by the same rules as a local one (the publisher's signature against its
//! trust store, then everything else an install checks).
//!
//! # What this crate must never do
//!
//! Write a file: a fetch is kept in memory until the caller has verified
//! it. Follow a redirect, or send credentials, outside the registry named
//! (and its token service). Speak plain HTTP to a registry that is not on
//! loopback unless told to. Trust a key.
#![deny(missing_docs)]

pub mod client;
mod credentials;
pub mod error;
pub mod layout;
pub mod reference;

pub use client::{Access, Credentials};
pub use credentials::lookup_credentials;
pub use error::OciError;
pub use hcp_bundle::receipt::RegistryOrigin;
pub use reference::Reference;

use client::{Session, digest_header, read_blob, read_bounded, status_error};
use hcp_bundle::{Bundle, Limits};
use layout::{MANIFEST_MEDIA_TYPE, MAX_MANIFEST_BYTES, Plan};
use std::collections::BTreeMap;

/// A bundle fetched from a registry, checked as a bundle file is read
/// (not yet against any trust store).
#[derive(Debug)]
pub struct Fetched {
    /// The bundle.
    pub bundle: Bundle,
    /// Its bundle file's bytes (what `hcp pull` writes, what an install
    /// reads).
    pub file: Vec<u8>,
    /// Where it came from: the digest every byte was fetched by.
    pub origin: RegistryOrigin,
}

/// What a push did.
#[derive(Debug)]
pub struct Pushed {
    /// `sha256:` of the image manifest the tag now names.
    pub digest: String,
    /// Blobs uploaded (config and layers).
    pub uploaded: usize,
    /// Blobs the registry held already.
    pub present: usize,
}

/// Fetches the bundle `reference` names.
///
/// # Errors
///
/// [`OciError::Refused`] when what the registry serves is not exactly what
/// was asked for, or not a valid bundle; [`OciError::Registry`] when it
/// cannot be reached or answers an error.
pub fn fetch(reference: &Reference, access: &Access) -> Result<Fetched, OciError> {
    let limits = Limits::default();
    let mut session = Session::new(reference, access, false)?;
    let (digest, manifest) = resolve(&mut session, reference)?;
    let manifest = match manifest {
        Some(bytes) => bytes,
        None => manifest_by_digest(&mut session, &digest)?,
    };
    let plan = Plan::read(&manifest, &limits)?;
    let mut entries = BTreeMap::new();
    for (path, descriptor) in &plan.entries {
        let what = format!("layer {path} ({})", descriptor.digest);
        let url = session.url(&format!("blobs/{}", descriptor.digest));
        let mut answer = session.send(http::Method::GET, &url, &[], None, &what)?;
        if !answer.status().is_success() {
            return Err(status_error(&mut answer, &what));
        }
        let bytes = read_blob(&mut answer, &descriptor.digest, descriptor.size, &what)?;
        entries.insert(path.clone(), bytes);
    }
    let (bundle, file) = layout::assemble(&entries, &limits)?;
    Ok(Fetched {
        bundle,
        file,
        origin: RegistryOrigin {
            registry: reference.registry.clone(),
            repository: reference.repository.clone(),
            // A tag beside a digest is not what was fetched by: only a
            // tag resolved here is recorded.
            tag: reference
                .digest
                .is_none()
                .then(|| reference.tag.clone())
                .flatten(),
            digest,
        },
    })
}

/// The manifest digest `reference` names: its digest, or its tag resolved
/// once (`HEAD`, the registry's `Docker-Content-Digest`; without one, the
/// manifest fetched by tag and hashed, returned with it).
fn resolve(
    session: &mut Session,
    reference: &Reference,
) -> Result<(String, Option<Vec<u8>>), OciError> {
    if let Some(digest) = &reference.digest {
        return Ok((digest.clone(), None));
    }
    let tag = reference.reference();
    let what = format!("tag {tag}");
    let url = session.url(&format!("manifests/{tag}"));
    let accept = [("accept", MANIFEST_MEDIA_TYPE)];
    let mut answer = session.send(http::Method::HEAD, &url, &accept, None, &what)?;
    if answer.status().is_success()
        && let Some(digest) = digest_header(&answer)?
    {
        return Ok((digest, None));
    }
    // No digest named: the manifest itself, once, its digest computed.
    answer = session.send(http::Method::GET, &url, &accept, None, &what)?;
    if !answer.status().is_success() {
        return Err(status_error(&mut answer, &what));
    }
    let bytes = read_bounded(
        &mut answer,
        MAX_MANIFEST_BYTES,
        &format!("the manifest of {what}"),
    )?;
    let digest = hcp_contracts::jcs::sha256_bytes_tagged(&bytes);
    if let Some(named) = digest_header(&answer)?
        && named != digest
    {
        return Err(OciError::Refused(format!(
            "{what}: the registry names the manifest {named}, but what it sent is {digest}: refused"
        )));
    }
    Ok((digest, Some(bytes)))
}

/// The image manifest `digest`, refused unless its bytes hash to it.
fn manifest_by_digest(session: &mut Session, digest: &str) -> Result<Vec<u8>, OciError> {
    let what = format!("manifest {digest}");
    let url = session.url(&format!("manifests/{digest}"));
    let mut answer = session.send(
        http::Method::GET,
        &url,
        &[("accept", MANIFEST_MEDIA_TYPE)],
        None,
        &what,
    )?;
    if !answer.status().is_success() {
        return Err(status_error(&mut answer, &what));
    }
    let bytes = read_bounded(&mut answer, MAX_MANIFEST_BYTES, &what)?;
    let actual = hcp_contracts::jcs::sha256_bytes_tagged(&bytes);
    if actual != digest {
        return Err(OciError::Refused(format!(
            "{what}: the registry sent a manifest with digest {actual}, not the one asked for: \
             refused (a tag moved, or the registry is not serving what it names)"
        )));
    }
    Ok(bytes)
}

/// Pushes `bundle` to `reference`, which must name a tag (and no digest).
///
/// # Errors
///
/// [`OciError::Reference`] without a tag; [`OciError::Registry`] when the
/// registry cannot be reached or refuses an upload.
pub fn push(bundle: &Bundle, reference: &Reference, access: &Access) -> Result<Pushed, OciError> {
    if reference.digest.is_some() {
        return Err(OciError::Reference(format!(
            "{reference}: a push names a tag, not a digest (the digest is what the push yields)"
        )));
    }
    let tag = reference.reference().to_owned();
    let artifact = layout::artifact(bundle)?;
    let mut session = Session::new(reference, access, true)?;
    let config_digest = hcp_contracts::jcs::sha256_bytes_tagged(&artifact.config);
    let mut blobs: Vec<(&str, &[u8])> = vec![(config_digest.as_str(), artifact.config.as_slice())];
    blobs.extend(
        artifact
            .layers
            .iter()
            .map(|(d, bytes)| (d.digest.as_str(), bytes.as_slice())),
    );
    let (mut uploaded, mut present) = (0, 0);
    let mut done = std::collections::BTreeSet::new();
    for (digest, bytes) in blobs {
        if !done.insert(digest) {
            continue;
        }
        if upload_blob(&mut session, digest, bytes)? {
            uploaded += 1;
        } else {
            present += 1;
        }
    }
    let what = format!("the manifest for tag {tag}");
    let url = session.url(&format!("manifests/{tag}"));
    let mut answer = session.send(
        http::Method::PUT,
        &url,
        &[("content-type", MANIFEST_MEDIA_TYPE)],
        Some(&artifact.manifest),
        &what,
    )?;
    if !answer.status().is_success() {
        return Err(status_error(&mut answer, &what));
    }
    if let Some(stored) = digest_header(&answer)?
        && stored != artifact.digest
    {
        return Err(OciError::Registry(format!(
            "{what}: the registry stored it as {stored}, not {}",
            artifact.digest
        )));
    }
    Ok(Pushed {
        digest: artifact.digest,
        uploaded,
        present,
    })
}

/// Uploads one blob unless the registry holds it (`false` then): a
/// monolithic upload (`POST` a session, `PUT` the bytes with the digest).
fn upload_blob(session: &mut Session, digest: &str, bytes: &[u8]) -> Result<bool, OciError> {
    let what = format!("blob {digest}");
    let url = session.url(&format!("blobs/{digest}"));
    let answer = session.send(http::Method::HEAD, &url, &[], None, &what)?;
    if answer.status().is_success() {
        return Ok(false);
    }
    let url = session.url("blobs/uploads/");
    let mut answer = session.send(http::Method::POST, &url, &[], Some(&[]), &what)?;
    if answer.status() != http::StatusCode::ACCEPTED {
        return Err(status_error(&mut answer, &what));
    }
    let location = client::header(&answer, http::header::LOCATION).ok_or_else(|| {
        OciError::Registry(format!(
            "{what}: the registry opened an upload without a location"
        ))
    })?;
    let location = session.within_origin(&location, &what)?;
    let url = format!(
        "{location}{}digest={}",
        if location.contains('?') { '&' } else { '?' },
        digest.replace(':', "%3A")
    );
    let mut answer = session.send(
        http::Method::PUT,
        &url,
        &[("content-type", "application/octet-stream")],
        Some(bytes),
        &what,
    )?;
    if !answer.status().is_success() {
        return Err(status_error(&mut answer, &what));
    }
    Ok(true)
}
