//! Surface audit (layer A): a component's imports against what its grants
//! allow.
//!
//! Every import of the component is classified before anything is
//! instantiated. An import is allowed when it is always granted (the
//! `hcp:capability` basics, `wasi:io`, clocks, random, stdio, exit) or when a
//! grant of the manifest allows it; anything else refuses the component, and
//! the report names each such import and why.

use hcp_contracts::manifest::{Grants, HOST_WIT_PACKAGE, HOST_WIT_VERSION};
use serde::Serialize;
use std::fmt;

/// Why an interface may be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantedBy {
    /// Every capability has it.
    Always,
    /// Linked for every capability but empty: `wasi:cli/environment` holds
    /// no arguments and only the variables `grants.env` names (none by
    /// default). Rust's standard library imports it unconditionally.
    AlwaysEmptyEnv,
    /// `grants.filesystem` is not empty.
    Filesystem,
    /// `grants.network` is not empty.
    Network,
    /// `grants.network` names a host (not only addresses).
    NetworkName,
    /// Linked with `grants.network` but inert: every UDP socket is refused
    /// (grants admit TCP only). Rust's `std::net` imports UDP with TCP.
    NetworkUdpInert,
    /// `grants.env` is not empty.
    Env,
    /// `grants.instruments` is not empty.
    Instruments,
    /// `grants.devices` names `hid`.
    DeviceHid,
}

impl GrantedBy {
    /// The manifest field that grants it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Always => "always granted",
            Self::AlwaysEmptyEnv => "always linked; holds only grants.env variables, none here",
            Self::Filesystem => "grants.filesystem",
            Self::Network => "grants.network",
            Self::NetworkName => "grants.network (a host name)",
            Self::NetworkUdpInert => "grants.network; linked but every UDP use is denied",
            Self::Env => "grants.env",
            Self::Instruments => "grants.instruments",
            Self::DeviceHid => "grants.devices: hid",
        }
    }
}

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

/// The grants in printable form.
#[derive(Debug, Clone, Serialize)]
pub struct GrantsSummary {
    /// `host_path -> guest_path (access)`.
    pub filesystem: Vec<String>,
    /// `host:port`.
    pub network: Vec<String>,
    /// Variable names.
    pub env: Vec<String>,
    /// Instruments.
    pub instruments: Vec<String>,
    /// Devices.
    pub devices: Vec<String>,
}

impl GrantsSummary {
    /// Summarizes resolved grants.
    pub fn of(grants: &Grants) -> Self {
        Self {
            filesystem: grants
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
            network: grants
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
            env: grants.env.clone(),
            instruments: grants.instruments.clone(),
            devices: grants.devices.clone(),
        }
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
        let g = &self.grants;
        for (what, list) in [
            ("filesystem", &g.filesystem),
            ("network", &g.network),
            ("env", &g.env),
            ("instruments", &g.instruments),
            ("devices", &g.devices),
        ] {
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
        if refused == 0 {
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

/// WASI interfaces (package/interface) every capability may import.
const ALWAYS_WASI: &[&str] = &[
    "io/error",
    "io/poll",
    "io/streams",
    "clocks/wall-clock",
    "clocks/monotonic-clock",
    "random/random",
    "random/insecure",
    "random/insecure-seed",
    "cli/exit",
    "cli/stdin",
    "cli/stdout",
    "cli/stderr",
    "cli/terminal-input",
    "cli/terminal-output",
    "cli/terminal-stdin",
    "cli/terminal-stdout",
    "cli/terminal-stderr",
];

/// `hcp:capability` interfaces every capability may import.
const ALWAYS_HCP: &[&str] = &["types", "log", "artifacts", "checkpoints"];

/// Classifies one import name against the grants.
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
    let allowed = |granted_by| ImportVerdict::Allowed { granted_by };
    if package == HOST_WIT_PACKAGE {
        let host =
            semver::Version::parse(HOST_WIT_VERSION).unwrap_or(semver::Version::new(1, 0, 0));
        if version.major != host.major || version > host {
            return refused(format!(
                "{package}@{version} is not provided: this host implements {package}@{host}"
            ));
        }
        if ALWAYS_HCP.contains(&interface) {
            return allowed(GrantedBy::Always);
        }
        return match interface {
            "instrument" if !grants.instruments.is_empty() => allowed(GrantedBy::Instruments),
            "instrument" => refused("no instrument is granted (grants.instruments)".into()),
            "hid" if grants.devices.iter().any(|d| d == "hid") => allowed(GrantedBy::DeviceHid),
            "hid" => refused("the hid device is not granted (grants.devices)".into()),
            _ => refused(format!(
                "{package}/{interface} is not an interface of this host"
            )),
        };
    }
    let Some(wasi) = package.strip_prefix("wasi:") else {
        return refused(format!("{package} is not provided by this host"));
    };
    if version.major != 0 || version.minor != 2 {
        return refused(format!(
            "wasi:{wasi}@{version} is not provided: this host implements WASI 0.2"
        ));
    }
    let key = format!("{wasi}/{interface}");
    if ALWAYS_WASI.contains(&key.as_str()) {
        return allowed(GrantedBy::Always);
    }
    let net = !grants.network.is_empty();
    match key.as_str() {
        "cli/environment" if !grants.env.is_empty() => allowed(GrantedBy::Env),
        "cli/environment" => allowed(GrantedBy::AlwaysEmptyEnv),
        "filesystem/types" | "filesystem/preopens" if !grants.filesystem.is_empty() => {
            allowed(GrantedBy::Filesystem)
        }
        "filesystem/types" | "filesystem/preopens" => {
            refused("no directory is granted (grants.filesystem)".into())
        }
        "sockets/network"
        | "sockets/instance-network"
        | "sockets/tcp"
        | "sockets/tcp-create-socket"
        | "http/types"
        | "http/outgoing-handler"
            if net =>
        {
            allowed(GrantedBy::Network)
        }
        "sockets/ip-name-lookup" if grants.grants_names() => allowed(GrantedBy::NetworkName),
        "sockets/ip-name-lookup" => {
            refused("name lookup needs a host name in grants.network".into())
        }
        "sockets/network"
        | "sockets/instance-network"
        | "sockets/tcp"
        | "sockets/tcp-create-socket"
        | "http/types"
        | "http/outgoing-handler" => refused("no destination is granted (grants.network)".into()),
        "sockets/udp" | "sockets/udp-create-socket" if net => allowed(GrantedBy::NetworkUdpInert),
        "sockets/udp" | "sockets/udp-create-socket" => {
            refused("no destination is granted (grants.network), and UDP never is".into())
        }
        _ => refused(format!("wasi:{key} is not provided by this host")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_contracts::manifest::{Access, FsGrant, NetGrant, NetHost};

    fn refused(name: &str, grants: &Grants) -> bool {
        matches!(classify(name, grants), ImportVerdict::Refused { .. })
    }

    #[test]
    fn nothing_but_the_basics_without_grants() {
        let none = Grants::default();
        for ok in [
            "wasi:io/streams@0.2.6",
            "wasi:cli/stdout@0.2.12",
            "wasi:clocks/monotonic-clock@0.2.0",
            "hcp:capability/log@1.0.0",
            "hcp:capability/artifacts@1.0.0",
        ] {
            assert!(!refused(ok, &none), "{ok} refused");
        }
        for bad in [
            "wasi:filesystem/types@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
            "wasi:sockets/tcp@0.2.6",
            "wasi:sockets/ip-name-lookup@0.2.6",
            "wasi:http/outgoing-handler@0.2.6",
            "wasi:sockets/udp@0.2.6",
            "hcp:capability/instrument@1.0.0",
            "hcp:capability/hid@1.0.0",
            "hcp:capability/log@2.0.0",
            "hcp:capability/log@1.1.0",
            "wasi:cli/stdout@0.3.0",
            "evil:backdoor/shell@1.0.0",
            "wasi:cli/stdout",
            "plain-function@1.0.0",
        ] {
            assert!(refused(bad, &none), "{bad} allowed");
        }
    }

    #[test]
    fn each_grant_opens_exactly_its_interfaces() {
        let fs = Grants {
            filesystem: vec![FsGrant {
                host_path: "/tmp".into(),
                guest_path: "/tmp".into(),
                access: Access::ReadOnly,
                identity: None,
            }],
            ..Grants::default()
        };
        assert!(!refused("wasi:filesystem/types@0.2.6", &fs));
        assert!(refused("wasi:sockets/tcp@0.2.6", &fs));

        let ip_only = Grants {
            network: vec![NetGrant {
                host: NetHost::Ip([127, 0, 0, 1].into()),
                port: 80,
                allow_private: false,
            }],
            ..Grants::default()
        };
        assert!(!refused("wasi:sockets/tcp@0.2.6", &ip_only));
        assert!(!refused("wasi:http/outgoing-handler@0.2.6", &ip_only));
        assert!(refused("wasi:sockets/ip-name-lookup@0.2.6", &ip_only));
        assert_eq!(
            classify("wasi:sockets/udp@0.2.6", &ip_only),
            ImportVerdict::Allowed {
                granted_by: GrantedBy::NetworkUdpInert
            }
        );
        assert!(refused("wasi:filesystem/types@0.2.6", &ip_only));

        let named = Grants {
            network: vec![NetGrant {
                host: NetHost::Name("example.com".into()),
                port: 443,
                allow_private: false,
            }],
            ..Grants::default()
        };
        assert!(!refused("wasi:sockets/ip-name-lookup@0.2.6", &named));

        let env = Grants {
            env: vec!["LANG".into()],
            ..Grants::default()
        };
        assert_eq!(
            classify("wasi:cli/environment@0.2.6", &env),
            ImportVerdict::Allowed {
                granted_by: GrantedBy::Env
            }
        );
        assert_eq!(
            classify("wasi:cli/environment@0.2.6", &Grants::default()),
            ImportVerdict::Allowed {
                granted_by: GrantedBy::AlwaysEmptyEnv
            }
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Without grants, nothing outside the always-granted basics is ever
        /// allowed, whatever the name.
        #[test]
        fn no_grant_no_surface(package in "[a-z:]{1,12}", interface in "[a-z-]{1,16}", version in "[0-9]\\.[0-9]\\.[0-9]") {
            let name = format!("{package}/{interface}@{version}");
            if let ImportVerdict::Allowed { granted_by } = classify(&name, &Grants::default()) {
                prop_assert!(matches!(granted_by, GrantedBy::Always | GrantedBy::AlwaysEmptyEnv), "{name}");
            }
        }

        /// Arbitrary text never panics the classifier.
        #[test]
        fn classify_never_panics(name in "\\PC{0,60}") {
            let _ = classify(&name, &Grants::default());
        }
    }
}
