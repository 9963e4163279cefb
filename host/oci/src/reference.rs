//! `oci://<registry>/<repository>[:<tag>|@sha256:<digest>]`: what the
//! command line names, checked before any connection is made.
//!
//! The registry is a host name or address with an optional port (an IPv6
//! address in brackets); the repository is one or more lowercase path
//! components as the OCI distribution specification allows them; the tag
//! follows the specification's grammar; a digest is `sha256:` and 64
//! lowercase hex digits (the only algorithm this host accepts). A
//! reference without tag or digest means the tag `latest`.

use crate::error::OciError;
use std::fmt;

/// The scheme prefix of a registry reference.
pub const SCHEME: &str = "oci://";

/// A parsed `oci://` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]`, as written (lowercased).
    pub registry: String,
    /// The repository path.
    pub repository: String,
    /// The tag, when the reference names one (or none was given: `latest`).
    pub tag: Option<String>,
    /// The manifest digest, when the reference pins one.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses `text`, which must start with `oci://`.
    ///
    /// # Errors
    ///
    /// [`OciError::Reference`], saying what is wrong.
    pub fn parse(text: &str) -> Result<Self, OciError> {
        let bad = |why: &str| OciError::Reference(format!("{text:?}: {why}"));
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("a registry reference starts with oci://"))?;
        let (registry, path) = rest.split_once('/').ok_or_else(|| {
            bad("expected oci://<registry>/<repository>[:<tag>|@sha256:<digest>]")
        })?;
        let registry = registry.to_ascii_lowercase();
        check_registry(&registry).map_err(|why| bad(&why))?;
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => {
                check_digest(d).map_err(|why| bad(&why))?;
                (p, Some(d.to_owned()))
            }
            None => (path, None),
        };
        // A tag follows the last `:` after the last `/`.
        let last = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[last..].rfind(':') {
            Some(i) => (&path[..last + i], Some(path[last + i + 1..].to_owned())),
            None => (path, None),
        };
        check_repository(repository).map_err(|why| bad(&why))?;
        if let Some(tag) = &tag {
            check_tag(tag).map_err(|why| bad(&why))?;
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some("latest".to_owned()),
            _ => tag,
        };
        Ok(Self {
            registry,
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// Whether `text` is meant as a registry reference (starts with `oci://`).
    pub fn is_reference(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// The registry's host without port or brackets.
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }

    /// Whether the registry is this machine (`localhost`, 127.0.0.0/8, ::1).
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(self.host())
    }

    /// What to ask the registry for: the digest when pinned, else the tag.
    pub fn reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// `host` of `host[:port]` (an IPv6 address without its brackets).
pub(crate) fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(h, _)| h);
    }
    authority.split_once(':').map_or(authority, |(h, _)| h)
}

/// `localhost`, or an address in 127.0.0.0/8 or `::1`.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn check_registry(registry: &str) -> Result<(), String> {
    let host = host_of(registry);
    let port = if registry.starts_with('[') {
        registry
            .split_once(']')
            .and_then(|(_, p)| p.strip_prefix(':'))
    } else {
        registry.split_once(':').map(|(_, p)| p)
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
    {
        return Err(format!("{registry:?} is not a registry host[:port]"));
    }
    if let Some(port) = port
        && port.parse::<u16>().map_or(true, |p| p == 0)
    {
        return Err(format!("{port:?} is not a port"));
    }
    Ok(())
}

/// Lowercase components `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` joined by `/`.
fn check_repository(repository: &str) -> Result<(), String> {
    if repository.is_empty() || repository.len() > 255 {
        return Err("the repository must be 1 to 255 characters".into());
    }
    for part in repository.split('/') {
        if !repository_component_ok(part) {
            return Err(format!(
                "repository component {:?} is not lowercase letters and digits separated \
                 by single '.', '_' or '__', or dashes",
                crate::error::printable(part)
            ));
        }
    }
    Ok(())
}

fn repository_component_ok(part: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let (Some(first), Some(last)) = (part.chars().next(), part.chars().last()) else {
        return false;
    };
    if !alnum(first) || !alnum(last) {
        return false;
    }
    // Every run of separators is ".", "_", "__" or dashes only.
    let mut run = String::new();
    for c in part.chars() {
        if alnum(c) {
            let ok = run.is_empty()
                || run == "."
                || run == "_"
                || run == "__"
                || run.chars().all(|c| c == '-');
            if !ok {
                return false;
            }
            run.clear();
        } else if matches!(c, '.' | '_' | '-') {
            run.push(c);
        } else {
            return false;
        }
    }
    true
}

/// `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
fn check_tag(tag: &str) -> Result<(), String> {
    let mut chars = tag.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if !first_ok
        || tag.len() > 128
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(format!(
            "tag {tag:?} is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"
        ));
    }
    Ok(())
}

/// `sha256:` and 64 lowercase hex digits.
pub(crate) fn check_digest(digest: &str) -> Result<(), String> {
    let ok = digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{:?} is not a digest this host accepts (sha256: and 64 lowercase hex digits)",
            crate::error::printable(digest)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_and_print_back() {
        let r = Reference::parse("oci://127.0.0.1:5000/acme/trivial:1.0.0").expect("parse");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "acme/trivial", Some("1.0.0"))
        );
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/acme/trivial:1.0.0");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci://registry.example/x@{d}")).expect("parse");
        assert_eq!(
            (r.tag.as_deref(), r.digest.as_deref()),
            (None, Some(d.as_str()))
        );
        assert!(!r.host().is_empty());
        let r = Reference::parse("oci://[::1]:5000/x").expect("parse");
        assert_eq!((r.host(), r.tag.as_deref()), ("::1", Some("latest")));
        assert!(r.is_loopback());
        assert!(
            !Reference::parse("oci://registry.example/x")
                .expect("p")
                .is_loopback()
        );
    }

    #[test]
    fn bad_references_are_refused() {
        for bad in [
            "https://r/x",
            "oci://r",
            "oci://r/",
            "oci://r/UPPER",
            "oci://r/x:",
            "oci://r/x:.tag",
            "oci://r/x@sha256:abc",
            "oci://r/x@md5:abc",
            "oci://r:0/x",
            "oci://r:99999/x",
            "oci://r/a//b",
            "oci://r u/x",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
