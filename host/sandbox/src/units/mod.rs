//! The sandbox units: one per row of the table of interfaces
//! ([`hcp_contracts::interfaces::INTERFACES`]), each with its audit rule
//! and its linker entry ([`Unit`]). The surface audit and the linker
//! iterate [`UNITS`]; a test checks that every row has its unit. What a
//! unit is ([`Unit`], and the audit's [`unit::GrantedBy`]) is a leaf module
//! of its own, [`unit`], so that the units, the audit and the task do not
//! import this registry back.
//!
//! The `hcp:capability` host interfaces are units named after their WIT
//! interface: [`log`], [`artifacts`], [`checkpoints`], [`instrument`],
//! [`hid`] and [`types`] (the reason codes); [`config`] implements
//! `wasi:config/store` the same way. Each implements its
//! interface's `Host` trait on the task's [`context::HcpCtx`] and asks the
//! PEP through it before doing anything. The WASI ones are [`wasi`] (the
//! basics every capability has, and the environment), [`filesystem`]
//! (`wasi:filesystem`, the governed view of `crate::fs`) and
//! `crate::net::units` (`wasi:sockets`, `wasi:http`).

pub(crate) mod artifacts;
pub(crate) mod checkpoints;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod filesystem;
pub(crate) mod hid;
pub(crate) mod instrument;
pub(crate) mod keyvalue;
pub(crate) mod log;
pub(crate) mod types;
pub(crate) mod unit;
pub(crate) mod wasi;

use crate::task::TaskState;
use hcp_contracts::interfaces::Interface;
use unit::Unit;

/// Every unit, in the order of the table's rows.
pub(crate) const UNITS: &[Unit<TaskState>] = &[
    wasi::IO,
    wasi::CLOCKS,
    wasi::RANDOM,
    wasi::CLI,
    wasi::ENVIRONMENT,
    filesystem::UNIT,
    crate::net::units::SOCKETS,
    crate::net::units::HTTP,
    types::UNIT,
    log::UNIT,
    artifacts::UNIT,
    checkpoints::UNIT,
    instrument::UNIT,
    hid::UNIT,
    config::UNIT,
    keyvalue::UNIT,
];

/// The unit of a row of the table.
pub(crate) fn unit(interface: &Interface) -> Option<&'static Unit<TaskState>> {
    UNITS.iter().find(|u| u.interface == interface.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_contracts::interfaces::INTERFACES;

    /// Every row of the table has exactly one unit, and every unit a row.
    #[test]
    fn every_interface_has_its_unit() {
        for row in INTERFACES {
            let n = UNITS.iter().filter(|u| u.interface == row.name).count();
            assert_eq!(n, 1, "{}", row.name);
        }
        for u in UNITS {
            assert!(
                INTERFACES.iter().any(|i| i.name == u.interface),
                "{}",
                u.interface
            );
        }
    }
}
