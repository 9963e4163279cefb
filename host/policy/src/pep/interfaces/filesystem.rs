//! The PEP's rules of `wasi:filesystem`: every path a call resolves (and
//! the second path of a rename or link) inside a directory of
//! `grants.filesystem`, and writes only inside a read-write one; any other
//! path is `DENY_IDENTITY_UNAUTHORIZED`, naming the granted directories.

use super::{Args, Call, InterfaceRules, OwnArgs, de, flagged_text, malformed};
use crate::pep::cut::{Cutter, Text};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Decision, not_found};
use hcp_contracts::ReasonCode;
use hcp_contracts::interfaces::Op;
use hcp_contracts::manifest::Access;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

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

impl Call<'_> {
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
}

impl OwnArgs for FsArgs<'_> {
    type Static = FsArgs<'static>;

    fn into_static(self) -> FsArgs<'static> {
        FsArgs {
            access: self.access,
            to: self.to.map(|t| Cow::Owned(t.into_owned())),
        }
    }

    /// The paths: the target and the second one.
    fn budget_bytes(&self, target: &str) -> u64 {
        (target.len() + self.to.as_ref().map_or(0, |t| t.len())) as u64
    }

    fn text_len(&self) -> usize {
        self.to.as_ref().map_or(0, |s| s.len())
    }

    /// The second path after the target.
    fn cut(&self, _: &mut Cutter) -> FsArgs<'static> {
        FsArgs {
            access: self.access,
            to: None,
        }
    }

    fn cut_bulk(&self, kept: &mut FsArgs<'static>, c: &mut Cutter) {
        kept.to = c.opt(&self.to);
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        if let Some(to) = &self.to {
            s.scan(to, Exposure::NAME, signals);
        }
    }

    fn flagged(&self) -> bool {
        self.to.as_deref().is_some_and(flagged_text)
    }

    fn kept(&self, pointer: &str) -> bool {
        pointer == "/to"
    }
}

impl OwnArgs for FsWriteArgs {
    type Static = FsWriteArgs;

    fn into_static(self) -> FsWriteArgs {
        self
    }

    /// The bytes written.
    fn budget_bytes(&self, _target: &str) -> u64 {
        self.bytes
    }

    fn text_len(&self) -> usize {
        0
    }

    fn cut(&self, _: &mut Cutter) -> FsWriteArgs {
        *self
    }
}

/// `fs.*`.
#[derive(Debug)]
pub(crate) struct Filesystem;

impl InterfaceRules for Filesystem {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        let target = call.target.as_ref();
        match (call.op, &call.args) {
            (
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
                | Op::FsSetTimes,
                Args::Fs(a),
            ) => {
                let write = a.access == FsAccess::Write;
                fs_path(scope, call.op, target, write)?;
                match (call.op, &a.to) {
                    (Op::FsRename | Op::FsLink, Some(to)) => fs_path(scope, call.op, to, true),
                    (Op::FsRename | Op::FsLink, None) => malformed(call),
                    _ => Ok(()),
                }
            }
            (Op::FsWrite, Args::FsWrite(_)) => fs_path(scope, call.op, target, true),
            _ => malformed(call),
        }
    }

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(match op {
            Op::FsWrite => Args::FsWrite(de(op, raw)?),
            _ => Args::Fs(de(op, raw)?),
        })
    }
}

/// A path outside every granted directory, or a write into a read-only
/// one, is outside the capability's resource boundary (seed 003's condition
/// 5): `DENY_IDENTITY_UNAUTHORIZED`, naming the granted directories. The
/// operation itself is in the surface; with no directory granted it is
/// not (`DENY_TOOL_NOT_FOUND`).
fn fs_path(scope: &Scope, op: Op, path: &str, write: bool) -> Result<(), Decision> {
    if scope.fs.is_empty() {
        // No directory granted: the filesystem is not in the surface.
        return not_found(format!(
            "{op} {path:?}: no directory is granted (grants.filesystem is empty)"
        ));
    }
    let deny = |why: String| {
        Err(Decision::deny(
            ReasonCode::DenyIdentityUnauthorized,
            format!("{op} {path:?}: {why}"),
        ))
    };
    match scope.fs_access(path) {
        None => deny(format!(
            "outside the granted directories ({})",
            granted(scope)
        )),
        Some(Access::ReadOnly) if write => deny(format!(
            "the directory is granted read-only (granted: {})",
            granted(scope)
        )),
        Some(_) => Ok(()),
    }
}

/// The granted guest directories and their access, as a reader wants them:
/// `/data read-only, /out read-write`.
fn granted(scope: &Scope) -> String {
    scope
        .fs
        .iter()
        .map(|(dir, access)| format!("{dir} {}", access.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}
