//! Two hosts on one queue (docs/amqp.md, "Redelivery and a host that
//! dies"): each with its own data directory and host key, sharing the
//! policies and the installed capabilities, consuming the same
//! `hcp.tasks.document-analysis`. One is SIGKILLed mid-stream and started
//! again: every submission still gets one final answer, a second one only
//! from the one window AMQP 0-9-1 leaves open (the killed host had recorded
//! the task as its own and its acknowledgement had not left; it never gave
//! that task a first answer), and the two hosts' evidence packs merge into
//! one that verifies and replays. Answers
//! carry each host's Lamport clock, and a clock sent back orders the next
//! task's receipts after it.

use super::amqp::{
    CALLER_PERMISSIONS, Caller, HOST_PERMISSIONS, Reply, consumed_by, policies_with_amqp_users,
};
use super::{REPO_ROOT, Server, example, lab, with_id};
use hcp_tests::broker::Broker;
use lapin::types::{AMQPValue, FieldTable};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Submissions in the stream.
const TASKS: usize = 40;
const CALLER: &str = "harness-local-01";
/// Deliveries each host holds unacknowledged at once.
const PREFETCH: usize = 4;

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

/// Whether a submission's two final answers are the acknowledgement's
/// window's (see the end of the test): one from each host, neither said to
/// be a repeat, and no first answer from the killed host.
fn in_the_window(answers: &[Final], first_from: Option<&BTreeSet<usize>>, killed: usize) -> bool {
    let fresh: Vec<usize> = answers
        .iter()
        .filter(|a| !a.redelivered)
        .map(|a| a.host)
        .collect();
    let hosts: BTreeSet<usize> = fresh.iter().copied().collect();
    fresh.len() == 2
        && hosts.len() == 2
        && hosts.contains(&killed)
        && !first_from.is_some_and(|h| h.contains(&killed))
}

#[test]
fn only_a_task_the_killed_host_never_answered_first_may_run_twice() {
    let answer = |host, redelivered| Final {
        host,
        message_id: format!("msg-{host}"),
        redelivered,
        body: serde_json::json!({"type": "task_completed"}),
    };
    let both = [answer(0, false), answer(1, false)];
    let other_first = BTreeSet::from([1]);
    assert!(in_the_window(&both, Some(&other_first), 0));
    assert!(in_the_window(&both, None, 0));
    // The killed host had answered it first: its acknowledgement was
    // confirmed, and the broker still gave the message away.
    let killed_first = BTreeSet::from([0]);
    assert!(!in_the_window(&both, Some(&killed_first), 0));
    assert!(!in_the_window(&both, Some(&BTreeSet::from([0, 1])), 0));
    // Two answers from one host, or three, are not the window's.
    assert!(!in_the_window(
        &[answer(1, false), answer(1, false)],
        None,
        0
    ));
    assert!(!in_the_window(
        &[answer(0, false), answer(1, false), answer(1, false)],
        None,
        0
    ));
    // A repeat marked as one is checked as a repeat.
    assert!(!in_the_window(
        &[answer(0, false), answer(0, true)],
        None,
        0
    ));
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
fn two_hosts_share_a_queue_and_a_sigkilled_one_answers_each_task_once() {
    let broker = Broker::start().expect("start a RabbitMQ node");
    broker
        .add_user_with("hcp-host", "hcp-host-secret", HOST_PERMISSIONS)
        .expect("user");
    broker
        .add_user_with(CALLER, &format!("{CALLER}-secret"), CALLER_PERMISSIONS)
        .expect("user");
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
    let (a, b) = (lab(), lab());
    let mut servers = BTreeMap::new();
    servers.insert(0, Server::start_with(a.path(), &args));
    servers.insert(1, Server::start_with(b.path(), &args));
    let host_id = |data: &Path| hcp(Some(data), &["keys", "show", "--json"]);
    let ids = [host_id(a.path()), host_id(b.path())];
    let which = |host: &str| -> usize {
        ids.iter()
            .position(|j| j.contains(host))
            .unwrap_or_else(|| panic!("an answer from an unknown host {host}"))
    };

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (finals, firsts, first_from, killed, last_clock) = runtime.block_on(async {
        // Both hosts take work from the start.
        consumed_by(&broker, 2).await;
        let mut caller = Caller::connect(&broker, CALLER, a.path()).await;
        for i in 0..TASKS {
            let task = with_id(example("document-analysis"), &format!("two-hosts-{i}"));
            caller
                .send(&serde_json::to_vec(&task).expect("encode"), Some(CALLER))
                .await;
        }
        // Per submission: each final answer's host, message_id, whether it
        // said it may be a repeat, and its body.
        let mut finals: BTreeMap<String, Vec<Final>> = BTreeMap::new();
        let mut firsts: BTreeMap<usize, usize> = BTreeMap::new();
        // Per submission: the hosts that gave it a first answer.
        let mut first_from: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        let mut clocks: BTreeMap<usize, u64> = BTreeMap::new();
        let mut killed: Option<usize> = None;
        let deadline = Instant::now() + Duration::from_secs(300);
        while finals.len() < TASKS {
            if Instant::now() >= deadline {
                let missing: Vec<String> = (0..TASKS)
                    .map(|i| format!("two-hosts-{i}"))
                    .filter(|id| !finals.contains_key(id))
                    .collect();
                let log = |data: &Path| {
                    let text = std::fs::read_to_string(data.join("serve.log")).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(60)..].join("\n")
                };
                panic!(
                    "{} of {TASKS} tasks have a final answer after 5 minutes; missing {missing:?} \
                     (killed: {killed:?}); host 0's log:\n{}\nhost 1's log:\n{}",
                    finals.len(),
                    log(a.path()),
                    log(b.path())
                );
            }
            let Some(answer) = caller.next(Duration::from_secs(5)).await else {
                continue;
            };
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
                *firsts.entry(host).or_default() += 1;
                first_from
                    .entry(answer.correlation.clone())
                    .or_default()
                    .insert(host);
            }
            // Mid-stream: SIGKILL the first host to have accepted three
            // tasks, then start it again on the same data directory.
            if killed.is_none() && firsts.get(&host).is_some_and(|n| *n >= 3) {
                killed = Some(host);
                drop(servers.remove(&host));
                let data = if host == 0 { a.path() } else { b.path() };
                servers.insert(host, Server::start_with(data, &args));
            }
        }
        // Late duplicates, if any, would arrive now.
        while let Some(answer) = caller.next(Duration::from_secs(3)).await {
            if is_final(&answer) {
                finals
                    .entry(answer.correlation.clone())
                    .or_default()
                    .push(Final::of(which(&answer.host), &answer));
            }
        }
        assert!(killed.is_some(), "no host was killed");

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
        (finals, firsts, first_from, killed.expect("killed"), ahead)
    });

    // Every submission has one final answer: one decision, by one host. A
    // host killed between the broker's confirm of a final answer and
    // recording it publishes it again when it is back: the same answer
    // (same message_id, same body), marked x-hcp-redelivered, which a
    // caller drops.
    //
    // The one exception is the window docs/amqp.md ("Redelivery and a host
    // that dies") describes: the killed host had written the task down as
    // its own (its database's write is in the file once made, a SIGKILL
    // does not undo it) and was killed before its acknowledgement left,
    // while the write was still being synced. The broker gives the message
    // to the other host, and the restarted host runs its copy too. Its
    // first answer follows the broker's word that it has the
    // acknowledgement, so the killed host never answered such a task
    // first; a copy it did answer first is a broken promise, and fails
    // here. Only deliveries the host held at once can be in the window:
    // at most the prefetch.
    let expected: BTreeSet<String> = (0..TASKS).map(|i| format!("two-hosts-{i}")).collect();
    let answered: BTreeSet<String> = finals.keys().cloned().collect();
    assert_eq!(answered, expected);
    let mut ran_twice = Vec::new();
    for (id, answers) in &finals {
        let first = &answers[0];
        if in_the_window(answers, first_from.get(id), killed) {
            ran_twice.push(id.clone());
            continue;
        }
        for copy in &answers[1..] {
            if !copy.redelivered {
                // What each host logged about the submission's tasks.
                let about = |data: &Path| {
                    let text = std::fs::read_to_string(data.join("serve.log")).unwrap_or_default();
                    let mark = format!("message_id={id}");
                    let tasks: Vec<&str> = text
                        .lines()
                        .filter(|l| l.ends_with(&mark))
                        .filter_map(|l| l.split("task=\"").nth(1)?.split('"').next())
                        .collect();
                    text.lines()
                        .filter(|l| {
                            tasks.iter().any(|t| l.contains(t))
                                || l.contains("consuming")
                                || l.contains("WARN")
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                panic!(
                    "{id}: a second final answer (first answers from hosts {:?}, host {killed} \
                     killed): {answers:?}\nhost 0:\n{}\nhost 1:\n{}",
                    first_from.get(id),
                    about(a.path()),
                    about(b.path())
                );
            }
            assert_eq!(
                (copy.host, &copy.message_id, &copy.body),
                (first.host, &first.message_id, &first.body),
                "{id}: a repeat differs from the answer"
            );
        }
    }
    assert!(
        ran_twice.len() <= PREFETCH,
        "{ran_twice:?}: more tasks than the prefetch ({PREFETCH}) ran on both hosts"
    );
    // Both hosts took work.
    assert_eq!(firsts.len(), 2, "{firsts:?}");

    // Each host's evidence, merged into one pack that verifies and replays.
    let tmp = tempfile::tempdir().expect("tempdir");
    let packs: Vec<String> = [a.path(), b.path()]
        .iter()
        .enumerate()
        .map(|(i, data)| {
            let out = tmp.path().join(format!("host-{i}.tar"));
            let out = out.to_str().expect("utf-8").to_owned();
            hcp(Some(data), &["evidence", "export", "--all", "-o", &out]);
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

    // What this run went through (the kill lands at a different point
    // each time): printed for the log, not asserted.
    let abandoned = pack
        .hosts
        .iter()
        .flat_map(|h| &h.receipts)
        .filter(|r| r.call == "gate.abandoned")
        .count();
    let failed = finals
        .values()
        .filter(|a| a[0].body["type"] == "task_failed")
        .count();
    let copies: usize = finals.values().map(|a| a.len() - 1).sum();
    eprintln!(
        "two hosts: host {killed} killed; first answers per host {firsts:?}; {failed} task(s) \
         failed by the kill; {abandoned} copy(ies) abandoned (gate.abandoned); {copies} repeated \
         final answer(s), of which {} ran on both hosts in the acknowledgement's window {:?}",
        ran_twice.len(),
        ran_twice
    );
}
