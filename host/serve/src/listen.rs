//! The server's connections, bounded: hyper's HTTP/1.1 on each accepted
//! TCP connection, with
//!
//! - a header-read timeout ([`ConnLimits::header_timeout`]): a client that
//!   has not sent a request's whole head within it is disconnected; hyper
//!   runs this timer whenever it waits for a request head, so it also bounds
//!   how long a kept-alive connection may wait for its next request;
//! - an idle timeout ([`ConnLimits::idle_timeout`]): a connection on which
//!   no byte moved either way for that long is closed (a stalled request
//!   body, a client that stopped reading); server-sent events send a
//!   keep-alive comment every 15 s, well within it;
//! - a cap on open connections ([`ConnLimits::max_connections`]): a
//!   connection beyond it is answered `503` and closed at once, so a flood
//!   of idle connections cannot exhaust the host's file descriptors.
//!
//! With TLS ([`super::tls`]) each connection's handshake comes first,
//! bounded by the header timeout too; every answer then carries
//! `Strict-Transport-Security`. Each request carries how it came
//! ([`Transport`]: the peer, whether over TLS) as an extension.
//!
//! On shutdown the listener closes, every connection finishes its
//! in-flight request and closes; connections still open after the grace
//! period are dropped.

use super::tls::Tls;
use anyhow::Result;
use axum::Router;
use axum::http::{HeaderValue, header};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::task::TaskTracker;

/// Bounds on the server's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Longest wait for a request's head (also between requests on a
    /// kept-alive connection).
    pub header_timeout: Duration,
    /// Longest a connection may stay open with no byte moving either way.
    pub idle_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

const OVERLOADED: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// `Strict-Transport-Security` of every answer over TLS: a browser that
/// reached the operator's page over HTTPS keeps to HTTPS for a year.
const HSTS: &str = "max-age=31536000";

/// How a request reached the server, as handlers read it (a request
/// extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Transport {
    /// The client's address.
    pub(crate) peer: SocketAddr,
    /// Over TLS.
    pub(crate) tls: bool,
}

impl Transport {
    /// In plaintext from an address beyond loopback (served so only with
    /// `--plaintext-beyond-loopback`): what crossed it, a bearer credential
    /// and a task's data, could be read on the way.
    pub(crate) fn in_clear_beyond_loopback(&self) -> bool {
        !self.tls && !self.peer.ip().to_canonical().is_loopback()
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets open
/// connections finish for up to `grace`.
///
/// # Errors
///
/// None yet: a failed accept is logged and retried.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let connections = TaskTracker::new();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it
                    // was accepted: wait a little rather than spin.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(
                "refused a connection from {peer}: {} connections are open (--max-connections)",
                limits.max_connections
            );
            let _ = stream.try_write(OVERLOADED);
            continue;
        };
        // No Nagle: a response or an event stream is several small writes
        // (an event's status, then its result), and Nagle would hold the
        // second until the client's delayed ACK, about 40 ms later (seen:
        // +35 ms per task with one client, docs/benchmarks.md).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY on the connection of {peer}: {e}");
        }
        let transport = Transport {
            peer,
            tls: tls.is_some(),
        };
        let service = {
            let app = app.clone();
            hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(transport);
                let app = app.clone();
                async move {
                    let Ok(mut response) = tower::ServiceExt::oneshot(app, request).await;
                    if transport.tls {
                        response.headers_mut().insert(
                            header::STRICT_TRANSPORT_SECURITY,
                            HeaderValue::from_static(HSTS),
                        );
                    }
                    Ok::<_, Infallible>(response)
                }
            })
        };
        let acceptor = tls.as_ref().map(|t| t.acceptor());
        let mut stopped = stopped.clone();
        connections.spawn(async move {
            let _permit = permit;
            let activity = Arc::new(Activity::new());
            let watched = Watched {
                inner: stream,
                activity: activity.clone(),
            };
            let io = match acceptor {
                None => TokioIo::new(Conn::Plain(watched)),
                // The handshake within the header timeout: a client that
                // opens connections and never finishes one holds none.
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_timeout, acceptor.accept(watched))
                        .await
                    {
                        Ok(Ok(tls)) => TokioIo::new(Conn::Tls(Box::new(tls))),
                        Ok(Err(e)) => {
                            tracing::debug!("TLS handshake with {peer}: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(
                                "TLS handshake with {peer}: not done within the header timeout"
                            );
                            return;
                        }
                    }
                }
            };
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(true);
            let mut conn = std::pin::pin!(builder.serve_connection(io, service));
            let mut stopping = false;
            loop {
                let idle = activity.idle();
                if idle >= limits.idle_timeout {
                    tracing::debug!("closing the idle connection of {peer}");
                    break;
                }
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!("connection of {peer}: {e}");
                        }
                        break;
                    }
                    () = tokio::time::sleep(limits.idle_timeout - idle) => {}
                    _ = stopped.changed(), if !stopping => {
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = stop.send(true);
    connections.close();
    if tokio::time::timeout(grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {grace:?} are dropped");
    }
    Ok(())
}

/// When a connection last moved a byte.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// A connection, in plaintext or over TLS.
enum Conn {
    Plain(Watched),
    Tls(Box<tokio_rustls::server::TlsStream<Watched>>),
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A stream that records its activity.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
