//! `hcp submit`, `hcp tasks`, `hcp approvals`, `hcp artifacts`: tasks
//! through the gate on the embedded data directory.
//!
//! The command line acts with the data directory's authority: it names the
//! caller (`--as`) or the operator (`--operator`) and the policy applies to
//! them as if they had authenticated. Remote callers authenticate with their
//! credential over HTTP.

use super::{DataDir, HostDirs, Outcome, Paths, print_fields, print_json, runtime};
use crate::engine::{Answer, AnswerKind, Auth, Host, HostConfig, HostPaths};
use crate::store::TaskState;
use anyhow::Context as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `hcp submit`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Submits a task_submit through the admission gate: the caller named by \
--as (who must be the message's caller_id), the installed capability the version range picks, \
the inputs against its input_schema, the operator's policies (access, risk, data, Cedar, \
equipment, envelope), and human approval when the declaration requires it at R3 or above.\n\n\
Prints the gate's answer: task_accepted, task_rejected, or a job_status while the task waits for \
an operator or for equipment. An accepted task then runs here, to completion; with --wait its \
final answer (task_completed or task_failed) is printed too.\n\n\
Exit status: 0 accepted or waiting (with --wait: completed), 1 rejected or failed, 2 bad input."
)]
pub struct SubmitArgs {
    /// The task_submit message (JSON); `-` reads standard input.
    input: PathBuf,
    /// The caller submitting it (its policy in callers.json applies).
    #[arg(long = "as", value_name = "CALLER")]
    caller: String,
    /// Also print the final answer.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    dirs: HostDirs,
}

impl SubmitArgs {
    /// The directories it submits with.
    pub(super) fn paths(&self) -> anyhow::Result<Paths> {
        self.dirs.paths()
    }
}

/// Arguments of `hcp tasks`.
#[derive(Debug, clap::Args)]
pub struct TasksArgs {
    #[command(flatten)]
    dirs: HostDirs,
    #[command(subcommand)]
    command: TasksCommand,
}

/// Arguments of `hcp approvals`.
#[derive(Debug, clap::Args)]
pub struct ApprovalsArgs {
    #[command(flatten)]
    dirs: HostDirs,
    #[command(subcommand)]
    command: ApprovalsCommand,
}

/// Arguments of `hcp artifacts`.
#[derive(Debug, clap::Args)]
pub struct ArtifactsArgs {
    #[command(flatten)]
    data: DataDir,
    #[command(subcommand)]
    command: ArtifactsCommand,
}

/// Task subcommands.
#[derive(Debug, clap::Subcommand)]
pub(super) enum TasksCommand {
    /// Tasks, newest first.
    List {
        /// Only tasks in this state (received, pending_approval, queued,
        /// running, completed, failed, rejected).
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON (each task's summary).
        #[arg(long)]
        json: bool,
    },
    /// One task: the message, the gate's answer, the final answer.
    Show {
        /// Task id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the queued tasks whose equipment is free.
    RunQueued {
        /// Print JSON (each task's id and answer).
        #[arg(long)]
        json: bool,
    },
}

/// Approval subcommands.
#[derive(Debug, clap::Subcommand)]
pub(super) enum ApprovalsCommand {
    /// Tasks waiting for an operator (expired ones are rejected first).
    List {
        /// Print JSON (each task's summary and when its approval expires).
        #[arg(long)]
        json: bool,
    },
    /// What an operator decides on: intent, inputs, risk and the rules that
    /// fired, the envelope.
    Show {
        /// Task id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a task; it then runs here and its answer is printed.
    Approve {
        /// Task id.
        id: String,
        /// The operator deciding (callers.json, kind operator).
        #[arg(long)]
        operator: String,
        /// Why.
        #[arg(long)]
        reason: String,
    },
    /// Reject a task: the caller is answered task_rejected.
    Reject {
        /// Task id.
        id: String,
        /// The operator deciding.
        #[arg(long)]
        operator: String,
        /// Why.
        #[arg(long)]
        reason: String,
    },
}

/// Artifact subcommands.
#[derive(Debug, clap::Subcommand)]
pub(super) enum ArtifactsCommand {
    /// Fetch an artifact by its hcp:// URI (checked against its checksum;
    /// T2 and above: the access is logged).
    Get {
        /// `hcp://<session>/artifacts/<name>`.
        uri: String,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "PATH")]
        output: Option<PathBuf>,
        /// Who is reading, for the access log.
        #[arg(long, default_value = "local-operator")]
        by: String,
    },
}

fn host(paths: &Paths) -> anyhow::Result<Host> {
    Host::open(
        HostPaths {
            data_dir: paths.data_dir.clone(),
            cache_dir: paths.cache_dir.clone(),
            policies_dir: paths.policies_dir.clone(),
        },
        HostConfig::default(),
    )
}

fn read_message(path: &Path) -> anyhow::Result<Value> {
    use std::io::Read as _;
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin().take(16 << 20).read_to_string(&mut text)?;
    } else {
        std::fs::File::open(path)
            .with_context(|| format!("{}: cannot read", path.display()))?
            .take(16 << 20)
            .read_to_string(&mut text)?;
    }
    serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))
}

fn final_code(answer: &Answer) -> ExitCode {
    if answer.is_refusal_or_failure() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

pub(super) fn submit(paths: &Paths, args: SubmitArgs) -> Outcome {
    let message = read_message(&args.input)?;
    let host = host(paths)?;
    let submission = host.submit(&message, Auth::Transport(&args.caller))?;
    print_json(&submission.answer)?;
    if submission.duplicate {
        eprintln!(
            "{}",
            duplicate_note(&message, &args.caller, submission.task_id.as_deref())
        );
    }
    if matches!(submission.kind, AnswerKind::Rejected(_)) {
        return Ok(ExitCode::from(1));
    }
    let Some(task_id) = submission.task_id else {
        return Ok(ExitCode::SUCCESS);
    };
    if !submission.runnable {
        if args.wait
            && submission.duplicate
            && let Some(result) = host.store.task(&task_id)?.and_then(|t| t.result)
        {
            print_json(&result)?;
            return Ok(final_code(&result));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let answer = super::progress::Progress::during(
        format!("running task {task_id} (compiling its component first if it is new)"),
        false,
        || runtime()?.block_on(host.run_task(&task_id)),
    )?;
    if let Some(answer) = &answer
        && let Err(e) = super::task_report::print(&host.store, &task_id, answer)
    {
        eprintln!("warning: the task's log and denials cannot be shown: {e:#}");
    }
    match answer {
        Some(answer) if args.wait => {
            print_json(&answer)?;
            Ok(final_code(&answer))
        }
        Some(_) => Ok(ExitCode::SUCCESS),
        None => {
            eprintln!(
                "task {task_id} is queued: its equipment is in use or no session slot is free (`hcp tasks run-queued` runs it)"
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Says that the answer printed is an earlier one: the gate answers a
/// caller's `message_id` once and returns that answer to every resubmission.
fn duplicate_note(message: &Value, caller: &str, task_id: Option<&str>) -> String {
    let id = message["message_id"].as_str().unwrap_or("?");
    let task = task_id.map(|t| format!(" (task {t})")).unwrap_or_default();
    format!(
        "note: {caller} sent message_id {id:?} before; this is the answer given then{task}, and \
         nothing ran again. Give the message a new message_id to submit a new task."
    )
}

fn summary(t: &crate::store::TaskRecord) -> String {
    format!(
        "{}  {:<16} {}@{}  caller {}  risk {}  {}",
        t.task_id,
        t.state.as_str(),
        t.capability,
        t.version.as_deref().unwrap_or("?"),
        t.caller_id,
        t.risk.as_deref().unwrap_or("-"),
        t.created_at
    )
}

fn parse_state(s: &str) -> anyhow::Result<TaskState> {
    [
        TaskState::Received,
        TaskState::PendingApproval,
        TaskState::Queued,
        TaskState::Running,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Rejected,
    ]
    .into_iter()
    .find(|st| st.as_str() == s)
    .with_context(|| {
        format!("unknown state {s:?}: received, pending_approval, queued, running, completed, failed, rejected")
    })
}

pub(super) fn tasks(args: TasksArgs) -> Outcome {
    let host = host(&args.dirs.paths()?)?;
    match args.command {
        TasksCommand::List { state, limit, json } => {
            host.expire_approvals()?;
            let state = state.as_deref().map(parse_state).transpose()?;
            let list = host.store.tasks(state, limit)?;
            if json {
                print_json(&list.iter().map(|t| t.summary()).collect::<Vec<_>>())?;
            } else if list.is_empty() {
                println!("no tasks");
            } else {
                for t in &list {
                    println!("{}", summary(t));
                }
            }
        }
        TasksCommand::Show { id, json } => {
            let t = host
                .store
                .task(&id)?
                .with_context(|| format!("no task {id}"))?;
            let approval = host.store.approval(&id)?;
            let mut shown = t.summary();
            let details = serde_json::json!({
                "task_submit": t.submit,
                "answer": t.answer,
                "result": t.result,
                "approval": approval.as_ref().map(crate::views::approval_decision),
            });
            if let (Some(shown), Value::Object(details)) = (shown.as_object_mut(), details) {
                shown.extend(details);
            }
            if json {
                print_json(&shown)?;
            } else {
                print_fields(&shown);
            }
        }
        TasksCommand::RunQueued { json } => {
            let rt = runtime()?;
            let mut ran = Vec::new();
            // A task whose AMQP delivery this host never acknowledged is
            // not its own: the broker may have given the message to
            // another host, which runs it (`hcp serve` lets such a copy go
            // when it starts).
            let held: std::collections::HashSet<String> =
                host.store.held_tasks()?.into_iter().collect();
            for id in &held {
                eprintln!(
                    "task {id}: not run: its AMQP delivery was never acknowledged by this host, \
                     so the broker may give the message to another host (`hcp serve` lets this \
                     copy go when it starts)"
                );
            }
            let mut queued = host.store.tasks(Some(TaskState::Queued), usize::MAX)?;
            queued.reverse();
            for t in queued.into_iter().filter(|t| !held.contains(&t.task_id)) {
                let answer = rt.block_on(host.run_task(&t.task_id))?;
                if json {
                    ran.push(serde_json::json!({"task_id": t.task_id, "answer": answer}));
                    continue;
                }
                match answer {
                    Some(answer) => {
                        println!("{}  {}", t.task_id, answer.kind_name())
                    }
                    None => println!("{}  {}", t.task_id, not_run(&host, &t.task_id)?),
                }
            }
            if json {
                print_json(&ran)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn approvals(args: ApprovalsArgs) -> Outcome {
    let host = host(&args.dirs.paths()?)?;
    for id in host.expire_approvals()? {
        eprintln!("task {id}: approval expired, answered task_rejected (approval_expired)");
    }
    match args.command {
        ApprovalsCommand::List { json } => {
            let mut listed = Vec::new();
            for t in host
                .store
                .tasks(Some(TaskState::PendingApproval), usize::MAX)?
            {
                let expires = host
                    .store
                    .approval(&t.task_id)?
                    .map(|a| a.expires_at)
                    .unwrap_or_default();
                listed.push((t, expires));
            }
            if json {
                let shown: Vec<Value> = listed
                    .iter()
                    .map(|(t, expires)| {
                        let mut shown = t.summary();
                        shown["expires_at"] = Value::String(expires.clone());
                        shown
                    })
                    .collect();
                print_json(&shown)?;
            } else if listed.is_empty() {
                println!("no task waits for an operator");
            } else {
                for (t, expires) in &listed {
                    println!("{}  expires {expires}", summary(t));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalsCommand::Show { id, json } => {
            let a = host
                .store
                .approval(&id)?
                .with_context(|| format!("task {id} has no approval request"))?;
            let shown = crate::views::approval_record(&a);
            if json {
                print_json(&shown)?;
            } else {
                print_fields(&shown);
            }
            Ok(ExitCode::SUCCESS)
        }
        ApprovalsCommand::Approve {
            id,
            operator,
            reason,
        } => {
            let submission =
                host.decide(&id, true, Auth::Transport(&operator), &operator, &reason)?;
            print_json(&submission.answer)?;
            if !submission.runnable {
                return Ok(ExitCode::SUCCESS);
            }
            match runtime()?.block_on(host.run_task(&id))? {
                Some(answer) => {
                    print_json(&answer)?;
                    Ok(final_code(&answer))
                }
                None => {
                    eprintln!("task {id}: {}", not_run(&host, &id)?);
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        ApprovalsCommand::Reject {
            id,
            operator,
            reason,
        } => {
            let submission =
                host.decide(&id, false, Auth::Transport(&operator), &operator, &reason)?;
            print_json(&submission.answer)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub(super) fn artifacts(args: ArtifactsArgs) -> Outcome {
    let ArtifactsCommand::Get { uri, output, by } = args.command;
    let store = crate::store::Store::open(&args.data.path()?)?;
    let (artifact, bytes, class) = store.artifact(&uri)?;
    if class >= hcp_contracts::DataClass::T2 {
        store.log_artifact_access(&uri, &by, "hcp artifacts get")?;
    }
    match output {
        Some(path) => {
            std::fs::write(&path, &bytes).with_context(|| format!("{}", path.display()))?;
            eprintln!(
                "{}: {} bytes, {}, {} ({class})",
                path.display(),
                artifact.size_bytes,
                artifact.mime_type,
                artifact.checksum
            );
        }
        None => {
            use std::io::Write as _;
            std::io::stdout().write_all(&bytes)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why a task `run_task` left alone was not run here, from its state now.
fn not_run(host: &Host, task_id: &str) -> anyhow::Result<String> {
    let state = host.store.task(task_id)?.map(|t| t.state);
    Ok(match state {
        Some(TaskState::Queued) => {
            "still queued (equipment in use or no session slot free)".to_owned()
        }
        Some(TaskState::Running) => "running in another process on this data directory".to_owned(),
        Some(s) if s.is_final() => format!("{} (by another process meanwhile)", s.as_str()),
        Some(s) => format!("not run: it is {}", s.as_str()),
        None => "not run: no such task".to_owned(),
    })
}
