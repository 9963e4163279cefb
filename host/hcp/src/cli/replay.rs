//! `hcp replay`: re-derive every recorded verdict of an evidence pack from
//! its recorded policy, offline, and report each one that comes out
//! differently.

use super::evidence::read_pack;
use super::{Outcome, print_json};
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
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
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
    let code = if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if args.json {
        let issues: Vec<serde_json::Value> = report
            .issues
            .iter()
            .map(|i| {
                serde_json::json!({
                    "receipt_id": i.receipt.receipt_id,
                    "host_id": i.receipt.host_id,
                    "index": i.receipt.index,
                    "finding": i.finding.to_string(),
                    "verdict_differs": matches!(
                        i.finding,
                        Finding::VerdictChanged { .. } | Finding::ReasonChanged { .. }
                    ),
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "ok": report.ok(),
            "receipts": total,
            "replayed": report.replayed,
            "matched": report.matched,
            "verdicts_differ": changed,
            "other_findings": report.issues.len() - changed,
            "issues": issues,
        }))?;
        return Ok(code);
    }
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
    Ok(code)
}
