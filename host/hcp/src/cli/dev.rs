//! `hcp dev`: the edit, build, run loop of a capability's project (one
//! `hcp new` made, Rust or Python).
//!
//! One cycle: build the component with the command `hcp new` gives
//! ([`super::new::build_command`]); pack the project as `hcp bundle pack`
//! does and sign it with the development data directory's publisher key;
//! install it there, replacing the same version; submit the example task
//! (`examples/task_submit.json`, written from the manifest when missing)
//! through the gate as its `caller_id`, run it, and show its answer, log
//! lines and receipts. Then the project is watched (inotify, debounced) and
//! every change runs another cycle. A build that fails is shown, and the
//! loop waits for the next change; Ctrl-C stops it; `--once` runs one
//! cycle and exits.
//!
//! # The development data directory
//!
//! Its own, `target/hcp-dev/` in the project unless `--data-dir` names
//! another (`HCP_DATA_DIR` is not read: it names a host's). `hcp dev`
//! makes it with the policy set, host key and publisher key `hcp init`
//! writes, and marks it ([`crate::install::development`]): only in a
//! marked directory may an install replace the same version, and only a
//! new or empty directory is ever marked, so a host's data directory is
//! refused, never changed.
//!
//! # Ambient authority
//!
//! Runs the build command in the project's directory (the author's own
//! code and toolchain, with this process's environment); reads the
//! project; writes the development data directory and the example task
//! when it is missing.

use super::new::{Lang, build_command, build_tool_hint};
use super::progress::Progress;
use super::{Outcome, Paths, runtime};
use crate::engine::{Answer, Auth, Host, HostConfig, HostPaths};
use crate::install::{self, BundleFile, InstallError, InstallOptions, development};
use crate::store::Store;
use anyhow::Context as _;
use hcp_bundle::{Bundle, PublisherName, WitSource};
use hcp_receipts::{HostKey, Verdict};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Arguments of `hcp dev`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Builds, installs and runs a capability on every change, in its project's \
directory (one `hcp new` made, Rust or Python).\n\n\
Each cycle: the build command `hcp new` gives (cargo build --release --target wasm32-wasip2, or \
componentize-py), the project packed as `hcp bundle pack` does and signed with the development \
data directory's publisher key, installed there (replacing the same version), and the example \
task (examples/task_submit.json; written from the manifest when missing) submitted through the \
gate and run: its answer, log lines and receipts are shown. Then every change to the project \
(target/, build outputs, __pycache__ and .git are not watched) starts another cycle. A build \
that fails is shown, and hcp dev waits for the next change. Ctrl-C stops it.\n\n\
The development data directory is the project's target/hcp-dev/ unless --data-dir names \
another; HCP_DATA_DIR is not read. hcp dev makes it (a starting policy set, as hcp init writes, \
a host key and a publisher key) and marks it with hcp-dev.json: only there may an install \
replace a version that is installed already. A directory that is not empty and has no marker \
(a host's data directory) is refused, never changed.\n\n\
Exit status (--once): 0 the example task completed, 1 it did not (a build error, a refusal, a \
failed task), 2 no project here or the data directory refused. Stopped with Ctrl-C: 0."
)]
pub struct DevArgs {
    /// The capability's project directory (holding manifest.json).
    #[arg(default_value = ".", value_name = "DIR")]
    dir: PathBuf,
    /// Run one cycle (build, install, run the example) and exit: for
    /// scripts and CI.
    #[arg(long)]
    once: bool,
    /// The task_submit to run after each build (default:
    /// examples/task_submit.json in the project).
    #[arg(long, value_name = "PATH")]
    input: Option<PathBuf>,
    /// The development data directory (default: target/hcp-dev in the
    /// project). A new or empty directory, or one hcp dev made; never a
    /// host's.
    #[arg(long = "data-dir", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Compiled-code cache (default: cache/ in the development data
    /// directory).
    #[arg(long, env = "HCP_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// How long the watcher waits for the changes of one save to settle.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// The most of a task's outputs shown, in characters.
const OUTPUT_SHOWN: usize = 400;

/// Where the example task is, in a project.
const EXAMPLE: &str = "examples/task_submit.json";

/// A project and the development data directory it runs in.
struct Dev {
    /// The project, absolute.
    project: PathBuf,
    /// What builds it.
    build: Vec<String>,
    lang: Lang,
    /// The example task.
    example: PathBuf,
    paths: Paths,
    /// The development data directory's publisher key, and its name there.
    key: HostKey,
    publisher: PublisherName,
    /// Directories whose changes start no cycle (absolute).
    ignored: Vec<PathBuf>,
    /// Set by Ctrl-C: the cycle ends after its current step.
    stop: Arc<AtomicBool>,
}

/// What the loop hears.
enum Heard {
    /// Paths changed (debounced).
    Changed(Vec<PathBuf>),
    /// The watcher failed.
    WatchError(String),
    /// Ctrl-C.
    Stop,
}

pub(super) fn run(args: DevArgs) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    let dev = Dev::open(&args, stop.clone())?;
    if args.once {
        let completed = dev.cycle("start");
        return Ok(if completed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let (tx, rx) = mpsc::channel::<Heard>();
    stop_on_ctrl_c(tx.clone(), stop.clone());
    dev.cycle("start");
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let heard = match event {
            Ok(event) if changes(&event.kind) => Heard::Changed(event.paths),
            // A file opened or read, or its metadata (an access time):
            // nothing the build reads changed.
            Ok(_) => return,
            Err(e) => Heard::WatchError(e.to_string()),
        };
        // The loop is gone: nothing to tell.
        let _ = tx.send(heard);
    })
    .context("watching the project")?;
    let mut watched = BTreeSet::new();
    dev.watch(&mut watcher, &mut watched)?;
    println!(
        "watching {} for changes (Ctrl-C stops)",
        dev.project.display()
    );
    while !stop.load(Ordering::SeqCst) {
        let Some(paths) = settled(&rx, &stop) else {
            break;
        };
        let changed: BTreeSet<String> = paths
            .iter()
            .filter(|p| dev.counts(p))
            .map(|p| dev.shown(p))
            .collect();
        if changed.is_empty() {
            continue;
        }
        let list: Vec<String> = changed.into_iter().collect();
        dev.cycle(&format!("changed: {}", list.join(", ")));
        if stop.load(Ordering::SeqCst) {
            break;
        }
        // A directory made meanwhile is watched too.
        dev.watch(&mut watcher, &mut watched)?;
        println!("watching for changes (Ctrl-C stops)");
    }
    println!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Whether an event of `kind` may change what the build reads: a file or
/// directory created, written, renamed or removed (not one opened, read,
/// closed, or given new metadata).
fn changes(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::ModifyKind;
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Any => true,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(_) | EventKind::Other => false,
    }
}

/// The paths changed by the next burst of events, once none has come for
/// [`DEBOUNCE`] (an editor's save is several events; so is a `git
/// checkout`). `None` when stopped.
fn settled(rx: &mpsc::Receiver<Heard>, stop: &AtomicBool) -> Option<Vec<PathBuf>> {
    let mut paths = Vec::new();
    loop {
        let heard = if paths.is_empty() {
            rx.recv().ok()?
        } else {
            match rx.recv_timeout(DEBOUNCE) {
                Ok(heard) => heard,
                Err(mpsc::RecvTimeoutError::Timeout) => return Some(paths),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        };
        match heard {
            Heard::Changed(p) => paths.extend(p),
            Heard::WatchError(e) => eprintln!("warning: watching the project: {e}"),
            Heard::Stop => return None,
        }
        if stop.load(Ordering::SeqCst) {
            return None;
        }
    }
}

/// On the first Ctrl-C, sets `stop` and sends [`Heard::Stop`]: the loop
/// ends after the step it is in (a build tool in the foreground gets the
/// signal too and stops). A second Ctrl-C exits at once.
fn stop_on_ctrl_c(tx: mpsc::Sender<Heard>, stop: Arc<AtomicBool>) {
    let spawned = std::thread::Builder::new()
        .name("hcp-dev-signal".to_owned())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if tokio::signal::ctrl_c().await.is_ok() {
                    stop.store(true, Ordering::SeqCst);
                    let _ = tx.send(Heard::Stop);
                }
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            });
        });
    if let Err(e) = spawned {
        eprintln!("warning: Ctrl-C will end hcp dev abruptly: {e}");
    }
}

/// The language of the project in `dir`: Cargo.toml for Rust, app.py for
/// Python.
fn language(dir: &Path) -> anyhow::Result<Lang> {
    if dir.join("Cargo.toml").is_file() {
        Ok(Lang::Rust)
    } else if dir.join("app.py").is_file() {
        Ok(Lang::Python)
    } else {
        anyhow::bail!(
            "{}: neither Cargo.toml (Rust) nor app.py (Python): hcp dev builds projects made by \
             `hcp new`",
            dir.display()
        )
    }
}

impl Dev {
    fn open(args: &DevArgs, stop: Arc<AtomicBool>) -> anyhow::Result<Self> {
        let project = std::path::absolute(&args.dir)?;
        let manifest_path = project.join(hcp_bundle::layout::MANIFEST);
        let text = std::fs::read(&manifest_path).with_context(|| {
            format!(
                "{}: hcp dev runs in a capability's directory (`hcp new NAME` makes one)",
                manifest_path.display()
            )
        })?;
        let manifest: Value = serde_json::from_slice(&text)
            .with_context(|| format!("{}: not valid JSON", manifest_path.display()))?;
        let lang = language(&project)?;
        let component = manifest["component"]["path"].as_str().unwrap_or_default();
        let build = build_command(lang, component);
        let data_dir = match &args.data_dir {
            Some(d) => std::path::absolute(d)?,
            None => project.join("target").join("hcp-dev"),
        };
        let made = !development::is_development(&data_dir);
        development::make(&data_dir, &project)?;
        let (_, key, publisher) = super::init::init_development(&data_dir)?;
        let cache_dir = match &args.cache_dir {
            Some(d) => std::path::absolute(d)?,
            None => data_dir.join("cache"),
        };
        let paths = Paths {
            policies_dir: data_dir.join("policies"),
            data_dir,
            cache_dir,
        };
        let example = match &args.input {
            Some(p) => std::path::absolute(p)?,
            None => project.join(EXAMPLE),
        };
        if !example.exists() {
            write_example(&example, &manifest)?;
            println!(
                "wrote {} from the manifest: fill in its inputs",
                example.display()
            );
        }
        let ignored = vec![
            project.join("target"),
            project.join(".git"),
            paths.data_dir.clone(),
            paths.cache_dir.clone(),
        ];
        println!(
            "hcp dev: {} ({}), development data directory {}{}",
            project.display(),
            lang.as_str(),
            paths.data_dir.display(),
            if made {
                " (made now: its own policies, host key and publisher key)"
            } else {
                ""
            }
        );
        Ok(Self {
            project,
            build,
            lang,
            example,
            paths,
            key,
            publisher,
            ignored,
            stop,
        })
    }

    /// One cycle; whether the example task completed. Every failure is
    /// shown and ends the cycle, never the loop.
    fn cycle(&self, why: &str) -> bool {
        println!();
        println!("== {why}");
        let go_on = |done: bool| done && !self.stop.load(Ordering::SeqCst);
        let result = self
            .built()
            .and_then(|built| {
                if go_on(built) {
                    self.installed()
                } else {
                    Ok(false)
                }
            })
            .and_then(|installed| {
                if go_on(installed) {
                    self.ran()
                } else {
                    Ok(false)
                }
            });
        match result {
            Ok(completed) => completed,
            Err(e) => {
                println!("error: {}", super::output::for_terminal(&format!("{e:#}")));
                false
            }
        }
    }

    /// Runs the build command; whether it succeeded (its output goes to
    /// stderr as it comes).
    fn built(&self) -> anyhow::Result<bool> {
        let Some((program, args)) = self.build.split_first() else {
            anyhow::bail!("no build command");
        };
        println!("$ {}", self.build.join(" "));
        let started = Instant::now();
        let status = Command::new(program)
            .args(args)
            .current_dir(&self.project)
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::io::stderr()))
            .status();
        match status {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                println!(
                    "build: cannot run {program} ({}); then save a file to build again",
                    build_tool_hint(self.lang)
                );
                Ok(false)
            }
            Err(e) => Err(e).with_context(|| format!("running {program}")),
            Ok(status) if status.success() => {
                println!("built in {:.1}s", started.elapsed().as_secs_f64());
                Ok(true)
            }
            Ok(status) => {
                println!(
                    "build failed ({program}: {status}): fix it and save; hcp dev waits for the \
                     next change"
                );
                Ok(false)
            }
        }
    }

    /// Packs, signs and installs the project; whether it was installed.
    fn installed(&self) -> anyhow::Result<bool> {
        let bundle = Progress::during("packing the project", false, || self.bundle());
        let file = match bundle {
            Ok(file) => file,
            Err(e) => {
                println!(
                    "not packed: {}",
                    super::output::for_terminal(&format!("{e:#}"))
                );
                return Ok(false);
            }
        };
        let store = Store::open(&self.paths.data_dir)?;
        let host = crate::hostkey::load_or_init(&self.paths.data_dir)?;
        let sandbox = super::sandbox(&self.paths)?;
        let options = InstallOptions {
            allow_unsigned: false,
            // The author is this directory's operator: wider grants are
            // shown, not asked about.
            accept_new_grants: true,
            policy_dir: self.paths.policies_dir.clone(),
            replace_same_version: true,
        };
        let outcome = Progress::during("installing (the first time, compiling)", false, || {
            install::install(&store, &sandbox, &host, &file, &options)
        });
        let outcome = match outcome {
            Ok(o) => o,
            Err(InstallError::Refused(reason)) => {
                println!("install refused: {}", super::output::for_terminal(&reason));
                return Ok(false);
            }
            Err(InstallError::Surface { message, report }) => {
                println!("{report}");
                println!("install refused: {}", super::output::for_terminal(&message));
                return Ok(false);
            }
            Err(InstallError::Host(e)) => return Err(e),
        };
        println!(
            "installed {}{}",
            outcome.installed.id(),
            if outcome.replaced_same_version {
                " (replacing the previous build)"
            } else {
                ""
            }
        );
        if let Some((_, changes)) = &outcome.previous {
            for c in changes.iter().filter(|c| c.widens) {
                println!("  now also: {}", c.what);
            }
        }
        for w in &outcome.warnings {
            println!("  warning: {w}");
        }
        Ok(true)
    }

    /// The project as a signed bundle, in memory.
    fn bundle(&self) -> anyhow::Result<BundleFile> {
        let mut bundle: Bundle = hcp_bundle::pack_dir(&self.project, WitSource::Host)?;
        bundle.sign(&self.key, self.publisher.clone())?;
        let bytes = bundle.to_bytes()?;
        Ok(BundleFile {
            path: self.paths.data_dir.join(format!("{}.hcpb", bundle.id())),
            sha256: hcp_contracts::jcs::sha256_bytes_tagged(&bytes),
            bytes,
            origin: None,
        })
    }

    /// Submits the example through the gate and runs it; whether it
    /// completed.
    fn ran(&self) -> anyhow::Result<bool> {
        let text = std::fs::read(&self.example)
            .with_context(|| format!("{}: the example task", self.example.display()))?;
        let mut message: Value = serde_json::from_slice(&text)
            .with_context(|| format!("{}: not valid JSON", self.example.display()))?;
        let caller = message["payload"]["caller_id"]
            .as_str()
            .with_context(|| format!("{}: no payload.caller_id", self.example.display()))?
            .to_owned();
        // A new message each time: the gate answers a message_id once.
        if let Some(m) = message.as_object_mut() {
            let id = m
                .get("message_id")
                .and_then(Value::as_str)
                .unwrap_or("msg")
                .chars()
                .take(200)
                .collect::<String>();
            let suffix = uuid::Uuid::new_v4().simple().to_string();
            m.insert(
                "message_id".to_owned(),
                Value::String(format!("{id}.dev-{}", &suffix[..12])),
            );
            m.insert("timestamp".to_owned(), Value::String(crate::store::now()));
        }
        let host = Host::open(
            HostPaths {
                data_dir: self.paths.data_dir.clone(),
                cache_dir: self.paths.cache_dir.clone(),
                policies_dir: self.paths.policies_dir.clone(),
            },
            HostConfig::default(),
        )?;
        let submission = host.submit(&message, Auth::Transport(&caller))?;
        let Some(task_id) = submission.task_id.filter(|_| submission.runnable) else {
            println!(
                "task not run: {}",
                one_line(&submission.answer.to_value()?, OUTPUT_SHOWN)
            );
            return Ok(false);
        };
        let started = Instant::now();
        let answer = Progress::during("running the example task", false, || {
            runtime()?.block_on(host.run_task(&task_id))
        })?;
        let Some(answer) = answer else {
            println!("task {task_id} is queued (no session slot is free)");
            return Ok(false);
        };
        self.report(&host.store, &task_id, &answer, started.elapsed())?;
        Ok(matches!(answer, Answer::Completed(_)))
    }

    /// The task's answer, log lines, denials and receipts, on stdout.
    fn report(
        &self,
        store: &Store,
        task_id: &str,
        answer: &Answer,
        took: Duration,
    ) -> anyhow::Result<()> {
        println!(
            "task {task_id}: {} in {:.1}s",
            answer.kind_name(),
            took.as_secs_f64()
        );
        let value = answer.to_value()?;
        let payload = &value["payload"];
        if let Some(outputs) = payload.get("outputs") {
            println!("  output   {}", one_line(outputs, OUTPUT_SHOWN));
        }
        if let Some(code) = payload.get("error_code") {
            println!(
                "  failed   {}: {}",
                one_line(code, 80),
                one_line(&payload["error_message"], OUTPUT_SHOWN)
            );
        }
        let Some(session) = answer.session_id() else {
            return Ok(());
        };
        for line in super::task_report::session_lines(store, session)? {
            match line {
                super::task_report::Line::Log(l) => println!("  log      {l}"),
                super::task_report::Line::Deny(d) => println!("  DENY     {d}"),
            }
        }
        let receipts = crate::evidence::session_receipts(store, session)?;
        let denied = receipts
            .iter()
            .filter(|(r, _)| r.verdict == Verdict::Deny)
            .count();
        println!(
            "  receipts {} ({} allowed, {denied} denied), session {session}",
            receipts.len(),
            receipts.len() - denied
        );
        println!(
            "           hcp evidence export --session {session} -o evidence.json --data-dir {}",
            self.paths.data_dir.display()
        );
        Ok(())
    }

    /// Watches the project: its top directory, and each directory in it
    /// that is not ignored (recursively), once.
    fn watch(
        &self,
        watcher: &mut impl notify::Watcher,
        watched: &mut BTreeSet<PathBuf>,
    ) -> anyhow::Result<()> {
        use notify::RecursiveMode;
        if watched.insert(self.project.clone()) {
            watcher
                .watch(&self.project, RecursiveMode::NonRecursive)
                .with_context(|| format!("watching {}", self.project.display()))?;
        }
        let entries = std::fs::read_dir(&self.project)
            .with_context(|| format!("{}", self.project.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_dir || !self.counts(&path) || watched.contains(&path) {
                continue;
            }
            watcher
                .watch(&path, RecursiveMode::Recursive)
                .with_context(|| format!("watching {}", path.display()))?;
            watched.insert(path);
        }
        Ok(())
    }

    /// Whether a change to `path` starts a cycle: not in an ignored
    /// directory, not a build output or an editor's scratch file.
    fn counts(&self, path: &Path) -> bool {
        if self.ignored.iter().any(|d| path.starts_with(d)) {
            return false;
        }
        let Ok(rel) = path.strip_prefix(&self.project) else {
            return false;
        };
        // The project's directory itself: a change in it names the file.
        if rel.as_os_str().is_empty() {
            return false;
        }
        if rel.components().any(|c| {
            matches!(
                c.as_os_str().to_str(),
                Some("__pycache__" | ".git" | "target")
            )
        }) {
            return false;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let scratch = name.starts_with(".#")
            || name.ends_with('~')
            || [".swp", ".swx", ".tmp", ".wasm", ".hcpb"]
                .iter()
                .any(|s| name.ends_with(s))
            // Cargo rewrites it as it builds.
            || rel == Path::new("Cargo.lock");
        !scratch
    }

    /// `path` as shown: relative to the project.
    fn shown(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.project).unwrap_or(path);
        super::output::for_terminal(&rel.display().to_string()).into_owned()
    }
}

/// `value` as compact JSON on one line, cut to `max` characters.
fn one_line(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let text = super::output::for_terminal(&text).replace('\n', " ");
    if text.chars().count() > max {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Writes a task_submit for the capability `manifest` declares, its inputs
/// a sample of its input_schema.
fn write_example(path: &Path, manifest: &Value) -> anyhow::Result<()> {
    let capability = &manifest["capability"];
    let name = capability["name"].as_str().unwrap_or("capability");
    let example = json!({
        "hcp_version": "1.0",
        "message_id": format!("msg-{name}-0001"),
        "timestamp": crate::store::now(),
        "session_id": null,
        "type": "task_submit",
        "payload": {
            "capability": name,
            "capability_version": capability["version"].as_str().unwrap_or("*"),
            "caller_id": super::init::DEVELOPER,
            "intent": format!("Try {name} (written by hcp dev from the manifest)"),
            "inputs": sample(&capability["input_schema"], 0),
            "constraints": {
                "max_duration": capability["constraints"]["max_duration"]
                    .as_str()
                    .unwrap_or("PT1M"),
                "data_classification": "T1"
            }
        }
    });
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    }
    let text = format!("{}\n", serde_json::to_string_pretty(&example)?);
    std::fs::write(path, text).with_context(|| format!("{}", path.display()))
}

/// A value of `schema`: its default, first example, const or first enum
/// value, else the required properties of an object, else an empty value
/// of its type.
fn sample(schema: &Value, depth: usize) -> Value {
    if let Some(v) = schema
        .get("default")
        .or_else(|| schema["examples"].get(0))
        .or_else(|| schema.get("const"))
        .or_else(|| schema["enum"].get(0))
    {
        return v.clone();
    }
    let kind = match &schema["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(types) => types.first().and_then(Value::as_str).unwrap_or("object"),
        _ => "object",
    };
    match kind {
        "object" => {
            let mut out = serde_json::Map::new();
            // A schema nested past any sensible depth is not followed.
            if depth < 8 {
                for key in schema["required"].as_array().into_iter().flatten() {
                    if let Some(key) = key.as_str() {
                        let sub = &schema["properties"][key];
                        out.insert(key.to_owned(), sample(sub, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        "array" => json!([]),
        "string" => json!(""),
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(0)),
        "boolean" => json!(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_satisfies_the_shape_of_its_schema() {
        let schema = json!({
            "type": "object",
            "required": ["directory", "n", "deep"],
            "properties": {
                "directory": {"type": "string", "default": "/data"},
                "n": {"type": "integer", "minimum": 3},
                "deep": {"type": "object", "required": ["flag"],
                         "properties": {"flag": {"type": "boolean"}}},
                "optional": {"type": "string"}
            }
        });
        assert_eq!(
            sample(&schema, 0),
            json!({"directory": "/data", "n": 3, "deep": {"flag": false}})
        );
        assert_eq!(sample(&json!({"enum": ["a", "b"]}), 0), json!("a"));
        assert_eq!(sample(&Value::Null, 0), json!({}));
    }

    #[test]
    fn one_line_cuts_and_escapes() {
        assert_eq!(one_line(&json!({"a": 1}), 100), "{\"a\":1}");
        assert_eq!(one_line(&json!("x\ny"), 100), "x y");
        assert_eq!(one_line(&json!("abcdef"), 3), "abc...");
    }
}
