//! Outbound network: exactly the destinations `grants.network` names.
//!
//! The host resolves a granted name itself, the first time the task needs
//! it, and pins the addresses for the rest of the task; a name that resolves to a loopback, private,
//! link-local or otherwise non-public address is dropped unless its grant
//! says `allow_private` (no DNS rebinding onto the host's own network). Every
//! choke point asks the same [`NetPolicy`]:
//!
//! - `socket_addr_check` (TCP connect; only the ephemeral bind of a client
//!   connect; never listen, accept or UDP),
//! - `wasi:sockets/ip-name-lookup` (only granted names resolve),
//! - `wasi:http` outgoing requests (only granted host:port, connected to the
//!   pinned addresses, TLS verified against the granted name).
//!
//! # Ambient authority
//!
//! This module opens outbound TCP connections and performs DNS lookups on the
//! guest's behalf, only for granted destinations.

use crate::pep::{Call, Op, Pep};
use crate::tasklog::TaskLog;
use hcp_contracts::manifest::{NetGrant, NetHost};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The destinations a task may reach. Granted names are resolved on first
/// use and pinned for the rest of the task.
#[derive(Debug, Default)]
pub(crate) struct NetPolicy {
    /// Granted address literals.
    addrs: BTreeSet<SocketAddr>,
    /// Granted names (lower-case) → their grants.
    names: BTreeMap<String, NameGrant>,
    log: Option<TaskLog>,
}

#[derive(Debug)]
struct NameGrant {
    ports: BTreeSet<u16>,
    allow_private: bool,
    /// Addresses admitted for this name, resolved once.
    pinned: tokio::sync::OnceCell<Vec<IpAddr>>,
}

impl NetPolicy {
    /// The policy of `grants`; notes in `log` what resolution drops and why.
    pub(crate) fn new(grants: &[NetGrant], log: &TaskLog) -> Self {
        let mut policy = Self {
            log: Some(log.clone()),
            ..Self::default()
        };
        for grant in grants {
            match &grant.host {
                NetHost::Ip(ip) => {
                    policy.addrs.insert(SocketAddr::new(*ip, grant.port));
                }
                NetHost::Name(name) => {
                    let entry = policy
                        .names
                        .entry(name.clone())
                        .or_insert_with(|| NameGrant {
                            ports: BTreeSet::new(),
                            allow_private: false,
                            pinned: tokio::sync::OnceCell::new(),
                        });
                    entry.ports.insert(grant.port);
                    // Two grants of one name: private addresses only if both allow.
                    entry.allow_private = if entry.ports.len() == 1 {
                        grant.allow_private
                    } else {
                        entry.allow_private && grant.allow_private
                    };
                }
            }
        }
        policy
    }

    fn note(&self, message: &str) {
        if let Some(log) = &self.log {
            log.host_note(message);
        }
    }

    /// The admitted addresses of a granted name, resolving it on first use.
    async fn pinned(&self, name: &str, grant: &NameGrant) -> Vec<IpAddr> {
        grant
            .pinned
            .get_or_init(|| async {
                let resolved = tokio::time::timeout(
                    Duration::from_secs(5),
                    tokio::net::lookup_host((name, 0)),
                )
                .await;
                let found: Vec<IpAddr> = match resolved {
                    Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
                    Ok(Err(e)) => {
                        self.note(&format!("granted host {name} did not resolve: {e}"));
                        Vec::new()
                    }
                    Err(_) => {
                        self.note(&format!("granted host {name} did not resolve in 5 s"));
                        Vec::new()
                    }
                };
                let mut pinned = Vec::new();
                for ip in found {
                    if grant.allow_private || is_public(ip) {
                        if !pinned.contains(&ip) {
                            pinned.push(ip);
                        }
                    } else {
                        self.note(&format!(
                            "granted host {name} resolved to non-public {ip}; dropped (the grant does not allow_private)"
                        ));
                    }
                }
                pinned
            })
            .await
            .clone()
    }

    /// Whether a TCP connect to `addr` is granted.
    pub(crate) async fn may_connect(&self, addr: SocketAddr) -> bool {
        self.grant_of(addr).await.is_some()
    }

    /// The grant that admits a TCP connect to `addr`: `Some(None)` for an
    /// address literal, `Some(Some(name))` for a granted name whose pinned
    /// addresses hold it, `None` when nothing grants it.
    pub(crate) async fn grant_of(&self, addr: SocketAddr) -> Option<Option<&str>> {
        let addr = canonical(addr);
        if self.addrs.contains(&addr) {
            return Some(None);
        }
        for (name, grant) in &self.names {
            if grant.ports.contains(&addr.port())
                && self.pinned(name, grant).await.contains(&addr.ip())
            {
                return Some(Some(name));
            }
        }
        None
    }

    /// Whether `name` is a granted name (any port).
    pub(crate) fn may_lookup(&self, name: &str) -> bool {
        self.names.contains_key(&normalize_name(name))
    }

    /// Where an HTTP request to `host:port` may connect, or `None` when the
    /// destination is not granted.
    pub(crate) async fn http_targets(&self, host: &str, port: u16) -> Option<Vec<SocketAddr>> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            let addr = SocketAddr::new(ip, port);
            return self.addrs.contains(&canonical(addr)).then(|| vec![addr]);
        }
        let name = normalize_name(host);
        let grant = self.names.get(&name).filter(|g| g.ports.contains(&port))?;
        let pinned = self.pinned(&name, grant).await;
        (!pinned.is_empty()).then(|| {
            pinned
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect()
        })
    }
}

fn normalize_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// IPv4-mapped IPv6 addresses are compared as the IPv4 address they carry.
fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
            None => addr,
        },
        IpAddr::V4(_) => addr,
    }
}

/// Whether `ip` is a globally routable unicast address.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link local
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0064 && s[1] == 0xff9b)) // NAT64 can reach private v4
}

/// The `socket_addr_check` hook: every bind, connect, listen, accept and
/// UDP use passes the PEP (with the grant the host's resolution found for a
/// connect); with enforcement off, TCP connects to granted addresses only.
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
            if pep.is_on() {
                let op = match use_ {
                    SocketAddrUse::TcpConnect => Op::NetConnect,
                    SocketAddrUse::TcpBind => Op::NetBind,
                    SocketAddrUse::TcpListen => Op::NetListen,
                    SocketAddrUse::TcpAccept => Op::NetAccept,
                    _ => Op::NetUdp,
                };
                let call = if op == Op::NetConnect {
                    let via = policy.grant_of(addr).await.flatten();
                    Call::connect(addr.to_string(), via)
                } else {
                    Call::bare(op, addr.to_string())
                };
                return match pep.check(&call) {
                    Ok(_) => true,
                    Err(d) => {
                        log.host_note(&format!("denied ({}): {}", d.reason, d.message));
                        false
                    }
                };
            }
            let allowed = match use_ {
                SocketAddrUse::TcpConnect => policy.may_connect(addr).await,
                // The implicit bind of a client connect: any local address,
                // an ephemeral port. Listening and accepting stay denied, so
                // it never becomes a server socket.
                SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
                _ => false,
            };
            if !allowed {
                let what = match use_ {
                    SocketAddrUse::TcpConnect => "connect to",
                    SocketAddrUse::TcpBind => "bind to",
                    SocketAddrUse::TcpListen => "listen on",
                    SocketAddrUse::TcpAccept => "accept from",
                    _ => "UDP with",
                };
                log.host_note(&format!("denied: {what} {addr} (not in grants.network)"));
            }
            allowed
        })
    }
}

pub(crate) mod lookup {
    //! `wasi:sockets/ip-name-lookup` restricted to granted names.

    use super::NetPolicy;
    use crate::pep::{Call, Op, Pep};
    use crate::tasklog::TaskLog;
    use wasmtime::component::{HasData, Resource};
    use wasmtime_wasi::p2::SocketError;
    use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{
        Host, HostResolveAddressStream, ResolveAddressStream,
    };
    use wasmtime_wasi::p2::bindings::sockets::network::{self, ErrorCode, IpAddress, Network};
    use wasmtime_wasi::sockets::WasiSocketsCtxView;

    /// A view that checks the name, then delegates to the stock lookup.
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
            if self.pep.is_on() {
                if let Err(d) = self.pep.check(&Call::bare(Op::NetLookup, name.as_str())) {
                    self.log.host_note(&format!(
                        "denied ({}): {}",
                        d.reason,
                        crate::tasklog::escape_controls(&d.message)
                    ));
                    return Err(ErrorCode::AccessDenied.into());
                }
            } else if !self.policy.may_lookup(&name) {
                self.log.host_note(&format!(
                    "denied: name lookup of {:?} (not a host in grants.network)",
                    crate::tasklog::escape_controls(&name)
                ));
                return Err(ErrorCode::AccessDenied.into());
            }
            self.inner.resolve_addresses(network, name)
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
        fn resolve_next_address(
            &mut self,
            stream: Resource<ResolveAddressStream>,
        ) -> Result<Option<IpAddress>, SocketError> {
            self.inner.resolve_next_address(stream)
        }

        fn subscribe(
            &mut self,
            stream: Resource<ResolveAddressStream>,
        ) -> wasmtime::Result<Resource<wasmtime_wasi::p2::DynPollable>> {
            self.inner.subscribe(stream)
        }

        fn drop(&mut self, stream: Resource<ResolveAddressStream>) -> wasmtime::Result<()> {
            HostResolveAddressStream::drop(&mut self.inner, stream)
        }
    }
}

pub(crate) mod http {
    //! `wasi:http` outgoing requests to granted destinations only.

    use super::NetPolicy;
    use crate::pep::{Call, Pep};
    use crate::tasklog::TaskLog;
    use http_body_util::BodyExt;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::net::TcpStream;
    use wasmtime_wasi_http::io::TokioIo;
    use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

    /// The hooks of one task.
    pub(crate) struct GovernedHttp {
        pub(crate) policy: Arc<NetPolicy>,
        pub(crate) log: TaskLog,
        pub(crate) pep: Pep,
    }

    type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;

    impl WasiHttpHooks for GovernedHttp {
        fn send_request(
            &mut self,
            request: http::Request<WasiBody>,
            options: Option<RequestOptions>,
            _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
        ) -> Box<
            dyn Future<Output = wasmtime_wasi_http::Result<(http::Response<WasiBody>, IoFuture)>>
                + Send,
        > {
            let uri = request.uri().clone();
            let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
            let host = uri.host().unwrap_or("").to_owned();
            let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
            let policy = self.policy.clone();
            let log = self.log.clone();
            let decided = self.pep.check(&Call::http(
                format!("{host}:{port}"),
                request.method().as_str(),
                if tls { "https" } else { "http" },
                uri.path_and_query().map_or("/", |p| p.as_str()),
            ));
            Box::new(async move {
                if let Err(d) = decided {
                    log.host_note(&format!(
                        "denied ({}): {}",
                        d.reason,
                        crate::tasklog::escape_controls(&d.message)
                    ));
                    return Err(Error::HttpRequestDenied);
                }
                let Some(targets) = policy.http_targets(&host, port).await else {
                    log.host_note(&format!(
                        "denied: {} {}://{}:{} (not in grants.network)",
                        request.method(),
                        if tls { "https" } else { "http" },
                        crate::tasklog::escape_controls(&host),
                        port
                    ));
                    return Err(Error::HttpRequestDenied);
                };
                send(request, options, &targets, tls.then_some(host)).await
            })
        }
    }

    trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
    impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

    async fn connect(targets: &[SocketAddr], timeout: Duration) -> Result<TcpStream, Error> {
        let mut last = Error::ConnectionRefused;
        for addr in targets {
            match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = Error::Connect(e),
                Err(_) => last = Error::ConnectionTimeout,
            }
        }
        Err(last)
    }

    async fn tls(host: String, tcp: TcpStream) -> Result<Box<dyn Stream>, Error> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|_| Error::TlsProtocolError)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name =
            rustls::pki_types::ServerName::try_from(host).map_err(Error::InvalidDnsNameError)?;
        let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        Ok(Box::new(stream))
    }

    /// Sends `request` over a fresh connection to one of `targets`.
    async fn send(
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        targets: &[SocketAddr],
        tls_name: Option<String>,
    ) -> wasmtime_wasi_http::Result<(http::Response<WasiBody>, IoFuture)> {
        let connect_timeout = options
            .and_then(|o| o.connect_timeout)
            .unwrap_or(Duration::from_secs(30));
        let first_byte_timeout = options
            .and_then(|o| o.first_byte_timeout)
            .unwrap_or(Duration::from_secs(60));
        let tcp = connect(targets, connect_timeout).await?;
        let stream: Box<dyn Stream> = match tls_name {
            Some(name) => tls(name, tcp).await?,
            None => Box::new(tcp),
        };
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(connection);
        // Origin-form request target: the authority travels in `Host`.
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        *request.uri_mut() = http::Uri::try_from(path).map_err(|_| Error::HttpRequestUriInvalid)?;
        let response = tokio::time::timeout(first_byte_timeout, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)??;
        let response = response.map(|body| body.map_err(Error::from).boxed_unsync());
        let io: IoFuture = Box::new(async move {
            match driver.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(Error::from(e)),
                Err(e) => Err(Error::InternalError(Some(e.to_string()))),
            }
        });
        Ok((response, io))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_and_private_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert!(!is_public(private.parse().expect("ip")), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(is_public(public.parse().expect("ip")), "{public}");
        }
    }

    #[tokio::test]
    async fn names_resolving_to_loopback_are_dropped_unless_allowed() {
        let log = TaskLog::new(10_000);
        let grant = |allow_private| NetGrant {
            host: NetHost::Name("localhost".into()),
            port: 8080,
            allow_private,
        };
        let strict = NetPolicy::new(&[grant(false)], &log);
        assert!(
            !strict
                .may_connect("127.0.0.1:8080".parse().expect("addr"))
                .await
        );
        assert!(strict.may_lookup("localhost"));
        assert_eq!(strict.http_targets("localhost", 8080).await, None);

        let allowed = NetPolicy::new(&[grant(true)], &log);
        assert!(
            allowed
                .may_connect("127.0.0.1:8080".parse().expect("addr"))
                .await
        );
        assert!(
            !allowed
                .may_connect("127.0.0.1:8081".parse().expect("addr"))
                .await
        );
        assert!(allowed.http_targets("LOCALHOST.", 8080).await.is_some());
        assert!(!allowed.may_lookup("example.com"));
    }

    #[tokio::test]
    async fn ip_grants_admit_exactly_their_address() {
        let log = TaskLog::new(10_000);
        let policy = NetPolicy::new(
            &[NetGrant {
                host: NetHost::Ip("127.0.0.1".parse().expect("ip")),
                port: 9,
                allow_private: false,
            }],
            &log,
        );
        assert!(
            policy
                .may_connect("127.0.0.1:9".parse().expect("addr"))
                .await
        );
        assert!(
            policy
                .may_connect("[::ffff:127.0.0.1]:9".parse().expect("addr"))
                .await
        );
        assert!(
            !policy
                .may_connect("127.0.0.2:9".parse().expect("addr"))
                .await
        );
        assert!(policy.http_targets("127.0.0.1", 9).await.is_some());
        assert!(policy.http_targets("127.0.0.1", 10).await.is_none());
        assert!(!policy.may_lookup("127.0.0.1"));
    }
}
