//! `hcp trust`: the publishers whose signed bundles this host installs.

use super::{Outcome, Paths};
use crate::store::{Added, Store};
use anyhow::Context as _;
use hcp_bundle::PublisherName;
use hcp_receipts::PublicKey;
use std::path::Path;
use std::process::ExitCode;

/// Trust subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TrustCommand {
    /// Trust a publisher's key: bundles it signs under this name install.
    /// Get the key from the publisher through a channel you trust.
    Add {
        /// The publisher's name (as it signs its bundles).
        name: PublisherName,
        /// Its public key, `ed25519:<64 hex digits>`, or a file holding it
        /// (a `.pub` file).
        public_key: String,
    },
    /// List the trusted publishers.
    List,
    /// Stop trusting a publisher. Installed capabilities it signed stay
    /// installed; new installs of its bundles are refused.
    Remove {
        /// The publisher's name.
        name: PublisherName,
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

pub(super) fn run(paths: &Paths, cmd: TrustCommand) -> Outcome {
    let store = Store::open(&paths.data_dir)?;
    match cmd {
        TrustCommand::Add { name, public_key } => {
            let key = parse_key(&public_key)?;
            match store.trust_publisher(&name, &key)? {
                Added::New => println!("trusted {name} with key {}", key.key_id()),
                Added::AlreadyTrusted => {
                    println!("{name} is already trusted with key {}", key.key_id());
                }
            }
        }
        TrustCommand::List => {
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
        TrustCommand::Remove { name } => {
            let removed = store.distrust_publisher(&name)?;
            println!(
                "{name} (key {}) is no longer trusted",
                removed.public_key.key_id()
            );
            let still: Vec<String> = store
                .installed()
                .context("registry")?
                .into_iter()
                .filter(|i| i.publisher.as_deref() == Some(name.as_str()))
                .map(|i| i.id())
                .collect();
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
