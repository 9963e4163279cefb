//! One delivery: a `task_submit` read once, its caller taken from the
//! broker-checked `user-id`, submitted through the engine's one entry
//! point, acknowledged, recorded as this host's once the broker is known to
//! have taken the acknowledgement, and then answered on `reply_to` (an
//! answer that ends the submission: answered, then acknowledged).

use super::capacity::{Capacity, Place};
use super::outbox::{Answering, Flags, LAMPORT_HEADER, NO_QUEUE, Refused, publish_answer};
use crate::BODY_LIMIT;
use crate::engine::{AnswerKind, Auth, Carried, Submission, TaskMessage, refusal};
use crate::state::{AppState, spawn_run};
use anyhow::{Context as _, Result};
use hcp_store::metrics::AmqpEvent;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::AMQPValue;
use lapin::{Channel, Consumer};
use serde_json::Value;

/// Takes the deliveries of one queue until the consumer ends (the channel
/// or connection is gone: the caller reconnects).
/// The channels a delivery is handled with: answers are published on
/// `publish`; deliveries come on `consume`, whose prefetch is `prefetch`.
#[derive(Clone)]
pub(super) struct Wires {
    pub(super) publish: Answering,
    pub(super) consume: Channel,
    pub(super) prefetch: u16,
}

pub(super) async fn consume(
    state: AppState,
    wires: Wires,
    mut consumer: Consumer,
    capacity: Capacity,
) -> Result<()> {
    loop {
        let next = std::future::poll_fn(|cx| {
            futures_core::Stream::poll_next(std::pin::Pin::new(&mut consumer), cx)
        })
        .await;
        let delivery = match next {
            None => return Ok(()),
            Some(Err(e)) => return Err(e).context("consuming"),
            Some(Ok(d)) => d,
        };
        let metrics = state.host.store.metrics();
        metrics.amqp(AmqpEvent::Delivered);
        if delivery.redelivered {
            metrics.amqp(AmqpEvent::Redelivered);
        }
        // A full host handles no further delivery until a task ends: the
        // broker keeps the rest (past the prefetch window it has pushed
        // already, unacknowledged) and gives them to other hosts. The
        // place is taken once a delivery is here: taken before, each
        // queue's consumer held one while it waited, and with as many
        // queues as places a queue with work waited for good behind idle
        // ones.
        let place = capacity.take().await;
        let state = state.clone();
        let wires = wires.clone();
        let capacity = capacity.clone();
        let (acker, tag) = (delivery.acker.clone(), delivery.delivery_tag);
        let tracker = state.tracker().clone();
        let handled = tokio::spawn(async move {
            if let Err(e) = handle(&state, &wires, &delivery, (&capacity, place)).await {
                // Not acknowledged: the broker redelivers it (here or to
                // another host) once this channel closes; say so now.
                tracing::error!(target: "hcp::amqp", "delivery {}: {e:#}", delivery.delivery_tag);
                state.host.store.metrics().amqp(AmqpEvent::Nacked);
                let _ = delivery
                    .nack(BasicNackOptions {
                        requeue: true,
                        ..BasicNackOptions::default()
                    })
                    .await;
            }
        });
        // A handler that panicked left its delivery unsettled for good
        // (the broker gives this consumer no more than the prefetch window
        // of them): it is dead-lettered, not delivered again to panic again.
        tracker.spawn(async move {
            if let Err(e) = handled.await
                && e.is_panic()
            {
                tracing::error!(target: "hcp::amqp", "delivery {tag}: its handling panicked; dead-lettered");
                let _ = acker
                    .nack(BasicNackOptions {
                        requeue: false,
                        ..BasicNackOptions::default()
                    })
                    .await;
            }
        });
    }
}

/// Why a message is not a task at all.
struct Malformed {
    /// The submission's `message_id`, when it could be read.
    message_id: Option<String>,
    answer: Submission,
}

/// A task as read from a delivery, with the Lamport clock its caller
/// brought back from another host's answer, if any.
struct Read {
    message: TaskMessage,
    lamport: Option<u64>,
}

/// The `x-hcp-lamport` header: an unsigned integer below 2^53 (receipts'
/// clocks end there), as an AMQP integer of any width or as decimal text
/// (some clients send every header as a string). `Ok(None)` when there is
/// none. How far ahead of the host's clock it may be is the gate's to say,
/// once the caller is known ([`crate::engine::Host::submit_task_carried`]).
fn lamport_header(delivery: &Delivery) -> std::result::Result<Option<u64>, String> {
    let Some(headers) = delivery.properties.headers() else {
        return Ok(None);
    };
    headers
        .inner()
        .get(LAMPORT_HEADER)
        .map(lamport_value)
        .transpose()
}

/// The largest clock a receipt carries (2^53 − 1).
const MAX_CLOCK: u64 = (1 << 53) - 1;

/// The clock an `x-hcp-lamport` header's value says (see [`lamport_header`]).
fn lamport_value(value: &AMQPValue) -> std::result::Result<u64, String> {
    let n: Option<u64> = match value {
        AMQPValue::ShortShortUInt(n) => Some(u64::from(*n)),
        AMQPValue::ShortUInt(n) => Some(u64::from(*n)),
        AMQPValue::LongUInt(n) => Some(u64::from(*n)),
        AMQPValue::ShortShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::ShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::Timestamp(n) => Some(*n),
        AMQPValue::ShortString(s) => s.as_str().parse().ok(),
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes())
            .ok()
            .and_then(|t| t.parse().ok()),
        _ => None,
    };
    match n {
        Some(n) if n <= MAX_CLOCK => Ok(n),
        _ => Err(format!(
            "the {LAMPORT_HEADER} header must be an unsigned integer below 2^53 \
             (a clock from an earlier answer); got {value:?}"
        )),
    }
}

/// The most bytes an AMQP short string (a correlation id) holds.
const MAX_CORRELATION_BYTES: usize = 255;

/// Reads the message once: size, JSON, envelope, `task_submit`, and the
/// Lamport clock header.
fn read(delivery: &Delivery) -> Result<std::result::Result<Read, Malformed>> {
    let refuse = |message_id: Option<String>, why: String| -> Result<_> {
        Ok(Err(Malformed {
            message_id,
            answer: Submission::refused(refusal(
                hcp_contracts::message::RejectReason::InvalidInput,
                why,
                None,
            )),
        }))
    };
    if delivery.data.len() > BODY_LIMIT {
        return refuse(
            None,
            format!(
                "the message is {} bytes; the host takes at most {BODY_LIMIT}",
                delivery.data.len()
            ),
        );
    }
    let value: Value = match serde_json::from_slice(&delivery.data) {
        Ok(v) => v,
        Err(e) => return refuse(None, format!("the message is not JSON: {e}")),
    };
    let message_id = value
        .get("message_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    // The `message_id` comes back as the answer's correlation id, which
    // holds at most 255 bytes (the schema allows 256 characters): a longer
    // one made publishing the answer panic, which left the delivery
    // unsettled (eight of them stopped the host's intake) or, recorded,
    // broke every later answer, also after a restart.
    if let Some(id) = &message_id
        && id.len() > MAX_CORRELATION_BYTES
    {
        return refuse(
            None,
            format!(
                "message_id is {} bytes; over AMQP it comes back as the answer's correlation_id, \
                 which holds at most {MAX_CORRELATION_BYTES}",
                id.len()
            ),
        );
    }
    let lamport = match lamport_header(delivery) {
        Ok(l) => l,
        Err(why) => return refuse(message_id, why),
    };
    match TaskMessage::parse(value) {
        Ok(message) => Ok(Ok(Read { message, lamport })),
        Err(not) => Ok(Err(Malformed {
            message_id,
            answer: Submission::refused(not.refusal()),
        })),
    }
}

async fn handle(
    state: &AppState,
    wires: &Wires,
    delivery: &Delivery,
    (capacity, place): (&Capacity, Place),
) -> Result<()> {
    let props = &delivery.properties;
    let reply_to = props
        .reply_to()
        .as_ref()
        .map(|r| r.as_str().to_owned())
        .filter(|r| !r.is_empty());
    let user = props.user_id().as_ref().map(|u| u.as_str().to_owned());
    // Answers go only to a queue of the broker user that sent the message
    // (its `user_id`, which the broker checked): one outside it is
    // another's (a caller that names a victim's queue has the host publish
    // answers it chose there) or the host's own. Nothing is published for
    // such a message and nothing recorded: it is dead-lettered, and the
    // log says why.
    if let Some(queue) = &reply_to
        && let Err(why) =
            hcp_policy::reply_to::allowed(&state.host.policy().set, user.as_deref(), queue)
    {
        tracing::warn!(target: "hcp::amqp", "dead-lettered a message, not answered: {why}");
        state.host.store.metrics().amqp(AmqpEvent::Nacked);
        delivery
            .reject(BasicRejectOptions { requeue: false })
            .await
            .context("dead-lettering")?;
        return Ok(());
    }
    let Read { message, lamport } = match read(delivery)? {
        Ok(read) => read,
        Err(malformed) => {
            let reason = malformed
                .answer
                .answer
                .rejected_payload()
                .map_or("malformed", |r| r.reason_message.as_str())
                .to_owned();
            tracing::warn!(target: "hcp::amqp", "dead-lettered a malformed message: {reason}");
            if let Some(reply_to) = &reply_to {
                let correlation = malformed
                    .message_id
                    .or_else(|| {
                        props
                            .correlation_id()
                            .as_ref()
                            .map(|c| c.as_str().to_owned())
                    })
                    .unwrap_or_default();
                let published = publish_answer(
                    &wires.publish,
                    &state.host,
                    reply_to,
                    &correlation,
                    None,
                    &malformed.answer.answer,
                    Flags::default(),
                )
                .await;
                undeliverable_is_answered(published, &correlation)?;
            }
            state.host.store.metrics().amqp(AmqpEvent::Nacked);
            delivery
                .reject(BasicRejectOptions { requeue: false })
                .await
                .context("dead-lettering")?;
            return Ok(());
        }
    };
    let message_id = message.message_id().to_owned();
    let host = state.host.clone();
    // A message without `reply_to` gets a route all the same (to no
    // queue, [`NO_QUEUE`]): it says whose task it is.
    let route = reply_to.clone().unwrap_or_else(|| NO_QUEUE.to_owned());
    let submission = tokio::task::spawn_blocking(move || {
        // A new task is written with its route, which says it is not
        // this host's yet: nothing starts it, and a host that stops
        // before it records the task as its own abandons it at startup.
        // The clock is observed once the caller is known, before the
        // task's receipts (they come after the other host's).
        host.submit_task_carried(
            message,
            Auth::Broker(user.as_deref()),
            Carried {
                reply_to: Some(&route),
                lamport,
                transport: None,
            },
        )
    })
    .await
    .context("gate task")??;
    tracing::info!(
        target: "hcp::amqp",
        task = submission.task_id.as_deref().unwrap_or("-"),
        message_id = %message_id,
        "{}",
        submission.answer.kind_name()
    );
    if reply_to.is_none() {
        // Nobody to answer: the task stands all the same (it is in the
        // store, its receipts say what happened) and runs as any other.
        tracing::warn!(
            target: "hcp::amqp",
            "message {message_id} has no reply_to: its answers can only be read over HTTP"
        );
    }
    // Accepted or waiting: a final answer is still to come.
    let more = matches!(submission.kind, AnswerKind::Accepted | AnswerKind::Waiting);
    let first = || async {
        let Some(reply_to) = &reply_to else {
            return Ok(());
        };
        publish_answer(
            &wires.publish,
            &state.host,
            reply_to,
            &message_id,
            submission.task_id.as_deref(),
            &submission.answer,
            Flags {
                duplicate: submission.duplicate,
                redelivered: false,
            },
        )
        .await
    };
    let Some(id) = submission.task_id.as_deref().filter(|_| more) else {
        // Answered for good (refused, or a duplicate of a finished task):
        // nothing of this delivery is left to run. The answer first: a
        // host that stops before the acknowledgement answers the
        // redelivery the same way.
        undeliverable_is_answered(first().await, &message_id)?;
        if let (false, Some(id)) = (submission.duplicate, &submission.task_id) {
            // A refused task's route was its first answer's only.
            state.host.store.route_refused(id)?;
        }
        acknowledge(state, delivery).await?;
        return Ok(());
    };
    if let (true, Some(reply_to)) = (submission.duplicate, &reply_to) {
        // A task submitted without a route (over HTTP) is answered here
        // from now on, and the route says it is this host's already (it
        // was from its admission); one with a route keeps it.
        state.host.store.route_replies(id, reply_to, &message_id)?;
    }
    // The task becomes this host's only once the broker is known to have
    // taken the acknowledgement (docs/amqp.md, "What is acknowledged
    // when"): acknowledged, then a round trip on the same channel, then
    // recorded as this host's, then the first answer, then it may run.
    // Recorded as this host's before the acknowledgement left, a host
    // killed in between kept the task and ran it at its next start, while
    // the broker gave the message to another host, which ran it too. Now
    // a host that stops anywhere before the record never runs its copy
    // (it abandons it at startup); the broker may have taken the
    // acknowledgement, and then nobody runs the task: at most once.
    //
    // The task holds its place until its final answer is published (the
    // outbox frees it); one that waits for an operator costs nothing
    // meanwhile. Held before the route is marked this host's: from then on
    // the task may run and be answered (the outbox and the maintenance
    // loop see such routes only), and its release must find the place. A
    // duplicate's task came with an earlier delivery: its place and its
    // fate are that delivery's.
    let fresh = !submission.duplicate;
    // Nothing starts it before it is recorded as this host's and its
    // first answer is out (the maintenance loop sees the record at once).
    let start_held = state.hold_start(id);
    if submission.kind == AnswerKind::Accepted && fresh {
        capacity.hold(id, place);
    }
    // A copy this host does not run (a duplicate's task is its first
    // delivery's: nothing to let go). Returns the failure when it was
    // abandoned.
    let let_go = |why: &'static str| {
        let host = state.host.clone();
        let task = id.to_owned();
        async move {
            if !fresh {
                return Ok(None);
            }
            let abandoned = tokio::task::spawn_blocking(move || host.abandon_copy(&task, why))
                .await
                .context("abandon the copy")??;
            if abandoned.is_some() {
                capacity.release(id);
            }
            anyhow::Ok(abandoned)
        }
    };
    kill_point(KillPoint::Recorded);
    if let Err(e) = acknowledge(state, delivery).await {
        // The acknowledgement never left (the channel is gone): the broker
        // gives the message to another consumer, so the copy this delivery
        // made is let go (nothing here started it meanwhile: `start_held`).
        if let_go(crate::engine::ACK_NOT_SENT).await?.is_some() {
            tracing::warn!(
                target: "hcp::amqp",
                "task {id}: its delivery could not be acknowledged; failed here, answered by \
                 whoever takes the redelivery"
            );
        }
        return Err(e);
    }
    kill_point(KillPoint::Acked);
    // The broker takes one channel's methods in order, and the
    // acknowledgement went on this channel (the delivery's) before this
    // method: its answer says the broker has taken the acknowledgement.
    // (An acknowledgement has no answer of its own, and lapin counts it
    // sent once it is written to the socket.)
    if let Err(e) = wires
        .consume
        .basic_qos(wires.prefetch, BasicQosOptions::default())
        .await
    {
        // Taken or not, the host cannot know: another host may have the
        // message, so this copy neither runs nor is answered here.
        if let_go(crate::engine::ACK_NOT_CONFIRMED).await?.is_some() {
            tracing::warn!(
                target: "hcp::amqp",
                "task {id}: the broker did not confirm that it took the delivery's \
                 acknowledgement; failed here, never run here"
            );
        }
        return Err(anyhow::Error::new(e).context(format!(
            "task {id}: that the broker took its acknowledgement is not confirmed"
        )));
    }
    kill_point(KillPoint::RoundTrip);
    if let Err(e) = state.host.store.route_acked(id) {
        tracing::error!(target: "hcp::amqp", "task {id}: not recorded as this host's: {e:#}");
        if !fresh {
            // A duplicate's task is its first delivery's: answered as such.
            let answered = first().await;
            drop(start_held);
            return answered.with_context(|| format!("task {id}: its duplicate's answer"));
        }
        // The broker has let go of the message: no other host has it, so
        // this host answers, with the failure (it never ran).
        if let Some(failure) = let_go(crate::engine::OWN_NOT_RECORDED).await?
            && let Some(reply_to) = &reply_to
        {
            publish_answer(
                &wires.publish,
                &state.host,
                reply_to,
                &message_id,
                Some(id),
                &failure,
                Flags::default(),
            )
            .await
            .with_context(|| format!("task {id}: its failure"))?;
        }
        return Ok(());
    }
    kill_point(KillPoint::Owned);
    // The task is this host's whatever becomes of its first answer: a
    // caller who misses it still gets the final answer from the route.
    let answered = first().await;
    drop(start_held);
    if submission.runnable && submission.kind == AnswerKind::Accepted {
        spawn_run(state, id.to_owned());
    }
    answered.with_context(|| format!("task {id}: its first answer"))
}

/// The points at which a test may have the host killed while it takes a
/// delivery (`HCP_TEST_KILL_AT`, read in debug builds only: see
/// [`kill_point`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillPoint {
    /// The task is recorded (not this host's yet); the acknowledgement is
    /// not sent.
    Recorded,
    /// The acknowledgement is handed to the connection; the round trip
    /// that says the broker took it has not started.
    Acked,
    /// The broker has taken the acknowledgement; the task is not recorded
    /// as this host's.
    RoundTrip,
    /// The task is recorded as this host's; no first answer yet.
    Owned,
}

impl KillPoint {
    #[cfg(debug_assertions)]
    fn name(self) -> &'static str {
        match self {
            Self::Recorded => "after-record",
            Self::Acked => "after-ack",
            Self::RoundTrip => "after-round-trip",
            Self::Owned => "after-own",
        }
    }
}

/// A test-only hook: with `HCP_TEST_KILL_AT=<point>:<n>` (a point's name,
/// see [`KillPoint`], and a count, 1 when left out), the process SIGKILLs
/// itself when the `n`-th delivery reaches that point, as a host killed
/// there would be (tests/serve/amqp_hosts.rs). Compiled into debug builds
/// only (the tests' profile): a release build has no such hook, whatever
/// its environment says.
#[cfg(debug_assertions)]
fn kill_point(point: KillPoint) {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PLAN: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static REACHED: AtomicU64 = AtomicU64::new(0);
    let plan = PLAN.get_or_init(|| {
        let text = std::env::var("HCP_TEST_KILL_AT").ok()?;
        let (name, n) = text.split_once(':').unwrap_or((text.as_str(), "1"));
        Some((name.to_owned(), n.parse().unwrap_or(1)))
    });
    let Some((name, n)) = plan else {
        return;
    };
    if name != point.name() || REACHED.fetch_add(1, Ordering::SeqCst) + 1 != *n {
        return;
    }
    tracing::warn!(target: "hcp::amqp", "test hook: killed at {name} ({n})");
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
}

#[cfg(not(debug_assertions))]
fn kill_point(_: KillPoint) {}

/// The answer that ends a submission (a refusal, a duplicate of a finished
/// task, a malformed message's) and that the caller's reply queue refused
/// (the broker `nack`ed it): the submission is answered as far as the
/// host can, and its delivery is settled all the same. (Left with the
/// broker, it came back at once and was refused again, in a loop.) A
/// redelivery would get the same answer; the host's records keep it.
fn undeliverable_is_answered(published: Result<()>, message_id: &str) -> Result<()> {
    match published {
        Err(e) if e.downcast_ref::<Refused>().is_some() => {
            tracing::warn!(
                target: "hcp::amqp",
                "message {message_id}: {e:#}; its delivery is settled all the same \
                 (a redelivery gets the same answer)"
            );
            Ok(())
        }
        other => other,
    }
}

/// Acknowledges `delivery`. lapin answers `Ok(false)` when the
/// acknowledgement was not sent (its channel is closed): an error here,
/// since the broker then gives the message to another consumer.
async fn acknowledge(state: &AppState, delivery: &Delivery) -> Result<()> {
    let sent = delivery
        .ack(BasicAckOptions::default())
        .await
        .context("acknowledging the delivery")?;
    anyhow::ensure!(
        sent,
        "the delivery could not be acknowledged: its channel is closed"
    );
    state.host.store.metrics().amqp(AmqpEvent::Acked);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_header_is_a_number_below_2_53() {
        let max = MAX_CLOCK;
        for (value, clock) in [
            (AMQPValue::LongLongInt(42), 42),
            (AMQPValue::ShortShortUInt(7), 7),
            (AMQPValue::LongString("1234".into()), 1234),
            (AMQPValue::ShortString("5".into()), 5),
            (AMQPValue::Timestamp(max), max),
            (AMQPValue::LongLongInt(1 << 48), 1 << 48),
            (
                AMQPValue::LongLongInt(i64::try_from(max).expect("small")),
                max,
            ),
        ] {
            assert_eq!(lamport_value(&value), Ok(clock), "{value:?}");
        }
        // Past the receipts' range, negative numbers and text are not
        // clocks. (How far ahead of the host's a clock may be is the
        // gate's to say, once the caller is known.)
        for value in [
            AMQPValue::LongLongInt(1 << 53),
            AMQPValue::Timestamp(u64::MAX),
            AMQPValue::LongString("9007199254740992".into()),
            AMQPValue::LongLongInt(-1),
            AMQPValue::LongString("soon".into()),
            AMQPValue::Boolean(true),
        ] {
            let e = lamport_value(&value).expect_err("refused");
            assert!(e.contains("below 2^53"), "{e}");
        }
    }
}
