//! `hcp push`, `hcp pull` and the `oci://` side of `hcp install`: bundles
//! in OCI registries ([`hcp_oci`]).
//!
//! A fetched bundle stays in memory until it is verified: `hcp install`
//! hands it to the same install as a bundle file (signature, trust store,
//! every other check, in that order), `hcp pull` writes it only once it has
//! been read back with every check a bundle file gets.

use super::{Outcome, print_json};
use crate::install::{BundleFile, InstallError};
use anyhow::Context as _;
use hcp_bundle::{Bundle, Limits, SignatureStatus};
use hcp_oci::{Access, OciError, Reference};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How to reach a registry (`hcp push`, `hcp pull`, `hcp install oci://`).
#[derive(Debug, Clone, clap::Args)]
pub(super) struct RegistryArgs {
    /// A PEM file of CA certificates the registry's TLS certificate must
    /// chain to, instead of the built-in webpki roots. Credentials come
    /// from HCP_REGISTRY_USER and HCP_REGISTRY_PASSWORD, else from
    /// docker login's config.json ($DOCKER_CONFIG or ~/.docker).
    #[arg(long, value_name = "PEM")]
    registry_ca: Option<PathBuf>,
    /// Speak plain HTTP to a registry that is not on loopback (a registry
    /// on loopback is spoken to in plain HTTP unless --registry-ca is
    /// given). Anyone on the path can then read and change what is sent:
    /// only the digests and the publisher's signature still hold.
    #[arg(long)]
    plain_http: bool,
}

impl RegistryArgs {
    fn access(&self, reference: &Reference) -> Result<Access, OciError> {
        Ok(Access {
            ca_file: self.registry_ca.clone(),
            plain_http: self.plain_http,
            credentials: hcp_oci::lookup_credentials(&reference.registry)?,
        })
    }
}

/// Arguments of `hcp push`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Pushes a bundle to an OCI registry as a CNCF Wasm OCI artifact: the component as \
its application/wasm layer (for wkg, Wassette, skopeo), the bundle's manifest, signature and other \
files as layers with HCP media types. Prints the manifest digest the tag now names. An unsigned \
bundle is pushed, but installs refuse it unless --allow-unsigned."
)]
pub struct PushArgs {
    /// The bundle (.hcpb).
    bundle: PathBuf,
    /// Where: oci://<registry>/<repository>:<tag>.
    #[arg(value_name = "oci://REGISTRY/REPOSITORY:TAG")]
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Print what was pushed as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `hcp pull`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Fetches a bundle from an OCI registry (a tag is resolved to a digest once; the \
manifest and every blob are fetched by digest, each checked while it streams and bounded before \
it is asked for) and writes it as a bundle file once it reads back as a valid bundle whose \
signature, if any, verifies. Whether its publisher is trusted is for hcp install to decide."
)]
pub struct PullArgs {
    /// What: oci://<registry>/<repository>[:<tag>|@sha256:<digest>].
    #[arg(value_name = "oci://REGISTRY/REPOSITORY[:TAG|@DIGEST]")]
    reference: String,
    /// The bundle file to write (replaced if it exists).
    #[arg(long, short, value_name = "PATH")]
    output: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Print what was pulled as JSON.
    #[arg(long)]
    json: bool,
}

/// The bundle file `hcp install` reads: from the registry for `oci://`,
/// else from disk. A registry's answer that is refused, or a registry that
/// cannot be reached, is a refusal (nothing installed).
pub(super) fn read_or_fetch(
    bundle: &Path,
    registry: &RegistryArgs,
) -> Result<BundleFile, InstallError> {
    let Some(text) = bundle.to_str().filter(|t| Reference::is_reference(t)) else {
        return crate::install::read_bundle_file(bundle);
    };
    let reference = Reference::parse(text).map_err(|e| InstallError::Host(e.into()))?;
    let access = registry
        .access(&reference)
        .map_err(|e| InstallError::Host(e.into()))?;
    let fetched = hcp_oci::fetch(&reference, &access).map_err(|e| match e {
        OciError::Refused(m) | OciError::Registry(m) => InstallError::Refused(m),
        other => InstallError::Host(other.into()),
    })?;
    Ok(BundleFile {
        path: bundle.to_owned(),
        sha256: hcp_contracts::jcs::sha256_bytes_tagged(&fetched.file),
        bytes: fetched.file,
        origin: Some(fetched.origin),
    })
}

pub(super) fn push(args: PushArgs) -> Outcome {
    let reference = Reference::parse(&args.reference)?;
    let shown = args.bundle.display().to_string();
    let file = match crate::install::read_bundle_file(&args.bundle) {
        Ok(f) => f,
        Err(InstallError::Refused(reason)) => anyhow::bail!("{shown}: {reason}"),
        Err(e) => return Err(e.into()),
    };
    let bundle = Bundle::read(&file.bytes, &Limits::default())
        .with_context(|| format!("{shown}: not a valid bundle"))?;
    let signed = match bundle.signature_status() {
        SignatureStatus::Verified(s) => Some(s.publisher.to_string()),
        SignatureStatus::Unsigned => None,
        SignatureStatus::Invalid(reason) => {
            anyhow::bail!(
                "{shown}: its signature does not verify, no host would install it: {reason}"
            )
        }
    };
    let access = reference_access(&args.registry, &reference)?;
    let pushed = hcp_oci::push(&bundle, &reference, &access)
        .with_context(|| format!("pushing {} to {reference}", bundle.id()))?;
    let pinned = format!(
        "{}{}/{}@{}",
        hcp_oci::reference::SCHEME,
        reference.registry,
        reference.repository,
        pushed.digest
    );
    if args.json {
        print_json(&serde_json::json!({
            "bundle": bundle.id(),
            "reference": reference.to_string(),
            "digest": pushed.digest,
            "pinned": pinned,
            "publisher": signed,
            "uploaded": pushed.uploaded,
            "present": pushed.present,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("pushed {} to {reference}", bundle.id());
    println!("  digest     {}", pushed.digest);
    println!(
        "  blobs      {} uploaded, {} already there",
        pushed.uploaded, pushed.present
    );
    match &signed {
        Some(p) => println!("  publisher  {p}"),
        None => eprintln!(
            "warning: {} is unsigned: hosts refuse to install it unless --allow-unsigned",
            bundle.id()
        ),
    }
    println!("install it with: hcp install {pinned}");
    Ok(ExitCode::SUCCESS)
}

pub(super) fn pull(args: PullArgs) -> Outcome {
    let reference = Reference::parse(&args.reference)?;
    let access = reference_access(&args.registry, &reference)?;
    let fetched = match hcp_oci::fetch(&reference, &access) {
        Ok(f) => f,
        Err(e @ (OciError::Refused(_) | OciError::Registry(_))) => {
            eprintln!("error: {reference}: {e}");
            eprintln!("nothing was written");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    let publisher = match fetched.bundle.signature_status() {
        SignatureStatus::Verified(s) => Some(s.publisher.to_string()),
        SignatureStatus::Unsigned => None,
        SignatureStatus::Invalid(reason) => {
            eprintln!("error: {reference}: its signature does not verify: {reason}");
            eprintln!("nothing was written");
            return Ok(ExitCode::from(1));
        }
    };
    super::bundle::write_atomically(&args.output, &fetched.file)?;
    if args.json {
        print_json(&serde_json::json!({
            "bundle": fetched.bundle.id(),
            "path": args.output.display().to_string(),
            "origin": fetched.origin,
            "sha256": hcp_contracts::jcs::sha256_bytes_tagged(&fetched.file),
            "publisher": publisher,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "pulled {} into {}",
        fetched.bundle.id(),
        args.output.display()
    );
    println!("  digest     {}", fetched.origin.digest);
    match publisher {
        Some(p) => println!("  publisher  {p} (signature verifies; trust is checked at install)"),
        None => println!("  publisher  UNSIGNED"),
    }
    Ok(ExitCode::SUCCESS)
}

fn reference_access(registry: &RegistryArgs, reference: &Reference) -> anyhow::Result<Access> {
    Ok(registry.access(reference)?)
}
