//! The `checkpoints` table: the state a session saved, by id.

use super::{Store, now};
use hcp_sandbox::TaskMeta;
use rusqlite::{OptionalExtension, params};

impl Store {
    /// Saves a checkpoint of `task`'s session.
    ///
    /// # Errors
    ///
    /// The id is taken, or the database fails.
    pub(super) fn insert_checkpoint(
        &self,
        task: &TaskMeta,
        id: &str,
        label: &str,
        state: &[u8],
    ) -> rusqlite::Result<()> {
        self.db()
            .prepare_cached(
                "INSERT INTO checkpoints (session_id, id, task_id, label, state, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                task.session_id,
                id,
                task.task_id,
                label,
                state,
                now()
            ])?;
        Ok(())
    }

    /// A saved checkpoint's state.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub(super) fn checkpoint_state(
        &self,
        session_id: &str,
        id: &str,
    ) -> rusqlite::Result<Option<Vec<u8>>> {
        self.db()
            .prepare_cached("SELECT state FROM checkpoints WHERE session_id = ?1 AND id = ?2")?
            .query_row(params![session_id, id], |r| r.get(0))
            .optional()
    }

    /// The last checkpoint a session saved.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn last_checkpoint(&self, session_id: &str) -> anyhow::Result<Option<String>> {
        Ok(self
            .db()
            .prepare_cached(
                "SELECT id FROM checkpoints WHERE session_id = ?1 ORDER BY id DESC LIMIT 1",
            )?
            .query_row(params![session_id], |r| r.get(0))
            .optional()?)
    }
}
