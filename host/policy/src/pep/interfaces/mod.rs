//! The PEP's rules, one module per interface of the table of interfaces
//! ([`hcp_contracts::interfaces::INTERFACES`]) that has operations: its
//! granted surface, its argument rules, its limits and, for instruments,
//! the safety envelope, behind one trait ([`InterfaceRules`]).
//!
//! The modules describe; [`super::decide`] decides: it runs the checks in
//! their fixed order (session, operator's dispatch, surface, arguments,
//! budgets, envelope, threat scan), asking the call's interface
//! ([`OpRules::rules`]) for its part of each, and the first failure
//! decides. Every rule here is pure, as `decide` is.
//!
//! An interface is registered here, once: its module, the rules that
//! decide its operations ([`OpRules::rules`]; the operations themselves,
//! [`Op`], are declared with the interface's row of the table, in
//! `hcp_contracts::interfaces`) and its arguments' types in [`Args`], of which a
//! [`Call`] is made. Each type lives in its interface's module and gives
//! the generic code what it needs of the arguments ([`OwnArgs`]): the
//! bytes charged, the text a receipt keeps of a large call, the threat
//! scan and the withholding check; [`InterfaceRules::args`] reads them
//! back from a decision input. `call.rs`, `input.rs`, `bound.rs`,
//! `threat.rs` and `hcp_store::withhold` hold no arm of their own per
//! interface.
//!
//! The modules here import this one and the leaves below it: text and its
//! cutting (`cut`), decisions and counters
//! (`verdict`), the scope, the threat scan and the errors. What decides
//! and records calls (`decide`, `call`, `bound`, `input`) imports this
//! module; nothing it imports imports it back.

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

use super::cut::{Cutter, Text};
use super::error::CallError;
use super::scope::Scope;
use super::threat::{Scan, Signals};
use super::verdict::{Counters, Decision};
use crate::operator::InterfaceFile;
use hcp_contracts::ReasonCode;
use hcp_contracts::interfaces::Op;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One host call, before dispatch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call<'a> {
    /// The arguments, canonical for the operation.
    pub args: Args<'a>,
    /// The operation.
    pub op: Op,
    /// What the call reaches: a guest path, `ip:port`, a host name,
    /// `host:port`, an instrument; empty when nothing (log, artifacts,
    /// checkpoints).
    pub target: Text<'a>,
}

/// No arguments: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

impl OwnArgs for Empty {
    type Static = Empty;

    fn into_static(self) -> Empty {
        self
    }

    fn text_len(&self) -> usize {
        0
    }

    fn cut(&self, _: &mut Cutter) -> Empty {
        *self
    }
}

/// The interfaces' own policy files ([`crate::operator`]), in the order
/// they are loaded and hashed.
pub(crate) const FILES: &[InterfaceFile] = &[config::FILE];

/// Every interface's policy file, in the order they are loaded and hashed
/// (after the seven files of the gate).
pub fn interface_files() -> &'static [InterfaceFile] {
    FILES
}

/// Where `interface`'s secrets rest, if it has any.
pub fn secret_space(interface: &str) -> Option<&'static crate::operator::SecretSpace> {
    interface_files()
        .iter()
        .find(|f| f.interface == interface)
        .and_then(|f| f.secrets.as_ref())
}

/// Every interface with secrets, and where they rest.
pub fn secret_spaces() -> impl Iterator<Item = (&'static str, &'static crate::operator::SecretSpace)>
{
    interface_files()
        .iter()
        .filter_map(|f| f.secrets.as_ref().map(|s| (f.interface, s)))
}

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

/// The denial of a call whose arguments do not fit its operation: it
/// fails closed.
pub(crate) fn malformed(call: &Call<'_>) -> Result<(), Decision> {
    Err(Decision::deny(
        ReasonCode::FailClosedError,
        format!("{}: malformed call (its arguments do not fit it)", call.op),
    ))
}

/// Bytes a list of strings counts in [`OwnArgs::text_len`].
pub(crate) fn list_len(v: &[Text<'_>]) -> usize {
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
    Empty(Empty);
}

/// The PEP's rules of an operation's interface ([`Op`] is declared with
/// the table of interfaces, in `hcp_contracts`; its rules are the PEP's).
pub(crate) trait OpRules {
    /// The rules of the call's interface.
    fn rules(self) -> &'static dyn InterfaceRules;
}

impl OpRules for Op {
    /// The rules of the call's interface (its module of this module). The
    /// match names every operation: one the rules do not cover does not
    /// compile.
    fn rules(self) -> &'static dyn InterfaceRules {
        match self {
            Op::LogWrite => &log::Log,
            Op::ArtifactCreate => &artifacts::Artifacts,
            Op::CheckpointSave | Op::CheckpointLoad => &checkpoints::Checkpoints,
            Op::InstrumentCommand | Op::InstrumentRead => &instrument::Instrument,
            Op::FsOpen
            | Op::FsStat
            | Op::FsMetadataHash
            | Op::FsReadlink
            | Op::FsMkdir
            | Op::FsRmdir
            | Op::FsUnlink
            | Op::FsRename
            | Op::FsLink
            | Op::FsSymlink
            | Op::FsSetTimes
            | Op::FsWrite => &filesystem::Filesystem,
            Op::NetConnect
            | Op::NetBind
            | Op::NetListen
            | Op::NetAccept
            | Op::NetUdp
            | Op::NetLookup
            | Op::NetSocket => &sockets::Sockets,
            Op::HttpRequest => &http::Http,
            Op::HidPropose | Op::HidWait => &hid::Hid,
            Op::ConfigGet | Op::ConfigGetAll => &config::Config,
            Op::KvOpen
            | Op::KvGet
            | Op::KvSet
            | Op::KvDelete
            | Op::KvExists
            | Op::KvListKeys
            | Op::KvIncrement => &keyvalue::Keyvalue,
        }
    }
}
