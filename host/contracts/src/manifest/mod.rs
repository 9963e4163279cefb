//! The capability manifest: the seed's Capability Declaration plus the
//! component, its grants, its limits and its default safety envelope.
//!
//! [`load`] reads a manifest file and returns a [`Manifest`] whose every value
//! is checked: the document matches `schemas/capability.schema.json`, the
//! version is semver, the declaration's schemas compile, grant paths are
//! absolute existing directories, network hosts are names or addresses, and the
//! component's sha256 matches the pinned digest. Every problem is reported
//! with its JSON pointer, all at once.

mod access;
mod doc;
mod fs_grant;
mod hashed;
mod limits;
mod load;
mod table_grants;

pub use access::Access;
pub use doc::{
    ComponentDoc, Declaration, DeclaredConstraints, EnvelopeParameter, FloorSource, FsGrantDoc,
    GrantsDoc, ManifestDoc, NetGrantDoc, Safety, SafetyEnvelope,
};
pub use fs_grant::dir_identity;
pub use hashed::component_hashes;
pub use limits::{Limits, LimitsDoc};
pub use load::{LoadOptions, ManifestError, from_value, load, load_installed};
pub use table_grants::{GrantItem, TableGrants};

use crate::levels::RiskLevel;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The WIT package this host implements; a component's world must be
/// semver-compatible with it (same major version, not newer).
pub const HOST_WIT_PACKAGE: &str = "hcp:capability";
/// Version of [`HOST_WIT_PACKAGE`] (kept equal to `wit/world.wit` by a test).
pub const HOST_WIT_VERSION: &str = "1.0.0";
/// The only world a capability may target.
pub const HOST_WIT_WORLD: &str = "capability";

/// A checked manifest, ready to build a sandbox from.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The document as written.
    pub doc: ManifestDoc,
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    /// Parsed `capability.version`.
    pub version: semver::Version,
    /// The component, read and hashed.
    pub component: ComponentFile,
    /// Parsed `component.world`.
    pub world: WorldRef,
    /// Resolved grants.
    pub grants: Grants,
    /// Limits with defaults filled in.
    pub limits: Limits,
    /// Deadline of a task unless the caller asks for less.
    pub max_duration: Duration,
    /// Tasks of this capability at once.
    pub concurrent_limit: u32,
    /// Compiled `input_schema`.
    pub input_schema: Arc<jsonschema::Validator>,
    /// Compiled `output_schema`.
    pub output_schema: Arc<jsonschema::Validator>,
}

impl Manifest {
    /// The capability's name.
    pub fn name(&self) -> &str {
        &self.doc.capability.name
    }

    /// The declared risk ceiling.
    pub fn risk_ceiling(&self) -> RiskLevel {
        self.doc.capability.safety.risk_ceiling
    }

    /// `name@version`.
    pub fn id(&self) -> String {
        format!("{}@{}", self.name(), self.version)
    }

    /// The version as written (already checked to be semver); cheaper than
    /// formatting `version` on every task.
    pub fn version_str(&self) -> &str {
        &self.doc.capability.version
    }
}

/// The component's bytes and identity.
#[derive(Clone)]
pub struct ComponentFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// `sha256:<hex>` of `bytes`.
    pub digest: String,
    /// Whether the manifest pinned this digest (false: computed at load).
    pub pinned: bool,
    /// The bytes whose digest was checked: compile these, not the file again.
    pub bytes: Arc<[u8]>,
}

impl std::fmt::Debug for ComponentFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentFile")
            .field("path", &self.path)
            .field("digest", &self.digest)
            .field("pinned", &self.pinned)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// A parsed `package:namespace/world@version` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldRef {
    /// `hcp:capability`.
    pub package: String,
    /// `capability`.
    pub world: String,
    /// `1.0.0`.
    pub version: semver::Version,
}

/// Grants, resolved.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Preopened directories.
    pub filesystem: Vec<FsGrant>,
    /// Outbound TCP destinations.
    pub network: Vec<NetGrant>,
    /// Environment variable names passed through.
    pub env: Vec<String>,
    /// Instruments.
    pub instruments: Vec<String>,
    /// Devices.
    pub devices: Vec<String>,
    /// The grants of the table by shape (`config`, ...), each name once.
    pub table: TableGrants,
}

impl Grants {
    /// Whether any granted destination is a name (so name lookup is needed).
    pub fn grants_names(&self) -> bool {
        self.network
            .iter()
            .any(|g| matches!(g.host, NetHost::Name(_)))
    }
}

/// A granted directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsGrant {
    /// Host directory: absolute, normalized, with no symbolic link in any
    /// component (the loader refuses a path that passes through one).
    pub host_path: PathBuf,
    /// Absolute path the guest sees.
    pub guest_path: String,
    /// Read-only or read-write.
    pub access: Access,
    /// The directory the grant was resolved to (at load, or as the install
    /// recorded it): each task opens `host_path` without following a link
    /// and must find this directory there. `None` only for a capability
    /// installed before identities were recorded.
    pub identity: Option<DirIdentity>,
}

/// Which directory a grant is: its device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirIdentity {
    /// Device number (`st_dev`).
    pub dev: u64,
    /// Inode number (`st_ino`).
    pub ino: u64,
}

impl std::fmt::Display for DirIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {}, inode {}", self.dev, self.ino)
    }
}

/// A granted destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetGrant {
    /// Name or address.
    pub host: NetHost,
    /// TCP port.
    pub port: u16,
    /// Admit private addresses a name resolves to.
    pub allow_private: bool,
}

/// A granted host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetHost {
    /// An address literal: admitted exactly.
    Ip(IpAddr),
    /// A DNS name (lower-cased): resolved by the host.
    Name(String),
}

impl std::fmt::Display for NetHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Self::Ip(a) => write!(f, "{a}"),
            Self::Name(n) => f.write_str(n),
        }
    }
}

/// Deadline of a task whose declaration sets no `max_duration`.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(600);
