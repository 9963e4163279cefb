//! What a sandbox unit is: an interface's audit rule and linker entry
//! ([`Unit`]), and the audit's verdict type ([`GrantedBy`]). A leaf: the
//! units (`super`, `crate::net::units`), the registry of units
//! (`super::UNITS`) and the surface audit (`crate::audit`) all import it,
//! and it imports none of them.

use crate::engine::SharedEngine;
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::Grants;
use serde::Serialize;
use wasmtime::component::Linker;

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
    /// Linked, inert: no `grants.filesystem`, so no preopened directory.
    FilesystemInert,
    /// Linked, inert: no `grants.network`; creating a socket is denied by
    /// the PEP, with a receipt.
    NetworkInert,
    /// Linked, inert: `grants.network` names no host; every lookup is
    /// denied by the PEP, with a receipt.
    NameLookupInert,
    /// The table's grant that enables the interface is given (a grant of
    /// the table with a shape, `Grant::shape`: `grants.config`, ...);
    /// serialized as the grant (`config`).
    #[serde(untagged)]
    Grant(Grant),
}

impl GrantedBy {
    /// The manifest field that grants it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Always => "always granted",
            Self::AlwaysEmptyEnv => "always linked; holds only grants.env variables, none here",
            Self::Filesystem => Grant::Filesystem.describe(),
            Self::Network => Grant::Network.describe(),
            Self::NetworkName => "grants.network (a host name)",
            Self::NetworkUdpInert => "grants.network; linked but every UDP use is denied",
            Self::Env => Grant::Env.describe(),
            Self::Instruments => Grant::Instruments.describe(),
            Self::DeviceHid => Grant::Hid.describe(),
            Self::Grant(g) => g.describe(),
            Self::FilesystemInert => {
                "linked, inert: no directory is granted (grants.filesystem), so there is none to open"
            }
            Self::NetworkInert => {
                "linked, inert: no destination is granted (grants.network); every socket and name lookup is denied and receipted"
            }
            Self::NameLookupInert => {
                "linked, inert: no host name is granted (grants.network); every lookup is denied and receipted"
            }
        }
    }

    /// The grant the import puts to use; `None` for what every capability
    /// has and for imports linked without any authority.
    pub fn grant(self) -> Option<Grant> {
        match self {
            // Linked, but every use is refused: it exercises no grant.
            Self::Always
            | Self::AlwaysEmptyEnv
            | Self::NetworkUdpInert
            | Self::FilesystemInert
            | Self::NetworkInert
            | Self::NameLookupInert => None,
            Self::Filesystem => Some(Grant::Filesystem),
            Self::Network | Self::NetworkName => Some(Grant::Network),
            Self::Env => Some(Grant::Env),
            Self::Instruments => Some(Grant::Instruments),
            Self::DeviceHid => Some(Grant::Hid),
            Self::Grant(g) => Some(g),
        }
    }

    /// Whether the import is linked without any authority: imported but
    /// not granted, every use refused (see the module's documentation).
    pub fn is_inert(self) -> bool {
        matches!(
            self,
            Self::FilesystemInert | Self::NetworkInert | Self::NameLookupInert
        )
    }
}

/// An interface's sandbox unit, for a task whose store holds `T`.
#[derive(Debug)]
pub(crate) struct Unit<T: 'static> {
    /// The name of its row in the table of interfaces.
    pub(crate) interface: &'static str,
    /// Its audit rule: the verdict on one of its WIT interfaces
    /// (`package/interface`, no version) under `grants`: what allows it,
    /// or why it is refused.
    pub(crate) audit: fn(&str, &Grants) -> Result<GrantedBy, String>,
    /// Adds it to a task's linker: only what `grants` allow (an interface
    /// linked inert when not granted is linked whatever the grants).
    pub(crate) link: Link<T>,
}

/// A unit's linker entry.
pub(crate) type Link<T> = fn(&mut Linker<T>, &SharedEngine, &Grants) -> wasmtime::Result<()>;

/// The audit rule of an interface every capability has.
pub(crate) fn always(_: &str, _: &Grants) -> Result<GrantedBy, String> {
    Ok(GrantedBy::Always)
}
