//! The PEP's rules of `wasi:sockets`: TCP connects to the destinations of
//! `grants.network` (an address, or a granted name's pinned addresses),
//! only the ephemeral bind of a client connect, lookups of granted names
//! only; never listening, accepting or UDP.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, Op};
use crate::pep::decide::{Decision, malformed, not_found};
use crate::pep::scope::{Scope, canonical, normalize_name};
use std::net::SocketAddr;

/// `net.*`.
#[derive(Debug)]
pub(crate) struct Sockets;

impl InterfaceRules for Sockets {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        let target = call.target.as_ref();
        match (call.op, &call.args) {
            (Op::NetConnect, Args::Connect(a)) => {
                let Ok(addr) = target.parse::<SocketAddr>() else {
                    return malformed(call);
                };
                let granted = scope.addrs.contains(&canonical(addr))
                    || a.via.as_ref().is_some_and(|name| {
                        scope
                            .names
                            .get(&normalize_name(name))
                            .is_some_and(|ports| ports.contains(&addr.port()))
                    });
                if granted {
                    Ok(())
                } else {
                    not_found(format!("connect to {target}: not in grants.network"))
                }
            }
            (Op::NetBind, Args::Empty(_)) => match target.parse::<SocketAddr>() {
                // The implicit bind of a client connect: any local address, an
                // ephemeral port. Listening and accepting stay denied.
                Ok(a) if a.ip().is_unspecified() && a.port() == 0 => Ok(()),
                Ok(_) => not_found(format!(
                    "bind to {target}: only the ephemeral bind of a client connect is granted"
                )),
                Err(_) => malformed(call),
            },
            (Op::NetListen | Op::NetAccept | Op::NetUdp, Args::Empty(_)) => not_found(format!(
                "{} {target}: listening, accepting and UDP are never granted",
                call.op
            )),
            (Op::NetLookup, Args::Empty(_) | Args::Lookup(_)) => {
                if !scope.names.contains_key(&normalize_name(target)) {
                    not_found(format!(
                        "name lookup of {target:?}: not a host in grants.network"
                    ))
                } else if matches!(&call.args, Args::Lookup(a) if a.addresses.is_empty()) {
                    not_found(format!(
                        "name lookup of {target:?}: it resolves to no address the grant allows (non-public addresses need allow_private)"
                    ))
                } else {
                    Ok(())
                }
            }
            (Op::NetSocket, Args::Empty(_)) => {
                if scope.addrs.is_empty() && scope.names.is_empty() {
                    not_found(format!(
                        "net.socket {target}: {} has no grants.network",
                        scope.facts.capability
                    ))
                } else {
                    Ok(())
                }
            }
            _ => malformed(call),
        }
    }
}
