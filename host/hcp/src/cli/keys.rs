//! `hcp keys`: the host key, and publisher keys for signing bundles.

use super::{DataDir, Outcome, print_json};
use crate::hostkey;
use hcp_receipts::HostKey;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// Key subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create this host's key (`keys/host.key` in the data directory, mode
    /// 0600). It signs receipts, checkpoints, session tokens and install
    /// receipts; it is never replaced.
    Init {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        data: DataDir,
    },
    /// Print this host's id, key id and public key (never the private key).
    Show {
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        data: DataDir,
    },
    /// Generate a new key file (mode 0600) and print its public key: a
    /// publisher key for `hcp bundle sign`.
    Generate {
        /// Where to write the private key (refused if it exists).
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Prints `fields` as JSON, or aligned under the labels people read
/// (`key id`, `public`, ...).
fn show(json: bool, fields: &[(&str, &str, String)]) -> anyhow::Result<()> {
    if json {
        let object: serde_json::Map<String, Value> = fields
            .iter()
            .map(|(name, _, value)| ((*name).to_owned(), Value::String(value.clone())))
            .collect();
        return print_json(&object);
    }
    for (_, label, value) in fields {
        println!("{label:<9} {value}");
    }
    Ok(())
}

pub(super) fn run(cmd: KeysCommand) -> Outcome {
    match cmd {
        KeysCommand::Init { json, data } => {
            let dir = data.path()?;
            let id = hostkey::init(&dir)?;
            show(
                json,
                &[
                    ("host_id", "host", id.host_id.clone()),
                    ("key_id", "key id", id.key.key_id().to_string()),
                    ("public_key", "public", id.key.public().to_string()),
                    (
                        "key_file",
                        "key file",
                        hostkey::key_path(&dir).display().to_string(),
                    ),
                ],
            )?;
        }
        KeysCommand::Show { json, data } => {
            let id = hostkey::load(&data.path()?)?;
            show(
                json,
                &[
                    ("host_id", "host", id.host_id.clone()),
                    ("key_id", "key id", id.key.key_id().to_string()),
                    ("public_key", "public", id.key.public().to_string()),
                ],
            )?;
        }
        KeysCommand::Generate { out, json } => {
            if out.exists() {
                anyhow::bail!(
                    "{} exists already: a key file is never replaced",
                    out.display()
                );
            }
            let key = HostKey::generate()?;
            key.save(&out)?;
            show(
                json,
                &[
                    ("key_id", "key id", key.key_id().to_string()),
                    ("public_key", "public", key.public().to_string()),
                    ("key_file", "key file", out.display().to_string()),
                ],
            )?;
            if !json {
                eprintln!("keep {} private (mode 0600)", out.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
