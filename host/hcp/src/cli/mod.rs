//! The `hcp` command line.
//!
//! Exit codes: 0 the command did what was asked (a task completed, a surface
//! was allowed); 1 it ran and the answer is negative (a task failed or was
//! rejected, a surface was refused); 2 the invocation or its input is wrong.
#![allow(
    clippy::print_stdout,
    reason = "the command line's answers go to stdout"
)]

mod bundle;
mod evidence;
mod hid;
mod init;
mod installed;
mod keys;
mod manifest;
mod new;
mod policy;
mod replay;
mod review;
mod run;
mod serve;
mod store;
mod surface;
mod task_report;
mod tasks;
mod trust;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// The HCP host: runs capabilities as WebAssembly components with exactly
/// the surface their manifests grant.
#[derive(Debug, Parser)]
#[command(name = "hcp", version, about, long_about = None)]
pub struct Cli {
    /// Data directory (SQLite database, artifacts, compiled-code cache).
    #[arg(long, global = true, env = "HCP_DATA_DIR", default_value = ".hcp")]
    pub data_dir: PathBuf,

    /// Compiled-code cache (default: `cache/` in the data directory).
    #[arg(long, global = true, env = "HCP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// The operator's policy directory (callers, risk, context, budgets,
    /// envelopes, Cedar authorization). Default: ./policies if it is a
    /// directory, else policies/ in the data directory (`hcp init` makes it).
    #[arg(long, global = true, env = "HCP_POLICIES")]
    pub policies: Option<PathBuf>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Where the host keeps its state, resolved to absolute paths.
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    pub(crate) data_dir: PathBuf,
    pub(crate) cache_dir: PathBuf,
    pub(crate) policies_dir: PathBuf,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make a data directory with a starting policy set (a developer, an
    /// operator) and a publisher key, to run the host outside this
    /// repository.
    Init(init::InitArgs),
    /// Create a new capability project that builds and runs at once.
    New(new::NewArgs),
    /// Run one task_submit against a capability manifest and print the answer.
    Run(run::RunArgs),
    /// Show a component's imports and exports against its grants, and the
    /// verdict (exit 1 when refused).
    Surface(surface::SurfaceArgs),
    /// Work with capability manifests.
    #[command(subcommand)]
    Manifest(manifest::ManifestCommand),
    /// The host key and publisher keys.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Evidence packs of receipts: export, verify offline.
    #[command(subcommand)]
    Evidence(evidence::EvidenceCommand),
    /// Re-derive every verdict of an evidence pack from its recorded policy.
    Replay(replay::ReplayArgs),
    /// Pack a plugin into a bundle (.hcpb); sign a bundle.
    #[command(subcommand)]
    Bundle(bundle::BundleCommand),
    /// The publishers whose signed bundles this host installs.
    #[command(subcommand)]
    Trust(trust::TrustCommand),
    /// Check a bundle and install it (exit 1 when refused).
    Install(installed::InstallArgs),
    /// List installed capabilities.
    List(installed::ListArgs),
    /// Show an installed capability and check its install receipt.
    Inspect(installed::InspectArgs),
    /// Remove an installed capability version.
    Remove(installed::RemoveArgs),
    /// Review a bundle without installing it (exit 1 unless installable).
    Review(review::ReviewArgs),
    /// Serve the HTTP API and the operator's page.
    Serve(serve::ServeArgs),
    /// The data directory's database: check it, back it up, restore it.
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// Submit a task_submit through the admission gate (and run it).
    Submit(tasks::SubmitArgs),
    /// Tasks on this host.
    #[command(subcommand)]
    Tasks(tasks::TasksCommand),
    /// Tasks waiting for an operator's decision.
    #[command(subcommand)]
    Approvals(tasks::ApprovalsCommand),
    /// HID mediation: the operator's commands (through `hcp serve`), the
    /// session log, the simulated executor.
    #[command(subcommand)]
    Hid(hid::HidCommand),
    /// The running server's policy: reload it (through `hcp serve`).
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Artifacts by their hcp:// URI.
    #[command(subcommand)]
    Artifacts(tasks::ArtifactsCommand),
}

/// A command's result: the exit code, or an error for stderr (exit 2).
pub(crate) type Outcome = anyhow::Result<ExitCode>;

/// Parses arguments, runs the command, reports errors (`{:#}`), and maps
/// them to exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let paths = || -> anyhow::Result<Paths> {
        let data_dir = std::path::absolute(&cli.data_dir)?;
        let cache_dir = match &cli.cache_dir {
            Some(dir) => std::path::absolute(dir)?,
            None => data_dir.join("cache"),
        };
        let policies_dir = match &cli.policies {
            Some(dir) => std::path::absolute(dir)?,
            None => init::default_policies(&data_dir)?,
        };
        let paths = Paths {
            data_dir,
            cache_dir,
            policies_dir,
        };
        if init::needs_policies(&cli.command) {
            init::require_policies(&paths, cli.policies.is_some())?;
        }
        Ok(paths)
    };
    let result = paths().and_then(|paths| match cli.command {
        Command::Init(args) => init::run(&paths, args),
        Command::New(args) => new::run(args),
        Command::Run(args) => run::run(&paths, args),
        Command::Surface(args) => surface::run(&paths, args),
        Command::Manifest(cmd) => manifest::run(cmd),
        Command::Keys(cmd) => keys::run(&paths, cmd),
        Command::Evidence(cmd) => evidence::run(&paths, cmd),
        Command::Replay(args) => replay::run(&args),
        Command::Bundle(cmd) => bundle::run(&paths, cmd),
        Command::Trust(cmd) => trust::run(&paths, cmd),
        Command::Install(args) => installed::install(&paths, args),
        Command::List(args) => installed::list(&paths, args),
        Command::Inspect(args) => installed::inspect(&paths, args),
        Command::Remove(args) => installed::remove(&paths, args),
        Command::Review(args) => review::run(&paths, args),
        Command::Serve(args) => serve::run(&paths, args),
        Command::Store(cmd) => store::run(&paths, cmd),
        Command::Submit(args) => tasks::submit(&paths, args),
        Command::Tasks(cmd) => tasks::tasks(&paths, cmd),
        Command::Approvals(cmd) => tasks::approvals(&paths, cmd),
        Command::Artifacts(cmd) => tasks::artifacts(&paths, cmd),
        Command::Hid(cmd) => hid::run(&paths, cmd),
        Command::Policy(cmd) => policy::run(cmd),
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HCP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A log that cannot be written (its disk is full) is not reported
        // on that same stderr: `eprintln!` would panic the thread.
        .log_internal_errors(false)
        .try_init();
}

/// A single-threaded runtime is enough for one CLI command; the sandbox
/// spawns nothing that needs more.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// The sandbox settings of this host.
pub(crate) fn sandbox(paths: &Paths) -> anyhow::Result<hcp_sandbox::Sandbox> {
    Ok(hcp_sandbox::Sandbox::new(hcp_sandbox::SandboxConfig {
        cache_dir: Some(paths.cache_dir.clone()),
        ..hcp_sandbox::SandboxConfig::default()
    })?)
}

/// Loads a manifest, warning on stderr when its component digest is not
/// pinned.
pub(crate) fn load_manifest(path: &std::path::Path) -> anyhow::Result<hcp_contracts::Manifest> {
    let manifest = hcp_contracts::manifest::load(path, hcp_contracts::LoadOptions::default())?;
    if !manifest.component.pinned {
        eprintln!(
            "warning: {} does not pin its component's digest; running {} as found \
             (pin it with `hcp manifest pin {}`)",
            path.display(),
            manifest.component.digest,
            path.display()
        );
    }
    Ok(manifest)
}

/// Writes `value` as pretty JSON and a newline to stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}
