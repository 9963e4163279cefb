//! The operations of host calls ([`Op`]): `interface.operation`, the names
//! receipts record. A leaf: the scope, the verdicts and every interface's
//! rules name operations, and the rules that decide each one are the
//! interfaces' (`Op::rules`, in `super::interfaces`), not this module's.

use serde::{Deserialize, Serialize};

macro_rules! ops {
    ($($(#[$doc:meta])* $variant:ident = $name:literal;)*) => {
        /// A kind of host call: `interface.operation`. The names are stable:
        /// receipts record them as `call`. Each is an operation of a row of
        /// [`hcp_contracts::interfaces::INTERFACES`] (a test checks both
        /// list the same operations).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Op {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Op {
            /// Every operation.
            pub const ALL: &[Op] = &[$(Op::$variant,)*];

            /// The stable name, e.g. `fs.open`.
            pub fn name(self) -> &'static str {
                match self { $(Op::$variant => $name,)* }
            }

            /// The WIT interface the call belongs to, as the table of
            /// interfaces ([`hcp_contracts::interfaces`]) gives it.
            pub fn interface(self) -> &'static str {
                hcp_contracts::interfaces::by_operation(self.name()).map_or("", |(_, o)| o.wit)
            }

            /// The operation named `name`.
            pub fn from_name(name: &str) -> Option<Op> {
                match name { $($name => Some(Op::$variant),)* _ => None }
            }
        }
    };
}

ops! {
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

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
