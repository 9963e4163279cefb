//! `wasi:keyvalue` (store and atomics, the 0.2 draft vendored in
//! `wit/deps/keyvalue`): a capability's own buckets, kept in the host's
//! store across tasks and restarts, as interface state
//! ([`crate::TaskStore::state_get`] and the other `state_*` calls, one
//! [`StateSpace`] per bucket).
//!
//! `open(identifier)` opens the capability's bucket of that name; the
//! space names the capability too, so buckets of different capabilities
//! never meet. Every call (open included) is one
//! operation the PEP decides, with its receipt, before the store is
//! touched: the bucket must be in `grants.keyvalue` and read-write for a
//! write, and a write is decided on what the bucket would hold after it
//! (`limits.kv_value_bytes`, `kv_keys`, `kv_bytes`). A denial reaches the
//! guest as `access-denied` (outside the granted surface) or
//! `other("denied (REASON): ...")`; a store fault as `other`.
//!
//! Tasks of one capability run concurrently: the limits are decided on
//! the bucket as read just before the write, so two tasks writing the same
//! bucket at the same moment may together pass a limit by one write each.
//! `increment` itself is one step in the store.

use super::context::HcpCtx;
use super::unit::GrantedBy;
use crate::pep::{Call, Op};
use crate::store::{StateSpace, TaskStoreError};
use hcp_contracts::interfaces::Grant;
use wasmtime::component::{HasData, Resource, ResourceTable};

wasmtime::component::bindgen!({
    path: "../../wit/deps/keyvalue",
    world: "wasi:keyvalue/store-atomics",
    imports: { default: async | trappable },
    with: { "wasi:keyvalue/store.bucket": Bucket },
});

use wasi::keyvalue::{atomics, store};

/// Keys `list-keys` returns at once.
const PAGE: u64 = 256;

/// An open bucket: its granted name.
#[derive(Debug)]
#[allow(unreachable_pub, reason = "the generated bindings re-export it")]
pub struct Bucket {
    name: String,
}

/// What the interface works on: the task's hcp state and its resources.
pub(crate) struct KvView<'a> {
    hcp: &'a mut HcpCtx,
    table: &'a mut ResourceTable,
}

struct KvData;

impl HasData for KvData {
    type Data<'a> = KvView<'a>;
}

type Answer<T> = wasmtime::Result<Result<T, store::Error>>;

impl KvView<'_> {
    /// The store's space of the capability's bucket `bucket`.
    fn space<'a>(&'a self, bucket: &'a str) -> StateSpace<'a> {
        StateSpace {
            interface: INTERFACE,
            capability: &self.hcp.meta.capability,
            space: bucket,
        }
    }

    fn bucket(&self, b: &Resource<Bucket>) -> wasmtime::Result<String> {
        Ok(self.table.get(b)?.name.clone())
    }

    /// Asks the PEP; `Err` is what the guest is told.
    fn decide(&mut self, call: &Call<'_>) -> Result<(), store::Error> {
        self.hcp.host_calls += 1;
        match self.hcp.pep.check(call) {
            Ok(signals) => {
                self.hcp.note_signals(call.op, signals);
                Ok(())
            }
            Err(denial) => {
                self.hcp.note_denial(&denial);
                Err(if denial.reason == "DENY_TOOL_NOT_FOUND" {
                    store::Error::AccessDenied
                } else {
                    store::Error::Other(format!("denied ({}): {}", denial.reason, denial.message))
                })
            }
        }
    }

    /// Decides a write of `bytes` bytes to `key`, on what the bucket would
    /// hold after it.
    fn decide_write(
        &mut self,
        op: Op,
        bucket: &str,
        key: &str,
        bytes: u64,
    ) -> Result<(), store::Error> {
        let usage = self
            .hcp
            .store
            .state_usage(self.space(bucket), key)
            .map_err(fault)?;
        let entry = key.len() as u64 + bytes;
        let (keys, total) = match usage.entry {
            Some(old) => (usage.keys, usage.bytes.saturating_sub(old) + entry),
            None => (usage.keys + 1, usage.bytes + entry),
        };
        self.decide(&Call::kv(op, bucket, key, bytes, keys, total))
    }
}

/// The row of the table this unit implements, and the interface of its
/// state in the store.
const INTERFACE: &str = "wasi:keyvalue";

/// The value after `increment` adds `delta` to `current` (absent: 0).
///
/// # Errors
///
/// `current` is not a decimal `u64`, or the sum overflows.
fn incremented(current: Option<&[u8]>, delta: u64) -> Result<u64, TaskStoreError> {
    let now = match current {
        None => 0,
        Some(v) => std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| TaskStoreError("the value is not a decimal u64".into()))?,
    };
    now.checked_add(delta)
        .ok_or_else(|| TaskStoreError("the increment overflows u64".into()))
}

fn fault(e: TaskStoreError) -> store::Error {
    store::Error::Other(format!("the key-value store failed: {e}"))
}

impl store::Host for KvView<'_> {
    async fn open(&mut self, identifier: String) -> Answer<Resource<Bucket>> {
        if let Err(e) = self.decide(&Call::kv(Op::KvOpen, &identifier, "", 0, 0, 0)) {
            return Ok(Err(e));
        }
        Ok(Ok(self.table.push(Bucket { name: identifier })?))
    }
}

impl store::HostBucket for KvView<'_> {
    async fn get(&mut self, b: Resource<Bucket>, key: String) -> Answer<Option<Vec<u8>>> {
        let bucket = self.bucket(&b)?;
        if let Err(e) = self.decide(&Call::kv(Op::KvGet, &bucket, &key, 0, 0, 0)) {
            return Ok(Err(e));
        }
        Ok(self
            .hcp
            .store
            .state_get(self.space(&bucket), &key)
            .map_err(fault))
    }

    async fn set(&mut self, b: Resource<Bucket>, key: String, value: Vec<u8>) -> Answer<()> {
        let bucket = self.bucket(&b)?;
        if let Err(e) = self.decide_write(Op::KvSet, &bucket, &key, value.len() as u64) {
            return Ok(Err(e));
        }
        Ok(self
            .hcp
            .store
            .state_set(self.space(&bucket), &key, &value)
            .map_err(fault))
    }

    async fn delete(&mut self, b: Resource<Bucket>, key: String) -> Answer<()> {
        let bucket = self.bucket(&b)?;
        if let Err(e) = self.decide(&Call::kv(Op::KvDelete, &bucket, &key, 0, 0, 0)) {
            return Ok(Err(e));
        }
        Ok(self
            .hcp
            .store
            .state_delete(self.space(&bucket), &key)
            .map_err(fault))
    }

    async fn exists(&mut self, b: Resource<Bucket>, key: String) -> Answer<bool> {
        let bucket = self.bucket(&b)?;
        if let Err(e) = self.decide(&Call::kv(Op::KvExists, &bucket, &key, 0, 0, 0)) {
            return Ok(Err(e));
        }
        Ok(self
            .hcp
            .store
            .state_get(self.space(&bucket), &key)
            .map(|v| v.is_some())
            .map_err(fault))
    }

    async fn list_keys(
        &mut self,
        b: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> Answer<store::KeyResponse> {
        let bucket = self.bucket(&b)?;
        if let Err(e) = self.decide(&Call::kv(Op::KvListKeys, &bucket, "", 0, 0, 0)) {
            return Ok(Err(e));
        }
        let offset = cursor.unwrap_or(0);
        // One more than a page: whether there is a next one.
        let mut keys = match self
            .hcp
            .store
            .state_keys(self.space(&bucket), offset, PAGE + 1)
        {
            Ok(keys) => keys,
            Err(e) => return Ok(Err(fault(e))),
        };
        let cursor = (keys.len() as u64 > PAGE).then(|| offset.saturating_add(PAGE));
        keys.truncate(PAGE as usize);
        Ok(Ok(store::KeyResponse { keys, cursor }))
    }

    async fn drop(&mut self, b: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(b)?;
        Ok(())
    }
}

impl atomics::Host for KvView<'_> {
    async fn increment(&mut self, b: Resource<Bucket>, key: String, delta: u64) -> Answer<u64> {
        let bucket = self.bucket(&b)?;
        // The value it would write, to decide on its size.
        let current = match self.hcp.store.state_get(self.space(&bucket), &key) {
            Ok(v) => v,
            Err(e) => return Ok(Err(fault(e))),
        };
        let next = incremented(current.as_deref(), delta);
        // Decided even when it cannot be done (the value is not a number,
        // the sum overflows), so that every call has its receipt: on the
        // value as it stays then.
        let bytes = match &next {
            Ok(n) => n.to_string().len() as u64,
            Err(_) => current.as_ref().map_or(0, |v| v.len() as u64),
        };
        if let Err(e) = self.decide_write(Op::KvIncrement, &bucket, &key, bytes) {
            return Ok(Err(e));
        }
        if let Err(e) = next {
            return Ok(Err(store::Error::Other(e.0)));
        }
        // Read, add and write again in one step of the store.
        let mut add = |v: Option<&[u8]>| incremented(v, delta).map(|n| n.to_string().into_bytes());
        Ok(self
            .hcp
            .store
            .state_update(self.space(&bucket), &key, &mut add)
            .and_then(|v| incremented(Some(&v), 0))
            .map_err(|e| store::Error::Other(e.0)))
    }
}

fn view(s: &mut crate::task::TaskState) -> KvView<'_> {
    KvView {
        hcp: &mut s.hcp,
        table: &mut s.table,
    }
}

/// The sandbox unit of `wasi:keyvalue`: audited and linked only with
/// `grants.keyvalue`.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: INTERFACE,
    audit: |_, grants| {
        if Grant::Keyvalue.is_granted(grants) {
            Ok(GrantedBy::Grant(Grant::Keyvalue))
        } else {
            Err("no bucket is granted (grants.keyvalue)".into())
        }
    },
    link: |l, _, grants| {
        if Grant::Keyvalue.is_granted(grants) {
            store::add_to_linker::<crate::task::TaskState, KvData>(l, view)?;
            atomics::add_to_linker::<crate::task::TaskState, KvData>(l, view)?;
        }
        Ok(())
    },
};

#[cfg(test)]
mod tests {
    use super::incremented;

    #[test]
    fn increments_are_decimal_and_do_not_overflow() {
        assert_eq!(incremented(None, 5), Ok(5));
        assert_eq!(incremented(Some(b"7"), 2), Ok(9));
        assert!(incremented(Some(b"seven"), 1).is_err());
        assert!(incremented(Some(u64::MAX.to_string().as_bytes()), 1).is_err());
    }
}
