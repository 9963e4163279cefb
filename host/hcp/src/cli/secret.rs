//! `hcp <command> secret set`: the operator's secrets of an interface. A
//! name the interface's policy file marks secret (`wasi:config`'s
//! `config.json`, `{"secret": true}`) gets its value here, read from stdin
//! (so that it is in no shell history nor process list) and sealed with
//! the data directory's data key (`hcp_store::operator_secrets`); no
//! policy file holds it.
//!
//! The commands are the platform's: one per interface that declares a
//! [`hcp_policy::operator::SecretSpace`] (`hcp config secret set` for
//! `wasi:config`), with the name and help it declares; nothing here names
//! an interface.

use super::{DataDir, Outcome};
use anyhow::{Context as _, bail};
use clap::{Arg, ArgMatches, Args as _, FromArgMatches};
use hcp_policy::operator::{SecretSpace, secret_spaces};
use std::io::Read as _;
use std::process::ExitCode;

/// `hcp <command> secret set <capability> <name>`, for the interface
/// whose [`SecretSpace`] names `<command>`.
#[derive(Debug)]
pub struct SecretCommand {
    /// The interface the secret is of.
    interface: &'static str,
    /// The capability's name (without version).
    capability: String,
    /// The secret's name.
    name: String,
    data: DataDir,
}

const CAPABILITY: &str = "capability";

/// `<command> secret set`'s arguments, as the interface's space declares
/// them.
fn set_command(space: &SecretSpace) -> clap::Command {
    let (name, value_name, help) = space.name_arg;
    DataDir::augment_args(
        clap::Command::new("set")
            .about(space.help[2])
            .arg(
                Arg::new(CAPABILITY)
                    .value_name("CAPABILITY")
                    .required(true)
                    .help("The capability's name (without version)"),
            )
            .arg(
                Arg::new(name)
                    .value_name(value_name)
                    .required(true)
                    .help(help),
            ),
    )
}

impl clap::Subcommand for SecretCommand {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        secret_spaces().fold(cmd, |cmd, (_, space)| {
            cmd.subcommand(
                clap::Command::new(space.command)
                    .about(space.help[0])
                    .subcommand_required(true)
                    .arg_required_else_help(true)
                    .subcommand(
                        clap::Command::new("secret")
                            .about(space.help[1])
                            .subcommand_required(true)
                            .arg_required_else_help(true)
                            .subcommand(set_command(space)),
                    ),
            )
        })
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        secret_spaces().any(|(_, s)| s.command == name)
    }
}

impl FromArgMatches for SecretCommand {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let missing = || clap::Error::new(clap::error::ErrorKind::MissingSubcommand);
        let (command, sub) = matches.subcommand().ok_or_else(missing)?;
        let (interface, space) = secret_spaces()
            .find(|(_, s)| s.command == command)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
        let set = match sub.subcommand() {
            Some(("secret", secret)) => match secret.subcommand() {
                Some(("set", set)) => set,
                _ => return Err(missing()),
            },
            _ => return Err(missing()),
        };
        let arg = |id: &str| {
            set.get_one::<String>(id)
                .cloned()
                .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::MissingRequiredArgument))
        };
        Ok(Self {
            interface,
            capability: arg(CAPABILITY)?,
            name: arg(space.name_arg.0)?,
            data: DataDir::from_arg_matches(set)?,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

pub(super) fn run(cmd: SecretCommand) -> Outcome {
    let SecretCommand {
        interface,
        capability,
        name,
        data,
    } = cmd;
    let dir = data.path()?;
    let mut value = String::new();
    std::io::stdin()
        .take(hcp_store::operator_secrets::MAX_SECRET_BYTES as u64 + 2)
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
    hcp_store::operator_secrets::set(&dir, &data_key, interface, &capability, &name, value)?;
    println!("secret {name} of {capability} sealed");
    Ok(ExitCode::SUCCESS)
}
