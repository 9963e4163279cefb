//! Installing straight from a plugin's `manifest.json`, without a bundle:
//! local development and tests. Recorded as unsigned, in the same registry
//! and layout as a bundle install, through the same lock, staging and
//! rename, with a host-signed receipt that says where it came from.
//!
//! What it does not do, and a bundle install does: verify a publisher,
//! check the operator's install policy, compare with the installed
//! versions. The surface audit still runs.
//!
//! # Ambient authority
//!
//! Reads the manifest, the component and the directories it names; writes
//! under `<data dir>/capabilities/` and the store.

use super::{Capabilities, commit};
use crate::hostkey::HostIdentity;
use crate::store::{Installed, Store};
use anyhow::{Context as _, Result};
use hcp_bundle::layout::{COMPONENT, MANIFEST};
use hcp_bundle::receipt::{InstallRecord, RECEIPT_FORMAT};
use hcp_contracts::manifest::{LoadOptions, Manifest};
use hcp_sandbox::Sandbox;
use serde_json::Value;
use std::path::Path;

/// Installs the capability `manifest_path` describes, and returns it with
/// its installed manifest (as [`super::installed_manifest`] loads it). The manifest and the
/// component are copied into the data directory, so later edits of the
/// source do not change what runs; directories it grants stay where they
/// are (their paths are written into the installed manifest, their device
/// and inode numbers into [`super::DIRS_FILE`]).
///
/// # Errors
///
/// The manifest is invalid, its imports exceed its grants, that version is
/// installed already, or the host cannot do its part. Nothing is left
/// installed.
pub fn install_manifest(
    store: &Store,
    sandbox: &Sandbox,
    host: &HostIdentity,
    manifest_path: &Path,
) -> Result<(Installed, Manifest)> {
    let manifest = hcp_contracts::manifest::load(manifest_path, LoadOptions::default())?;
    let report = sandbox.audit(&manifest)?;
    if !report.allowed {
        anyhow::bail!("{}", hcp_sandbox::PrepareError::Refused(Box::new(report)));
    }
    let doc = installed_doc(&manifest)?;
    let caps = Capabilities::lock(store.dir())?;
    let version = manifest.version.to_string();
    if let Some(same) = store.installed_equal(manifest.name(), &manifest.version)? {
        if same.version == manifest.version {
            anyhow::bail!("{} is already installed", manifest.id());
        }
        anyhow::bail!(
            "{}",
            crate::store::same_precedence_message(&manifest.id(), &same)
        );
    }
    let staging = caps.stage()?;
    staging.write(COMPONENT, &manifest.component.bytes)?;
    let mut text = serde_json::to_vec_pretty(&doc)?;
    text.push(b'\n');
    staging.write(MANIFEST, &text)?;
    staging.write(super::DIRS_FILE, &super::dirs::record(&manifest)?)?;
    // The copy must load as the engine will load it (digest required, the
    // recorded directories attached): the engine keeps this load, so the
    // installed component is hashed once by the install.
    let mut installed_manifest = super::dirs::load_dir(staging.dir(), &manifest.id())
        .with_context(|| format!("installing {}", manifest.id()))?;
    let record = InstallRecord {
        format: RECEIPT_FORMAT.to_owned(),
        capability: manifest.name().to_owned(),
        version,
        installed_at: crate::store::now(),
        host_id: host.host_id.clone(),
        bundle: None,
        manifest: hcp_contracts::jcs::sha256_tagged(&doc).map_err(anyhow::Error::msg)?,
        component: manifest.component.digest.clone(),
        files: Default::default(),
        world: manifest.doc.component.world.clone(),
        publisher: None,
        unsigned: true,
        grants: serde_json::from_value(doc["grants"].clone())?,
        risk_ceiling: manifest.doc.capability.safety.risk_ceiling,
        safety_envelope: manifest.doc.safety_envelope.clone(),
        imports: report.imports.iter().map(|i| i.name.clone()).collect(),
        install_policy: None,
        previous: None,
        accepted_widening: Vec::new(),
        origin: None,
    };
    let (installed, _, _) = commit(store, &caps, staging, record, None, host)?;
    // The staged directory is now the installed one.
    installed_manifest.source = Some(installed.manifest_path());
    installed_manifest.component.path = installed.dir.join(COMPONENT);
    Ok((installed, installed_manifest))
}

/// The manifest as installed: the component at `component.wasm`, its
/// digest pinned, every directory grant resolved to its canonical path.
fn installed_doc(manifest: &Manifest) -> Result<Value> {
    let mut doc = serde_json::to_value(&manifest.doc)?;
    doc["component"]["path"] = COMPONENT.into();
    doc["component"]["digest"] = manifest.component.digest.clone().into();
    // Grant paths were resolved against the source manifest's directory:
    // keep them absolute.
    if let Some(fs) = doc
        .get_mut("grants")
        .and_then(|g| g.get_mut("filesystem"))
        .and_then(Value::as_array_mut)
    {
        for (grant, resolved) in fs.iter_mut().zip(&manifest.grants.filesystem) {
            grant["path"] = resolved.host_path.display().to_string().into();
            grant["guest_path"] = resolved.guest_path.clone().into();
        }
    }
    Ok(doc)
}
