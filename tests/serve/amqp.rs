//! HCP over AMQP on a real RabbitMQ node: the seed's task answered on
//! `reply_to` (accepted, then completed), the caller taken from the
//! broker-checked `user-id` (none, an unknown one, or one that is not the
//! task's `caller_id`: `unauthorized`), and a malformed message
//! dead-lettered and answered while the next good one is served.

use super::{REPO_ROOT, Server, example, lab, with_id};
use hcp_tests::broker::Broker;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, Consumer};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

pub(super) const QUEUE: &str = "hcp.tasks.document-analysis";
/// docs/amqp.md: the host's configure, write and read permissions.
pub(super) const HOST_PERMISSIONS: [&str; 3] = [
    r"^(hcp\.|amq\.gen-).*",
    r"^(hcp\.|amq\.default$).*",
    r"^hcp\..*",
];
/// docs/amqp.md: a caller harness's (`user`): its own queues are
/// `<user>.*`, where the host answers it.
pub(super) fn caller_permissions(user: &str) -> [String; 3] {
    let own = format!(r"^{}\..*", user.replace('.', r"\."));
    [own.clone(), r"^amq\.default$".to_owned(), own]
}

/// Adds broker user `user` (password `<user>-secret`) with a caller's
/// permissions.
pub(super) fn add_caller(broker: &Broker, user: &str) {
    let [configure, write, read] = caller_permissions(user);
    broker
        .add_user_with(
            user,
            &format!("{user}-secret"),
            [configure.as_str(), write.as_str(), read.as_str()],
        )
        .expect("user");
}

/// The shipped policies, with the seed's two harnesses mapped to broker
/// users of the same names.
pub(super) fn policies_with_amqp_users(dir: &Path) {
    let source = Path::new(REPO_ROOT).join("policies");
    for entry in std::fs::read_dir(&source).expect("policies") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
        }
    }
    let path = dir.join("callers.json");
    let mut callers: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    for caller in callers["callers"].as_array_mut().expect("callers") {
        let id = caller["id"].as_str().expect("id").to_owned();
        if id.starts_with("harness-") {
            caller["amqp_user"] = Value::String(id);
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&callers).expect("encode")).expect("write");
}

pub(super) struct Caller {
    pub(super) channel: Channel,
    replies: Consumer,
    pub(super) reply_to: String,
    log: std::path::PathBuf,
    _connection: Connection,
}

impl Caller {
    pub(super) async fn connect(broker: &Broker, user: &str, data: &Path) -> Self {
        Self::connect_with(broker, user, data, FieldTable::default()).await
    }

    /// [`Caller::connect`] with a reply queue declared with `queue_args`.
    async fn connect_with(
        broker: &Broker,
        user: &str,
        data: &Path,
        queue_args: FieldTable,
    ) -> Self {
        // In the caller's own namespace, where the host answers it.
        let name = format!("{user}.replies-{}", uuid::Uuid::new_v4());
        Self::connect_to(broker, user, data, &name, queue_args).await
    }

    /// [`Caller::connect`] reading answers from the queue `name`.
    async fn connect_to(
        broker: &Broker,
        user: &str,
        data: &Path,
        name: &str,
        queue_args: FieldTable,
    ) -> Self {
        let connection = Connection::connect(
            &broker.url(user, &format!("{user}-secret")),
            ConnectionProperties::default(),
        )
        .await
        .expect("the caller connects");
        let channel = connection.create_channel().await.expect("channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let queue = channel
            .queue_declare(
                name.into(),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..QueueDeclareOptions::default()
                },
                queue_args,
            )
            .await
            .expect("reply queue");
        let reply_to = queue.name().as_str().to_owned();
        let replies = channel
            .basic_consume(
                reply_to.as_str().into(),
                "replies".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("consume replies");
        Self {
            channel,
            replies,
            reply_to,
            log: data.join("serve.log"),
            _connection: connection,
        }
    }

    pub(super) async fn send(&self, body: &[u8], user_id: Option<&str>) {
        self.send_with(body, user_id, FieldTable::default()).await;
    }

    /// [`Caller::send`] with headers.
    pub(super) async fn send_with(&self, body: &[u8], user_id: Option<&str>, headers: FieldTable) {
        self.publish(body, user_id, headers, true).await;
    }

    /// [`Caller::send`] without `reply_to`: nobody is answered.
    pub(super) async fn send_unanswered(&self, body: &[u8], user_id: Option<&str>) {
        self.publish(body, user_id, FieldTable::default(), false)
            .await;
    }

    /// [`Caller::send`] to another capability's queue.
    async fn send_to(&self, queue: &str, body: &[u8], user_id: &str) {
        self.publish_to(queue, body, Some(user_id), FieldTable::default(), true)
            .await;
    }

    async fn publish(&self, body: &[u8], user_id: Option<&str>, headers: FieldTable, reply: bool) {
        self.publish_to(QUEUE, body, user_id, headers, reply).await;
    }

    async fn publish_to(
        &self,
        queue: &str,
        body: &[u8],
        user_id: Option<&str>,
        headers: FieldTable,
        reply: bool,
    ) {
        let reply_to = reply.then_some(self.reply_to.as_str());
        self.publish_replying(queue, body, user_id, headers, reply_to)
            .await;
    }

    /// Publishes `body` to `queue` with `reply_to` (any queue name).
    async fn publish_replying(
        &self,
        queue: &str,
        body: &[u8],
        user_id: Option<&str>,
        headers: FieldTable,
        reply_to: Option<&str>,
    ) {
        let mut props = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_headers(headers);
        if let Some(reply_to) = reply_to {
            props = props.with_reply_to(reply_to.into());
        }
        if let Some(u) = user_id {
            props = props.with_user_id(u.into());
        }
        let confirm = self
            .channel
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                body,
                props,
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
        assert!(confirm.is_ack(), "{confirm:?}");
    }

    /// The next answer: its correlation id and body.
    pub(super) async fn answer(&mut self) -> (String, Value) {
        let a = self
            .next(Duration::from_secs(120))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "no answer within two minutes; the host's log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                )
            });
        (a.correlation, a.body)
    }

    /// The next answer within `wait`, with the headers the host sets.
    pub(super) async fn next(&mut self, wait: Duration) -> Option<Reply> {
        let next = tokio::time::timeout(
            wait,
            std::future::poll_fn(|cx| {
                futures_core::Stream::poll_next(std::pin::Pin::new(&mut self.replies), cx)
            }),
        )
        .await
        .ok()?
        .expect("the reply stream is open")
        .expect("a delivery");
        let correlation = next
            .properties
            .correlation_id()
            .as_ref()
            .map(|c| c.as_str().to_owned())
            .unwrap_or_default();
        let header = |name: &str| {
            next.properties
                .headers()
                .as_ref()
                .and_then(|h| h.inner().get(name).cloned())
        };
        let host = match header("x-hcp-host-id") {
            Some(AMQPValue::LongString(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
            other => panic!("x-hcp-host-id: {other:?}"),
        };
        let lamport = match header("x-hcp-lamport") {
            Some(AMQPValue::LongLongInt(n)) => u64::try_from(n).expect("a clock is not negative"),
            other => panic!("x-hcp-lamport: {other:?}"),
        };
        let redelivered = matches!(header("x-hcp-redelivered"), Some(AMQPValue::Boolean(true)));
        // The broker vouches for an answer's user_id: the host's login.
        assert_eq!(
            next.properties.user_id().as_ref().map(|u| u.as_str()),
            Some("hcp-host"),
            "an answer's user_id is the host's broker user"
        );
        let duplicate = matches!(header("x-hcp-duplicate"), Some(AMQPValue::Boolean(true)));
        let body: Value = serde_json::from_slice(&next.data).expect("an answer is JSON");
        let id = next
            .properties
            .message_id()
            .as_ref()
            .map(|m| m.as_str().to_owned());
        assert_eq!(
            id.as_deref(),
            body["message_id"].as_str(),
            "the AMQP message_id is the answer's"
        );
        Some(Reply {
            correlation,
            body,
            host,
            lamport,
            redelivered,
            duplicate,
        })
    }
}

/// An answer as a caller reads it.
pub(super) struct Reply {
    /// The submission's `message_id`.
    pub(super) correlation: String,
    pub(super) body: Value,
    /// `x-hcp-host-id`.
    pub(super) host: String,
    /// `x-hcp-lamport`.
    pub(super) lamport: u64,
    /// `x-hcp-redelivered`: the host may have published this answer before.
    pub(super) redelivered: bool,
    /// `x-hcp-duplicate`: the answer to an earlier copy of the same
    /// submission, which is not run again.
    pub(super) duplicate: bool,
}

/// Waits until a host has declared the capability's queue and consumes it.
pub(super) async fn queue_ready(broker: &Broker) {
    consumed_by(broker, 1).await;
}

/// Waits until the capability's queue has at least `hosts` consumers.
pub(super) async fn consumed_by(broker: &Broker, hosts: u32) {
    let connection = Connection::connect(
        &broker.url("harness-local-01", "harness-local-01-secret"),
        ConnectionProperties::default(),
    )
    .await
    .expect("connect");
    for _ in 0..600 {
        // A passive declaration of a queue not there yet closes the channel.
        let channel = connection.create_channel().await.expect("channel");
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        if let Ok(queue) = channel
            .queue_declare(QUEUE.into(), passive, FieldTable::default())
            .await
            && queue.consumer_count() >= hosts
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{QUEUE} did not have {hosts} consumer(s) within a minute");
}

/// A host serving HTTP and AMQP on `broker`, as the broker user
/// `hcp-host`, with the seed's harnesses mapped to broker users `callers`
/// (made with the documented permissions). Keep the two directories.
pub(super) fn amqp_host(
    broker: &Broker,
    callers: &[&str],
) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    amqp_host_at(
        broker,
        callers,
        &broker.url("hcp-host", "hcp-host-secret"),
        &[],
    )
}

/// [`amqp_host`] connecting to `url`, with `extra` flags.
fn amqp_host_at(
    broker: &Broker,
    callers: &[&str],
    url: &str,
    extra: &[&str],
) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    amqp_host_env(broker, callers, url, extra, &[])
}

/// [`amqp_host_at`] with more environment variables (the test-only
/// `HCP_TEST_KILL_AT`).
fn amqp_host_env(
    broker: &Broker,
    callers: &[&str],
    url: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    broker
        .add_user_with("hcp-host", "hcp-host-secret", HOST_PERMISSIONS)
        .expect("user");
    for user in callers {
        add_caller(broker, user);
    }
    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_amqp_users(policies.path());
    let mut args = vec![
        "--amqp",
        url,
        "--policies",
        policies.path().to_str().expect("utf-8"),
    ];
    args.extend(extra);
    let server = Server::start_with_env(data.path(), &args, env);
    (data, policies, server)
}

/// The host of [`amqp_host`] started again on its data directory.
fn amqp_host_again(broker: &Broker, data: &Path, policies: &Path) -> Server {
    let url = broker.url("hcp-host", "hcp-host-secret");
    let args = [
        "--amqp",
        &url,
        "--policies",
        policies.to_str().expect("utf-8"),
    ];
    Server::start_with(data, &args)
}

#[test]
fn the_seed_task_over_amqp_and_callers_known_by_the_broker_only() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, server) = amqp_host(
        &broker,
        &["harness-local-01", "harness-alpha-001", "stranger"],
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut local = Caller::connect(&broker, "harness-local-01", data.path()).await;

        // The seed's example, as harness-local-01: accepted, then completed.
        let seed = with_id(example("document-analysis"), "amqp-seed-1");
        local
            .send(
                &serde_json::to_vec(&seed).expect("encode"),
                Some("harness-local-01"),
            )
            .await;
        let (id, first) = local.answer().await;
        assert_eq!(id, "amqp-seed-1");
        assert_eq!(first["type"], "task_accepted", "{first}");
        let (id, last) = local.answer().await;
        assert_eq!(id, "amqp-seed-1");
        assert_eq!(last["type"], "task_completed", "{last}");

        // The same message again (a caller's retry, or the broker's
        // redelivery of a message whose acknowledgement never arrived):
        // the original's first answer, marked a duplicate, and nothing
        // else (the task is not run again, and its final answer was sent).
        local
            .send(
                &serde_json::to_vec(&seed).expect("encode"),
                Some("harness-local-01"),
            )
            .await;
        let again = local
            .next(Duration::from_secs(120))
            .await
            .expect("an answer to the copy");
        assert_eq!(again.correlation, "amqp-seed-1");
        assert!(again.duplicate, "{}", again.body);
        assert_eq!(again.body, first);
        assert!(local.next(Duration::from_secs(2)).await.is_none());

        // No user-id: no queue is the sender's, so nothing is answered;
        // the message is dead-lettered and the log says why.
        let anonymous = with_id(example("document-analysis"), "amqp-anonymous");
        local
            .send(&serde_json::to_vec(&anonymous).expect("encode"), None)
            .await;
        assert!(local.next(Duration::from_secs(2)).await.is_none());
        logged(data.path(), "a message without user_id has no reply queue").await;

        // A broker user that is nobody's amqp_user: unauthorized.
        let mut stranger = Caller::connect(&broker, "stranger", data.path()).await;
        let theirs = with_id(example("document-analysis"), "amqp-stranger");
        stranger
            .send(
                &serde_json::to_vec(&theirs).expect("encode"),
                Some("stranger"),
            )
            .await;
        let (_, answer) = stranger.answer().await;
        assert_eq!(answer["payload"]["reason_code"], "unauthorized", "{answer}");

        // harness-alpha-001's broker login naming harness-local-01 as the
        // caller: unauthorized, whatever the task says.
        let mut alpha = Caller::connect(&broker, "harness-alpha-001", data.path()).await;
        let posing = with_id(example("document-analysis"), "amqp-posing");
        alpha
            .send(
                &serde_json::to_vec(&posing).expect("encode"),
                Some("harness-alpha-001"),
            )
            .await;
        let (_, answer) = alpha.answer().await;
        assert_eq!(answer["payload"]["reason_code"], "unauthorized", "{answer}");
        assert!(
            answer["payload"]["reason_message"]
                .as_str()
                .is_some_and(|m| m.contains("harness-alpha-001")),
            "{answer}"
        );

        // Not JSON: answered invalid_input and dead-lettered; the next good
        // message is served.
        local
            .send(b"this is not json", Some("harness-local-01"))
            .await;
        let (_, answer) = local.answer().await;
        assert_eq!(answer["type"], "task_rejected", "{answer}");
        assert_eq!(
            answer["payload"]["reason_code"], "invalid_input",
            "{answer}"
        );
        let next = with_id(example("document-analysis"), "amqp-seed-2");
        local
            .send(
                &serde_json::to_vec(&next).expect("encode"),
                Some("harness-local-01"),
            )
            .await;
        let (id, first) = local.answer().await;
        assert_eq!(
            (id.as_str(), &first["type"]),
            ("amqp-seed-2", &Value::from("task_accepted"))
        );
        let (_, last) = local.answer().await;
        assert_eq!(last["type"], "task_completed", "{last}");
        let dead = local
            .channel
            .queue_declare(
                "hcp.dead-letter".into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("the dead-letter queue exists");
        assert_eq!(
            dead.message_count(),
            2,
            "the message without user_id and the malformed one are dead-lettered"
        );
    });

    // The Python caller example (pika), as the README shows it.
    let out = std::process::Command::new("python3")
        .current_dir(REPO_ROOT)
        .args([
            "examples/amqp_caller.py",
            "--url",
            &broker.url("harness-local-01", "harness-local-01-secret"),
            "--message-id",
            "amqp-pika-1",
            "plugins/document-analysis/examples/task_submit.json",
        ])
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "examples/amqp_caller.py failed (pika==1.4.4 is installed by scripts/test): {stdout}{stderr}"
    );
    let kinds: Vec<String> = stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("one JSON object per line");
            v["type"].as_str().expect("type").to_owned()
        })
        .collect();
    assert_eq!(kinds, ["task_accepted", "task_completed"], "{stdout}");

    drop(server);
}

#[test]
fn a_bad_amqp_url_or_ca_is_refused_before_anything_starts() {
    let data = tempfile::tempdir().expect("tempdir");
    let not_pem = data.path().join("not.pem");
    std::fs::write(&not_pem, "just text, no certificate\n").expect("write");
    let not_pem = not_pem.to_str().expect("utf-8");
    let missing = data.path().join("missing.pem");
    let missing = missing.to_str().expect("utf-8");
    let cases: [(&[&str], &str); 6] = [
        (&["--amqp", "http://127.0.0.1:5672"], "not an AMQP URL"),
        (&["--amqp", "amqp://127.0.0.1:notaport"], "not an AMQP URL"),
        (
            &["--amqp", "amqp://h:p@127.0.0.1/%2f", "--amqp-ca", not_pem],
            "the CA is for amqps:// URLs; amqp://h:***@127.0.0.1/%2f is plain AMQP",
        ),
        (
            &["--amqp", "amqps://h:p@localhost/%2f", "--amqp-ca", not_pem],
            "no PEM certificate in it",
        ),
        (
            &["--amqp", "amqps://h:p@localhost/%2f", "--amqp-ca", missing],
            "missing.pem",
        ),
        (
            &["--amqp-ca", not_pem],
            "there is no --amqp URL to use it with",
        ),
    ];
    for (args, says) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("HCP_DATA_DIR", data.path())
            .current_dir(REPO_ROOT)
            .output()
            .expect("run hcp serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn amqps_with_the_brokers_ca_and_no_connection_to_a_certificate_nobody_vouches_for() {
    let broker = Broker::start_tls().expect("start a RabbitMQ node with TLS");
    let ca = broker.ca_path();
    let url = broker.tls_url("hcp-host", "hcp-host-secret");
    let (data, _policies, _server) = amqp_host_at(
        &broker,
        &["harness-local-01"],
        &url,
        &["--amqp-ca", ca.to_str().expect("utf-8")],
    );
    // A second host that trusts only the system's roots: the broker's
    // certificate is refused, the host says so and keeps serving HTTP.
    let untrusting = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_amqp_users(policies.path());
    let other = Server::start_with(
        untrusting.path(),
        &[
            "--amqp",
            &url,
            "--policies",
            policies.path().to_str().expect("utf-8"),
        ],
    );

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut local = Caller::connect(&broker, "harness-local-01", data.path()).await;
        let task = with_id(example("document-analysis"), "amqps-seed");
        local
            .send(
                &serde_json::to_vec(&task).expect("encode"),
                Some("harness-local-01"),
            )
            .await;
        let (id, first) = local.answer().await;
        assert_eq!(id, "amqps-seed");
        assert_eq!(first["type"], "task_accepted", "{first}");
        let (_, last) = local.answer().await;
        assert_eq!(last["type"], "task_completed", "{last}");
    });
    let log = std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default();
    assert!(log.contains("amqps://hcp-host:***@localhost"), "{log}");

    let log_path = untrusting.path().join("serve.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        if log.contains("certificate") && log.contains("reconnecting in") {
            assert!(!log.contains("consuming 1 queue"), "{log}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no certificate error within a minute:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, _) = other.get("/v1/capabilities", Some(super::LOCAL));
    assert_eq!(status, 200);
}

#[test]
fn the_host_carries_on_after_the_broker_restarts() {
    let mut broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, _server) = amqp_host(&broker, &["harness-local-01"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let round = |id: &'static str, broker: &Broker| {
        runtime.block_on(async {
            queue_ready(broker).await;
            let mut local = Caller::connect(broker, "harness-local-01", data.path()).await;
            let task = with_id(example("document-analysis"), id);
            local
                .send(
                    &serde_json::to_vec(&task).expect("encode"),
                    Some("harness-local-01"),
                )
                .await;
            let (first_id, first) = local.answer().await;
            let (_, last) = local.answer().await;
            assert_eq!(first_id, id);
            assert_eq!(first["type"], "task_accepted", "{first}");
            assert_eq!(last["type"], "task_completed", "{last}");
        });
    };
    round("amqp-before-restart", &broker);
    broker.restart().expect("restart the broker");
    // The queue is durable, so it is there at once; the answers come only
    // once the host has connected again.
    round("amqp-after-restart", &broker);
    let log = std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default();
    assert!(log.contains("reconnecting"), "{log}");
}

/// Sends the seed's task as `id`, as harness-local-01, and waits until a
/// host has taken the delivery (no message of the queue is ready).
async fn send_and_see_taken(caller: &Caller, id: &str, reply: bool) {
    let task = serde_json::to_vec(&with_id(example("document-analysis"), id)).expect("encode");
    if reply {
        caller.send(&task, Some("harness-local-01")).await;
    } else {
        caller
            .send_unanswered(&task, Some("harness-local-01"))
            .await;
    }
    for _ in 0..3000 {
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let queue = caller
            .channel
            .queue_declare(QUEUE.into(), passive, FieldTable::default())
            .await
            .expect("the queue");
        if queue.message_count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no host took the delivery within 30 s");
}

/// Another consumer of the capability's queue, standing in for another
/// host (as the broker user `hcp-other`, which the test adds).
struct OtherHost {
    _connection: Connection,
    _channel: Channel,
    deliveries: Consumer,
}

/// [`OtherHost`]'s connection, before it consumes.
struct OtherConnection {
    connection: Connection,
    channel: Channel,
}

impl OtherConnection {
    /// Starts consuming the capability's queue.
    async fn consume(self) -> OtherHost {
        let deliveries = self
            .channel
            .basic_consume(
                QUEUE.into(),
                "other-host".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume");
        OtherHost {
            _connection: self.connection,
            _channel: self.channel,
            deliveries,
        }
    }
}

impl OtherHost {
    /// Connects, without consuming yet (a connection to a busy broker can
    /// take seconds; consuming is one round trip).
    async fn connect(broker: &Broker) -> OtherConnection {
        let connection = Connection::connect(
            &broker.url("hcp-other", "hcp-other-secret"),
            ConnectionProperties::default(),
        )
        .await
        .expect("connect");
        let channel = connection.create_channel().await.expect("channel");
        OtherConnection {
            connection,
            channel,
        }
    }

    async fn consume(broker: &Broker) -> Self {
        Self::connect(broker).await.consume().await
    }

    /// The next message the broker gives this consumer (within 30 s).
    async fn next(&mut self) -> lapin::message::Delivery {
        tokio::time::timeout(
            Duration::from_secs(30),
            std::future::poll_fn(|cx| {
                futures_core::Stream::poll_next(std::pin::Pin::new(&mut self.deliveries), cx)
            }),
        )
        .await
        .expect("the broker gives the message to the other consumer")
        .expect("a delivery")
        .expect("a delivery")
    }
}

/// Cuts the TCP connections of `server` to the broker on `port` (`ss -K`:
/// the host's sockets aborted, the broker sent a reset), as a network
/// fault would. Done in milliseconds, where `rabbitmqctl` may take seconds
/// on a loaded machine.
fn cut_connections(server: &Server, port: u16) {
    let pid = format!("pid={},", server.pid());
    let filter = format!("( dport = :{port} )");
    let out = std::process::Command::new("ss")
        .args(["-tnpH", "state", "established", &filter])
        .output()
        .expect("run ss");
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let ports: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains(&pid))
        .filter_map(|l| l.split_whitespace().nth(2)?.rsplit(':').next())
        .collect();
    assert!(!ports.is_empty(), "no connection of the host in:\n{listed}");
    for local in ports {
        let filter = format!("( sport = :{local} and dport = :{port} )");
        let status = std::process::Command::new("ss")
            .args(["-K", "-tn", "state", "established", &filter])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run ss -K");
        assert!(status.success(), "ss -K {filter}: {status}");
    }
}

/// Waits until the host's log (`serve.log` in `data`) says `what`, or
/// `until`; says whether it did.
async fn logged_until(data: &Path, what: &str, until: std::time::Instant) -> bool {
    let log = data.join("serve.log");
    loop {
        if std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(what)
        {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the host's log (`serve.log` in `data`) says `what`.
async fn logged(data: &Path, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    assert!(
        logged_until(data, what, deadline).await,
        "the host did not log {what:?} within a minute:\n{}",
        std::fs::read_to_string(data.join("serve.log")).unwrap_or_default()
    );
}

/// The host's database with a trigger that refuses the record that a
/// task is the host's own (`amqp_replies.acked` set to 1), as a failing
/// disk would; `DROP TRIGGER test_not_owned` on the connection given ends
/// it.
fn refuse_ownership(data: &Path) -> rusqlite::Connection {
    let db = rusqlite::Connection::open(data.join("hcp.db")).expect("open");
    db.busy_timeout(Duration::from_secs(10)).expect("timeout");
    db.execute_batch(
        "CREATE TRIGGER test_not_owned BEFORE UPDATE OF acked ON amqp_replies \
         WHEN NEW.acked = 1 BEGIN SELECT RAISE(ABORT, 'the test: not this host''s'); END;",
    )
    .expect("the trigger");
    db
}

/// Asserts that the host's log (`serve.log` in `data`) says `what`.
fn logged_now(data: &Path, what: &str) {
    let log = std::fs::read_to_string(data.join("serve.log")).unwrap_or_default();
    assert!(log.contains(what), "the host did not log {what:?}:\n{log}");
}

/// docs/amqp.md, "What is acknowledged when": a task is recorded as the
/// host's own only once the broker has taken the acknowledgement of its
/// delivery. Here the host cannot write that record (a trigger the test
/// puts in its database refuses it): the broker has let go of the message,
/// so no other host can answer, and this one does: the task never runs,
/// it is failed with a `gate.abandoned` receipt, and its caller gets that
/// failure as its one answer (no `task_accepted` before it). The message
/// is not with the broker any more.
#[test]
fn a_task_the_host_cannot_record_as_its_own_once_the_broker_took_it_is_failed_and_answered() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, _server) = amqp_host(&broker, &["harness-local-01"]);
    let db = refuse_ownership(data.path());
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut caller = Caller::connect(&broker, "harness-local-01", data.path()).await;
        send_and_see_taken(&caller, "amqp-not-owned", true).await;
        let (id, answer) = caller.answer().await;
        assert_eq!(id, "amqp-not-owned");
        assert_eq!(answer["type"], "task_failed", "{answer}");
        assert!(
            answer["payload"]["error_message"]
                .as_str()
                .is_some_and(|m| m.starts_with("abandoned: the host could not record the task")),
            "{answer}"
        );
        // One answer, and the message is not given to anyone again.
        assert!(caller.next(Duration::from_secs(3)).await.is_none());
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let queue = caller
            .channel
            .queue_declare(QUEUE.into(), passive, FieldTable::default())
            .await
            .expect("the queue");
        assert_eq!(queue.message_count(), 0);
    });
    logged_now(data.path(), "the test: not this host's");
    let (state, ran, abandoned): (String, i64, i64) = db
        .query_row(
            "SELECT t.state, \
               (SELECT count(*) FROM receipt_marks m \
                WHERE m.task_id = t.task_id AND m.call = 'session.open'), \
               (SELECT count(*) FROM receipt_marks m \
                WHERE m.task_id = t.task_id AND m.call = 'gate.abandoned') \
             FROM tasks t WHERE t.message_id LIKE 'amqp-not-owned%'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("the task");
    assert_eq!((state.as_str(), ran, abandoned), ("failed", 0, 1));
}

/// A message without `reply_to` is a task like any other: admitted, run
/// and acknowledged; nobody is answered, its answers are read over HTTP,
/// and its route (to no queue) is closed when it ends.
#[test]
fn a_message_without_reply_to_runs_and_answers_nobody() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, _server) = amqp_host(&broker, &["harness-local-01"]);
    let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("open");
    db.busy_timeout(Duration::from_secs(10)).expect("timeout");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut caller = Caller::connect(&broker, "harness-local-01", data.path()).await;
        send_and_see_taken(&caller, "amqp-unanswered", false).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let row: Option<(String, Option<String>, i64)> = db
                .query_row(
                    "SELECT t.state, r.answered_at, r.acked FROM tasks t \
                     JOIN amqp_replies r USING (task_id) WHERE t.message_id = 'amqp-unanswered'",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .ok();
            if let Some((state, Some(_), 1)) = &row {
                assert_eq!(state, "completed");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "not completed and closed within a minute: {row:?}\n{}",
                std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(caller.next(Duration::from_secs(2)).await.is_none());
        logged(data.path(), "has no reply_to").await;
    });
}

/// docs/amqp.md, "What is acknowledged when": a task of an AMQP delivery
/// is written with its route, in one commit, and the route says the task
/// is not this host's until the host records it so. Here the route cannot
/// be written (a trigger the test puts in the host's database refuses it),
/// the host is SIGKILLed, and the broker gives the message to another
/// consumer (the test's, standing in for another host): the restarted host
/// must not run the task. (With the route written after the gate's
/// commit, the task stood queued without one, looked like a task
/// submitted over HTTP, and ran here, while the other host ran it too.)
#[test]
fn a_host_killed_before_recording_where_a_task_is_answered_never_runs_it() {
    killed_before_the_route_is_recorded(true);
}

/// The same for a message without `reply_to`: its task has a route too
/// (to no queue), which says whose it is. (Without one it ran here while
/// the broker gave the message to another host.)
#[test]
fn a_host_killed_before_recording_a_task_without_reply_to_never_runs_it() {
    killed_before_the_route_is_recorded(false);
}

fn killed_before_the_route_is_recorded(reply: bool) {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, policies, server) = amqp_host(&broker, &["harness-local-01"]);
    broker
        .add_user_with("hcp-other", "hcp-other-secret", HOST_PERMISSIONS)
        .expect("user");
    let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("open");
    db.busy_timeout(Duration::from_secs(10)).expect("timeout");
    db.execute_batch(
        "CREATE TRIGGER test_no_route BEFORE INSERT ON amqp_replies \
         BEGIN SELECT RAISE(ABORT, 'the test: no route'); END;",
    )
    .expect("the trigger");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // The other host lives until the end: its delivery stays
    // unacknowledged there.
    let (other, delivery) = runtime.block_on(async {
        queue_ready(&broker).await;
        let caller = Caller::connect(&broker, "harness-local-01", data.path()).await;
        send_and_see_taken(&caller, "amqp-unrouted", reply).await;
        logged(data.path(), "the test: no route").await;
        // Another host, which takes the message once this one is gone.
        let mut other = OtherHost::consume(&broker).await;
        drop(server);
        let delivery = other.next().await;
        let body: Value = serde_json::from_slice(&delivery.data).expect("json");
        assert_eq!(body["message_id"], "amqp-unrouted");
        (other, delivery)
    });
    db.execute_batch("DROP TRIGGER test_no_route")
        .expect("drop the trigger");

    let server = amqp_host_again(&broker, data.path(), policies.path());
    runtime.block_on(async {
        // The other consumer and the restarted host; the host starts the
        // tasks that are its own every second.
        consumed_by(&broker, 2).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
    });
    drop(server);
    let mut stmt = db
        .prepare("SELECT state FROM tasks WHERE message_id LIKE 'amqp-unrouted%'")
        .expect("prepare");
    let states: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert!(
        states.iter().all(|s| s == "failed"),
        "the host ran a task whose message the broker gave to another host: {states:?}\n\
         the host's log:\n{}",
        std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default()
    );
    runtime.block_on(async {
        delivery
            .ack(lapin::options::BasicAckOptions::default())
            .await
            .expect("ack");
        drop(other);
    });
}

/// docs/amqp.md, "Redelivery and a host that dies": a host whose
/// connection is lost before it acknowledges a delivery (cut here while
/// the host waits in the gate) cannot send the acknowledgement after
/// recording the task as its own, and the broker gives the message to
/// another consumer (here the test's, standing in for another host). The host lets its copy go: it never runs it and never
/// answers for it. (Taking lapin's `Ok(false)`, "not sent", for sent, it
/// kept the copy and ran it: the task ran on two hosts.)
#[test]
fn a_copy_whose_acknowledgement_never_left_is_let_go() {
    lost_before_the_acknowledgement(true);
}

/// The same for a message without `reply_to`. (Its task had no route, so
/// nothing said it was not this host's: the host started it while the
/// broker gave the message to another consumer.)
#[test]
fn a_copy_without_reply_to_whose_acknowledgement_never_left_is_let_go() {
    lost_before_the_acknowledgement(false);
}

fn lost_before_the_acknowledgement(reply: bool) {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, server) = amqp_host(&broker, &["harness-local-01"]);
    broker
        .add_user_with("hcp-other", "hcp-other-secret", HOST_PERMISSIONS)
        .expect("user");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut caller = Caller::connect(&broker, "harness-local-01", data.path()).await;
        // The host takes the delivery and waits for SQLite's write lock in
        // the gate (for at most 10 s).
        // Another consumer's connection, made before the host waits (it
        // can take seconds on a busy machine, and the host waits 10 s).
        let other = OtherHost::connect(&broker).await;
        let held = rusqlite::Connection::open(data.path().join("hcp.db")).expect("open");
        held.busy_timeout(Duration::from_secs(10)).expect("timeout");
        held.execute_batch("BEGIN IMMEDIATE")
            .expect("the write lock");
        let waits_from = std::time::Instant::now();
        send_and_see_taken(&caller, "amqp-lost", reply).await;
        // Another consumer of the queue.
        let mut other = other.consume().await;
        // The host's connection is lost, and the host has seen it (an
        // acknowledgement written while the broker closes the connection
        // is dropped by the broker unseen, and no client can tell); then
        // the gate goes on. The connection is cut on the host's side, so
        // an acknowledgement the host tries before it sees the loss fails
        // there too: the lock is let go before the host's 10 s wait ends
        // either way.
        cut_connections(&server, broker.port());
        eprintln!("cut {:?} into the host's wait", waits_from.elapsed());
        if !logged_until(
            data.path(),
            "reconnecting in",
            waits_from + Duration::from_secs(8),
        )
        .await
        {
            eprintln!(
                "the host had not logged the lost connection 8 s into its wait; \
                 the lock is let go all the same"
            );
        }
        drop(held);
        let redelivered = other.next().await;
        assert!(redelivered.redelivered);
        let body: Value = serde_json::from_slice(&redelivered.data).expect("json");
        assert_eq!(body["message_id"], "amqp-lost");
        redelivered
            .ack(lapin::options::BasicAckOptions::default())
            .await
            .expect("ack");
        // The host reconnects within a second and starts the tasks that
        // are its own every second: a copy it kept would run and be
        // answered.
        if let Some(answer) = caller.next(Duration::from_secs(10)).await {
            panic!(
                "the host answered for a copy whose delivery went to another consumer: {}\n\
                 the host's log:\n{}",
                answer.body,
                std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default()
            );
        }
        // Failed here, never run.
        let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("open");
        db.busy_timeout(Duration::from_secs(10)).expect("timeout");
        let states: Vec<String> = db
            .prepare("SELECT state FROM tasks WHERE message_id LIKE 'amqp-lost%'")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        assert_eq!(
            states,
            ["failed"],
            "a copy whose delivery went to another consumer; the host's log:\n{}",
            std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default()
        );
        logged(data.path(), "its delivery could not be acknowledged").await;
    });
}

#[test]
fn a_capability_installed_while_serving_gets_its_queue() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, _server) = amqp_host(&broker, &["harness-local-01"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let consumers = |queue: &'static str| {
        runtime.block_on(async {
            let connection = Connection::connect(
                &broker.url("harness-local-01", "harness-local-01-secret"),
                ConnectionProperties::default(),
            )
            .await
            .expect("connect");
            let channel = connection.create_channel().await.expect("channel");
            let passive = QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            };
            channel
                .queue_declare(queue.into(), passive, FieldTable::default())
                .await
                .ok()
                .map(|q| q.consumer_count())
        })
    };
    runtime.block_on(queue_ready(&broker));
    const NEW: &str = "hcp.tasks.word-count-amqp";
    assert_eq!(consumers(NEW), None, "no queue before the install");

    // Another process installs a capability on the same data directory.
    let mut manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(REPO_ROOT).join("plugins/document-analysis/manifest.json"),
        )
        .expect("read"),
    )
    .expect("json");
    let plugin = Path::new(REPO_ROOT).join("plugins/document-analysis");
    manifest["capability"]["name"] = Value::from("word-count-amqp");
    let text = serde_json::to_string(&manifest)
        .expect("json")
        .replace("${manifest_dir}", &plugin.display().to_string());
    let mut manifest: Value = serde_json::from_str(&text).expect("json");
    let component = plugin.join(manifest["component"]["path"].as_str().expect("path"));
    manifest["component"]["path"] = Value::from(component.to_str().expect("utf-8"));
    let src = tempfile::tempdir().expect("tempdir");
    let path = src.path().join("manifest.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).expect("json")).expect("write");
    let other = hcp::engine::Host::open(
        super::paths(data.path()),
        hcp::engine::HostConfig::default(),
    )
    .expect("a second process's host");
    other.install_manifest(&path).expect("install");
    drop(other);

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while consumers(NEW).unwrap_or(0) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{NEW} not consumed 30 s after the install; log:\n{}",
            std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let log = std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default();
    assert!(
        log.contains("consuming hcp.tasks.word-count-amqp (installed while serving)"),
        "{log}"
    );
}

#[test]
fn the_seeds_cvd_task_over_amqp_waits_for_an_operator_then_completes() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, server) = amqp_host(&broker, &["harness-local-01", "harness-alpha-001"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut alpha = Caller::connect(&broker, "harness-alpha-001", data.path()).await;
        let cvd = with_id(example("cvd-material-synthesis"), "amqp-cvd-1");
        let body = serde_json::to_vec(&cvd).expect("encode");
        // Published to the CVD capability's own queue.
        alpha
            .send_to(
                "hcp.tasks.cvd-material-synthesis",
                &body,
                "harness-alpha-001",
            )
            .await;
        // R3: the first answer says it waits for an operator.
        let (id, pending) = alpha.answer().await;
        assert_eq!(id, "amqp-cvd-1");
        assert_eq!(pending["status"], "pending_approval", "{pending}");
        let task = pending["job_id"].as_str().expect("job_id").to_owned();

        // The operator approves over HTTP; the final answer comes over AMQP.
        let (status, accepted, _) = server.post(
            &format!("/v1/approvals/{task}"),
            super::OPERATOR,
            &serde_json::json!({"decision": "approve", "reason": "recipe within the lab's SOP"}),
        );
        assert_eq!(status, 200, "{accepted}");
        let (id, last) = alpha.answer().await;
        assert_eq!(id, "amqp-cvd-1");
        assert_eq!(last["type"], "task_completed", "{last}");
    });
}

/// docs/amqp.md, "Redelivery and a host that dies": a caller sends over
/// AMQP a task it had submitted over HTTP (the same `message_id`). The
/// task waits for an operator; the duplicate delivery gives it a route to
/// the caller's reply queue, and the host is SIGKILLed before it
/// acknowledges the delivery (the test-only hook `HCP_TEST_KILL_AT`). The
/// task was accepted over HTTP before the duplicate came: the restarted
/// host keeps it, the operator's approval runs it, and the caller gets its
/// final answer over AMQP. (With the duplicate's route written as not this
/// host's yet, the restarted host failed the accepted task as "abandoned"
/// and admitted the redelivery as a new task.)
#[test]
fn a_task_accepted_over_http_survives_a_host_killed_while_taking_its_duplicate_over_amqp() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let url = broker.url("hcp-host", "hcp-host-secret");
    let (data, policies, mut server) = amqp_host_env(
        &broker,
        &["harness-local-01", "harness-alpha-001"],
        &url,
        &[],
        &[("HCP_TEST_KILL_AT", "after-record:1")],
    );
    let cvd = with_id(example("cvd-material-synthesis"), "http-then-amqp");
    let (status, pending, task) = server.post("/v1/tasks", super::ALPHA, &cvd);
    assert_eq!(status, 202, "{pending}");
    let task = task.expect("task id");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let body = serde_json::to_vec(&cvd).expect("encode");
    let mut alpha = runtime.block_on(async {
        queue_ready(&broker).await;
        let alpha = Caller::connect(&broker, "harness-alpha-001", data.path()).await;
        alpha
            .send_to(
                "hcp.tasks.cvd-material-synthesis",
                &body,
                "harness-alpha-001",
            )
            .await;
        alpha
    });
    let status = server.wait_exit();
    assert!(!status.success(), "{status:?}");
    logged_now(data.path(), "test hook: killed at after-record");
    drop(server);

    let server = amqp_host_again(&broker, data.path(), policies.path());
    let (status, view) = server.get(&format!("/v1/tasks/{task}"), Some(super::ALPHA));
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["status"].as_str(), view["message"].as_str()),
        (
            Some("pending_approval"),
            Some("waiting for an operator's approval")
        ),
        "the task accepted over HTTP did not survive the restart: {view}\nthe host's log:\n{}",
        std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default()
    );
    runtime.block_on(async {
        // The redelivered duplicate is answered as such.
        let (id, first) = alpha.answer().await;
        assert_eq!(id, "http-then-amqp");
        assert_eq!(first["job_id"], task.as_str(), "{first}");
        let (status, approved, _) = server.post(
            &format!("/v1/approvals/{task}"),
            super::OPERATOR,
            &serde_json::json!({"decision": "approve", "reason": "recipe within the lab's SOP"}),
        );
        assert_eq!(status, 200, "{approved}");
        let (id, last) = alpha.answer().await;
        assert_eq!(id, "http-then-amqp");
        assert_eq!(last["type"], "task_completed", "{}", last["payload"]);
    });
    // The final answer is the HTTP task's: it ran once, and nothing else
    // was admitted for the message.
    let (status, view) = server.get(&format!("/v1/tasks/{task}"), Some(super::ALPHA));
    assert_eq!(
        (status, view["status"].as_str()),
        (200, Some("complete")),
        "{view}"
    );
    let (status, list) = server.get("/v1/tasks", Some(super::ALPHA));
    assert_eq!(status, 200, "{list}");
    let tasks = list["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1, "{list}");
}

/// docs/amqp.md, "A reply queue that refuses answers": one caller's reply
/// queue refuses every answer (`x-max-length` 0 with `x-overflow:
/// reject-publish`, so the broker `nack`s each publish). Its task's final
/// answer waits and is tried again; another caller's task, routed after
/// it, still gets its final answer. (Before, the refusal ended the host's
/// AMQP session: it reconnected, met the same route first and was refused
/// again, and no later caller got a final answer.)
#[test]
fn a_reply_queue_that_refuses_answers_holds_back_only_its_own() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, _server) = amqp_host(&broker, &["harness-local-01"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let full = refusing_caller(&broker, data.path()).await;
        let task = with_id(example("document-analysis"), "amqp-refusing-queue");
        full.send(
            &serde_json::to_vec(&task).expect("encode"),
            Some("harness-local-01"),
        )
        .await;
        // Its final answer was refused once at least.
        logged(data.path(), "the broker refused the answer to").await;

        let mut other = Caller::connect(&broker, "harness-local-01", data.path()).await;
        runs_to_completion(&mut other, "amqp-after-refusing").await;

        // A submission refused at the gate whose reply queue refuses the
        // refusal: its delivery is settled once, not left with the broker
        // to come back and be refused again, in a loop.
        let mut unknown = with_id(example("document-analysis"), "amqp-unknown-capability");
        unknown["payload"]["capability"] = "no-such-capability".into();
        full.send(
            &serde_json::to_vec(&unknown).expect("encode"),
            Some("harness-local-01"),
        )
        .await;
        // The host logs each delivery it takes with its message_id.
        logged(data.path(), "message_id=amqp-unknown-capability").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let log = std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default();
        let taken = log
            .lines()
            .filter(|l| l.contains("message_id=amqp-unknown-capability"))
            .count();
        assert_eq!(taken, 1, "delivered and refused again and again:\n{log}");
    });
}

/// A `message_id` longer than an AMQP correlation id holds (255 bytes; the
/// schema allows 256 characters) is refused, answered, and the host goes
/// on. Publishing its answer panicked: the delivery was never settled (the
/// prefetch window's worth of them stopped the host's intake) and, for a
/// task recorded with one, every later answer failed, after restarts too.
#[test]
fn a_message_id_longer_than_a_correlation_id_is_refused_and_the_host_goes_on() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, _server) = amqp_host(&broker, &["harness-local-01"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut caller = Caller::connect(&broker, "harness-local-01", data.path()).await;
        let long = "a".repeat(256);
        let body =
            serde_json::to_vec(&with_id(example("document-analysis"), &long)).expect("encode");
        caller.send(&body, Some("harness-local-01")).await;
        let (_, answer) = caller.answer().await;
        assert_eq!(answer["type"], "task_rejected", "{answer}");
        assert!(
            answer["payload"]["reason_message"]
                .as_str()
                .is_some_and(|m| m.starts_with("message_id is 256 bytes; over AMQP")),
            "{answer}"
        );
        // More of them than the host takes at once, none of them a task
        // (each with a user_id: one without has no reply queue, and is
        // dead-lettered unanswered).
        for _ in 0..10 {
            let body = serde_json::to_vec(&serde_json::json!({"message_id": "x".repeat(300)}))
                .expect("encode");
            caller.send(&body, Some("harness-local-01")).await;
            let (_, answer) = caller.answer().await;
            assert_eq!(answer["type"], "task_rejected", "{answer}");
        }
        runs_to_completion(&mut caller, "amqp-after-long-ids").await;
    });
}

/// A task whose final answer its reply queue refuses gives its place back:
/// with as many of them as the host takes at once (`--amqp-prefetch 2`),
/// the host held every place for good and read nobody's deliveries again.
#[test]
fn refused_answers_give_their_places_back() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let url = broker.url("hcp-host", "hcp-host-secret");
    let (data, _policies, _server) = amqp_host_at(
        &broker,
        &["harness-local-01"],
        &url,
        &["--amqp-prefetch", "2"],
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let full = refusing_caller(&broker, data.path()).await;
        for i in 0..2 {
            let task = with_id(example("document-analysis"), &format!("amqp-refused-{i}"));
            full.send(
                &serde_json::to_vec(&task).expect("encode"),
                Some("harness-local-01"),
            )
            .await;
        }
        // Both final answers were refused.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let log = std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default();
            let refused: std::collections::BTreeSet<&str> = log
                .lines()
                .filter(|l| l.contains("the broker refused the answer to"))
                .filter_map(|l| l.split("task=").nth(1))
                .filter_map(|t| t.split_whitespace().next())
                .collect();
            if refused.len() >= 2 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "two refused answers not logged within a minute:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut other = Caller::connect(&broker, "harness-local-01", data.path()).await;
        runs_to_completion(&mut other, "amqp-after-refused").await;
    });
}

/// A host takes a queue's delivery whatever its other queues hold: with one
/// place (`--amqp-prefetch 1`) and three capabilities' queues, each
/// queue's consumer took a place before it waited for a delivery, so the
/// first to start held the only place while its queue stayed empty, and a
/// task on another queue was never read.
#[test]
fn a_place_waits_for_a_delivery_not_for_a_queue() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let url = broker.url("hcp-host", "hcp-host-secret");
    let (data, _policies, _server) = amqp_host_at(
        &broker,
        &["harness-local-01"],
        &url,
        &["--amqp-prefetch", "1"],
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut caller = Caller::connect(&broker, "harness-local-01", data.path()).await;
        for i in 0..2 {
            runs_to_completion(&mut caller, &format!("amqp-one-place-{i}")).await;
        }
    });
}

/// A caller whose reply queue refuses every answer (`x-max-length` 0,
/// `reject-publish`).
async fn refusing_caller(broker: &Broker, data: &Path) -> Caller {
    let mut refusing = FieldTable::default();
    refusing.insert("x-max-length".into(), AMQPValue::LongLongInt(0));
    refusing.insert(
        "x-overflow".into(),
        AMQPValue::LongString("reject-publish".into()),
    );
    Caller::connect_with(broker, "harness-local-01", data, refusing).await
}

/// `caller` submits the document-analysis example as `id`, which is
/// accepted, then completed.
async fn runs_to_completion(caller: &mut Caller, id: &str) {
    let body = serde_json::to_vec(&with_id(example("document-analysis"), id)).expect("encode");
    caller.send(&body, Some("harness-local-01")).await;
    let (got, first) = caller.answer().await;
    assert_eq!(got, id);
    assert_eq!(first["type"], "task_accepted", "{first}");
    let (got, last) = caller.answer().await;
    assert_eq!(got, id);
    assert_eq!(last["type"], "task_completed", "{}", last["payload"]);
}

/// docs/amqp.md, "Who the caller is": a caller's `reply_to` must be a
/// queue of its own broker user. `harness-alpha-001` names the queue of
/// `harness-local-01` (and a `message_id` the victim uses), then the
/// host's own task queue: nothing is published to either, both messages
/// are dead-lettered unanswered, and nothing is recorded. (The host
/// published the attacker's `task_accepted` and `task_completed`, outputs
/// it chose, into the victim's queue ahead of the victim's own, and into
/// its own task queue.) In its own namespace the attacker is answered as
/// any caller, each answer carrying the host's broker `user_id`.
#[test]
fn a_reply_to_outside_the_senders_namespace_gets_nothing_published_there() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, server) = amqp_host(&broker, &["harness-local-01", "harness-alpha-001"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut victim = Caller::connect(&broker, "harness-local-01", data.path()).await;
        let mut attacker = Caller::connect(&broker, "harness-alpha-001", data.path()).await;
        let theirs = |id: &str| {
            let mut task = with_id(example("document-analysis"), id);
            task["payload"]["caller_id"] = "harness-alpha-001".into();
            serde_json::to_vec(&task).expect("encode")
        };
        for (id, reply_to) in [
            ("victim-msg-1", victim.reply_to.clone()),
            ("into-the-task-queue", QUEUE.to_owned()),
        ] {
            attacker
                .publish_replying(
                    QUEUE,
                    &theirs(id),
                    Some("harness-alpha-001"),
                    FieldTable::default(),
                    Some(&reply_to),
                )
                .await;
        }
        if let Some(answer) = victim.next(Duration::from_secs(5)).await {
            panic!(
                "the host published into the victim's queue for another caller: {}",
                answer.body
            );
        }
        logged(
            data.path(),
            "\"hcp.tasks.document-analysis\": queues named hcp.*",
        )
        .await;
        // Both are dead-lettered as they came; no answer of the host's
        // went into its own task queue (it would have been taken as a
        // malformed task and dead-lettered too). Read as the broker's
        // administrator (`guest`, on loopback).
        let admin = Connection::connect(
            &broker.url("guest", "guest"),
            ConnectionProperties::default(),
        )
        .await
        .expect("connect");
        let admin = admin.create_channel().await.expect("channel");
        let mut dead = Vec::new();
        while let Some(message) = admin
            .basic_get(
                "hcp.dead-letter".into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .expect("basic.get")
        {
            let body: Value = serde_json::from_slice(&message.delivery.data).expect("json");
            dead.push((
                body["type"].as_str().unwrap_or("").to_owned(),
                body["message_id"].as_str().unwrap_or("").to_owned(),
            ));
        }
        dead.sort();
        assert_eq!(
            dead,
            [
                ("task_submit".to_owned(), "into-the-task-queue".to_owned()),
                ("task_submit".to_owned(), "victim-msg-1".to_owned())
            ]
        );
        // In its own namespace the same caller is answered.
        attacker
            .publish_to(
                QUEUE,
                &theirs("own-queue"),
                Some("harness-alpha-001"),
                FieldTable::default(),
                true,
            )
            .await;
        let (id, first) = attacker.answer().await;
        assert_eq!(
            (id.as_str(), &first["type"]),
            ("own-queue", &Value::from("task_accepted"))
        );
        let (_, last) = attacker.answer().await;
        assert_eq!(last["type"], "task_completed", "{last}");
    });
    // Nothing was recorded for the two refused messages.
    let (status, list) = server.get("/v1/tasks", Some(super::ALPHA));
    assert_eq!(status, 200, "{list}");
    let tasks = list["tasks"].as_array().expect("tasks");
    assert_eq!(
        tasks.len(),
        1,
        "only the task answered in its own queue: {list}"
    );
}

/// docs/amqp.md, "Lamport clocks across hosts": a broker user that is
/// nobody's caller sends `x-hcp-lamport: 2^48`; it is refused
/// `unauthorized` and moves nothing. A caller's clock far ahead is refused
/// `invalid_input`. The clock of the host's own answer, sent back, is
/// always taken. (The clock was read before the caller was known, and
/// 2^48 was taken: from then on every answer carried a clock the host
/// refused when the caller sent it back.)
#[test]
fn a_strangers_clock_moves_nothing_and_a_host_takes_its_own_clock_back() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, _server) = amqp_host(&broker, &["harness-local-01", "stranger"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let clock = |n: u64| {
        let mut headers = FieldTable::default();
        headers.insert(
            "x-hcp-lamport".into(),
            AMQPValue::LongLongInt(i64::try_from(n).expect("small")),
        );
        headers
    };
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut stranger = Caller::connect(&broker, "stranger", data.path()).await;
        let body = serde_json::to_vec(&with_id(example("document-analysis"), "stranger-clock"))
            .expect("encode");
        stranger
            .send_with(&body, Some("stranger"), clock(1 << 48))
            .await;
        let refused = stranger
            .next(Duration::from_secs(60))
            .await
            .expect("the stranger's refusal");
        assert_eq!(
            refused.body["payload"]["reason_code"], "unauthorized",
            "{}",
            refused.body
        );
        assert!(refused.lamport < 1 << 32, "{}", refused.lamport);

        let mut local = Caller::connect(&broker, "harness-local-01", data.path()).await;
        let send = |id: &str| {
            serde_json::to_vec(&with_id(example("document-analysis"), id)).expect("encode")
        };
        // The stranger's clock moved nothing: the next task's answers come
        // with the host's own.
        local
            .send(&send("clock-after-stranger"), Some("harness-local-01"))
            .await;
        for _ in 0..2 {
            let answer = local
                .next(Duration::from_secs(60))
                .await
                .expect("an answer");
            assert!(
                answer.lamport < 1 << 32,
                "a stranger's clock moved the host's: {}",
                answer.lamport
            );
        }
        local
            .send_with(
                &send("clock-far-ahead"),
                Some("harness-local-01"),
                clock(1 << 48),
            )
            .await;
        let (_, answer) = local.answer().await;
        assert_eq!(
            answer["payload"]["reason_code"], "invalid_input",
            "{answer}"
        );
        // The host's own clock, sent back, again and again.
        let mut last = refused.lamport;
        for i in 0..3 {
            local
                .send_with(
                    &send(&format!("clock-echo-{i}")),
                    Some("harness-local-01"),
                    clock(last),
                )
                .await;
            let first = local
                .next(Duration::from_secs(60))
                .await
                .expect("the first answer");
            assert_eq!(first.body["type"], "task_accepted", "{}", first.body);
            let done = local
                .next(Duration::from_secs(60))
                .await
                .expect("the final answer");
            assert_eq!(done.body["type"], "task_completed", "{}", done.body);
            assert!(done.lamport > last && done.lamport < 1 << 32);
            last = done.lamport;
        }
    });
}

/// The resident memory of process `pid`, in bytes (`VmRSS`).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// docs/amqp.md, "Setting up the broker": the broker is set up with
/// `max_message_size` (2 MiB here, as the docs give it), so a message over
/// it is refused at the broker (the publisher's channel is closed with
/// `PRECONDITION_FAILED`) and never reaches the host, whose memory does not
/// grow. (With the broker's default, 128 MiB, every such message was read
/// whole into the host before its 1 MiB check: eight of 100 MB took it from
/// 72 to 295 MB.)
#[test]
fn a_message_over_the_brokers_limit_never_reaches_the_host() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    let (data, _policies, server) = amqp_host(&broker, &["harness-local-01"]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        queue_ready(&broker).await;
        let mut caller = Caller::connect(&broker, "harness-local-01", data.path()).await;
        runs_to_completion(&mut caller, "amqp-before-big").await;
        let before = rss(server.pid());
        let connection = Connection::connect(
            &broker.url("harness-local-01", "harness-local-01-secret"),
            ConnectionProperties::default(),
        )
        .await
        .expect("connect");
        let big = vec![b' '; 8 << 20];
        for _ in 0..8 {
            // The broker closes the channel of a message it refuses.
            let channel = connection.create_channel().await.expect("channel");
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .expect("confirms");
            let props = BasicProperties::default()
                .with_user_id("harness-local-01".into())
                .with_reply_to(caller.reply_to.as_str().into());
            let outcome = match channel
                .basic_publish(
                    "".into(),
                    QUEUE.into(),
                    BasicPublishOptions::default(),
                    &big,
                    props,
                )
                .await
            {
                Err(e) => Err(e.to_string()),
                Ok(confirm) => confirm
                    .await
                    .map(|c| format!("{c:?}"))
                    .map_err(|e| e.to_string()),
            };
            match outcome {
                Ok(confirm) => panic!(
                    "the broker took a message of {} bytes: {confirm}",
                    big.len()
                ),
                Err(e) => assert!(
                    e.contains("PRECONDITION_FAILED") || e.contains("max size"),
                    "{e}"
                ),
            }
        }
        // The host never saw them, and serves the next task.
        runs_to_completion(&mut caller, "amqp-after-big").await;
        let after = rss(server.pid());
        assert!(
            after < before + (16 << 20),
            "the host grew from {before} to {after} bytes"
        );
        let log = std::fs::read_to_string(data.path().join("serve.log")).unwrap_or_default();
        assert!(!log.contains("the host takes at most"), "{log}");
    });
}
