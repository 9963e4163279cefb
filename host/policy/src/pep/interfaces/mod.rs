//! The PEP's rules, one module per interface of the table of interfaces
//! ([`hcp_contracts::interfaces::INTERFACES`]) that has operations: its
//! granted surface, its argument rules, its limits and, for instruments,
//! the safety envelope, behind one trait ([`InterfaceRules`]).
//!
//! The modules describe; [`super::decide`] decides: it runs the checks in
//! their fixed order (session, operator's dispatch, surface, arguments,
//! budgets, envelope, threat scan), asking the call's interface
//! ([`Op::rules`]) for its part of each, and the first failure
//! decides. Every rule here is pure, as `decide` is.
//!
//! An interface is registered here, once: its module, its operations in
//! [`Op`] (with the rules that decide them) and its arguments' types in
//! [`Args`]. Each type lives in its interface's module and gives the
//! generic code what it needs of the arguments ([`OwnArgs`]): the bytes
//! charged, the text a receipt keeps of a large call, the threat scan and
//! the withholding check; [`InterfaceRules::args`] reads them back from a
//! decision input. `call.rs`, `input.rs`, `bound.rs`, `threat.rs` and
//! `hcp_store::withhold` hold no arm of their own per interface.

pub mod artifacts;
pub mod checkpoints;
pub mod config;
pub mod filesystem;
pub mod hid;
pub mod http;
pub mod instrument;
pub mod keyvalue;
pub mod log;
pub mod sockets;

use super::bound::Cutter;
use super::call::Call;
use super::decide::{Counters, Decision};
use super::error::CallError;
use super::scope::Scope;
use super::threat::{Scan, Signals};
use crate::operator::InterfaceFile;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The interfaces' own policy files ([`crate::operator`]), in the order
/// they are loaded and hashed.
pub(crate) const FILES: &[InterfaceFile] = &[config::FILE];

/// One interface's part of the PEP's checks. A call reaches its
/// interface's rules only with an operation of that interface; arguments
/// that do not fit the operation fail [`InterfaceRules::surface`] closed
/// (`FAIL_CLOSED_ERROR`), so the later checks see them fitted.
pub(crate) trait InterfaceRules: Sync {
    /// Check 2: whether the call is within the session's granted surface
    /// (`DENY_TOOL_NOT_FOUND`).
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision>;

    /// Check 3: the pinned schema of the operation's arguments
    /// (`DENY_ARGS_INVALID`).
    fn arguments(&self, _call: &Call<'_>) -> Result<(), Decision> {
        Ok(())
    }

    /// Check 4, after the session's budgets: the interface's own limits
    /// (`BUDGET_EXCEEDED`).
    fn limits(&self, _scope: &Scope, _spent: &Counters, _call: &Call<'_>) -> Result<(), Decision> {
        Ok(())
    }

    /// Check 5: the safety envelope (`DENY_PROHIBITED_ACTION`,
    /// `DENY_ENVELOPE_HARD_LIMIT`).
    fn envelope(&self, _scope: &Scope, _call: &Call<'_>) -> Result<(), Decision> {
        Ok(())
    }

    /// The arguments of a call of `op` read back from a decision input.
    ///
    /// # Errors
    ///
    /// Arguments that do not fit the operation.
    fn args(&self, op: Op, raw: Value) -> Result<Args<'static>, CallError>;
}

/// `raw` as the arguments of a call of `op`.
///
/// # Errors
///
/// They do not fit `T`.
pub(crate) fn de<T: serde::de::DeserializeOwned>(op: Op, raw: Value) -> Result<T, CallError> {
    serde_json::from_value(raw).map_err(|e| CallError::Args {
        op: op.to_string(),
        reason: e.to_string(),
    })
}

/// What the generic code needs of an interface's own arguments type (a
/// variant of [`Args`]). Its JSON form is canonical: fields in key order,
/// strings and integers only (floats only where [`OwnArgs::floats`] says).
pub(crate) trait OwnArgs {
    /// The same type, owning its text.
    type Static;

    /// The same arguments, owning their text.
    fn into_static(self) -> Self::Static;

    /// Bytes the call moves through the host, for the `bytes` budget
    /// (`target` is the call's).
    fn budget_bytes(&self, _target: &str) -> u64 {
        0
    }

    /// Bytes of its text, as [`super::ARGS_PREFIX_BYTES`] counts them
    /// (a list item counts 3 beside its text).
    fn text_len(&self) -> usize;

    /// What a receipt keeps of it when the call is too large, in two
    /// steps around the call's target: `cut` cuts the short identifying
    /// strings to what is left of `c`, before the target is cut; ...
    fn cut(&self, c: &mut Cutter) -> Self::Static;

    /// ... then `cut_bulk` fills `kept` with the bulk (messages, payloads,
    /// paths) from what is left after the target.
    fn cut_bulk(&self, _kept: &mut Self::Static, _c: &mut Cutter) {}

    /// Whether its canonical form needs the JCS serializer (floats).
    fn floats(&self) -> bool {
        false
    }

    /// The threat scan of its strings (the target is scanned already).
    fn scan(&self, _s: &Scan, _signals: &mut Signals) {}

    /// Whether free text of it may have to be withheld from receipts
    /// (`hcp_store::withhold`): checked on every host call, without
    /// rendering it; errs on the side of looking closer.
    fn flagged(&self) -> bool {
        false
    }

    /// A field of JSON text that is withheld whole when any of its strings
    /// is flagged (its name, its text).
    fn json_text(&self) -> Option<(&'static str, &str)> {
        None
    }

    /// Whether the PEP reads the string at JSON `pointer` (relative to the
    /// arguments) to decide: withholding keeps it, since replay decides
    /// again from it.
    fn kept(&self, _pointer: &str) -> bool {
        false
    }
}

/// Bytes a list of strings counts in [`OwnArgs::text_len`].
pub(crate) fn list_len(v: &[super::Text<'_>]) -> usize {
    v.iter().map(|s| s.len() + 3).sum()
}

/// Whether `s` is free text the credential detector flags.
pub(crate) fn flagged_text(s: &str) -> bool {
    !s.is_empty() && hcp_contracts::credential::flagged(None, s)
}

macro_rules! interface_args {
    ($($(#[$doc:meta])* $variant:ident($ty:ty);)*) => {
        /// The arguments of a call; which variant goes with which [`Op`] is
        /// fixed (each interface's constructors of [`Call`] build them, and
        /// its [`InterfaceRules::args`] reads them back), and a mismatch
        /// fails closed. One variant per arguments type of an interface's
        /// module, serialized as the type itself.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum Args<'a> {
            $($(#[$doc])* $variant($ty),)*
        }

        impl Args<'_> {
            /// See [`OwnArgs::into_static`].
            pub(crate) fn into_static(self) -> Args<'static> {
                match self { $(Self::$variant(a) => Args::$variant(a.into_static()),)* }
            }

            /// See [`OwnArgs::budget_bytes`].
            pub(crate) fn budget_bytes(&self, target: &str) -> u64 {
                match self { $(Self::$variant(a) => a.budget_bytes(target),)* }
            }

            /// See [`OwnArgs::text_len`].
            pub(crate) fn text_len(&self) -> usize {
                match self { $(Self::$variant(a) => a.text_len(),)* }
            }

            /// See [`OwnArgs::cut`].
            pub(crate) fn cut(&self, c: &mut Cutter) -> Args<'static> {
                match self { $(Self::$variant(a) => Args::$variant(a.cut(c)),)* }
            }

            /// See [`OwnArgs::cut_bulk`]: `kept` is what [`Args::cut`] made
            /// of the same arguments.
            pub(crate) fn cut_bulk(&self, kept: &mut Args<'static>, c: &mut Cutter) {
                match (self, kept) {
                    $((Self::$variant(a), Args::$variant(k)) => a.cut_bulk(k, c),)*
                    _ => {}
                }
            }

            /// See [`OwnArgs::floats`].
            pub(crate) fn floats(&self) -> bool {
                match self { $(Self::$variant(a) => a.floats(),)* }
            }

            /// See [`OwnArgs::scan`].
            pub(crate) fn scan(&self, s: &Scan, signals: &mut Signals) {
                match self { $(Self::$variant(a) => a.scan(s, signals),)* }
            }

            /// Whether free text of the arguments may have to be withheld
            /// from receipts (checked on every host call, without
            /// rendering it; errs on the side of looking closer).
            pub fn flagged(&self) -> bool {
                match self { $(Self::$variant(a) => a.flagged(),)* }
            }

            /// A field of JSON text that is withheld whole when any of its
            /// strings is flagged: its name and its text.
            pub fn json_text(&self) -> Option<(&'static str, &str)> {
                match self { $(Self::$variant(a) => a.json_text(),)* }
            }

            /// Whether the PEP reads the string at JSON `pointer` (relative
            /// to the arguments) to decide; withholding keeps it.
            pub fn kept(&self, pointer: &str) -> bool {
                match self { $(Self::$variant(a) => a.kept(pointer),)* }
            }
        }
    };
}

interface_args! {
    /// `log.write`.
    Log(log::LogArgs<'a>);
    /// `artifacts.create`.
    Artifact(artifacts::ArtifactArgs<'a>);
    /// `checkpoints.save`.
    CheckpointSave(checkpoints::CheckpointSaveArgs<'a>);
    /// `checkpoints.load`.
    CheckpointLoad(checkpoints::CheckpointLoadArgs<'a>);
    /// `instrument.command`.
    Instrument(instrument::InstrumentArgs<'a>);
    /// `fs.*`.
    Fs(filesystem::FsArgs<'a>);
    /// `fs.write`.
    FsWrite(filesystem::FsWriteArgs);
    /// `net.connect`.
    Connect(sockets::ConnectArgs<'a>);
    /// `http.request`.
    Http(http::HttpArgs<'a>);
    /// `hid.propose`.
    Hid(hid::HidArgs<'a>);
    /// `net.lookup` with the host's resolution.
    Lookup(sockets::LookupArgs<'a>);
    /// `config.get`, `config.get_all`.
    Config(config::ConfigArgs<'a>);
    /// `kv.*`.
    Keyvalue(keyvalue::KvArgs<'a>);
    /// Calls whose target says it all (`instrument.read`, `net.lookup`,
    /// `net.bind`, `hid.wait`, ...).
    Empty(super::call::Empty);
}

macro_rules! ops {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $rules:expr;)*) => {
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

            /// The PEP's rules of the call's interface (its module of
            /// this module).
            pub(crate) fn rules(self) -> &'static dyn InterfaceRules {
                match self { $(Op::$variant => &$rules,)* }
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
    LogWrite = "log.write" => log::Log;
    /// `artifacts.create`.
    ArtifactCreate = "artifacts.create" => artifacts::Artifacts;
    /// `checkpoints.save`.
    CheckpointSave = "checkpoints.save" => checkpoints::Checkpoints;
    /// `checkpoints.load`.
    CheckpointLoad = "checkpoints.load" => checkpoints::Checkpoints;
    /// `instrument.command`: a command to an instrument.
    InstrumentCommand = "instrument.command" => instrument::Instrument;
    /// `instrument.read`: a reading, no side effect.
    InstrumentRead = "instrument.read" => instrument::Instrument;
    /// `descriptor.open-at`.
    FsOpen = "fs.open" => filesystem::Filesystem;
    /// `descriptor.stat-at`.
    FsStat = "fs.stat" => filesystem::Filesystem;
    /// `descriptor.metadata-hash-at`.
    FsMetadataHash = "fs.metadata_hash" => filesystem::Filesystem;
    /// `descriptor.readlink-at`.
    FsReadlink = "fs.readlink" => filesystem::Filesystem;
    /// `descriptor.create-directory-at`.
    FsMkdir = "fs.mkdir" => filesystem::Filesystem;
    /// `descriptor.remove-directory-at`.
    FsRmdir = "fs.rmdir" => filesystem::Filesystem;
    /// `descriptor.unlink-file-at`.
    FsUnlink = "fs.unlink" => filesystem::Filesystem;
    /// `descriptor.rename-at`.
    FsRename = "fs.rename" => filesystem::Filesystem;
    /// `descriptor.link-at`.
    FsLink = "fs.link" => filesystem::Filesystem;
    /// `descriptor.symlink-at`.
    FsSymlink = "fs.symlink" => filesystem::Filesystem;
    /// `descriptor.set-times-at`.
    FsSetTimes = "fs.set_times" => filesystem::Filesystem;
    /// Bytes written into a file of a read-write grant (`write`, an output
    /// stream, `set-size` growth), asked for before they are written.
    FsWrite = "fs.write" => filesystem::Filesystem;
    /// A TCP connect.
    NetConnect = "net.connect" => sockets::Sockets;
    /// A TCP bind (only the implicit bind of a client connect is admissible).
    NetBind = "net.bind" => sockets::Sockets;
    /// A TCP listen: never admissible.
    NetListen = "net.listen" => sockets::Sockets;
    /// A TCP accept: never admissible.
    NetAccept = "net.accept" => sockets::Sockets;
    /// Any UDP use: never admissible.
    NetUdp = "net.udp" => sockets::Sockets;
    /// A name lookup.
    NetLookup = "net.lookup" => sockets::Sockets;
    /// Creating a TCP socket (the target is the address family).
    NetSocket = "net.socket" => sockets::Sockets;
    /// An outgoing HTTP request.
    HttpRequest = "http.request" => http::Http;
    /// `hid.propose`: a keyboard or mouse action proposed to the operator.
    HidPropose = "hid.propose" => hid::Hid;
    /// `hid.wait`: waiting for a proposal's outcome.
    HidWait = "hid.wait" => hid::Hid;
    /// `wasi:config/store.get`: one key's value (the target is the key).
    ConfigGet = "config.get" => config::Config;
    /// `wasi:config/store.get-all`: every granted key's value.
    ConfigGetAll = "config.get_all" => config::Config;
    /// `wasi:keyvalue/store.open`: opening a granted bucket.
    KvOpen = "kv.open" => keyvalue::Keyvalue;
    /// `bucket.get`.
    KvGet = "kv.get" => keyvalue::Keyvalue;
    /// `bucket.set`: the value's size and what the bucket holds after it.
    KvSet = "kv.set" => keyvalue::Keyvalue;
    /// `bucket.delete`.
    KvDelete = "kv.delete" => keyvalue::Keyvalue;
    /// `bucket.exists`.
    KvExists = "kv.exists" => keyvalue::Keyvalue;
    /// `bucket.list-keys`.
    KvListKeys = "kv.list_keys" => keyvalue::Keyvalue;
    /// `wasi:keyvalue/atomics.increment`: a write, as `kv.set`.
    KvIncrement = "kv.increment" => keyvalue::Keyvalue;
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
