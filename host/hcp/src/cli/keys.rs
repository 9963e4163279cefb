//! `hcp keys`: the host key, and publisher keys for signing bundles.

use super::{Outcome, Paths};
use crate::hostkey;
use hcp_receipts::HostKey;
use std::path::PathBuf;
use std::process::ExitCode;

/// Key subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create this host's key (`keys/host.key` in the data directory, mode
    /// 0600). It signs receipts, checkpoints, session tokens and install
    /// receipts; it is never replaced.
    Init,
    /// Print this host's id, key id and public key (never the private key).
    Show,
    /// Generate a new key file (mode 0600) and print its public key: a
    /// publisher key for `hcp bundle sign`.
    Generate {
        /// Where to write the private key (refused if it exists).
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
    },
}

pub(super) fn run(paths: &Paths, cmd: KeysCommand) -> Outcome {
    match cmd {
        KeysCommand::Init => {
            let id = hostkey::init(&paths.data_dir)?;
            println!("host      {}", id.host_id);
            println!("key id    {}", id.key.key_id());
            println!("public    {}", id.key.public());
            println!("key file  {}", hostkey::key_path(&paths.data_dir).display());
        }
        KeysCommand::Show => {
            let id = hostkey::load(&paths.data_dir)?;
            println!("host      {}", id.host_id);
            println!("key id    {}", id.key.key_id());
            println!("public    {}", id.key.public());
        }
        KeysCommand::Generate { out } => {
            if out.exists() {
                anyhow::bail!(
                    "{} exists already: a key file is never replaced",
                    out.display()
                );
            }
            let key = HostKey::generate()?;
            key.save(&out)?;
            println!("key id    {}", key.key_id());
            println!("public    {}", key.public());
            println!("key file  {} (mode 0600; keep it private)", out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
