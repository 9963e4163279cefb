//! `wasi:http` outgoing requests to granted destinations only.

use super::decide::{NetUse, decide};
use super::policy::NetPolicy;
use crate::pep::Pep;
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
        let pep = self.pep.clone();
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        Box::new(async move {
            let scheme = if tls { "https" } else { "http" };
            let method = request.method().as_str().to_owned();
            // The host resolves a granted destination first (only a granted
            // one): the decision takes where it would connect as a fact, and
            // denies a request that could reach no address.
            let targets = policy.http_targets(&host, port).await;
            let allowed = decide(
                &pep,
                &log,
                &NetUse::Http {
                    host: &host,
                    port,
                    method: &method,
                    scheme,
                    path: &path,
                    targets: targets.as_deref(),
                },
            );
            if !allowed {
                return Err(Error::HttpRequestDenied);
            }
            let targets = targets.unwrap_or_default();
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
    let name = rustls::pki_types::ServerName::try_from(host).map_err(Error::InvalidDnsNameError)?;
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
