//! `hcp replay`: re-derive every recorded verdict of an evidence pack from
//! its recorded policy, offline, and report each one that comes out
//! differently.

use super::Outcome;
use super::evidence::read_pack;
use hcp_policy::pep::PepDecider;
use hcp_receipts::replay::{Finding, replay};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `hcp replay`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Re-derives the verdict of every receipt in an evidence pack from the pack's \
policy snapshot and the receipt's recorded decision input, with the host's own decision code \
(hcp-policy), and reports every receipt whose verdict or reason comes out differently, whose \
input does not match its hash, or that was decided under another policy than the snapshot.\n\n\
Replay checks decisions, not integrity: run `hcp evidence verify` for that.\n\n\
Exit status: 0 every verdict replayed the same, 1 any difference, 2 the pack cannot be read."
)]
pub struct ReplayArgs {
    /// The evidence pack.
    pack: PathBuf,
}

pub(super) fn run(args: &ReplayArgs) -> Outcome {
    let pack = match read_pack(&args.pack)? {
        Ok(p) => p,
        Err(e) => anyhow::bail!("{}: {e}", args.pack.display()),
    };
    let decider = PepDecider::new(&pack);
    let report = replay(&pack, &decider);
    let changed = report
        .issues
        .iter()
        .filter(|i| {
            matches!(
                i.finding,
                Finding::VerdictChanged { .. } | Finding::ReasonChanged { .. }
            )
        })
        .count();
    let total: usize = pack.hosts.iter().map(|h| h.receipts.len()).sum();
    for issue in &report.issues {
        println!("{issue}");
    }
    println!(
        "{}: {total} receipts, {} replayed, {} the same, {changed} verdicts differ, {} other findings",
        if report.ok() { "ok" } else { "DIFFERS" },
        report.replayed,
        report.matched,
        report.issues.len() - changed
    );
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
