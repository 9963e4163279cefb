//! `hcp store`: check the data directory's database, back it up, restore
//! a backup.

use super::{DataDir, Outcome, print_json};
use crate::store::durable::{self, Checked, Mark};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `hcp store`.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    #[command(flatten)]
    data: DataDir,
    #[command(subcommand)]
    command: StoreCommand,
}

/// Store subcommands.
#[derive(Debug, clap::Subcommand)]
pub(super) enum StoreCommand {
    /// Check the whole database: SQLite's quick_check of every page, and
    /// that it holds every receipt its mark (hcp.db.mark) recorded. Exit 2
    /// with what is wrong and how to recover. (`hcp serve` checks a
    /// database of up to 64 MiB whole at startup; beyond, the mark and the
    /// most recent rows only, in a time that does not grow with the store:
    /// run this check for the rest, e.g. daily or before a backup.)
    Check {
        /// Accept the loss: the mark becomes what the store holds now, so
        /// that the host serves from it (what it lost stays lost).
        #[arg(long)]
        accept_loss: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy the database to DEST (a new file) with SQLite's online backup:
    /// consistent while `hcp serve` runs.
    Backup {
        /// The backup file to write (refused if it exists).
        dest: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Put a backup in place as the database (stop every hcp process on
    /// the data directory first): what the store recorded after the backup
    /// is lost, and the backup becomes the store's mark.
    Restore {
        /// The backup file (from `hcp store backup`).
        backup: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn describe(m: &Mark) -> String {
    match &m.head {
        Some(head) => format!("{} receipts, last {head}", m.receipts),
        None => "no receipts".into(),
    }
}

fn print_checked(label: &str, c: &Checked) {
    println!("{label:<9} {}", describe(&c.store));
    match &c.mark {
        Some(m) => println!("mark was  {}", describe(m)),
        None => println!("mark was  none"),
    }
}

fn mark_json(m: &Mark) -> serde_json::Value {
    serde_json::json!({"receipts": m.receipts, "head": m.head})
}

pub(super) fn run(args: StoreArgs) -> Outcome {
    let dir = &args.data.path()?;
    match args.command {
        StoreCommand::Check {
            accept_loss,
            json: true,
        } => {
            let c = if accept_loss {
                durable::accept_loss(dir)?
            } else {
                durable::check(dir)?
            };
            print_json(&serde_json::json!({
                "database": dir.join(durable::DB).display().to_string(),
                "ok": true,
                "store": mark_json(&c.store),
                "mark": c.mark.as_ref().map(mark_json),
            }))?;
        }
        StoreCommand::Check {
            accept_loss: false,
            json: false,
        } => {
            let c = durable::check(dir)?;
            println!("{}: ok", dir.join(durable::DB).display());
            print_checked("store", &c);
        }
        StoreCommand::Check {
            accept_loss: true,
            json: false,
        } => {
            let c = durable::accept_loss(dir)?;
            println!(
                "{}: the mark now records the store as it is",
                dir.join(durable::DB).display()
            );
            print_checked("store", &c);
        }
        StoreCommand::Backup { dest, json } => {
            let mark = durable::backup(dir, &dest)?;
            if json {
                print_json(&serde_json::json!({
                    "backup": dest.display().to_string(),
                    "store": mark_json(&mark),
                }))?;
            } else {
                println!("{}: {}", dest.display(), describe(&mark));
            }
        }
        StoreCommand::Restore { backup, json } => {
            let c = durable::restore(dir, &backup)?;
            if json {
                print_json(&serde_json::json!({
                    "database": dir.join(durable::DB).display().to_string(),
                    "restored_from": backup.display().to_string(),
                    "store": mark_json(&c.store),
                    "mark": c.mark.as_ref().map(mark_json),
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{}: restored from {}",
                dir.join(durable::DB).display(),
                backup.display()
            );
            print_checked("store", &c);
        }
    }
    Ok(ExitCode::SUCCESS)
}
