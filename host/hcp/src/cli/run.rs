//! `hcp run`: one task, straight from a `task_submit` file to its answer.

use super::{Outcome, Paths, load_manifest, print_json, runtime, sandbox};
use crate::evidence::Recorder;
use crate::hostkey;
use crate::lifecycle;
use crate::store::Store;
use anyhow::Context as _;
use hcp_contracts::message::{Envelope, MessageType, RejectReason, TaskRejected, TaskSubmit};
use hcp_contracts::{DataClass, RiskLevel, problem};
use hcp_policy::PolicySet;
use hcp_receipts::SigningPolicy;
use hcp_sandbox::TaskRequest;
use hcp_sandbox::pep::{PolicyGovernor, Standalone};
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

fn reject(reason_code: RejectReason, reason_message: String) -> Outcome {
    let answer = Envelope::new(
        MessageType::TaskRejected,
        None,
        TaskRejected {
            reason_code,
            reason_message,
            assessed_risk_level: None,
            suggestion: None,
        },
    )?;
    print_json(&answer)?;
    Ok(ExitCode::from(1))
}

pub(super) fn run(paths: &Paths, args: RunArgs) -> Outcome {
    let manifest = Arc::new(load_manifest(&args.manifest)?);
    let message = read_input(&args.input)?;
    let envelope = Envelope::parse(&message).map_err(|problems| {
        anyhow::anyhow!(
            "{}: not a valid HCP message:\n{}",
            args.input.display(),
            problem::list(&problems)
        )
    })?;
    if envelope.kind != MessageType::TaskSubmit {
        anyhow::bail!(
            "{}: expected a task_submit message, got {}",
            args.input.display(),
            envelope.kind.as_str()
        );
    }
    let submit: TaskSubmit = envelope
        .payload_as()
        .map_err(|p| anyhow::anyhow!("{}:\n{}", args.input.display(), problem::list(&p)))?;
    let submit = match submit.check() {
        Ok(s) => s,
        Err(problems) => {
            return reject(
                RejectReason::InvalidInput,
                format!("the task_submit is invalid:\n{}", problem::list(&problems)),
            );
        }
    };
    if submit.submit.capability != manifest.name() {
        return reject(
            RejectReason::CapabilityNotFound,
            format!(
                "the task asks for capability {:?}, the manifest declares {:?}",
                submit.submit.capability,
                manifest.name()
            ),
        );
    }
    if !submit.version_req.matches(&manifest.version) {
        return reject(
            RejectReason::CapabilityNotFound,
            format!(
                "{} does not satisfy capability_version {}",
                manifest.id(),
                submit.version_req
            ),
        );
    }
    let safety = &manifest.doc.capability.safety;
    if safety.requires_human_approval {
        return reject(
            RejectReason::Forbidden,
            format!(
                "{} requires human approval; `hcp run` has no gate, submit the task through the host instead",
                manifest.id()
            ),
        );
    }
    if let Err(problems) = lifecycle::check_inputs(&manifest, &submit.submit.inputs) {
        return reject(
            RejectReason::InvalidInput,
            format!(
                "inputs do not match the input_schema of {}:\n{}",
                manifest.id(),
                problem::list(&problems)
            ),
        );
    }
    // The error names the directory and every file's problem already.
    let policy = PolicySet::load(&paths.policies_dir)?;
    let store = Arc::new(Store::open(&paths.data_dir)?);
    let identity = hostkey::load_or_init(&paths.data_dir)?;
    let recorder = Recorder::open(store.clone(), identity, SigningPolicy::default())?;
    let sandbox = sandbox(paths)?;
    let session_id = format!("session-{}", uuid::Uuid::new_v4());
    let task_id = format!("task-{}", uuid::Uuid::now_v7());
    let deadline = lifecycle::deadline(&manifest, &submit);
    let risk_level = safety.risk_floor.unwrap_or(RiskLevel::R1);
    let data_classification = submit
        .submit
        .constraints
        .as_ref()
        .and_then(|c| c.data_classification)
        .unwrap_or(DataClass::T1);
    let facts = Standalone {
        task_id: &task_id,
        session_id: &session_id,
        caller: &submit.submit.caller_id,
        risk_level,
        data_classification,
        envelope: &manifest.doc.safety_envelope,
        expires_at_ms: hcp_sandbox::pep::now_ms()
            .saturating_add(u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX))
            .saturating_add(SESSION_GRACE_MS),
        budgets: policy
            .budgets_for(&submit.submit.caller_id, &manifest.doc.capability)
            .into(),
    }
    .facts(&manifest);
    recorder.record_message(
        &task_id,
        "task_submit.json",
        &serde_json::to_vec_pretty(&message)?,
    )?;
    let opened = recorder.open_session(&policy, facts, &manifest_bytes(&manifest)?, Vec::new())?;
    let governor = Arc::new(PolicyGovernor::new(opened.scope, recorder.sink()));
    let request = TaskRequest {
        task_id: task_id.clone(),
        session_id: session_id.clone(),
        caller_id: submit.submit.caller_id.clone(),
        intent: submit.submit.intent.clone(),
        inputs: submit.submit.inputs.clone(),
        constraints: serde_json::to_value(submit.submit.constraints.clone().unwrap_or_default())?,
        context: submit.submit.context.clone(),
        resume: None,
        risk_level,
        data_classification,
        deadline,
        envelope: manifest.doc.safety_envelope.clone(),
        governor,
        // `hcp run` is one task on its own: no operator, no HID mediator.
        hid: None,
    };
    let rt = runtime()?;
    let run = rt.block_on(async {
        let prepared = tokio::task::spawn_blocking({
            let manifest = manifest.clone();
            move || sandbox.prepare(manifest)
        })
        .await??;
        anyhow::Ok(prepared.run(request, store).await)
    })?;
    if !args.quiet {
        print_log(&run.log.entries);
    }
    let answer = lifecycle::answer(&manifest, &submit, &session_id, &run)?;
    recorder.record_message(
        &task_id,
        &format!("{}.json", answer.kind.as_str()),
        &serde_json::to_vec_pretty(&answer)?,
    )?;
    // Receipts are durable before the task is answered.
    recorder.close_session(&session_id);
    recorder.close()?;
    eprintln!("receipts: task {task_id}, session {session_id}");
    print_json(&answer)?;
    let completed = answer.kind == MessageType::TaskCompleted;
    Ok(if completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The session outlives the task's deadline by this much: the wall-clock
/// timeout's grace, so that calls the deadline has not stopped yet are
/// still decided under a valid session.
const SESSION_GRACE_MS: u64 = 1_000;

/// The manifest as written (its file), for evidence packs.
fn manifest_bytes(manifest: &hcp_contracts::Manifest) -> anyhow::Result<Vec<u8>> {
    match &manifest.source {
        Some(path) => std::fs::read(path).with_context(|| format!("{}", path.display())),
        None => Ok(serde_json::to_vec_pretty(&manifest.doc)?),
    }
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
