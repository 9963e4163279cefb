//! Installing, reviewing and removing capability bundles.
//!
//! An install runs every check before anything lands in place, in this
//! order: the bundle's format (every entry checked) and the component's
//! digest; the publisher's signature and the trust store (or
//! `--allow-unsigned`); the world version; whether that version, or one
//! equal to it in precedence (differing only in build metadata), is
//! installed already; the manifest (digest required); the operator's
//! install policy; the comparison with the highest installed version
//! (wider needs `--accept-new-grants`); the surface audit and compilation
//! (through the on-disk cache, which is left warm). The component is
//! compiled first, before the capabilities' lock is taken (see
//! [`Sandbox::vet`]): under `hcp install`, in a child process under CPU
//! and memory limits ([`crate::compile_child`]). The install is staged in
//! `<data dir>/capabilities/.staging-<uuid>/`, with its host-signed install
//! receipt, then moved into `<name>/<version>/` with one rename and recorded
//! in the registry. A failure at any point deletes the staging directory
//! (or the placed one, when recording fails): nothing is left half-installed.
//!
//! The registry is the store's `capabilities` table, the one the task
//! engine selects versions from by `capability_version` range; an install
//! from a bare manifest ([`install_manifest`], local development) goes
//! through the same lock, staging, receipt and record.
//!
//! # Ambient authority
//!
//! Reads the bundle file and the install policy it is given; writes under
//! `<data dir>/capabilities/` (see [`stage`]) and the store.

pub mod development;
mod dirs;
mod manifest;
mod review;
mod stage;

pub use dirs::{DIRS_FILE, installed_manifest};
pub use manifest::install_manifest;
pub use review::review;

use crate::hostkey::HostIdentity;
use crate::store::{Installed, Store};
use anyhow::{Context as _, Result};
use hcp_bundle::diff::{self, Change};
use hcp_bundle::receipt::{InstallReceipt, InstallRecord, PublisherRecord, RECEIPT_FILE};
use hcp_bundle::{Bundle, Limits, SignatureStatus, Signer, check_trust};
use hcp_contracts::manifest::{LoadOptions, Manifest, ManifestDoc};
use hcp_policy::InstallPolicy;
use hcp_sandbox::{PrepareError, Sandbox, SurfaceReport};
use stage::{Capabilities, Staging};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Room for tar headers and padding beyond [`Limits::total_bytes`].
const ARCHIVE_OVERHEAD: u64 = 8 << 20;

/// Why an install did not happen. Nothing was installed in any case.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A check refused the bundle.
    #[error("{0}")]
    Refused(String),
    /// The component imports interfaces its grants do not allow.
    #[error("{message}")]
    Surface {
        /// The refusal, naming each import.
        message: String,
        /// The whole audit.
        report: Box<SurfaceReport>,
    },
    /// The host could not do its part (files, database, policy file).
    #[error(transparent)]
    Host(#[from] anyhow::Error),
}

/// How an install may proceed.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// Install an unsigned bundle (local development only; recorded).
    pub allow_unsigned: bool,
    /// Accept grants wider than the highest installed version's.
    pub accept_new_grants: bool,
    /// The operator's policy directory (holding `install.json`).
    pub policy_dir: PathBuf,
    /// Replace the same version when it is installed already (`hcp dev`,
    /// after every change). Honoured only in a development data directory
    /// ([`development::is_development`]); anywhere else the install is
    /// refused.
    pub replace_same_version: bool,
}

/// What an install did.
#[derive(Debug)]
pub struct InstallOutcome {
    /// The registry record.
    pub installed: Installed,
    /// The host-signed receipt stored with it.
    pub receipt: InstallReceipt,
    /// Differences from the highest version installed before, if any.
    pub previous: Option<(String, Vec<Change>)>,
    /// A leftover directory without a registry record (an interrupted
    /// install) was replaced.
    pub replaced_leftover: bool,
    /// For the operator's attention; the install went ahead (a human
    /// approval the declaration requires and the policy never asks for).
    pub warnings: Vec<String>,
    /// The same version was installed and this install replaced it
    /// ([`InstallOptions::replace_same_version`]).
    pub replaced_same_version: bool,
}

/// A bundle file read into memory.
#[derive(Debug)]
pub struct BundleFile {
    /// As named.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// `sha256:` of them.
    pub sha256: String,
    /// The OCI registry it was fetched from (recorded in the receipt).
    pub origin: Option<hcp_bundle::receipt::RegistryOrigin>,
}

/// Reads a bundle file, refusing one larger than any bundle can be.
///
/// # Errors
///
/// It cannot be read, or is too large.
pub fn read_bundle_file(path: &Path) -> Result<BundleFile, InstallError> {
    use std::io::Read as _;
    let limit = Limits::default().total_bytes + ARCHIVE_OVERHEAD;
    let file = std::fs::File::open(path)
        .with_context(|| format!("{}: cannot read bundle", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("{}: cannot read bundle", path.display()))?
        .len();
    if len > limit {
        return Err(InstallError::Refused(format!(
            "{len} bytes, larger than any bundle this host accepts ({limit})"
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: cannot read bundle", path.display()))?;
    Ok(BundleFile {
        path: path.to_owned(),
        sha256: hcp_contracts::jcs::sha256_bytes_tagged(&bytes),
        bytes,
        origin: None,
    })
}

/// Reads and checks the bundle's format.
fn open(file: &BundleFile) -> Result<Bundle, InstallError> {
    Bundle::read(&file.bytes, &Limits::default()).map_err(|e| InstallError::Refused(e.to_string()))
}

/// The highest installed version of `name`, with its manifest document.
///
/// # Errors
///
/// The registry or the installed manifest cannot be read.
pub fn highest_installed(store: &Store, name: &str) -> Result<Option<(Installed, ManifestDoc)>> {
    let Some(top) = store
        .installed()?
        .into_iter()
        .filter(|i| i.name == name)
        .max_by(|a, b| a.version.cmp(&b.version))
    else {
        return Ok(None);
    };
    let path = top.manifest_path();
    let text = std::fs::read(&path)
        .with_context(|| format!("installed {}: {}", top.id(), path.display()))?;
    let doc = serde_json::from_slice(&text)
        .with_context(|| format!("installed {}: {}", top.id(), path.display()))?;
    Ok(Some((top, doc)))
}

/// Writes the bundle's entries (and its data directories) into `staging`.
fn unpack(bundle: &Bundle, staging: &Staging) -> Result<()> {
    for dir in bundle.data_dirs() {
        staging.mkdir(dir)?;
    }
    for (path, bytes) in bundle.entries() {
        staging.write(path, bytes)?;
    }
    Ok(())
}

/// The bundle unpacked into a private temporary directory, outside the
/// capabilities directory (no lock needed), and its manifest checked
/// there as an install checks it (`Err`: why it is refused).
fn unpacked(bundle: &Bundle) -> Result<(tempfile::TempDir, Result<Manifest, InstallError>)> {
    let dir = unpack_to_temp(bundle, "hcp-unpacked-")?;
    let manifest = check_manifest(bundle, dir.path());
    Ok((dir, manifest))
}

/// `bundle`'s files written into a new private temporary directory named
/// with `prefix` (removed when the handle drops).
///
/// # Errors
///
/// The directory or a file cannot be made.
pub fn unpack_to_temp(bundle: &Bundle, prefix: &str) -> Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("a temporary directory to unpack the bundle into")?;
    for data in bundle.data_dirs() {
        std::fs::create_dir_all(dir.path().join(data))?;
    }
    // Entry paths are relative and checked by `Bundle::read` (no `..`, no
    // absolute path): they stay inside the directory.
    for (name, bytes) in bundle.entries() {
        let target = dir.path().join(name);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, bytes).with_context(|| format!("{}", target.display()))?;
    }
    Ok(dir)
}

/// Vets the bundle's component before anything is locked: the surface
/// audit, then the bounds on code and the compile in a child process under
/// limits ([`Sandbox::vet`], which leaves the compiled code in the cache
/// for the install's own compile under the lock). A manifest or audit that
/// refuses is left to the install's own checks, which say why.
fn vet(sandbox: &Sandbox, bundle: &Bundle) -> Result<(), InstallError> {
    let (_dir, manifest) = unpacked(bundle)?;
    let Ok(manifest) = manifest else {
        return Ok(());
    };
    sandbox
        .vet(&manifest)
        .map(drop)
        .map_err(|e| InstallError::Refused(e.to_string()))
}

/// Checks the manifest unpacked in `dir` as an install loads it: digest
/// required.
fn check_manifest(bundle: &Bundle, dir: &Path) -> Result<Manifest, InstallError> {
    let base = dir
        .canonicalize()
        .with_context(|| format!("{}", dir.display()))?;
    hcp_contracts::manifest::from_value(
        bundle.manifest().clone(),
        &base,
        Some(base.join("manifest.json")),
        "manifest.json",
        LoadOptions {
            require_digest: true,
        },
    )
    .map_err(|e| InstallError::Refused(e.to_string()))
}

/// The verified signer, or why the bundle is refused.
fn signer(
    bundle: &Bundle,
    store: &Store,
    allow_unsigned: bool,
) -> Result<Option<Signer>, InstallError> {
    match bundle.signature_status() {
        SignatureStatus::Unsigned if allow_unsigned => Ok(None),
        SignatureStatus::Unsigned => Err(InstallError::Refused(
            "the bundle is unsigned: install bundles signed by a trusted publisher \
             (hcp bundle sign, hcp trust add), or pass --allow-unsigned for local development"
                .into(),
        )),
        SignatureStatus::Invalid(reason) => Err(InstallError::Refused(reason)),
        SignatureStatus::Verified(s) => {
            let trusted: Vec<_> = store
                .trusted_publishers()?
                .iter()
                .map(crate::store::TrustedPublisher::as_trusted_key)
                .collect();
            check_trust(&s, &trusted).map_err(|e| InstallError::Refused(e.to_string()))?;
            Ok(Some(*s))
        }
    }
}

fn refusal_with_report(report: &SurfaceReport) -> String {
    let mut msg = format!(
        "{}@{}: the component imports interfaces its manifest does not grant:",
        report.capability, report.version
    );
    for (name, reason) in report.refused() {
        msg.push_str(&format!("\n  {name}: {reason}"));
    }
    msg
}

/// Installs the bundle at `file`.
///
/// # Errors
///
/// [`InstallError::Refused`] or [`InstallError::Surface`] when a check
/// refuses it; [`InstallError::Host`] when the host cannot do its part. In
/// every case nothing is left installed.
pub fn install(
    store: &Store,
    sandbox: &Sandbox,
    host: &HostIdentity,
    file: &BundleFile,
    options: &InstallOptions,
) -> Result<InstallOutcome, InstallError> {
    let bundle = open(file)?;
    let signer = signer(&bundle, store, options.allow_unsigned)?;
    bundle.check_world().map_err(InstallError::Refused)?;
    let doc = bundle.doc();
    let (name, version) = (&doc.capability.name, &doc.capability.version);
    // Compiled (in a child, within limits) before the lock: a component
    // that takes long to compile never holds up another install.
    vet(sandbox, &bundle)?;
    let caps = Capabilities::lock(store.dir())?;
    // A version the manifest check would refuse cannot be installed.
    let mut replacing = None;
    if let Ok(parsed) = semver::Version::parse(version)
        && let Some(same) = store.installed_equal(name, &parsed)?
    {
        if same.version == parsed && options.replace_same_version {
            if !development::is_development(store.dir()) {
                return Err(InstallError::Refused(format!(
                    "{} is already installed, and {} is not a development data directory: only \
                     there (one `hcp dev` made) may an install replace the same version",
                    bundle.id(),
                    store.dir().display()
                )));
            }
            replacing = Some(same);
        } else {
            return Err(InstallError::Refused(if same.version == parsed {
                format!(
                    "{} is already installed (hcp remove {} first to replace it)",
                    bundle.id(),
                    bundle.id()
                )
            } else {
                crate::store::same_precedence_message(&bundle.id(), &same)
            }));
        }
    }
    let policy = InstallPolicy::load(&options.policy_dir)
        .map_err(|e| anyhow::anyhow!("install policy: {e}"))?;
    let staging = caps.stage()?;
    unpack(&bundle, &staging)?;
    let manifest = check_manifest(&bundle, staging.dir())?;
    staging.write(DIRS_FILE, &dirs::record(&manifest)?)?;
    let reasons = policy.check(&manifest);
    if !reasons.is_empty() {
        return Err(InstallError::Refused(format!(
            "refused by the install policy {}:\n  {}",
            policy.origin(),
            reasons.join("\n  ")
        )));
    }
    let previous = highest_installed(store, name)?.map(|(top, old)| {
        let changes = diff::compare(&old, doc);
        (top.id(), changes)
    });
    let mut accepted = Vec::new();
    if let Some((top, changes)) = &previous
        && diff::widens(changes)
    {
        if !options.accept_new_grants {
            let lines: Vec<String> = changes.iter().map(|c| format!("  {c}")).collect();
            return Err(InstallError::Refused(format!(
                "{} may do more than the installed {top}:\n{}\n\
                 review the difference (hcp review), then install with --accept-new-grants",
                bundle.id(),
                lines.join("\n")
            )));
        }
        accepted = changes
            .iter()
            .filter(|c| c.widens)
            .map(|c| c.what.clone())
            .collect();
    }
    let prepared = sandbox.prepare(Arc::new(manifest)).map_err(|e| match e {
        PrepareError::Refused(report) => InstallError::Surface {
            message: refusal_with_report(&report),
            report,
        },
        other => InstallError::Refused(other.to_string()),
    })?;
    let mut files = bundle.file_digests();
    files.remove(hcp_bundle::layout::COMPONENT);
    let record = InstallRecord {
        format: hcp_bundle::receipt::RECEIPT_FORMAT.to_owned(),
        capability: name.clone(),
        version: version.clone(),
        installed_at: crate::store::now(),
        host_id: host.host_id.clone(),
        bundle: Some(file.sha256.clone()),
        manifest: bundle.manifest_digest().to_owned(),
        component: bundle.component_digest().to_owned(),
        files,
        world: doc.component.world.clone(),
        publisher: signer.as_ref().map(PublisherRecord::from),
        unsigned: signer.is_none(),
        grants: doc.grants.clone(),
        risk_ceiling: doc.capability.safety.risk_ceiling,
        safety_envelope: doc.safety_envelope.clone(),
        imports: prepared
            .report()
            .imports
            .iter()
            .map(|i| i.name.clone())
            .collect(),
        install_policy: Some(policy.hash().to_owned()),
        previous: previous.as_ref().map(|(id, _)| id.clone()),
        accepted_widening: accepted,
        origin: file.origin.clone(),
    };
    // The version replaced goes out of its place and the registry only now,
    // every check passed; it comes back if the new one cannot be placed.
    let aside = match &replacing {
        Some(old) => Some(take_out_for_replacement(store, &caps, old)?),
        None => None,
    };
    let committed = commit(store, &caps, staging, record, signer.as_ref(), host);
    let (installed, receipt, replaced_leftover) = match (committed, aside) {
        (Ok(done), aside) => {
            if let Some(aside) = aside.flatten() {
                caps.remove_dir(&aside)?;
            }
            done
        }
        (Err(e), Some(aside)) => {
            if let Some(old) = &replacing {
                put_back(store, &caps, old, aside.as_deref())
                    .with_context(|| format!("{e:#}; restoring {} failed too", old.id()))?;
            }
            return Err(e.into());
        }
        (Err(e), None) => return Err(e.into()),
    };
    Ok(InstallOutcome {
        installed,
        receipt,
        previous,
        replaced_leftover,
        warnings: approval_warning(doc, &options.policy_dir)
            .into_iter()
            .collect(),
        replaced_same_version: replacing.is_some(),
    })
}

/// Takes `old` (the version an install in a development data directory
/// replaces) out of its place and out of the registry, as [`remove`] does,
/// with the capabilities' lock already held; returns where its directory
/// went. A version with unfinished tasks stays.
fn take_out_for_replacement(
    store: &Store,
    caps: &Capabilities,
    old: &Installed,
) -> Result<Option<PathBuf>, InstallError> {
    let version = old.version.to_string();
    let unfinished = store.unfinished_tasks_of(&old.name, &version)?;
    if !unfinished.is_empty() {
        return Err(InstallError::Refused(format!(
            "{} has {} unfinished task(s) and is not replaced: let them finish (hcp tasks list)",
            old.id(),
            unfinished.len()
        )));
    }
    let aside = if old.dir.exists() {
        Some(caps.take_out(&old.dir)?)
    } else {
        None
    };
    if let Err(e) = store.record_removal(&old.name, &version) {
        if let Some(aside) = &aside {
            caps.restore(aside, &old.dir)?;
        }
        return Err(e.into());
    }
    Ok(aside)
}

/// Undoes [`take_out_for_replacement`].
fn put_back(
    store: &Store,
    caps: &Capabilities,
    old: &Installed,
    aside: Option<&Path>,
) -> Result<()> {
    if let Some(aside) = aside {
        caps.restore(aside, &old.dir)?;
    }
    store.record_install(old)
}

/// The warning for a declaration that requires human approval the
/// operator's policy never asks for ([`hcp_policy::PolicySet::approval_reach`],
/// what `hcp review` reports as its `approval` verdict).
fn approval_warning(doc: &ManifestDoc, policy_dir: &Path) -> Option<String> {
    if !doc.capability.safety.requires_human_approval {
        return None;
    }
    let id = format!("{}@{}", doc.capability.name, doc.capability.version);
    match hcp_policy::PolicySet::load(policy_dir) {
        Err(e) => Some(format!(
            "{id} requires human approval; whether the policy ever asks for it was not checked: \
             the operator's policy does not load: {e}"
        )),
        Ok(set) => set
            .approval_reach(&doc.capability)
            .filter(|reach| !reach.reachable)
            .map(|reach| format!("{id}: {}", reach.detail)),
    }
}

/// The last steps of every install: signs `record` with the host key,
/// writes it into `staging`, moves `staging` into place with one rename
/// and records the install (undoing the move when recording fails).
/// Returns the registry record, the receipt, and whether a leftover
/// directory of an interrupted install was replaced.
fn commit(
    store: &Store,
    caps: &Capabilities,
    mut staging: Staging,
    record: InstallRecord,
    signer: Option<&Signer>,
    host: &HostIdentity,
) -> Result<(Installed, InstallReceipt, bool)> {
    let receipt = InstallReceipt::sign(record, &host.key).map_err(anyhow::Error::msg)?;
    staging.write(
        RECEIPT_FILE,
        &receipt.to_json().map_err(anyhow::Error::msg)?,
    )?;
    staging.sync();
    let r = &receipt.receipt;
    let final_dir = caps.final_dir(&r.capability, &r.version);
    let installed = Installed {
        name: r.capability.clone(),
        version: semver::Version::parse(&r.version)
            .with_context(|| format!("{}@{}", r.capability, r.version))?,
        dir: final_dir,
        digest: r.component.clone(),
        publisher: signer.map(|s| s.publisher.to_string()),
        unsigned: signer.is_none(),
        installed_at: r.installed_at.clone(),
    };
    let placed = caps.place(&mut staging, &installed.dir)?;
    let recorded = match signer {
        // Still trusted, checked in the transaction that records it.
        Some(s) => {
            store.record_signed_install(&installed, s.publisher.as_str(), &s.public_key.to_string())
        }
        None => store.record_install(&installed),
    };
    if let Err(e) = recorded {
        caps.unplace(&placed)?;
        return Err(e);
    }
    Ok((installed, receipt, placed.stale))
}

/// Removes `name@version`: out of its place with one rename, out of the
/// registry, then deleted.
///
/// # Errors
///
/// Not installed, or the host cannot do its part.
pub fn remove(store: &Store, name: &str, version: &str) -> Result<Installed> {
    let caps = Capabilities::lock(store.dir())?;
    let Some(installed) = store.installed_version(name, version)? else {
        anyhow::bail!("{name}@{version} is not installed (hcp list)");
    };
    // A version with tasks still to run or running stays: its tasks would
    // lose what they run on (a running guest its files).
    let unfinished = store.unfinished_tasks_of(name, version)?;
    if !unfinished.is_empty() {
        let listed: Vec<String> = unfinished
            .iter()
            .take(5)
            .map(|(id, state)| format!("{id} ({})", state.as_str()))
            .collect();
        anyhow::bail!(
            "{name}@{version} has {} unfinished task(s): {}{}; let them finish (or reject \
             those waiting for approval), then remove it",
            unfinished.len(),
            listed.join(", "),
            if unfinished.len() > listed.len() {
                ", ..."
            } else {
                ""
            }
        );
    }
    let aside = if installed.dir.exists() {
        Some(caps.take_out(&installed.dir)?)
    } else {
        None
    };
    if let Err(e) = store.record_removal(name, version) {
        if let Some(aside) = &aside {
            caps.restore(aside, &installed.dir)?;
        }
        return Err(e);
    }
    if let Some(aside) = &aside {
        caps.remove_dir(aside)?;
    }
    caps.prune(name);
    Ok(installed)
}
