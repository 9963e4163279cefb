//! `hcp completions` and `hcp man`: shell completions and manual pages,
//! generated from the command line's own definitions.

use super::{Cli, Outcome};
use anyhow::Context as _;
use clap::CommandFactory as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `hcp completions`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Prints a completion script for SHELL on standard output. For bash: \
`hcp completions bash > ~/.local/share/bash-completion/completions/hcp`; zsh: into a \
directory of $fpath as `_hcp`; fish: `~/.config/fish/completions/hcp.fish`."
)]
pub struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

/// Arguments of `hcp man`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Writes a manual page (roff) for `hcp` and for each of its subcommands \
(hcp.1, hcp-run.1, hcp-tasks-list.1, ...) into DIR, created if needed; without DIR, prints \
hcp.1 on standard output (`hcp man | man -l -`)."
)]
pub struct ManArgs {
    /// Where to write the pages.
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub(super) fn completions(args: &CompletionsArgs) -> Outcome {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "hcp", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn man(args: &ManArgs) -> Outcome {
    let command = Cli::command();
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
            let pages = pages(&command);
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("writing manual pages into {}", dir.display()))?;
            println!("{}: {pages} manual pages", dir.display());
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            let mut out = std::io::stdout().lock();
            out.write_all(&page)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How many pages `clap_mangen::generate_to` writes: one per command and
/// visible subcommand, at every depth (no `help` subcommand).
fn pages(command: &clap::Command) -> usize {
    1 + command
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(pages)
        .sum::<usize>()
}
