//! Secret keys of the host kept as files under the data directory's
//! `keys/`: 32 random bytes, created on first use with mode 0600 in a
//! directory of mode 0700, and refused when others can read them.
//!
//! # Ambient authority
//!
//! Reads and creates `keys/<name>` under the data directory.

use crate::private_dir::create_private_dir;
use anyhow::{Context as _, Result};
use std::io::Write as _;
use std::path::Path;

/// Loads `data_dir/keys/<name>`, creating it on first use. Two processes
/// creating it at once agree on one key (the second uses the first's).
///
/// # Errors
///
/// The key cannot be read or created, is not 32 bytes, or is readable by
/// others.
pub(crate) fn load_or_create(data_dir: &Path, name: &str) -> Result<[u8; 32]> {
    let dir = data_dir.join("keys");
    let path = dir.join(name);
    if !path.exists() {
        create_private_dir(&dir).with_context(|| format!("{}", dir.display()))?;
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("random source: {e}"))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(mut f) => {
                f.write_all(&key)?;
                f.sync_all()?;
            }
            // Another process created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path)?.permissions().mode();
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "{} is readable by others (mode {:o}): refusing to use it",
                path.display(),
                mode & 0o777
            );
        }
    }
    let bytes = std::fs::read(&path).with_context(|| format!("{}", path.display()))?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| anyhow::anyhow!("{}: not a 32-byte key", path.display()))
}

#[cfg(test)]
mod tests {
    use super::load_or_create;

    #[test]
    fn a_key_is_created_once_private_and_refused_when_opened_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = load_or_create(dir.path(), "k.key").expect("created");
        assert_eq!(load_or_create(dir.path(), "k.key").expect("read"), first);
        let path = dir.path().join("keys/k.key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
            let e = load_or_create(dir.path(), "k.key").expect_err("too open");
            assert!(
                format!("{e:#}").contains("is readable by others (mode 644)"),
                "{e:#}"
            );
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        std::fs::write(&path, b"short").expect("write");
        let e = load_or_create(dir.path(), "k.key").expect_err("short");
        assert!(format!("{e:#}").ends_with("not a 32-byte key"), "{e:#}");
    }
}
