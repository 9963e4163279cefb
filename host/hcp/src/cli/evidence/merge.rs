//! `hcp evidence merge`: verify each input pack, merge them
//! ([`hcp_receipts::pack::merge_labeled`]), write the result atomically.

use super::{MergeArgs, report_json, trusted, write_atomically};
use crate::cli::{Outcome, print_json};
use anyhow::Context as _;
use hcp_contracts::RiskLevel;
use hcp_receipts::pack::{self, Pack, ReadLimits};
use hcp_receipts::verify::Report;
use hcp_receipts::{SigningPolicy, VerifyOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr as _;

/// Exit status of packs refused (an input does not verify, or they do not
/// fit together), as `hcp evidence verify` exits on a failure.
const REFUSED: u8 = 1;

pub(super) fn run(args: &MergeArgs) -> Outcome {
    let sign_from_risk = RiskLevel::from_str(&args.sign_from_risk)
        .map_err(|e| anyhow::anyhow!("--sign-from-risk: {e}"))?;
    let (trusted_keys, host_keys) = trusted(&args.trust_keys)?;
    for input in &args.packs {
        if same_file(input, &args.out) {
            anyhow::bail!(
                "-o {}: is the input {}; write the merged pack elsewhere",
                args.out.display(),
                input.display()
            );
        }
    }
    let options = VerifyOptions {
        signing: Some(SigningPolicy {
            sign_from_risk,
            sign_denies: true,
            checkpoint_every: None,
        }),
        trusted_keys,
        host_keys,
        known_checkpoints: Vec::new(),
    };

    // Every input verified first, each failing one reported.
    let mut packs: Vec<(String, Pack)> = Vec::with_capacity(args.packs.len());
    let mut refused: Vec<(&PathBuf, Report)> = Vec::new();
    for path in &args.packs {
        let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
        let report = hcp_receipts::verify_bytes(&bytes, &ReadLimits::default(), &options);
        if !report.ok() {
            refused.push((path, report));
            continue;
        }
        let pack = pack::read(&bytes, &ReadLimits::default())
            .with_context(|| format!("{}", path.display()))?;
        packs.push((path.display().to_string(), pack));
    }
    if !refused.is_empty() {
        return refuse_unverified(args, &refused, &options);
    }

    let merged = match pack::merge_labeled(packs) {
        Ok(m) => m,
        Err(e) => {
            if args.json {
                print_json(&serde_json::json!({"ok": false, "error": e.to_string()}))?;
            } else {
                eprintln!("cannot merge: {e}");
            }
            return Ok(ExitCode::from(REFUSED));
        }
    };
    let bytes = pack::write(&merged)?;
    write_atomically(&args.out, &bytes)?;
    summary(args, &merged, bytes.len())?;
    Ok(ExitCode::SUCCESS)
}

/// Whether `a` and `b` name one file (the same path, a link to it, or a
/// hard link).
fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if (x.dev(), x.ino()) == (y.dev(), y.ino()) {
            return true;
        }
    }
    let _ = (x, y);
    matches!(
        (std::fs::canonicalize(a), std::fs::canonicalize(b)),
        (Ok(x), Ok(y)) if x == y
    )
}

fn refuse_unverified(
    args: &MergeArgs,
    refused: &[(&PathBuf, Report)],
    options: &VerifyOptions,
) -> Outcome {
    let origin_checked = options.trusted_keys.is_some() || !options.host_keys.is_empty();
    if args.json {
        let refused: Vec<serde_json::Value> = refused
            .iter()
            .map(|(path, report)| {
                serde_json::json!({
                    "pack": path.display().to_string(),
                    "report": report_json(report, origin_checked, options),
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "ok": false,
            "error": "an input does not verify; nothing was written",
            "refused": refused,
        }))?;
    } else {
        for (path, report) in refused {
            eprint!("{} does not verify: {report}", path.display());
        }
        eprintln!(
            "refused: {} of {} inputs do not verify; nothing was written",
            refused.len(),
            args.packs.len()
        );
    }
    Ok(ExitCode::from(REFUSED))
}

/// Hosts, receipts per host, the total and the Lamport range.
fn summary(args: &MergeArgs, merged: &Pack, bytes: usize) -> anyhow::Result<()> {
    let range = |lamports: &mut dyn Iterator<Item = u64>| {
        lamports.fold(None, |r: Option<(u64, u64)>, l| {
            Some(r.map_or((l, l), |(lo, hi)| (lo.min(l), hi.max(l))))
        })
    };
    let total: usize = merged.hosts.iter().map(|h| h.receipts.len()).sum();
    let lamport = range(
        &mut merged
            .hosts
            .iter()
            .flat_map(|h| h.receipts.iter().map(|r| r.lamport)),
    );
    let show =
        |r: Option<(u64, u64)>| r.map_or_else(|| "none".to_owned(), |(a, b)| format!("{a}..{b}"));
    if args.json {
        let hosts: Vec<serde_json::Value> = merged
            .hosts
            .iter()
            .map(|h| {
                let l = range(&mut h.receipts.iter().map(|r| r.lamport));
                serde_json::json!({
                    "host_id": h.host_id,
                    "receipts": h.receipts.len(),
                    "first_seq": h.first_seq,
                    "checkpoints": h.checkpoints.len(),
                    "lamport": l.map(|(lo, hi)| serde_json::json!({"min": lo, "max": hi})),
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "ok": true,
            "path": args.out.display().to_string(),
            "inputs": args.packs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "hosts": hosts,
            "receipts": total,
            "lamport": lamport.map(|(lo, hi)| serde_json::json!({"min": lo, "max": hi})),
            "external_parents": merged.external_parents.len(),
            "bytes": bytes,
        }))?;
        return Ok(());
    }
    eprintln!(
        "wrote {}: {} packs merged, {} hosts, {total} receipts, Lamport {}, {} external parents, {bytes} bytes",
        args.out.display(),
        args.packs.len(),
        merged.hosts.len(),
        show(lamport),
        merged.external_parents.len(),
    );
    for h in &merged.hosts {
        let n = h.receipts.len() as u64;
        eprintln!(
            "  {}: {n} receipts (seq {}), {} checkpoints, Lamport {}",
            h.host_id,
            if n == 0 {
                "none".to_owned()
            } else {
                format!("{}..{}", h.first_seq, h.first_seq.saturating_add(n - 1))
            },
            h.checkpoints.len(),
            show(range(&mut h.receipts.iter().map(|r| r.lamport))),
        );
    }
    Ok(())
}
