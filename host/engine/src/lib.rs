//! The host's task engine: the admission gate (HCP L3), approvals, sessions,
//! and running admitted tasks to their L4 answer.
//!
//! [`Host`] owns what a task needs: the store, the operator's policies, the
//! sandbox, the host identity and session-token keys, and the prepared
//! (compiled, audited, pre-instantiated) capabilities, and the receipt
//! pipeline ([`crate::evidence::Recorder`]). The command line and the HTTP
//! API both drive it.
//!
//! Every decision on a task is a receipt, durable and covered by a
//! checkpoint before the host answers: the gate's admission or refusal, an
//! operator's decision, an approval's expiry, the session's opening (its
//! decision scope compiled from the admission, the grants and the policy)
//! and every host call the task makes, each decided by the PEP
//! (`hcp_sandbox::pep::PolicyGovernor`) before dispatch. The admission and
//! approval receipts are the DAG parents of the session's first receipts.
//!
//! The third layer of the host (store → evidence → engine → serve → cli):
//! it stands on `hcp_store` and `hcp_evidence` and imports neither the
//! transports (`hcp_serve`) nor the command line (`hcp`). Beside the
//! engine it holds what the engine stands on and what both edges show:
//! the task lifecycle's answers ([`lifecycle`]), session tokens
//! ([`token`]), installing bundles ([`install`]) and compiling an unvetted
//! component in a child process ([`compile_child`]), the HID mediator
//! ([`hid`]), and what `hcp serve` and the command line both show of an
//! approval ([`views`]).
#![deny(missing_docs)]

/// A phase of a task's path (`name`), as a span that lives until dropped:
/// timed by a subscriber that asks for target `hcp::phase` and level
/// TRACE (the `task_path` bench), free otherwise.
macro_rules! phase {
    ($name:literal) => {
        tracing::trace_span!(target: "hcp::phase", $name)
    };
}

pub mod compile_child;
pub mod hid;
pub mod install;
pub mod lifecycle;
pub mod token;
pub mod views;

// The layers below, each a crate of its own, under the names the engine's
// modules have always used.
use hcp_evidence as evidence;
use hcp_store as store;
use hcp_store::{private_dir, withhold};

mod admit;
mod answer;
mod answers;
mod approvals;
mod capabilities;
mod handoff;
mod hid_witness;
mod limits;
mod policy;
mod receipts;
mod runner;
mod session;
mod settle;
mod slots;
mod submission;
mod ungated;

pub use admit::MAX_WAITING_PER_CALLER;
pub use answers::{job_status, job_status_of};
pub use approvals::DecisionRefused;
pub use hcp_contracts::answer::Answer;
pub use policy::{CurrentPolicy, LivePolicy, ReloadError, Reloaded};
pub use session::open_session;
pub use settle::{ACK_NOT_CONFIRMED, ACK_NOT_SENT, OWN_NOT_RECORDED};
pub use submission::{AnswerKind, Auth, Carried, NotATask, Submission, TaskMessage, refusal};
pub use ungated::{UngatedRun, UngatedTask};

use crate::evidence::Recorder;
use crate::store::{Installed, Store};
use crate::token::TokenKeys;
use anyhow::{Context as _, Result};
pub(crate) use capabilities::Capabilities;
use capabilities::Capability;
use hcp_evidence::hostkey::{self, HostIdentity};
use hcp_policy::PolicySet;
use hcp_sandbox::{Sandbox, SandboxConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the host keeps things.
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// Data directory (database, artifacts, keys, installed capabilities).
    pub data_dir: PathBuf,
    /// Compiled-code cache.
    pub cache_dir: PathBuf,
    /// The operator's policy directory.
    pub policies_dir: PathBuf,
}

/// Settings of the task engine.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// How long a task waits for an operator before it is rejected with
    /// `approval_expired`.
    pub approval_ttl: Duration,
    /// The time the gate decides at (contextual rules such as unattended
    /// hours depend on it). `None`: the system clock. Tests pin it.
    pub gate_clock: Option<time::OffsetDateTime>,
    /// The HID executor's serial port (only `hcp serve` opens one).
    pub hid_device: Option<hcp_hid::device::DeviceConfig>,
    /// The most admitted tasks one caller may have waiting to run
    /// (`queued`: for a session slot or equipment); the next is refused
    /// `resource_unavailable` until one of them starts.
    pub max_queued_per_caller: u64,
}

/// [`HostConfig::max_queued_per_caller`] unless set: a caller's tasks
/// queue behind its session slots up to this many, and no caller's backlog
/// grows the store without bound.
pub const MAX_QUEUED_PER_CALLER: u64 = 1_000;

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            approval_ttl: Duration::from_secs(3600),
            gate_clock: None,
            hid_device: None,
            max_queued_per_caller: MAX_QUEUED_PER_CALLER,
        }
    }
}

/// The host.
pub struct Host {
    paths: HostPaths,
    config: HostConfig,
    /// The durable state.
    pub store: Arc<Store>,
    /// The operator's policies (see [`Host::policy`], [`Host::reload_policy`]).
    policy: Arc<LivePolicy>,
    sandbox: Sandbox,
    identity: HostIdentity,
    tokens: TokenKeys,
    /// Receipts of every decision.
    pub(crate) recorder: Recorder,
    /// The installed capabilities, each read and hashed once.
    capabilities: Arc<Capabilities>,
    /// Submissions of the same `(caller_id, message_id)` go through the gate
    /// one at a time, so a duplicate that arrives with the original gets the
    /// original's answer.
    submit_locks: Vec<Mutex<()>>,
    /// Tasks accepted here, for their runs (see [`handoff`]).
    handoff: handoff::Handoff,
    /// What each caller submitted, against its limits (see [`limits`]).
    meters: limits::Meters,
    /// The HID mediator of this process.
    pub hid: Arc<crate::hid::HidService>,
}

/// Stripes of [`Host::submit_locks`].
const SUBMIT_STRIPES: usize = 64;

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("host_id", &self.identity.host_id)
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Opens the data directory (creating it and the host key on first use),
    /// loads and checks the policies, builds the sandbox.
    ///
    /// # Errors
    ///
    /// The data directory, the policies or the engine cannot be opened.
    pub fn open(paths: HostPaths, config: HostConfig) -> Result<Self> {
        let store = Arc::new(Store::open(&paths.data_dir)?);
        // The write-ahead log checkpointed off the task path (before the
        // receipt writer's connection opens, so that it is watched too).
        store.checkpoint_in_background()?;
        let policy = Arc::new(LivePolicy::new(
            PolicySet::load(&paths.policies_dir)
                .with_context(|| format!("policies {}", paths.policies_dir.display()))?,
        )?);
        let identity = hostkey::load_or_init(&paths.data_dir)?;
        let tokens = TokenKeys::from_host_key(&identity.key, &identity.host_id)?;
        // The receipt log signs with the same key, loaded once more: the
        // log owns its copy.
        let recorder = Recorder::open(
            store.clone(),
            hostkey::load(&paths.data_dir)?,
            hcp_receipts::SigningPolicy::default(),
        )?;
        let sandbox = Sandbox::new(SandboxConfig {
            cache_dir: Some(paths.cache_dir.clone()),
            host_dirs: vec![paths.data_dir.clone(), paths.policies_dir.clone()],
            read_only_within: vec![paths.data_dir.join("capabilities")],
            ..SandboxConfig::default()
        })?;
        let capabilities = Arc::new(Capabilities::load(&store)?);
        let witness = hid_witness::HidReceipts {
            appender: recorder.appender(),
            store: store.clone(),
            policy: policy.clone(),
            capabilities: capabilities.clone(),
        };
        let hid = Arc::new(crate::hid::HidService::start(
            &paths.data_dir,
            config.hid_device.clone(),
            Some(Arc::new(witness)),
        )?);
        Ok(Self {
            hid,
            paths,
            config,
            store,
            policy,
            sandbox,
            identity,
            tokens,
            recorder,
            capabilities,
            submit_locks: (0..SUBMIT_STRIPES).map(|_| Mutex::new(())).collect(),
            handoff: handoff::Handoff::default(),
            meters: limits::Meters::default(),
        })
    }

    /// Waits until no task runs on a thread of its own, for at most
    /// `within`; says whether none does. A server stopping calls this after
    /// it dropped its runs, so that its runtime goes only once their
    /// threads have ended (one still there is blocked in a host call).
    pub async fn task_threads_ended(&self, within: std::time::Duration) -> bool {
        self.sandbox.task_threads_ended(within).await
    }

    /// How many tasks run on a thread of their own now.
    #[must_use]
    pub fn task_threads(&self) -> usize {
        self.sandbox.task_threads()
    }

    /// This host's id.
    pub fn host_id(&self) -> &str {
        &self.identity.host_id
    }

    /// Archives the settled tasks older than the policy's retention
    /// (`budgets.json` `retention` `hot_seconds` before `now`) to a pack
    /// under `<data-dir>/archive/` (`hcp-archive-<first seq>.tar`: a run
    /// that crashed writes the same name again) and prunes them
    /// ([`evidence::archive`]). `None` when the policy sets no retention.
    ///
    /// # Errors
    ///
    /// The archive's directory cannot be made, or the archive run fails
    /// (nothing is pruned then).
    pub fn archive_retained(
        &self,
        now: time::OffsetDateTime,
    ) -> Result<Option<evidence::archive::Archived>> {
        let Some(retention) = self.policy().set.budget_rules().retention else {
            return Ok(None);
        };
        let hot = i64::try_from(retention.hot_seconds.get()).unwrap_or(i64::MAX);
        let at = now
            .checked_sub(time::Duration::seconds(hot))
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        let before = hcp_contracts::timestamp::rfc3339(at);
        let dir = self.store.dir().join("archive");
        private_dir::create_private_dir(&dir)
            .with_context(|| format!("archive directory {}", dir.display()))?;
        let from = evidence::archive::hot_from(&self.store.db())?;
        let out = dir.join(format!("hcp-archive-{from:020}.tar"));
        evidence::archive::archive(&self.store, &self.identity.key, &before, &out).map(Some)
    }

    /// [`Host::archive_retained`] until nothing more is due (a run
    /// archives at most [`evidence::archive::MAX_RUN_RECEIPTS`] receipts),
    /// at most `runs` times; gives each run that archived.
    ///
    /// # Errors
    ///
    /// As [`Host::archive_retained`]; the runs before the failing one stay.
    pub fn archive_due(
        &self,
        now: time::OffsetDateTime,
        runs: usize,
    ) -> Result<Vec<evidence::archive::Archived>> {
        let mut out = Vec::new();
        for _ in 0..runs {
            match self.archive_retained(now)? {
                Some(done) if done.archive.is_some() => out.push(done),
                _ => break,
            }
        }
        Ok(out)
    }

    /// The host's Lamport clock (its last stored receipt's, or a larger one
    /// received): what answers carry (`x-hcp-lamport` over AMQP).
    pub fn lamport(&self) -> u64 {
        self.recorder.lamport()
    }

    /// Moves the host's clock past a clock a caller brought back from
    /// another host's answer: the receipts of what the caller asks next
    /// come after the other host's in every merged order.
    ///
    /// # Errors
    ///
    /// The clock is too far ahead of this host's
    /// ([`crate::evidence::ClockOutOfRange`]: never one at or below this
    /// host's own); the receipt writer stopped.
    pub fn observe_lamport(&self, remote: u64) -> Result<()> {
        self.recorder.observe_lamport(remote)
    }

    /// The session-token keys.
    pub fn tokens(&self) -> &TokenKeys {
        &self.tokens
    }

    /// The paths.
    pub fn paths(&self) -> &HostPaths {
        &self.paths
    }

    /// An installed version, from the cache (read on first use when
    /// another process installed it).
    ///
    /// # Errors
    ///
    /// The installed files are missing or do not match the registry.
    pub(crate) fn capability(&self, installed: &Installed) -> Result<Arc<Capability>> {
        self.capabilities.get(installed)
    }

    /// An installed capability's manifest (its component's digest checked
    /// against the registry's), with the granted directories its install
    /// recorded; from the host's cache, so the component is read and
    /// hashed once, not per call.
    ///
    /// # Errors
    ///
    /// The installed files are missing or do not match.
    pub fn manifest(&self, installed: &Installed) -> Result<Arc<hcp_contracts::Manifest>> {
        Ok(self.capability(installed)?.manifest.clone())
    }

    /// The lock of one `(caller_id, message_id)`.
    fn submit_lock(&self, caller: &str, message_id: &str) -> std::sync::MutexGuard<'_, ()> {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (caller, message_id).hash(&mut h);
        let i = usize::try_from(h.finish() % SUBMIT_STRIPES as u64).unwrap_or(0);
        self.submit_locks[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Installs a capability from its manifest without a bundle (local
    /// development and tests: recorded as unsigned, with a host-signed
    /// install receipt; see [`crate::install::install_manifest`]). Copies
    /// the manifest and component into the data directory so later edits
    /// of the source do not change what runs.
    ///
    /// # Errors
    ///
    /// The manifest is invalid, its imports exceed its grants, or that
    /// version is installed already.
    pub fn install_manifest(&self, manifest_path: &Path) -> Result<Installed> {
        let (installed, manifest) = crate::install::install_manifest(
            &self.store,
            &self.sandbox,
            &self.identity,
            manifest_path,
        )?;
        self.capabilities.insert(installed.clone(), manifest)?;
        Ok(installed)
    }
}
