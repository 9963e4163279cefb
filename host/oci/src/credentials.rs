//! Registry credentials: `HCP_REGISTRY_USER` / `HCP_REGISTRY_PASSWORD`, else
//! the entry for the registry in a docker-style `config.json`
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), as `docker
//! login` writes it (`auths.<registry>.auth`, base64 of `user:password`,
//! or `username` and `password`). Credential helpers (`credsStore`,
//! `credHelpers`) are not run.
//!
//! # Ambient authority
//!
//! Reads the environment and that one file.

use crate::client::Credentials;
use crate::error::OciError;
use base64::Engine as _;
use std::io::Read as _;
use std::path::PathBuf;

/// Largest config.json read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The credentials for `registry` (`host[:port]`), if any are configured.
///
/// # Errors
///
/// Only one of the two variables is set, or the config file is unreadable
/// or malformed.
pub fn lookup_credentials(registry: &str) -> Result<Option<Credentials>, OciError> {
    let user = std::env::var("HCP_REGISTRY_USER")
        .ok()
        .filter(|v| !v.is_empty());
    let password = std::env::var("HCP_REGISTRY_PASSWORD")
        .ok()
        .filter(|v| !v.is_empty());
    match (user, password) {
        (Some(user), Some(password)) => return Ok(Some(Credentials::new(user, password))),
        (Some(_), None) | (None, Some(_)) => {
            return Err(OciError::Local(
                "set both HCP_REGISTRY_USER and HCP_REGISTRY_PASSWORD, or neither".into(),
            ));
        }
        (None, None) => {}
    }
    let path = match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => PathBuf::from(dir).join("config.json"),
        None => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".docker").join("config.json"),
            None => return Ok(None),
        },
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(OciError::Local(format!("{}: {e}", path.display()))),
    };
    let mut text = Vec::new();
    file.take(MAX_CONFIG_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| OciError::Local(format!("{}: {e}", path.display())))?;
    from_config(&text, registry).map_err(|e| OciError::Local(format!("{}: {e}", path.display())))
}

/// The entry for `registry` in a config.json's `auths`.
fn from_config(text: &[u8], registry: &str) -> Result<Option<Credentials>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(auths) = value.get("auths").and_then(|a| a.as_object()) else {
        return Ok(None);
    };
    let keys = [
        registry.to_owned(),
        format!("https://{registry}"),
        format!("http://{registry}"),
        format!("https://{registry}/v1/"),
    ];
    let Some(entry) = keys.iter().find_map(|k| auths.get(k)) else {
        return Ok(None);
    };
    if let Some(auth) = entry
        .get("auth")
        .and_then(|a| a.as_str())
        .filter(|a| !a.is_empty())
    {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| format!("auths.{registry}.auth is not base64: {e}"))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| format!("auths.{registry}.auth is not UTF-8"))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| format!("auths.{registry}.auth is not user:password"))?;
        return Ok(Some(Credentials::new(user, password)));
    }
    let field = |name: &str| entry.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    Ok(match (field("username"), field("password")) {
        (Some(user), Some(password)) => Some(Credentials::new(user, password)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_entries_are_read() {
        let config = br#"{"auths":{"127.0.0.1:5000":{"auth":"YWxpY2U6czNjcmV0"},
            "https://other.example":{"username":"bob","password":"pw"}}}"#;
        let alice = from_config(config, "127.0.0.1:5000")
            .expect("read")
            .expect("found");
        assert_eq!(alice.user, "alice");
        let bob = from_config(config, "other.example")
            .expect("read")
            .expect("found");
        assert_eq!(bob.user, "bob");
        assert!(
            from_config(config, "third.example")
                .expect("read")
                .is_none()
        );
        assert!(from_config(br#"{"auths":{"r":{"auth":"!!"}}}"#, "r").is_err());
    }
}
