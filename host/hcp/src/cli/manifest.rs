//! `hcp manifest`: check a manifest, pin its component's digest.

use super::{Outcome, print_json};
use anyhow::Context as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Manifest subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ManifestCommand {
    /// Check a manifest and print what it resolves to (grants, limits,
    /// digest); exit 2 with every problem when it is invalid.
    Check {
        /// The capability manifest.
        manifest: PathBuf,
        /// Print what it resolves to as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write the component's sha256 into `component.digest`, so the
    /// manifest runs only the component it was reviewed with.
    Pin {
        /// The capability manifest.
        manifest: PathBuf,
        /// Write the pinned manifest here instead of in place.
        #[arg(long, short, value_name = "PATH")]
        output: Option<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(cmd: ManifestCommand) -> Outcome {
    match cmd {
        ManifestCommand::Check { manifest, json } => {
            let m =
                hcp_contracts::manifest::load(&manifest, hcp_contracts::LoadOptions::default())?;
            let g = hcp_sandbox::audit::GrantsSummary::of(&m.grants);
            if json {
                print_json(&serde_json::json!({
                    "manifest": manifest.display().to_string(),
                    "valid": true,
                    "capability": m.id(),
                    "risk_ceiling": m.risk_ceiling().to_string(),
                    "component": {
                        "digest": m.component.digest,
                        "pinned": m.component.pinned,
                        "bytes": m.component.bytes.len(),
                    },
                    "world": format!("{}/{}@{}", m.world.package, m.world.world, m.world.version),
                    "grants": g,
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            println!("{}: valid", manifest.display());
            println!(
                "  capability {} (risk ceiling {})",
                m.id(),
                m.risk_ceiling()
            );
            println!(
                "  component   {} ({}, {} bytes)",
                m.component.digest,
                if m.component.pinned {
                    "pinned"
                } else {
                    "not pinned"
                },
                m.component.bytes.len()
            );
            println!(
                "  world      {}/{}@{}",
                m.world.package, m.world.world, m.world.version
            );
            for (what, list) in g.iter() {
                println!(
                    "  {what:<12}{}",
                    if list.is_empty() {
                        "none".to_owned()
                    } else {
                        list.join(", ")
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ManifestCommand::Pin {
            manifest,
            output,
            json,
        } => {
            let m =
                hcp_contracts::manifest::load(&manifest, hcp_contracts::LoadOptions::default())?;
            let text = std::fs::read_to_string(&manifest)
                .with_context(|| format!("{}", manifest.display()))?;
            let mut doc: serde_json::Value = serde_json::from_str(&text)?;
            let component = doc
                .get_mut("component")
                .and_then(serde_json::Value::as_object_mut)
                .context("manifest has no component object")?;
            component.insert("digest".into(), m.component.digest.clone().into());
            let out = output.unwrap_or(manifest);
            let mut pretty = serde_json::to_string_pretty(&doc)?;
            pretty.push('\n');
            std::fs::write(&out, pretty).with_context(|| format!("{}", out.display()))?;
            if json {
                print_json(&serde_json::json!({
                    "manifest": out.display().to_string(),
                    "digest": m.component.digest,
                }))?;
            } else {
                println!("{}: pinned {}", out.display(), m.component.digest);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
