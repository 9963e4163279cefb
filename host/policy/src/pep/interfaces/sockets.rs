//! The PEP's rules of `wasi:sockets`: TCP connects to the destinations of
//! `grants.network` (an address, or a granted name's pinned addresses),
//! only the ephemeral bind of a client connect, lookups of granted names
//! only; never listening, accepting or UDP.

use super::{Args, Call, InterfaceRules, OwnArgs, de, list_len, malformed};
use crate::pep::cut::{Cutter, Text, t};
use crate::pep::error::CallError;
use crate::pep::scope::{Scope, canonical, normalize_name};
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Decision, not_found};
use hcp_contracts::interfaces::Op;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::net::SocketAddr;

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

impl<'a> Call<'a> {
    /// `net.connect` to `ip:port`, `via` the granted name it was pinned for.
    pub fn connect(target: String, via: Option<&'a str>) -> Self {
        Self {
            op: Op::NetConnect,
            target: Text::Owned(target),
            args: Args::Connect(ConnectArgs { via: via.map(t) }),
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
}

impl OwnArgs for ConnectArgs<'_> {
    type Static = ConnectArgs<'static>;

    fn into_static(self) -> ConnectArgs<'static> {
        ConnectArgs {
            via: self.via.map(|t| Cow::Owned(t.into_owned())),
        }
    }

    fn text_len(&self) -> usize {
        self.via.as_ref().map_or(0, |s| s.len())
    }

    fn cut(&self, c: &mut Cutter) -> ConnectArgs<'static> {
        ConnectArgs {
            via: c.opt(&self.via),
        }
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        if let Some(via) = &self.via {
            s.scan(via, Exposure::NAME, signals);
        }
    }

    fn kept(&self, pointer: &str) -> bool {
        pointer == "/via"
    }
}

impl OwnArgs for LookupArgs<'_> {
    type Static = LookupArgs<'static>;

    fn into_static(self) -> LookupArgs<'static> {
        LookupArgs {
            addresses: self
                .addresses
                .into_iter()
                .map(|t| Cow::Owned(t.into_owned()))
                .collect(),
        }
    }

    fn text_len(&self) -> usize {
        list_len(&self.addresses)
    }

    fn cut(&self, c: &mut Cutter) -> LookupArgs<'static> {
        LookupArgs {
            addresses: self.addresses.iter().map(|s| c.cut(s)).collect(),
        }
    }

    fn kept(&self, pointer: &str) -> bool {
        pointer.starts_with("/addresses/")
    }
}

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

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(match op {
            Op::NetConnect => Args::Connect(de(op, raw)?),
            Op::NetLookup if raw.get("addresses").is_some() => Args::Lookup(de(op, raw)?),
            _ => Args::Empty(de(op, raw)?),
        })
    }
}
