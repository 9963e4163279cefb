//! Reading and checking a manifest.
//!
//! # Ambient authority
//!
//! This module reads the manifest file, the component file, and the metadata
//! of granted directories (to refuse ones that do not exist). It opens nothing
//! else and writes nothing.

use super::doc::{ManifestDoc, NetGrantDoc};
use super::{
    ComponentFile, DEFAULT_MAX_DURATION, Grants, HOST_WIT_PACKAGE, HOST_WIT_VERSION,
    HOST_WIT_WORLD, Limits, Manifest, NetGrant, NetHost, WorldRef,
};
use crate::duration::IsoDuration;
use crate::problem::{self, Problem};
use crate::schema::{self, SchemaId};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// How a loader resolves grant paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resolve {
    /// Look at the filesystem now: the directory must exist, be reached
    /// without a symbolic link, and its identity is recorded.
    Now,
    /// An installed manifest: take the paths as written; the identities
    /// are the install's (attached by the caller).
    Recorded,
}

/// Largest manifest file read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Largest component file read.
const MAX_COMPONENT_BYTES: u64 = 256 << 20;
/// The only variable grant paths may start with.
pub(super) const MANIFEST_DIR_VAR: &str = "${manifest_dir}";

/// How strict loading is.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Refuse a manifest without `component.digest` (bundles and installs).
    pub require_digest: bool,
}

/// Why a manifest was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("{path}: cannot read manifest")]
    Read {
        /// The manifest path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not JSON.
    #[error("{path}:{line}:{column}: manifest is not valid JSON: {message}")]
    Syntax {
        /// The manifest path.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// The document has problems.
    #[error("{path}: invalid manifest:\n{}", problem::list(.problems))]
    Invalid {
        /// The manifest path.
        path: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

impl ManifestError {
    /// The problems, when the document itself was refused.
    pub fn problems(&self) -> &[Problem] {
        match self {
            Self::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}

/// Reads and checks the manifest at `path`; relative component paths and
/// `${manifest_dir}` resolve against its directory.
///
/// # Errors
///
/// An unreadable file, invalid JSON, or every problem of the document.
pub fn load(path: &Path, options: LoadOptions) -> Result<Manifest, ManifestError> {
    load_with(path, options, Resolve::Now)
}

/// Reads and checks the manifest of an installed capability (digest
/// required). Its grant paths are taken as the install wrote them, without
/// looking at the filesystem: the directories they name are checked when a
/// task opens them, against the identities the install recorded (which the
/// caller attaches to [`FsGrant::identity`](super::FsGrant)). A grant that
/// has gone missing or been replaced fails that capability's tasks, not
/// the loading of its manifest.
///
/// # Errors
///
/// An unreadable file, invalid JSON, or every problem of the document.
pub fn load_installed(path: &Path) -> Result<Manifest, ManifestError> {
    load_with(
        path,
        LoadOptions {
            require_digest: true,
        },
        Resolve::Recorded,
    )
}

fn load_with(
    path: &Path,
    options: LoadOptions,
    resolve: Resolve,
) -> Result<Manifest, ManifestError> {
    let shown = path.display().to_string();
    let read_err = |source| ManifestError::Read {
        path: shown.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::Invalid {
            path: shown,
            problems: vec![Problem::new(
                "",
                format!("larger than {MAX_MANIFEST_BYTES} bytes"),
            )],
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    let value: Value = serde_json::from_str(&text).map_err(|e| ManifestError::Syntax {
        path: shown.clone(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let absolute = std::path::absolute(path).map_err(|source| ManifestError::Read {
        path: shown.clone(),
        source,
    })?;
    // The directory, canonical: `${manifest_dir}` and relative component
    // paths resolve against it.
    let parent = absolute.parent().unwrap_or(Path::new("/"));
    let base = std::fs::canonicalize(parent).map_err(|source| ManifestError::Read {
        path: shown.clone(),
        source,
    })?;
    check_value(value, &base, Some(absolute), &shown, options, resolve)
}

/// Checks a manifest document already parsed; `base` is the directory
/// relative paths resolve against, `shown` names it in errors.
///
/// # Errors
///
/// Every problem of the document.
pub fn from_value(
    value: Value,
    base: &Path,
    source: Option<PathBuf>,
    shown: &str,
    options: LoadOptions,
) -> Result<Manifest, ManifestError> {
    check_value(value, base, source, shown, options, Resolve::Now)
}

fn check_value(
    value: Value,
    base: &Path,
    source: Option<PathBuf>,
    shown: &str,
    options: LoadOptions,
    resolve: Resolve,
) -> Result<Manifest, ManifestError> {
    let invalid = |problems| ManifestError::Invalid {
        path: shown.to_owned(),
        problems,
    };
    // Schema problems and, when the document still has the manifest's shape,
    // the semantic ones too: every problem is reported at once.
    let mut problems = SchemaId::Capability
        .validate(&value, "")
        .err()
        .unwrap_or_default();
    let doc: ManifestDoc = match serde_json::from_value(value) {
        Ok(doc) => doc,
        Err(e) => {
            if problems.is_empty() {
                problems.push(Problem::new("", e.to_string()));
            }
            return Err(invalid(problems));
        }
    };
    let mut checker = Checker {
        problems,
        base,
        resolve,
    };
    let manifest = checker.check(doc, source, options);
    if checker.problems.is_empty()
        && let Some(manifest) = manifest
    {
        return Ok(manifest);
    }
    let mut problems = checker.problems;
    problems.sort();
    problems.dedup();
    Err(invalid(problems))
}

pub(super) struct Checker<'a> {
    pub(super) problems: Vec<Problem>,
    pub(super) base: &'a Path,
    /// How grant paths are resolved.
    pub(super) resolve: Resolve,
}

impl Checker<'_> {
    pub(super) fn problem(&mut self, pointer: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::new(pointer, message));
    }

    fn check(
        &mut self,
        doc: ManifestDoc,
        source: Option<PathBuf>,
        options: LoadOptions,
    ) -> Option<Manifest> {
        let cap = &doc.capability;
        let version = semver::Version::parse(&cap.version)
            .map_err(|e| {
                self.problem(
                    "/capability/version",
                    format!("{:?} is not a semantic version: {e}", cap.version),
                )
            })
            .ok();
        let input_schema = self.user_schema("/capability/input_schema", &cap.input_schema);
        let output_schema = self.user_schema("/capability/output_schema", &cap.output_schema);
        if let Some(floor) = cap.safety.risk_floor
            && floor > cap.safety.risk_ceiling
        {
            self.problem(
                "/capability/safety/risk_floor",
                format!(
                    "risk_floor {floor} is above risk_ceiling {}",
                    cap.safety.risk_ceiling
                ),
            );
        }
        let constraints = cap.constraints.as_ref();
        let max_duration = match constraints.and_then(|c| c.max_duration.as_deref()) {
            None => Some(DEFAULT_MAX_DURATION),
            Some(text) => match IsoDuration::parse(text) {
                Ok(d) if d.get().is_zero() => {
                    self.problem(
                        "/capability/constraints/max_duration",
                        "must be longer than zero",
                    );
                    None
                }
                Ok(d) => Some(d.get()),
                Err(e) => {
                    self.problem("/capability/constraints/max_duration", e);
                    None
                }
            },
        };
        let concurrent_limit = constraints.and_then(|c| c.concurrent_limit).unwrap_or(1);
        let world = self.world(&doc.component.world);
        let component = self.component(&doc, options);
        let grants = self.grants(&doc);
        for (name, p) in &doc.safety_envelope.parameters {
            let pointer = format!(
                "/safety_envelope/parameters/{}",
                problem::pointer_token(name)
            );
            match (p.min, p.max) {
                (Some(min), Some(max)) if min > max => {
                    self.problem(pointer, format!("min {min} is above max {max}"));
                }
                (None, None) => self.problem(
                    pointer,
                    format!("parameter {name} bounds nothing: give it a min, a max or both"),
                ),
                _ => {}
            }
        }
        let limits = Limits::from_doc(&doc.limits);
        Some(Manifest {
            version: version?,
            component: component?,
            world: world?,
            max_duration: max_duration?,
            concurrent_limit,
            input_schema: Arc::new(input_schema?),
            output_schema: Arc::new(output_schema?),
            grants,
            limits,
            source,
            doc,
        })
    }

    fn user_schema(&mut self, pointer: &str, schema: &Value) -> Option<jsonschema::Validator> {
        schema::compile_user(schema)
            .map_err(|e| self.problem(pointer, e.to_string()))
            .ok()
    }

    fn world(&mut self, text: &str) -> Option<WorldRef> {
        let pointer = "/component/world";
        let (path, version) = text.split_once('@')?;
        let (package, world) = path.split_once('/')?;
        let version = match semver::Version::parse(version) {
            Ok(v) => v,
            Err(e) => {
                self.problem(
                    pointer,
                    format!("{version:?} is not a semantic version: {e}"),
                );
                return None;
            }
        };
        if package != HOST_WIT_PACKAGE || world != HOST_WIT_WORLD {
            self.problem(
                pointer,
                format!(
                    "this host runs components of world {HOST_WIT_PACKAGE}/{HOST_WIT_WORLD}, not {package}/{world}"
                ),
            );
            return None;
        }
        let host = semver::Version::new(1, 0, 0);
        let host = semver::Version::parse(HOST_WIT_VERSION).unwrap_or(host);
        if version.major != host.major || version > host {
            self.problem(
                pointer,
                format!(
                    "component targets {package}@{version} but this host implements {package}@{host}; \
                     a host runs components of the same major version, not newer than its own"
                ),
            );
            return None;
        }
        Some(WorldRef {
            package: package.to_owned(),
            world: world.to_owned(),
            version,
        })
    }

    fn component(&mut self, doc: &ManifestDoc, options: LoadOptions) -> Option<ComponentFile> {
        let joined = self.base.join(&doc.component.path);
        let path = std::fs::canonicalize(&joined).unwrap_or(joined);
        let bytes = match read_bounded(&path, MAX_COMPONENT_BYTES) {
            Ok(b) => b,
            Err(e) => {
                self.problem("/component/path", format!("{}: {e}", path.display()));
                return None;
            }
        };
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        super::hashed::count(&path);
        match &doc.component.digest {
            Some(pinned) if *pinned != digest => {
                self.problem(
                    "/component/digest",
                    format!(
                        "does not match the component: {} has {digest}, the manifest pins {pinned}",
                        path.display()
                    ),
                );
                return None;
            }
            None if options.require_digest => {
                self.problem(
                    "/component/digest",
                    format!("required here: the component's digest is {digest}"),
                );
                return None;
            }
            _ => {}
        }
        Some(ComponentFile {
            path,
            pinned: doc.component.digest.is_some(),
            digest,
            bytes: bytes.into(),
        })
    }

    fn grants(&mut self, doc: &ManifestDoc) -> Grants {
        let g = &doc.grants;
        let mut grants = Grants {
            env: g.env.clone(),
            instruments: g.instruments.clone(),
            devices: g.devices.clone(),
            table: g.table.clone(),
            ..Grants::default()
        };
        let mut guest_paths = BTreeSet::new();
        let mut indices = Vec::new();
        for (i, fs) in g.filesystem.iter().enumerate() {
            if let Some(grant) = self.fs_grant(i, fs) {
                if !guest_paths.insert(grant.guest_path.clone()) {
                    self.problem(
                        format!("/grants/filesystem/{i}/guest_path"),
                        format!("{} is granted twice", grant.guest_path),
                    );
                }
                grants.filesystem.push(grant);
                indices.push(i);
            }
        }
        self.nested_grants(&grants.filesystem, &indices);
        let mut destinations = BTreeSet::new();
        for (i, net) in g.network.iter().enumerate() {
            if let Some(grant) = self.net_grant(i, net) {
                if !destinations.insert((grant.host.to_string(), grant.port)) {
                    self.problem(
                        format!("/grants/network/{i}"),
                        format!("{}:{} is granted twice", grant.host, grant.port),
                    );
                }
                grants.network.push(grant);
            }
        }
        for (what, list) in [
            ("env", &g.env),
            ("instruments", &g.instruments),
            ("devices", &g.devices),
        ] {
            let mut seen = BTreeSet::new();
            for (i, name) in list.iter().enumerate() {
                if !seen.insert(name) {
                    self.problem(
                        format!("/grants/{what}/{i}"),
                        format!("{name} is granted twice"),
                    );
                }
            }
        }
        for (grant, items) in g.table.iter() {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                if !seen.insert(&item.name) {
                    self.problem(
                        format!("/grants/{}/{i}", grant.field()),
                        format!("{} is granted twice", item.name),
                    );
                }
            }
        }
        grants
    }

    fn net_grant(&mut self, i: usize, net: &NetGrantDoc) -> Option<NetGrant> {
        let pointer = format!("/grants/network/{i}/host");
        let literal = net.host.trim_start_matches('[').trim_end_matches(']');
        let host = if let Ok(ip) = literal.parse::<IpAddr>() {
            if ip.is_unspecified() || ip.is_multicast() {
                self.problem(&pointer, format!("{ip} cannot be a destination"));
                return None;
            }
            NetHost::Ip(ip)
        } else if is_dns_name(&net.host) {
            NetHost::Name(net.host.to_ascii_lowercase())
        } else {
            self.problem(
                &pointer,
                format!("{:?} is neither a DNS name nor an IP address", net.host),
            );
            return None;
        };
        Some(NetGrant {
            host,
            port: net.port,
            allow_private: net.allow_private,
        })
    }
}

/// Reads at most `limit` bytes of a regular file.
fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > limit {
        return Err(std::io::Error::other(format!("larger than {limit} bytes")));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `Some(path)` with `.` removed when `text` is absolute and has no `..`.
pub(super) fn normalize_absolute(text: &str) -> Option<String> {
    let path = Path::new(text);
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out.to_string_lossy().into_owned())
}

/// RFC 1123 host name: dot-separated labels of letters, digits and hyphens.
fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        // An all-numeric final label would be a mistyped address.
        && !s
            .rsplit('.')
            .next()
            .is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_are_normalized_and_parents_refused() {
        assert_eq!(normalize_absolute("/a/./b/"), Some("/a/b".to_owned()));
        assert_eq!(normalize_absolute("/a/../b"), None);
        assert_eq!(normalize_absolute("a/b"), None);
        assert_eq!(normalize_absolute("/"), Some("/".to_owned()));
    }

    #[test]
    fn dns_names() {
        for ok in ["example.com", "localhost", "a-b.c0.org", "EXAMPLE.com."] {
            assert!(is_dns_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a.com",
            "a..b",
            "exa mple.com",
            "1.2.3.999",
            "a_b.com",
            "x/y",
        ] {
            assert!(!is_dns_name(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A normalized grant path is absolute and never climbs.
        #[test]
        fn normalized_paths_never_climb(parts in proptest::collection::vec("(\\.\\.|\\.|[a-z]{1,3}|)", 0..8)) {
            let text = format!("/{}", parts.join("/"));
            if let Some(p) = normalize_absolute(&text) {
                prop_assert!(p.starts_with('/'));
                prop_assert!(!p.split('/').any(|c| c == ".." || c == "."));
                prop_assert!(!parts.iter().any(|c| c == ".."));
            } else {
                prop_assert!(parts.iter().any(|c| c == ".."));
            }
        }

        /// Host-name checking never panics and accepts only the allowed alphabet.
        #[test]
        fn dns_names_have_the_allowed_alphabet(s in "\\PC{0,80}") {
            if is_dns_name(&s) {
                prop_assert!(s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'));
            }
        }
    }
}
