//! `hcp config`: the operator's `wasi:config` secrets. A key the policy's
//! `config.json` marks `{"secret": true}` gets its value here, read from
//! stdin (so that it is in no shell history nor process list) and sealed
//! with the data directory's data key (`hcp_store::config_secrets`); no
//! policy file holds it.

use super::{DataDir, Outcome};
use anyhow::{Context as _, bail};
use std::io::Read as _;
use std::process::ExitCode;

/// `hcp config` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// The values of keys `config.json` marks secret.
    #[command(subcommand)]
    Secret(SecretCommand),
}

/// `hcp config secret` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum SecretCommand {
    /// Seal the value read from stdin (one trailing newline dropped) as
    /// secret KEY of CAPABILITY, replacing any earlier value. The policy's
    /// `config.json` must mark the key `{"secret": true}` for a capability
    /// granted it to read it.
    Set {
        /// The capability's name (without version).
        capability: String,
        /// The key (`[A-Za-z0-9_.-]`, at most 128).
        key: String,
        #[command(flatten)]
        data: DataDir,
    },
}

pub(super) fn run(cmd: ConfigCommand) -> Outcome {
    match cmd {
        ConfigCommand::Secret(SecretCommand::Set {
            capability,
            key,
            data,
        }) => {
            let dir = data.path()?;
            let mut value = String::new();
            std::io::stdin()
                .take(hcp_store::config_secrets::MAX_SECRET_BYTES as u64 + 2)
                .read_to_string(&mut value)
                .context("reading the secret from stdin (UTF-8)")?;
            let value = value
                .strip_suffix('\n')
                .map(|v| v.strip_suffix('\r').unwrap_or(v))
                .unwrap_or(&value);
            if value.is_empty() {
                bail!("no secret on stdin");
            }
            let data_key = hcp_store::seal::DataKey::load_or_create(&dir)?;
            hcp_store::config_secrets::set(&dir, &data_key, &capability, &key, value)?;
            println!("secret {key} of {capability} sealed");
            Ok(ExitCode::SUCCESS)
        }
    }
}
