//! The secrets of `wasi:config`: values the operator marks `{"secret":
//! true}` in the policy's `config.json` and sets with
//! `hcp config secret set <capability> <key>` (the value read from stdin).
//! Each rests sealed with the data key ([`crate::seal`]) in
//! `config/<capability>/<key>.sealed` under the data directory (mode 0600
//! in a 0700 directory), bound to its capability and key (the associated
//! data `wasi-config:<capability>/<key>`), so that a sealed value cannot
//! be moved to another key. No policy file holds it; a task that reads it
//! gets it in clear, and receipts and packs name it by its keyed digest
//! ([`crate::withhold`]).
//!
//! # Ambient authority
//!
//! Reads and writes `config/` under the data directory.

use crate::seal::DataKey;
use anyhow::{Context as _, Result, bail};
use hcp_sandbox::{ConfigSecret, TaskStoreError};
use std::path::{Path, PathBuf};

/// Longest secret value, in bytes.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// Capability names as manifests have them; keys as `config.json` has
/// them (`[A-Za-z0-9_.-]{1,128}`, not starting with `.`): neither can
/// name a path outside `config/`.
fn checked(capability: &str, key: &str) -> Result<()> {
    let cap_ok = !capability.is_empty()
        && capability.len() <= 64
        && capability
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !capability.starts_with('-');
    if !cap_ok {
        bail!("{capability:?} is not a capability name ([a-z0-9-], at most 64)");
    }
    let key_ok = !key.is_empty()
        && key.len() <= 128
        && !key.starts_with('.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !key_ok {
        bail!("{key:?} is not a config key ([A-Za-z0-9_.-], at most 128, not starting with '.')");
    }
    Ok(())
}

fn path(data_dir: &Path, capability: &str, key: &str) -> PathBuf {
    data_dir
        .join("config")
        .join(capability)
        .join(format!("{key}.sealed"))
}

fn aad(capability: &str, key: &str) -> String {
    format!("wasi-config:{capability}/{key}")
}

/// Seals `value` as secret `key` of `capability`, replacing any earlier
/// one.
///
/// # Errors
///
/// A malformed name or key, an empty or oversized value, or the file
/// cannot be written.
pub fn set(
    data_dir: &Path,
    data_key: &DataKey,
    capability: &str,
    key: &str,
    value: &str,
) -> Result<()> {
    checked(capability, key)?;
    if value.is_empty() {
        bail!("the secret is empty");
    }
    if value.len() > MAX_SECRET_BYTES {
        bail!("the secret is larger than {MAX_SECRET_BYTES} bytes");
    }
    let file = path(data_dir, capability, key);
    let dir = file.parent().context("config directory")?;
    crate::private_dir::create_private_dir(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let sealed = data_key.seal(value.as_bytes(), &aad(capability, key))?;
    let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
    write_private(&tmp, &sealed).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &file).with_context(|| format!("renaming to {}", file.display()))?;
    crate::private_dir::sync_dir(dir);
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Opens secret `key` of `capability`; `None` when none is set.
///
/// # Errors
///
/// A malformed name or key, or a sealed file that does not open (altered,
/// or moved from another key).
pub fn open(
    data_dir: &Path,
    data_key: &DataKey,
    capability: &str,
    key: &str,
) -> Result<Option<String>> {
    checked(capability, key)?;
    let file = path(data_dir, capability, key);
    let sealed = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let plain = data_key
        .open(&sealed, &aad(capability, key))
        .with_context(|| format!("secret {key} of {capability}"))?;
    String::from_utf8(plain)
        .map(Some)
        .map_err(|_| anyhow::anyhow!("secret {key} of {capability} is not UTF-8"))
}

impl crate::Store {
    /// Secret `key` of `capability` and its keyed digest, for
    /// `hcp_sandbox::store::TaskStore::config_secret`.
    pub(crate) fn config_secret_of(
        &self,
        capability: &str,
        key: &str,
    ) -> Result<Option<ConfigSecret>, TaskStoreError> {
        match open(self.dir(), self.data_key(), capability, key) {
            Ok(Some(value)) => Ok(Some(ConfigSecret {
                digest: self.withhold().digest(&value),
                value,
            })),
            Ok(None) => Ok(None),
            // The guest is told no host path.
            Err(e) => Err(TaskStoreError(format!(
                "secret {key} cannot be opened: {}",
                e.root_cause()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_rests_sealed_and_bound_to_its_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = DataKey::load_or_create(dir.path()).expect("key");
        set(dir.path(), &key, "probe", "api_token", "tok-5ecret-value").expect("set");
        let file = path(dir.path(), "probe", "api_token");
        let bytes = std::fs::read(&file).expect("read");
        assert!(!bytes.windows(6).any(|w| w == b"5ecret"));
        assert_eq!(
            open(dir.path(), &key, "probe", "api_token")
                .expect("open")
                .as_deref(),
            Some("tok-5ecret-value")
        );
        assert_eq!(
            open(dir.path(), &key, "probe", "other").expect("open"),
            None
        );
        // Moved to another key, it does not open.
        std::fs::copy(&file, path(dir.path(), "probe", "moved")).expect("copy");
        assert!(open(dir.path(), &key, "probe", "moved").is_err());
        // Names that would leave `config/` are refused.
        assert!(set(dir.path(), &key, "../x", "k", "v").is_err());
        assert!(set(dir.path(), &key, "probe", "../k", "v").is_err());
        assert!(set(dir.path(), &key, "probe", "k", "").is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
    }
}
