//! Development data directories: the only data directories in which an
//! install may replace a version that is installed already.
//!
//! `hcp dev` reinstalls the capability it builds under the same version
//! after every change. On an ordinary host that is refused, as before: a
//! version, once installed, is what its install receipt says it is, and
//! tasks, receipts and evidence packs name it. A development data
//! directory is one that holds [`MARKER`], a file that only
//! [`make`] writes, and only into a directory that is new or empty: a
//! directory that already holds a host's state (a database, keys,
//! installed capabilities) is never turned into one. An install that asks
//! to replace ([`super::InstallOptions::replace_same_version`]) is refused
//! unless its data directory holds the marker, so neither `hcp install`
//! (which has no flag for it) nor a mistaken `--data-dir` can replace a
//! version on a production host.
//!
//! # Ambient authority
//!
//! Reads the marker; [`make`] creates the directory and writes it.

use anyhow::{Context as _, Result};
use std::path::Path;

/// The file that makes a data directory a development one.
pub const MARKER: &str = "hcp-dev.json";

/// Whether `data_dir` is a development data directory (it holds a
/// regular [`MARKER`] file, not a link to one).
pub fn is_development(data_dir: &Path) -> bool {
    std::fs::symlink_metadata(data_dir.join(MARKER)).is_ok_and(|m| m.file_type().is_file())
}

/// Makes `data_dir` a development data directory for the project in
/// `project`: creates it if it is missing and writes [`MARKER`] into it.
/// Does nothing when it is one already.
///
/// # Errors
///
/// `data_dir` exists, is not a development data directory and is not
/// empty (a host's data directory is never turned into one), or it cannot
/// be created or written.
pub fn make(data_dir: &Path, project: &Path) -> Result<()> {
    if is_development(data_dir) {
        return Ok(());
    }
    if data_dir.exists() {
        let mut entries = std::fs::read_dir(data_dir)
            .with_context(|| format!("{}: not a directory", data_dir.display()))?;
        if entries.next().is_some() {
            anyhow::bail!(
                "{} is not a development data directory (it has no {MARKER}) and is not empty: \
                 hcp dev never turns a host's data directory into one, since there an install \
                 may replace the same version. Leave --data-dir out (the default is the \
                 project's target/hcp-dev/) or name a new directory",
                data_dir.display()
            );
        }
    }
    std::fs::create_dir_all(data_dir).with_context(|| format!("{}", data_dir.display()))?;
    let text = serde_json::to_string_pretty(&serde_json::json!({
        "purpose": "a development data directory made by hcp dev: an install here may \
                    replace a version installed already",
        "project": project.display().to_string(),
    }))?;
    let path = data_dir.join(MARKER);
    std::fs::write(&path, format!("{text}\n")).with_context(|| format!("{}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_new_or_empty_directory_becomes_a_development_one() {
        let root = tempfile::tempdir().expect("tempdir");
        let new = root.path().join("new");
        assert!(!is_development(&new));
        make(&new, root.path()).expect("a new directory");
        assert!(is_development(&new));
        // Again: nothing to do.
        make(&new, root.path()).expect("again");

        let empty = root.path().join("empty");
        std::fs::create_dir(&empty).expect("mkdir");
        make(&empty, root.path()).expect("an empty directory");
        assert!(is_development(&empty));

        let host = root.path().join("host");
        std::fs::create_dir(&host).expect("mkdir");
        std::fs::write(host.join("hcp.db"), b"").expect("db");
        let refused = make(&host, root.path()).expect_err("a host's data directory");
        assert!(format!("{refused}").contains("not a development data directory"));
        assert!(!is_development(&host));
    }

    #[test]
    fn a_link_named_like_the_marker_does_not_count() {
        let root = tempfile::tempdir().expect("tempdir");
        let real = root.path().join("real.json");
        std::fs::write(&real, b"{}").expect("write");
        std::os::unix::fs::symlink(&real, root.path().join(MARKER)).expect("symlink");
        assert!(!is_development(root.path()));
    }
}
