//! The operator's secrets: values of an interface the operator's policy
//! marks secret (`wasi:config`'s `{"secret": true}` in `config.json`) and
//! sets with `hcp <command> secret set <capability> <name>` (the value read
//! from stdin). Each rests sealed with the data key ([`crate::seal`]) in
//! `<dir>/<capability>/<name>.sealed` under the data directory (mode 0600
//! in a 0700 directory), bound to its interface, capability and name (the
//! associated data `<label>:<capability>/<name>`), so that a sealed value
//! cannot be moved to another name. The interface declares `dir`, `label`
//! and the command in its policy module
//! ([`hcp_policy::operator::SecretSpace`]; `wasi:config`'s are `config`,
//! `wasi-config`, `config`); nothing here names an interface. No policy
//! file holds a secret; a task that reads it gets it in clear, and
//! receipts and packs name it by its keyed digest ([`crate::withhold`]).
//!
//! # Ambient authority
//!
//! Reads and writes the interfaces' secret folders under the data
//! directory.

use crate::seal::DataKey;
use anyhow::{Context as _, Result, bail};
use hcp_policy::operator::SecretSpace;
use hcp_sandbox::{OperatorSecret, TaskStoreError};
use std::path::{Path, PathBuf};

/// Longest secret value, in bytes.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// Where `interface`'s secrets rest; capability names as manifests have
/// them; names as the interface's policy file has them
/// (`[A-Za-z0-9_.-]{1,128}`, not starting with `.`): neither can name a
/// path outside the interface's folder.
fn checked(interface: &str, capability: &str, name: &str) -> Result<&'static SecretSpace> {
    let Some(space) = hcp_policy::secret_space(interface) else {
        bail!("{interface:?} has no operator secrets");
    };
    let cap_ok = !capability.is_empty()
        && capability.len() <= 64
        && capability
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !capability.starts_with('-');
    if !cap_ok {
        bail!("{capability:?} is not a capability name ([a-z0-9-], at most 64)");
    }
    let name_ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !name_ok {
        bail!(
            "{name:?} is not a {} ([A-Za-z0-9_.-], at most 128, not starting with '.')",
            space.noun
        );
    }
    Ok(space)
}

fn path(data_dir: &Path, space: &SecretSpace, capability: &str, name: &str) -> PathBuf {
    data_dir
        .join(space.dir)
        .join(capability)
        .join(format!("{name}.sealed"))
}

fn aad(space: &SecretSpace, capability: &str, name: &str) -> String {
    format!("{}:{capability}/{name}", space.label)
}

/// Seals `value` as secret `name` of `interface` for `capability`,
/// replacing any earlier one.
///
/// # Errors
///
/// An interface without secrets, a malformed capability or name, an
/// empty or oversized value, or the file cannot be written.
pub fn set(
    data_dir: &Path,
    data_key: &DataKey,
    interface: &str,
    capability: &str,
    name: &str,
    value: &str,
) -> Result<()> {
    let space = checked(interface, capability, name)?;
    if value.is_empty() {
        bail!("the secret is empty");
    }
    if value.len() > MAX_SECRET_BYTES {
        bail!("the secret is larger than {MAX_SECRET_BYTES} bytes");
    }
    let file = path(data_dir, space, capability, name);
    let dir = file.parent().context("secrets directory")?;
    crate::private_dir::create_private_dir(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let sealed = data_key.seal(value.as_bytes(), &aad(space, capability, name))?;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
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

/// Opens secret `name` of `interface` for `capability`; `None` when none
/// is set.
///
/// # Errors
///
/// An interface without secrets, a malformed capability or name, or a
/// sealed file that does not open (altered, or moved from another name).
pub fn open(
    data_dir: &Path,
    data_key: &DataKey,
    interface: &str,
    capability: &str,
    name: &str,
) -> Result<Option<String>> {
    let space = checked(interface, capability, name)?;
    let file = path(data_dir, space, capability, name);
    let sealed = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let plain = data_key
        .open(&sealed, &aad(space, capability, name))
        .with_context(|| format!("secret {name} of {capability}"))?;
    String::from_utf8(plain)
        .map(Some)
        .map_err(|_| anyhow::anyhow!("secret {name} of {capability} is not UTF-8"))
}

impl crate::Store {
    /// Secret `name` of `interface` for `capability` and its keyed digest,
    /// for `hcp_sandbox::store::TaskStore::operator_secret`.
    pub(crate) fn operator_secret_of(
        &self,
        interface: &str,
        capability: &str,
        name: &str,
    ) -> Result<Option<OperatorSecret>, TaskStoreError> {
        match open(self.dir(), self.data_key(), interface, capability, name) {
            Ok(Some(value)) => Ok(Some(OperatorSecret {
                digest: self.withhold().digest(&value),
                value,
            })),
            Ok(None) => Ok(None),
            // The guest is told no host path.
            Err(e) => Err(TaskStoreError(format!(
                "secret {name} cannot be opened: {}",
                e.root_cause()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "wasi:config";

    fn config_path(dir: &Path, capability: &str, name: &str) -> PathBuf {
        let space = hcp_policy::secret_space(CONFIG).expect("wasi:config has secrets");
        path(dir, space, capability, name)
    }

    #[test]
    fn a_secret_rests_sealed_and_bound_to_its_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = DataKey::load_or_create(dir.path()).expect("key");
        set(
            dir.path(),
            &key,
            CONFIG,
            "probe",
            "api_token",
            "tok-5ecret-value",
        )
        .expect("set");
        let file = config_path(dir.path(), "probe", "api_token");
        let bytes = std::fs::read(&file).expect("read");
        assert!(!bytes.windows(6).any(|w| w == b"5ecret"));
        assert_eq!(
            open(dir.path(), &key, CONFIG, "probe", "api_token")
                .expect("open")
                .as_deref(),
            Some("tok-5ecret-value")
        );
        assert_eq!(
            open(dir.path(), &key, CONFIG, "probe", "other").expect("open"),
            None
        );
        // Moved to another key, it does not open.
        std::fs::copy(&file, config_path(dir.path(), "probe", "moved")).expect("copy");
        assert!(open(dir.path(), &key, CONFIG, "probe", "moved").is_err());
        // Names that would leave `config/` are refused.
        assert!(set(dir.path(), &key, CONFIG, "../x", "k", "v").is_err());
        assert!(set(dir.path(), &key, CONFIG, "probe", "../k", "v").is_err());
        assert!(set(dir.path(), &key, CONFIG, "probe", "k", "").is_err());
        // An interface without secrets has no folder.
        let err = set(dir.path(), &key, "wasi:keyvalue", "probe", "k", "v").expect_err("refused");
        assert!(err.to_string().contains("has no operator secrets"), "{err}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
    }

    /// A data directory whose `wasi:config` secrets were sealed before the
    /// store became generic (`config/<capability>/<key>.sealed`, associated
    /// data `wasi-config:<capability>/<key>`) still opens, and a secret set
    /// now rests where it did.
    #[test]
    fn wasi_config_secrets_rest_where_they_did() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = DataKey::load_or_create(dir.path()).expect("key");
        let old = dir
            .path()
            .join("config")
            .join("probe")
            .join("api_token.sealed");
        std::fs::create_dir_all(old.parent().expect("parent")).expect("mkdir");
        let sealed = key
            .seal(b"tok-sealed-before", "wasi-config:probe/api_token")
            .expect("seal");
        std::fs::write(&old, sealed).expect("write");
        assert_eq!(
            open(dir.path(), &key, CONFIG, "probe", "api_token")
                .expect("open")
                .as_deref(),
            Some("tok-sealed-before")
        );
        set(dir.path(), &key, CONFIG, "probe", "other", "tok-set-now").expect("set");
        let now = std::fs::read(dir.path().join("config/probe/other.sealed")).expect("read");
        assert_eq!(
            key.open(&now, "wasi-config:probe/other").expect("open"),
            b"tok-set-now"
        );
    }
}
