//! `hcp trust`: the publishers whose signed bundles this host installs.

use super::{DataDir, Outcome, print_json};
use crate::store::{Added, Store};
use anyhow::Context as _;
use hcp_bundle::PublisherName;
use hcp_receipts::PublicKey;
use std::path::Path;
use std::process::ExitCode;

/// Arguments of `hcp trust`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    #[command(flatten)]
    data: DataDir,
    #[command(subcommand)]
    command: TrustCommand,
}

/// Trust subcommands.
#[derive(Debug, clap::Subcommand)]
pub(super) enum TrustCommand {
    /// Trust a publisher's key: bundles it signs under this name install.
    /// Get the key from the publisher through a channel you trust.
    Add {
        /// The publisher's name (as it signs its bundles).
        name: PublisherName,
        /// Its public key, `ed25519:<64 hex digits>`, or a file holding it
        /// (a `.pub` file).
        public_key: String,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the trusted publishers.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop trusting a publisher. Installed capabilities it signed stay
    /// installed; new installs of its bundles are refused.
    Remove {
        /// The publisher's name.
        name: PublisherName,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn parse_key(text: &str) -> anyhow::Result<PublicKey> {
    if text.starts_with(hcp_receipts::keys::PUBLIC_KEY_PREFIX) {
        return text.parse().map_err(anyhow::Error::msg);
    }
    let path = Path::new(text);
    if path.is_file() {
        return Ok(PublicKey::load(path)?);
    }
    anyhow::bail!(
        "{text:?} is neither a public key (ed25519:<64 hex digits>) nor a file holding one"
    )
}

pub(super) fn run(args: TrustArgs) -> Outcome {
    let store = Store::open(&args.data.path()?)?;
    match args.command {
        TrustCommand::Add {
            name,
            public_key,
            json,
        } => {
            let key = parse_key(&public_key)?;
            let added = store.trust_publisher(&name, &key)?;
            if json {
                print_json(&serde_json::json!({
                    "name": name.as_str(),
                    "key_id": key.key_id().to_string(),
                    "public_key": key.to_string(),
                    "already_trusted": matches!(added, Added::AlreadyTrusted),
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            match added {
                Added::New => println!("trusted {name} with key {}", key.key_id()),
                Added::AlreadyTrusted => {
                    println!("{name} is already trusted with key {}", key.key_id());
                }
            }
        }
        TrustCommand::List { json: true } => {
            let list: Vec<serde_json::Value> = store
                .trusted_publishers()?
                .into_iter()
                .map(|t| {
                    serde_json::json!({
                        "name": t.name.as_str(),
                        "key_id": t.public_key.key_id().to_string(),
                        "public_key": t.public_key.to_string(),
                        "added_at": t.added_at,
                    })
                })
                .collect();
            print_json(&list)?;
        }
        TrustCommand::List { json: false } => {
            let list = store.trusted_publishers()?;
            if list.is_empty() {
                println!("no trusted publishers (hcp trust add <name> <public key>)");
            }
            for t in list {
                println!(
                    "{}  key {}  {}  added {}",
                    t.name,
                    t.public_key.key_id(),
                    t.public_key,
                    t.added_at
                );
            }
        }
        TrustCommand::Remove { name, json } => {
            let removed = store.distrust_publisher(&name)?;
            let still: Vec<String> = store
                .installed()
                .context("registry")?
                .into_iter()
                .filter(|i| i.publisher.as_deref() == Some(name.as_str()))
                .map(|i| i.id())
                .collect();
            if json {
                print_json(&serde_json::json!({
                    "name": name.as_str(),
                    "key_id": removed.public_key.key_id().to_string(),
                    "still_installed": still,
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{name} (key {}) is no longer trusted",
                removed.public_key.key_id()
            );
            if !still.is_empty() {
                println!(
                    "installed capabilities it signed stay installed: {} (hcp remove to remove them)",
                    still.join(", ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
