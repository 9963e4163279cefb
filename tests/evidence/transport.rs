//! What a transport brings into the receipts: the copy of a task a host
//! abandoned (it stopped before acknowledging the task's AMQP delivery) is a
//! `gate.abandoned` receipt that replays, and a Lamport clock a caller
//! brings back from another host's answer orders this host's next receipts
//! after it.

use super::{example, export_all, lab, open, submit, verify};
use hcp::evidence::ClockOutOfRange;
use hcp::store::TaskState;
use hcp_policy::pep::PepDecider;
use hcp_receipts::{Verdict, reason};
use hcp_tests::wire;

/// A task submitted over AMQP is written with its route, which says the
/// task is not the host's yet: nothing starts it until the transport
/// records it as its own, and a host that stops first abandons it. A
/// refused submission's route is closed once its answer is out, or at the
/// next start, and its `message_id` stays taken: the redelivery gets the
/// same refusal.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_submitted_over_amqp_comes_with_its_route() {
    let (data, host) = lab();
    let replying =
        |host: &hcp::engine::Host, m: &serde_json::Value| submit_replying(host, m).expect("submit");
    let held = replying(&host, &example("document-analysis", "amqp-routed"));
    assert_eq!(
        wire(&held.answer)["type"],
        "task_accepted",
        "{}",
        held.answer
    );
    let held = held.task_id.expect("recorded");
    let routes = host.store.open_routes().expect("routes");
    assert_eq!(routes.len(), 1);
    assert_eq!(
        (
            routes[0].task_id.as_str(),
            routes[0].reply_to.as_str(),
            routes[0].correlation_id.as_str(),
            routes[0].acked
        ),
        (held.as_str(), "reply-q", "amqp-routed", false)
    );
    assert!(
        host.store
            .startable_tasks(1_000)
            .expect("startable")
            .is_empty()
    );
    // Refused at the gate (no such capability): its route closes once the
    // refusal is out; one the host stopped before closing is closed at
    // the next start.
    let mut unknown = example("document-analysis", "amqp-refused");
    unknown["payload"]["capability"] = "no-such-capability".into();
    let refused = replying(&host, &unknown);
    assert_eq!(
        wire(&refused.answer)["type"],
        "task_rejected",
        "{}",
        refused.answer
    );
    let refused = refused.task_id.expect("recorded");
    let mut unclosed = example("document-analysis", "amqp-refused-2");
    unclosed["payload"]["capability"] = "no-such-capability".into();
    let unclosed = replying(&host, &unclosed).task_id.expect("recorded");
    host.store.route_refused(&refused).expect("closed");
    assert_eq!(open_routes(&host), vec![held.clone(), unclosed.clone()]);
    drop(host);

    let host = open(data.path());
    assert_eq!(
        host.abandon_unacknowledged().expect("abandon"),
        vec![held.clone()]
    );
    assert!(host.store.open_routes().expect("routes").is_empty());
    let task = host.store.task(&held).expect("read").expect("task");
    assert_eq!(task.state.as_str(), "failed");
    let task = host.store.task(&unclosed).expect("read").expect("task");
    assert_eq!(task.state.as_str(), "rejected");
    // The redelivery of a refused message is answered the same way.
    let mut again = example("document-analysis", "amqp-refused-2");
    again["payload"]["capability"] = "no-such-capability".into();
    let again = replying(&host, &again);
    assert!(again.duplicate, "{}", again.answer);
    assert_eq!(again.task_id.as_deref(), Some(unclosed.as_str()));
    assert_eq!(
        wire(&again.answer)["type"],
        "task_rejected",
        "{}",
        again.answer
    );
    // That of the abandoned copy is a new task.
    let again = replying(&host, &example("document-analysis", "amqp-routed"));
    assert!(!again.duplicate, "{}", again.answer);
    assert_ne!(again.task_id.as_deref(), Some(held.as_str()));
}

/// A host fault in the gate fails a task submitted over AMQP, and its
/// route is closed with it: the delivery goes back to the broker, and the
/// redelivery is a duplicate answered with that failure.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_failed_by_a_fault_in_the_gate_has_its_route_closed() {
    let (data, host) = lab();
    let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("open");
    db.busy_timeout(std::time::Duration::from_secs(10))
        .expect("timeout");
    db.execute_batch(
        "CREATE TRIGGER test_fault BEFORE UPDATE OF state ON tasks \
         WHEN NEW.state = 'queued' BEGIN SELECT RAISE(ABORT, 'the test: a fault'); END;",
    )
    .expect("the trigger");
    let submit = |host: &hcp::engine::Host| {
        submit_replying(host, &example("document-analysis", "amqp-fault"))
    };
    let fault = submit(&host).expect_err("the gate fails");
    assert!(
        format!("{fault:#}").contains("the test: a fault"),
        "{fault:#}"
    );
    db.execute_batch("DROP TRIGGER test_fault")
        .expect("drop the trigger");
    assert!(open_routes(&host).is_empty());
    let again = submit(&host).expect("the redelivery");
    assert!(again.duplicate, "{}", again.answer);
    assert_eq!(
        wire(&again.answer)["type"],
        "task_failed",
        "{}",
        again.answer
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abandoned_copy_is_failed_never_answered_and_recorded() {
    let (data, host) = lab();
    let held = submit_replying(&host, &example("document-analysis", "amqp-held"))
        .expect("submit")
        .task_id
        .expect("recorded");
    let done = submit_replying(&host, &example("document-analysis", "amqp-answered"))
        .expect("submit")
        .task_id
        .expect("recorded");
    // Both came with routes; only the second's delivery was acknowledged.
    host.store.route_acked(&done).expect("acked");
    drop(host);

    // The next start abandons the unacknowledged copy only.
    let host = open(data.path());
    let abandoned = host.abandon_unacknowledged().expect("abandon");
    assert_eq!(abandoned, vec![held.clone()]);
    let task = host.store.task(&held).expect("read").expect("task");
    assert_eq!(task.state.as_str(), "failed");
    let answer = &hcp_tests::wire(task.result.as_ref().expect("a final answer"));
    assert_eq!(
        answer["payload"]["error_code"], "internal_error",
        "{answer}"
    );
    // Its route is closed: the outbox never answers for it.
    assert_eq!(open_routes(&host), vec![done.clone()]);
    // A second start finds nothing more to abandon.
    assert!(host.abandon_unacknowledged().expect("again").is_empty());
    // The broker's redelivery, should it come back here, is a new task,
    // not a duplicate of the abandoned copy.
    let again = submit(
        &host,
        &example("document-analysis", "amqp-held"),
        "harness-local-01",
    );
    assert!(!again.duplicate, "{}", again.answer);
    assert_eq!(
        wire(&again.answer)["type"],
        "task_accepted",
        "{}",
        again.answer
    );
    assert_ne!(again.task_id.as_deref(), Some(held.as_str()));
    // The acknowledged one keeps its key.
    let repeat = submit(
        &host,
        &example("document-analysis", "amqp-answered"),
        "harness-local-01",
    );
    assert!(repeat.duplicate);

    let (_, pack) = export_all(&host);
    let report = verify(&pack);
    assert!(report.ok(), "{report}");
    let receipts: Vec<_> = pack.hosts[0]
        .receipts
        .iter()
        .filter(|r| r.call == "gate.abandoned")
        .collect();
    assert_eq!(receipts.len(), 1, "one receipt for the abandoned copy");
    let r = receipts[0];
    assert_eq!(r.task_id.as_deref(), Some(held.as_str()));
    assert_eq!(
        (r.verdict, r.reason_code.as_str()),
        (Verdict::Deny, reason::FAIL_CLOSED_ERROR)
    );
    // It follows from the task's admission.
    let admission = pack.hosts[0]
        .receipts
        .iter()
        .find(|a| a.call == "gate.admission" && a.task_id.as_deref() == Some(held.as_str()))
        .expect("admission");
    assert!(r.parents.contains(&admission.hash().expect("hash")));
    let replayed = hcp_receipts::replay(&pack, &PepDecider::new(&pack));
    assert!(replayed.ok(), "{:?}", replayed.issues);
    assert_eq!(replayed.matched, replayed.replayed);
}

/// A host that stops while it abandons a copy (after the copy's failure
/// is written, before its `message_id` is freed and its route closed)
/// finishes letting it go at the next start: the broker's redelivery is a
/// new task, not a duplicate of the dead copy (that would answer the
/// caller with the copy's failure, and no host would run the task).
#[tokio::test(flavor = "multi_thread")]
async fn a_copy_whose_host_stopped_while_abandoning_it_is_let_go_at_the_next_start() {
    let (data, host) = lab();
    let m = example("document-analysis", "amqp-stopped-midway");
    let held = submit_replying(&host, &m)
        .expect("submit")
        .task_id
        .expect("recorded");
    drop(host);
    // The next start stops where the copy's message_id would be freed.
    let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("db");
    db.execute_batch(
        "CREATE TRIGGER stop_here BEFORE UPDATE OF message_id ON tasks
         BEGIN SELECT RAISE(ABORT, 'the host stopped here'); END",
    )
    .expect("trigger");
    let host = open(data.path());
    let err = host.abandon_unacknowledged().expect_err("stopped");
    assert!(
        format!("{err:#}").contains("the host stopped here"),
        "{err:#}"
    );
    drop(host);
    db.execute_batch("DROP TRIGGER stop_here").expect("drop");
    // The start after it lets the copy go.
    let host = open(data.path());
    host.abandon_unacknowledged().expect("abandon");
    let task = host.store.task(&held).expect("read").expect("task");
    assert_eq!(task.state, TaskState::Failed);
    assert!(open_routes(&host).is_empty(), "{:?}", open_routes(&host));
    let again = submit(&host, &m, "harness-local-01");
    assert!(!again.duplicate, "{}", again.answer);
    assert_eq!(
        wire(&again.answer)["type"],
        "task_accepted",
        "{}",
        again.answer
    );
    assert_ne!(again.task_id.as_deref(), Some(held.as_str()));
}

/// A caller who sends over AMQP a task it submitted over HTTP (the same
/// `message_id`) gets the HTTP task's answers on its reply queue: the
/// duplicate delivery gives the task a route. The task was this host's
/// from its admission, so a host that stops before it records the
/// duplicate's delivery as its own still runs it after a restart. (With
/// the route written as not this host's yet, the restarted host abandoned
/// a task whose caller had been told it was accepted.)
#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_delivery_of_a_task_submitted_over_http_never_abandons_it() {
    let (data, host) = lab();
    let message = example("document-analysis", "http-then-amqp");
    let task = submit(&host, &message, "harness-local-01");
    assert_eq!(
        wire(&task.answer)["type"],
        "task_accepted",
        "{}",
        task.answer
    );
    let task = task.task_id.expect("recorded");
    let dup = submit_replying(&host, &message).expect("the duplicate");
    assert!(dup.duplicate, "{}", dup.answer);
    assert_eq!(dup.task_id.as_deref(), Some(task.as_str()));
    // What the transport does for a duplicate (serve/amqp/delivery.rs):
    // the route, then the record that the delivery is this host's, then
    // the acknowledgement. The host stops between the first two.
    host.store
        .route_replies(&task, "reply-q", "http-then-amqp")
        .expect("route");
    assert_eq!(
        host.store.startable_tasks(1_000).expect("startable"),
        std::slice::from_ref(&task)
    );
    drop(host);

    let host = open(data.path());
    let abandoned = host.abandon_unacknowledged().expect("abandon");
    assert!(
        abandoned.is_empty(),
        "a task accepted over HTTP was abandoned at startup: {abandoned:?}"
    );
    let state = host.store.task(&task).expect("read").expect("task").state;
    assert_eq!(state, TaskState::Queued);
    assert_eq!(
        host.store.startable_tasks(1_000).expect("startable"),
        std::slice::from_ref(&task)
    );
    // Its answers go to the duplicate's reply queue.
    assert_eq!(
        route_queues(&host),
        [(task.clone(), "reply-q".to_owned(), true)]
    );
}

/// A message sent without `reply_to` (nobody is answered) and sent again
/// with one: the duplicate's queue gets the task's final answer. (The
/// first route, to no queue, was kept, so the caller who asked for
/// answers never had one.) A route to a queue stays as it is.
#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_with_reply_to_gets_the_answers_of_a_task_first_sent_without() {
    let (_data, host) = lab();
    let message = example("document-analysis", "amqp-answer-me-later");
    // As the transport takes a message without `reply_to`: a route to no
    // queue ('').
    let task = host
        .submit_task_replying(
            hcp::engine::TaskMessage::parse(message.clone()).expect("a task_submit"),
            hcp::engine::Auth::Transport("harness-local-01"),
            Some(""),
        )
        .expect("submit")
        .task_id
        .expect("recorded");
    host.store.route_acked(&task).expect("acked");
    let dup = submit_replying(&host, &message).expect("the duplicate");
    assert!(dup.duplicate, "{}", dup.answer);
    host.store
        .route_replies(&task, "reply-q", "amqp-answer-me-later")
        .expect("route");
    // A third copy, to another queue, changes nothing.
    host.store
        .route_replies(&task, "other-q", "amqp-answer-me-later")
        .expect("route");
    assert_eq!(
        route_queues(&host),
        [(task.clone(), "reply-q".to_owned(), true)]
    );
}

/// While serving: a copy recorded as this host's whose delivery then could
/// not be acknowledged (the channel was gone) is let go as a stopped host
/// lets go its unacknowledged copies, unless it has started: that one stays
/// this host's, and nothing says it was abandoned.
#[tokio::test(flavor = "multi_thread")]
async fn a_copy_whose_acknowledgement_never_left_is_let_go_unless_it_started() {
    let (_data, host) = lab();
    let mut ids = Vec::new();
    for message_id in ["amqp-lost", "amqp-started"] {
        let id = submit(
            &host,
            &example("document-analysis", message_id),
            "harness-local-01",
        )
        .task_id
        .expect("recorded");
        host.store
            .route_replies(&id, "reply-q", message_id)
            .expect("route");
        host.store.route_acked(&id).expect("this host's");
        ids.push(id);
    }
    let (lost, started) = (&ids[0], &ids[1]);
    assert!(
        host.store
            .transition(started, TaskState::Queued, TaskState::Running)
            .expect("start")
    );

    assert!(host.abandon_unacknowledged_copy(lost).expect("let go"));
    assert!(!host.abandon_unacknowledged_copy(started).expect("kept"));
    let task = host.store.task(lost).expect("read").expect("task");
    assert_eq!(task.state, TaskState::Failed);
    let answer = &hcp_tests::wire(task.result.as_ref().expect("a final answer"));
    assert!(
        answer["payload"]["error_message"]
            .as_str()
            .is_some_and(|m| m.starts_with("abandoned: the connection to the broker was lost")),
        "{answer}"
    );
    let task = host.store.task(started).expect("read").expect("task");
    assert_eq!(task.state, TaskState::Running);
    // Only the started one's route is open, still this host's: the outbox
    // answers for it and for nothing else.
    let routes = host.store.open_routes().expect("routes");
    assert_eq!(
        routes
            .iter()
            .map(|r| (r.task_id.as_str(), r.acked))
            .collect::<Vec<_>>(),
        [(started.as_str(), true)]
    );
    // The redelivery, should it come back here, is a new task.
    let again = submit(
        &host,
        &example("document-analysis", "amqp-lost"),
        "harness-local-01",
    );
    assert!(!again.duplicate, "{}", again.answer);

    let (_, pack) = export_all(&host);
    let report = verify(&pack);
    assert!(report.ok(), "{report}");
    let abandoned: Vec<_> = pack.hosts[0]
        .receipts
        .iter()
        .filter(|r| r.call == "gate.abandoned")
        .map(|r| r.task_id.as_deref())
        .collect();
    assert_eq!(abandoned, [Some(lost.as_str())]);
    let replayed = hcp_receipts::replay(&pack, &PepDecider::new(&pack));
    assert!(replayed.ok(), "{:?}", replayed.issues);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clock_brought_back_orders_the_next_receipts_after_it() {
    let (_data, host) = lab();
    let before = host.lamport();
    // A clock not ahead of this host's changes nothing.
    host.observe_lamport(before).expect("observe");
    let first = submit(
        &host,
        &example("document-analysis", "clock-1"),
        "harness-local-01",
    );
    assert!(host.lamport() > before, "the admission receipt");

    // Another host's clock, far ahead: the next receipt comes after it.
    host.observe_lamport(5_000).expect("observe");
    let second = submit(
        &host,
        &example("document-analysis", "clock-2"),
        "harness-local-01",
    );
    assert!(host.lamport() > 5_000);

    // No clock the receipts' JSON cannot hold exactly.
    for bad in [(1u64 << 53) - 1, u64::MAX] {
        let e = host.observe_lamport(bad).expect_err("refused");
        assert!(e.downcast_ref::<ClockOutOfRange>().is_some(), "{e:#}");
    }

    let (_, pack) = export_all(&host);
    assert!(verify(&pack).ok());
    let lamport_of = |task: &str| {
        pack.hosts[0]
            .receipts
            .iter()
            .find(|r| r.call == "gate.admission" && r.task_id.as_deref() == Some(task))
            .expect("admission")
            .lamport
    };
    assert_eq!(
        lamport_of(first.task_id.as_deref().expect("id")),
        before + 1
    );
    assert_eq!(lamport_of(second.task_id.as_deref().expect("id")), 5_001);
}

/// A clock a caller brings is any number it likes (over AMQP, the
/// `x-hcp-lamport` header). One just below the receipts' limit (2^53 − 1)
/// exhausted the host's clock for good: the stored log kept it, and every
/// receipt after it was refused, so no task was admitted again, after
/// restarts too. Bounded at an absolute 2^48 instead, one of exactly 2^48
/// was taken, and from then on every answer carried a clock the host
/// itself refused when a caller sent it back. A clock is now taken at most
/// 2^32 ahead of the host's own (and at most 2^52); one at or below the
/// host's own is always taken.
#[tokio::test(flavor = "multi_thread")]
async fn a_clock_far_ahead_of_the_hosts_is_refused_and_its_own_is_always_taken() {
    let (data, host) = lab();
    let own = host.lamport();
    for bad in [
        (1u64 << 53) - 2,
        1 << 48,
        own + hcp::evidence::MAX_LAMPORT_LEAD + 1,
    ] {
        let e = host
            .observe_lamport(bad)
            .expect_err("a clock far ahead of the host's is refused");
        assert!(e.downcast_ref::<ClockOutOfRange>().is_some(), "{e:#}");
    }
    let first = submit(
        &host,
        &example("document-analysis", "clock-after-refusal"),
        "harness-local-01",
    );
    assert_eq!(
        wire(&first.answer)["type"],
        "task_accepted",
        "{}",
        first.answer
    );
    assert!(host.lamport() < 1 << 32, "{}", host.lamport());
    // The most a clock may lead by: the next receipts come after it, and
    // the host's own clock, sent back, is taken.
    let ahead = host.lamport() + hcp::evidence::MAX_LAMPORT_LEAD;
    host.observe_lamport(ahead).expect("2^32 ahead is taken");
    let second = submit(
        &host,
        &example("document-analysis", "clock-at-the-limit"),
        "harness-local-01",
    );
    assert_eq!(
        wire(&second.answer)["type"],
        "task_accepted",
        "{}",
        second.answer
    );
    assert!(host.lamport() > ahead);
    host.observe_lamport(host.lamport())
        .expect("its own clock is taken");
    drop(host);
    let host = open(data.path());
    host.observe_lamport(host.lamport())
        .expect("its own clock is taken after a restart");
    let third = submit(
        &host,
        &example("document-analysis", "clock-after-restart"),
        "harness-local-01",
    );
    assert_eq!(
        wire(&third.answer)["type"],
        "task_accepted",
        "{}",
        third.answer
    );
    let (_, pack) = export_all(&host);
    assert!(verify(&pack).ok());
}

/// A store whose clock a single message moved to 2^48 before the bound
/// was relative (the stored log keeps it: here written into the log's
/// state as that message left it) recovers: the clock its answers carry,
/// sent back, is taken, and tasks are admitted. (With the absolute bound,
/// every such clock was refused `invalid_input`, for good.)
#[tokio::test(flavor = "multi_thread")]
async fn a_store_whose_clock_was_moved_to_2_48_takes_its_own_clock_back_and_goes_on() {
    let (data, host) = lab();
    submit(
        &host,
        &example("document-analysis", "clock-before-poison"),
        "harness-local-01",
    );
    drop(host);
    {
        let db = rusqlite::Connection::open(data.path().join("hcp.db")).expect("open");
        let state: String = db
            .query_row("SELECT state FROM receipt_log WHERE id = 1", [], |r| {
                r.get(0)
            })
            .expect("the log's state");
        let mut state: serde_json::Value = serde_json::from_str(&state).expect("json");
        state["lamport"] = serde_json::Value::from(1u64 << 48);
        db.execute(
            "UPDATE receipt_log SET state = ?1 WHERE id = 1",
            [state.to_string()],
        )
        .expect("poison the clock");
    }
    let host = open(data.path());
    assert_eq!(host.lamport(), 1 << 48);
    let message = example("document-analysis", "clock-after-poison");
    let answered = host
        .submit_task_carried(
            hcp::engine::TaskMessage::parse(message).expect("a task_submit"),
            hcp::engine::Auth::Transport("harness-local-01"),
            hcp::engine::Carried {
                reply_to: Some("reply-q"),
                lamport: Some(1 << 48),
                transport: None,
            },
        )
        .expect("submit");
    assert_eq!(
        wire(&answered.answer)["type"],
        "task_accepted",
        "{}",
        answered.answer
    );
    // The clock its answer would carry now, sent back: taken.
    let echoed = host.lamport();
    assert!(echoed > 1 << 48);
    let message = example("document-analysis", "clock-echoed");
    let answered = host
        .submit_task_carried(
            hcp::engine::TaskMessage::parse(message).expect("a task_submit"),
            hcp::engine::Auth::Transport("harness-local-01"),
            hcp::engine::Carried {
                reply_to: Some("reply-q"),
                lamport: Some(echoed),
                transport: None,
            },
        )
        .expect("submit");
    assert_eq!(
        wire(&answered.answer)["type"],
        "task_accepted",
        "{}",
        answered.answer
    );
    let (_, pack) = export_all(&host);
    let report = verify(&pack);
    assert!(report.ok(), "{report}");
}

/// A clock is read only from an authenticated caller's message: one from a
/// broker user that is nobody's caller is refused `unauthorized` and moves
/// nothing. (The clock was observed before the caller was known: any
/// broker user moved every caller's clock.) One too far ahead from a
/// caller is refused `invalid_input`, and nothing is recorded.
#[tokio::test(flavor = "multi_thread")]
async fn a_clock_moves_only_with_an_authenticated_callers_message() {
    let (_data, host) = lab();
    let own = host.lamport();
    let carried = |id: &str, auth: hcp::engine::Auth<'_>, lamport: u64| {
        host.submit_task_carried(
            hcp::engine::TaskMessage::parse(example("document-analysis", id))
                .expect("a task_submit"),
            auth,
            hcp::engine::Carried {
                reply_to: None,
                lamport: Some(lamport),
                transport: None,
            },
        )
        .expect("submit")
    };
    for (id, user) in [
        ("clock-stranger", Some("stranger")),
        ("clock-anonymous", None),
    ] {
        let refused = carried(id, hcp::engine::Auth::Broker(user), own + 1_000_000);
        assert_eq!(
            wire(&refused.answer)["payload"]["reason_code"],
            "unauthorized",
            "{}",
            refused.answer
        );
        assert!(refused.task_id.is_none());
    }
    // The next receipt (a caller's task, without a clock) comes right
    // after the host's own clock, not after the stranger's.
    let next = carried(
        "clock-after-strangers",
        hcp::engine::Auth::Transport("harness-local-01"),
        own,
    );
    assert_eq!(
        wire(&next.answer)["type"],
        "task_accepted",
        "{}",
        next.answer
    );
    assert!(
        host.lamport() < own + 1_000,
        "a stranger's clock moved the host's: {} after {own}",
        host.lamport()
    );
    let own = host.lamport();
    let refused = carried(
        "clock-too-far",
        hcp::engine::Auth::Transport("harness-local-01"),
        own + hcp::evidence::MAX_LAMPORT_LEAD + 1,
    );
    assert_eq!(
        wire(&refused.answer)["payload"]["reason_code"],
        "invalid_input",
        "{}",
        refused.answer
    );
    assert!(refused.task_id.is_none());
    assert_eq!(host.lamport(), own);
}

/// A task whose AMQP delivery this host never acknowledged (it stopped
/// first, or the record failed) is not its own: the broker may give the
/// message to another host, which runs it. Nothing here starts it or
/// decides it, also from the command line while `hcp serve` is not
/// running (`hcp tasks run-queued` and `hcp approvals approve` ran such a
/// copy, so the task ran on two hosts). Queued tasks start oldest first,
/// however many wait.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_whose_delivery_was_never_acknowledged_is_neither_started_nor_decided() {
    let (_data, host) = lab();
    let queued = submit_replying(&host, &example("document-analysis", "amqp-unowned"))
        .expect("submit")
        .task_id
        .expect("recorded");
    let cvd = example("cvd-material-synthesis", "amqp-unowned-cvd");
    let waiting = host
        .submit_task_replying(
            hcp::engine::TaskMessage::parse(cvd).expect("a task_submit"),
            hcp::engine::Auth::Transport("harness-alpha-001"),
            Some("reply-q"),
        )
        .expect("submit");
    assert_eq!(
        wire(&waiting.answer)["status"],
        "pending_approval",
        "{}",
        waiting.answer
    );
    let waiting = waiting.task_id.expect("recorded");
    assert_eq!(
        host.store
            .task(&waiting)
            .expect("read")
            .expect("task")
            .state,
        TaskState::PendingApproval
    );
    assert_eq!(
        host.store.held_tasks().expect("held"),
        std::slice::from_ref(&queued)
    );
    assert!(
        host.store
            .startable_tasks(1_000)
            .expect("startable")
            .is_empty()
    );
    let refused = host
        .decide(
            &waiting,
            true,
            hcp::engine::Auth::Transport("operator-lab-01"),
            "operator-lab-01",
            "looks fine",
        )
        .expect_err("not this host's to decide");
    assert!(
        format!("{refused:#}").contains("never acknowledged"),
        "{refused:#}"
    );
    // Once recorded as this host's, both go on.
    host.store.route_acked(&queued).expect("acked");
    host.store.route_acked(&waiting).expect("acked");
    assert!(host.store.held_tasks().expect("held").is_empty());
    assert_eq!(
        host.store.startable_tasks(1_000).expect("startable"),
        [queued]
    );
    let decided = host
        .decide(
            &waiting,
            true,
            hcp::engine::Auth::Transport("operator-lab-01"),
            "operator-lab-01",
            "looks fine",
        )
        .expect("decided");
    assert!(decided.runnable, "{}", decided.answer);
}

/// The open routes: each task, its reply queue, and whether it is this
/// host's.
fn route_queues(host: &hcp::engine::Host) -> Vec<(String, String, bool)> {
    host.store
        .open_routes()
        .expect("routes")
        .into_iter()
        .map(|r| (r.task_id, r.reply_to, r.acked))
        .collect()
}

/// The tasks whose route is open (their final answer not confirmed yet).
fn open_routes(host: &hcp::engine::Host) -> Vec<String> {
    host.store
        .open_routes()
        .expect("routes")
        .into_iter()
        .map(|r| r.task_id)
        .collect()
}

/// `m` submitted by harness-local-01 as an AMQP delivery whose answers go
/// to the queue `reply-q`.
fn submit_replying(
    host: &hcp::engine::Host,
    m: &serde_json::Value,
) -> anyhow::Result<hcp::engine::Submission> {
    let message = hcp::engine::TaskMessage::parse(m.clone()).expect("a task_submit");
    host.submit_task_replying(
        message,
        hcp::engine::Auth::Transport("harness-local-01"),
        Some("reply-q"),
    )
}
