//! `wasi:filesystem` as a sandbox unit: the governed view of
//! [`crate::fs`] linked in place of wasmtime-wasi's stock one when
//! enforcement is on, the stock one when it is off. Its own module, so
//! that the view (which the task state holds the paths of) does not
//! import the task state back.

use super::unit::{GrantedBy, Unit};
use crate::engine::SharedEngine;
use crate::fs::{GovernedFs, GovernedFsData};
use crate::task::TaskState;
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::Grants;
use wasmtime::component::Linker;
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemCtxView, WasiFilesystemView as _};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};

/// The sandbox unit of `wasi:filesystem`: linked for every capability,
/// governed by the PEP when enforcement is on; the granted directories are
/// the only preopens (see `task::wasi_ctx`), so with none granted it is
/// inert, the guest holding no descriptor to name a path with.
pub(crate) const UNIT: Unit<TaskState> = Unit {
    interface: "wasi:filesystem",
    audit: |_, grants| {
        Ok(if Grant::Filesystem.is_granted(grants) {
            GrantedBy::Filesystem
        } else {
            GrantedBy::FilesystemInert
        })
    },
    link,
};

fn link(l: &mut Linker<TaskState>, engine: &SharedEngine, _: &Grants) -> wasmtime::Result<()> {
    if engine.config.enforcement {
        // Every path a call resolves passes the PEP (see `GovernedFs`).
        fn governed(s: &mut TaskState) -> GovernedFs<'_> {
            GovernedFs {
                inner: WasiFilesystemCtxView {
                    ctx: s.wasi.filesystem(),
                    table: &mut s.table,
                },
                paths: &mut s.fs_paths,
                hcp: &mut s.hcp,
                writes: &s.fs_writes,
            }
        }
        types::add_to_linker::<TaskState, GovernedFsData>(l, governed)?;
        preopens::add_to_linker::<TaskState, GovernedFsData>(l, governed)
    } else {
        types::add_to_linker::<TaskState, WasiFilesystem>(l, TaskState::filesystem)?;
        preopens::add_to_linker::<TaskState, WasiFilesystem>(l, TaskState::filesystem)
    }
}
