//! The WASI basics every capability has (`wasi:io`, `wasi:clocks`,
//! `wasi:random`, the stdio, terminal and exit of `wasi:cli`) and
//! `wasi:cli/environment`, as sandbox units: wasmtime-wasi's own
//! implementations, linked for every task.

use super::unit::GrantedBy;
use super::unit::{Unit, always};
use crate::engine::SharedEngine;
use crate::task::TaskState;
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::Grants;
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
use wasmtime_wasi::p2::bindings::{cli, clocks, random};
use wasmtime_wasi::random::WasiRandom;

struct TableData;

impl HasData for TableData {
    type Data<'a> = &'a mut ResourceTable;
}

fn table(s: &mut TaskState) -> &mut ResourceTable {
    &mut s.table
}

/// `wasi:io`: errors, polls and streams.
pub(crate) const IO: Unit<TaskState> = Unit {
    interface: "wasi:io",
    audit: always,
    link: link_io,
};

fn link_io(l: &mut Linker<TaskState>, _: &SharedEngine, _: &Grants) -> wasmtime::Result<()> {
    use wasmtime_wasi_io::bindings::wasi::io;
    io::error::add_to_linker::<TaskState, TableData>(l, table)?;
    io::poll::add_to_linker::<TaskState, TableData>(l, table)?;
    io::streams::add_to_linker::<TaskState, TableData>(l, table)
}

/// `wasi:clocks`.
pub(crate) const CLOCKS: Unit<TaskState> = Unit {
    interface: "wasi:clocks",
    audit: always,
    link: link_clocks,
};

fn link_clocks(l: &mut Linker<TaskState>, _: &SharedEngine, _: &Grants) -> wasmtime::Result<()> {
    clocks::wall_clock::add_to_linker::<TaskState, WasiClocks>(l, TaskState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<TaskState, WasiClocks>(l, TaskState::clocks)
}

/// `wasi:random`.
pub(crate) const RANDOM: Unit<TaskState> = Unit {
    interface: "wasi:random",
    audit: always,
    link: link_random,
};

fn link_random(l: &mut Linker<TaskState>, _: &SharedEngine, _: &Grants) -> wasmtime::Result<()> {
    random::random::add_to_linker::<TaskState, WasiRandom>(l, |s| s.wasi.random())?;
    random::insecure::add_to_linker::<TaskState, WasiRandom>(l, |s| s.wasi.random())?;
    random::insecure_seed::add_to_linker::<TaskState, WasiRandom>(l, |s| s.wasi.random())
}

/// `wasi:cli`: stdio (into the task log), terminals, exit.
pub(crate) const CLI: Unit<TaskState> = Unit {
    interface: "wasi:cli",
    audit: always,
    link: link_cli,
};

fn link_cli(l: &mut Linker<TaskState>, _: &SharedEngine, _: &Grants) -> wasmtime::Result<()> {
    cli::exit::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::stdin::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::stdout::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::stderr::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::terminal_input::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::terminal_output::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::terminal_stdin::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::terminal_stdout::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)?;
    cli::terminal_stderr::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)
}

/// `wasi:cli/environment`: linked for every capability, holding only the
/// variables `grants.env` names (none by default) and no arguments (Rust's
/// standard library imports it unconditionally).
pub(crate) const ENVIRONMENT: Unit<TaskState> = Unit {
    interface: "wasi:cli/environment",
    audit: audit_environment,
    link: link_environment,
};

fn audit_environment(_: &str, grants: &Grants) -> Result<GrantedBy, String> {
    Ok(if Grant::Env.is_granted(grants) {
        GrantedBy::Env
    } else {
        GrantedBy::AlwaysEmptyEnv
    })
}

fn link_environment(
    l: &mut Linker<TaskState>,
    _: &SharedEngine,
    _: &Grants,
) -> wasmtime::Result<()> {
    // Holds only the grants.env variables (none by default) and no args.
    cli::environment::add_to_linker::<TaskState, WasiCli>(l, TaskState::cli)
}
