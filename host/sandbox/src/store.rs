//! Where a task's artifacts and checkpoints go: a trait the embedder
//! implements (the `hcp` crate stores them in SQLite and content-addressed
//! files), and an in-memory implementation for tests and one-shot runs.

use hcp_contracts::jcs::sha256_bytes_tagged;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// What the host knows of the task a call belongs to.
#[derive(Debug, Clone)]
pub struct TaskMeta {
    /// Host-assigned task id.
    pub task_id: String,
    /// Session id.
    pub session_id: String,
    /// Capability name.
    pub capability: String,
    /// Capability version.
    pub version: String,
    /// The checkpoint this task resumes from.
    pub resume: Option<ResumeFrom>,
    /// The task's data classification: T3 and T4 artifacts are encrypted at
    /// rest by the store.
    pub data_classification: hcp_contracts::DataClass,
}

/// A checkpoint of an earlier session to resume from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeFrom {
    /// Session of the failed task.
    pub session_id: String,
    /// The checkpoint.
    pub checkpoint: String,
}

/// An artifact as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoredArtifact {
    /// Name within the task.
    pub name: String,
    /// Media type.
    pub mime_type: String,
    /// `hcp://<session>/artifacts/<name>`.
    pub uri: String,
    /// Size.
    pub size_bytes: u64,
    /// `sha256:<hex>`.
    pub checksum: String,
}

impl StoredArtifact {
    /// Describes `content` as artifact `name` of `session`.
    pub fn describe(session_id: &str, name: &str, mime_type: &str, content: &[u8]) -> Self {
        Self {
            name: name.to_owned(),
            mime_type: mime_type.to_owned(),
            uri: format!("hcp://{session_id}/artifacts/{name}"),
            size_bytes: content.len() as u64,
            checksum: sha256_bytes_tagged(content),
        }
    }
}

/// Why a task's artifact or checkpoint could not be stored or read. Its
/// text is what the guest is told, so it names no host path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TaskStoreError(pub String);

/// Durable storage of artifacts and checkpoints.
///
/// Implementations must be idempotent per (session, name/id) and must not
/// return before the data is durable: the guest treats an `Ok` as stored.
pub trait TaskStore: Send + Sync + 'static {
    /// Stores an artifact; names are already checked.
    ///
    /// # Errors
    ///
    /// A message for the guest (no host paths).
    fn put_artifact(
        &self,
        task: &TaskMeta,
        name: &str,
        mime_type: &str,
        content: &[u8],
    ) -> Result<StoredArtifact, TaskStoreError>;

    /// Saves checkpoint `id` of the task's session.
    ///
    /// # Errors
    ///
    /// A message for the guest.
    fn save_checkpoint(
        &self,
        task: &TaskMeta,
        id: &str,
        label: &str,
        state: &[u8],
    ) -> Result<(), TaskStoreError>;

    /// Loads checkpoint `id` of `session_id`.
    ///
    /// # Errors
    ///
    /// A message for the guest.
    fn load_checkpoint(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<Vec<u8>>, TaskStoreError>;

    /// The operator's secret `name` of `interface` for `capability` (a
    /// name, without version), which the operator's policy marks secret
    /// (`hcp_policy::operator`), with its keyed digest; `None` when the
    /// operator set none (the default: a store without secrets).
    ///
    /// # Errors
    ///
    /// A message for the guest (no host paths, never the value).
    fn operator_secret(
        &self,
        _interface: &str,
        _capability: &str,
        _name: &str,
    ) -> Result<Option<OperatorSecret>, TaskStoreError> {
        Ok(None)
    }

    // The durable state a host interface keeps of its own (its sandbox
    // unit asks the PEP before each call; these only read and write), in
    // spaces apart by interface, capability and space name
    // ([`StateSpace`]). A store without it answers every call with an
    // error.

    /// The value of `key` in `at`.
    ///
    /// # Errors
    ///
    /// A message for the guest.
    fn state_get(&self, at: StateSpace<'_>, key: &str) -> Result<Option<Vec<u8>>, TaskStoreError> {
        let _ = (at, key);
        Err(no_state())
    }

    /// Sets `key` to `value` in `at`, durably.
    ///
    /// # Errors
    ///
    /// A message for the guest.
    fn state_set(&self, at: StateSpace<'_>, key: &str, value: &[u8]) -> Result<(), TaskStoreError> {
        let _ = (at, key, value);
        Err(no_state())
    }

    /// Removes `key` from `at` (nothing when absent).
    ///
    /// # Errors
    ///
    /// A message for the guest.
    fn state_delete(&self, at: StateSpace<'_>, key: &str) -> Result<(), TaskStoreError> {
        let _ = (at, key);
        Err(no_state())
    }

    /// Up to `limit` keys of `at` in byte order, from the `offset`-th.
    ///
    /// # Errors
    ///
    /// A message for the guest.
    fn state_keys(
        &self,
        at: StateSpace<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, TaskStoreError> {
        let _ = (at, offset, limit);
        Err(no_state())
    }

    /// What `at` holds, and the entry of `key` in it.
    ///
    /// # Errors
    ///
    /// A message for the guest.
    fn state_usage(&self, at: StateSpace<'_>, key: &str) -> Result<StateUsage, TaskStoreError> {
        let _ = (at, key);
        Err(no_state())
    }

    /// Replaces the value of `key` in `at` by what `update` makes of it
    /// (`None`: absent), in one step no other call interleaves with, and
    /// returns the new value.
    ///
    /// # Errors
    ///
    /// `update`'s error, or a message for the guest.
    fn state_update(
        &self,
        at: StateSpace<'_>,
        key: &str,
        update: StateUpdate<'_>,
    ) -> Result<Vec<u8>, TaskStoreError> {
        let _ = (at, key, update);
        Err(no_state())
    }
}

fn no_state() -> TaskStoreError {
    TaskStoreError("this host keeps no interface state".into())
}

/// A space of durable interface state: the entries one capability keeps
/// through one interface under one name (a `wasi:keyvalue` bucket).
/// Spaces never meet: another interface, capability or name is another
/// space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StateSpace<'a> {
    /// The interface, as its row of the table names it (`wasi:keyvalue`).
    pub interface: &'a str,
    /// The capability's name (without version).
    pub capability: &'a str,
    /// The space's name within (a bucket).
    pub space: &'a str,
}

/// How [`TaskStore::state_update`] makes the new value of an entry from
/// the one it has (`None`: absent).
pub type StateUpdate<'a> = &'a mut dyn FnMut(Option<&[u8]>) -> Result<Vec<u8>, TaskStoreError>;

/// What a [`StateSpace`] holds ([`TaskStore::state_usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateUsage {
    /// Keys.
    pub keys: u64,
    /// Bytes of its keys and values.
    pub bytes: u64,
    /// Bytes of the entry of the key asked about (key and value), if any.
    pub entry: Option<u64>,
}

/// An operator's secret, opened for a task that may read it.
#[derive(Clone, PartialEq, Eq)]
pub struct OperatorSecret {
    /// The value, in clear: for the guest only.
    pub value: String,
    /// Its keyed digest (`[withheld: hmac-sha256:…]`): what receipts
    /// record.
    pub digest: String,
}

impl std::fmt::Debug for OperatorSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorSecret")
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// (session id, artifact name or checkpoint id).
type Key = (String, String);

/// (interface, capability, space, key) of an entry of interface state.
type StateKey = (String, String, String, String);

/// Keeps everything in memory: for tests and benchmarks.
#[derive(Debug, Default)]
pub struct MemoryStore {
    artifacts: Mutex<BTreeMap<Key, (StoredArtifact, Vec<u8>)>>,
    /// Checkpoint label and state.
    checkpoints: Mutex<BTreeMap<Key, (String, Vec<u8>)>>,
    /// Interface state.
    state: Mutex<BTreeMap<StateKey, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The content of an artifact, by session and name.
    pub fn artifact(&self, session_id: &str, name: &str) -> Option<Vec<u8>> {
        self.artifacts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(session_id.to_owned(), name.to_owned()))
            .map(|(_, bytes)| bytes.clone())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, BTreeMap<StateKey, Vec<u8>>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn state_key(at: StateSpace<'_>, key: &str) -> StateKey {
    (
        at.interface.to_owned(),
        at.capability.to_owned(),
        at.space.to_owned(),
        key.to_owned(),
    )
}

/// Whether the entry `k` is in the space `at`.
fn in_space(k: &StateKey, at: StateSpace<'_>) -> bool {
    k.0 == at.interface && k.1 == at.capability && k.2 == at.space
}

impl TaskStore for MemoryStore {
    fn put_artifact(
        &self,
        task: &TaskMeta,
        name: &str,
        mime_type: &str,
        content: &[u8],
    ) -> Result<StoredArtifact, TaskStoreError> {
        let stored = StoredArtifact::describe(&task.session_id, name, mime_type, content);
        self.artifacts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                (task.session_id.clone(), name.to_owned()),
                (stored.clone(), content.to_vec()),
            );
        Ok(stored)
    }

    fn save_checkpoint(
        &self,
        task: &TaskMeta,
        id: &str,
        label: &str,
        state: &[u8],
    ) -> Result<(), TaskStoreError> {
        self.checkpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                (task.session_id.clone(), id.to_owned()),
                (label.to_owned(), state.to_vec()),
            );
        Ok(())
    }

    fn load_checkpoint(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<Vec<u8>>, TaskStoreError> {
        Ok(self
            .checkpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(session_id.to_owned(), id.to_owned()))
            .map(|(_, s)| s.clone()))
    }

    fn state_get(&self, at: StateSpace<'_>, key: &str) -> Result<Option<Vec<u8>>, TaskStoreError> {
        Ok(self.state().get(&state_key(at, key)).cloned())
    }

    fn state_set(&self, at: StateSpace<'_>, key: &str, value: &[u8]) -> Result<(), TaskStoreError> {
        self.state().insert(state_key(at, key), value.to_vec());
        Ok(())
    }

    fn state_delete(&self, at: StateSpace<'_>, key: &str) -> Result<(), TaskStoreError> {
        self.state().remove(&state_key(at, key));
        Ok(())
    }

    fn state_keys(
        &self,
        at: StateSpace<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, TaskStoreError> {
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        Ok(self
            .state()
            .keys()
            .filter(|k| in_space(k, at))
            .skip(skip)
            .take(take)
            .map(|k| k.3.clone())
            .collect())
    }

    fn state_usage(&self, at: StateSpace<'_>, key: &str) -> Result<StateUsage, TaskStoreError> {
        let mut usage = StateUsage::default();
        for (k, v) in self.state().iter().filter(|(k, _)| in_space(k, at)) {
            let bytes = (k.3.len() + v.len()) as u64;
            usage.keys += 1;
            usage.bytes += bytes;
            if k.3 == key {
                usage.entry = Some(bytes);
            }
        }
        Ok(usage)
    }

    fn state_update(
        &self,
        at: StateSpace<'_>,
        key: &str,
        update: StateUpdate<'_>,
    ) -> Result<Vec<u8>, TaskStoreError> {
        let mut state = self.state();
        let k = state_key(at, key);
        let new = update(state.get(&k).map(Vec::as_slice))?;
        state.insert(k, new.clone());
        Ok(new)
    }
}
