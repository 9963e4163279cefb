//! `wasi:sockets/ip-name-lookup` restricted to granted names.

use super::decide::{NetUse, decide};
use super::policy::NetPolicy;
use crate::pep::Pep;
use crate::tasklog::TaskLog;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::p2::SocketError;
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{
    Host, HostResolveAddressStream, ResolveAddressStream,
};
use wasmtime_wasi::p2::bindings::sockets::network::{self, ErrorCode, IpAddress, Network};
use wasmtime_wasi::sockets::WasiSocketsCtxView;

/// A view that checks the name, then delegates to the stock lookup and
/// hands the guest only the addresses its grant allows.
pub(crate) struct GovernedLookup<'a> {
    pub(crate) inner: WasiSocketsCtxView<'a>,
    pub(crate) policy: &'a NetPolicy,
    pub(crate) log: &'a TaskLog,
    pub(crate) pep: &'a Pep,
}

pub(crate) struct GovernedLookupData;

impl HasData for GovernedLookupData {
    type Data<'a> = GovernedLookup<'a>;
}

impl Host for GovernedLookup<'_> {
    fn resolve_addresses(
        &mut self,
        network: Resource<Network>,
        name: String,
    ) -> Result<Resource<ResolveAddressStream>, SocketError> {
        let granted = self.policy.may_lookup(&name);
        let lookup = NetUse::Lookup {
            name: &name,
            granted,
        };
        if !decide(self.pep, self.log, &lookup) {
            return Err(ErrorCode::AccessDenied.into());
        }
        let stream = self.inner.resolve_addresses(network, name.clone())?;
        self.policy.lookup_started(stream.rep(), name);
        Ok(stream)
    }
}

impl network::Host for GovernedLookup<'_> {
    fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
        self.inner.convert_error_code(error)
    }

    fn network_error_code(
        &mut self,
        err: Resource<wasmtime_wasi::p2::bindings::sockets::network::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        self.inner.network_error_code(err)
    }
}

impl network::HostNetwork for GovernedLookup<'_> {
    fn drop(&mut self, this: Resource<Network>) -> wasmtime::Result<()> {
        network::HostNetwork::drop(&mut self.inner, this)
    }
}

impl HostResolveAddressStream for GovernedLookup<'_> {
    /// The next address the guest may reach: the others are skipped (and
    /// noted). A lookup that ends without one is decided again with its
    /// (empty) result, which the PEP denies, and fails `name-unresolvable`.
    fn resolve_next_address(
        &mut self,
        stream: Resource<ResolveAddressStream>,
    ) -> Result<Option<IpAddress>, SocketError> {
        let rep = stream.rep();
        loop {
            let next = self.inner.resolve_next_address(Resource::new_borrow(rep))?;
            let Some(ip) = next else {
                let Some(name) = self.policy.lookup_ended(rep) else {
                    return Ok(None);
                };
                // Always denied: by the PEP (noted with its reason) or the grants.
                decide(self.pep, self.log, &NetUse::Unresolved { name: &name });
                return Err(ErrorCode::NameUnresolvable.into());
            };
            if self.policy.lookup_admits(rep, std_ip(ip)) {
                return Ok(Some(ip));
            }
        }
    }

    fn subscribe(
        &mut self,
        stream: Resource<ResolveAddressStream>,
    ) -> wasmtime::Result<Resource<wasmtime_wasi::p2::DynPollable>> {
        self.inner.subscribe(stream)
    }

    fn drop(&mut self, stream: Resource<ResolveAddressStream>) -> wasmtime::Result<()> {
        self.policy.lookup_dropped(stream.rep());
        HostResolveAddressStream::drop(&mut self.inner, stream)
    }
}

fn std_ip(ip: IpAddress) -> std::net::IpAddr {
    match ip {
        IpAddress::Ipv4((a, b, c, d)) => std::net::Ipv4Addr::new(a, b, c, d).into(),
        IpAddress::Ipv6((a, b, c, d, e, f, g, h)) => {
            std::net::Ipv6Addr::new(a, b, c, d, e, f, g, h).into()
        }
    }
}
