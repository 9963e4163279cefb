//! The server's connection bounds against slow and numerous clients, on
//! loopback: partial request heads are cut off at the header timeout, a
//! stalled request body at the idle timeout, connections beyond the cap are
//! answered 503 at once, and `/healthz` keeps answering throughout. The
//! bounds are set through the environment (`HCP_HEADER_TIMEOUT`,
//! `HCP_IDLE_TIMEOUT`, `HCP_MAX_CONNECTIONS`).

use super::Server;
use hcp_tests::{REPO_ROOT, cache_dir};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn start(data: &Path, env: &[(&str, &str)]) -> Server {
    let log = std::fs::File::create(data.join("serve.log")).expect("log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .envs(env.iter().copied())
        .env("HCP_DATA_DIR", data)
        .env("HCP_CACHE_DIR", cache_dir())
        .env("HCP_LOG", "info")
        .current_dir(REPO_ROOT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn hcp serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("read the listening line");
    let base = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    Server { child, base, agent }
}

fn addr(server: &Server) -> String {
    server
        .base
        .strip_prefix("http://")
        .expect("http base")
        .to_owned()
}

/// Reads until the server closes the connection; what it sent, and when it
/// closed. Panics if it is still open after `wait`.
fn closed_within(stream: &mut TcpStream, wait: Duration, what: &str) -> (String, Instant) {
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "{what}: still open after {wait:?} ({e}); it sent {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), Instant::now())
}

/// `GET /healthz` on a fresh connection: the status line, if any came.
fn raw_healthz(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.lines().next().map(str::to_owned)
}

fn healthz(server: &Server) -> u16 {
    server.get("/healthz", None).0
}

#[test]
fn partial_headers_are_cut_off_at_the_header_timeout_and_health_is_answered_meanwhile() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = start(
        data.path(),
        &[
            ("HCP_HEADER_TIMEOUT", "PT2S"),
            ("HCP_IDLE_TIMEOUT", "PT60S"),
        ],
    );
    let addr = addr(&server);
    let opened = Instant::now();
    let mut slow: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).expect("connect");
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
                .expect("partial head");
            s
        })
        .collect();
    assert_eq!(healthz(&server), 200, "the server stopped answering");
    for (i, s) in slow.iter_mut().enumerate() {
        closed_within(s, Duration::from_secs(10), &format!("partial head {i}"));
    }
    let took = opened.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "300 partial heads took {took:?} to be cut off; the header timeout is 2 s"
    );
    assert_eq!(healthz(&server), 200);
}

#[test]
fn a_stalled_body_is_cut_off_at_the_idle_timeout() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = start(
        data.path(),
        &[
            ("HCP_HEADER_TIMEOUT", "PT10S"),
            ("HCP_IDLE_TIMEOUT", "PT2S"),
        ],
    );
    let addr = addr(&server);
    let mut s = TcpStream::connect(&addr).expect("connect");
    let sent = Instant::now();
    // A caller's credential: a stranger's body is not waited for at all
    // (`a_wrong_credential_is_refused_before_its_body_is_read`).
    write!(
        s,
        "POST /v1/tasks HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"hcp_version\"",
        super::LOCAL
    )
    .expect("head and some body");
    let (_, closed) = closed_within(&mut s, Duration::from_secs(15), "stalled body");
    let took = closed - sent;
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(8),
        "the stalled body was cut off after {took:?}; the idle timeout is 2 s"
    );
    assert_eq!(healthz(&server), 200);
}

/// A credential is checked from the request's head, before the body is
/// read: 400 connections with a wrong token, each announcing a 1 MiB body
/// and sending 4 KiB of it, are each answered 401 and closed at once, on
/// every endpoint that takes a body (and the operator's others). Before,
/// each body was read whole first (up to 1 MiB held per connection, and a
/// stalled one held until the idle timeout: 87 to 505 MB of RSS).
#[test]
fn a_wrong_credential_is_refused_before_its_body_is_read() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = start(
        data.path(),
        &[
            ("HCP_HEADER_TIMEOUT", "PT30S"),
            ("HCP_IDLE_TIMEOUT", "PT60S"),
        ],
    );
    let addr = addr(&server);
    let endpoints = [
        "/v1/tasks",
        "/v1/approvals/apr-0000",
        "/v1/hid/mode",
        "/v1/hid/proposals/hp-0000",
        "/v1/hid/rearm",
        "/v1/policy/reload",
    ];
    let mut open: Vec<(&str, TcpStream)> = (0..400)
        .map(|i| {
            let path = endpoints[i % endpoints.len()];
            let mut s = TcpStream::connect(&addr).expect("connect");
            write!(
                s,
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\n\
                 Authorization: Bearer demo-token-nobody-at-all-00000000\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                1 << 20
            )
            .expect("head");
            s.write_all(&[b' '; 4096]).expect("the body's first 4 KiB");
            (path, s)
        })
        .collect();
    let started = Instant::now();
    for (path, s) in &mut open {
        // The rest of the body never comes: a server that waits for it
        // answers nothing before the idle timeout (60 s).
        let (answer, _) = closed_within(s, Duration::from_secs(10), path);
        assert!(
            answer.starts_with("HTTP/1.1 401 Unauthorized\r\n"),
            "{path}: {answer:?}"
        );
        assert!(answer.contains("\"unauthorized\""), "{path}: {answer:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "400 refusals took {:?}",
        started.elapsed()
    );
    assert_eq!(healthz(&server), 200);
}

#[test]
fn connections_beyond_the_cap_are_answered_503_until_some_close() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = start(
        data.path(),
        &[
            ("HCP_HEADER_TIMEOUT", "PT3S"),
            ("HCP_MAX_CONNECTIONS", "20"),
        ],
    );
    let addr = addr(&server);
    let held: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(&addr).expect("connect"))
        .collect();
    // Let the server accept them all.
    std::thread::sleep(Duration::from_millis(500));
    let mut extra = TcpStream::connect(&addr).expect("connect");
    let (answer, _) = closed_within(&mut extra, Duration::from_secs(2), "the 21st connection");
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer:?}"
    );
    // Once the held connections reach the header timeout, there is room.
    let deadline = Instant::now() + Duration::from_secs(10);
    while raw_healthz(&addr).as_deref() != Some("HTTP/1.1 200 OK") {
        assert!(Instant::now() < deadline, "the server never had room again");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(held);
}

/// `GET /v1/tasks/{task}/events` with `token`, on a connection of its own,
/// held open: the connection and the response's status line.
fn open_stream(addr: &str, task: &str, token: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "GET /v1/tasks/{task}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .expect("request");
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => break,
        }
    }
    (s, String::from_utf8_lossy(&line).trim_end().to_owned())
}

/// Event streams are bounded: a caller has at most 8 open at once (the
/// next is 429 `too_many_streams`), and all callers together at most half
/// of the connections (503), so the rest of the server keeps answering. A
/// stream lives as long as its task (an hour, waiting for an approval) and
/// its keep-alives count as activity: one caller with one waiting task
/// took every connection, the operators' too.
#[test]
fn event_streams_are_bounded_per_caller_and_in_all() {
    let data = super::lab();
    let server = start(data.path(), &[("HCP_MAX_CONNECTIONS", "24")]);
    let (status, body, task) = server.post(
        "/v1/tasks",
        super::ALPHA,
        &super::example("cvd-material-synthesis"),
    );
    assert_eq!(status, 202, "{body}");
    let task = task.expect("task id");
    let addr = addr(&server);
    let mut held = Vec::new();
    for i in 0..8 {
        let (s, line) = open_stream(&addr, &task, super::ALPHA);
        assert_eq!(line, "HTTP/1.1 200 OK", "stream {i}");
        held.push(s);
    }
    let (_, line) = open_stream(&addr, &task, super::ALPHA);
    assert_eq!(line, "HTTP/1.1 429 Too Many Requests");
    // The operator's streams count toward the server's 12 (half of 24).
    for i in 0..4 {
        let (s, line) = open_stream(&addr, &task, super::OPERATOR);
        assert_eq!(line, "HTTP/1.1 200 OK", "operator stream {i}");
        held.push(s);
    }
    let (_, line) = open_stream(&addr, &task, super::OPERATOR);
    assert_eq!(line, "HTTP/1.1 503 Service Unavailable");
    // The rest of the server answers.
    let (status, approvals) = server.get("/v1/approvals", Some(super::OPERATOR));
    assert_eq!(status, 200, "{approvals}");
    assert_eq!(raw_healthz(&addr).as_deref(), Some("HTTP/1.1 200 OK"));
    // A stream closed gives its place back.
    drop(held.pop());
    drop(held.remove(0));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (s, line) = open_stream(&addr, &task, super::ALPHA);
        if line == "HTTP/1.1 200 OK" {
            held.push(s);
            break;
        }
        assert!(Instant::now() < deadline, "no place again: {line}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
