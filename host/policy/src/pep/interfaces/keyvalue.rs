//! The PEP's rules of `wasi:keyvalue`: every call names a bucket of
//! `grants.keyvalue` (the target), writes only a read-write one, keys are
//! non-empty and bounded, and a write leaves the bucket within
//! `limits.kv_value_bytes`, `limits.kv_keys` and `limits.kv_bytes`.
//!
//! A bucket not granted and a write to a read-only bucket are denied as a
//! call outside the granted surface (`DENY_TOOL_NOT_FOUND`), as a path
//! outside `grants.filesystem` or a write into a read-only directory is; a
//! write over a limit is `BUDGET_EXCEEDED`.

use super::{Args, Call, InterfaceRules, OwnArgs, de, malformed};
use crate::pep::cut::{Cutter, Text};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Counters, Decision, args_invalid, exceeded, not_found};
use hcp_contracts::interfaces::Grant;
use hcp_contracts::interfaces::Op;
use hcp_contracts::manifest::Access;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The longest key, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// `kv.*`: the target is the bucket's name. What a write leaves in the
/// bucket is worked out by the host from the store before deciding (as a
/// lookup's resolution), so that the limits are decided on facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvArgs<'a> {
    /// Bytes of the value written (`kv.set`, `kv.increment`); 0 otherwise.
    pub bytes: u64,
    /// The key; empty for `kv.open` and `kv.list_keys`.
    pub key: Text<'a>,
    /// Keys in the bucket once a write is done; 0 for the other calls.
    pub keys: u64,
    /// Bytes of the bucket (keys and values) once a write is done; 0 for
    /// the other calls.
    pub total: u64,
}

impl<'a> Call<'a> {
    /// `kv.*` on `bucket`: `key` (empty for `kv.open`, `kv.list_keys`);
    /// for a write, the value's `bytes` and the bucket's `keys` and
    /// `total` bytes once it is done.
    pub fn kv(op: Op, bucket: &'a str, key: &'a str, bytes: u64, keys: u64, total: u64) -> Self {
        Self {
            op,
            target: Cow::Borrowed(bucket),
            args: Args::Keyvalue(KvArgs {
                bytes,
                key: Cow::Borrowed(key),
                keys,
                total,
            }),
        }
    }
}

impl OwnArgs for KvArgs<'_> {
    type Static = KvArgs<'static>;

    fn into_static(self) -> KvArgs<'static> {
        KvArgs {
            bytes: self.bytes,
            key: Cow::Owned(self.key.into_owned()),
            keys: self.keys,
            total: self.total,
        }
    }

    /// The key and the value written.
    fn budget_bytes(&self, _target: &str) -> u64 {
        self.key.len() as u64 + self.bytes
    }

    fn text_len(&self) -> usize {
        self.key.len()
    }

    fn cut(&self, c: &mut Cutter) -> KvArgs<'static> {
        KvArgs {
            bytes: self.bytes,
            key: c.cut(&self.key),
            keys: self.keys,
            total: self.total,
        }
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        s.scan(&self.key, Exposure::NAME, signals);
    }
}

/// The call's arguments, when they are `kv.*`'s.
fn own<'c>(call: &'c Call<'_>) -> Option<&'c KvArgs<'c>> {
    match &call.args {
        Args::Keyvalue(a) => Some(a),
        _ => None,
    }
}

/// `kv.*`.
#[derive(Debug)]
pub(crate) struct Keyvalue;

/// Whether `op` changes the bucket.
fn writes(op: Op) -> bool {
    matches!(op, Op::KvSet | Op::KvDelete | Op::KvIncrement)
}

impl InterfaceRules for Keyvalue {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        if own(call).is_none() {
            return malformed(call);
        }
        let bucket = call.target.as_ref();
        let granted = scope.facts.surface.table.item(Grant::Keyvalue, bucket);
        match granted.and_then(|b| b.access) {
            None => not_found(format!(
                "{} {:?}: not a bucket of grants.keyvalue",
                call.op,
                bucket.escape_debug().to_string()
            )),
            Some(Access::ReadOnly) if writes(call.op) => not_found(format!(
                "{} {bucket:?}: the bucket is granted read-only",
                call.op
            )),
            Some(_) => Ok(()),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        let Some(a) = own(call) else {
            return Ok(());
        };
        let keyed = !matches!(call.op, Op::KvOpen | Op::KvListKeys);
        if keyed && a.key.is_empty() {
            return args_invalid(format!("{}: the key is empty", call.op));
        }
        if a.key.len() > MAX_KEY_BYTES {
            return args_invalid(format!(
                "{}: a key of {} bytes is over {MAX_KEY_BYTES}",
                call.op,
                a.key.len()
            ));
        }
        Ok(())
    }

    fn limits(&self, scope: &Scope, _: &Counters, call: &Call<'_>) -> Result<(), Decision> {
        let Some(a) = own(call) else {
            return Ok(());
        };
        if !matches!(call.op, Op::KvSet | Op::KvIncrement) {
            return Ok(());
        }
        let limit = |name| scope.facts.limits.table_limit(name);
        let (Some(value_bytes), Some(keys), Some(bytes)) =
            (limit("kv_value_bytes"), limit("kv_keys"), limit("kv_bytes"))
        else {
            // Granted buckets come with their limits (`CallLimits::of`):
            // facts without them decide nothing written.
            return exceeded(format!(
                "{} {:?}: the session has no key-value limits",
                call.op, call.target
            ));
        };
        let bucket = &call.target;
        if a.bytes > value_bytes {
            return exceeded(format!(
                "{} {bucket:?}: a value of {} bytes is over limits.kv_value_bytes ({value_bytes})",
                call.op, a.bytes
            ));
        }
        if a.keys > keys {
            return exceeded(format!(
                "{} {bucket:?}: {} keys would be over limits.kv_keys ({keys})",
                call.op, a.keys
            ));
        }
        if a.total > bytes {
            return exceeded(format!(
                "{} {bucket:?}: {} bytes in the bucket would be over limits.kv_bytes ({bytes})",
                call.op, a.total
            ));
        }
        Ok(())
    }

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(Args::Keyvalue(de(op, raw)?))
    }
}
