//! HCP over AMQP (RabbitMQ), beside HTTP: `hcp serve --amqp URL`.
//!
//! The host declares one durable quorum queue per installed capability,
//! `hcp.tasks.<capability>`, so it receives only what it can run, and
//! consumes them with manual acknowledgements. Each delivery is a
//! `task_submit` that enters the engine through the same entry point as
//! HTTP ([`crate::engine::Host::submit_task`]); the caller is the message's
//! `user-id` property, which the broker checks against the connection's
//! login ([`crate::engine::Auth::Broker`]). Answers go to the message's
//! `reply_to` with `correlation_id` = the submission's `message_id`, each
//! published with a broker confirm.
//!
//! Delivery semantics (docs/amqp.md says them for operators):
//! - The task is recorded with its route (`reply_to`, `correlation_id`),
//!   not this host's yet; the delivery is acknowledged, and a round trip
//!   on the same channel says the broker took the acknowledgement; only
//!   then is the task recorded as this host's, the first answer
//!   (`task_accepted` or the pending-approval `job_status`) published, and
//!   the task may run. A copy whose acknowledgement cannot be sent or
//!   confirmed is let go (never run here). An answer that ends the
//!   submission (`task_rejected`) is published and confirmed before the
//!   acknowledgement.
//! - The final answer (`task_completed` / `task_failed`) is published from
//!   the route table ([`outbox`]) once the task ends, however it was run
//!   (here, after an operator's approval, or by the maintenance loop), and
//!   again after a restart until the broker confirms it.
//! - A host that stops before recording a task as its own may see it
//!   redelivered elsewhere; on its next start, such a task is failed here
//!   and never run or answered by this host (the host that took the
//!   redelivery answers; if the broker had taken the acknowledgement,
//!   nobody does: docs/amqp.md names that window).
//! - A malformed message (oversized, not JSON, not an HCP `task_submit`)
//!   is rejected without requeue, to the dead-letter queue
//!   `hcp.dead-letter`, and answered `task_rejected` where it has a
//!   `reply_to`.
//! - A lost connection is re-established with backoff; HTTP keeps serving.

mod capacity;
mod delivery;
mod outbox;

pub use outbox::LAMPORT_HEADER;

use super::state::AppState;
use anyhow::{Context as _, Result};
use lapin::options::{
    BasicConsumeOptions, BasicQosOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{ConnectionProperties, DefaultConnectionBuilder, ExchangeKind};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The exchange malformed messages are dead-lettered to.
pub const DEAD_LETTER_EXCHANGE: &str = "hcp.dead";
/// The queue that keeps them.
pub const DEAD_LETTER_QUEUE: &str = "hcp.dead-letter";

/// The queue of a capability's tasks.
pub fn task_queue(capability: &str) -> String {
    format!("hcp.tasks.{capability}")
}

/// Settings of the AMQP transport.
#[derive(Debug, Clone)]
pub struct AmqpConfig {
    /// `amqp://user:password@host:port/vhost`, or `amqps://...` for TLS.
    pub url: String,
    /// Tasks taken from the broker at once, per connection: the prefetch
    /// window (unacknowledged deliveries) and the tasks this host holds
    /// from delivery to final answer (see `capacity`).
    pub prefetch: u16,
    /// For `amqps://`: CA certificates (PEM) the broker's certificate may
    /// chain to, besides the system's roots.
    pub ca: Option<String>,
}

/// Largest CA file read.
const CA_LIMIT: u64 = 1 << 20;

/// Reads a PEM file of CA certificates for `amqps://`: at least one
/// certificate, every `CERTIFICATE` block well formed.
///
/// # Errors
///
/// The file cannot be read, is over 1 MiB, or holds no certificate or a
/// damaged one.
pub fn read_ca(path: &std::path::Path) -> Result<String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let shown = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("--amqp-ca {shown}"))?;
    if meta.len() > CA_LIMIT {
        anyhow::bail!(
            "--amqp-ca {shown}: {} bytes; a CA file is at most {CA_LIMIT}",
            meta.len()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--amqp-ca {shown}: not a text (PEM) file"))?;
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(text.as_bytes()) {
        cert.map_err(|e| anyhow::anyhow!("--amqp-ca {shown}: a damaged certificate: {e}"))?;
        count += 1;
    }
    if count == 0 {
        anyhow::bail!(
            "--amqp-ca {shown}: no PEM certificate in it (-----BEGIN CERTIFICATE----- blocks)"
        );
    }
    Ok(text)
}

/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Consumes until the task is aborted: connects, declares, consumes; when
/// the connection is lost, waits (doubling from half a second up to 30 s)
/// and starts again.
pub(crate) async fn run(state: AppState, config: AmqpConfig) {
    let mut backoff = Duration::from_millis(500);
    let readiness = state.readiness();
    readiness.broker_configured.store(true, Ordering::SeqCst);
    loop {
        let ended = session(&state, &config).await;
        readiness.broker_connected.store(false, Ordering::SeqCst);
        match ended {
            Ok(()) => {
                tracing::warn!(target: "hcp::amqp", "the broker closed the connection; reconnecting");
                backoff = Duration::from_millis(500);
            }
            Err(e) => {
                tracing::warn!(target: "hcp::amqp", "AMQP: {e:#}; reconnecting in {backoff:?}");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection's life: declare, consume, answer, until it fails.
async fn session(state: &AppState, config: &AmqpConfig) -> Result<()> {
    let connection = DefaultConnectionBuilder::new()?
        .with_uri_str(config.url.clone())
        .with_properties(
            ConnectionProperties::default()
                .with_connection_name(format!("hcp {}", state.host.host_id()).into()),
        )
        .with_tls_config(OwnedTLSConfig {
            identity: None,
            cert_chain: config.ca.clone(),
        })
        .connect()
        .await
        .with_context(|| format!("cannot connect to {}", redact(&config.url)))?;
    let consume = connection.create_channel().await?;
    consume
        .basic_qos(config.prefetch, BasicQosOptions::default())
        .await?;
    let publish = connection.create_channel().await?;
    publish
        .confirm_select(ConfirmSelectOptions::default())
        .await?;

    consume
        .exchange_declare(
            DEAD_LETTER_EXCHANGE.into(),
            ExchangeKind::Fanout,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await?;
    consume
        .queue_declare(
            DEAD_LETTER_QUEUE.into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await?;
    consume
        .queue_bind(
            DEAD_LETTER_QUEUE.into(),
            DEAD_LETTER_EXCHANGE.into(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;

    // Every answer carries the broker user the host logged in as.
    let answering = outbox::Answering {
        channel: publish.clone(),
        login: broker_login(&config.url).into(),
    };
    let capacity = capacity::Capacity::new(config.prefetch);
    // Tasks acknowledged on an earlier connection and not answered yet
    // are this host's work still.
    // A final task whose answer is still to be published holds none.
    for route in state.host.store.open_routes()? {
        let over = state
            .host
            .store
            .task_stamp(&route.task_id)?
            .is_some_and(|(s, _)| s.is_final());
        if route.acked && !over {
            capacity.adopt(&route.task_id);
        }
    }
    let links = Links {
        state: state.clone(),
        consume: consume.clone(),
        publish: answering.clone(),
        prefetch: config.prefetch,
        capacity: capacity.clone(),
    };
    let mut consumers = tokio::task::JoinSet::new();
    let capabilities = installed_names(state)?;
    let all: Vec<String> = capabilities.iter().cloned().collect();
    links.consume_all(&all, &mut consumers).await?;
    tracing::info!(
        target: "hcp::amqp",
        "consuming {} queue(s) on {}: {}",
        capabilities.len(),
        redact(&config.url),
        capabilities.iter().map(|c| task_queue(c)).collect::<Vec<_>>().join(", ")
    );
    consumers.spawn(outbox::run(state.clone(), answering, capacity));
    // Ready for `/readyz` from here until this connection ends.
    state
        .readiness()
        .broker_connected
        .store(true, Ordering::SeqCst);
    consumers.spawn(links.watch_installs(capabilities));
    // The first consumer (or the outbox) to end means the connection or a
    // channel is gone: start over.
    let ended = match consumers.join_next().await {
        Some(Ok(Err(e))) => Err(e),
        Some(Err(e)) => Err(anyhow::anyhow!("consumer task: {e}")),
        _ => Ok(()),
    };
    consumers.abort_all();
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        connection.close(200, "reconnecting".into()),
    )
    .await;
    ended
}

/// How often the registry is read for capabilities installed meanwhile
/// (by this process or another on the same data directory).
const INSTALL_POLL: Duration = Duration::from_secs(2);

/// The names of the installed capabilities.
fn installed_names(state: &AppState) -> Result<BTreeSet<String>> {
    Ok(state
        .host
        .store
        .installed()?
        .into_iter()
        .map(|i| i.name)
        .collect())
}

/// Declares a capability's queue (durable, quorum, dead-lettering to
/// [`DEAD_LETTER_EXCHANGE`]) and starts consuming it.
async fn consume_queue(
    state: &AppState,
    channel: &lapin::Channel,
    capability: &str,
) -> Result<lapin::Consumer> {
    let queue = task_queue(capability);
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(DEAD_LETTER_EXCHANGE.into()),
    );
    channel
        .queue_declare(queue.as_str().into(), QueueDeclareOptions::durable(), args)
        .await
        .with_context(|| format!("declaring {queue}"))?;
    channel
        .basic_consume(
            queue.as_str().into(),
            format!("hcp-{}-{capability}", state.host.host_id()).into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .with_context(|| format!("consuming {queue}"))
}

/// What a consumer of a task queue needs: the connection's channels and
/// the host's places.
struct Links {
    state: AppState,
    consume: lapin::Channel,
    publish: outbox::Answering,
    prefetch: u16,
    capacity: capacity::Capacity,
}

impl Links {
    /// Declares and consumes the queues of `capabilities`, one consumer
    /// task each in `consumers`.
    async fn consume_all(
        &self,
        capabilities: &[String],
        consumers: &mut tokio::task::JoinSet<Result<()>>,
    ) -> Result<()> {
        for capability in capabilities {
            let consumer = consume_queue(&self.state, &self.consume, capability).await?;
            consumers.spawn(delivery::consume(
                self.state.clone(),
                delivery::Wires {
                    publish: self.publish.clone(),
                    consume: self.consume.clone(),
                    prefetch: self.prefetch,
                },
                consumer,
                self.capacity.clone(),
            ));
        }
        Ok(())
    }

    /// Declares and consumes the queue of every capability installed after
    /// the connection was made, until a consumer of its own ends or a
    /// declaration fails (the connection is gone: the session starts over).
    async fn watch_installs(self, mut known: BTreeSet<String>) -> Result<()> {
        let mut consumers = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                ended = consumers.join_next(), if !consumers.is_empty() => {
                    return match ended {
                        Some(Ok(result)) => result,
                        Some(Err(e)) => Err(anyhow::anyhow!("consumer task: {e}")),
                        None => Ok(()),
                    };
                }
                () = tokio::time::sleep(INSTALL_POLL) => {}
            }
            let now = installed_names(&self.state)?;
            let new: Vec<String> = now.difference(&known).cloned().collect();
            self.consume_all(&new, &mut consumers).await?;
            for capability in &new {
                tracing::info!(
                    target: "hcp::amqp",
                    "consuming {} (installed while serving)",
                    task_queue(capability)
                );
            }
            // Never consumed twice: an uninstalled capability keeps its
            // queue (its tasks are refused) and is not declared again.
            known.extend(now);
        }
    }
}

/// The broker user an AMQP URL logs in as (`guest` when it names none,
/// as lapin does).
fn broker_login(url: &str) -> String {
    url.parse::<lapin::uri::AMQPUri>()
        .map(|u| u.authority.userinfo.username)
        .unwrap_or_else(|_| lapin::uri::AMQPUserInfo::default().username)
}

/// The URL without its password, for logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redact("amqp://hcp:s3cret@127.0.0.1:5672/%2f"),
            "amqp://hcp:***@127.0.0.1:5672/%2f"
        );
        assert_eq!(redact("amqp://127.0.0.1"), "amqp://127.0.0.1");
    }

    #[test]
    fn answers_carry_the_login_of_the_url() {
        assert_eq!(
            broker_login("amqp://hcp-host:s3cret@127.0.0.1:5672/%2f"),
            "hcp-host"
        );
        assert_eq!(broker_login("amqps://h%40st:p@localhost/%2f"), "h@st");
        assert_eq!(broker_login("amqp://127.0.0.1"), "guest");
    }
}
