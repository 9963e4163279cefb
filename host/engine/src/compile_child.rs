//! Compiling an untrusted component in a child process, under CPU-time and
//! memory limits, never unbounded in the host's own process.
//!
//! `hcp install`, `hcp review` and `hcp surface` meet components nobody on
//! this host has vetted. Their sandbox carries a [`ChildCompile`] as its
//! compile guard ([`hcp_sandbox::CompileGuard`]): before the host compiles
//! a component it has not compiled yet, `hcp` starts itself again with the
//! hidden subcommand `compile-component`, which sets its own limits
//! (`RLIMIT_CPU`, `RLIMIT_AS`) before it reads anything, reads the
//! component from its standard input, and compiles it with the host's
//! engine settings into the host's compiled-code cache. The host then
//! compiles the component from that cache (a read, no compiling); a child
//! stopped at a limit refuses the component, naming the limit. A compile
//! that takes longer than [`PROGRESS_AFTER`] says so on stderr.
//!
//! # Ambient authority
//!
//! Starts this process's own executable; the child writes only into the
//! compiled-code cache.

use hcp_sandbox::{CompileGuard, Sandbox, SandboxConfig};
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// CPU time one compile may take, in seconds (the child's `RLIMIT_CPU`),
/// unless `HCP_COMPILE_CPU_SECONDS` says otherwise.
pub const CPU_SECONDS: u64 = 300;

/// Address space of the compiling child, in bytes (its `RLIMIT_AS`),
/// unless `HCP_COMPILE_MEMORY_MIB` says otherwise (in MiB).
pub const MEMORY_BYTES: u64 = 8 << 30;

/// A compile taking longer than this is announced on stderr.
pub const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Set while the command line shows a progress indicator of its own on
/// stderr (`hcp install`, `hcp dev` on a terminal): the announcement would
/// tear its line and says nothing more.
static INDICATOR_SHOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says whether the command line shows a progress indicator of its own,
/// in place of the announcement of a long compile.
pub fn indicator_shown(shown: bool) {
    INDICATOR_SHOWN.store(shown, std::sync::atomic::Ordering::SeqCst);
}

/// The name of the hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "compile-component";

/// Most of the child's stderr kept for the refusal's message.
const STDERR_BYTES: u64 = 8 << 10;

/// The limits of one compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileLimits {
    /// CPU seconds.
    pub cpu_seconds: u64,
    /// Address space, bytes.
    pub memory_bytes: u64,
}

impl CompileLimits {
    /// [`CPU_SECONDS`] and [`MEMORY_BYTES`], or what
    /// `HCP_COMPILE_CPU_SECONDS` and `HCP_COMPILE_MEMORY_MIB` set.
    ///
    /// # Errors
    ///
    /// One of them is set to something other than a positive whole number.
    pub fn from_env() -> anyhow::Result<Self> {
        let read = |name: &str| -> anyhow::Result<Option<u64>> {
            match std::env::var(name) {
                Err(_) => Ok(None),
                Ok(text) => match text.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => anyhow::bail!("{name}={text:?}: a positive whole number is expected"),
                },
            }
        };
        Ok(Self {
            cpu_seconds: read("HCP_COMPILE_CPU_SECONDS")?.unwrap_or(CPU_SECONDS),
            memory_bytes: read("HCP_COMPILE_MEMORY_MIB")?
                .map_or(MEMORY_BYTES, |mib| mib.saturating_mul(1 << 20)),
        })
    }
}

/// The compile guard of `hcp install`, `review` and `surface`.
#[derive(Debug, Clone)]
pub struct ChildCompile {
    exe: PathBuf,
    cache_dir: PathBuf,
    limits: CompileLimits,
}

impl ChildCompile {
    /// Compiles into `cache_dir` (the host sandbox's cache) in a child
    /// running this process's executable, within `limits`.
    ///
    /// # Errors
    ///
    /// This process's executable cannot be found.
    pub fn new(cache_dir: PathBuf, limits: CompileLimits) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("the path of hcp itself, to compile in a child: {e}"))?;
        Ok(Self {
            exe,
            cache_dir,
            limits,
        })
    }
}

impl CompileGuard for ChildCompile {
    fn compile(&self, capability: &str, component: &[u8]) -> Result<(), String> {
        let CompileLimits {
            cpu_seconds,
            memory_bytes,
        } = self.limits;
        let mut child = Command::new(&self.exe)
            .arg(SUBCOMMAND)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .arg("--cpu-seconds")
            .arg(cpu_seconds.to_string())
            .arg("--memory-bytes")
            .arg(memory_bytes.to_string())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "a child process to compile the component in could not be started ({}): {e}",
                    self.exe.display()
                )
            })?;
        // Written from a thread: a child that stops reading (at a limit)
        // must not block this one.
        let input = child.stdin.take();
        let bytes = component.to_vec();
        let writer = std::thread::spawn(move || {
            if let Some(mut input) = input {
                let _ = input.write_all(&bytes);
            }
        });
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(stderr) = stderr {
                let _ = stderr.take(STDERR_BYTES).read_to_string(&mut text);
            }
            text
        });
        let started = Instant::now();
        // CPU time is at most wall time per thread: past twice the CPU
        // limit and a minute, the child is waiting, not compiling.
        let wall = Duration::from_secs(cpu_seconds.saturating_mul(2).saturating_add(60));
        let mut announced = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(e) => break Err(format!("waiting for the compiling child: {e}")),
            }
            let elapsed = started.elapsed();
            if !announced
                && elapsed >= PROGRESS_AFTER
                && !INDICATOR_SHOWN.load(std::sync::atomic::Ordering::SeqCst)
            {
                announced = true;
                eprintln!(
                    "compiling {capability} ({} bytes) in a child process, within {cpu_seconds} s \
                     of CPU and {} MiB of memory...",
                    component.len(),
                    memory_bytes >> 20
                );
            }
            if elapsed >= wall {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "compiling the component took longer than {} s and was stopped: refused",
                    wall.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = writer.join();
        let said = reader.join().unwrap_or_default();
        let status = status?;
        if announced {
            eprintln!(
                "compiled {capability} in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        if status.success() {
            return Ok(());
        }
        Err(refusal(status, said.trim(), self.limits))
    }
}

/// Why a child that did not succeed refuses the component.
fn refusal(status: std::process::ExitStatus, said: &str, limits: CompileLimits) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    // SIGXCPU at the soft limit, SIGKILL at the hard one.
    const SIGKILL: i32 = 9;
    const SIGXCPU: i32 = 24;
    let out_of_memory = said.contains("memory allocation of") || said.contains("out of memory");
    match status.signal() {
        Some(SIGXCPU | SIGKILL) => format!(
            "compiling the component took more than {} s of CPU, the limit on compiling a \
             component this host has not vetted (HCP_COMPILE_CPU_SECONDS): refused",
            limits.cpu_seconds
        ),
        _ if out_of_memory => format!(
            "compiling the component needed more than {} MiB of memory, the limit on compiling \
             a component this host has not vetted (HCP_COMPILE_MEMORY_MIB): refused",
            limits.memory_bytes >> 20
        ),
        Some(signal) => format!("the compiling child process ended on signal {signal}: refused"),
        None if said.is_empty() => format!(
            "the compiling child process failed (exit status {}): refused",
            status.code().unwrap_or(-1)
        ),
        None => said.to_owned(),
    }
}

/// Arguments of the hidden `hcp compile-component`.
#[derive(Debug, clap::Args)]
pub struct ChildArgs {
    /// The compiled-code cache to compile into.
    #[arg(long)]
    cache_dir: PathBuf,
    /// `RLIMIT_CPU`, seconds.
    #[arg(long)]
    cpu_seconds: u64,
    /// `RLIMIT_AS`, bytes.
    #[arg(long)]
    memory_bytes: u64,
}

/// The child: limits itself, reads the component from stdin, compiles it
/// into the cache. Exit 0 compiled; 1 refused or failed, why on stderr.
pub fn child_main(args: &ChildArgs) -> ExitCode {
    use rustix::process::{Resource, Rlimit, setrlimit};
    // Before anything is read: the limits hold for the whole compile. The
    // hard CPU limit a little above the soft one, whose SIGXCPU ends it.
    let limits = [
        (
            Resource::Cpu,
            Rlimit {
                current: Some(args.cpu_seconds),
                maximum: Some(args.cpu_seconds.saturating_add(5)),
            },
        ),
        (
            Resource::As,
            Rlimit {
                current: Some(args.memory_bytes),
                maximum: Some(args.memory_bytes),
            },
        ),
    ];
    for (resource, limit) in limits {
        if let Err(e) = setrlimit(resource, limit) {
            eprintln!("the compiling child could not limit itself ({resource:?}): {e}");
            return ExitCode::from(1);
        }
    }
    let most = hcp_bundle::Limits::default().component_bytes;
    let mut component = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(most.saturating_add(1))
        .read_to_end(&mut component)
    {
        eprintln!("reading the component: {e}");
        return ExitCode::from(1);
    }
    if component.len() as u64 > most {
        eprintln!("the component is larger than any this host accepts ({most} bytes)");
        return ExitCode::from(1);
    }
    // The host's engine settings (those that decide the compiled code and
    // so the cache's key), without the pooling allocator's reservations.
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(args.cache_dir.clone()),
        pooling: false,
        ..SandboxConfig::default()
    });
    let result = sandbox
        .map_err(|e| e.to_string())
        .and_then(|s| s.compile_into_cache("", &component).map_err(|e| reason(&e)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("{why}");
            ExitCode::from(1)
        }
    }
}

/// A refusal without the capability's name (the parent names it).
fn reason(error: &hcp_sandbox::PrepareError) -> String {
    use hcp_sandbox::PrepareError;
    match error {
        PrepareError::Compile { error, .. } => {
            format!("the component does not compile: {error:#}")
        }
        PrepareError::CodeBounds { error, .. } => error.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_stopped_at_a_limit_is_refused_naming_it() {
        use std::os::unix::process::ExitStatusExt as _;
        let limits = CompileLimits {
            cpu_seconds: 2,
            memory_bytes: 64 << 20,
        };
        let killed = std::process::ExitStatus::from_raw(24);
        assert!(
            refusal(killed, "", limits)
                .starts_with("compiling the component took more than 2 s of CPU"),
            "{}",
            refusal(killed, "", limits)
        );
        let aborted = std::process::ExitStatus::from_raw(6);
        assert!(
            refusal(aborted, "memory allocation of 1048576 bytes failed", limits)
                .starts_with("compiling the component needed more than 64 MiB of memory"),
        );
        let failed = std::process::ExitStatus::from_raw(1 << 8);
        assert_eq!(
            refusal(failed, "the component does not compile: bad", limits),
            "the component does not compile: bad"
        );
    }
}
