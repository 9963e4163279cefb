//! `wasi:sockets/ip-name-lookup` restricted to granted names, and answered
//! from the task's pinned addresses.
//!
//! A lookup of a granted name hands the guest the addresses
//! [`NetPolicy`] pinned for that name: resolved once per task (with a
//! timeout), the same addresses a connect or an HTTP request to the name is
//! held to. The stock lookup resolved again on each call, on a blocking
//! thread with no timeout: a guest looking a slow name up in a loop took one
//! of the host's blocking threads per lookup for as long as the resolver
//! took, and a lookup could answer addresses a connect would then refuse.

use super::decide::{NetUse, decide};
use super::policy::NetPolicy;
use crate::pep::Pep;
use crate::tasklog::TaskLog;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{
    Host, HostResolveAddressStream, ResolveAddressStream,
};
use wasmtime_wasi::p2::bindings::sockets::network::{self, ErrorCode, IpAddress, Network};
use wasmtime_wasi::p2::{DynPollable, Pollable, SocketError};
use wasmtime_wasi::sockets::WasiSocketsCtxView;

/// A view that checks the name and answers from the task's pinned
/// addresses.
pub(crate) struct GovernedLookup<'a> {
    pub(crate) inner: WasiSocketsCtxView<'a>,
    pub(crate) policy: &'a Arc<NetPolicy>,
    pub(crate) log: &'a TaskLog,
    pub(crate) pep: &'a Pep,
}

pub(crate) struct GovernedLookupData;

impl HasData for GovernedLookupData {
    type Data<'a> = GovernedLookup<'a>;
}

/// One lookup of a granted name, stored in the task's table under the
/// handle the guest holds as a `resolve-address-stream`.
pub(crate) struct PinnedLookup {
    name: String,
    addresses: Addresses,
    /// Addresses handed out so far.
    given: usize,
    /// The lookup ended (its last answer was given).
    ended: bool,
}

enum Addresses {
    /// The name's first resolution in this task is under way.
    Resolving(Pin<Box<dyn Future<Output = Vec<IpAddr>> + Send>>),
    Known(std::vec::IntoIter<IpAddr>),
}

impl PinnedLookup {
    fn new(policy: Arc<NetPolicy>, name: String) -> Self {
        let resolving = {
            let name = name.clone();
            Box::pin(async move { policy.pinned_of(&name).await })
        };
        let mut lookup = Self {
            name,
            addresses: Addresses::Resolving(resolving),
            given: 0,
            ended: false,
        };
        // A name already pinned answers at once.
        let _ = lookup.poll_addresses(&mut Context::from_waker(Waker::noop()));
        lookup
    }

    fn poll_addresses(&mut self, cx: &mut Context<'_>) -> Poll<&mut std::vec::IntoIter<IpAddr>> {
        if let Addresses::Resolving(resolving) = &mut self.addresses {
            match resolving.as_mut().poll(cx) {
                Poll::Ready(found) => self.addresses = Addresses::Known(found.into_iter()),
                Poll::Pending => return Poll::Pending,
            }
        }
        match &mut self.addresses {
            Addresses::Known(addresses) => Poll::Ready(addresses),
            Addresses::Resolving(_) => Poll::Pending,
        }
    }
}

impl Pollable for PinnedLookup {
    fn ready<'a, 'b>(&'a mut self) -> Pin<Box<dyn Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(std::future::poll_fn(move |cx| {
            self.poll_addresses(cx).map(|_| ())
        }))
    }
}

/// The table's handle of the guest's `stream`, as what it holds.
fn pinned(stream: &Resource<ResolveAddressStream>) -> Resource<PinnedLookup> {
    if stream.owned() {
        Resource::new_own(stream.rep())
    } else {
        Resource::new_borrow(stream.rep())
    }
}

impl Host for GovernedLookup<'_> {
    fn resolve_addresses(
        &mut self,
        network: Resource<Network>,
        name: String,
    ) -> Result<Resource<ResolveAddressStream>, SocketError> {
        // The network resource is the capability to look up.
        self.inner.table.get(&network)?;
        let granted = self.policy.may_lookup(&name);
        let lookup = NetUse::Lookup {
            name: &name,
            granted,
        };
        if !decide(self.pep, self.log, &lookup) {
            return Err(ErrorCode::AccessDenied.into());
        }
        let stream = self
            .inner
            .table
            .push(PinnedLookup::new(self.policy.clone(), name))?;
        Ok(Resource::new_own(stream.rep()))
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
    /// The next of the name's pinned addresses. A lookup that ends without
    /// one is decided again with its (empty) result, which the PEP denies,
    /// and fails `name-unresolvable`.
    fn resolve_next_address(
        &mut self,
        stream: Resource<ResolveAddressStream>,
    ) -> Result<Option<IpAddress>, SocketError> {
        let lookup = self.inner.table.get_mut(&pinned(&stream))?;
        let Poll::Ready(addresses) = lookup.poll_addresses(&mut Context::from_waker(Waker::noop()))
        else {
            return Err(ErrorCode::WouldBlock.into());
        };
        if let Some(ip) = addresses.next() {
            lookup.given += 1;
            return Ok(Some(ip.into()));
        }
        if lookup.ended || lookup.given > 0 {
            lookup.ended = true;
            return Ok(None);
        }
        lookup.ended = true;
        let name = lookup.name.clone();
        // Always denied: by the PEP (noted with its reason) or the grants.
        decide(self.pep, self.log, &NetUse::Unresolved { name: &name });
        Err(ErrorCode::NameUnresolvable.into())
    }

    fn subscribe(
        &mut self,
        stream: Resource<ResolveAddressStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        wasmtime_wasi::p2::subscribe(self.inner.table, pinned(&stream))
    }

    fn drop(&mut self, stream: Resource<ResolveAddressStream>) -> wasmtime::Result<()> {
        self.inner.table.delete(pinned(&stream))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::policy::Resolver;
    use super::*;
    use hcp_contracts::manifest::{NetGrant, NetHost};
    use wasmtime::component::ResourceTable;
    use wasmtime_wasi::p2::bindings::sockets::instance_network::Host as _;

    /// A task's lookups of `name` (granted on port 443), as its guest
    /// makes them.
    struct Lookups {
        log: TaskLog,
        policy: Arc<NetPolicy>,
        wasi: wasmtime_wasi::WasiCtx,
        table: ResourceTable,
        pep: Pep,
    }

    impl Lookups {
        fn of(name: &str, allow_private: bool, resolver: Option<Resolver>) -> Self {
            let log = TaskLog::new(10_000);
            let mut policy = NetPolicy::new(
                &[NetGrant {
                    host: NetHost::Name(name.into()),
                    port: 443,
                    allow_private,
                }],
                &log,
            );
            if let Some(resolver) = resolver {
                policy = policy.resolving_with(resolver);
            }
            Self {
                log,
                policy: Arc::new(policy),
                wasi: wasmtime_wasi::WasiCtx::builder()
                    .allow_ip_name_lookup(true)
                    .build(),
                table: ResourceTable::new(),
                pep: Pep::new(None),
            }
        }

        fn view(&mut self) -> GovernedLookup<'_> {
            GovernedLookup {
                inner: WasiSocketsCtxView {
                    ctx: self.wasi.sockets(),
                    table: &mut self.table,
                },
                policy: &self.policy,
                log: &self.log,
                pep: &self.pep,
            }
        }

        /// The guest's `resolve-addresses(name)`.
        fn start(&mut self, name: &str) -> Result<Resource<ResolveAddressStream>, SocketError> {
            let mut view = self.view();
            let network = view.inner.instance_network().expect("network");
            view.resolve_addresses(network, name.into())
        }

        fn next(
            &mut self,
            stream: &Resource<ResolveAddressStream>,
        ) -> Result<Option<IpAddress>, SocketError> {
            self.view()
                .resolve_next_address(Resource::new_borrow(stream.rep()))
        }

        fn drop_lookup(&mut self, stream: Resource<ResolveAddressStream>) {
            HostResolveAddressStream::drop(&mut self.view(), stream).expect("drop");
        }
    }

    /// A guest's lookup hands out the name's pinned addresses and never
    /// asks the resolver again: `pinned.invalid` (a name no resolver
    /// answers, RFC 6761) is pinned to a documentation address, and each
    /// of three lookups answers it. Before, every lookup went to the
    /// system resolver (on a blocking thread, without a timeout) and this
    /// one failed.
    #[tokio::test]
    async fn a_lookup_is_answered_from_the_pinned_addresses_not_the_resolver() {
        let mut guest = Lookups::of("pinned.invalid", false, None);
        let pinned_ip: IpAddr = "192.0.2.7".parse().expect("ip");
        guest.policy.pin("pinned.invalid", vec![pinned_ip]);
        for _ in 0..3 {
            let stream = guest.start("PINNED.invalid.").expect("a granted name");
            let first = guest.next(&stream).expect("an address");
            assert_eq!(first.map(std_ip), Some(pinned_ip));
            assert!(guest.next(&stream).expect("the end").is_none());
            guest.drop_lookup(stream);
        }
        // What is not granted is refused before anything is resolved.
        assert!(guest.start("other.invalid").is_err());
    }

    /// Resolutions [`slow_resolver`] started.
    static SLOW_RESOLUTIONS: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    /// A resolver that takes 300 ms to answer 192.0.2.9 (a documentation
    /// address: not public, so its grant must allow private ones), and
    /// counts.
    fn slow_resolver(
        _name: String,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
        SLOW_RESOLUTIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            Ok(vec!["192.0.2.9".parse().expect("ip")])
        })
    }

    /// A name's resolution is started once per task and runs on its own:
    /// a guest that starts a lookup of a slow name and drops it, twenty
    /// times over, starts one resolution, not twenty (with the resolution
    /// run inside the guest's lookup, each drop cancelled it and the next
    /// lookup started another, each on a blocking thread of its own); and
    /// a lookup the guest never polls does not hold up a connect's or an
    /// HTTP request's use of the name (they waited on it).
    #[tokio::test]
    async fn a_names_resolution_is_started_once_and_waits_for_no_guest() {
        let mut guest = Lookups::of("slow.invalid", true, Some(slow_resolver));
        for _ in 0..20 {
            let stream = guest.start("slow.invalid").expect("a granted name");
            assert!(guest.next(&stream).is_err(), "not resolved yet");
            guest.drop_lookup(stream);
        }
        // One more, started and never polled.
        let _held = guest.start("slow.invalid").expect("a granted name");
        let targets = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            guest.policy.http_targets("slow.invalid", 443),
        )
        .await
        .expect("the name resolved without the guest's lookup");
        assert_eq!(targets, Some(vec!["192.0.2.9:443".parse().expect("addr")]));
        assert_eq!(
            SLOW_RESOLUTIONS.load(std::sync::atomic::Ordering::SeqCst),
            1
        );
    }

    fn std_ip(ip: IpAddress) -> IpAddr {
        match ip {
            IpAddress::Ipv4((a, b, c, d)) => std::net::Ipv4Addr::new(a, b, c, d).into(),
            IpAddress::Ipv6((a, b, c, d, e, f, g, h)) => {
                std::net::Ipv6Addr::new(a, b, c, d, e, f, g, h).into()
            }
        }
    }
}
