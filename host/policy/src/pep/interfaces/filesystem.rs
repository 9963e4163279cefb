//! The PEP's rules of `wasi:filesystem`: every path a call resolves (and
//! the second path of a rename or link) inside a directory of
//! `grants.filesystem`, and writes only inside a read-write one; any other
//! path is `DENY_IDENTITY_UNAUTHORIZED`, naming the granted directories.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, FsAccess, Op};
use crate::pep::decide::{Decision, malformed, not_found};
use crate::pep::scope::Scope;
use hcp_contracts::ReasonCode;
use hcp_contracts::manifest::Access;

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
