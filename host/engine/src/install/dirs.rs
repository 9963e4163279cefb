//! Which directories an install granted: their device and inode numbers,
//! recorded beside the installed manifest in [`DIRS_FILE`], and attached
//! to the grants whenever the installed manifest is loaded.
//!
//! Each task opens a granted directory again without following a link and
//! must find the recorded directory there (`hcp_sandbox`'s `grant_dir`): a
//! directory replaced after the install, by a link or by another
//! directory, fails that capability's tasks with `resource_unavailable`.
//! Loading the installed manifest looks at no granted directory, so a
//! broken grant never stops the listing of capabilities or the admission
//! of other capabilities' tasks.
//!
//! A capability installed before identities were recorded has no
//! [`DIRS_FILE`]: its directories are still opened without following a
//! link, but not compared with a recorded identity.
//!
//! # Ambient authority
//!
//! Reads the installed manifest and [`DIRS_FILE`] in the installed
//! directory.

use crate::store::Installed;
use anyhow::{Context as _, Result};
use hcp_contracts::manifest::{DirIdentity, Manifest};
use serde::{Deserialize, Serialize};

/// The file, in an installed capability's directory.
pub const DIRS_FILE: &str = "granted-dirs.json";

const FORMAT: &str = "hcp-granted-dirs/1";

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Recorded {
    format: String,
    filesystem: Vec<RecordedDir>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordedDir {
    guest_path: String,
    dev: u64,
    ino: u64,
}

/// The [`DIRS_FILE`] of a manifest loaded at install (whose grants carry
/// the identities of the directories found then).
///
/// # Errors
///
/// A grant has no identity (never for a manifest loaded from disk).
pub(crate) fn record(manifest: &Manifest) -> Result<Vec<u8>> {
    let filesystem = manifest
        .grants
        .filesystem
        .iter()
        .map(|g| {
            let id = g.identity.with_context(|| {
                format!(
                    "grant {}: the directory's identity was not recorded",
                    g.guest_path
                )
            })?;
            Ok(RecordedDir {
                guest_path: g.guest_path.clone(),
                dev: id.dev,
                ino: id.ino,
            })
        })
        .collect::<Result<_>>()?;
    let mut text = serde_json::to_vec_pretty(&Recorded {
        format: FORMAT.to_owned(),
        filesystem,
    })?;
    text.push(b'\n');
    Ok(text)
}

/// Loads an installed capability's manifest without looking at its granted
/// directories, with the identities its install recorded.
///
/// # Errors
///
/// The manifest cannot be loaded, or [`DIRS_FILE`] is damaged or does not
/// match the manifest's grants.
pub fn installed_manifest(installed: &Installed) -> Result<Manifest> {
    load_dir(&installed.dir, &installed.id())
}

/// [`installed_manifest`] of the capability installed (or staged) in `dir`.
pub(crate) fn load_dir(dir: &std::path::Path, id: &str) -> Result<Manifest> {
    let mut manifest =
        hcp_contracts::manifest::load_installed(&dir.join(hcp_bundle::layout::MANIFEST))?;
    let path = dir.join(DIRS_FILE);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(manifest),
        Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
    };
    let recorded: Recorded =
        serde_json::from_slice(&text).with_context(|| format!("{}", path.display()))?;
    let grants = &mut manifest.grants.filesystem;
    let matches = recorded.format == FORMAT
        && recorded.filesystem.len() == grants.len()
        && recorded
            .filesystem
            .iter()
            .zip(grants.iter())
            .all(|(r, g)| r.guest_path == g.guest_path);
    if !matches {
        anyhow::bail!(
            "{}: does not record the directories {} grants (reinstall it)",
            path.display(),
            id
        );
    }
    for (grant, r) in grants.iter_mut().zip(recorded.filesystem) {
        grant.identity = Some(DirIdentity {
            dev: r.dev,
            ino: r.ino,
        });
    }
    Ok(manifest)
}
