//! `hcp serve` over TLS with real clients: curl (`--cacert`) and Python
//! `requests` (`verify=` the CA file) reach every endpoint over HTTPS; a
//! client without the CA is refused; SIGHUP puts a new certificate in
//! force and keeps the old one when the new pair does not load. Without
//! TLS, listening beyond loopback is refused unless asked for, and a T3
//! task that came in plaintext from beyond loopback is rejected. The
//! certificates (a CA and server certificates for 127.0.0.1, localhost and
//! the host side of the test's own link below) are made at test time with
//! the openssl CLI.
//!
//! "Beyond loopback" on one machine: the test makes its own network
//! namespace (`ip netns add hcp-tls-<pid>-<n>`) joined to this one by a
//! veth pair on a /30 of 10.213.0.0/16, the server listens on 0.0.0.0 and
//! curl runs inside the namespace (`ip netns exec`) against the host side
//! of the link, so the peer address the server sees is not a loopback one,
//! which is the fact the server decides on. No test traffic goes to any
//! address but loopback and that link; the namespace and the pair are
//! deleted when the test ends, also on a panic. This needs root and
//! iproute2 (`ip`): without them the test fails, saying which is missing.

use super::{ALPHA, LOCAL, Server, example, lab};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `openssl` with `args` in `dir`; panics with its stderr on failure.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`, `ca.key`) in `dir`.
fn make_ca(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=hcp test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// A server certificate `<name>.pem` and key `<name>.key` signed by the CA
/// in `dir`, for 127.0.0.1, localhost and `extra_ip`, with `serial`.
fn make_server_cert(dir: &Path, name: &str, serial: &str, extra_ip: Option<&str>) {
    let key = format!("{name}.key");
    let csr = format!("{name}.csr");
    let pem = format!("{name}.pem");
    let ext = format!("{name}.ext");
    let mut san = "subjectAltName=IP:127.0.0.1,DNS:localhost".to_owned();
    if let Some(ip) = extra_ip {
        san.push_str(&format!(",IP:{ip}"));
    }
    std::fs::write(
        dir.join(&ext),
        format!("{san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )
    .expect("ext");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            "/CN=hcp serve",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            serial,
            "-days",
            "2",
            "-out",
            &pem,
            "-extfile",
            &ext,
        ],
    );
}

/// A client host of the test's own beyond loopback: a network namespace
/// (`hcp-tls-<pid>-<n>`) joined to this one by a veth pair on a /30 link
/// in 10.213.0.0/16, the host side `host` (`.1`), the namespace side `.2`.
/// Traffic between the two stays on the link and never leaves the machine.
/// Dropping it deletes the namespace, and with it the pair, also when the
/// test panics.
struct Netns {
    name: String,
    host: std::net::Ipv4Addr,
}

/// Runs `ip` with `args`; what it printed, or what it said on failure.
/// Panics when `ip` cannot be run at all: the test needs iproute2.
fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!(
            "cannot run `ip` ({e}): this test needs iproute2 (apt-get install iproute2) \
             to make a network namespace as a client beyond loopback"
        )
    });
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

impl Netns {
    /// Makes the namespace and its link; panics, saying what is missing,
    /// when it cannot (the test then fails rather than pass untested).
    fn new() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Self::remove_stale();
        let name = format!("hcp-tls-{pid}-{n}");
        if let Err(e) = ip(&["netns", "add", &name]) {
            panic!(
                "cannot make the network namespace {name} for a client beyond loopback \
                 (`ip netns add` needs root, CAP_SYS_ADMIN and CAP_NET_ADMIN): {e}"
            );
        }
        // A /30 of 10.213.0.0/16 that no interface here uses yet, chosen
        // from the process id so that test runs side by side differ.
        let mut block = (pid.wrapping_mul(4).wrapping_add(n)) % 16384;
        let host = loop {
            let base = u32::from(std::net::Ipv4Addr::new(10, 213, 0, 0)) + block * 4;
            let net = std::net::Ipv4Addr::from(base);
            let taken = ip(&["-4", "-o", "addr", "show", "to", &format!("{net}/30")])
                .unwrap_or_else(|e| panic!("ip addr show: {e}"));
            if taken.trim().is_empty() {
                break std::net::Ipv4Addr::from(base + 1);
            }
            block = (block + 1) % 16384;
        };
        let guard = Self { name, host };
        let peer = std::net::Ipv4Addr::from(u32::from(host) + 1);
        // veth names: at most 15 bytes; the peer is made inside the
        // namespace, so deleting the namespace deletes the pair.
        let veth = format!("ht{pid}-{n}");
        let inner = format!("{veth}p");
        let ns = guard.name.as_str();
        let steps: [&[&str]; 6] = [
            &[
                "link", "add", &veth, "type", "veth", "peer", "name", &inner, "netns", ns,
            ],
            &["addr", "add", &format!("{host}/30"), "dev", &veth],
            &["link", "set", &veth, "up"],
            &[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{peer}/30"),
                "dev",
                &inner,
            ],
            &["-n", ns, "link", "set", &inner, "up"],
            &["-n", ns, "link", "set", "lo", "up"],
        ];
        for step in steps {
            if let Err(e) = ip(step) {
                panic!("cannot set up the link to namespace {ns}: ip {step:?}: {e}");
            }
        }
        guard
    }

    /// Deletes the namespaces that runs of this test killed before their
    /// guard could (their process is gone).
    fn remove_stale() {
        let Ok(list) = ip(&["netns", "list"]) else {
            return;
        };
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            let Some(pid) = name
                .strip_prefix("hcp-tls-")
                .and_then(|rest| rest.split('-').next())
                .filter(|pid| pid.parse::<u32>().is_ok())
            else {
                continue;
            };
            if !Path::new("/proc").join(pid).exists() {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }

    /// `curl` with `args`, run inside the namespace.
    fn curl(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name, "curl"])
            .args(["--silent", "--show-error", "--max-time", "20"])
            .args(args)
            .output()
            .expect("ip netns exec curl")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // No panic here: this may run while the test unwinds.
        match Command::new("ip")
            .args(["netns", "del", &self.name])
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "could not delete network namespace {}: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("could not delete network namespace {}: {e}", self.name),
        }
    }
}

/// Starts `hcp serve` with `args`; the server, or how it exited and what
/// it said when it refused to start.
fn spawn(data: &Path, args: &[&str]) -> Result<Server, (Option<i32>, String)> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.join("serve.log"))
        .expect("log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .arg("serve")
        .args(args)
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
    let Some(base) = first.trim().strip_prefix("listening on ") else {
        let status = child.wait().expect("wait");
        let log = std::fs::read_to_string(data.join("serve.log")).unwrap_or_default();
        return Err((status.code(), log));
    };
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    Ok(Server {
        child,
        base: base.to_owned(),
        agent,
    })
}

fn port(server: &Server) -> u16 {
    server
        .base
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {}", server.base))
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl")
}

/// `curl` answer: status, headers (lowercase), body as JSON (or a string).
fn curl_json(args: &[&str]) -> (u16, String, Value) {
    curl_json_from(None, args)
}

/// [`curl_json`], with curl run inside `netns` when given.
fn curl_json_from(netns: Option<&Netns>, args: &[&str]) -> (u16, String, Value) {
    let args = [&["--include"], args].concat();
    let out = match netns {
        Some(ns) => ns.curl(&args),
        None => curl(&args),
    };
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (
        status,
        head.to_ascii_lowercase(),
        serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned())),
    )
}

/// The serial of the certificate the server at 127.0.0.1:`port` presents.
fn served_serial(port: u16) -> String {
    let script = format!(
        "openssl s_client -connect 127.0.0.1:{port} -servername localhost </dev/null 2>/dev/null \
         | openssl x509 -noout -serial"
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("s_client");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn https_with_curl_and_python_requests_and_a_client_without_the_ca_is_refused() {
    let certs = tempfile::tempdir().expect("tempdir");
    make_ca(certs.path());
    make_server_cert(certs.path(), "server", "0x1001", None);
    let ca = certs.path().join("ca.pem");
    let ca = ca.to_str().expect("utf-8 path");
    let cert = certs.path().join("server.pem");
    let key = certs.path().join("server.key");
    let data = lab();
    let server = spawn(
        data.path(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().expect("path"),
            "--tls-key",
            key.to_str().expect("path"),
        ],
    )
    .unwrap_or_else(|(code, log)| panic!("exit {code:?}: {log}"));
    assert!(
        server.base.starts_with("https://127.0.0.1:"),
        "{}",
        server.base
    );
    let base = server.base.clone();
    let auth = format!("Authorization: Bearer {LOCAL}");

    // curl with the CA: every kind of endpoint, and HSTS on each answer.
    let (status, head, me) =
        curl_json(&["--cacert", ca, "-H", &auth, &format!("{base}/v1/whoami")]);
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["caller_id"], "harness-local-01");
    assert!(
        head.contains("strict-transport-security: max-age="),
        "{head}"
    );
    let (status, head, page) = curl_json(&["--cacert", ca, &format!("{base}/")]);
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(head.contains("strict-transport-security"), "{head}");
    assert!(page.as_str().is_some_and(|p| p.contains("<html")), "{page}");
    let submit = super::with_id(example("document-analysis"), "tls-curl-1").to_string();
    let (status, _, answer) = curl_json(&[
        "--cacert",
        ca,
        "-H",
        &auth,
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        &submit,
        &format!("{base}/v1/tasks"),
    ]);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_accepted", "{answer}");

    // Python requests with the CA: a task submitted and its answer read.
    let script = r#"
import json, sys, time, requests
base, ca, token, message = sys.argv[1:5]
h = {"Authorization": "Bearer " + token}
r = requests.post(base + "/v1/tasks", data=message, verify=ca,
                  headers=dict(h, **{"Content-Type": "application/json"}), timeout=20)
task = r.headers["x-hcp-task-id"]
for _ in range(600):
    res = requests.get(base + "/v1/tasks/" + task + "/result", headers=h, verify=ca, timeout=20)
    if res.status_code == 200:
        break
    time.sleep(0.1)
print(json.dumps({"submit": r.status_code, "answer": r.json(), "result": res.json(),
                  "hsts": res.headers.get("Strict-Transport-Security")}))
"#;
    let message = super::with_id(example("document-analysis"), "tls-requests-1").to_string();
    let out = Command::new("python3")
        .args(["-c", script, &base, ca, LOCAL, &message])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python requests: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(py["submit"], 200, "{py}");
    assert_eq!(py["answer"]["type"], "task_accepted", "{py}");
    assert_eq!(py["result"]["type"], "task_completed", "{py}");
    assert!(
        py["hsts"]
            .as_str()
            .is_some_and(|h| h.starts_with("max-age=")),
        "{py}"
    );

    // Without the CA: curl and requests refuse the server's certificate.
    let out = curl(&["-H", &auth, &format!("{base}/v1/whoami")]);
    assert_eq!(out.status.code(), Some(60), "curl without the CA: {out:?}");
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, requests\n\
             try:\n    requests.get(sys.argv[1], timeout=20)\n    sys.exit(0)\n\
             except requests.exceptions.SSLError as e:\n    print(e); sys.exit(3)",
            &format!("{base}/healthz"),
        ])
        .output()
        .expect("python3");
    assert_eq!(
        out.status.code(),
        Some(3),
        "requests without the CA: {out:?}"
    );
    // Plain HTTP to the TLS port gets no HTTP answer.
    let out = curl(&[&format!("http://127.0.0.1:{}/healthz", port(&server))]);
    assert!(!out.status.success(), "plain HTTP answered: {out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{out:?}"
    );
}

#[test]
fn sighup_puts_a_new_certificate_in_force_and_keeps_the_old_one_when_the_new_pair_is_bad() {
    let certs = tempfile::tempdir().expect("tempdir");
    make_ca(certs.path());
    make_server_cert(certs.path(), "first", "0x2001", None);
    make_server_cert(certs.path(), "second", "0x2002", None);
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let install = |name: &str| {
        std::fs::copy(certs.path().join(format!("{name}.pem")), &cert).expect("cert");
        std::fs::copy(certs.path().join(format!("{name}.key")), &key).expect("key");
    };
    install("first");
    let ca = certs.path().join("ca.pem");
    let ca = ca.to_str().expect("path");
    let data = tempfile::tempdir().expect("tempdir");
    let server = spawn(
        data.path(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().expect("path"),
            "--tls-key",
            key.to_str().expect("path"),
        ],
    )
    .unwrap_or_else(|(code, log)| panic!("exit {code:?}: {log}"));
    let port = port(&server);
    assert_eq!(served_serial(port), "serial=2001");

    let wait_for = |want: &str| {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let got = served_serial(port);
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "still serving {got:?}, not {want:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    install("second");
    server.signal("-HUP");
    wait_for("serial=2002");
    let (status, _, health) = curl_json(&["--cacert", ca, &format!("{}/healthz", server.base)]);
    assert_eq!((status, &health["status"]), (200, &json!("ok")));

    // A bad pair (the first certificate with the second's key): refused,
    // logged, and the second stays in force.
    std::fs::copy(certs.path().join("first.pem"), &cert).expect("cert");
    server.signal("-HUP");
    let deadline = Instant::now() + Duration::from_secs(15);
    let log = loop {
        let log = std::fs::read_to_string(data.path().join("serve.log")).expect("log");
        if log.contains("TLS: the new certificate and key are refused") {
            break log;
        }
        assert!(Instant::now() < deadline, "no refusal logged:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(log.contains("is not the key of --tls-cert"), "{log}");
    assert_eq!(served_serial(port), "serial=2002");
    let (status, _, _) = curl_json(&["--cacert", ca, &format!("{}/healthz", server.base)]);
    assert_eq!(status, 200);
}

/// The cvd example from harness-alpha-001 (cleared for T3) with `data`.
fn cvd(id: &str, data: &str) -> String {
    let mut m = super::with_id(example("cvd-material-synthesis"), id);
    m["timestamp"] = json!("2025-01-15T08:30:00.000Z");
    m["payload"]["constraints"]["data_classification"] = json!(data);
    m.to_string()
}

/// Submits `message` as harness-alpha-001 to `url` with curl, run inside
/// `netns` when given.
fn submit_over(netns: Option<&Netns>, url: &str, message: &str, extra: &[&str]) -> (u16, Value) {
    let auth = format!("Authorization: Bearer {ALPHA}");
    let (status, _, answer) = curl_json_from(
        netns,
        &[
            extra,
            &[
                "-H",
                &auth,
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                message,
                url,
            ],
        ]
        .concat(),
    );
    (status, answer)
}

#[test]
fn plaintext_beyond_loopback_is_refused_unless_asked_for_and_t3_in_clear_is_rejected() {
    // The client beyond loopback: curl in a namespace of the test's own,
    // reaching the server at the host side of their link.
    let netns = Netns::new();
    let ip = netns.host;
    let data = lab();
    // No TLS, no flag: refused, naming the fix.
    let (code, log) = match spawn(data.path(), &["--listen", "0.0.0.0:0"]) {
        Ok(_) => panic!("a plaintext listener on 0.0.0.0 was started"),
        Err(refused) => refused,
    };
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("--tls-cert") && log.contains("--plaintext-beyond-loopback"),
        "{log}"
    );

    // On purpose: it serves, and tells T3 from beyond loopback no.
    let server = spawn(
        data.path(),
        &["--listen", "0.0.0.0:0", "--plaintext-beyond-loopback"],
    )
    .unwrap_or_else(|(code, log)| panic!("exit {code:?}: {log}"));
    let plain_port = port(&server);
    let beyond = format!("http://{ip}:{plain_port}/v1/tasks");
    let (status, answer) = submit_over(Some(&netns), &beyond, &cvd("clear-t3", "T3"), &[]);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "task_rejected", "{answer}");
    assert_eq!(answer["payload"]["reason_code"], "forbidden", "{answer}");
    assert!(
        answer["payload"]["reason_message"]
            .as_str()
            .is_some_and(|m| m.contains("plaintext from beyond loopback") && m.contains("HTTPS")),
        "{answer}"
    );
    // T2 from beyond loopback, and T3 from loopback, are admitted (the
    // cvd capability waits for an operator's approval: 202).
    let (status, answer) = submit_over(Some(&netns), &beyond, &cvd("clear-t2", "T2"), &[]);
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = submit_over(
        None,
        &format!("http://127.0.0.1:{plain_port}/v1/tasks"),
        &cvd("loopback-t3", "T3"),
        &[],
    );
    assert_eq!(status, 202, "{answer}");
    drop(server);

    // Over TLS on the same address, T3 from beyond loopback is admitted.
    let certs = tempfile::tempdir().expect("tempdir");
    make_ca(certs.path());
    make_server_cert(certs.path(), "server", "0x3001", Some(&ip.to_string()));
    let server = spawn(
        data.path(),
        &[
            "--listen",
            "0.0.0.0:0",
            "--tls-cert",
            certs.path().join("server.pem").to_str().expect("path"),
            "--tls-key",
            certs.path().join("server.key").to_str().expect("path"),
        ],
    )
    .unwrap_or_else(|(code, log)| panic!("exit {code:?}: {log}"));
    let ca: PathBuf = certs.path().join("ca.pem");
    let (status, answer) = submit_over(
        Some(&netns),
        &format!("https://{ip}:{}/v1/tasks", port(&server)),
        &cvd("tls-t3", "T3"),
        &["--cacert", ca.to_str().expect("path")],
    );
    assert_eq!(status, 202, "{answer}");
}
