//! Surface audit (layer A): a component's imports against what its grants
//! allow.
//!
//! Every import of the component is classified before anything is
//! compiled or instantiated (the names are read from the component's
//! binary, see [`imports_and_exports`]). An import is allowed when it is
//! always granted (the `hcp:capability` basics, `wasi:io`, clocks, random,
//! stdio, exit), when a grant of the manifest allows it, or when it is
//! linked inert; anything else refuses the component, and the report names
//! each such import and why.
//!
//! # Linked, inert
//!
//! Some toolchains import interfaces a guest never uses: componentize-py
//! (Python) imports all of `wasi:filesystem` and `wasi:sockets` whatever the
//! program does. Refusing those would force a manifest to grant a directory
//! and a destination the guest does not need, so without a grant they are
//! linked with no authority instead ([`GrantedBy::is_inert`]):
//!
//! - `wasi:filesystem` with no `grants.filesystem`: no preopened directory,
//!   so the guest holds no descriptor and no path ever reaches the host (an
//!   `open` fails in the guest's own libc);
//! - `wasi:sockets` with no `grants.network` (and `ip-name-lookup` with no
//!   host name granted): creating a socket and looking up a name pass the
//!   PEP, which denies them (`DENY_TOOL_NOT_FOUND`) and records each denial
//!   in a receipt.
//!
//! Every other ungranted import (`instrument`, `hid`, `wasi:http`, an
//! environment the host does not provide) still refuses the component.

pub use crate::units::unit::GrantedBy;
use hcp_contracts::interfaces::{self, Grant};
use hcp_contracts::manifest::{Grants, HOST_WIT_PACKAGE, HOST_WIT_VERSION, Manifest};
use serde::Serialize;
use std::fmt;

/// The verdict on one import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum ImportVerdict {
    /// Allowed.
    Allowed {
        /// By what.
        granted_by: GrantedBy,
    },
    /// Refused.
    Refused {
        /// Why.
        reason: String,
    },
}

/// One import and its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportLine {
    /// The import as the component names it, e.g. `wasi:cli/environment@0.2.6`.
    pub name: String,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: ImportVerdict,
}

/// The audit of one component.
#[derive(Debug, Clone, Serialize)]
pub struct SurfaceReport {
    /// Capability name.
    pub capability: String,
    /// Capability version.
    pub version: String,
    /// Component digest.
    pub digest: String,
    /// Every import with its verdict.
    pub imports: Vec<ImportLine>,
    /// Every export.
    pub exports: Vec<String>,
    /// The grants, as the manifest resolved them.
    pub grants: GrantsSummary,
    /// Whether the component may be loaded.
    pub allowed: bool,
}

/// The grants in printable form: each field of `grants` (the table's
/// grant list, in its order) with a line per item. Serialized as an object
/// of those fields.
#[derive(Debug, Clone)]
pub struct GrantsSummary(Vec<(Grant, Vec<String>)>);

impl GrantsSummary {
    /// Summarizes resolved grants: `host_path -> guest_path (access)`,
    /// `host:port`, names.
    pub fn of(grants: &Grants) -> Self {
        let line = |grant: Grant| match grant.resolved_names(grants) {
            Some(names) => names.to_vec(),
            None if grant == Grant::Filesystem => grants
                .filesystem
                .iter()
                .map(|g| {
                    format!(
                        "{} -> {} ({})",
                        g.host_path.display(),
                        g.guest_path,
                        g.access.as_str()
                    )
                })
                .collect(),
            None if grant == Grant::Network => grants
                .network
                .iter()
                .map(|g| {
                    let private = if g.allow_private {
                        " (private allowed)"
                    } else {
                        ""
                    };
                    format!("{}:{}{private}", g.host, g.port)
                })
                .collect(),
            // A table grant of items: `name (access)`.
            None if grant.shape().is_some() => grants
                .table
                .items(grant)
                .iter()
                .map(hcp_contracts::manifest::GrantItem::line)
                .collect(),
            // A structured grant without a line format of its own here.
            None => Vec::new(),
        };
        Self(Grant::ALL.into_iter().map(|g| (g, line(g))).collect())
    }

    /// Each field of `grants` (`filesystem`, ...) with its lines.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &[String])> {
        self.0
            .iter()
            .map(|(g, lines)| (g.field(), lines.as_slice()))
    }

    /// The lines of `grant`, to rewrite them.
    pub fn lines_mut(&mut self, grant: Grant) -> impl Iterator<Item = &mut String> {
        self.0
            .iter_mut()
            .filter(move |(g, _)| *g == grant)
            .flat_map(|(_, lines)| lines.iter_mut())
    }
}

impl Serialize for GrantsSummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (field, lines) in self.iter() {
            map.serialize_entry(field, lines)?;
        }
        map.end()
    }
}

impl SurfaceReport {
    /// The refused imports.
    pub fn refused(&self) -> impl Iterator<Item = (&str, &str)> {
        self.imports.iter().filter_map(|i| match &i.verdict {
            ImportVerdict::Refused { reason } => Some((i.name.as_str(), reason.as_str())),
            ImportVerdict::Allowed { .. } => None,
        })
    }
}

impl fmt::Display for SurfaceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "capability {}@{}", self.capability, self.version)?;
        writeln!(f, "component  {}", self.digest)?;
        writeln!(f)?;
        writeln!(f, "imports:")?;
        for i in &self.imports {
            match &i.verdict {
                ImportVerdict::Allowed { granted_by } => {
                    writeln!(f, "  allowed  {}  ({})", i.name, granted_by.describe())?;
                }
                ImportVerdict::Refused { reason } => {
                    writeln!(f, "  REFUSED  {}  ({reason})", i.name)?;
                }
            }
        }
        writeln!(f)?;
        writeln!(f, "exports:")?;
        for e in &self.exports {
            writeln!(f, "  {e}")?;
        }
        writeln!(f)?;
        writeln!(f, "grants:")?;
        for (what, list) in self.grants.iter() {
            if list.is_empty() {
                writeln!(f, "  {what}: none")?;
            } else {
                writeln!(f, "  {what}:")?;
                for item in list {
                    writeln!(f, "    {item}")?;
                }
            }
        }
        writeln!(f)?;
        let refused = self.refused().count();
        let inert = self
            .imports
            .iter()
            .filter(|i| {
                matches!(i.verdict, ImportVerdict::Allowed { granted_by } if granted_by.is_inert())
            })
            .count();
        if refused == 0 && inert > 0 {
            write!(
                f,
                "verdict: allowed (every import is within the grants; {inert} linked, inert)"
            )
        } else if refused == 0 {
            write!(f, "verdict: allowed (every import is within the grants)")
        } else {
            write!(
                f,
                "verdict: REFUSED ({refused} import{} outside the grants)",
                if refused == 1 { "" } else { "s" }
            )
        }
    }
}

/// The names of a component's own imports and exports, in the order of its
/// binary, read without compiling or validating it: the import and export
/// sections of the outer component, nested modules and components skipped.
/// Milliseconds even for a component of tens of megabytes.
///
/// # Errors
///
/// The bytes are not a component, or its sections do not parse.
pub fn imports_and_exports(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    use wasmparser::{ComponentExternalKind, ComponentTypeRef, Encoding, Parser, Payload};
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    // 1 inside the outer component, more inside a nested module or component.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| e.to_string())? {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    return Err("not a component (a core module?)".into());
                }
                depth += 1;
            }
            Payload::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            // A type (`use types.{task}` at the world's level) is imported
            // and exported by name too; it carries no authority and
            // wasmtime does not list it: neither does the audit.
            Payload::ComponentImportSection(section) if depth == 1 => {
                for import in section {
                    let import = import.map_err(|e| e.to_string())?;
                    if !matches!(import.ty, ComponentTypeRef::Type(_)) {
                        imports.push(import.name.name.to_owned());
                    }
                }
            }
            Payload::ComponentExportSection(section) if depth == 1 => {
                for export in section {
                    let export = export.map_err(|e| e.to_string())?;
                    if export.kind != ComponentExternalKind::Type {
                        exports.push(export.name.name.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

impl SurfaceReport {
    /// The audit of `manifest`'s component, whose imports and exports are
    /// `imports` and `exports`, against the manifest's grants.
    pub fn of(manifest: &Manifest, imports: Vec<String>, exports: Vec<String>) -> Self {
        let imports: Vec<ImportLine> = imports
            .into_iter()
            .map(|name| ImportLine {
                verdict: classify(&name, &manifest.grants),
                name,
            })
            .collect();
        let allowed = imports
            .iter()
            .all(|i| matches!(i.verdict, ImportVerdict::Allowed { .. }));
        Self {
            capability: manifest.name().to_owned(),
            version: manifest.version.to_string(),
            digest: manifest.component.digest.clone(),
            imports,
            exports,
            grants: GrantsSummary::of(&manifest.grants),
            allowed,
        }
    }
}

/// Classifies one import name against the grants: the interface it
/// belongs to is looked up in the table of interfaces
/// ([`hcp_contracts::interfaces::INTERFACES`]), and that interface's
/// sandbox unit rules on it.
pub fn classify(name: &str, grants: &Grants) -> ImportVerdict {
    let refused = |reason: String| ImportVerdict::Refused { reason };
    let Some((path, version)) = name.split_once('@') else {
        return refused("unversioned import: the host provides only versioned interfaces".into());
    };
    let Some((package, interface)) = path.split_once('/') else {
        return refused("not an interface import".into());
    };
    let Ok(version) = semver::Version::parse(version) else {
        return refused(format!("{version:?} is not a semantic version"));
    };
    let row = if package == HOST_WIT_PACKAGE {
        let host =
            semver::Version::parse(HOST_WIT_VERSION).unwrap_or(semver::Version::new(1, 0, 0));
        if version.major != host.major || version > host {
            return refused(format!(
                "{package}@{version} is not provided: this host implements {package}@{host}"
            ));
        }
        match interfaces::by_wit(path) {
            Some(row) => row,
            None => {
                return refused(format!(
                    "{package}/{interface} is not an interface of this host"
                ));
            }
        }
    } else {
        let Some(wasi) = package.strip_prefix("wasi:") else {
            return refused(format!("{package} is not provided by this host"));
        };
        if version.major != 0 || version.minor != 2 {
            return refused(format!(
                "wasi:{wasi}@{version} is not provided: this host implements WASI 0.2"
            ));
        }
        match interfaces::by_wit(path) {
            Some(row) => row,
            None => return refused(format!("{path} is not provided by this host")),
        }
    };
    match crate::units::unit(row).map(|unit| (unit.audit)(path, grants)) {
        Some(Ok(granted_by)) => ImportVerdict::Allowed { granted_by },
        Some(Err(reason)) => refused(reason),
        None => refused(format!("{path} is not provided by this host")),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod properties;
