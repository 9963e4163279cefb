//! Directory grants: resolving a grant's path, recording which directory
//! it is, and refusing grants a task could redirect.
//!
//! A grant path may not pass through a symbolic link: each task opens the
//! directory component by component without following one, so the path
//! written is the path opened. A read-write grant may not contain another
//! grant below it: a task could replace the inner directory (with a
//! symbolic link to anywhere, or another directory), and the next task
//! would open that.
//!
//! # Ambient authority
//!
//! Reads the metadata of the granted directories (when resolving now).

use super::doc::FsGrantDoc;
use super::load::{Checker, MANIFEST_DIR_VAR, Resolve, normalize_absolute};
use super::{Access, DirIdentity, FsGrant};
use std::path::Path;

/// The identity of the directory at `path` (following nothing the caller
/// has not already resolved).
///
/// # Errors
///
/// Its metadata cannot be read.
pub fn dir_identity(path: &Path) -> std::io::Result<DirIdentity> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::symlink_metadata(path)?;
    Ok(DirIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

impl Checker<'_> {
    pub(super) fn fs_grant(&mut self, i: usize, fs: &FsGrantDoc) -> Option<FsGrant> {
        let pointer = format!("/grants/filesystem/{i}/path");
        let expanded = match fs.path.strip_prefix(MANIFEST_DIR_VAR) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                format!("{}{rest}", self.base.display())
            }
            Some(_) => {
                self.problem(
                    &pointer,
                    format!("{MANIFEST_DIR_VAR} must be followed by / or nothing"),
                );
                return None;
            }
            None if fs.path.contains("${") => {
                self.problem(
                    &pointer,
                    format!("{:?}: the only variable a grant path may use is a leading {MANIFEST_DIR_VAR}", fs.path),
                );
                return None;
            }
            None => fs.path.clone(),
        };
        let Some(normal) = normalize_absolute(&expanded) else {
            self.problem(
                &pointer,
                format!(
                    "{:?} is not absolute: grant an absolute directory, or one under {MANIFEST_DIR_VAR}/",
                    fs.path
                ),
            );
            return None;
        };
        let (host_path, identity) = match self.resolve {
            Resolve::Recorded => (normal.clone().into(), None),
            Resolve::Now => match std::fs::canonicalize(&normal) {
                Ok(p) if !p.is_dir() => {
                    self.problem(&pointer, format!("{normal} is not a directory"));
                    return None;
                }
                Ok(p) if p != Path::new(&normal) => {
                    self.problem(
                        &pointer,
                        format!(
                            "{normal} passes through a symbolic link (it resolves to {}): \
                             granted directories are opened without following links; grant {} itself",
                            p.display(),
                            p.display()
                        ),
                    );
                    return None;
                }
                Ok(p) => match dir_identity(&p) {
                    Ok(id) => (p, Some(id)),
                    Err(e) => {
                        self.problem(&pointer, format!("{normal}: {e}"));
                        return None;
                    }
                },
                Err(e) => {
                    self.problem(&pointer, format!("{normal}: {e}"));
                    return None;
                }
            },
        };
        let guest_path = match &fs.guest_path {
            None => normal,
            Some(g) => match normalize_absolute(g) {
                Some(g) => g,
                None => {
                    self.problem(
                        format!("/grants/filesystem/{i}/guest_path"),
                        format!("{g:?} must be an absolute path without . or .. components"),
                    );
                    return None;
                }
            },
        };
        Some(FsGrant {
            host_path,
            guest_path,
            access: fs.access,
            identity,
        })
    }

    /// Refuses every grant that lies strictly within a read-write grant
    /// (`indices` are the grants' positions in the document).
    pub(super) fn nested_grants(&mut self, grants: &[FsGrant], indices: &[usize]) {
        for a in grants {
            if a.access != Access::ReadWrite {
                continue;
            }
            for (b, &j) in grants.iter().zip(indices) {
                // The same directory granted twice is not redirected: a
                // task cannot replace the root of its own grant.
                if b.host_path != a.host_path && b.host_path.starts_with(&a.host_path) {
                    self.problem(
                        format!("/grants/filesystem/{j}/path"),
                        format!(
                            "{} (guest {}) lies within the read-write grant {} (guest {}): \
                             a task could replace it with a link to any directory; \
                             grant directories that do not contain each other",
                            b.host_path.display(),
                            b.guest_path,
                            a.host_path.display(),
                            a.guest_path
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::{LoadOptions, load, load_installed};
    use serde_json::{Value, json};
    use std::path::Path;

    /// Writes a manifest granting `filesystem` in `dir`, with a component
    /// file beside it.
    fn manifest(dir: &Path, filesystem: Value) -> std::path::PathBuf {
        std::fs::write(dir.join("c.wasm"), b"\0asm").expect("component");
        let doc = json!({
            "capability": {
                "name": "grants", "version": "1.0.0", "description": "test capability grants",
                "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
                "safety": {"risk_ceiling": "R1", "requires_human_approval": false,
                           "involves_physical_resources": false},
                "constraints": {"max_duration": "PT30S", "concurrent_limit": 1}
            },
            "component": {"path": "c.wasm", "world": "hcp:capability/capability@1.0.0"},
            "grants": {"filesystem": filesystem}
        });
        let path = dir.join("manifest.json");
        std::fs::write(&path, doc.to_string()).expect("manifest");
        path
    }

    fn problems(path: &Path) -> Vec<String> {
        match load(path, LoadOptions::default()) {
            Ok(_) => Vec::new(),
            Err(e) => e
                .problems()
                .iter()
                .map(|p| format!("{}: {}", p.pointer, p.message))
                .collect(),
        }
    }

    #[test]
    fn a_grant_within_a_read_write_grant_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(base.join("rw/sub")).expect("mkdir");
        let path = manifest(
            &base,
            json!([
                {"path": "${manifest_dir}/rw", "guest_path": "/rw", "access": "read-write"},
                {"path": "${manifest_dir}/rw/sub", "guest_path": "/sub", "access": "read-only"}
            ]),
        );
        let rw = base.join("rw");
        assert_eq!(
            problems(&path),
            [format!(
                "/grants/filesystem/1/path: {}/sub (guest /sub) lies within the read-write grant {} (guest /rw): \
                 a task could replace it with a link to any directory; \
                 grant directories that do not contain each other",
                rw.display(),
                rw.display()
            )]
        );
        // The other way round (a read-only grant holding a read-write one)
        // redirects nothing: the read-only grant cannot be changed.
        let path = manifest(
            &base,
            json!([
                {"path": "${manifest_dir}/rw", "guest_path": "/rw", "access": "read-only"},
                {"path": "${manifest_dir}/rw/sub", "guest_path": "/sub", "access": "read-write"}
            ]),
        );
        assert_eq!(problems(&path), Vec::<String>::new());
        // Nor does one directory granted twice.
        let path = manifest(
            &base,
            json!([
                {"path": "${manifest_dir}/rw", "guest_path": "/a", "access": "read-write"},
                {"path": "${manifest_dir}/rw", "guest_path": "/b", "access": "read-only"}
            ]),
        );
        assert_eq!(problems(&path), Vec::<String>::new());
    }

    #[test]
    fn a_grant_through_a_symbolic_link_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir(base.join("real")).expect("mkdir");
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).expect("symlink");
        let path = manifest(
            &base,
            json!([{"path": "${manifest_dir}/link", "guest_path": "/d", "access": "read-only"}]),
        );
        let real = base.join("real");
        assert_eq!(
            problems(&path),
            [format!(
                "/grants/filesystem/0/path: {}/link passes through a symbolic link (it resolves to {}): \
                 granted directories are opened without following links; grant {} itself",
                base.display(),
                real.display(),
                real.display()
            )]
        );
    }

    #[test]
    fn a_grant_records_its_directory_and_an_installed_load_touches_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir(base.join("d")).expect("mkdir");
        let path = manifest(
            &base,
            json!([{"path": "${manifest_dir}/d", "guest_path": "/d", "access": "read-only"}]),
        );
        let m = load(&path, LoadOptions::default()).expect("loads");
        let id = super::dir_identity(&base.join("d")).expect("stat");
        assert_eq!(m.grants.filesystem[0].identity, Some(id));
        // Installed manifests load whatever became of the directory (here a
        // dangling link): the task that opens it fails, not the load.
        std::fs::remove_dir(base.join("d")).expect("rmdir");
        std::os::unix::fs::symlink(base.join("gone"), base.join("d")).expect("symlink");
        let mut doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        doc["component"]["digest"] = json!(m.component.digest);
        std::fs::write(&path, doc.to_string()).expect("write");
        let installed = load_installed(&path).expect("an installed manifest loads");
        let grant = &installed.grants.filesystem[0];
        assert_eq!(grant.host_path, base.join("d"));
        assert_eq!(grant.identity, None);
    }
}
