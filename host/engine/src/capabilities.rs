//! The installed capabilities of a running host, each read once: its
//! manifest (the component read and hashed against the digest the registry
//! recorded), the manifest as installed (for receipts), and its compiled,
//! audited, pre-instantiated component (compiled on its first task, from
//! the on-disk cache when warm).
//!
//! The cache is filled when the host starts (every installed version) and
//! when the host installs one; a version installed by another process is
//! read on its first task. A task looks its capability up here once; no
//! admission, approval or run reads or hashes the component again.
//!
//! # Ambient authority
//!
//! Reads the installed manifest, component and recorded directories of
//! each installed version (through [`crate::install::installed_manifest`]).

use crate::store::{Installed, Store};
use anyhow::{Context as _, Result};
use hcp_contracts::manifest::Manifest;
use hcp_sandbox::{PreparedCapability, Sandbox};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One installed version, ready for its tasks.
pub(crate) struct Capability {
    /// Its manifest, with the directories its install recorded.
    pub(crate) manifest: Arc<Manifest>,
    /// The manifest as installed (its file), for receipts and evidence.
    pub(crate) manifest_bytes: Arc<[u8]>,
    /// The manifest's document in canonical form, as every admission's
    /// decision input holds it (rendered once, here).
    pub(crate) manifest_canonical: hcp_contracts::jcs::Canonical,
    /// The compiled component, once a task needed it.
    prepared: tokio::sync::OnceCell<PreparedCapability>,
}

impl Capability {
    fn new(installed: &Installed, manifest: Manifest) -> Result<Self> {
        if manifest.component.digest != installed.digest {
            anyhow::bail!(
                "{}: the installed component is {}, the registry recorded {}",
                installed.id(),
                manifest.component.digest,
                installed.digest
            );
        }
        let manifest_bytes = super::receipts::manifest_bytes(&manifest)?;
        let manifest_canonical = super::receipts::canonical(&manifest.doc)?;
        Ok(Self {
            manifest: Arc::new(manifest),
            manifest_bytes: manifest_bytes.into(),
            manifest_canonical,
            prepared: tokio::sync::OnceCell::new(),
        })
    }

    /// The compiled capability, compiling it on the first call.
    ///
    /// # Errors
    ///
    /// Preparation refuses it or fails.
    pub(crate) async fn prepared(&self, sandbox: &Sandbox) -> Result<PreparedCapability> {
        let prepared = self
            .prepared
            .get_or_try_init(|| {
                let manifest = self.manifest.clone();
                let sandbox = sandbox.clone();
                async move {
                    // The first compile of a component takes long (half a
                    // minute for a Python one): `hcp serve`'s log says so.
                    let id = manifest.id();
                    tracing::info!(
                        capability = %id,
                        "preparing for its first task here (compiling it unless the compiled-code \
                         cache holds it)"
                    );
                    let started = std::time::Instant::now();
                    let prepared = tokio::task::spawn_blocking(move || sandbox.prepare(manifest))
                        .await
                        .context("preparing the capability")?
                        .map_err(anyhow::Error::from)?;
                    tracing::info!(
                        capability = %id,
                        seconds = started.elapsed().as_secs_f64(),
                        "prepared"
                    );
                    anyhow::Ok(prepared)
                }
            })
            .await?;
        Ok(prepared.clone())
    }
}

/// A reinstall (new recorded directories) is a new entry.
fn key(installed: &Installed) -> String {
    format!(
        "{}@{}@{}",
        installed.id(),
        installed.digest,
        installed.installed_at
    )
}

/// The cache (see the module doc).
#[derive(Default)]
pub(crate) struct Capabilities {
    by_key: Mutex<HashMap<String, Arc<Capability>>>,
}

impl Capabilities {
    /// Every installed version of `store`. One that does not load is left
    /// out: its tasks read it (and are refused with the reason) when they
    /// come.
    ///
    /// # Errors
    ///
    /// The registry cannot be read.
    pub(crate) fn load(store: &Store) -> Result<Self> {
        let cache = Self::default();
        for installed in store.installed()? {
            if let Err(e) = cache.get(&installed) {
                tracing::warn!("{}: {e:#}", installed.id());
            }
        }
        Ok(cache)
    }

    /// The capability `installed` records, read on the first call for it.
    ///
    /// # Errors
    ///
    /// The installed files are missing or do not match the registry.
    pub(crate) fn get(&self, installed: &Installed) -> Result<Arc<Capability>> {
        let key = key(installed);
        if let Some(c) = self.lock().get(&key) {
            return Ok(c.clone());
        }
        let manifest = crate::install::installed_manifest(installed)?;
        let capability = Arc::new(Capability::new(installed, manifest)?);
        Ok(self.lock().entry(key).or_insert(capability).clone())
    }

    /// Keeps a version just installed, with the manifest its install loaded.
    ///
    /// # Errors
    ///
    /// The manifest does not match the registry record.
    pub(crate) fn insert(&self, installed: Installed, manifest: Manifest) -> Result<()> {
        let key = key(&installed);
        let capability = Arc::new(Capability::new(&installed, manifest)?);
        self.lock().insert(key, capability);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Capability>>> {
        self.by_key.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("installed", &self.lock().len())
            .finish()
    }
}
