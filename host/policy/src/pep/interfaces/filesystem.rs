//! The PEP's rules of `wasi:filesystem`: every path a call resolves (and
//! the second path of a rename or link) inside a directory of
//! `grants.filesystem`, and writes only inside a read-write one.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, FsAccess, Op};
use crate::pep::decide::{Decision, malformed, not_found};
use crate::pep::scope::Scope;
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

fn fs_path(scope: &Scope, op: Op, path: &str, write: bool) -> Result<(), Decision> {
    match scope.fs_access(path) {
        None => not_found(format!(
            "{op} {path:?}: not inside a directory of grants.filesystem"
        )),
        Some(Access::ReadOnly) if write => {
            not_found(format!("{op} {path:?}: the directory is granted read-only"))
        }
        Some(_) => Ok(()),
    }
}
