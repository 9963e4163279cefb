//! `hcp surface`: a component's imports and exports against its grants,
//! from a manifest, a bundle, or the component alone (no grants).

use super::{CacheDirs, Outcome, load_manifest, print_json, sandbox_caching_in};
use anyhow::Context as _;
use hcp_bundle::{Bundle, Limits};
use hcp_contracts::interfaces::Grant;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `hcp surface`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Compiles the component of a manifest, or of a bundle (.hcpb), and lists every \
import with the grant that allows it, or why it is refused; every export; the grants; and the \
verdict. Nothing is instantiated or run, and a bundle is not installed: it is unpacked into a \
temporary directory (its own directories are shown as ${manifest_dir}) and checked as an install \
checks it (digest pinned). A component file (.wasm) on its own is checked against no grants: \
each import it refuses needs a grant in the manifest to come.\n\nExit status: 0 allowed, 1 \
refused, 2 the manifest, bundle or component is invalid."
)]
pub struct SurfaceArgs {
    /// The capability manifest (JSON), a bundle (.hcpb), or a component
    /// (.wasm).
    #[arg(value_name = "MANIFEST|BUNDLE|COMPONENT")]
    manifest: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    dirs: CacheDirs,
}

/// What a file given to `hcp surface` holds, from its first bytes.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    Manifest,
    Component,
    Bundle,
}

fn sniff(path: &Path) -> anyhow::Result<Input> {
    let mut head = Vec::with_capacity(64);
    std::fs::File::open(path)
        .and_then(|f| f.take(64).read_to_end(&mut head))
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(if head.starts_with(b"\0asm") {
        Input::Component
    } else if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        Input::Manifest
    } else {
        Input::Bundle
    })
}

pub(super) fn run(args: SurfaceArgs) -> Outcome {
    // No `./.hcp` made where it runs: a temporary cache without a data
    // directory.
    let (cache_dir, _temp) = args.dirs.cache_dir_or_temp()?;
    let sandbox = sandbox_caching_in(&cache_dir)?;
    let report = match sniff(&args.manifest)? {
        Input::Manifest => sandbox.audit(&load_manifest(&args.manifest)?)?,
        Input::Bundle => {
            let (dir, manifest) = unpack(&args.manifest)?;
            let mut report = sandbox.audit(&manifest)?;
            let base = dir.path().canonicalize()?.display().to_string();
            for grant in report.grants.lines_mut(Grant::Filesystem) {
                *grant = grant.replace(&base, "${manifest_dir}");
            }
            report
        }
        Input::Component => {
            let report = sandbox.audit(&bare(&args.manifest)?)?;
            eprintln!(
                "note: {} is a component without a manifest: its imports are checked against \
                 no grants (each REFUSED one needs a grant in its manifest)",
                args.manifest.display()
            );
            report
        }
    };
    if args.json {
        print_json(&report)?;
    } else {
        println!("{report}");
    }
    Ok(if report.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A manifest for a component on its own: named after its file, version
/// 0.0.0, no grants, the host's world.
fn bare(path: &Path) -> anyhow::Result<hcp_contracts::Manifest> {
    use hcp_contracts::manifest::{HOST_WIT_PACKAGE, HOST_WIT_VERSION, HOST_WIT_WORLD};
    let component = std::path::absolute(path)?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .skip_while(|c| *c == '-')
        .take(64)
        .collect();
    let doc = serde_json::json!({
        "capability": {
            "name": if name.is_empty() { "component".to_owned() } else { name },
            "version": "0.0.0",
            "description": "a component without a manifest, as `hcp surface` checks it",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
            "safety": {
                "risk_ceiling": "R1",
                "requires_human_approval": false,
                "involves_physical_resources": false
            },
            "constraints": {"max_duration": "PT30S", "concurrent_limit": 1}
        },
        "component": {
            "path": component,
            "world": format!("{HOST_WIT_PACKAGE}/{HOST_WIT_WORLD}@{HOST_WIT_VERSION}")
        }
    });
    let base = component.parent().unwrap_or(Path::new("/"));
    Ok(hcp_contracts::manifest::from_value(
        doc,
        base,
        None,
        &path.display().to_string(),
        hcp_contracts::LoadOptions::default(),
    )?)
}

/// Reads a bundle and unpacks it into a temporary directory (removed when
/// the returned handle drops); loads its manifest as an install does.
fn unpack(path: &Path) -> anyhow::Result<(tempfile::TempDir, hcp_contracts::Manifest)> {
    let shown = path.display().to_string();
    let file = crate::install::read_bundle_file(path).map_err(|e| match e {
        crate::install::InstallError::Host(e) => e,
        other => anyhow::anyhow!("{shown}: {other}"),
    })?;
    let bundle = Bundle::read(&file.bytes, &Limits::default())
        .with_context(|| format!("{shown}: not a manifest, nor a bundle"))?;
    let dir = crate::install::unpack_to_temp(&bundle, "hcp-surface-")?;
    let manifest = hcp_contracts::manifest::load(
        &dir.path().join(hcp_bundle::layout::MANIFEST),
        hcp_contracts::LoadOptions {
            require_digest: true,
        },
    )
    .with_context(|| format!("{shown}: the bundle's manifest"))?;
    Ok((dir, manifest))
}
