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
mod dev;
mod dirs;
mod docs;
mod evidence;
mod hid;
mod init;
mod installed;
mod keys;
mod manifest;
mod mcp;
mod new;
mod oci;
mod output;
mod policy;
mod progress;
mod replay;
mod review;
mod run;
mod secret;
mod serve;
mod store;
mod surface;
mod task_report;
mod tasks;
mod trust;

pub use dirs::{CacheDirs, DataDir, HostDirs};
pub(crate) use output::{print_fields, print_json};

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// The HCP host: runs capabilities as WebAssembly components with exactly
/// the surface their manifests grant.
#[derive(Debug, Parser)]
#[command(
    name = "hcp",
    version,
    about,
    long_about = None,
    after_help = "Commands that print data print text for people, and JSON with --json. \
Each command takes the directories it uses: --data-dir (HCP_DATA_DIR), --cache-dir \
(HCP_CACHE_DIR), --policies (HCP_POLICIES)."
)]
pub struct Cli {
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
    /// Build, install and run a capability on every change to its project
    /// (Ctrl-C stops; --once runs one cycle).
    Dev(dev::DevArgs),
    /// Run one task_submit against a capability manifest and print the answer.
    Run(run::RunArgs),
    /// Show the imports and exports of a manifest's or a bundle's component
    /// against its grants, and the verdict (exit 1 when refused).
    Surface(surface::SurfaceArgs),
    /// Work with capability manifests.
    #[command(subcommand)]
    Manifest(manifest::ManifestCommand),
    /// The host key and publisher keys.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Evidence packs of receipts: export, verify offline, merge several hosts' packs.
    #[command(subcommand)]
    Evidence(evidence::EvidenceCommand),
    /// Re-derive every verdict of an evidence pack from its recorded policy.
    Replay(replay::ReplayArgs),
    /// Pack a plugin into a bundle (.hcpb); sign a bundle.
    #[command(subcommand)]
    Bundle(bundle::BundleCommand),
    /// The publishers whose signed bundles this host installs.
    Trust(trust::TrustArgs),
    /// Check a bundle (a file, or oci://...) and install it (exit 1 when refused).
    Install(installed::InstallArgs),
    /// Push a bundle to an OCI registry (oci://<registry>/<repository>:<tag>).
    Push(oci::PushArgs),
    /// Fetch a bundle from an OCI registry into a bundle file.
    Pull(oci::PullArgs),
    /// List installed capabilities.
    List(installed::ListArgs),
    /// Show an installed capability and check its install receipt.
    Inspect(installed::InspectArgs),
    /// Remove an installed capability version.
    Remove(installed::RemoveArgs),
    /// Review a bundle without installing it (exit 1 unless installable).
    Review(review::ReviewArgs),
    /// Serve the HTTP API and the operator's page.
    // Boxed: its flags make it by far the largest command.
    Serve(Box<serve::ServeArgs>),
    /// The data directory's database: check it, back it up, restore it.
    Store(store::StoreArgs),
    /// Submit a task_submit through the admission gate (and run it).
    Submit(tasks::SubmitArgs),
    /// Serve the Model Context Protocol on stdin and stdout, as a caller
    /// (callers.json "mcp_stdio": true): every tools/call is an HCP task.
    Mcp(mcp::McpArgs),
    /// Tasks on this host.
    Tasks(tasks::TasksArgs),
    /// Tasks waiting for an operator's decision.
    Approvals(tasks::ApprovalsArgs),
    /// HID mediation: the operator's commands (through `hcp serve`), the
    /// session log, the simulated executor.
    #[command(subcommand)]
    Hid(hid::HidCommand),
    /// The running server's policy: reload it (through `hcp serve`).
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Artifacts by their hcp:// URI.
    Artifacts(tasks::ArtifactsArgs),
    /// The operator's secrets of each interface that has some
    /// (`hcp config secret set` for `wasi:config`), as the interfaces'
    /// policy modules declare them.
    #[command(flatten)]
    Secret(secret::SecretCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell).
    Completions(docs::CompletionsArgs),
    /// Write the manual pages (roff), or print `hcp`'s own.
    Man(docs::ManArgs),
    /// Internal: compile a component read from stdin into the cache, under
    /// the CPU and memory limits given (what `hcp install`, `review` and
    /// `surface` start to compile a component out of their own process).
    #[command(name = "compile-component", hide = true)]
    CompileComponent(crate::compile_child::ChildArgs),
}

/// A command's result: the exit code, or an error for stderr (exit 2).
pub(crate) type Outcome = anyhow::Result<ExitCode>;

/// Parses arguments, runs the command, reports errors (`{:#}`), and maps
/// them to exit codes. Output into a closed pipe ends it quietly (exit 0).
pub fn main() -> ExitCode {
    output::quiet_broken_pipes();
    let cli = Cli::parse_from(dirs::legacy_order(std::env::args_os().collect()));
    match &cli.command {
        Command::Serve(args) => init_tracing("info", args.log_format()),
        _ => init_tracing("warn", LogFormat::Text),
    }
    raise_open_files_limit();
    let result = match cli.command {
        Command::Init(args) => init::run(args),
        Command::New(args) => new::run(args),
        Command::Dev(args) => dev::run(args),
        Command::Run(args) => args.paths().and_then(|p| run::run(&p, args)),
        Command::Surface(args) => surface::run(args),
        Command::Manifest(cmd) => manifest::run(cmd),
        Command::Keys(cmd) => keys::run(cmd),
        Command::Evidence(cmd) => evidence::run(cmd),
        Command::Replay(args) => replay::run(&args),
        Command::Bundle(cmd) => bundle::run(cmd),
        Command::Trust(args) => trust::run(args),
        Command::Install(args) => installed::install(args),
        Command::Push(args) => oci::push(args),
        Command::Pull(args) => oci::pull(args),
        Command::List(args) => installed::list(args),
        Command::Inspect(args) => installed::inspect(args),
        Command::Remove(args) => installed::remove(args),
        Command::Review(args) => review::run(args),
        Command::Serve(args) => serve::run(*args),
        Command::Store(args) => store::run(args),
        Command::Submit(args) => args.paths().and_then(|p| tasks::submit(&p, args)),
        Command::Mcp(args) => mcp::run(args),
        Command::Tasks(args) => tasks::tasks(args),
        Command::Approvals(args) => tasks::approvals(args),
        Command::Artifacts(args) => tasks::artifacts(args),
        Command::Secret(cmd) => secret::run(cmd),
        Command::Hid(cmd) => hid::run(cmd),
        Command::Policy(cmd) => policy::run(cmd),
        Command::Completions(args) => docs::completions(&args),
        Command::Man(args) => docs::man(&args),
        Command::CompileComponent(args) => Ok(crate::compile_child::child_main(&args)),
    };
    match result {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", output::for_terminal(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// Raises this process's soft limit of open files to its hard limit. Each
/// task may hold up to [`hcp_sandbox::MAX_TABLE_ENTRIES`]
/// descriptors; under the usual soft limit of 1,024, two tasks holding
/// theirs left the host itself (its connections, its database, the next
/// task's grants) none. A limit that cannot be raised is left as it is,
/// said at debug level.
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // No hard limit: as many as Linux allows a process by default.
    let target = limit.maximum.unwrap_or(1 << 20);
    if limit.current.is_some_and(|current| current < target) {
        let raised = Rlimit {
            current: Some(target),
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!(
                "the open files limit stays at {:?} (hard limit {:?}): {e}",
                limit.current,
                limit.maximum
            );
        }
    }
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    Text,
    /// One JSON object per line (timestamp, level, target, fields).
    Json,
}

/// Logs to stderr at `default` level, or as `HCP_LOG` (else `RUST_LOG`)
/// says (`info`, `hcp=debug`, ...).
fn init_tracing(default: &str, format: LogFormat) {
    use std::io::IsTerminal as _;
    let filter = ["HCP_LOG", "RUST_LOG"]
        .into_iter()
        .find_map(|var| tracing_subscriber::EnvFilter::try_from_env(var).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        // A log that cannot be written (its disk is full) is not reported
        // on that same stderr: `eprintln!` would panic the thread.
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Whether log lines are coloured: only on a terminal, and never when
/// `NO_COLOR` is set to anything but the empty string (no-color.org).
fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// The runtime of one CLI command: two worker threads.
pub(crate) fn runtime() -> anyhow::Result<CliRuntime> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    Ok(CliRuntime::new(runtime, RUNTIME_STOP))
}

/// How long a command, once done, waits for its runtime's blocking
/// threads (a task's filesystem calls run on them) before it exits.
const RUNTIME_STOP: std::time::Duration = std::time::Duration::from_secs(10);

/// A runtime that, dropped, waits a bounded time for its blocking threads.
/// A plain runtime waits for them for good: one left opening a FIFO that
/// another process swapped in under a guest's open (the task itself ended
/// at its deadline) would keep the command from ever exiting. A command's
/// own work (its receipts, its answer) is done before `block_on` returns.
pub(crate) struct CliRuntime {
    runtime: Option<tokio::runtime::Runtime>,
    stop: std::time::Duration,
}

impl CliRuntime {
    fn new(runtime: tokio::runtime::Runtime, stop: std::time::Duration) -> Self {
        Self {
            runtime: Some(runtime),
            stop,
        }
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        let Some(runtime) = &self.runtime else {
            unreachable!("the runtime is taken only when dropped")
        };
        runtime.block_on(future)
    }
}

impl Drop for CliRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(self.stop);
        }
    }
}

/// The sandbox settings of this host.
pub(crate) fn sandbox(paths: &Paths) -> anyhow::Result<hcp_sandbox::Sandbox> {
    Ok(hcp_sandbox::Sandbox::new(hcp_sandbox::SandboxConfig {
        cache_dir: Some(paths.cache_dir.clone()),
        // No grant may reach the data directory (keys, database,
        // installed components) or the policies.
        host_dirs: vec![paths.data_dir.clone(), paths.policies_dir.clone()],
        read_only_within: vec![paths.data_dir.join("capabilities")],
        // Install and review meet components nobody here has vetted: they
        // are compiled in a child process under limits first.
        compile_guard: Some(child_compile(&paths.cache_dir)?),
        ..hcp_sandbox::SandboxConfig::default()
    })?)
}

/// The sandbox settings of this host, compiled code cached in `cache_dir`,
/// components compiled in a child process under limits first (`hcp
/// surface` meets components nobody here has vetted).
pub(crate) fn sandbox_caching_in(
    cache_dir: &std::path::Path,
) -> anyhow::Result<hcp_sandbox::Sandbox> {
    Ok(hcp_sandbox::Sandbox::new(hcp_sandbox::SandboxConfig {
        cache_dir: Some(cache_dir.to_owned()),
        compile_guard: Some(child_compile(cache_dir)?),
        ..hcp_sandbox::SandboxConfig::default()
    })?)
}

/// The compile guard that compiles into `cache_dir` in a child process
/// ([`crate::compile_child`]), within the limits of the environment.
fn child_compile(
    cache_dir: &std::path::Path,
) -> anyhow::Result<std::sync::Arc<dyn hcp_sandbox::CompileGuard>> {
    Ok(std::sync::Arc::new(
        crate::compile_child::ChildCompile::new(
            cache_dir.to_owned(),
            crate::compile_child::CompileLimits::from_env()?,
        )?,
    ))
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

#[cfg(test)]
mod tests {
    use super::CliRuntime;
    use std::time::{Duration, Instant};

    /// Colour only on a terminal, and never with `NO_COLOR` set to
    /// something (an empty `NO_COLOR` counts as unset, as no-color.org says).
    #[test]
    fn log_colour_needs_a_terminal_and_no_no_color() {
        use std::ffi::OsStr;
        assert!(super::colour(true, None));
        assert!(super::colour(true, Some(OsStr::new(""))));
        assert!(!super::colour(true, Some(OsStr::new("1"))));
        assert!(!super::colour(false, None));
        assert!(!super::colour(false, Some(OsStr::new("1"))));
    }

    /// A blocking thread that never returns (a guest's open of a FIFO
    /// nobody writes) does not keep the command from exiting: a plain
    /// runtime's drop waited for it for good.
    #[test]
    fn a_command_exits_though_a_blocking_thread_still_waits() {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("runtime");
        let runtime = CliRuntime::new(runtime, Duration::from_millis(100));
        runtime.block_on(async {
            // Waits until released, at most a minute.
            drop(tokio::task::spawn_blocking(move || {
                let _ = wait.recv_timeout(Duration::from_secs(60));
            }));
        });
        let started = Instant::now();
        drop(runtime);
        let took = started.elapsed();
        let _ = release.send(());
        assert!(
            took < Duration::from_secs(30),
            "the runtime waited {took:?} for its blocking thread"
        );
    }
}
