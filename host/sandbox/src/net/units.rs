//! The sandbox units of `wasi:sockets` and `wasi:http`, both enabled by
//! `grants.network`.

use super::lookup::{GovernedLookup, GovernedLookupData};
use super::sockets::{GovernedSockets, GovernedSocketsData};
use crate::engine::SharedEngine;
use crate::task::TaskState;
use crate::units::unit::GrantedBy;
use crate::units::unit::Unit;
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::Grants;
use wasmtime::component::Linker;
use wasmtime_wasi::p2::bindings::sockets;
use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView as _};

/// `wasi:sockets`: linked for every capability. With no `grants.network`
/// it is inert, every socket created and every name looked up denied by
/// the PEP (with a receipt), and the WASI context allows no TCP, UDP or
/// lookup anyway; with it, UDP stays inert (grants admit TCP only), and
/// name lookup needs a granted host name.
pub(crate) const SOCKETS: Unit<TaskState> = Unit {
    interface: "wasi:sockets",
    audit: audit_sockets,
    link: link_sockets,
};

fn audit_sockets(wit: &str, grants: &Grants) -> Result<GrantedBy, String> {
    let net = Grant::Network.is_granted(grants);
    Ok(match wit {
        "wasi:sockets/ip-name-lookup" if grants.grants_names() => GrantedBy::NetworkName,
        "wasi:sockets/ip-name-lookup" if net => GrantedBy::NameLookupInert,
        "wasi:sockets/udp" | "wasi:sockets/udp-create-socket" if net => GrantedBy::NetworkUdpInert,
        _ if net => GrantedBy::Network,
        _ => GrantedBy::NetworkInert,
    })
}

fn link_sockets(l: &mut Linker<TaskState>, _: &SharedEngine, _: &Grants) -> wasmtime::Result<()> {
    let options = sockets::network::LinkOptions::default();
    sockets::network::add_to_linker::<TaskState, WasiSockets>(l, &options, TaskState::sockets)?;
    sockets::instance_network::add_to_linker::<TaskState, WasiSockets>(l, TaskState::sockets)?;
    // Creating a socket passes the PEP (see `net::sockets`).
    fn governed_sockets(s: &mut TaskState) -> GovernedSockets<'_> {
        GovernedSockets {
            inner: wasmtime_wasi::sockets::WasiSocketsCtxView {
                ctx: s.wasi.sockets(),
                table: &mut s.table,
            },
            log: &s.hcp.log,
            pep: &s.hcp.pep,
        }
    }
    sockets::tcp_create_socket::add_to_linker::<TaskState, GovernedSocketsData>(
        l,
        governed_sockets,
    )?;
    sockets::tcp::add_to_linker::<TaskState, WasiSockets>(l, TaskState::sockets)?;
    // Every use of a UDP socket passes `socket_addr_check`, whose PEP
    // never grants it (with enforcement off, creating one fails).
    sockets::udp_create_socket::add_to_linker::<TaskState, GovernedSocketsData>(
        l,
        governed_sockets,
    )?;
    sockets::udp::add_to_linker::<TaskState, WasiSockets>(l, TaskState::sockets)?;
    // Every lookup passes the PEP, which allows only granted host names.
    sockets::ip_name_lookup::add_to_linker::<TaskState, GovernedLookupData>(l, |s| GovernedLookup {
        policy: &s.net,
        log: &s.hcp.log,
        pep: &s.hcp.pep,
        inner: wasmtime_wasi::sockets::WasiSocketsCtxView {
            ctx: s.wasi.sockets(),
            table: &mut s.table,
        },
    })
}

/// `wasi:http` outgoing requests: audited and linked only with
/// `grants.network` (see `net::http`).
pub(crate) const HTTP: Unit<TaskState> = Unit {
    interface: "wasi:http",
    audit: |_, grants| {
        if Grant::Network.is_granted(grants) {
            Ok(GrantedBy::Network)
        } else {
            Err("no destination is granted (grants.network)".into())
        }
    },
    link: |l, _, grants| {
        if Grant::Network.is_granted(grants) {
            wasmtime_wasi_http::p2::add_only_http_to_linker_async(l)?;
        }
        Ok(())
    },
};
