//! A real RabbitMQ node for a test: Debian's `rabbitmq-server`, started on
//! loopback with its own node name, ports and data directory, and stopped
//! (its directory removed) when the [`Broker`] is dropped.
//!
//! Debian's broker runs as the `rabbitmq` user, so the node's directory is
//! made over to that user and every `rabbitmq-server` / `rabbitmqctl` call
//! runs as it (`runuser`; the tests run as root, as CI does). Each node gets
//! its own Erlang port mapper port, so nodes of parallel tests never meet.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";
const CTL: &str = "/usr/lib/rabbitmq/bin/rabbitmqctl";
const EPMD: &str = "/usr/bin/epmd";

/// The largest message the node takes (`max_message_size`), as
/// docs/amqp.md sets it: a task is at most 1 MiB, and the host's answers
/// need room for a capability's outputs (1 MiB by default).
pub const MAX_MESSAGE_SIZE: usize = 2 << 20;

/// How long a node may take to start (it takes about 6 to 10 s here).
const STARTUP: Duration = Duration::from_secs(90);

static NODES: AtomicU32 = AtomicU32::new(0);

/// A running RabbitMQ node owned by one test.
#[derive(Debug)]
pub struct Broker {
    dir: tempfile::TempDir,
    node: String,
    port: u16,
    dist_port: u16,
    epmd_port: u16,
    /// The AMQPS (TLS) listener's port, when the node has one.
    tls_port: Option<u16>,
    child: Option<Child>,
}

/// A free TCP port on loopback (bound, then released for the broker).
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A CA (`ca.pem`) and a server certificate it signed for `localhost` and
/// `127.0.0.1` (`server.pem`, `server.key`) in `dir`, made with `openssl`.
pub fn make_certificates(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let openssl = |args: &[&str]| -> io::Result<()> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
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
    ]);
    openssl(&ca)?;
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(&csr)?;
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ])
}

/// Whether this machine has Debian's broker (`scripts/test` installs it).
pub fn installed() -> bool {
    Path::new(SERVER).exists() && Path::new(CTL).exists()
}

impl Broker {
    /// Starts a node and waits until it accepts connections. The default
    /// `guest` user stays (loopback only), and no other user exists.
    ///
    /// # Errors
    ///
    /// The broker is not installed, or the node did not start in time (the
    /// error holds the end of its log).
    pub fn start() -> io::Result<Self> {
        Self::start_with(false)
    }

    /// [`Broker::start`], with an AMQPS listener too: a certificate for
    /// `localhost` and `127.0.0.1` made by a CA of its own
    /// ([`Broker::ca_path`]), with `openssl`.
    ///
    /// # Errors
    ///
    /// As [`Broker::start`], or `openssl` failed.
    pub fn start_tls() -> io::Result<Self> {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> io::Result<Self> {
        if !installed() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{SERVER} is missing: install Debian's rabbitmq-server (scripts/test does)"
                ),
            ));
        }
        // A port found free may be taken by another test before the node
        // binds it: a node that exits at startup is tried again on new
        // ports, in a new directory.
        let mut last = None;
        for _ in 0..4 {
            match Self::try_start(tls) {
                Ok(broker) => return Ok(broker),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("the broker did not start")))
    }

    fn try_start(tls: bool) -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("hcp-broker-").tempdir()?;
        let n = NODES.fetch_add(1, Ordering::Relaxed);
        let node = format!("hcptest{}x{n}@localhost", std::process::id());
        let mut broker = Self {
            dir,
            node,
            port: free_port()?,
            dist_port: free_port()?,
            epmd_port: free_port()?,
            tls_port: None,
            child: None,
        };
        for sub in ["mnesia", "log", "plugins-expand"] {
            std::fs::create_dir_all(broker.dir.path().join(sub))?;
        }
        let mut conf = format!(
            "listeners.tcp.default = 127.0.0.1:{}\nloopback_users = none\n\
             log.console = false\nlog.file.level = info\n\
             max_message_size = {MAX_MESSAGE_SIZE}\n",
            broker.port
        );
        if tls {
            let port = free_port()?;
            let dir = broker.dir.path().join("tls");
            make_certificates(&dir)?;
            conf.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{port}\n\
                 ssl_options.cacertfile = {ca}\n\
                 ssl_options.certfile = {cert}\n\
                 ssl_options.keyfile = {key}\n\
                 ssl_options.verify = verify_none\n\
                 ssl_options.fail_if_no_peer_cert = false\n",
                ca = dir.join("ca.pem").display(),
                cert = dir.join("server.pem").display(),
                key = dir.join("server.key").display(),
            ));
            broker.tls_port = Some(port);
        }
        std::fs::write(broker.dir.path().join("rabbitmq.conf"), conf)?;
        std::fs::write(broker.dir.path().join("enabled_plugins"), "[].\n")?;
        let status = Command::new("chown")
            .args(["-R", "rabbitmq:rabbitmq"])
            .arg(broker.dir.path())
            .status()?;
        if !status.success() {
            return Err(io::Error::other("chown of the broker directory failed"));
        }
        broker.spawn()?;
        Ok(broker)
    }

    fn spawn(&mut self) -> io::Result<()> {
        let log = std::fs::File::create(self.dir.path().join("server.out"))?;
        let mut command = self.as_rabbitmq(SERVER);
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.child = Some(command.spawn()?);
        self.await_startup()
    }

    fn await_startup(&mut self) -> io::Result<()> {
        let started = Instant::now();
        loop {
            let out = self.ctl(&["await_startup", "--timeout", "10"])?;
            if out.status.success() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                return Err(io::Error::other(format!(
                    "the broker node {} exited while starting ({status}):\n{}",
                    self.node,
                    self.log_tail()
                )));
            }
            if started.elapsed() > STARTUP {
                return Err(io::Error::other(format!(
                    "the broker node {} did not start in {STARTUP:?}: {}\n{}",
                    self.node,
                    String::from_utf8_lossy(&out.stderr),
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// A command run as the `rabbitmq` user with this node's environment.
    fn as_rabbitmq(&self, program: &str) -> Command {
        let d = self.dir.path();
        let p = |s: &str| d.join(s);
        let mut c = Command::new("runuser");
        c.args(["-u", "rabbitmq", "--", program]);
        c.env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", d)
            .env("LANG", "C.UTF-8")
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", p("mnesia"))
            .env("RABBITMQ_LOG_BASE", p("log"))
            .env("RABBITMQ_FEATURE_FLAGS_FILE", p("feature_flags"))
            .env("RABBITMQ_PLUGINS_EXPAND_DIR", p("plugins-expand"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", p("enabled_plugins"))
            .env("RABBITMQ_PID_FILE", p("node.pid"))
            .env("RABBITMQ_CONFIG_FILE", p("rabbitmq.conf"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", p("advanced.config"))
            .env("RABBITMQ_CONF_ENV_FILE", p("rabbitmq-env.conf"));
        c
    }

    /// Runs `rabbitmqctl` against this node.
    ///
    /// # Errors
    ///
    /// `rabbitmqctl` could not be started.
    pub fn ctl(&self, args: &[&str]) -> io::Result<Output> {
        let mut c = self.as_rabbitmq(CTL);
        c.args(args).stdin(Stdio::null());
        c.output()
    }

    /// Runs `rabbitmqctl` and fails with its output when it fails.
    ///
    /// # Errors
    ///
    /// The command failed.
    pub fn ctl_ok(&self, args: &[&str]) -> io::Result<()> {
        let out = self.ctl(args)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "rabbitmqctl {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }

    /// Creates a user with full permissions on the default virtual host,
    /// as an operator would (`rabbitmqctl add_user` and `set_permissions`).
    ///
    /// # Errors
    ///
    /// `rabbitmqctl` refused.
    pub fn add_user(&self, user: &str, password: &str) -> io::Result<()> {
        self.add_user_with(user, password, [".*", ".*", ".*"])
    }

    /// Creates a user with the given `configure`, `write` and `read`
    /// permissions (regular expressions on resource names) on the default
    /// virtual host.
    ///
    /// # Errors
    ///
    /// `rabbitmqctl` refused.
    pub fn add_user_with(
        &self,
        user: &str,
        password: &str,
        [configure, write, read]: [&str; 3],
    ) -> io::Result<()> {
        self.ctl_ok(&["add_user", user, password])?;
        self.ctl_ok(&["set_permissions", "-p", "/", user, configure, write, read])
    }

    /// The AMQP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `amqp://user:password@127.0.0.1:port/%2f`.
    pub fn url(&self, user: &str, password: &str) -> String {
        format!("amqp://{user}:{password}@127.0.0.1:{}/%2f", self.port)
    }

    /// `amqps://user:password@localhost:port/%2f` (a node started with
    /// [`Broker::start_tls`]).
    ///
    /// # Panics
    ///
    /// The node has no TLS listener.
    pub fn tls_url(&self, user: &str, password: &str) -> String {
        let port = self
            .tls_port
            .expect("a node started with Broker::start_tls");
        format!("amqps://{user}:{password}@localhost:{port}/%2f")
    }

    /// The PEM file of the CA that signed the node's TLS certificate.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("tls").join("ca.pem")
    }

    /// Stops the node and starts it again on the same ports and data (for
    /// tests of a broker restart); durable queues and their messages stay.
    ///
    /// # Errors
    ///
    /// The node did not stop or did not start again.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop_node()?;
        self.spawn()
    }

    fn stop_node(&mut self) -> io::Result<()> {
        let out = self.ctl(&["stop"]);
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while child.try_wait()?.is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        out.map(|_| ())
    }

    /// The node's directory (its logs are under `log/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last lines of the node's own output and log, for failures.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        let mut files: Vec<PathBuf> = vec![self.dir.path().join("server.out")];
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("log")) {
            files.extend(entries.flatten().map(|e| e.path()));
        }
        for f in files {
            if let Ok(s) = std::fs::read_to_string(&f) {
                let lines: Vec<&str> = s.lines().collect();
                let start = lines.len().saturating_sub(20);
                text.push_str(&format!(
                    "--- {}\n{}\n",
                    f.display(),
                    lines[start..].join("\n")
                ));
            }
        }
        text
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.stop_node();
        // The node's port mapper (on this node's own port) outlives it.
        let _ = self
            .as_rabbitmq(EPMD)
            .arg("-kill")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
