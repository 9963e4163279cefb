//! Final answers over AMQP: every task whose delivery this host
//! acknowledged gets its `task_completed` / `task_failed` (or a later
//! `task_rejected`: an operator refused, an approval expired) published on
//! its route once it ends, and the route is closed only when the broker
//! confirms it; after a restart the open routes are published again.

use super::capacity::Capacity;
use crate::engine::Host;
use crate::state::AppState;
use anyhow::{Context as _, Result};
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The header with the host's Lamport clock, on every answer; a caller
/// that sends it back with its next message (to any host) moves that
/// host's clock past it.
pub const LAMPORT_HEADER: &str = "x-hcp-lamport";

/// What an answer's headers say besides its host, task and clock.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Flags {
    /// `x-hcp-duplicate`: the answer to an earlier copy of the same
    /// `message_id` from the same caller.
    pub(super) duplicate: bool,
    /// `x-hcp-redelivered`: this answer was handed to the broker before
    /// by a host that stopped before recording the broker's confirm; the
    /// caller may have it already (the AMQP `message_id` is the same).
    pub(super) redelivered: bool,
}

/// The host's side of publishing answers: the channel (in confirm mode)
/// and the broker user the host logged in as, which every answer carries
/// as its `user_id` (the broker refuses a `user_id` that is not the
/// connection's login, so a caller can tell the host's answers from a
/// forgery by another broker user).
#[derive(Clone)]
pub(super) struct Answering {
    pub(super) channel: Channel,
    pub(super) login: ShortString,
}

/// Publishes one answer to `reply_to` and waits for the broker's confirm.
pub(super) async fn publish_answer(
    answering: &Answering,
    host: &Host,
    reply_to: &str,
    correlation_id: &str,
    task_id: Option<&str>,
    answer: &crate::engine::Answer,
    flags: Flags,
) -> Result<()> {
    let body = serde_json::to_vec(answer)?;
    let mut headers = FieldTable::default();
    headers.insert(
        "x-hcp-host-id".into(),
        AMQPValue::LongString(host.host_id().into()),
    );
    // Below 2^53, so it fits.
    headers.insert(
        LAMPORT_HEADER.into(),
        AMQPValue::LongLongInt(i64::try_from(host.lamport()).unwrap_or(i64::MAX)),
    );
    if let Some(id) = task_id {
        headers.insert("x-hcp-task-id".into(), AMQPValue::LongString(id.into()));
    }
    if flags.duplicate {
        headers.insert("x-hcp-duplicate".into(), AMQPValue::Boolean(true));
    }
    if flags.redelivered {
        headers.insert("x-hcp-redelivered".into(), AMQPValue::Boolean(true));
    }
    let mut props = BasicProperties::default();
    // The answer's own message_id: the same on every copy of it, so a
    // caller keeps the first and drops a repeat.
    if let Some(id) = answer
        .message_id()
        .and_then(|id| ShortString::try_new(id).ok())
    {
        props = props.with_message_id(id);
    }
    // A correlation id holds at most 255 bytes (the gate refuses a longer
    // `message_id` over AMQP; a route recorded before it did is answered
    // without one rather than never).
    match ShortString::try_new(correlation_id) {
        Ok(c) => props = props.with_correlation_id(c),
        Err(_) => tracing::warn!(
            target: "hcp::amqp",
            "the answer to {reply_to} goes without its correlation id: {} bytes, over AMQP's 255",
            correlation_id.len()
        ),
    }
    let reply_queue = ShortString::try_new(reply_to)
        .map_err(|_| anyhow::anyhow!("a reply queue name of {} bytes", reply_to.len()))?;
    let props = props
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_user_id(answering.login.clone())
        .with_headers(headers);
    let confirm = answering
        .channel
        .basic_publish(
            "".into(),
            reply_queue,
            BasicPublishOptions::default(),
            &body,
            props,
        )
        .await
        .with_context(|| format!("publishing to {reply_to}"))?
        .await
        .with_context(|| format!("confirm of the answer to {reply_to}"))?;
    match confirm {
        Confirmation::Ack(_) | Confirmation::NotRequested => Ok(()),
        Confirmation::Nack(_) => Err(Refused(reply_to.to_owned()).into()),
    }
}

/// The broker refused an answer (a `basic.nack`): the connection is fine,
/// this one queue does not take it (full with `x-overflow:
/// reject-publish`, for one).
#[derive(Debug, thiserror::Error)]
#[error("the broker refused the answer to {0}")]
pub(super) struct Refused(String);

/// The first wait before an answer the broker refused is published again;
/// it doubles on each refusal, up to [`REFUSED_AT_MOST`].
const REFUSED_FIRST: Duration = Duration::from_secs(1);
const REFUSED_AT_MOST: Duration = Duration::from_secs(300);

/// Routes whose answer the broker refused, and when each is tried again:
/// one caller's queue that refuses every answer holds back its own route,
/// not every other caller's final answer.
#[derive(Debug, Default)]
struct Held(HashMap<String, (Instant, Duration)>);

impl Held {
    fn waits(&self, task_id: &str, now: Instant) -> bool {
        self.0.get(task_id).is_some_and(|(at, _)| now < *at)
    }

    fn refused(&mut self, task_id: &str, now: Instant) -> Duration {
        let wait = self
            .0
            .get(task_id)
            .map_or(REFUSED_FIRST, |(_, w)| (*w * 2).min(REFUSED_AT_MOST));
        self.0.insert(task_id.to_owned(), (now + wait, wait));
        wait
    }

    fn answered(&mut self, task_id: &str) {
        self.0.remove(task_id);
    }
}

/// The route of a task whose message had no `reply_to`: its answers are
/// not published (the route is closed when the task ends), but the route
/// still says whether the task is this host's.
pub(super) const NO_QUEUE: &str = "";

/// How often the routes are read even when nothing in this process
/// changed (another process, or a write held back by a full disk).
const SWEEP: Duration = Duration::from_secs(1);

/// Publishes final answers until publishing fails (the connection is
/// gone; the routes stay open for the next connection). An answer the
/// broker refuses holds back its own route only ([`Held`]).
pub(super) async fn run(state: AppState, answering: Answering, capacity: Capacity) -> Result<()> {
    let mut changes = state.host.store.task_changes();
    let mut held = Held::default();
    loop {
        for route in state.host.store.open_routes()? {
            if !route.acked || held.waits(&route.task_id, Instant::now()) {
                continue;
            }
            // Any task's change wakes the outbox: a task is read whole
            // only once it is final.
            match state.host.store.task_stamp(&route.task_id)? {
                Some((s, _)) if s.is_final() => {}
                _ => continue,
            }
            let Some(task) = state.host.store.task(&route.task_id)? else {
                continue;
            };
            if !task.state.is_final() {
                continue;
            }
            let Some(answer) = task.result.as_ref().or(task.answer.as_ref()) else {
                continue;
            };
            if route.reply_to == NO_QUEUE {
                // Its message had no `reply_to`: nothing to publish.
                state.host.store.route_answered(&route.task_id)?;
                capacity.release(&route.task_id);
                continue;
            }
            state.host.store.route_attempt(&route.task_id)?;
            let flags = Flags {
                duplicate: false,
                redelivered: route.attempts > 0,
            };
            let published = publish_answer(
                &answering,
                &state.host,
                &route.reply_to,
                &route.correlation_id,
                Some(&route.task_id),
                answer,
                flags,
            )
            .await;
            if let Err(e) = published {
                // Refused by the broker: this route waits, the others go
                // on. Anything else: the connection is gone.
                if e.downcast_ref::<Refused>().is_none() {
                    return Err(e);
                }
                // The task is over: its place goes back (only its answer
                // waits). Held, a reply queue that refuses every answer
                // kept all of the host's places, and it took no delivery
                // from anybody again.
                capacity.release(&route.task_id);
                let wait = held.refused(&route.task_id, Instant::now());
                tracing::warn!(
                    target: "hcp::amqp",
                    task = %route.task_id,
                    "{e:#}; its final answer is tried again in {} s",
                    wait.as_secs()
                );
                continue;
            }
            held.answered(&route.task_id);
            state.host.store.route_answered(&route.task_id)?;
            capacity.release(&route.task_id);
            tracing::info!(
                target: "hcp::amqp",
                task = %route.task_id,
                "{}",
                answer.kind_name()
            );
        }
        let _ = tokio::time::timeout(SWEEP, changes.changed()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_route_waits_longer_each_time_and_alone() {
        let mut held = Held::default();
        let t0 = Instant::now();
        assert!(!held.waits("a", t0));
        assert_eq!(held.refused("a", t0), REFUSED_FIRST);
        assert!(held.waits("a", t0));
        assert!(!held.waits("b", t0), "another route is not held");
        assert!(!held.waits("a", t0 + REFUSED_FIRST));
        assert_eq!(held.refused("a", t0), REFUSED_FIRST * 2);
        for _ in 0..20 {
            held.refused("a", t0);
        }
        assert_eq!(held.refused("a", t0), REFUSED_AT_MOST);
        held.answered("a");
        assert!(!held.waits("a", t0));
    }
}
