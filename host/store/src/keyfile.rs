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
        // Whole or not at all (a process reading it meanwhile never sees
        // it empty); when another process made it first, theirs is used.
        crate::private_dir::create_whole(&path, |tmp| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options
                .open(tmp)
                .with_context(|| format!("{}", tmp.display()))?;
            f.write_all(&key)?;
            f.sync_all()?;
            Ok(())
        })?;
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
    fn processes_creating_it_at_once_agree_on_one_key() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().expect("tempdir");
            let barrier = std::sync::Barrier::new(4);
            let keys: Vec<[u8; 32]> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            load_or_create(dir.path(), "k.key")
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread").expect("a key"))
                    .collect()
            });
            assert!(keys.windows(2).all(|w| w[0] == w[1]));
        }
    }

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
