//! `hcp run`: one task, straight from a `task_submit` file to its answer.

use super::{Outcome, Paths, load_manifest, print_json, runtime};
use crate::engine::{Host, HostConfig, HostPaths, NotATask, TaskMessage, UngatedTask};
use anyhow::Context as _;
use hcp_contracts::answer::Answer;
use hcp_contracts::message::TaskRejected;
use hcp_contracts::problem;
use hcp_sandbox::tasklog::{LogEntry, LogSource};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `hcp run`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Runs one task directly against a manifest, without the admission gate \
(no caller authentication, no risk assessment, no approval): for developing and testing a \
capability. Capabilities that require human approval are refused here.\n\n\
The task_submit is validated (envelope, payload, inputs against input_schema), the component \
runs with exactly its granted surface, its outputs are validated against output_schema and \
expected_output, and the answer (task_completed or task_failed, or task_rejected for bad input) \
is printed on stdout as JSON. The task log goes to stderr.\n\n\
Every host call passes the policy enforcement point under the policy set (`--policies`: its \
dispatch settings, and the budgets of the task's caller and capability); every verdict becomes \
a receipt in the data directory, durable before the answer is printed (see `hcp evidence`).\n\n\
Exit status: 0 task_completed, 1 task_failed or task_rejected, 2 a file could not be read or \
parsed."
)]
pub struct RunArgs {
    /// The capability manifest.
    #[arg(long, value_name = "PATH")]
    manifest: PathBuf,
    /// The task_submit message, as JSON; `-` reads standard input.
    #[arg(long, value_name = "PATH")]
    input: PathBuf,
    /// Do not print the task log on stderr.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    dirs: super::HostDirs,
}

impl RunArgs {
    /// The directories it runs with.
    pub(super) fn paths(&self) -> anyhow::Result<Paths> {
        self.dirs.paths()
    }
}

fn read_input(path: &Path) -> anyhow::Result<serde_json::Value> {
    use std::io::Read as _;
    const LIMIT: u64 = 16 << 20;
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin().take(LIMIT).read_to_string(&mut text)?;
    } else {
        std::fs::File::open(path)
            .with_context(|| format!("{}: cannot read task_submit", path.display()))?
            .take(LIMIT)
            .read_to_string(&mut text)
            .with_context(|| format!("{}: cannot read task_submit", path.display()))?;
    }
    serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))
}

fn reject(refusal: TaskRejected) -> Outcome {
    print_json(&Answer::rejected(refusal))?;
    Ok(ExitCode::from(1))
}

pub(super) fn run(paths: &Paths, args: RunArgs) -> Outcome {
    let manifest = Arc::new(load_manifest(&args.manifest)?);
    let message = read_input(&args.input)?;
    let message = match TaskMessage::parse(message) {
        Ok(m) => m,
        Err(NotATask::Invalid(problems)) => anyhow::bail!(
            "{}: not a valid HCP message:\n{}",
            args.input.display(),
            problem::list(&problems)
        ),
        Err(NotATask::WrongType(kind)) => anyhow::bail!(
            "{}: expected a task_submit message, got {}",
            args.input.display(),
            kind.as_str()
        ),
        Err(NotATask::Payload(problems)) => {
            anyhow::bail!("{}:\n{}", args.input.display(), problem::list(&problems))
        }
    };
    let task = match UngatedTask::check(manifest, message) {
        Ok(t) => t,
        Err(refusal) => return reject(refusal),
    };
    // The same engine as `hcp serve`, without its gate.
    let host = Host::open(
        HostPaths {
            data_dir: paths.data_dir.clone(),
            cache_dir: paths.cache_dir.clone(),
            policies_dir: paths.policies_dir.clone(),
        },
        HostConfig::default(),
    )?;
    // The first run of a component compiles it (a Python one for half a
    // minute): shown on a terminal until the task's answer is in.
    let ran = super::progress::Progress::during(
        format!(
            "running {} (compiling it first if it is new)",
            args.manifest.display()
        ),
        false,
        || runtime()?.block_on(host.run_ungated(task)),
    )?;
    if !args.quiet {
        print_log(&ran.log);
    }
    eprintln!("receipts: task {}, session {}", ran.task_id, ran.session_id);
    print_json(&ran.answer)?;
    let completed = matches!(ran.answer, Answer::Completed(_));
    Ok(if completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_log(entries: &[LogEntry]) {
    for e in entries {
        let source = match e.source {
            LogSource::Log => "log",
            LogSource::Stdout => "stdout",
            LogSource::Stderr => "stderr",
            LogSource::Host => "host",
        };
        let fields: String = e.fields.iter().map(|(k, v)| format!(" {k}={v}")).collect();
        eprintln!(
            "[{:>6}ms {:<5} {source}] {}{fields}",
            e.at_ms,
            format!("{:?}", e.level).to_lowercase(),
            e.message
        );
    }
}
