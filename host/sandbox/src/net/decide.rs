//! The one decision on each network use of a task, for every choke point
//! (the socket hook, socket creation, name lookup, outgoing HTTP).
//!
//! A use is first the PEP's to decide (with enforcement on), then held to
//! the grants as the task's [`super::NetPolicy`] found them: with
//! enforcement on, a use the PEP allows is always within the grants (it
//! decides on the same grants and facts); with it off (the benchmark of
//! enforcement's cost), the grants alone bound the guest. Each denial is
//! noted in the task log: the PEP's with its reason code, the grants' as
//! `denied: <what> (<why>)`.

use crate::pep::{Call, Op, Pep};
use crate::tasklog::{TaskLog, escape_controls};
use std::net::SocketAddr;
use wasmtime_wasi::sockets::SocketAddrUse;

/// One use of the network, with what the task's grants say of it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NetUse<'a> {
    /// A socket address use, through `socket_addr_check`. `grant`, for a
    /// TCP connect: as [`super::NetPolicy::grant_of`] found it.
    Addr {
        addr: SocketAddr,
        use_: SocketAddrUse,
        grant: Option<Option<&'a str>>,
    },
    /// Creating a socket of `family` (`ipv4`, `ipv6`); `udp` for a UDP one.
    Socket { udp: bool, family: &'static str },
    /// A lookup of `name`; `granted` when it is a granted name.
    Lookup { name: &'a str, granted: bool },
    /// A lookup of `name` ended without an address the grant allows.
    Unresolved { name: &'a str },
    /// An outgoing HTTP request to `host:port`; `targets` as
    /// [`super::NetPolicy::http_targets`] found them.
    Http {
        host: &'a str,
        port: u16,
        method: &'a str,
        scheme: &'a str,
        path: &'a str,
        targets: Option<&'a [SocketAddr]>,
    },
}

/// Whether `use_` may go ahead; a denial is noted in `log`.
pub(crate) fn decide(pep: &Pep, log: &TaskLog, use_: &NetUse<'_>) -> bool {
    if pep.is_on()
        && let Err(d) = pep.check(&use_.call())
    {
        log.host_note(&format!(
            "denied ({}): {}",
            d.reason,
            escape_controls(&d.message)
        ));
        return false;
    }
    match use_.within_grants() {
        Ok(()) => true,
        Err(why) => {
            log.host_note(&format!("denied: {why}"));
            false
        }
    }
}

impl NetUse<'_> {
    /// The PEP's call.
    fn call(&self) -> Call<'_> {
        match *self {
            Self::Addr {
                addr,
                use_: SocketAddrUse::TcpConnect,
                grant,
            } => Call::connect(addr.to_string(), grant.flatten()),
            Self::Addr { addr, use_, .. } => {
                let op = match use_ {
                    SocketAddrUse::TcpBind => Op::NetBind,
                    SocketAddrUse::TcpListen => Op::NetListen,
                    SocketAddrUse::TcpAccept => Op::NetAccept,
                    _ => Op::NetUdp,
                };
                Call::bare(op, addr.to_string())
            }
            Self::Socket { udp, family } => {
                Call::bare(if udp { Op::NetUdp } else { Op::NetSocket }, family)
            }
            Self::Lookup { name, .. } => Call::bare(Op::NetLookup, name),
            Self::Unresolved { name } => Call::lookup(name, Vec::new()),
            Self::Http {
                host,
                port,
                method,
                scheme,
                path,
                targets,
            } => {
                let call = Call::http(format!("{host}:{port}"), method, scheme, path);
                match targets {
                    Some(targets) => {
                        call.resolved(targets.iter().map(|a| a.ip().to_string()).collect())
                    }
                    None => call,
                }
            }
        }
    }

    /// Whether the use is within the grants; why not, in words.
    fn within_grants(&self) -> Result<(), String> {
        match *self {
            Self::Addr { addr, use_, grant } => {
                let allowed = match use_ {
                    SocketAddrUse::TcpConnect => grant.is_some(),
                    // The implicit bind of a client connect: any local
                    // address, an ephemeral port. Listening and accepting
                    // stay denied, so it never becomes a server socket.
                    SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
                    _ => false,
                };
                let what = match use_ {
                    SocketAddrUse::TcpConnect => "connect to",
                    SocketAddrUse::TcpBind => "bind to",
                    SocketAddrUse::TcpListen => "listen on",
                    SocketAddrUse::TcpAccept => "accept from",
                    _ => "UDP with",
                };
                ok_or(allowed, || format!("{what} {addr} (not in grants.network)"))
            }
            Self::Socket { udp, family } => {
                ok_or(!udp, || format!("a UDP socket ({family}) is never granted"))
            }
            Self::Lookup { name, granted } => ok_or(granted, || {
                format!(
                    "name lookup of {:?} (not a host in grants.network)",
                    escape_controls(name)
                )
            }),
            Self::Unresolved { name } => Err(format!(
                "name lookup of {:?} (no address the grant allows)",
                escape_controls(name)
            )),
            Self::Http {
                host,
                port,
                method,
                scheme,
                targets,
                ..
            } => match targets {
                Some(t) if !t.is_empty() => Ok(()),
                other => Err(format!(
                    "{method} {scheme}://{}:{port} ({})",
                    escape_controls(host),
                    if other.is_some() {
                        "no address the grant allows"
                    } else {
                        "not in grants.network"
                    }
                )),
            },
        }
    }
}

fn ok_or(allowed: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if allowed { Ok(()) } else { Err(why()) }
}
