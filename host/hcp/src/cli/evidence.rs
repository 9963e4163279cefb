//! `hcp evidence`: export evidence packs from the data directory, verify
//! them offline, and merge the packs of several hosts into one.

mod merge;

use super::{DataDir, Outcome, print_json};
use crate::evidence::{self, Selection};
use crate::store::Store;
use anyhow::Context as _;
use hcp_contracts::RiskLevel;
use hcp_receipts::checkpoint::Checkpoint;
use hcp_receipts::pack::{self, Pack, ReadLimits};
use hcp_receipts::{PublicKey, SigningPolicy, VerifyOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr as _;

/// Evidence subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum EvidenceCommand {
    /// Write an evidence pack (a deterministic tar: the same state always
    /// gives the same bytes) of a task's, a session's, or every receipt:
    /// receipts, checkpoints, inclusion and consistency proofs, decision
    /// inputs, the host's public key, the policy snapshot, manifests and
    /// WIT, the task messages.
    Export(ExportArgs),
    /// Verify an evidence pack offline (no database, no network): every
    /// signature (strictly), the hash chain, checkpoints and their
    /// consistency, every inclusion proof, the DAG. Every failure is printed
    /// with the receipt or checkpoint it concerns; exit 1 on any.
    Verify(VerifyArgs),
    /// Merge the evidence packs of several hosts (or several packs of one
    /// host) into one pack whose receipt DAG spans them all: each host's
    /// chain, checkpoints and keys are kept, so the merged pack verifies
    /// with each host's own signatures and replays each receipt under its
    /// own policy snapshot. Every input is verified first.
    #[command(long_about = MERGE_ABOUT)]
    Merge(MergeArgs),
    /// Archive the settled tasks older than a cutoff to an evidence pack,
    /// then prune them from the hot store, leaving a signed anchor the log
    /// goes on from.
    #[command(long_about = ARCHIVE_ABOUT)]
    Archive(ArchiveArgs),
    /// List the archives this data directory made (anchors, packs, what
    /// each pruned) and their totals.
    Archives(ArchivesArgs),
}

const ARCHIVE_ABOUT: &str = "Archives the oldest stretch of the receipt log that holds only tasks settled (completed, failed, rejected) before --before, ends at a checkpoint, and splits no task: writes it as an evidence pack (the pack `hcp evidence export --all` would write of it: deterministic, verifiable, replayable), syncs it and its directory, reads it back and verifies it, and only then, in one transaction, prunes those receipts' bodies and decision inputs, the tasks, their messages, approvals, checkpoints and artifacts from the hot store, recording a signed anchor (the last checkpoint's size, root and hash, the Lamport clock, the pack's SHA-256). The receipts' hashes go too: the hot store keeps the Merkle tree's frontier at the anchor, from which the log goes on provably. Blobs no kept artifact names are removed last.\n\nThe next archive's pack starts at that checkpoint: `hcp evidence verify a1.tar a2.tar ...` proves a series unbroken. A crash at any point loses nothing; run the command again. Nothing unsettled, or newer than the cutoff, is ever pruned; a task still running or waiting for an approval stops the stretch before its first receipt.\n\nExit status: 0 archived (or nothing old enough), 1 the pack does not verify, 2 an error.";

/// Arguments of `hcp evidence archive`.
#[derive(Debug, clap::Args)]
pub struct ArchiveArgs {
    /// The cutoff: tasks settled before it are archived. An RFC 3339 time
    /// (`2026-01-01T00:00:00Z`) or an age (`30d`, `12h`, `45m`, `90s`).
    #[arg(long, value_name = "TIME|AGE")]
    before: String,
    /// Where to write the pack (written through a temporary file, synced).
    #[arg(short, long, value_name = "PATH")]
    out: PathBuf,
    /// Print what was archived as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataDir,
}

/// Arguments of `hcp evidence archives`.
#[derive(Debug, clap::Args)]
pub struct ArchivesArgs {
    /// Print the list as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataDir,
}

const MERGE_ABOUT: &str = "Merges the evidence packs of several hosts (or several packs of one \
host) into one pack whose receipt DAG spans them all: each host's chain, checkpoints and keys \
are kept, so `hcp evidence verify` checks each host's receipts with its own key, the receipts of \
all hosts are ordered by their Lamport clocks, a parent on another host becomes an edge of the \
DAG, and `hcp replay` decides each receipt under its own policy snapshot.\n\n\
Every input is verified first (as `hcp evidence verify` would, with the same --trust-key and \
--sign-from-risk); one that does not verify is refused with its failures. Packs of one host are \
joined where they overlap or meet and must agree receipt for receipt (a disagreement is a fork, \
named with its host and seq); receipts missing between two packs of one host are a gap. Two \
different public keys with one key id, or two files (manifests, messages, a policy snapshot) \
with one name and different contents, are refused by name. The output does not depend on the \
order of the inputs, and is written through a temporary file, never over an input.\n\n\
Exit status: 0 merged and written, 1 an input does not verify or the packs do not fit together, \
2 a file cannot be read or written.";

/// Arguments of `hcp evidence export`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["task", "session", "all"])))]
pub struct ExportArgs {
    /// The receipts of this task.
    #[arg(long, value_name = "ID")]
    task: Option<String>,
    /// The receipts of this session.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Every receipt.
    #[arg(long)]
    all: bool,
    /// Where to write the pack.
    #[arg(short, long, value_name = "PATH")]
    out: PathBuf,
    /// Print what was written as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataDir,
}

/// Arguments of `hcp evidence verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The pack; several packs of one host's archive, oldest first, are
    /// each verified and must make one unbroken series (no gap, no
    /// reorder, each starting at the last checkpoint of the one before).
    #[arg(required = true, num_args = 1.., value_name = "PACK")]
    packs: Vec<PathBuf>,
    /// A key the pack's signatures must be made with: `ed25519:<hex>`, or a
    /// file holding it (as `hcp keys show` prints it, or a pack's
    /// `keys/<id>.pub`); `HOST=KEY` (or `HOST=PATH`) trusts it for the
    /// host `HOST` only. Repeatable. Without one, the pack's own keys are
    /// the trusted ones: that proves integrity, not origin. A key given
    /// without a host may sign for any host of the pack: bind each host's
    /// key when the pack holds several hosts.
    #[arg(long = "trust-key", value_name = "KEY|PATH|HOST=KEY")]
    trust_keys: Vec<String>,
    /// An earlier (or later) pack of the same host: the pack verified must
    /// not roll back or fork away from its checkpoints.
    #[arg(long = "known-checkpoints", value_name = "PACK")]
    known: Vec<PathBuf>,
    /// Receipts at this risk level or above must be signed one by one (and
    /// every DENY is); the host signs from R4.
    #[arg(long, value_name = "LEVEL", default_value = "R4")]
    sign_from_risk: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `hcp evidence merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The packs to merge: two or more.
    #[arg(required = true, num_args = 2.., value_name = "PACK")]
    packs: Vec<PathBuf>,
    /// Where to write the merged pack (not one of the inputs).
    #[arg(short, long, value_name = "PATH")]
    out: PathBuf,
    /// A key every input's signatures must be made with, as for `hcp
    /// evidence verify` (`HOST=KEY` for one host only). Repeatable.
    /// Without one, each pack's own keys are the trusted ones.
    #[arg(long = "trust-key", value_name = "KEY|PATH|HOST=KEY")]
    trust_keys: Vec<String>,
    /// Receipts at this risk level or above must be signed one by one (and
    /// every DENY is), in every input; the host signs from R4.
    #[arg(long, value_name = "LEVEL", default_value = "R4")]
    sign_from_risk: String,
    /// Print the summary (or the refusal) as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cmd: EvidenceCommand) -> Outcome {
    match cmd {
        EvidenceCommand::Export(args) => export(&args),
        EvidenceCommand::Verify(args) => verify(&args),
        EvidenceCommand::Merge(args) => merge::run(&args),
        EvidenceCommand::Archive(args) => archive(&args),
        EvidenceCommand::Archives(args) => archives(&args),
    }
}

fn export(args: &ExportArgs) -> Outcome {
    let data_dir = args.data.path()?;
    if !data_dir.join("hcp.db").exists() {
        anyhow::bail!("{}: no host data here", data_dir.display());
    }
    let store = Store::open(&data_dir)?;
    let selection = match (&args.task, &args.session) {
        (Some(t), _) => Selection::Task(t.clone()),
        (_, Some(s)) => Selection::Session(s.clone()),
        _ => Selection::All,
    };
    let pack = evidence::export(&store, &selection)?;
    let bytes = pack::write(&pack)?;
    write_atomically(&args.out, &bytes)?;
    let section = &pack.hosts[0];
    if args.json {
        print_json(&serde_json::json!({
            "path": args.out.display().to_string(),
            "receipts": section.receipts.len(),
            "signed_receipts": section.receipts.iter().filter(|r| r.is_signed()).count(),
            "checkpoints": section.checkpoints.len(),
            "bytes": bytes.len(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "wrote {}: {} receipts ({} signed), {} checkpoints, {} bytes",
        args.out.display(),
        section.receipts.len(),
        section.receipts.iter().filter(|r| r.is_signed()).count(),
        section.checkpoints.len(),
        bytes.len()
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("{}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}", path.display()))?;
    if let Some(dir) = dir
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Reads a pack; the decision inputs too (replay needs them).
pub(super) fn read_pack(path: &Path) -> anyhow::Result<Result<Pack, pack::PackError>> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    Ok(pack::read(&bytes, &ReadLimits::default()))
}

/// The keys trusted for any host (`None` when there are none), and those
/// trusted for one host (`HOST=KEY`).
pub(super) type Trusted = (Option<Vec<PublicKey>>, Vec<(String, PublicKey)>);

/// The `--trust-key` arguments.
pub(super) fn trusted(args: &[String]) -> anyhow::Result<Trusted> {
    let mut any = Vec::new();
    let mut bound = Vec::new();
    for text in args {
        match text.split_once('=') {
            // `HOST=`, unless the whole is a file that exists.
            Some((host, key))
                if hcp_receipts::ids::check_host_id(host).is_ok() && !Path::new(text).exists() =>
            {
                bound.push((host.to_owned(), trust_key(key)?));
            }
            _ => any.push(trust_key(text)?),
        }
    }
    Ok(((!any.is_empty()).then_some(any), bound))
}

pub(super) fn trust_key(text: &str) -> anyhow::Result<PublicKey> {
    if let Ok(key) = PublicKey::from_str(text.trim()) {
        return Ok(key);
    }
    let content = std::fs::read_to_string(text).with_context(|| format!("--trust-key {text}"))?;
    // A `hcp keys show` listing, or a bare key.
    let line = content
        .lines()
        .find_map(|l| l.strip_prefix("public").map(str::trim))
        .unwrap_or(content.trim());
    PublicKey::from_str(line).map_err(|e| anyhow::anyhow!("--trust-key {text}: {e}"))
}

fn verify(args: &VerifyArgs) -> Outcome {
    if let [pack] = args.packs.as_slice() {
        return verify_one(args, pack);
    }
    verify_series(args)
}

/// The options of `hcp evidence verify`'s arguments.
fn verify_options(args: &VerifyArgs) -> anyhow::Result<VerifyOptions> {
    let sign_from_risk = RiskLevel::from_str(&args.sign_from_risk)
        .map_err(|e| anyhow::anyhow!("--sign-from-risk: {e}"))?;
    let (trusted_keys, host_keys) = trusted(&args.trust_keys)?;
    let mut known_checkpoints: Vec<Checkpoint> = Vec::new();
    for path in &args.known {
        match read_pack(path)? {
            Ok(p) => known_checkpoints.extend(p.hosts.into_iter().flat_map(|h| h.checkpoints)),
            Err(e) => anyhow::bail!("--known-checkpoints {}: {e}", path.display()),
        }
    }
    Ok(VerifyOptions {
        signing: Some(SigningPolicy {
            sign_from_risk,
            sign_denies: true,
            checkpoint_every: None,
        }),
        trusted_keys,
        host_keys,
        known_checkpoints,
    })
}

/// `hcp evidence verify a1.tar a2.tar ...`: each pack verified, then the
/// series (`hcp_evidence::archive::check_series`).
fn verify_series(args: &VerifyArgs) -> Outcome {
    let options = verify_options(args)?;
    let origin_checked = options.trusted_keys.is_some() || !options.host_keys.is_empty();
    let mut reports = Vec::new();
    let mut packs = Vec::new();
    for path in &args.packs {
        let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
        let report = hcp_receipts::verify_bytes(&bytes, &ReadLimits::default(), &options);
        packs.push(pack::read(&bytes, &ReadLimits::default()).ok());
        reports.push(report);
    }
    let series: Vec<String> = if packs.iter().all(Option::is_some) {
        let named: Vec<evidence::archive::SeriesPack<'_>> = args
            .packs
            .iter()
            .zip(packs.iter().flatten())
            .map(|(path, pack)| evidence::archive::SeriesPack {
                name: path.display().to_string(),
                pack,
            })
            .collect();
        evidence::archive::check_series(&named)
    } else {
        vec!["a pack does not read: the series is not checked".to_owned()]
    };
    let ok = series.is_empty() && reports.iter().all(hcp_receipts::Report::ok);
    let code = if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if args.json {
        print_json(&serde_json::json!({
            "ok": ok,
            "packs": args.packs.iter().zip(&reports).map(|(path, report)| {
                let mut v = report_json(report, origin_checked, &options);
                v["path"] = serde_json::json!(path.display().to_string());
                v
            }).collect::<Vec<_>>(),
            "series": {"ok": series.is_empty(), "problems": series},
        }))?;
        return Ok(code);
    }
    for (path, report) in args.packs.iter().zip(&reports) {
        println!("== {}", path.display());
        print!("{}", super::output::for_terminal(&report.to_string()));
    }
    if series.is_empty() {
        println!("series: {} packs, unbroken", args.packs.len());
    } else {
        println!("series FAILED:");
        for problem in &series {
            println!("[series] {}", super::output::for_terminal(problem));
        }
    }
    if !origin_checked {
        println!("{ORIGIN_NOT_CHECKED}");
    }
    Ok(code)
}

fn archive(args: &ArchiveArgs) -> Outcome {
    let data_dir = args.data.path()?;
    if !data_dir.join("hcp.db").exists() {
        anyhow::bail!("{}: no host data here", data_dir.display());
    }
    let before = evidence::archive::cutoff(&args.before, time::OffsetDateTime::now_utc())
        .context("--before")?;
    let store = Store::open(&data_dir)?;
    let identity = evidence::hostkey::load(&data_dir)?;
    let done = evidence::archive::archive(&store, &identity.key, &before, &args.out)?;
    if args.json {
        print_json(&serde_json::to_value(&done)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    match &done.archive {
        Some(a) => eprintln!(
            "archived receipts {} to {} ({} tasks) to {}: {} bytes, sha256 {}; pruned from the hot store (archive {})",
            a.anchor.first_seq,
            a.anchor.tree_size - 1,
            a.tasks,
            args.out.display(),
            a.pack_bytes,
            a.anchor.pack_sha256,
            a.anchor.number
        ),
        None => eprintln!(
            "nothing to archive: no settled task older than {before} ends a stretch at a checkpoint"
        ),
    }
    if done.blobs_collected > 0 {
        eprintln!(
            "removed {} blobs no kept artifact names",
            done.blobs_collected
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn archives(args: &ArchivesArgs) -> Outcome {
    let data_dir = args.data.path()?;
    if !data_dir.join("hcp.db").exists() {
        anyhow::bail!("{}: no host data here", data_dir.display());
    }
    let store = Store::open(&data_dir)?;
    let list = evidence::archive::archives(&store)?;
    let summary = evidence::archive::summary(&store)?;
    if args.json {
        print_json(&serde_json::json!({"summary": summary, "archives": list}))?;
        return Ok(ExitCode::SUCCESS);
    }
    for a in &list {
        println!(
            "{:>4}  seq {}..{}  {} tasks  {} bytes  {}  {}  sha256 {}",
            a.anchor.number,
            a.anchor.first_seq,
            a.anchor.tree_size.saturating_sub(1),
            a.tasks,
            a.pack_bytes,
            a.anchor.archived_at,
            super::output::for_terminal(&a.pack),
            a.anchor.pack_sha256
        );
    }
    println!(
        "{} archives, {} tasks, {} receipts, {} pack bytes; the hot log starts at seq {}",
        summary.archives, summary.tasks, summary.receipts, summary.pack_bytes, summary.hot_from
    );
    Ok(ExitCode::SUCCESS)
}

fn verify_one(args: &VerifyArgs, pack: &Path) -> Outcome {
    let sign_from_risk = RiskLevel::from_str(&args.sign_from_risk)
        .map_err(|e| anyhow::anyhow!("--sign-from-risk: {e}"))?;
    let (trusted_keys, host_keys) = trusted(&args.trust_keys)?;
    let mut known_checkpoints: Vec<Checkpoint> = Vec::new();
    for path in &args.known {
        match read_pack(path)? {
            Ok(p) => known_checkpoints.extend(p.hosts.into_iter().flat_map(|h| h.checkpoints)),
            Err(e) => anyhow::bail!("--known-checkpoints {}: {e}", path.display()),
        }
    }
    let bytes = std::fs::read(pack).with_context(|| format!("{}", pack.display()))?;
    let options = VerifyOptions {
        signing: Some(SigningPolicy {
            sign_from_risk,
            sign_denies: true,
            checkpoint_every: None,
        }),
        // Without --trust-key, the keys the pack declares (each receipt
        // and checkpoint must still verify under one of them).
        trusted_keys,
        host_keys,
        known_checkpoints,
    };
    // Read in place: canonical receipt lines are hashed as stored.
    let report = hcp_receipts::verify_bytes(&bytes, &ReadLimits::default(), &options);
    let origin_checked = options.trusted_keys.is_some() || !options.host_keys.is_empty();
    let unreadable = matches!(
        report.failures.as_slice(),
        [failure] if failure.check == hcp_receipts::verify::Check::Pack
    );
    let code = if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if args.json {
        print_json(&report_json(&report, origin_checked, &options))?;
        return Ok(code);
    }
    if unreadable {
        println!("FAILED: {}", pack.display());
        println!(
            "[pack] {}",
            super::output::for_terminal(&report.failures[0].message)
        );
        return Ok(code);
    }
    print!("{}", super::output::for_terminal(&report.to_string()));
    if !origin_checked {
        println!("{ORIGIN_NOT_CHECKED}");
    }
    Ok(code)
}

/// What `hcp evidence verify` says when no `--trust-key` was given.
const ORIGIN_NOT_CHECKED: &str = "origin not checked: trusted the keys the pack declares; \
pass --trust-key to check who signed it";

/// The report of `hcp evidence verify --json`.
pub(super) fn report_json(
    report: &hcp_receipts::verify::Report,
    origin_checked: bool,
    options: &VerifyOptions,
) -> serde_json::Value {
    let failures: Vec<serde_json::Value> = report
        .failures
        .iter()
        .map(|f| {
            serde_json::json!({
                "check": f.check.as_str(),
                "receipt": f.receipt.as_ref().map(|r| serde_json::json!({
                    "receipt_id": r.receipt_id,
                    "host_id": r.host_id,
                    "index": r.index,
                })),
                "checkpoint": f.checkpoint.as_ref().map(|c| serde_json::json!({
                    "host_id": c.host_id,
                    "index": c.index,
                    "tree_size": c.tree_size,
                })),
                "message": f.message,
                "text": f.to_string(),
            })
        })
        .collect();
    serde_json::json!({
        "ok": report.ok(),
        "hosts": report.hosts,
        "receipts": report.receipts,
        "signed_receipts": report.signed_receipts,
        "checkpoints": report.checkpoints,
        "origin_checked": origin_checked,
        "trusted_keys": options
            .trusted_keys
            .iter()
            .flatten()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        "host_keys": options
            .host_keys
            .iter()
            .map(|(host, key)| serde_json::json!({"host": host, "key": key.to_string()}))
            .collect::<Vec<_>>(),
        "note": (!origin_checked).then_some(ORIGIN_NOT_CHECKED),
        "failures": failures,
    })
}
