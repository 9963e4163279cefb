//! Where the hot log starts after archiving (the leaf the readers of the
//! store and the archive share, so that neither imports the other): the
//! last archive's end, whether an archive ended at a size, and whether a
//! stored unit's body was pruned. Archiving itself: [`crate::archive`].

use anyhow::Result;
use rusqlite::{Connection, OptionalExtension as _, params};

/// Where the hot log starts: the last archive's end, 0 without one.
///
/// # Errors
///
/// The database fails.
pub fn hot_from(db: &Connection) -> Result<u64> {
    let end: Option<i64> = db
        .prepare_cached("SELECT MAX(tree_size) FROM evidence_archives")?
        .query_row([], |r| r.get(0))?;
    Ok(end.map(u64::try_from).transpose()?.unwrap_or(0))
}

/// Whether an archive ended at `tree_size`.
pub(crate) fn is_anchor(db: &Connection, tree_size: u64) -> Result<bool> {
    Ok(db
        .prepare_cached("SELECT 1 FROM evidence_archives WHERE tree_size = ?1")?
        .query_row(params![i64::try_from(tree_size)?], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether a stored unit's receipts were archived (its body pruned).
pub(crate) fn is_pruned(data: &[u8]) -> bool {
    data.is_empty()
}
