//! The PEP's rules of `wasi:http`: outgoing requests to a `host:port` of
//! `grants.network` only, and only when the host's resolution of a
//! granted name left an address the grant allows.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, Op};
use crate::pep::decide::{Decision, malformed, not_found};
use crate::pep::scope::{Scope, canonical, normalize_name};
use std::net::SocketAddr;

/// `http.request`.
#[derive(Debug)]
pub(crate) struct Http;

impl InterfaceRules for Http {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        let target = call.target.as_ref();
        let (Op::HttpRequest, Args::Http(a)) = (call.op, &call.args) else {
            return malformed(call);
        };
        let Some((host, port)) = target
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        else {
            return malformed(call);
        };
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        let granted = match literal.parse() {
            Ok(ip) => scope.addrs.contains(&canonical(SocketAddr::new(ip, port))),
            Err(_) => scope
                .names
                .get(&normalize_name(host))
                .is_some_and(|ports| ports.contains(&port)),
        };
        if !granted {
            not_found(format!(
                "{} {}://{target}: not in grants.network",
                a.method, a.scheme
            ))
        } else if a.addresses.as_ref().is_some_and(Vec::is_empty) {
            not_found(format!(
                "{} {}://{target}: {host} resolves to no address the grant allows (non-public addresses need allow_private)",
                a.method, a.scheme
            ))
        } else {
            Ok(())
        }
    }
}
