//! The `resources` table: which session holds a shared resource (an
//! instrument) while it runs. One holder at a time.

use super::{Store, now};
use anyhow::Result;
use rusqlite::{OptionalExtension, params};

impl Store {
    /// Claims a shared resource (an instrument) for a session; `false` when
    /// another session holds it.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn acquire_resource(&self, name: &str, session_id: &str) -> Result<bool> {
        Ok(self.db().prepare_cached(
            "INSERT INTO resources (name, session_id, since) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING")?.execute(
            params![name, session_id, now()],
        )? == 1)
    }

    /// Releases a resource the session holds.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn release_resource(&self, name: &str, session_id: &str) -> Result<()> {
        self.db()
            .prepare_cached("DELETE FROM resources WHERE name = ?1 AND session_id = ?2")?
            .execute(params![name, session_id])?;
        Ok(())
    }

    /// Which session holds a resource.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn resource_holder(&self, name: &str) -> Result<Option<String>> {
        Ok(self
            .db()
            .prepare_cached("SELECT session_id FROM resources WHERE name = ?1")?
            .query_row(params![name], |r| r.get(0))
            .optional()?)
    }

    /// Releases every resource a session holds (after a crash).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn release_session_resources(&self, session_id: &str) -> Result<()> {
        self.db()
            .prepare_cached("DELETE FROM resources WHERE session_id = ?1")?
            .execute(params![session_id])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_has_one_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        assert!(store.acquire_resource("cvd-rig", "s1").expect("acquire"));
        assert!(!store.acquire_resource("cvd-rig", "s2").expect("acquire"));
        assert_eq!(
            store.resource_holder("cvd-rig").expect("holder").as_deref(),
            Some("s1")
        );
        store.release_resource("cvd-rig", "s2").expect("release");
        assert!(!store.acquire_resource("cvd-rig", "s2").expect("still held"));
        store.release_resource("cvd-rig", "s1").expect("release");
        assert!(store.acquire_resource("cvd-rig", "s2").expect("free"));
    }
}
