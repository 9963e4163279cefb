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
use hcp_policy::operator::SecretSpace;
use hcp_policy::secret_spaces;
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
/// them (its help set last: [`DataDir`]'s arguments bring their own).
fn set_command(space: &SecretSpace) -> clap::Command {
    let (name, value_name, help) = space.name_arg;
    DataDir::augment_args(
        clap::Command::new("set")
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
    .about(space.help[2])
    .long_about(None)
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory as _, Parser as _};

    /// `hcp config` as clap's derive declared it when it was config's own
    /// command (`cli/config.rs`).
    #[derive(Debug, clap::Parser)]
    #[command(name = "hcp")]
    struct Before {
        #[command(subcommand)]
        command: BeforeCommand,
    }

    #[derive(Debug, clap::Subcommand)]
    enum BeforeCommand {
        /// The operator's `wasi:config` secrets: seal a value for a capability.
        #[command(subcommand)]
        Config(ConfigCommand),
    }

    #[derive(Debug, clap::Subcommand)]
    enum ConfigCommand {
        /// The values of keys `config.json` marks secret.
        #[command(subcommand)]
        Secret(BeforeSecret),
    }

    #[derive(Debug, clap::Subcommand)]
    enum BeforeSecret {
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

    fn help(mut cmd: clap::Command, path: &[&str]) -> (String, String) {
        cmd.build();
        let mut at = &mut cmd;
        for name in path {
            at = at
                .find_subcommand_mut(name)
                .unwrap_or_else(|| panic!("no {name}"));
        }
        (
            at.render_help().to_string(),
            at.render_long_help().to_string(),
        )
    }

    /// The platform's `hcp config secret set`, built from `wasi:config`'s
    /// `SecretSpace`, helps and parses as config's own command did.
    #[test]
    fn config_secret_set_is_what_it_was() {
        for path in [
            &["config"][..],
            &["config", "secret"],
            &["config", "secret", "set"],
        ] {
            assert_eq!(
                help(crate::cli::Cli::command(), path),
                help(Before::command(), path),
                "hcp {}",
                path.join(" ")
            );
        }
        let args = ["hcp", "config", "secret", "set", "probe", "api_token"];
        let cli = crate::cli::Cli::try_parse_from(args.iter().chain(&["--data-dir", "/d"]))
            .expect("parses");
        let crate::cli::Command::Secret(cmd) = cli.command else {
            panic!("not the secret command: {cli:?}");
        };
        assert_eq!(
            (cmd.interface, cmd.capability.as_str(), cmd.name.as_str()),
            ("wasi:config", "probe", "api_token")
        );
        assert_eq!(cmd.data.path().expect("path"), std::path::Path::new("/d"));
        for short in [&args[..5], &args[..3], &args[..2]] {
            let now = crate::cli::Cli::try_parse_from(short).expect_err("refused");
            let then = Before::try_parse_from(short).expect_err("refused");
            assert_eq!(now.kind(), then.kind(), "{short:?}");
        }
    }
}
