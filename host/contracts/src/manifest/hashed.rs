//! A count of component hashings, for tests and diagnostics: a host reads
//! and hashes each installed component once when it installs it and once
//! when it starts, never per task.

use std::path::{Path, PathBuf};

/// How many times this process hashed the component at each path.
static HASHED: std::sync::Mutex<Option<std::collections::HashMap<PathBuf, u64>>> =
    std::sync::Mutex::new(None);

pub(super) fn count(path: &Path) {
    let mut hashed = HASHED.lock().unwrap_or_else(|e| e.into_inner());
    *hashed
        .get_or_insert_with(Default::default)
        .entry(path.to_path_buf())
        .or_default() += 1;
}

/// How many times this process has read and hashed a component file under
/// `dir` (every manifest load hashes its component once). For tests and
/// diagnostics: a host hashes each installed component once when it
/// installs it and once when it starts, never per task.
pub fn component_hashes(dir: &Path) -> u64 {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let hashed = HASHED.lock().unwrap_or_else(|e| e.into_inner());
    hashed.as_ref().map_or(0, |h| {
        h.iter()
            .filter(|(p, _)| p.starts_with(&dir))
            .map(|(_, n)| n)
            .sum()
    })
}
