//! `hcp serve`: the HTTP API and the operator's page.

use super::{HostDirs, LogFormat, Outcome};
use crate::engine::{Host, HostConfig, HostPaths};
use crate::serve::{ConnLimits, ServeConfig, serve};
use anyhow::Context as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `hcp serve`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Serves the HTTP API (docs/openapi.json) and the operator's page on the \
embedded default: SQLite under the data directory, loopback only unless --listen says \
otherwise. Prints `listening on http://ADDR` once it accepts connections. Tasks a crash left \
running are answered task_failed on start. The database is checked first (`hcp store check`): \
a damaged store, or one that lost acknowledged data, is refused (exit 2). SIGTERM or Ctrl-C \
stops accepting, lets running tasks finish (up to --shutdown-grace) and exits 0; tasks still \
running then are stopped and answered task_failed (internal_error, with their last checkpoint; \
a gate.abandoned receipt each), and the exit status is 1. The log says when a shutdown began \
and how it ended (target hcp::shutdown). SIGHUP reloads \
the policy directory (as `hcp policy reload` does): the whole set is checked first and kept on \
any problem; each reload is a `policy.reload` receipt. Connections are bounded: \
--header-timeout, --idle-timeout and --max-connections.\n\n\
Logs go to stderr, at info unless HCP_LOG (or RUST_LOG) says otherwise (`debug`, \
`hcp=debug,warn`, ...): a startup line (address, data directory, policy set hash, transports), \
each request that changes something or is refused (method, path, status, duration; reads that \
succeed, such as the operator page's polling, at debug), each task's final answer, each \
approval decision, policy reload and shutdown step; as text or, with --log-format json, one \
JSON object per line. Colour only on a terminal and without NO_COLOR.\n\n\
TLS: --tls-cert and --tls-key serve HTTPS (the operator's page and every endpoint; answers \
carry Strict-Transport-Security), printing `listening on https://ADDR`; SIGHUP reads the pair \
again (a pair that does not load is refused and the one in force kept). Listening beyond \
loopback without TLS is refused (exit 2) unless --plaintext-beyond-loopback says it is on \
purpose; a task of data above T2 that came in plaintext from beyond loopback is answered \
task_rejected (forbidden)."
)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one). An address beyond
    /// loopback needs --tls-cert and --tls-key, or --plaintext-beyond-loopback.
    #[arg(long, env = "HCP_LISTEN", default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Serve HTTPS with this certificate chain (PEM, the server's own
    /// certificate first); with --tls-key. Read again on SIGHUP: a new pair
    /// that does not load is refused (logged) and the pair in force kept.
    #[arg(
        long,
        env = "HCP_TLS_CERT",
        value_name = "PEM_FILE",
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        env = "HCP_TLS_KEY",
        value_name = "PEM_FILE",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
    /// Serve plain HTTP on an address beyond loopback on purpose (behind a
    /// TLS-terminating proxy, on a network of its own): bearer tokens and
    /// task data then cross it in clear, and tasks of data above T2 from
    /// beyond loopback are refused (task_rejected, forbidden).
    #[arg(long, env = "HCP_PLAINTEXT_BEYOND_LOOPBACK")]
    plaintext_beyond_loopback: bool,
    /// How long a task waits for an operator before it is rejected
    /// (ISO 8601 duration).
    #[arg(long, default_value = "PT1H")]
    approval_ttl: String,
    /// The most admitted tasks one caller may have waiting to run (for a
    /// session slot or equipment), counted at the gate; the next is
    /// rejected `resource_unavailable` until one of them starts.
    #[arg(long, env = "HCP_MAX_QUEUED_PER_CALLER",
          default_value_t = crate::engine::MAX_QUEUED_PER_CALLER,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_queued_per_caller: u64,
    /// How long running tasks may take to finish on shutdown (ISO 8601);
    /// those still running then are stopped and answered task_failed (exit 1).
    #[arg(long, default_value = "PT30S")]
    shutdown_grace: String,
    /// The HID executor's serial port (e.g. /dev/ttyACM0, or the path `hcp
    /// hid sim` prints). Without it HID proposals are recorded and decided
    /// but EXECUTE cannot be armed.
    #[arg(long, env = "HCP_HID_DEVICE", value_name = "PATH")]
    hid_device: Option<String>,
    /// How long to wait for each of the executor's answers (ISO 8601).
    #[arg(long, default_value = "PT1S")]
    hid_answer_timeout: String,
    /// Longest a client may take to send a request's headers, and longest a
    /// kept-alive connection may wait for its next request (ISO 8601).
    #[arg(long, env = "HCP_HEADER_TIMEOUT", default_value = "PT10S")]
    header_timeout: String,
    /// Longest a connection may stay open with no byte moving either way
    /// (ISO 8601).
    #[arg(long, env = "HCP_IDLE_TIMEOUT", default_value = "PT60S")]
    idle_timeout: String,
    /// Connections open at once; one more is answered 503 and closed.
    #[arg(long, env = "HCP_MAX_CONNECTIONS", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Also take tasks from a RabbitMQ broker: `amqp://USER:PASSWORD@HOST:PORT/VHOST`,
    /// or `amqps://...` for AMQP over TLS (the broker's certificate is checked against
    /// `--amqp-ca`, or the system's roots without it). One durable queue per installed
    /// capability, `hcp.tasks.<capability>`; the caller is the message's broker-checked
    /// user-id (`amqp_user` in callers.json). See docs/amqp.md.
    #[arg(long, env = "HCP_AMQP_URL", value_name = "URL",
          value_parser = amqp_url)]
    amqp: Option<String>,
    /// CA certificate(s), PEM, that an `amqps://` broker's certificate may chain to,
    /// trusted besides the system's roots (a private CA for the broker).
    #[arg(long, env = "HCP_AMQP_CA", value_name = "PEM_FILE")]
    amqp_ca: Option<PathBuf>,
    /// Tasks taken from the broker at once: the prefetch window, and the AMQP tasks this
    /// host holds from delivery to final answer (a full host leaves the queue to others).
    #[arg(long, env = "HCP_AMQP_PREFETCH", default_value_t = 8,
          value_parser = clap::value_parser!(u16).range(1..))]
    amqp_prefetch: u16,
    /// An `Origin` a browser-based MCP client may send to /mcp
    /// (`scheme://host[:port]`; repeatable). Requests with any other Origin
    /// are refused 403; requests without one (MCP clients outside a
    /// browser) are not affected.
    #[arg(long = "mcp-allowed-origin", value_name = "ORIGIN")]
    mcp_allowed_origins: Vec<String>,
    /// A host name requests to /mcp may name in their Host header, beyond
    /// IP addresses and localhost (repeatable): the server's DNS name when
    /// it serves beyond loopback. Any other name is refused 403 (DNS
    /// rebinding).
    #[arg(long = "mcp-allowed-host", value_name = "NAME")]
    mcp_allowed_hosts: Vec<String>,
    /// How long an MCP tools/call waits for its task's final answer (ISO
    /// 8601); a task still waiting then (for an operator's approval, say)
    /// is answered with its id and how to follow it.
    #[arg(long, env = "HCP_MCP_WAIT", default_value = "PT5M")]
    mcp_wait: String,
    /// How log lines are written to stderr.
    #[arg(long, env = "HCP_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(flatten)]
    dirs: HostDirs,
}

/// An AMQP URL as lapin reads it: `amqp://` or `amqps://`.
fn amqp_url(text: &str) -> std::result::Result<String, String> {
    let scheme_ok = ["amqp://", "amqps://"].iter().any(|scheme| {
        text.get(..scheme.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
    });
    if !scheme_ok {
        return Err("not an AMQP URL: it must start with amqp:// or amqps:// \
             (amqp://user:password@host:port/vhost)"
            .to_owned());
    }
    text.parse::<lapin::uri::AMQPUri>()
        .map(|_| text.to_owned())
        .map_err(|e| format!("not an AMQP URL (amqp://user:password@host:port/vhost): {e}"))
}

/// The AMQP settings from the flags: `--amqp-ca` only with an `amqps://`
/// URL, and only a file of PEM certificates.
fn amqp_config(args: &ServeArgs) -> anyhow::Result<Option<crate::serve::amqp::AmqpConfig>> {
    let Some(url) = args.amqp.clone() else {
        if let Some(ca) = &args.amqp_ca {
            anyhow::bail!(
                "--amqp-ca {}: there is no --amqp URL to use it with",
                ca.display()
            );
        }
        return Ok(None);
    };
    let tls = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("amqps://"));
    let ca = match &args.amqp_ca {
        None => None,
        Some(path) if !tls => anyhow::bail!(
            "--amqp-ca {}: the CA is for amqps:// URLs; {} is plain AMQP",
            path.display(),
            crate::serve::amqp::redact(&url)
        ),
        Some(path) => Some(crate::serve::amqp::read_ca(path)?),
    };
    Ok(Some(crate::serve::amqp::AmqpConfig {
        url,
        prefetch: args.amqp_prefetch,
        ca,
    }))
}

impl ServeArgs {
    /// How the server logs.
    pub(super) fn log_format(&self) -> LogFormat {
        self.log_format
    }
}

pub(super) async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("cannot listen for SIGTERM: {e}");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Reloads the policy (and the TLS certificate and key, if served) on
/// every SIGHUP until the server stops. The signal is listened for from
/// the call on, so a SIGHUP never kills the server once it listens.
#[cfg(unix)]
fn reload_on_sighup(
    host: Arc<Host>,
    tls: Option<Arc<crate::serve::Tls>>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot listen for SIGHUP")?;
    Ok(tokio::spawn(async move {
        while hup.recv().await.is_some() {
            if let Some(tls) = &tls {
                reload_tls(tls);
            }
            let host = host.clone();
            // Refusals and outcomes are logged and recorded by the reload.
            let _ = tokio::task::spawn_blocking(move || host.reload_policy("signal:SIGHUP")).await;
        }
    }))
}

/// Reads the TLS pair again; a pair that does not load is refused, the
/// one in force kept.
#[cfg(unix)]
fn reload_tls(tls: &crate::serve::Tls) {
    let files = tls.files();
    match tls.reload() {
        Ok(fingerprint) => tracing::info!(
            target: "hcp::tls",
            "TLS: reloaded {} (certificate sha256 {fingerprint})",
            files.cert.display()
        ),
        Err(e) => tracing::error!(
            target: "hcp::tls",
            "TLS: the new certificate and key are refused; the ones in force (sha256 {}) are kept: {e:#}",
            tls.fingerprint()
        ),
    }
}

/// The TLS pair from the flags, and the refusal of a plaintext listener
/// beyond loopback that no flag asked for.
fn tls_config(args: &ServeArgs) -> anyhow::Result<Option<Arc<crate::serve::Tls>>> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::serve::Tls::load(crate::serve::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        })?),
        _ => None,
    };
    let beyond = !args.listen.ip().to_canonical().is_loopback();
    if tls.is_none() && beyond && !args.plaintext_beyond_loopback {
        anyhow::bail!(
            "--listen {}: not a loopback address, and without TLS bearer tokens and task data \
             would cross the network in clear. Serve HTTPS with --tls-cert and --tls-key (PEM \
             files), or pass --plaintext-beyond-loopback to serve plain HTTP on purpose (behind \
             a TLS-terminating proxy); tasks of data above T2 from beyond loopback are refused then",
            args.listen
        );
    }
    if tls.is_none() && beyond {
        tracing::warn!(
            "serving plain HTTP beyond loopback (--plaintext-beyond-loopback): bearer tokens and \
             task data cross the network in clear; tasks of data above T2 from beyond loopback \
             are refused"
        );
    }
    Ok(tls)
}

pub(super) fn run(args: ServeArgs) -> Outcome {
    let paths = &args.dirs.paths()?;
    let amqp = amqp_config(&args)?;
    let tls = tls_config(&args)?;
    let duration = |flag: &str, text: &str| {
        hcp_contracts::IsoDuration::parse(text)
            .map(|d| d.get())
            .map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
    };
    let approval_ttl = duration("approval-ttl", &args.approval_ttl)?;
    let shutdown_grace = duration("shutdown-grace", &args.shutdown_grace)?;
    let hid_device = match args.hid_device {
        Some(path) => Some(hcp_hid::device::DeviceConfig {
            answer_timeout: duration("hid-answer-timeout", &args.hid_answer_timeout)?,
            ..hcp_hid::device::DeviceConfig::new(path)
        }),
        None => None,
    };
    // A damaged store, or one that lost acknowledged data, is refused
    // before anything reads or writes it.
    crate::store::durable::check_at_startup(&paths.data_dir)?;
    let host = Arc::new(Host::open(
        HostPaths {
            data_dir: paths.data_dir.clone(),
            cache_dir: paths.cache_dir.clone(),
            policies_dir: paths.policies_dir.clone(),
        },
        HostConfig {
            approval_ttl,
            hid_device,
            max_queued_per_caller: args.max_queued_per_caller,
            ..HostConfig::default()
        },
    )?);
    let positive = |flag: &str, text: &str| {
        duration(flag, text).and_then(|d| {
            if d.is_zero() {
                anyhow::bail!("--{flag}: must be longer than zero")
            }
            Ok(d)
        })
    };
    let connections = ConnLimits {
        header_timeout: positive("header-timeout", &args.header_timeout)?,
        idle_timeout: positive("idle-timeout", &args.idle_timeout)?,
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
    };
    let config = ServeConfig {
        listen: args.listen,
        shutdown_grace,
        connections,
        amqp,
        tls: tls.clone(),
        mcp: crate::serve::McpHttpConfig {
            allowed_origins: args.mcp_allowed_origins.clone(),
            allowed_hosts: args.mcp_allowed_hosts.clone(),
            wait: positive("mcp-wait", &args.mcp_wait)?,
        },
        ..ServeConfig::default()
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Closed once the last of the server's tasks let go of it (below).
    let store = Arc::downgrade(&host.store);
    let stopped = super::runtime()?
        .block_on(async move {
            #[cfg(unix)]
            let reloads = reload_on_sighup(host.clone(), tls)?;
            let served = serve(
                host,
                config,
                |addr| {
                    println!("listening on {scheme}://{addr}");
                    use std::io::Write as _;
                    let _ = std::io::stdout().flush();
                },
                stop_signal(),
            )
            .await;
            #[cfg(unix)]
            reloads.abort();
            served
        })
        .context("hcp serve")?;
    // The runtime is gone, and with it every task that held the store.
    if store.upgrade().is_none() {
        tracing::info!(
            target: "hcp::shutdown",
            data_dir = %paths.data_dir.display(),
            "store closed: {}",
            paths.data_dir.display()
        );
    } else {
        tracing::warn!(
            target: "hcp::shutdown",
            data_dir = %paths.data_dir.display(),
            "store still held after the server stopped; it closes as the process exits"
        );
    }
    // Tasks stopped before they ended: the stop's answer is negative.
    if stopped.interrupted > 0 || stopped.left_running > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
