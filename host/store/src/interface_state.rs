//! The `interface_state` table: the durable state host interfaces keep of
//! their own (the `wasi:keyvalue` buckets, ...), by interface, capability
//! name, space and key: the sandbox's [`hcp_sandbox::TaskStore`]
//! `state_*` calls (in `artifacts.rs`). The PEP has decided each call
//! before it gets here; this only reads and writes, each write committed
//! before it returns.

use super::{Store, now};
use hcp_sandbox::{StateSpace, StateUpdate, StateUsage, TaskStoreError};
use rusqlite::{OptionalExtension, params};

const WHERE_SPACE: &str = "interface = ?1 AND capability = ?2 AND space = ?3";

const UPSERT: &str = "INSERT INTO interface_state
     (interface, capability, space, key, value, updated_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
     ON CONFLICT (interface, capability, space, key)
     DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at";

impl Store {
    pub(super) fn state_value(
        &self,
        at: StateSpace<'_>,
        key: &str,
    ) -> rusqlite::Result<Option<Vec<u8>>> {
        self.db()
            .prepare_cached(&format!(
                "SELECT value FROM interface_state WHERE {WHERE_SPACE} AND key = ?4"
            ))?
            .query_row(params![at.interface, at.capability, at.space, key], |r| {
                r.get(0)
            })
            .optional()
    }

    pub(super) fn state_put(
        &self,
        at: StateSpace<'_>,
        key: &str,
        value: &[u8],
    ) -> rusqlite::Result<()> {
        self.db().prepare_cached(UPSERT)?.execute(params![
            at.interface,
            at.capability,
            at.space,
            key,
            value,
            now()
        ])?;
        Ok(())
    }

    pub(super) fn state_remove(&self, at: StateSpace<'_>, key: &str) -> rusqlite::Result<()> {
        self.db()
            .prepare_cached(&format!(
                "DELETE FROM interface_state WHERE {WHERE_SPACE} AND key = ?4"
            ))?
            .execute(params![at.interface, at.capability, at.space, key])?;
        Ok(())
    }

    pub(super) fn state_page(
        &self,
        at: StateSpace<'_>,
        offset: u64,
        limit: u64,
    ) -> rusqlite::Result<Vec<String>> {
        let db = self.db();
        let mut select = db.prepare_cached(&format!(
            "SELECT key FROM interface_state WHERE {WHERE_SPACE}
             ORDER BY key LIMIT ?4 OFFSET ?5"
        ))?;
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        select
            .query_map(
                params![
                    at.interface,
                    at.capability,
                    at.space,
                    int(limit),
                    int(offset)
                ],
                |r| r.get(0),
            )?
            .collect()
    }

    pub(super) fn state_held(&self, at: StateSpace<'_>, key: &str) -> rusqlite::Result<StateUsage> {
        let db = self.db();
        let (keys, bytes): (i64, i64) = db
            .prepare_cached(&format!(
                "SELECT count(*), coalesce(sum(length(CAST(key AS BLOB)) + length(value)), 0)
                 FROM interface_state WHERE {WHERE_SPACE}"
            ))?
            .query_row(params![at.interface, at.capability, at.space], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let entry: Option<i64> = db
            .prepare_cached(&format!(
                "SELECT length(CAST(key AS BLOB)) + length(value) FROM interface_state
                 WHERE {WHERE_SPACE} AND key = ?4"
            ))?
            .query_row(params![at.interface, at.capability, at.space, key], |r| {
                r.get(0)
            })
            .optional()?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(StateUsage {
            keys: count(keys),
            bytes: count(bytes),
            entry: entry.map(count),
        })
    }

    /// Reads, updates and writes in one transaction.
    pub(super) fn state_replace(
        &self,
        at: StateSpace<'_>,
        key: &str,
        update: StateUpdate<'_>,
    ) -> Result<Vec<u8>, TaskStoreError> {
        let fault = |e: rusqlite::Error| TaskStoreError(e.to_string());
        let mut db = self.db();
        let tx = db.transaction().map_err(fault)?;
        let current: Option<Vec<u8>> = tx
            .prepare_cached(&format!(
                "SELECT value FROM interface_state WHERE {WHERE_SPACE} AND key = ?4"
            ))
            .and_then(|mut s| {
                s.query_row(params![at.interface, at.capability, at.space, key], |r| {
                    r.get(0)
                })
                .optional()
            })
            .map_err(fault)?;
        let next = update(current.as_deref())?;
        tx.prepare_cached(UPSERT)
            .and_then(|mut s| {
                s.execute(params![
                    at.interface,
                    at.capability,
                    at.space,
                    key,
                    next,
                    now()
                ])
            })
            .map_err(fault)?;
        tx.commit().map_err(fault)?;
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use hcp_sandbox::{MemoryStore, StateSpace, TaskStore, TaskStoreError};

    fn at<'a>(interface: &'a str, capability: &'a str, space: &'a str) -> StateSpace<'a> {
        StateSpace {
            interface,
            capability,
            space,
        }
    }

    /// Spaces of another capability, interface or name are apart; usage
    /// counts keys and bytes; an update is one step and its error leaves
    /// the value as it was.
    fn spaces_are_apart(s: &dyn TaskStore) {
        let a = at("wasi:keyvalue", "a", "b");
        s.state_set(a, "k", b"one").expect("set");
        s.state_set(at("wasi:keyvalue", "other", "b"), "k", b"two")
            .expect("set");
        s.state_set(at("other:iface", "a", "b"), "k", b"three")
            .expect("set");
        s.state_set(at("wasi:keyvalue", "a", "c"), "k", b"four")
            .expect("set");
        let add = |by: u8| {
            move |v: Option<&[u8]>| -> Result<Vec<u8>, TaskStoreError> {
                let mut v = v.map_or_else(Vec::new, <[u8]>::to_vec);
                v.push(by);
                Ok(v)
            }
        };
        assert_eq!(s.state_update(a, "n", &mut add(1)).expect("update"), [1]);
        assert_eq!(s.state_update(a, "n", &mut add(2)).expect("update"), [1, 2]);
        let refused = s.state_update(a, "n", &mut |_| Err(TaskStoreError("no".into())));
        assert_eq!(refused, Err(TaskStoreError("no".into())));
        assert_eq!(s.state_get(a, "n").expect("get"), Some(vec![1, 2]));
        assert_eq!(s.state_get(a, "k").expect("get"), Some(b"one".to_vec()));
        let u = s.state_usage(a, "k").expect("usage");
        assert_eq!((u.keys, u.bytes, u.entry), (2, 4 + 3, Some(4)));
        assert_eq!(s.state_keys(a, 0, 10).expect("keys"), ["k", "n"]);
        assert_eq!(s.state_keys(a, 1, 10).expect("keys"), ["n"]);
        assert_eq!(s.state_keys(a, 0, 1).expect("keys"), ["k"]);
        s.state_delete(a, "k").expect("delete");
        assert_eq!(s.state_get(a, "k").expect("get"), None);
        for (space, value) in [
            (at("wasi:keyvalue", "other", "b"), "two"),
            (at("other:iface", "a", "b"), "three"),
            (at("wasi:keyvalue", "a", "c"), "four"),
        ] {
            assert_eq!(
                s.state_get(space, "k").expect("get"),
                Some(value.as_bytes().to_vec())
            );
        }
    }

    #[test]
    fn the_store_keeps_spaces_apart_and_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = Store::open(dir.path()).expect("open");
            spaces_are_apart(&s);
        }
        let s = Store::open(dir.path()).expect("reopen");
        let a = at("wasi:keyvalue", "a", "b");
        assert_eq!(s.state_get(a, "n").expect("get"), Some(vec![1, 2]));
    }

    #[test]
    fn the_memory_store_keeps_spaces_apart() {
        spaces_are_apart(&MemoryStore::new());
    }
}
