//! Two hosts on one queue (docs/amqp.md, "Redelivery and a host that
//! dies"): each with its own data directory and host key, sharing the
//! policies and the installed capabilities, consuming the same
//! `hcp.tasks.document-analysis` at prefetch 8. Each host is SIGKILLed
//! again and again, each time at an injected point of taking a delivery
//! (the test-only hook `HCP_TEST_KILL_AT` of debug builds: after the
//! record, after the acknowledgement, after the round trip that says the
//! broker took it, after the record that the task is the host's own), and
//! started again. Counted in both hosts' stores: every submission ran at
//! most once, its caller never got two final answers that disagree (a
//! repeat only as an identical copy marked `x-hcp-redelivered`), and a
//! submission that ran nowhere is the window docs/amqp.md names: no answer
//! at all, and a `gate.abandoned` receipt on a host killed in it. The two
//! hosts' evidence packs merge into one that verifies and replays. Answers
//! carry each host's Lamport clock, and a clock sent back orders the next
//! task's receipts after it.

use super::amqp::{
    Caller, HOST_PERMISSIONS, QUEUE, Reply, add_caller, consumed_by, policies_with_amqp_users,
};
use super::{REPO_ROOT, Server, example, lab, with_id};
use hcp_tests::broker::Broker;
use lapin::types::{AMQPValue, FieldTable};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const CALLER: &str = "harness-local-01";
/// Deliveries each host holds unacknowledged at once.
const PREFETCH: usize = 8;
/// Where each host kills itself, one kill after another: `<point>:<n>`,
/// the `n`-th delivery to reach the point after a start. A host started
/// again takes the next; after its last it runs to the end.
const KILLS: [&[&str]; 2] = [
    &[
        "after-record:3",
        "after-round-trip:2",
        "after-ack:2",
        "after-own:3",
    ],
    &[
        "after-ack:3",
        "after-own:2",
        "after-record:2",
        "after-round-trip:3",
    ],
];
/// Submissions sent at least, and at most (the kills must all have
/// happened by then).
const AT_LEAST: usize = 48;
const AT_MOST: usize = 200;

/// A final answer as the caller saw it.
#[derive(Debug)]
struct Final {
    host: usize,
    message_id: String,
    redelivered: bool,
    body: serde_json::Value,
}

impl Final {
    fn of(host: usize, answer: &Reply) -> Self {
        Self {
            host,
            message_id: answer.body["message_id"].as_str().unwrap_or("").to_owned(),
            redelivered: answer.redelivered,
            body: answer.body.clone(),
        }
    }
}

/// What a host's store says about one submission's tasks.
#[derive(Debug, Default, Clone)]
struct Stored {
    /// Tasks that began to run: running or completed, failed by a restart
    /// while running, or with a `session.open` receipt (which a SIGKILL
    /// may catch before it is stored).
    ran: usize,
    /// Tasks let go with a `gate.abandoned` receipt.
    abandoned: usize,
    /// Tasks not in a final state yet.
    open: usize,
}

/// Per submission (`message_id`, a freed one's suffix cut), what the store
/// in `data` holds about its tasks; and whether it still has a route to
/// answer (an open route of a task that is the host's).
fn stored(data: &Path) -> (BTreeMap<String, Stored>, usize) {
    let db = rusqlite::Connection::open_with_flags(
        data.join("hcp.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the host's store");
    db.busy_timeout(Duration::from_secs(10)).expect("timeout");
    let mut stmt = db
        .prepare(
            "SELECT t.message_id, t.state, \
               t.state IN ('running', 'completed') \
               OR CASE WHEN json_valid(t.result) \
                  THEN json_extract(t.result, '$.payload.error_message') ELSE '' END \
                  = 'the host stopped while the task was running' \
               OR EXISTS (SELECT 1 FROM receipt_marks m \
                WHERE m.task_id = t.task_id AND m.call = 'session.open'), \
               (SELECT count(*) FROM receipt_marks m \
                WHERE m.task_id = t.task_id AND m.call = 'gate.abandoned'), \
               t.task_id, coalesce(t.result LIKE 'sealed:%', 0) \
             FROM tasks t",
        )
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })
        .expect("query")
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows");
    // A final answer that rests sealed (the seed's task is T3) is read
    // through the store, which opens it, as the host's own commands do.
    let mut store = None;
    let mut stopped_while_running = |task_id: &str| {
        let store = store.get_or_insert_with(|| {
            hcp::store::Store::open(data).expect("open the host's store to read sealed answers")
        });
        let status = store.task_status(task_id).expect("a task's status");
        status
            .as_ref()
            .and_then(|s| s.result.as_ref())
            .and_then(|r| match r {
                hcp_contracts::answer::Answer::Failed(f) => Some(f.payload.error_message.as_str()),
                _ => None,
            })
            == Some("the host stopped while the task was running")
    };
    let mut by_submission: BTreeMap<String, Stored> = BTreeMap::new();
    for (message_id, state, ran, abandoned, task_id, sealed) in rows {
        let ran = ran > 0 || (sealed > 0 && stopped_while_running(&task_id));
        let id = message_id
            .split("#released-")
            .next()
            .unwrap_or(&message_id)
            .to_owned();
        let entry = by_submission.entry(id).or_default();
        entry.ran += usize::from(ran);
        entry.abandoned += usize::from(abandoned > 0);
        entry.open += usize::from(!matches!(
            state.as_str(),
            "completed" | "failed" | "rejected" | "cancelled" | "expired"
        ));
    }
    let unanswered: i64 = db
        .query_row(
            "SELECT count(*) FROM amqp_replies WHERE acked = 1 AND answered_at IS NULL",
            [],
            |r| r.get(0),
        )
        .expect("open routes");
    (
        by_submission,
        usize::try_from(unanswered).unwrap_or(usize::MAX),
    )
}

/// Messages in the task queue, ready or held unacknowledged by a host.
fn queued_messages(broker: &Broker) -> Option<u64> {
    let out = broker
        .ctl(&[
            "list_queues",
            "-q",
            "--no-table-headers",
            "name",
            "messages",
        ])
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some(QUEUE))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

fn is_final(answer: &Reply) -> bool {
    matches!(
        answer.body["type"].as_str(),
        Some("task_completed" | "task_failed")
    )
}

/// Runs `hcp` on `data` and returns its stdout, failing on a non-zero exit.
fn hcp(data: Option<&Path>, args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcp"));
    cmd.args(args).current_dir(REPO_ROOT);
    if let Some(d) = data {
        cmd.env("HCP_DATA_DIR", d);
    }
    let out = cmd.output().expect("run hcp");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "hcp {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn two_hosts_killed_at_each_point_of_taking_a_delivery_run_each_task_at_most_once() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    broker
        .add_user_with("hcp-host", "hcp-host-secret", HOST_PERMISSIONS)
        .expect("user");
    add_caller(&broker, CALLER);
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_amqp_users(policies.path());
    let url = broker.url("hcp-host", "hcp-host-secret");
    let args = [
        "--amqp",
        &url,
        "--amqp-prefetch",
        &PREFETCH.to_string(),
        "--policies",
        policies.path().to_str().expect("utf-8"),
    ];
    let dirs = [lab(), lab()];
    let data = |h: usize| dirs[h].path();
    let start = |h: usize, kill: Option<&str>| match kill {
        Some(point) => Server::start_with_env(data(h), &args, &[("HCP_TEST_KILL_AT", point)]),
        None => Server::start_with(data(h), &args),
    };
    // Each host's kills so far: (point, submissions sent by then).
    let mut killed: [Vec<&str>; 2] = [Vec::new(), Vec::new()];
    let mut servers = [start(0, Some(KILLS[0][0])), start(1, Some(KILLS[1][0]))];
    let host_id = |data: &Path| hcp(Some(data), &["keys", "show", "--json"]);
    let ids = [host_id(data(0)), host_id(data(1))];
    let which = |host: &str| -> usize {
        ids.iter()
            .position(|j| j.contains(host))
            .unwrap_or_else(|| panic!("an answer from an unknown host {host}"))
    };
    let log_tail = |h: usize| {
        let text = std::fs::read_to_string(data(h).join("serve.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let began = Instant::now();
    let (sent, finals, firsts, last_clock) = runtime.block_on(async {
        consumed_by(&broker, 2).await;
        let mut caller = Caller::connect(&broker, CALLER, data(0)).await;
        // Per submission: its final answers, and the hosts that gave it a
        // first answer.
        let mut finals: BTreeMap<String, Vec<Final>> = BTreeMap::new();
        let mut firsts: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        let mut clocks: BTreeMap<usize, u64> = BTreeMap::new();
        let mut sent = 0;
        let mut take = |answer: Reply, finals: &mut BTreeMap<String, Vec<Final>>| {
            let host = which(&answer.host);
            // Each host's clock only grows from answer to answer.
            let clock = clocks.entry(host).or_default();
            assert!(answer.lamport >= *clock, "{host}: clock went back");
            *clock = answer.lamport;
            if is_final(&answer) {
                finals
                    .entry(answer.correlation.clone())
                    .or_default()
                    .push(Final::of(host, &answer));
            } else {
                assert_eq!(answer.body["type"], "task_accepted", "{}", answer.body);
                firsts
                    .entry(answer.correlation.clone())
                    .or_default()
                    .insert(host);
            }
        };
        // Tasks go out two at a time while a kill is still to come; a
        // host that killed itself is started again with its next point.
        loop {
            for h in 0..2 {
                if servers[h].child.try_wait().expect("wait").is_none() {
                    continue;
                }
                let point = KILLS[h][killed[h].len()];
                let log = std::fs::read_to_string(data(h).join("serve.log")).unwrap_or_default();
                let name = point.split(':').next().unwrap_or(point);
                assert!(
                    log.lines()
                        .rfind(|l| l.contains("test hook: killed at"))
                        .is_some_and(|l| l.contains(&format!("killed at {name} "))),
                    "host {h} exited, not at {point}:\n{}",
                    log_tail(h)
                );
                killed[h].push(point);
                servers[h] = start(h, KILLS[h].get(killed[h].len()).copied());
            }
            let pending = killed[0].len() < KILLS[0].len() || killed[1].len() < KILLS[1].len();
            if !pending && sent >= AT_LEAST {
                break;
            }
            assert!(
                sent < AT_MOST,
                "{sent} tasks sent and the kills {KILLS:?} did not all happen (done: \
                 {killed:?}); host 0:\n{}\nhost 1:\n{}",
                log_tail(0),
                log_tail(1)
            );
            for _ in 0..2 {
                let task = with_id(example("document-analysis"), &format!("two-hosts-{sent}"));
                caller
                    .send(&serde_json::to_vec(&task).expect("encode"), Some(CALLER))
                    .await;
                sent += 1;
            }
            let until = Instant::now() + Duration::from_millis(150);
            while let Some(answer) = caller
                .next(until.saturating_duration_since(Instant::now()))
                .await
            {
                take(answer, &mut finals);
            }
        }
        // Everything settled: the broker holds no message, no task is left
        // open on either host and no final answer is left to publish.
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut quiet = 0;
        while quiet < 2 {
            assert!(
                Instant::now() < deadline,
                "not settled 2 minutes after the last kill; host 0:\n{}\nhost 1:\n{}",
                log_tail(0),
                log_tail(1)
            );
            while let Some(answer) = caller.next(Duration::from_millis(500)).await {
                take(answer, &mut finals);
            }
            let (a, a_open) = stored(data(0));
            let (b, b_open) = stored(data(1));
            let open = a.values().chain(b.values()).any(|s| s.open > 0);
            let settled =
                !open && a_open == 0 && b_open == 0 && queued_messages(&broker) == Some(0);
            quiet = if settled { quiet + 1 } else { 0 };
        }
        while let Some(answer) = caller.next(Duration::from_secs(2)).await {
            take(answer, &mut finals);
        }

        // A clock sent back: the host that takes the next task answers
        // with a clock past it (its receipts come after the other's).
        let ahead = clocks.values().max().copied().unwrap_or(0) + 10_000;
        let mut headers = FieldTable::default();
        headers.insert(
            "x-hcp-lamport".into(),
            AMQPValue::LongLongInt(i64::try_from(ahead).expect("small")),
        );
        let task = with_id(example("document-analysis"), "two-hosts-resume");
        caller
            .send_with(
                &serde_json::to_vec(&task).expect("encode"),
                Some(CALLER),
                headers,
            )
            .await;
        let first = caller
            .next(Duration::from_secs(120))
            .await
            .expect("an answer");
        assert_eq!(first.correlation, "two-hosts-resume");
        assert!(
            first.lamport > ahead,
            "{} is not past {ahead}",
            first.lamport
        );
        let last = caller
            .next(Duration::from_secs(120))
            .await
            .expect("the final answer");
        assert!(is_final(&last), "{}", last.body);
        (sent, finals, firsts, ahead)
    });

    // Per submission, across both hosts' stores: how many of its tasks
    // began to run, and how many were let go.
    let stores = [stored(data(0)).0, stored(data(1)).0];
    let mut ran_nowhere = Vec::new();
    for i in 0..sent {
        let id = format!("two-hosts-{i}");
        let on = |h: usize| stores[h].get(&id).cloned().unwrap_or_default();
        let (a, b) = (on(0), on(1));
        let ran = a.ran + b.ran;
        let answers = finals.get(&id).map_or(&[][..], Vec::as_slice);
        let context = || {
            format!(
                "{id}: host 0 {a:?}, host 1 {b:?}, kills {killed:?}, final answers {answers:?}, first answers from {:?}",
                firsts.get(&id)
            )
        };
        assert!(ran <= 1, "ran on both hosts: {}", context());
        // One final answer; a repeat only as the same answer, marked.
        if let Some(first) = answers.first() {
            for copy in &answers[1..] {
                assert!(copy.redelivered, "a second final answer: {}", context());
                assert_eq!(
                    (copy.host, &copy.message_id, &copy.body),
                    (first.host, &first.message_id, &first.body),
                    "a repeat differs from the answer: {}",
                    context()
                );
            }
        }
        if ran == 1 {
            let host = if a.ran == 1 { 0 } else { 1 };
            let first = answers
                .first()
                .unwrap_or_else(|| panic!("ran and never answered: {}", context()));
            assert_eq!(
                first.host,
                host,
                "answered by a host it did not run on: {}",
                context()
            );
        } else {
            // Ran nowhere: the window (a host killed, at whichever point,
            // while this delivery was between its acknowledgement and the
            // record that it is the host's). No answer at all, a copy let
            // go with its receipt.
            assert!(
                answers.is_empty() && !firsts.contains_key(&id),
                "answered, never ran: {}",
                context()
            );
            assert!(
                a.abandoned + b.abandoned > 0,
                "ran nowhere and let go by no host: {}",
                context()
            );
            ran_nowhere.push(id);
        }
    }
    let kills = killed[0].len() + killed[1].len();
    assert!(
        ran_nowhere.len() <= kills * PREFETCH,
        "{ran_nowhere:?}: more than the prefetch per kill"
    );
    // Both hosts ran tasks.
    assert!(
        stores.iter().all(|s| s.values().any(|t| t.ran > 0)),
        "a host never ran a task"
    );

    // Each host's evidence, merged into one pack that verifies and replays.
    let tmp = tempfile::tempdir().expect("tempdir");
    let packs: Vec<String> = (0..2)
        .map(|h| {
            let out = tmp.path().join(format!("host-{h}.tar"));
            let out = out.to_str().expect("utf-8").to_owned();
            hcp(Some(data(h)), &["evidence", "export", "--all", "-o", &out]);
            out
        })
        .collect();
    drop(servers);
    let all = tmp.path().join("all.tar");
    let all = all.to_str().expect("utf-8");
    hcp(
        None,
        &["evidence", "merge", &packs[0], &packs[1], "-o", all],
    );
    let report = hcp(None, &["evidence", "verify", all, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&report).expect("json");
    assert_eq!(report["ok"], true, "{report}");
    let replay = hcp(None, &["replay", all, "--json"]);
    let replay: serde_json::Value = serde_json::from_str(&replay).expect("json");
    assert_eq!(replay["ok"], true, "{replay}");
    // The merged pack holds both hosts, and the task sent with a clock
    // from the other host is recorded after it.
    let pack = hcp_receipts::pack::read(
        &std::fs::read(all).expect("read"),
        &hcp_receipts::ReadLimits::default(),
    )
    .expect("a pack");
    assert_eq!(pack.hosts.len(), 2);
    let resumed = pack
        .hosts
        .iter()
        .flat_map(|h| &h.receipts)
        .filter(|r| r.call == "gate.admission")
        .map(|r| r.lamport)
        .max()
        .expect("admissions");
    assert!(resumed > last_clock);

    // What this run went through: printed for the log, not asserted.
    let abandoned: usize = stores
        .iter()
        .flat_map(|s| s.values())
        .map(|t| t.abandoned)
        .sum();
    let copies: usize = finals.values().map(|a| a.len().saturating_sub(1)).sum();
    eprintln!(
        "two hosts, {:?}: {sent} submissions, kills {killed:?}; {abandoned} copies let go \
         (gate.abandoned); {copies} repeated final answers; ran nowhere (the window): {ran_nowhere:?}",
        began.elapsed()
    );
}
