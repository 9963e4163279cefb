//! The engine every capability runs on: pooling allocator, epoch deadlines,
//! bounded wasm stack, compiled code cached on disk.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Host-wide sandbox settings. [`SandboxConfig::default`] is what `hcp` uses.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where compiled code is cached (`None`: no cache). Entries are keyed by
    /// the component's sha256 and the engine's settings, so a changed
    /// component or engine never reuses stale code. The directory is created
    /// with mode 0700: whoever can write it can run code in the host.
    pub cache_dir: Option<PathBuf>,
    /// Pre-allocate instance slots (the pooling allocator). Off: allocate on
    /// demand, as plain `Linker::instantiate` does.
    pub pooling: bool,
    /// Component instances the pool holds (tasks running at once).
    pub pool_instances: u32,
    /// Interrupt guests at their deadline (epoch interruption). Off only for
    /// the benchmark that measures its cost.
    pub epoch_interruption: bool,
    /// How often the epoch advances; deadlines are this precise.
    pub epoch_tick: Duration,
    /// Largest wasm stack of one task, bytes (stack overflow traps past it).
    pub max_wasm_stack: usize,
    /// Resolve and type-check imports once per component (`InstancePre`).
    /// Off: every task calls `Linker::instantiate`, the plain embedding the
    /// instantiation benchmark compares against.
    pub pre_instantiate: bool,
    /// Pass every host call through the task's policy enforcement point
    /// (`TaskRequest::governor`), with the governed filesystem view linked
    /// in place of the stock one. Off only for the benchmark that measures
    /// enforcement's cost: the grants still bound what the guest reaches,
    /// but no call is decided, budgeted or recorded.
    pub enforcement: bool,
    /// The host's own directories, which no grant may reach (equal one,
    /// lie inside one, or hold one): the data directory (its keys, its
    /// database, the installed components), the policies. The cache
    /// directory is always among them: whoever writes it runs code in the
    /// host.
    pub host_dirs: Vec<PathBuf>,
    /// Directories inside [`SandboxConfig::host_dirs`] that read-only grants
    /// may lie in: the installed capabilities' directory, where a bundle's
    /// own data (`${manifest_dir}/<dir>`) is installed.
    pub read_only_within: Vec<PathBuf>,
    /// Compiles a component somewhere else first (`hcp`: a child process
    /// under CPU and memory limits, into the cache), before this process
    /// compiles it, which then finds it in the cache. `None`: compiled
    /// here.
    pub compile_guard: Option<Arc<dyn CompileGuard>>,
}

/// Compiles an untrusted component out of the host's process, within
/// limits, before the host compiles it ([`SandboxConfig::compile_guard`]).
pub trait CompileGuard: Send + Sync + std::fmt::Debug {
    /// Compiles `component` of `capability` (`name@version`) into the
    /// engine's cache, or says why it was refused (over a limit, does not
    /// compile).
    ///
    /// # Errors
    ///
    /// Why the component is refused, in words.
    fn compile(&self, capability: &str, component: &[u8]) -> Result<(), String>;
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            pooling: true,
            pool_instances: 64,
            epoch_interruption: true,
            epoch_tick: Duration::from_millis(10),
            max_wasm_stack: 512 << 10,
            pre_instantiate: true,
            enforcement: true,
            host_dirs: Vec::new(),
            read_only_within: Vec::new(),
            compile_guard: None,
        }
    }
}

/// Why the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// wasmtime refused the configuration.
    #[error("sandbox engine: {0:#}")]
    Config(wasmtime::Error),
    /// The cache directory could not be prepared.
    #[error("compiled-code cache {path}")]
    Cache {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The engine plus its epoch ticker; dropping the last clone stops the ticker.
#[derive(Clone, Debug)]
pub(crate) struct SharedEngine {
    pub(crate) engine: Engine,
    pub(crate) config: SandboxConfig,
    /// Digests of the components [`SandboxConfig::compile_guard`] compiled
    /// already (into the cache), so that a later compile of the same one
    /// is not sent out again.
    pub(crate) guarded: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// The tasks running on a thread of their own now.
    pub(crate) threads: TaskThreads,
    _ticker: Arc<Ticker>,
}

/// How many tasks run on a thread of their own
/// ([`crate::PreparedCapability::run`]), so that a server stopping can wait
/// for their threads to end before its runtime goes.
#[derive(Clone, Debug)]
pub(crate) struct TaskThreads(Arc<tokio::sync::watch::Sender<usize>>);

impl Default for TaskThreads {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

/// One task's thread, counted until dropped.
#[derive(Debug)]
pub(crate) struct TaskThread(TaskThreads);

impl Drop for TaskThread {
    fn drop(&mut self) {
        self.0.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl TaskThreads {
    /// Counts one more thread, until the returned guard is dropped.
    pub(crate) fn enter(&self) -> TaskThread {
        self.0.send_modify(|n| *n += 1);
        TaskThread(self.clone())
    }

    pub(crate) fn count(&self) -> usize {
        *self.0.borrow()
    }

    /// Waits until none is counted, for at most `within`; whether none is.
    pub(crate) async fn ended(&self, within: Duration) -> bool {
        let mut counted = self.0.subscribe();
        matches!(
            tokio::time::timeout(within, counted.wait_for(|n| *n == 0)).await,
            Ok(Ok(_))
        )
    }
}

#[derive(Debug)]
struct Ticker(Arc<AtomicBool>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl SharedEngine {
    pub(crate) fn new(config: SandboxConfig) -> Result<Self, EngineError> {
        let mut c = Config::new();
        // Never on (it is wasmtime's default): a shared memory grows
        // without asking the store's limiter, outside the task's memory
        // budget (limits.rs, `a_shared_memory_is_refused_since_no_budget_would_bound_it`).
        c.shared_memory(false);
        c.wasm_component_model(true)
            .epoch_interruption(config.epoch_interruption)
            .max_wasm_stack(config.max_wasm_stack)
            .parallel_compilation(true);
        if config.pooling {
            let mut pool = PoolingAllocationConfig::default();
            let n = config.pool_instances;
            pool.total_component_instances(n)
                .total_core_instances(n * 8)
                .total_memories(n * 4)
                .total_tables(n * 8)
                .total_stacks(n)
                .max_memories_per_component(8)
                .max_tables_per_component(16)
                .max_core_instances_per_component(32)
                .table_elements(100_000)
                .max_memory_size(4 << 30)
                // Reset a finished task's memory with memset, page by dirty
                // page, instead of madvise: the next task then takes no page
                // faults on it. Past these sizes, memory is decommitted.
                .linear_memory_keep_resident(1 << 20)
                .table_keep_resident(1 << 20)
                .pagemap_scan(wasmtime::Enabled::Auto)
                .decommit_batch_size(8);
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        if let Some(dir) = &config.cache_dir {
            prepare_cache_dir(dir)?;
            let mut cache = wasmtime::CacheConfig::new();
            cache.with_directory(dir);
            let cache = wasmtime::Cache::new(cache).map_err(EngineError::Config)?;
            c.cache(Some(cache));
        }
        let engine = Engine::new(&c).map_err(EngineError::Config)?;
        let stop = Arc::new(AtomicBool::new(false));
        if config.epoch_interruption {
            let engine = engine.weak();
            let stop = stop.clone();
            let tick = config.epoch_tick;
            std::thread::Builder::new()
                .name("hcp-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        match engine.upgrade() {
                            Some(e) => e.increment_epoch(),
                            None => break,
                        }
                    }
                })
                .map_err(|e| EngineError::Config(wasmtime::Error::msg(e.to_string())))?;
        }
        Ok(Self {
            engine,
            config,
            guarded: Arc::default(),
            threads: TaskThreads::default(),
            _ticker: Arc::new(Ticker(stop)),
        })
    }
}

/// Creates the cache directory with mode 0700 and refuses one others can
/// write.
fn prepare_cache_dir(dir: &std::path::Path) -> Result<(), EngineError> {
    let err = |source| EngineError::Cache {
        path: dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(dir).map_err(err)?;
        if meta.permissions().mode() & 0o022 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        }
    }
    Ok(())
}
