//! What the AMQP transport relies on from the broker, checked on a real
//! RabbitMQ node (Debian's `rabbitmq-server`, started by the test): the
//! `user-id` message property is validated against the connection's
//! authenticated user (a forged one is refused, so the host may take it as
//! the caller's identity), a message may carry none (the host must then
//! answer `unauthorized`), and a wrong password does not connect.

use hcp_tests::broker::Broker;
use lapin::options::QueueDeclareOptions;
use lapin::options::{BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Confirmation, Connection, ConnectionProperties};

const QUEUE: &str = "hcp.test.identity";

async fn publish(
    channel: &lapin::Channel,
    props: BasicProperties,
) -> Result<Confirmation, lapin::Error> {
    channel
        .basic_publish(
            "".into(),
            QUEUE.into(),
            BasicPublishOptions::default(),
            br#"{"message_type":"task_submit"}"#,
            props,
        )
        .await?
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_vouches_for_user_id_and_refuses_a_forged_one() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    broker
        .add_user("alice", "alice-secret")
        .expect("broker call");
    broker.add_user("bob", "bob-secret").expect("broker call");

    // A wrong password does not connect.
    let refused = Connection::connect(
        &broker.url("alice", "not-her-password"),
        ConnectionProperties::default(),
    )
    .await;
    assert!(refused.is_err(), "a wrong password connected");

    let conn = Connection::connect(
        &broker.url("alice", "alice-secret"),
        ConnectionProperties::default(),
    )
    .await
    .expect("alice connects");
    let channel = conn.create_channel().await.expect("broker call");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("broker call");
    channel
        .queue_declare(
            QUEUE.into(),
            QueueDeclareOptions::durable(),
            FieldTable::default(),
        )
        .await
        .expect("broker call");

    // Her own name, and no name at all, are accepted.
    let own = publish(
        &channel,
        BasicProperties::default().with_user_id("alice".into()),
    )
    .await
    .expect("publish as herself");
    assert!(own.is_ack(), "{own:?}");
    let anonymous = publish(&channel, BasicProperties::default())
        .await
        .expect("publish without user-id");
    assert!(anonymous.is_ack(), "{anonymous:?}");

    let first = channel
        .basic_get(QUEUE.into(), BasicGetOptions { no_ack: true })
        .await
        .expect("broker call")
        .expect("the first message");
    assert_eq!(
        first
            .delivery
            .properties
            .user_id()
            .as_ref()
            .map(|u| u.as_str()),
        Some("alice")
    );
    let second = channel
        .basic_get(QUEUE.into(), BasicGetOptions { no_ack: true })
        .await
        .expect("broker call")
        .expect("the second message");
    assert_eq!(second.delivery.properties.user_id(), &None);

    // Bob's name on Alice's connection: the broker closes the channel with
    // PRECONDITION_FAILED and the message goes nowhere.
    let forged = publish(
        &channel,
        BasicProperties::default().with_user_id("bob".into()),
    )
    .await;
    let text = match forged {
        Ok(c) => panic!("a forged user-id was accepted: {c:?}"),
        Err(e) => e.to_string(),
    };
    assert!(
        text.contains("PRECONDITION_FAILED") || text.contains("user_id"),
        "{text}"
    );
    let check = conn.create_channel().await.expect("broker call");
    let left = check
        .queue_declare(
            QUEUE.into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("broker call");
    assert_eq!(left.message_count(), 0, "the forged message was queued");
}
