//! `hcp install`, `hcp list`, `hcp inspect`, `hcp remove`: installed
//! capabilities, several versions side by side.

use super::{DataDir, HostDirs, Outcome, print_json, sandbox};
use crate::install::{self, InstallError, InstallOptions};
use crate::store::{Installed, Store};
use anyhow::Context as _;
use hcp_bundle::receipt::{InstallReceipt, RECEIPT_FILE};
use hcp_contracts::interfaces::Grant;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `hcp install`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Installs a bundle into the data directory after checking, in order: its format \
and the component's digest; the publisher's signature and that the publisher is trusted \
(hcp trust); the world version; the manifest; the operator's install policy (install.json in \
the policy directory, --policies); what it may do beyond the highest installed version of the same \
capability; the surface audit. The component is compiled (the cache is left warm), the install \
is staged next to its final place, signed by the host key (install-receipt.json), moved into \
capabilities/<name>/<version>/ with one rename and recorded. A refusal leaves nothing behind.\n\n\
A bundle named oci://<registry>/<repository>[:<tag>|@sha256:<digest>] is fetched into memory \
first (a tag resolved to a digest once, every blob fetched by digest and checked as it streams, \
sizes bounded before download; docs/oci.md), then checked as above; the receipt records the \
registry, repository, tag and digest.\n\n\
Exit status: 0 installed, 1 refused, 2 the host could not do its part."
)]
pub struct InstallArgs {
    /// The bundle (.hcpb), or oci://<registry>/<repository>[:<tag>|@sha256:<digest>]
    /// to fetch it from a registry (verified in memory before anything is written).
    bundle: PathBuf,
    /// Install an unsigned bundle. For local development only: a loud
    /// warning, and the install receipt records it.
    #[arg(long)]
    allow_unsigned: bool,
    /// Install a version that may do more than the highest installed one
    /// (wider grants, risk ceiling or envelope), after reviewing the
    /// difference.
    #[arg(long)]
    accept_new_grants: bool,
    /// Print what was installed as JSON (refusals stay on stderr).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    dirs: HostDirs,
    #[command(flatten)]
    registry: super::oci::RegistryArgs,
}

pub(super) fn install(args: InstallArgs) -> Outcome {
    let paths = &args.dirs.paths()?;
    let shown = args.bundle.display().to_string();
    let file = match super::oci::read_or_fetch(&args.bundle, &args.registry) {
        Ok(f) => f,
        Err(InstallError::Refused(reason)) => return refused(&shown, &reason),
        Err(e) => return Err(e.into()),
    };
    let store = Store::open(&paths.data_dir)?;
    let host = crate::hostkey::load_or_init(&paths.data_dir)?;
    let sandbox = sandbox(paths)?;
    let options = InstallOptions {
        allow_unsigned: args.allow_unsigned,
        accept_new_grants: args.accept_new_grants,
        policy_dir: paths.policies_dir.clone(),
        // Never here: only `hcp dev`, in a development data directory.
        replace_same_version: false,
    };
    let checked = super::progress::Progress::during(
        format!("checking and compiling {shown}"),
        args.json,
        || install::install(&store, &sandbox, &host, &file, &options),
    );
    let outcome = match checked {
        Ok(o) => o,
        Err(InstallError::Refused(reason)) => return refused(&shown, &reason),
        Err(InstallError::Surface { message, report }) => {
            println!("{report}");
            return refused(&shown, &message);
        }
        Err(InstallError::Host(e)) => return Err(e),
    };
    let i = &outcome.installed;
    let r = &outcome.receipt.receipt;
    if r.unsigned {
        eprintln!(
            "WARNING: {} is UNSIGNED: no publisher vouches for it.",
            i.id()
        );
        eprintln!(
            "WARNING: installed only because of --allow-unsigned, for local development; \
             its install receipt records that it is unsigned."
        );
    }
    for warning in &outcome.warnings {
        eprintln!("WARNING: {warning}");
    }
    if outcome.replaced_leftover {
        eprintln!(
            "note: replaced a leftover directory of an interrupted install at {}",
            i.dir.display()
        );
    }
    if args.json {
        let accepted: Vec<&str> = outcome
            .previous
            .iter()
            .flat_map(|(_, changes)| changes.iter().filter(|c| c.widens))
            .map(|c| c.what.as_str())
            .collect();
        print_json(&serde_json::json!({
            "installed": installed_json(i),
            "receipt": RECEIPT_FILE,
            "host_id": r.host_id,
            "host_key_id": outcome.receipt.key_id,
            "previous": outcome.previous.as_ref().map(|(p, _)| p.clone()),
            "accepted_new_grants": accepted,
            "replaced_leftover": outcome.replaced_leftover,
            "origin": r.origin,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("installed {}", i.id());
    match &r.publisher {
        Some(p) => println!("  publisher  {} (key {})", p.name, p.key_id),
        None => println!("  publisher  UNSIGNED (--allow-unsigned)"),
    }
    println!("  component  {}", r.component);
    if let Some(o) = &r.origin {
        println!(
            "  from       oci://{}/{}@{}",
            o.registry, o.repository, o.digest
        );
    }
    println!("  directory  {}", i.dir.display());
    println!(
        "  receipt    {RECEIPT_FILE}, signed by {} (key {})",
        r.host_id, outcome.receipt.key_id
    );
    if let Some((previous, changes)) = &outcome.previous {
        let wider: Vec<_> = changes.iter().filter(|c| c.widens).collect();
        if wider.is_empty() {
            println!("  compared   allows nothing {previous} did not");
        } else {
            println!("  accepted   (--accept-new-grants) beyond {previous}:");
            for c in wider {
                println!("    {}", c.what);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn refused(bundle: &str, reason: &str) -> Outcome {
    eprintln!("error: {bundle}: {reason}");
    eprintln!("nothing was installed");
    Ok(ExitCode::from(1))
}

/// Arguments of `hcp list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataDir,
}

fn installed_json(i: &Installed) -> serde_json::Value {
    serde_json::json!({
        "name": i.name,
        "version": i.version.to_string(),
        "publisher": i.publisher,
        "unsigned": i.unsigned,
        "digest": i.digest,
        "dir": i.dir.display().to_string(),
        "installed_at": i.installed_at,
    })
}

pub(super) fn list(args: ListArgs) -> Outcome {
    let store = Store::open(&args.data.path()?)?;
    let all = store.installed()?;
    if args.json {
        print_json(&all.iter().map(installed_json).collect::<Vec<_>>())?;
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        println!("nothing is installed (hcp install <bundle>)");
        return Ok(ExitCode::SUCCESS);
    }
    let w = all.iter().map(|i| i.name.len()).max().unwrap_or(4).max(4);
    let v = all
        .iter()
        .map(|i| i.version.to_string().len())
        .max()
        .unwrap_or(7)
        .max(7);
    println!("{:<w$}  {:<v$}  PUBLISHER", "NAME", "VERSION");
    for i in &all {
        let publisher = i.publisher.as_deref().unwrap_or("UNSIGNED");
        println!("{:<w$}  {:<v$}  {publisher}", i.name, i.version.to_string());
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `hcp inspect`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Shows an installed capability (the highest version when none is named): its \
publisher, digests, grants and install receipt. Checks that the receipt verifies under this \
host's key and that the component on disk still has the installed digest.\n\n\
Exit status: 0 intact, 1 the receipt or the component does not check, 2 not installed."
)]
pub struct InspectArgs {
    /// NAME or NAME@VERSION.
    capability: String,
    /// Print the registry record and the install receipt as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataDir,
}

pub(super) fn inspect(args: InspectArgs) -> Outcome {
    let data_dir = args.data.path()?;
    let store = Store::open(&data_dir)?;
    let (name, version) = match args.capability.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (args.capability.as_str(), None),
    };
    let versions: Vec<Installed> = store
        .installed()?
        .into_iter()
        .filter(|i| i.name == name)
        .collect();
    let found = match version {
        Some(v) => versions.iter().find(|i| i.version.to_string() == v),
        None => versions.iter().max_by(|a, b| a.version.cmp(&b.version)),
    };
    let Some(i) = found else {
        anyhow::bail!("{} is not installed (hcp list)", args.capability);
    };
    let receipt_path = i.dir.join(RECEIPT_FILE);
    let receipt: InstallReceipt = serde_json::from_slice(
        &std::fs::read(&receipt_path).with_context(|| format!("{}", receipt_path.display()))?,
    )
    .with_context(|| format!("{}", receipt_path.display()))?;
    let receipt_check = crate::hostkey::load(&data_dir)
        .map_err(|e| format!("{e:#}"))
        .and_then(|host| receipt.verify(host.key.public()));
    let component = i.dir.join(hcp_bundle::layout::COMPONENT);
    let on_disk = std::fs::read(&component)
        .map(|b| hcp_contracts::jcs::sha256_bytes_tagged(&b))
        .map_err(|e| format!("{}: {e}", component.display()));
    let component_ok = on_disk.as_deref() == Ok(i.digest.as_str());
    let intact = receipt_check.is_ok() && component_ok;
    if args.json {
        print_json(&serde_json::json!({
            "installed": installed_json(i),
            "versions": versions.iter().map(|v| v.version.to_string()).collect::<Vec<_>>(),
            "receipt_verified": receipt_check.is_ok(),
            "component_intact": component_ok,
            "install_receipt": receipt,
        }))?;
        return Ok(if intact {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let r = &receipt.receipt;
    println!("capability  {}", i.id());
    println!("directory   {}", i.dir.display());
    match &r.publisher {
        Some(p) => println!(
            "publisher   {} (key {}, {})",
            p.name, p.key_id, p.public_key
        ),
        None => println!("publisher   UNSIGNED (installed with --allow-unsigned)"),
    }
    println!("installed   {} by {}", r.installed_at, r.host_id);
    if let Some(o) = &r.origin {
        let tag = o.tag.as_ref().map(|t| format!(":{t}")).unwrap_or_default();
        println!(
            "from        oci://{}/{}{tag}@{}",
            o.registry, o.repository, o.digest
        );
    }
    println!("world       {}", r.world);
    println!("risk        ceiling {}", r.risk_ceiling);
    println!("manifest    {}", r.manifest);
    match &on_disk {
        Ok(d) if component_ok => println!("component   {d} (matches the install)"),
        Ok(d) => println!("component   CHANGED: {d} on disk, {} installed", i.digest),
        Err(e) => println!("component   MISSING: {e}"),
    }
    match &receipt_check {
        Ok(()) => println!(
            "receipt     {RECEIPT_FILE}: signed by this host (key {}), verified",
            receipt.key_id
        ),
        Err(e) => println!("receipt     {RECEIPT_FILE}: DOES NOT VERIFY: {e}"),
    }
    println!("imports     {}", r.imports.join(", "));
    let g = &r.grants;
    let fs = || -> Vec<String> {
        g.filesystem
            .iter()
            .map(|f| {
                format!(
                    "{} -> {} ({})",
                    f.path,
                    f.guest_path.as_deref().unwrap_or(&f.path),
                    f.access.as_str()
                )
            })
            .collect()
    };
    let net = || -> Vec<String> {
        g.network
            .iter()
            .map(|n| format!("{}:{}", n.host, n.port))
            .collect()
    };
    println!("grants");
    for grant in Grant::ALL {
        let what = grant.field();
        let list = match grant.names(g) {
            Some(names) => names.to_vec(),
            None if grant == Grant::Filesystem => fs(),
            None if grant == Grant::Network => net(),
            None => grant.named(g),
        };
        let shown = if list.is_empty() {
            "none".to_owned()
        } else {
            list.join(", ")
        };
        println!("  {what:<12}{shown}");
    }
    if let Some(p) = &r.previous {
        println!("previous    {p}");
    }
    if !r.accepted_widening.is_empty() {
        println!("accepted    (--accept-new-grants)");
        for w in &r.accepted_widening {
            println!("  {w}");
        }
    }
    let all: Vec<String> = versions.iter().map(|v| v.version.to_string()).collect();
    println!("versions    {}", all.join(", "));
    Ok(if intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Arguments of `hcp remove`.
#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    /// NAME@VERSION.
    capability: String,
    /// Print what was removed as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataDir,
}

pub(super) fn remove(args: RemoveArgs) -> Outcome {
    let store = Store::open(&args.data.path()?)?;
    let Some((name, version)) = args.capability.split_once('@') else {
        let versions: Vec<String> = store
            .installed()?
            .into_iter()
            .filter(|i| i.name == args.capability)
            .map(|i| i.version.to_string())
            .collect();
        anyhow::bail!(
            "name the version to remove: {}@<version> (installed: {})",
            args.capability,
            if versions.is_empty() {
                "none".to_owned()
            } else {
                versions.join(", ")
            }
        );
    };
    let removed = install::remove(&store, name, version)?;
    if args.json {
        print_json(&serde_json::json!({
            "removed": removed.id(),
            "dir": removed.dir.display().to_string(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "removed {} ({} deleted)",
        removed.id(),
        removed.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
