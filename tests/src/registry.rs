//! OCI registries for a test: Debian's `docker-registry` (the CNCF
//! distribution server, 2.8) started on loopback with its own storage
//! directory, with or without htpasswd users; and [`Hostile`], a small
//! registry that answers every request as the test says (wrong digests,
//! lying sizes, redirects, broken streams), logging what it was asked.

use std::io::{self, BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REGISTRY: &str = "/usr/bin/docker-registry";

/// A running `docker-registry`, stopped (its storage removed) on drop.
#[derive(Debug)]
pub struct Registry {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    child: Child,
}

impl Registry {
    /// Starts a registry on a free loopback port; with `users`, every
    /// request needs one of them (`htpasswd`, bcrypt).
    ///
    /// # Panics
    ///
    /// It does not start within 30 seconds (a test helper).
    pub fn start(users: &[(&str, &str)]) -> Self {
        Self::start_with(users, false)
    }

    /// [`Registry::start`]; with `tls`, serving HTTPS with a certificate
    /// for `localhost` and `127.0.0.1` from a CA of its own
    /// ([`Registry::ca`]).
    ///
    /// # Panics
    ///
    /// As [`Registry::start`].
    pub fn start_with(users: &[(&str, &str)], tls: bool) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut auth = String::new();
        if !users.is_empty() {
            let htpasswd = dir.path().join("htpasswd");
            for (i, (user, password)) in users.iter().enumerate() {
                let mut args = vec!["-B", "-b"];
                if i == 0 {
                    args.push("-c");
                }
                let path = htpasswd.to_str().expect("utf8");
                args.extend([path, user, password]);
                let out = Command::new("htpasswd")
                    .args(&args)
                    .output()
                    .expect("htpasswd (apache2-utils)");
                assert!(out.status.success(), "htpasswd: {out:?}");
            }
            auth = format!(
                "auth:\n  htpasswd:\n    realm: hcp-test\n    path: {}\n",
                htpasswd.display()
            );
        }
        let mut http_tls = String::new();
        if tls {
            let certs = dir.path().join("certs");
            crate::broker::make_certificates(&certs).expect("certificates (openssl)");
            http_tls = format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                certs.join("server.pem").display(),
                certs.join("server.key").display()
            );
        }
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {addr}\n{http_tls}{auth}",
            dir.path().join("data").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log");
        let child = Command::new(REGISTRY)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start docker-registry (Debian's docker-registry package)");
        let registry = Self { dir, addr, child };
        let started = Instant::now();
        while TcpStream::connect(addr).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "docker-registry did not start: {}",
                registry.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA that signed a TLS registry's certificate (PEM).
    pub fn ca(&self) -> std::path::PathBuf {
        self.dir.path().join("certs/ca.pem")
    }

    /// What the registry logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request a [`Hostile`] registry received.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The path and query.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a [`Hostile`] registry sends back: raw bytes, then the connection
/// closes (a body without `Content-Length` ends there).
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// Status line, headers and as much body as is sent.
    pub bytes: Vec<u8>,
}

impl Reply {
    /// `status`, `headers`, and `body` with its true `Content-Length`
    /// (for `HEAD`, the length of the body not sent).
    pub fn new(status: &str, headers: &[(&str, &str)], body: &[u8], head: bool) -> Self {
        let len = body.len().to_string();
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        all.push(("Content-Length", &len));
        Self::raw(status, &all, if head { &[] } else { body })
    }

    /// `status` and `headers` exactly as given, then `body` (sizes may lie).
    pub fn raw(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Self {
        let mut bytes = format!("HTTP/1.1 {status}\r\nConnection: close\r\n").into_bytes();
        for (name, value) in headers {
            bytes.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(body);
        Self { bytes }
    }

    /// `404 Not Found`.
    pub fn not_found() -> Self {
        Self::new("404 Not Found", &[], b"", false)
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A registry on loopback that answers as its handler says.
#[derive(Debug)]
pub struct Hostile {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Request>>>,
}

impl Hostile {
    /// Starts serving on a free loopback port (a thread per connection,
    /// until the process ends).
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let seen = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (handler, seen) = (handler.clone(), seen.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, handler.as_ref(), &seen);
                });
            }
        });
        Self { addr, log }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// Reads one request (headers and a `Content-Length` body), answers it,
/// closes.
fn serve(stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Request>>) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let len: u64 = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    io::copy(&mut reader.by_ref().take(len), &mut io::sink())?;
    let request = Request {
        method,
        path,
        headers,
    };
    if let Ok(mut l) = log.lock() {
        l.push(request.clone());
    }
    let reply = handler(&request);
    let mut stream = stream;
    stream.write_all(&reply.bytes)?;
    stream.flush()?;
    stream.shutdown(std::net::Shutdown::Both)
}
