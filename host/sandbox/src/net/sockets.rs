//! The `socket_addr_check` hook and `wasi:sockets/tcp-create-socket`,
//! `udp-create-socket`: every socket a guest creates and every address it
//! uses is decided by [`decide`].

use super::decide::{NetUse, decide};
use super::policy::NetPolicy;
use crate::pep::Pep;
use crate::tasklog::TaskLog;
use std::net::SocketAddr;
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::bindings::sockets::network::{self, ErrorCode, IpAddressFamily, Network};
use wasmtime_wasi::p2::bindings::sockets::{tcp_create_socket, udp_create_socket};
use wasmtime_wasi::p2::{SocketError, TcpSocket, UdpSocket};

/// The `socket_addr_check` hook: every bind, connect, listen, accept and
/// UDP use is decided ([`decide`], with the grant the host's resolution
/// found for a connect).
pub(crate) fn socket_check(
    policy: Arc<NetPolicy>,
    log: TaskLog,
    pep: Pep,
) -> impl Fn(
    SocketAddr,
    wasmtime_wasi::sockets::SocketAddrUse,
) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + Sync>>
+ Send
+ Sync
+ 'static {
    use wasmtime_wasi::sockets::SocketAddrUse;
    move |addr, use_| {
        let policy = policy.clone();
        let log = log.clone();
        let pep = pep.clone();
        Box::pin(async move {
            let grant = match use_ {
                SocketAddrUse::TcpConnect => policy.grant_of(addr).await,
                _ => None,
            };
            decide(&pep, &log, &NetUse::Addr { addr, use_, grant })
        })
    }
}

/// `tcp-create-socket` and `udp-create-socket` behind the PEP: creating a
/// socket is a governed call (`net.socket`; UDP is `net.udp`, never
/// granted) that costs a host call, and a task that holds as many resources
/// as its table allows ([`crate::limits::MAX_TABLE_ENTRIES`]) gets
/// `new-socket-limit` instead of another socket.
pub(crate) struct GovernedSockets<'a> {
    pub(crate) inner: wasmtime_wasi::sockets::WasiSocketsCtxView<'a>,
    pub(crate) log: &'a TaskLog,
    pub(crate) pep: &'a Pep,
}

pub(crate) struct GovernedSocketsData;

impl wasmtime::component::HasData for GovernedSocketsData {
    type Data<'a> = GovernedSockets<'a>;
}

impl GovernedSockets<'_> {
    fn govern(&self, udp: bool, family: IpAddressFamily) -> Result<(), SocketError> {
        let family = match family {
            IpAddressFamily::Ipv4 => "ipv4",
            IpAddressFamily::Ipv6 => "ipv6",
        };
        if decide(self.pep, self.log, &NetUse::Socket { udp, family }) {
            Ok(())
        } else {
            Err(ErrorCode::AccessDenied.into())
        }
    }

    /// A socket the table had no room for: `new-socket-limit` (the socket
    /// itself is already closed).
    fn limited(&self, error: SocketError) -> SocketError {
        let trap = match error.downcast() {
            Ok(code) => return code.into(),
            Err(trap) => trap,
        };
        if matches!(
            trap.downcast_ref::<wasmtime::component::ResourceTableError>(),
            Some(wasmtime::component::ResourceTableError::Full)
        ) {
            self.log.host_note(&format!(
                "socket refused: the task holds {} resources (descriptors, sockets, streams), its limit",
                crate::limits::MAX_TABLE_ENTRIES
            ));
            return ErrorCode::NewSocketLimit.into();
        }
        SocketError::trap(trap)
    }
}

impl tcp_create_socket::Host for GovernedSockets<'_> {
    fn create_tcp_socket(
        &mut self,
        family: IpAddressFamily,
    ) -> Result<Resource<TcpSocket>, SocketError> {
        self.govern(false, family)?;
        self.inner
            .create_tcp_socket(family)
            .map_err(|e| self.limited(e))
    }
}

impl udp_create_socket::Host for GovernedSockets<'_> {
    async fn create_udp_socket(
        &mut self,
        family: IpAddressFamily,
    ) -> Result<Resource<UdpSocket>, SocketError> {
        self.govern(true, family)?;
        match udp_create_socket::Host::create_udp_socket(&mut self.inner, family).await {
            Ok(s) => Ok(s),
            Err(e) => Err(self.limited(e)),
        }
    }
}

impl network::Host for GovernedSockets<'_> {
    fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
        self.inner.convert_error_code(error)
    }

    fn network_error_code(
        &mut self,
        err: Resource<network::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        self.inner.network_error_code(err)
    }
}

impl network::HostNetwork for GovernedSockets<'_> {
    fn drop(&mut self, this: Resource<Network>) -> wasmtime::Result<()> {
        network::HostNetwork::drop(&mut self.inner, this)
    }
}
