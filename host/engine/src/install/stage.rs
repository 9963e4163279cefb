//! The capabilities directory: staging an install next to its final place,
//! moving it there with one rename, and removing an install the same way.
//!
//! ```text
//! <data dir>/capabilities/
//!   .lock                      held (exclusive) by every install and removal
//!   .staging-<uuid>/           an install being checked; renamed into place, or deleted
//!                              (a crash's leftovers: by the next holder of the lock)
//!   <name>/<version>/          an installed capability: manifest.json, component.wasm,
//!                              wit/, bundled data, install-receipt.json
//! ```
//!
//! # Ambient authority
//!
//! Creates, renames and deletes directories under `<data dir>/capabilities/`
//! only; [`Capabilities::remove_dir`] refuses any path outside it.

use crate::private_dir::{create_private_dir, sync_dir};
use anyhow::{Context as _, Result};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// `<data dir>/capabilities`, locked for the lifetime of this value.
#[derive(Debug)]
pub(crate) struct Capabilities {
    root: PathBuf,
    _lock: std::fs::File,
}

impl Capabilities {
    /// Creates (mode 0700) and locks the capabilities directory; waits for
    /// another install or removal to finish.
    pub(crate) fn lock(data_dir: &Path) -> Result<Self> {
        let root = data_dir.join("capabilities");
        create_private_dir(&root).with_context(|| format!("{}", root.display()))?;
        let path = root.join(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("{}", path.display()))?;
        lock.lock()
            .with_context(|| format!("locking {}", path.display()))?;
        let caps = Self { root, _lock: lock };
        caps.sweep();
        Ok(caps)
    }

    /// Deletes staging directories a crashed install or review left: with
    /// the lock held, no other process is using one. (`.removing-*`
    /// directories are left alone: the version they held may still be
    /// recorded; `hcp remove` forgets it.)
    fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(".staging-")
                && entry.file_type().is_ok_and(|t| t.is_dir())
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Where `name@version` lives once installed.
    pub(crate) fn final_dir(&self, name: &str, version: &str) -> PathBuf {
        self.root.join(name).join(version)
    }

    /// A new, empty staging directory, deleted when the guard drops unless
    /// it was moved into place.
    pub(crate) fn stage(&self) -> Result<Staging> {
        let dir = self
            .root
            .join(format!(".staging-{}", uuid::Uuid::new_v4().simple()));
        create_private_dir(&dir).with_context(|| format!("{}", dir.display()))?;
        Ok(Staging { dir, placed: false })
    }

    /// Moves `staging` to `final_dir` with one rename. A directory already
    /// there has no registry record (the caller checked): it is what a
    /// crash between rename and record left, and is deleted first.
    pub(crate) fn place(&self, staging: &mut Staging, final_dir: &Path) -> Result<Placed> {
        let parent = final_dir
            .parent()
            .context("install directory has no parent")?;
        let created_parent = !parent.exists();
        create_private_dir(parent).with_context(|| format!("{}", parent.display()))?;
        let mut stale = false;
        if final_dir.exists() {
            self.remove_dir(final_dir)?;
            stale = true;
        }
        std::fs::rename(&staging.dir, final_dir).with_context(|| {
            format!(
                "moving {} to {}",
                staging.dir.display(),
                final_dir.display()
            )
        })?;
        staging.placed = true;
        sync_dir(parent);
        sync_dir(&self.root);
        Ok(Placed {
            dir: final_dir.to_owned(),
            created_parent,
            stale,
        })
    }

    /// Undoes [`Capabilities::place`]: deletes the placed directory, and
    /// its parent when `place` created it.
    pub(crate) fn unplace(&self, placed: &Placed) -> Result<()> {
        self.remove_dir(&placed.dir)?;
        if placed.created_parent
            && let Some(parent) = placed.dir.parent()
        {
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }

    /// Moves an installed directory out of its place (one rename) and
    /// returns where it went, for [`Capabilities::remove_dir`] or
    /// [`Capabilities::restore`].
    pub(crate) fn take_out(&self, dir: &Path) -> Result<PathBuf> {
        self.check_inside(dir)?;
        let aside = self
            .root
            .join(format!(".removing-{}", uuid::Uuid::new_v4().simple()));
        std::fs::rename(dir, &aside).with_context(|| format!("moving {} aside", dir.display()))?;
        sync_dir(&self.root);
        Ok(aside)
    }

    /// Puts back what [`Capabilities::take_out`] moved.
    pub(crate) fn restore(&self, aside: &Path, dir: &Path) -> Result<()> {
        std::fs::rename(aside, dir).with_context(|| format!("restoring {}", dir.display()))
    }

    /// Deletes a directory under the capabilities directory.
    pub(crate) fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.check_inside(dir)?;
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        sync_dir(&self.root);
        Ok(())
    }

    /// Deletes `<name>/` if no version is left in it.
    pub(crate) fn prune(&self, name: &str) {
        let _ = std::fs::remove_dir(self.root.join(name));
    }

    fn check_inside(&self, dir: &Path) -> Result<()> {
        let inside = dir.starts_with(&self.root)
            && dir != self.root
            && !dir
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
        if inside {
            Ok(())
        } else {
            anyhow::bail!(
                "{} is not under {}: refusing to touch it",
                dir.display(),
                self.root.display()
            )
        }
    }
}

/// A staging directory; deleted on drop unless placed.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: PathBuf,
    placed: bool,
}

impl Staging {
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `bytes` at `rel` (creating parent directories), synced.
    pub(crate) fn write(&self, rel: &str, bytes: &[u8]) -> Result<()> {
        let path = self.dir.join(rel);
        if let Some(parent) = path.parent() {
            create_private_dir(parent).with_context(|| format!("{}", parent.display()))?;
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options
            .open(&path)
            .with_context(|| format!("{}", path.display()))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("{}", path.display()))
    }

    /// Creates the directory `rel` (data directories may be empty).
    pub(crate) fn mkdir(&self, rel: &str) -> Result<()> {
        let path = self.dir.join(rel);
        create_private_dir(&path).with_context(|| format!("{}", path.display()))
    }

    /// Syncs the directory tree's entries.
    pub(crate) fn sync(&self) {
        fn walk(dir: &Path) {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        walk(&e.path());
                    }
                }
            }
            sync_dir(dir);
        }
        walk(&self.dir);
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A staging directory moved into place.
#[derive(Debug)]
pub(crate) struct Placed {
    pub(crate) dir: PathBuf,
    created_parent: bool,
    /// A leftover directory without a registry record was replaced.
    pub(crate) stale: bool,
}
