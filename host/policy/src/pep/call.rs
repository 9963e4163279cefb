//! What the PEP decides on: one host call, described by its operation, its
//! target and its canonical arguments.
//!
//! A [`Call`] borrows from the host call it describes (no copy on the hot
//! path); [`Call::into_owned`] makes the copy that goes into a receipt's
//! decision input. Its JSON form is canonical (RFC 8785): every struct
//! declares its fields in key order, so serde_json's compact output is the
//! JCS form (a test checks it against `hcp_contracts::jcs` on random calls),
//! except for instrument plans, whose floats [`Call::canonical_bytes`] hands
//! to the JCS serializer.

pub use super::interfaces::{InterfaceArgs, Op};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Text borrowed from the host call, or owned once recorded.
pub type Text<'a> = Cow<'a, str>;

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

/// The arguments of a call; which variant goes with which [`Op`] is fixed
/// (the constructors of [`Call`] build them), and a mismatch fails closed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Args<'a> {
    /// `log.write`.
    Log(LogArgs<'a>),
    /// `artifacts.create`.
    Artifact(ArtifactArgs<'a>),
    /// `checkpoints.save`.
    CheckpointSave(CheckpointSaveArgs<'a>),
    /// `checkpoints.load`.
    CheckpointLoad(CheckpointLoadArgs<'a>),
    /// `instrument.command`.
    Instrument(InstrumentArgs<'a>),
    /// `fs.*`.
    Fs(FsArgs<'a>),
    /// `fs.write`.
    FsWrite(FsWriteArgs),
    /// `net.connect`.
    Connect(ConnectArgs<'a>),
    /// `http.request`.
    Http(HttpArgs<'a>),
    /// `hid.propose`.
    Hid(HidArgs<'a>),
    /// `net.lookup` with the host's resolution.
    Lookup(LookupArgs<'a>),
    /// The arguments of an interface whose module owns them
    /// (`config.*`, ...): see [`InterfaceArgs`].
    Interface(InterfaceArgs<'a>),
    /// Calls whose target says it all (`instrument.read`, `net.lookup`,
    /// `net.bind`, ...).
    Empty(Empty),
}

/// No arguments: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `log.write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogArgs<'a> {
    /// Structured fields, `[key, value]`.
    pub fields: Cow<'a, [(String, String)]>,
    /// `trace` … `error`.
    pub level: Text<'a>,
    /// The message.
    pub message: Text<'a>,
}

/// `artifacts.create`: the content itself is not recorded, only its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactArgs<'a> {
    /// Content size.
    pub bytes: u64,
    /// Media type.
    pub mime_type: Text<'a>,
    /// Name within the task.
    pub name: Text<'a>,
}

/// `checkpoints.save`: the state itself is not recorded, only its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSaveArgs<'a> {
    /// State size.
    pub bytes: u64,
    /// The label.
    pub label: Text<'a>,
}

/// `checkpoints.load`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointLoadArgs<'a> {
    /// The checkpoint id.
    pub id: Text<'a>,
}

/// `instrument.command`, with what the host worked out before deciding:
/// the instrument's plan (values it would set, actions it would perform),
/// or why there is none, and whether an earlier breach shut the session's
/// instruments down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentArgs<'a> {
    /// The action.
    pub action: Text<'a>,
    /// The arguments as the guest sent them (JSON text).
    pub arguments: Text<'a>,
    /// The breach that shut the instruments down, if one did.
    pub breach: Option<Text<'a>>,
    /// The instrument's plan for the command.
    pub plan: Option<PlanArgs>,
    /// Why there is no plan (malformed arguments, unknown action).
    pub plan_error: Option<Text<'a>>,
}

/// An instrument's plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanArgs {
    /// Named actions (checked against prohibited actions).
    pub actions: Vec<String>,
    /// Values it would set (checked against hard limits).
    pub settings: Vec<SettingArgs>,
}

/// One value a command would set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingArgs {
    /// Envelope parameter.
    pub parameter: String,
    /// Unit of `value`.
    pub unit: String,
    /// The value.
    pub value: f64,
}

/// Read or write access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsAccess {
    /// Reads, stats, lists.
    Read,
    /// Creates, writes, truncates, renames, removes.
    Write,
}

/// `fs.*`: the target is the guest path the call resolves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsArgs<'a> {
    /// What the call does to the target.
    pub access: FsAccess,
    /// The second path: the destination of `fs.rename` and `fs.link`
    /// (checked like the target), the contents of a `fs.symlink` (recorded,
    /// not resolved: following a link out of a grant fails in the sandbox).
    pub to: Option<Text<'a>>,
}

/// `fs.write`: the target is the guest path of the file written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsWriteArgs {
    /// Bytes about to be written (counted against the `bytes` budget).
    pub bytes: u64,
}

/// `net.connect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectArgs<'a> {
    /// The granted name whose pinned addresses hold the target, if any
    /// (the host resolved it; the decision takes the resolution as a fact).
    pub via: Option<Text<'a>>,
}

/// `net.lookup` of a granted name, with what the host's resolution left
/// (`Call::bare` records a lookup without it: `{}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupArgs<'a> {
    /// The addresses the guest may reach (public ones, and private ones
    /// only where the grant says `allow_private`); empty when none is.
    pub addresses: Vec<Text<'a>>,
}

/// `http.request`: the target is `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpArgs<'a> {
    /// The addresses the host would connect to (its resolution of a granted
    /// name, after dropping what the grant does not allow); absent when the
    /// host did not resolve (an ungranted destination).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<Text<'a>>>,
    /// Request method.
    pub method: Text<'a>,
    /// Path and query.
    pub path: Text<'a>,
    /// `http` or `https`.
    pub scheme: Text<'a>,
}

/// `hid.propose`: seed 004's action and the guest's rationale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HidArgs<'a> {
    /// `TYPE_TEXT`, `KEY_COMBO`, `MOUSE_MOVE` or `MOUSE_CLICK`.
    pub action_type: Text<'a>,
    /// The action's `payload` (JSON text).
    pub payload: Text<'a>,
    /// The id the proposal will have: the operator's decision and the
    /// execution name it, and their receipts follow from this call's.
    pub proposal: Text<'a>,
    /// Why the guest proposes it (shown to the operator).
    pub rationale: Text<'a>,
}

fn t(s: &str) -> Text<'_> {
    Cow::Borrowed(s)
}

impl<'a> Call<'a> {
    /// `log.write`.
    pub fn log(level: &'a str, message: &'a str, fields: &'a [(String, String)]) -> Self {
        Self {
            op: Op::LogWrite,
            target: Text::Borrowed(""),
            args: Args::Log(LogArgs {
                fields: Cow::Borrowed(fields),
                level: t(level),
                message: t(message),
            }),
        }
    }

    /// `artifacts.create`.
    pub fn artifact(name: &'a str, mime_type: &'a str, bytes: u64) -> Self {
        Self {
            op: Op::ArtifactCreate,
            target: Text::Borrowed(""),
            args: Args::Artifact(ArtifactArgs {
                bytes,
                mime_type: t(mime_type),
                name: t(name),
            }),
        }
    }

    /// `checkpoints.save`.
    pub fn checkpoint_save(label: &'a str, bytes: u64) -> Self {
        Self {
            op: Op::CheckpointSave,
            target: Text::Borrowed(""),
            args: Args::CheckpointSave(CheckpointSaveArgs {
                bytes,
                label: t(label),
            }),
        }
    }

    /// `checkpoints.load`.
    pub fn checkpoint_load(id: &'a str) -> Self {
        Self {
            op: Op::CheckpointLoad,
            target: Text::Borrowed(""),
            args: Args::CheckpointLoad(CheckpointLoadArgs { id: t(id) }),
        }
    }

    /// `instrument.command`.
    pub fn instrument_command(instrument: &'a str, args: InstrumentArgs<'a>) -> Self {
        Self {
            op: Op::InstrumentCommand,
            target: t(instrument),
            args: Args::Instrument(args),
        }
    }

    /// A call whose target says it all: `instrument.read`, `net.lookup`,
    /// `net.bind`, `net.listen`, `net.accept`, `net.udp`, `hid.wait` (the
    /// proposal).
    pub fn bare(op: Op, target: impl Into<Text<'a>>) -> Self {
        Self {
            op,
            target: target.into(),
            args: Args::Empty(Empty {}),
        }
    }

    /// `fs.*` on the resolved guest path `target`.
    pub fn fs(op: Op, target: String, access: FsAccess, to: Option<String>) -> Self {
        Self {
            op,
            target: Text::Owned(target),
            args: Args::Fs(FsArgs {
                access,
                to: to.map(Text::Owned),
            }),
        }
    }

    /// `fs.write` of `bytes` bytes into the file at the guest path `target`.
    pub fn fs_write(target: String, bytes: u64) -> Self {
        Self {
            op: Op::FsWrite,
            target: Text::Owned(target),
            args: Args::FsWrite(FsWriteArgs { bytes }),
        }
    }

    /// `net.connect` to `ip:port`, `via` the granted name it was pinned for.
    pub fn connect(target: String, via: Option<&'a str>) -> Self {
        Self {
            op: Op::NetConnect,
            target: Text::Owned(target),
            args: Args::Connect(ConnectArgs { via: via.map(t) }),
        }
    }

    /// `http.request` to `host:port`.
    pub fn http(target: String, method: &'a str, scheme: &'a str, path: &'a str) -> Self {
        Self {
            op: Op::HttpRequest,
            target: Text::Owned(target),
            args: Args::Http(HttpArgs {
                addresses: None,
                method: t(method),
                path: t(path),
                scheme: t(scheme),
            }),
        }
    }

    /// `net.lookup` of `name`, which the host resolved to `addresses` (the
    /// ones the guest may reach).
    pub fn lookup(name: &'a str, addresses: Vec<String>) -> Self {
        Self {
            op: Op::NetLookup,
            target: t(name),
            args: Args::Lookup(LookupArgs {
                addresses: addresses.into_iter().map(Text::Owned).collect(),
            }),
        }
    }

    /// The same `http.request`, with the addresses the host resolved its
    /// destination to (other calls are returned unchanged).
    pub fn resolved(mut self, addresses: Vec<String>) -> Self {
        if let Args::Http(a) = &mut self.args {
            a.addresses = Some(addresses.into_iter().map(Text::Owned).collect());
        }
        self
    }

    /// `hid.propose` of `action_type` with `payload` (JSON text), to become
    /// proposal `proposal`.
    pub fn hid_propose(
        action_type: &'a str,
        payload: &'a str,
        proposal: &'a str,
        rationale: &'a str,
    ) -> Self {
        Self {
            op: Op::HidPropose,
            target: Text::Borrowed("hid"),
            args: Args::Hid(HidArgs {
                action_type: t(action_type),
                payload: t(payload),
                proposal: t(proposal),
                rationale: t(rationale),
            }),
        }
    }

    /// Bytes the call moves through the host, for the `bytes` budget:
    /// log text, artifact and checkpoint content, bytes written into files,
    /// instrument arguments, the request path, the paths of a filesystem call.
    pub fn bytes(&self) -> u64 {
        match &self.args {
            Args::Fs(a) => (self.target.len() + a.to.as_ref().map_or(0, |t| t.len())) as u64,
            Args::Log(a) => {
                let fields: usize = a.fields.iter().map(|(k, v)| k.len() + v.len()).sum();
                (a.message.len() + fields) as u64
            }
            Args::Artifact(a) => a.bytes,
            Args::CheckpointSave(a) => a.bytes,
            Args::FsWrite(a) => a.bytes,
            Args::Instrument(a) => a.arguments.len() as u64,
            Args::Http(a) => a.path.len() as u64,
            Args::Hid(a) => (a.payload.len() + a.rationale.len()) as u64,
            Args::Interface(a) => a.budget_bytes(&self.target),
            _ => 0,
        }
    }

    /// The same call, owning its text.
    pub fn into_owned(self) -> Call<'static> {
        fn o(t: Text<'_>) -> Text<'static> {
            Cow::Owned(t.into_owned())
        }
        let args = match self.args {
            Args::Log(a) => Args::Log(LogArgs {
                fields: Cow::Owned(a.fields.into_owned()),
                level: o(a.level),
                message: o(a.message),
            }),
            Args::Artifact(a) => Args::Artifact(ArtifactArgs {
                bytes: a.bytes,
                mime_type: o(a.mime_type),
                name: o(a.name),
            }),
            Args::CheckpointSave(a) => Args::CheckpointSave(CheckpointSaveArgs {
                bytes: a.bytes,
                label: o(a.label),
            }),
            Args::CheckpointLoad(a) => Args::CheckpointLoad(CheckpointLoadArgs { id: o(a.id) }),
            Args::Instrument(a) => Args::Instrument(InstrumentArgs {
                action: o(a.action),
                arguments: o(a.arguments),
                breach: a.breach.map(o),
                plan: a.plan,
                plan_error: a.plan_error.map(o),
            }),
            Args::Fs(a) => Args::Fs(FsArgs {
                access: a.access,
                to: a.to.map(o),
            }),
            Args::FsWrite(a) => Args::FsWrite(a),
            Args::Connect(a) => Args::Connect(ConnectArgs { via: a.via.map(o) }),
            Args::Http(a) => Args::Http(HttpArgs {
                addresses: a.addresses.map(|v| v.into_iter().map(o).collect()),
                method: o(a.method),
                path: o(a.path),
                scheme: o(a.scheme),
            }),
            Args::Hid(a) => Args::Hid(HidArgs {
                action_type: o(a.action_type),
                payload: o(a.payload),
                proposal: o(a.proposal),
                rationale: o(a.rationale),
            }),
            Args::Lookup(a) => Args::Lookup(LookupArgs {
                addresses: a.addresses.into_iter().map(o).collect(),
            }),
            Args::Interface(a) => Args::Interface(a.to_static()),
            Args::Empty(e) => Args::Empty(e),
        };
        Call {
            args,
            op: self.op,
            target: o(self.target),
        }
    }

    /// The call's RFC 8785 form; its SHA-256 is a receipt's `args_hash`.
    ///
    /// # Errors
    ///
    /// A non-finite number in an instrument plan.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(128);
        self.write_canonical(&mut out)?;
        Ok(out)
    }

    /// Appends [`Call::canonical_bytes`] to `out` (a buffer used again,
    /// so that a call's form costs no allocation). On an error, `out` may
    /// hold part of it.
    ///
    /// # Errors
    ///
    /// As [`Call::canonical_bytes`].
    pub fn write_canonical(&self, out: &mut Vec<u8>) -> Result<(), String> {
        if matches!(self.args, Args::Instrument(_)) {
            out.extend_from_slice(&hcp_contracts::jcs::canonical_bytes(self)?);
            return Ok(());
        }
        // Strings and integers only, fields in key order: serde_json's
        // compact form is the canonical one.
        serde_json::to_writer(&mut *out, self).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::Op;
    use hcp_contracts::interfaces::INTERFACES;

    /// The PEP's operations are exactly those of the table of interfaces,
    /// each under the WIT interface the table gives it.
    #[test]
    fn operations_are_the_tables() {
        let table: Vec<&str> = INTERFACES
            .iter()
            .flat_map(|i| i.operations.iter().map(|o| o.name))
            .collect();
        let mut ops: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
        let mut sorted = table.clone();
        ops.sort_unstable();
        sorted.sort_unstable();
        assert_eq!(ops, sorted);
        for op in Op::ALL {
            assert!(op.interface().contains(':'), "{op}");
            assert_eq!(Op::from_name(op.name()), Some(*op));
        }
        assert_eq!(Op::NetUdp.interface(), "wasi:sockets/udp");
        assert_eq!(Op::HttpRequest.interface(), "wasi:http/outgoing-handler");
    }
}
