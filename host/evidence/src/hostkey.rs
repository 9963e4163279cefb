//! The host's identity: its Ed25519 key (receipts, checkpoints, session
//! tokens, install receipts) and the host id derived from it.
//!
//! # Ambient authority
//!
//! Reads and creates `keys/host.key` under the data directory (mode 0600).
//! The private key is never printed.

use anyhow::{Context as _, Result};
use hcp_receipts::HostKey;
use hcp_store::private_dir::create_private_dir;
use std::path::{Path, PathBuf};

/// The host key and the host id it implies.
#[derive(Debug)]
pub struct HostIdentity {
    /// The key.
    pub key: HostKey,
    /// `host-<key id>`: names this host in receipts and tokens.
    pub host_id: String,
}

impl HostIdentity {
    fn of(key: HostKey) -> Self {
        let host_id = format!("host-{}", key.key_id());
        Self { key, host_id }
    }
}

/// Where the host key lives.
pub fn key_path(data_dir: &Path) -> PathBuf {
    data_dir.join("keys").join("host.key")
}

/// Creates the host key; refuses to replace one.
///
/// # Errors
///
/// A key exists already, or it cannot be written.
pub fn init(data_dir: &Path) -> Result<HostIdentity> {
    let path = key_path(data_dir);
    if path.exists() {
        anyhow::bail!(
            "{} exists already: a host keeps its key (receipts it signed verify against it)",
            path.display()
        );
    }
    let key = create(data_dir)?.with_context(|| {
        format!(
            "{} exists already: a host keeps its key (receipts it signed verify against it)",
            path.display()
        )
    })?;
    Ok(HostIdentity::of(key))
}

/// Makes a new host key at its place, whole or not at all (a process
/// loading it meanwhile never sees it half written); `None` when a key is
/// there already (another process made it first).
fn create(data_dir: &Path) -> Result<Option<HostKey>> {
    let path = key_path(data_dir);
    let dir = path.parent().unwrap_or(data_dir);
    create_private_dir(dir).with_context(|| format!("{}", dir.display()))?;
    let key = HostKey::generate()?;
    let made = hcp_store::private_dir::create_whole(&path, |tmp| Ok(key.save(tmp)?))?;
    Ok(made.then_some(key))
}

/// Loads the host key.
///
/// # Errors
///
/// No key (run `hcp keys init`), or it cannot be read.
pub fn load(data_dir: &Path) -> Result<HostIdentity> {
    let path = key_path(data_dir);
    if !path.exists() {
        anyhow::bail!(
            "no host key at {} (create it with `hcp keys init`)",
            path.display()
        );
    }
    Ok(HostIdentity::of(
        HostKey::load(&path).with_context(|| format!("host key {}", path.display()))?,
    ))
}

/// Loads the host key, creating it on first use.
///
/// # Errors
///
/// It cannot be read or created.
pub fn load_or_init(data_dir: &Path) -> Result<HostIdentity> {
    if !key_path(data_dir).exists()
        && let Some(key) = create(data_dir)?
    {
        return Ok(HostIdentity::of(key));
    }
    // There already, or another process made it first: theirs is used.
    load(data_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_starting_at_once_agree_on_one_key() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().expect("tempdir");
            let barrier = std::sync::Barrier::new(4);
            let ids: Vec<String> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            load_or_init(dir.path()).map(|k| k.host_id)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread").expect("a key"))
                    .collect()
            });
            assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
            let left: Vec<_> = std::fs::read_dir(dir.path().join("keys"))
                .expect("keys")
                .map(|e| e.expect("entry").file_name())
                .collect();
            assert_eq!(left, vec![std::ffi::OsString::from("host.key")]);
        }
    }

    #[test]
    fn init_once_load_many() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = init(dir.path()).expect("init");
        assert!(a.host_id.starts_with("host-") && a.host_id.len() == 21);
        assert!(init(dir.path()).is_err());
        let b = load(dir.path()).expect("load");
        assert_eq!(a.host_id, b.host_id);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(key_path(dir.path()))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let empty = tempfile::tempdir().expect("tempdir");
        let err = load(empty.path()).expect_err("no key");
        assert!(
            err.to_string()
                .ends_with("(create it with `hcp keys init`)"),
            "{err}"
        );
    }
}
