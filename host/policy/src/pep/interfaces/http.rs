//! The PEP's rules of `wasi:http`: outgoing requests to a `host:port` of
//! `grants.network` only, and only when the host's resolution of a
//! granted name left an address the grant allows.

use super::{Args, Call, InterfaceRules, OwnArgs, de, flagged_text, list_len, malformed};
use crate::pep::cut::{Cutter, Text, t};
use crate::pep::error::CallError;
use crate::pep::scope::{Scope, canonical, normalize_name};
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Decision, not_found};
use hcp_contracts::interfaces::Op;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::net::SocketAddr;

/// `http.request`: the target is `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpArgs<'a> {
    /// The addresses the host would connect to (its resolution of a granted
    /// name, after dropping what the grant does not allow); absent when the
    /// host did not resolve (an ungranted destination).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<Text<'a>>>,
    /// Request method.
    pub method: Text<'a>,
    /// Path and query.
    pub path: Text<'a>,
    /// `http` or `https`.
    pub scheme: Text<'a>,
}

impl<'a> Call<'a> {
    /// `http.request` to `host:port`.
    pub fn http(target: String, method: &'a str, scheme: &'a str, path: &'a str) -> Self {
        Self {
            op: Op::HttpRequest,
            target: Text::Owned(target),
            args: Args::Http(HttpArgs {
                addresses: None,
                method: t(method),
                path: t(path),
                scheme: t(scheme),
            }),
        }
    }

    /// The same `http.request`, with the addresses the host resolved its
    /// destination to (other calls are returned unchanged).
    pub fn resolved(mut self, addresses: Vec<String>) -> Self {
        if let Args::Http(a) = &mut self.args {
            a.addresses = Some(addresses.into_iter().map(Text::Owned).collect());
        }
        self
    }
}

impl OwnArgs for HttpArgs<'_> {
    type Static = HttpArgs<'static>;

    fn into_static(self) -> HttpArgs<'static> {
        let o = |t: Text<'_>| -> Text<'static> { Cow::Owned(t.into_owned()) };
        HttpArgs {
            addresses: self.addresses.map(|v| v.into_iter().map(o).collect()),
            method: o(self.method),
            path: o(self.path),
            scheme: o(self.scheme),
        }
    }

    /// The path and query.
    fn budget_bytes(&self, _target: &str) -> u64 {
        self.path.len() as u64
    }

    fn text_len(&self) -> usize {
        self.method.len()
            + self.path.len()
            + self.scheme.len()
            + self.addresses.as_deref().map_or(0, list_len)
    }

    /// The method, scheme and addresses before the target; the path after.
    fn cut(&self, c: &mut Cutter) -> HttpArgs<'static> {
        let method = c.cut(&self.method);
        let scheme = c.cut(&self.scheme);
        let addresses = self
            .addresses
            .as_ref()
            .map(|v| v.iter().map(|s| c.cut(s)).collect());
        HttpArgs {
            addresses,
            method,
            path: Cow::Owned(String::new()),
            scheme,
        }
    }

    fn cut_bulk(&self, kept: &mut HttpArgs<'static>, c: &mut Cutter) {
        kept.path = c.cut(&self.path);
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        s.scan(&self.method, Exposure::NAME, signals);
        s.scan(&self.path, Exposure::TEXT, signals);
    }

    fn flagged(&self) -> bool {
        flagged_text(&self.path)
    }

    fn kept(&self, pointer: &str) -> bool {
        matches!(pointer, "/method" | "/scheme") || pointer.starts_with("/addresses/")
    }
}

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

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(Args::Http(de(op, raw)?))
    }
}
