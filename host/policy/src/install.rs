//! `install.json`: what the operator admits when a capability bundle is
//! installed. A manifest is checked against it before anything is copied:
//! its risk ceiling, every directory, destination, environment variable,
//! instrument and device it grants, and every limit it asks for (bounded by
//! `limits`, or by the built-in maxima of [`crate::install_limits`]). Whatever the file does not admit is
//! refused; every reason is reported at once.
//!
//! This file is separate from the admission-gate set ([`crate::PolicySet`]):
//! it decides installs, not tasks, so it is not part of the policy hash that
//! receipts record; an install receipt records its own hash
//! ([`InstallPolicy::hash`]).
//!
//! # Ambient authority
//!
//! [`InstallPolicy::load`] reads `install.json` in the directory it is
//! given, and nothing else. Checking is pure: grant paths are compared as
//! the checked manifest resolved them (canonical), lexically, component by
//! component.

use crate::dupkeys::duplicate_keys;
use crate::file_kind::{EmbeddedSchemaError, embedded};
use crate::install_limits::LimitBounds;
use crate::load::{FileProblem, PolicyError};
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::{Access, Manifest, NetHost};
use hcp_contracts::schema::validate_user;
use hcp_contracts::{Problem, RiskLevel};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Component, Path};
use std::sync::LazyLock;

/// The file's name in a policy directory.
pub const INSTALL_FILE: &str = "install.json";

/// Largest file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The JSON Schema (`schemas/policy/install.schema.json`).
pub const INSTALL_SCHEMA: &str = include_str!("../../../schemas/policy/install.schema.json");

static SCHEMA: LazyLock<Result<jsonschema::Validator, EmbeddedSchemaError>> =
    LazyLock::new(|| embedded(INSTALL_SCHEMA));

/// A destination pattern of `network.allow` or `network.deny` that does not
/// read; each names the pattern's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PatternError {
    #[error("{0:?}: unclosed [")]
    UnclosedBracket(String),
    #[error("{0:?}: expected :<port> after the bracketed address")]
    AfterBracket(String),
    #[error("{0:?}: write IPv6 addresses in brackets, [::1]:443")]
    BareIpv6(String),
    #[error("{text:?}: {port:?} is not a port (1 to 65535)")]
    Port { text: String, port: String },
    #[error(
        "{0:?} is not a destination pattern (host:port, host, *.domain[:port], * or an address)"
    )]
    NotAPattern(String),
}

/// The file as written (an unknown field is refused, by `admitted`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstallFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The highest risk ceiling a capability may declare.
    pub max_risk_ceiling: RiskLevel,
    /// Directories.
    #[serde(default)]
    pub filesystem: FilesystemRules,
    /// Destinations.
    #[serde(default)]
    pub network: NetworkRules,
    /// Environment variables (`*`: any).
    #[serde(default)]
    pub env: Vec<String>,
    /// Instruments (`*`: any).
    #[serde(default)]
    pub instruments: Vec<String>,
    /// Devices (`*`: any).
    #[serde(default)]
    pub devices: Vec<String>,
    /// The most a manifest may ask for each limit (unset: the built-in
    /// maximum, [`crate::install_limits::BUILT_IN`]).
    #[serde(default)]
    pub limits: LimitBounds,
    /// The names the table's grants admitted by name
    /// (`Grant::admitted_by_name`) may list, by grant field (`*`: any;
    /// absent: none), after the fields above.
    #[serde(flatten)]
    pub admitted: AdmittedNames,
}

/// The names an install admits of the table's grants admitted by name,
/// by the grant's field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AdmittedNames(BTreeMap<String, Vec<String>>);

impl AdmittedNames {
    /// What the install admits of `grant` (empty: nothing).
    pub fn of(&self, grant: Grant) -> &[String] {
        self.0.get(grant.field()).map_or(&[], Vec::as_slice)
    }
}

impl<'de> Deserialize<'de> for AdmittedNames {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, Vec<String>>::deserialize(d)?;
        if let Some(key) = map.keys().find(|k| {
            !Grant::by_field(k).is_some_and(|g| g.shape().is_some() && g.admitted_by_name())
        }) {
            return Err(serde::de::Error::unknown_field(key, INSTALL_FIELDS));
        }
        Ok(Self(map))
    }
}

/// The fields of `install.json` before the table's (for errors).
const INSTALL_FIELDS: &[&str] = &[
    "$schema",
    "max_risk_ceiling",
    "filesystem",
    "network",
    "env",
    "instruments",
    "devices",
    "limits",
];

/// Which directories grants may name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesystemRules {
    /// Admit read-only data shipped in the bundle (`${manifest_dir}/<dir>`).
    #[serde(default)]
    pub bundled_data: bool,
    /// Host directories a grant must be (inside) one of.
    #[serde(default)]
    pub roots: Vec<Root>,
}

/// A host directory grants may name, and the most access they may have.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Root {
    /// Canonical absolute path.
    pub path: String,
    /// The most access a grant inside it may have.
    pub access: Access,
}

/// Which destinations grants may name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkRules {
    /// Admitted patterns.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Refused patterns (win over `allow`).
    #[serde(default)]
    pub deny: Vec<String>,
    /// Admit grants with `allow_private`.
    #[serde(default)]
    pub allow_private: bool,
}

/// A destination pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    host: HostPattern,
    port: Option<u16>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Any,
    /// `.example.org`: any name ending so.
    Suffix(String),
    /// A lower-case name, or an address in its canonical text form.
    Exact(String),
}

impl Pattern {
    fn parse(text: &str) -> Result<Self, PatternError> {
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (inside, after) = rest
                .split_once(']')
                .ok_or_else(|| PatternError::UnclosedBracket(text.to_owned()))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| PatternError::AfterBracket(text.to_owned()))?,
                ),
            };
            (inside, port)
        } else {
            match text.matches(':').count() {
                0 => (text, None),
                1 => text
                    .split_once(':')
                    .map(|(h, p)| (h, Some(p)))
                    .unwrap_or((text, None)),
                _ => return Err(PatternError::BareIpv6(text.to_owned())),
            }
        };
        let port = port
            .map(|p| {
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| PatternError::Port {
                        text: text.to_owned(),
                        port: p.to_owned(),
                    })
            })
            .transpose()?;
        let host = if host == "*" {
            HostPattern::Any
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            HostPattern::Exact(ip.to_string())
        } else {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            let (suffix, bare) = match name.strip_prefix("*.") {
                Some(rest) => (true, rest.to_owned()),
                None => (false, name),
            };
            let ok = !bare.is_empty()
                && bare.split('.').all(|l| {
                    !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            if !ok {
                return Err(PatternError::NotAPattern(text.to_owned()));
            }
            if suffix {
                HostPattern::Suffix(format!(".{bare}"))
            } else {
                HostPattern::Exact(bare)
            }
        };
        Ok(Self {
            host,
            port,
            text: text.to_owned(),
        })
    }

    fn matches(&self, host: &NetHost, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Any, _) => true,
            (HostPattern::Suffix(s), NetHost::Name(n)) => n.ends_with(s.as_str()),
            (HostPattern::Suffix(_), NetHost::Ip(_)) => false,
            (HostPattern::Exact(e), NetHost::Name(n)) => e == n.trim_end_matches('.'),
            (HostPattern::Exact(e), NetHost::Ip(ip)) => *e == ip.to_string(),
        }
    }
}

/// A loaded, checked `install.json`.
#[derive(Debug, Clone)]
pub struct InstallPolicy {
    file: InstallFile,
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    hash: String,
    origin: String,
}

impl InstallPolicy {
    /// Reads and checks `install.json` in `dir`.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or every problem it has.
    pub fn load(dir: &Path) -> Result<Self, PolicyError> {
        let path = dir.join(INSTALL_FILE);
        let read = std::fs::metadata(&path).and_then(|meta| {
            if meta.len() > MAX_FILE_BYTES {
                Err(std::io::Error::other(format!(
                    "larger than {MAX_FILE_BYTES} bytes"
                )))
            } else {
                std::fs::read_to_string(&path)
            }
        });
        let origin = path.display().to_string();
        match read {
            Ok(text) => Self::from_text(&origin, &text),
            Err(e) => Err(error(
                &origin,
                vec![Problem::new("", format!("cannot read {origin}: {e}"))],
            )),
        }
    }

    /// Checks the text of an `install.json`; `origin` names it in errors.
    ///
    /// # Errors
    ///
    /// Every problem, by JSON pointer.
    pub fn from_text(origin: &str, text: &str) -> Result<Self, PolicyError> {
        let (file, value) = parse(text).map_err(|p| error(origin, p))?;
        let mut problems = Vec::new();
        let mut patterns = |list: &[String], at: &str| {
            let mut out = Vec::new();
            for (i, text) in list.iter().enumerate() {
                match Pattern::parse(text) {
                    Ok(p) => out.push(p),
                    Err(e) => {
                        problems.push(Problem::new(format!("/network/{at}/{i}"), e.to_string()))
                    }
                }
            }
            out
        };
        let allow = patterns(&file.network.allow, "allow");
        let deny = patterns(&file.network.deny, "deny");
        for (i, root) in file.filesystem.roots.iter().enumerate() {
            if !is_normal_absolute(&root.path) {
                problems.push(Problem::new(
                    format!("/filesystem/roots/{i}/path"),
                    format!(
                        "{:?} must be an absolute path without `.`, `..` or a trailing /",
                        root.path
                    ),
                ));
            }
        }
        problems.extend(file.limits.problems("/limits"));
        if !problems.is_empty() {
            problems.sort();
            return Err(error(origin, problems));
        }
        let hash = hcp_contracts::jcs::sha256_tagged(&value)
            .map_err(|e| error(origin, vec![Problem::new("", e)]))?;
        Ok(Self {
            file,
            allow,
            deny,
            hash,
            origin: origin.to_owned(),
        })
    }

    /// Checks one file's text alone (for fixtures and editors).
    ///
    /// # Errors
    ///
    /// Every problem, by JSON pointer.
    pub fn check_text(text: &str) -> Result<(), Vec<Problem>> {
        Self::from_text("install.json", text)
            .map(drop)
            .map_err(|e| e.problems.into_iter().map(|p| p.problem).collect())
    }

    /// `sha256:` of the file's canonical (RFC 8785) content.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Where it was loaded from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The file.
    pub fn file(&self) -> &InstallFile {
        &self.file
    }

    /// Every reason `manifest` may not be installed; empty when the policy
    /// admits it. `manifest` must be a checked manifest (every grant
    /// resolved, in order).
    pub fn check(&self, manifest: &Manifest) -> Vec<String> {
        let mut reasons = Vec::new();
        let f = &self.file;
        let ceiling = manifest.risk_ceiling();
        if ceiling > f.max_risk_ceiling {
            reasons.push(format!(
                "risk_ceiling {ceiling} is above the highest this host installs (max_risk_ceiling {})",
                f.max_risk_ceiling
            ));
        }
        let written = &manifest.doc.grants.filesystem;
        for (i, (doc, grant)) in written.iter().zip(&manifest.grants.filesystem).enumerate() {
            let at = format!(
                "grants.filesystem[{i}] {} ({})",
                doc.path,
                grant.access.as_str()
            );
            if doc.path.starts_with("${manifest_dir}") {
                if !f.filesystem.bundled_data {
                    reasons.push(format!(
                        "{at}: data shipped in a bundle is not admitted (filesystem.bundled_data is false)"
                    ));
                } else if grant.access != Access::ReadOnly {
                    reasons.push(format!("{at}: bundled data is admitted read-only only"));
                }
                continue;
            }
            let inside: Vec<&Root> = f
                .filesystem
                .roots
                .iter()
                .filter(|r| grant.host_path.starts_with(&r.path))
                .collect();
            let shown = grant.host_path.display();
            if inside.is_empty() {
                let roots: Vec<String> = f
                    .filesystem
                    .roots
                    .iter()
                    .map(|r| format!("{} {}", r.path, r.access.as_str()))
                    .collect();
                reasons.push(if roots.is_empty() {
                    format!(
                        "{at}: {shown} is outside the allowed roots (filesystem.roots is empty)"
                    )
                } else {
                    format!(
                        "{at}: {shown} is outside the allowed roots ({})",
                        roots.join(", ")
                    )
                });
            } else if grant.access == Access::ReadWrite
                && inside.iter().all(|r| r.access == Access::ReadOnly)
            {
                reasons.push(format!(
                    "{at}: {shown} is inside {}, which admits read-only grants only",
                    inside[0].path
                ));
            }
        }
        for (i, g) in manifest.grants.network.iter().enumerate() {
            let at = format!("grants.network[{i}] {}:{}", g.host, g.port);
            if let Some(p) = self.deny.iter().find(|p| p.matches(&g.host, g.port)) {
                reasons.push(format!("{at} is forbidden (network.deny {:?})", p.text));
            } else if !self.allow.iter().any(|p| p.matches(&g.host, g.port)) {
                reasons.push(format!(
                    "{at} is not a destination this host admits (network.allow)"
                ));
            } else if g.allow_private && !f.network.allow_private {
                reasons.push(format!(
                    "{at} allows private addresses, which this host does not admit (network.allow_private is false)"
                ));
            }
        }
        let table: Vec<(&str, Vec<String>, &[String])> = manifest
            .grants
            .table
            .iter()
            .filter(|(g, _)| g.admitted_by_name())
            .map(|(g, _)| (g.field(), manifest.grants.table.names(g), f.admitted.of(g)))
            .collect();
        let typed: [(&str, &[String], &[String]); 3] = [
            ("env", &manifest.grants.env, &f.env),
            ("instruments", &manifest.grants.instruments, &f.instruments),
            ("devices", &manifest.grants.devices, &f.devices),
        ];
        let table = table.iter().map(|(w, g, a)| (*w, g.as_slice(), *a));
        for (what, granted, admitted) in typed.into_iter().chain(table) {
            let any = admitted.iter().any(|a| a == "*");
            for (i, name) in granted.iter().enumerate() {
                if !any && !admitted.contains(name) {
                    reasons.push(format!(
                        "grants.{what}[{i}] {name} is not admitted ({what} lists {})",
                        if admitted.is_empty() {
                            "nothing".to_owned()
                        } else {
                            admitted.join(", ")
                        }
                    ));
                }
            }
        }
        reasons.extend(f.limits.check(manifest));
        reasons
    }
}

fn error(origin: &str, problems: Vec<Problem>) -> PolicyError {
    PolicyError {
        origin: origin.to_owned(),
        problems: problems
            .into_iter()
            .map(|problem| FileProblem {
                file: INSTALL_FILE.to_owned(),
                problem,
            })
            .collect(),
    }
}

fn parse(text: &str) -> Result<(InstallFile, Value), Vec<Problem>> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        vec![Problem::new(
            "",
            format!(
                "not valid JSON: line {}, column {}: {e}",
                e.line(),
                e.column()
            ),
        )]
    })?;
    let mut problems = duplicate_keys(text);
    match &*SCHEMA {
        Ok(validator) => {
            if let Err(found) = validate_user(validator, &value, "") {
                problems.extend(found);
            }
        }
        Err(e) => problems.push(Problem::new("", format!("embedded schema: {e}"))),
    }
    if !problems.is_empty() {
        problems.sort();
        problems.dedup();
        return Err(problems);
    }
    let file =
        serde_json::from_value(value.clone()).map_err(|e| vec![Problem::new("", e.to_string())])?;
    Ok((file, value))
}

fn is_normal_absolute(path: &str) -> bool {
    let p = Path::new(path);
    p.is_absolute()
        && (path == "/" || !path.ends_with('/'))
        && !path.contains("//")
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && !path.split('/').any(|c| c == ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let name = |n: &str| NetHost::Name(n.into());
        let ip = |s: &str| NetHost::Ip(s.parse().expect("ip"));
        let p = |s: &str| Pattern::parse(s).expect(s);
        assert!(p("example.com:443").matches(&name("example.com"), 443));
        assert!(!p("example.com:443").matches(&name("example.com"), 80));
        assert!(p("Example.COM").matches(&name("example.com"), 80));
        assert!(p("*.example.org").matches(&name("a.b.example.org"), 1));
        assert!(!p("*.example.org").matches(&name("example.org"), 1));
        assert!(!p("*.example.org").matches(&name("badexample.org"), 1));
        assert!(p("*").matches(&ip("10.0.0.1"), 22));
        assert!(p("*:443").matches(&name("x"), 443));
        assert!(p("[::1]:8080").matches(&ip("::1"), 8080));
        assert!(p("169.254.169.254").matches(&ip("169.254.169.254"), 80));
        assert!(!p("169.254.169.254").matches(&name("169.254.169.254.nip.io"), 80));
        for bad in ["::1", "a:b", "host:0", "ex ample.com", "[::1", "*.", "a..b"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn roots_are_normal_absolute_paths() {
        for ok in ["/", "/srv", "/srv/hcp/data"] {
            assert!(is_normal_absolute(ok), "{ok}");
        }
        for bad in ["srv", "/srv/", "/srv/../etc", "/srv/./x", "//srv", ""] {
            assert!(!is_normal_absolute(bad), "{bad}");
        }
    }
}
