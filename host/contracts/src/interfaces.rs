//! The host interfaces a capability may import, as one table: for each its
//! name, its WIT interfaces, the grant that enables it, the operations the
//! PEP decides on it and the manifest limits that bound it.
//!
//! This is where an interface is declared; the rest of the host iterates
//! [`INTERFACES`] and [`Grant::ALL`] instead of naming interfaces and
//! grants again: the surface audit and the linker (`hcp-sandbox`, one unit
//! per row), the PEP (`hcp-policy`, one module per row that has
//! operations), bundle review and diff (`hcp-bundle`) and the CLI views.
//! docs/architecture.md ("Adding an interface") lists the files a new row
//! brings with it.

use crate::manifest::{GrantItem, Grants, GrantsDoc};
use serde::Serialize;

/// A grant of the manifest that enables an interface: the grant list,
/// written once. Each is a field of `grants` ([`Grant::field`]); the
/// order is the one reports list them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// `grants.filesystem` (`wasi:filesystem`).
    Filesystem,
    /// `grants.network` (`wasi:sockets`, `wasi:http`).
    Network,
    /// `grants.env` (`wasi:cli/environment`).
    Env,
    /// `grants.instruments` (`hcp:capability/instrument`).
    Instruments,
    /// `grants.devices: hid` (`hcp:capability/hid`).
    Hid,
    /// `grants.config` (`wasi:config/store`).
    Config,
    /// `grants.keyvalue` (`wasi:keyvalue`).
    Keyvalue,
}

impl Grant {
    /// Every grant, in the order reports list them.
    pub const ALL: [Grant; 7] = [
        Grant::Filesystem,
        Grant::Network,
        Grant::Env,
        Grant::Instruments,
        Grant::Hid,
        Grant::Config,
        Grant::Keyvalue,
    ];

    /// The field of `grants` that holds it.
    pub const fn field(self) -> &'static str {
        match self {
            Self::Filesystem => "filesystem",
            Self::Network => "network",
            Self::Env => "env",
            Self::Instruments => "instruments",
            Self::Hid => "devices",
            Self::Config => "config",
            Self::Keyvalue => "keyvalue",
        }
    }

    /// The fields of `grants`, in [`Grant::ALL`]'s order.
    pub const FIELDS: [&'static str; Self::ALL.len()] = {
        let mut fields = [""; Self::ALL.len()];
        let mut i = 0;
        while i < Self::ALL.len() {
            fields[i] = Self::ALL[i].field();
            i += 1;
        }
        fields
    };

    /// The grant held by the field `field` of `grants`.
    pub fn by_field(field: &str) -> Option<Grant> {
        Self::ALL.into_iter().find(|g| g.field() == field)
    }

    /// How the grant is written when it has no typed field of its own in
    /// `GrantsDoc` and `Grants` (the first interfaces' grants have one):
    /// then it is an entry of their `table` ([`crate::manifest::TableGrants`]), and its
    /// resolution, its checks (each name once) and how reports show it
    /// follow from the shape.
    pub const fn shape(self) -> Option<GrantShape> {
        match self {
            Self::Filesystem | Self::Network | Self::Env | Self::Instruments | Self::Hid => None,
            Self::Config => Some(GrantShape::Names),
            Self::Keyvalue => Some(GrantShape::Items { name: "bucket" }),
        }
    }

    /// Whether an install admits the grant's items by name, as it does
    /// `env`, `instruments` and `devices`, for a grant of the table with a
    /// shape: `install.json` lists them under the grant's field (`*`:
    /// any; absent: none). `false`: the grant needs no admission (a
    /// `wasi:config` key reads only what the operator's policy provides).
    pub const fn admitted_by_name(self) -> bool {
        match self {
            Self::Filesystem
            | Self::Network
            | Self::Env
            | Self::Instruments
            | Self::Hid
            | Self::Config => false,
            Self::Keyvalue => true,
        }
    }

    /// How reports name it: `grants.network`, `grants.devices: hid`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Filesystem => "grants.filesystem",
            Self::Network => "grants.network",
            Self::Env => "grants.env",
            Self::Instruments => "grants.instruments",
            Self::Hid => "grants.devices: hid",
            Self::Config => "grants.config",
            Self::Keyvalue => "grants.keyvalue",
        }
    }

    /// Whether resolved `grants` give it.
    pub fn is_granted(self, grants: &Grants) -> bool {
        match self {
            Self::Filesystem => !grants.filesystem.is_empty(),
            Self::Network => !grants.network.is_empty(),
            Self::Env => !grants.env.is_empty(),
            Self::Instruments => !grants.instruments.is_empty(),
            Self::Hid => grants.devices.iter().any(|d| d == "hid"),
            _ => !grants.table.items(self).is_empty(),
        }
    }

    /// What the grants as written give of it, one item each (a directory,
    /// `host:port`, a name, a name with its access); empty when not granted.
    pub fn named(self, doc: &GrantsDoc) -> Vec<String> {
        match self {
            Self::Filesystem => doc.filesystem.iter().map(|f| f.path.clone()).collect(),
            Self::Network => doc
                .network
                .iter()
                .map(|n| format!("{}:{}", n.host, n.port))
                .collect(),
            Self::Env => doc.env.clone(),
            Self::Instruments => doc.instruments.clone(),
            Self::Hid if doc.devices.iter().any(|d| d == "hid") => vec!["hid".to_owned()],
            Self::Hid => Vec::new(),
            _ => doc.table.items(self).iter().map(GrantItem::line).collect(),
        }
    }

    /// The grant's field as written when it is a list of names
    /// (`env`, `instruments`, `devices`, and the table's grants of
    /// [`GrantShape::Names`]); `None` for the structured ones.
    pub fn names(self, doc: &GrantsDoc) -> Option<Vec<String>> {
        match self {
            Self::Filesystem | Self::Network => None,
            Self::Env => Some(doc.env.clone()),
            Self::Instruments => Some(doc.instruments.clone()),
            Self::Hid => Some(doc.devices.clone()),
            _ if self.shape() == Some(GrantShape::Names) => Some(doc.table.names(self)),
            _ => None,
        }
    }

    /// The grant's field as resolved when it is a list of names; `None`
    /// for the structured ones (directories, destinations, items with an
    /// access).
    pub fn resolved_names(self, grants: &Grants) -> Option<Vec<String>> {
        match self {
            Self::Filesystem | Self::Network => None,
            Self::Env => Some(grants.env.clone()),
            Self::Instruments => Some(grants.instruments.clone()),
            Self::Hid => Some(grants.devices.clone()),
            _ if self.shape() == Some(GrantShape::Names) => Some(grants.table.names(self)),
            _ => None,
        }
    }

    /// The interfaces it enables.
    pub fn interfaces(self) -> impl Iterator<Item = &'static Interface> {
        INTERFACES.iter().filter(move |i| i.grant == Some(self))
    }
}

/// How a grant of the table without a typed field is written
/// ([`Grant::shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantShape {
    /// A list of names: `"config": ["greeting", "api_token"]`.
    Names,
    /// A list of items, each a name under `name` and an `access`
    /// (`read-only` or `read-write`): `"keyvalue": [{"bucket": "cache",
    /// "access": "read-write"}]`.
    Items {
        /// The key of the item's name.
        name: &'static str,
    },
}

/// One host interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interface {
    /// How reports name it: a WIT package (`wasi:filesystem`) or one
    /// interface of it (`hcp:capability/instrument`).
    pub name: &'static str,
    /// Its WIT interfaces, `package/interface` without a version, as
    /// a component imports them.
    pub wit: &'static [&'static str],
    /// The grant that enables it; `None`: every capability has it.
    pub grant: Option<Grant>,
    /// The operations the PEP decides on it.
    pub operations: &'static [Operation],
    /// The manifest limits (`limits.*`) that bound it.
    pub limits: &'static [&'static str],
}

/// One operation of an interface: a kind of host call the PEP decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    /// Its stable name, as receipts record it (`fs.open`).
    pub name: &'static str,
    /// The WIT interface it belongs to (`wasi:filesystem/types`).
    pub wit: &'static str,
}

// The operations of host calls, as the PEP decides them and receipts
// record them (`call`): one per operation of the rows below (a test holds
// the two lists equal).
crate::op::ops! {
    /// `log.write`: a structured log line.
    LogWrite = "log.write";
    /// `artifacts.create`.
    ArtifactCreate = "artifacts.create";
    /// `checkpoints.save`.
    CheckpointSave = "checkpoints.save";
    /// `checkpoints.load`.
    CheckpointLoad = "checkpoints.load";
    /// `instrument.command`: a command to an instrument.
    InstrumentCommand = "instrument.command";
    /// `instrument.read`: a reading, no side effect.
    InstrumentRead = "instrument.read";
    /// `descriptor.open-at`.
    FsOpen = "fs.open";
    /// `descriptor.stat-at`.
    FsStat = "fs.stat";
    /// `descriptor.metadata-hash-at`.
    FsMetadataHash = "fs.metadata_hash";
    /// `descriptor.readlink-at`.
    FsReadlink = "fs.readlink";
    /// `descriptor.create-directory-at`.
    FsMkdir = "fs.mkdir";
    /// `descriptor.remove-directory-at`.
    FsRmdir = "fs.rmdir";
    /// `descriptor.unlink-file-at`.
    FsUnlink = "fs.unlink";
    /// `descriptor.rename-at`.
    FsRename = "fs.rename";
    /// `descriptor.link-at`.
    FsLink = "fs.link";
    /// `descriptor.symlink-at`.
    FsSymlink = "fs.symlink";
    /// `descriptor.set-times-at`.
    FsSetTimes = "fs.set_times";
    /// Bytes written into a file of a read-write grant (`write`, an output
    /// stream, `set-size` growth), asked for before they are written.
    FsWrite = "fs.write";
    /// A TCP connect.
    NetConnect = "net.connect";
    /// A TCP bind (only the implicit bind of a client connect is admissible).
    NetBind = "net.bind";
    /// A TCP listen: never admissible.
    NetListen = "net.listen";
    /// A TCP accept: never admissible.
    NetAccept = "net.accept";
    /// Any UDP use: never admissible.
    NetUdp = "net.udp";
    /// A name lookup.
    NetLookup = "net.lookup";
    /// Creating a TCP socket (the target is the address family).
    NetSocket = "net.socket";
    /// An outgoing HTTP request.
    HttpRequest = "http.request";
    /// `hid.propose`: a keyboard or mouse action proposed to the operator.
    HidPropose = "hid.propose";
    /// `hid.wait`: waiting for a proposal's outcome.
    HidWait = "hid.wait";
    /// `wasi:config/store.get`: one key's value (the target is the key).
    ConfigGet = "config.get";
    /// `wasi:config/store.get-all`: every granted key's value.
    ConfigGetAll = "config.get_all";
    /// `wasi:keyvalue/store.open`: opening a granted bucket.
    KvOpen = "kv.open";
    /// `bucket.get`.
    KvGet = "kv.get";
    /// `bucket.set`: the value's size and what the bucket holds after it.
    KvSet = "kv.set";
    /// `bucket.delete`.
    KvDelete = "kv.delete";
    /// `bucket.exists`.
    KvExists = "kv.exists";
    /// `bucket.list-keys`.
    KvListKeys = "kv.list_keys";
    /// `wasi:keyvalue/atomics.increment`: a write, as `kv.set`.
    KvIncrement = "kv.increment";
}

const fn op(name: &'static str, wit: &'static str) -> Operation {
    Operation { name, wit }
}

const FS: &str = "wasi:filesystem/types";
const KV: &str = "wasi:keyvalue/store";

/// Every interface the host provides.
pub const INTERFACES: &[Interface] = &[
    Interface {
        name: "wasi:io",
        wit: &["wasi:io/error", "wasi:io/poll", "wasi:io/streams"],
        grant: None,
        operations: &[],
        limits: &[],
    },
    Interface {
        name: "wasi:clocks",
        wit: &["wasi:clocks/wall-clock", "wasi:clocks/monotonic-clock"],
        grant: None,
        operations: &[],
        limits: &[],
    },
    Interface {
        name: "wasi:random",
        wit: &[
            "wasi:random/random",
            "wasi:random/insecure",
            "wasi:random/insecure-seed",
        ],
        grant: None,
        operations: &[],
        limits: &[],
    },
    Interface {
        name: "wasi:cli",
        wit: &[
            "wasi:cli/exit",
            "wasi:cli/stdin",
            "wasi:cli/stdout",
            "wasi:cli/stderr",
            "wasi:cli/terminal-input",
            "wasi:cli/terminal-output",
            "wasi:cli/terminal-stdin",
            "wasi:cli/terminal-stdout",
            "wasi:cli/terminal-stderr",
        ],
        grant: None,
        operations: &[],
        limits: &["log_bytes"],
    },
    Interface {
        name: "wasi:cli/environment",
        wit: &["wasi:cli/environment"],
        grant: Some(Grant::Env),
        operations: &[],
        limits: &[],
    },
    Interface {
        name: "wasi:filesystem",
        wit: &[FS, "wasi:filesystem/preopens"],
        grant: Some(Grant::Filesystem),
        operations: &[
            op("fs.open", FS),
            op("fs.stat", FS),
            op("fs.metadata_hash", FS),
            op("fs.readlink", FS),
            op("fs.mkdir", FS),
            op("fs.rmdir", FS),
            op("fs.unlink", FS),
            op("fs.rename", FS),
            op("fs.link", FS),
            op("fs.symlink", FS),
            op("fs.set_times", FS),
            op("fs.write", FS),
        ],
        limits: &[],
    },
    Interface {
        name: "wasi:sockets",
        wit: &[
            "wasi:sockets/network",
            "wasi:sockets/instance-network",
            "wasi:sockets/tcp",
            "wasi:sockets/tcp-create-socket",
            "wasi:sockets/udp",
            "wasi:sockets/udp-create-socket",
            "wasi:sockets/ip-name-lookup",
        ],
        grant: Some(Grant::Network),
        operations: &[
            op("net.connect", "wasi:sockets/tcp"),
            op("net.bind", "wasi:sockets/tcp"),
            op("net.listen", "wasi:sockets/tcp"),
            op("net.accept", "wasi:sockets/tcp"),
            op("net.udp", "wasi:sockets/udp"),
            op("net.lookup", "wasi:sockets/ip-name-lookup"),
            op("net.socket", "wasi:sockets/tcp-create-socket"),
        ],
        limits: &[],
    },
    Interface {
        name: "wasi:http",
        wit: &["wasi:http/types", "wasi:http/outgoing-handler"],
        grant: Some(Grant::Network),
        operations: &[op("http.request", "wasi:http/outgoing-handler")],
        limits: &[],
    },
    Interface {
        name: "hcp:capability/types",
        wit: &["hcp:capability/types"],
        grant: None,
        operations: &[],
        limits: &[],
    },
    Interface {
        name: "hcp:capability/log",
        wit: &["hcp:capability/log"],
        grant: None,
        operations: &[op("log.write", "hcp:capability/log")],
        limits: &["log_bytes"],
    },
    Interface {
        name: "hcp:capability/artifacts",
        wit: &["hcp:capability/artifacts"],
        grant: None,
        operations: &[op("artifacts.create", "hcp:capability/artifacts")],
        limits: &["artifacts", "artifact_bytes"],
    },
    Interface {
        name: "hcp:capability/checkpoints",
        wit: &["hcp:capability/checkpoints"],
        grant: None,
        operations: &[
            op("checkpoints.save", "hcp:capability/checkpoints"),
            op("checkpoints.load", "hcp:capability/checkpoints"),
        ],
        limits: &["checkpoints", "checkpoint_bytes"],
    },
    Interface {
        name: "hcp:capability/instrument",
        wit: &["hcp:capability/instrument"],
        grant: Some(Grant::Instruments),
        operations: &[
            op("instrument.command", "hcp:capability/instrument"),
            op("instrument.read", "hcp:capability/instrument"),
        ],
        limits: &[],
    },
    Interface {
        name: "hcp:capability/hid",
        wit: &["hcp:capability/hid"],
        grant: Some(Grant::Hid),
        operations: &[
            op("hid.propose", "hcp:capability/hid"),
            op("hid.wait", "hcp:capability/hid"),
        ],
        limits: &[],
    },
    Interface {
        name: "wasi:config",
        wit: &["wasi:config/store"],
        grant: Some(Grant::Config),
        operations: &[
            op("config.get", "wasi:config/store"),
            op("config.get_all", "wasi:config/store"),
        ],
        limits: &[],
    },
    Interface {
        name: "wasi:keyvalue",
        wit: &[KV, "wasi:keyvalue/atomics"],
        grant: Some(Grant::Keyvalue),
        operations: &[
            op("kv.open", KV),
            op("kv.get", KV),
            op("kv.set", KV),
            op("kv.delete", KV),
            op("kv.exists", KV),
            op("kv.list_keys", KV),
            op("kv.increment", "wasi:keyvalue/atomics"),
        ],
        limits: &["kv_keys", "kv_value_bytes", "kv_bytes"],
    },
];

/// The interface `wit` (`package/interface`, no version) belongs to.
pub fn by_wit(wit: &str) -> Option<&'static Interface> {
    INTERFACES.iter().find(|i| i.wit.contains(&wit))
}

/// The interface that has the operation named `op`.
pub fn by_operation(op: &str) -> Option<(&'static Interface, &'static Operation)> {
    INTERFACES
        .iter()
        .find_map(|i| Some((i, i.operations.iter().find(|o| o.name == op)?)))
}

/// The interface named `name`.
pub fn by_name(name: &str) -> Option<&'static Interface> {
    INTERFACES.iter().find(|i| i.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Limits;
    use std::collections::BTreeSet;

    #[test]
    fn names_wit_and_operations_are_unique() {
        let mut names = BTreeSet::new();
        let mut wit = BTreeSet::new();
        let mut ops = BTreeSet::new();
        for i in INTERFACES {
            assert!(names.insert(i.name), "{}", i.name);
            for w in i.wit {
                assert!(wit.insert(*w), "{w}");
                assert!(
                    w.starts_with(i.name) || i.name.starts_with(w),
                    "{w} under {}",
                    i.name
                );
            }
            for o in i.operations {
                assert!(ops.insert(o.name), "{}", o.name);
                assert!(i.wit.contains(&o.wit), "{} of {}", o.name, i.name);
            }
        }
    }

    #[test]
    fn every_limit_named_is_in_the_limit_set() {
        for i in INTERFACES {
            for l in i.limits {
                assert!(Limits::NAMES.contains(l), "{l} of {}", i.name);
            }
        }
    }

    #[test]
    fn every_grant_enables_an_interface() {
        for g in Grant::ALL {
            assert!(g.interfaces().next().is_some(), "{g:?}");
        }
    }

    /// The `hcp:capability` rows are the interfaces of `wit/world.wit`'s
    /// package (its `capability` world aside).
    #[test]
    fn the_host_package_rows_are_its_wit_files() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");
        let mut in_wit = BTreeSet::new();
        for entry in std::fs::read_dir(dir).expect("wit dir") {
            let text = std::fs::read_to_string(entry.expect("entry").path()).unwrap_or_default();
            for line in text.lines() {
                if let Some(rest) = line.trim().strip_prefix("interface ") {
                    let name = rest.trim_end_matches('{').trim();
                    in_wit.insert(format!("hcp:capability/{name}"));
                }
            }
        }
        let rows: BTreeSet<String> = INTERFACES
            .iter()
            .flat_map(|i| i.wit.iter())
            .filter(|w| w.starts_with("hcp:capability/"))
            .map(|w| (*w).to_owned())
            .collect();
        assert_eq!(rows, in_wit);
    }
}
