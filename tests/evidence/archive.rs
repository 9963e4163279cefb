//! Archive and prune (`hcp_evidence::archive`, `hcp evidence archive`):
//! settled tasks go to a pack that verifies and replays, and out of the hot
//! store; what is not settled stays; a series of packs verifies unbroken
//! and fails on a gap, a reorder or a tampered pack; a crash at any
//! injected point of a run loses nothing and a rerun completes.

use super::*;
use hcp::evidence::archive::{self, SeriesPack};
use std::process::Command;

/// Later than any task of a test: every settled task is old enough.
const FAR: &str = "9999-01-01T00:00:00.000Z";

fn key(data: &Path) -> HostKey {
    hcp::evidence::hostkey::load(data).expect("host key").key
}

fn read(path: &Path) -> Pack {
    pack::read(
        &std::fs::read(path).expect("read pack"),
        &pack::ReadLimits::default(),
    )
    .expect("pack")
}

fn tasks_stored(host: &Host) -> i64 {
    host.store
        .db()
        .query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
        .expect("count")
}

fn series<'a>(packs: &[(&str, &'a Pack)]) -> Vec<String> {
    let named: Vec<SeriesPack<'a>> = packs
        .iter()
        .map(|(name, pack)| SeriesPack {
            name: (*name).to_owned(),
            pack,
        })
        .collect();
    archive::check_series(&named)
}

#[tokio::test(flavor = "multi_thread")]
async fn archives_prune_settled_tasks_keep_the_unsettled_and_make_an_unbroken_series() {
    let (data, host) = lab();
    let out = tempfile::tempdir().expect("tempdir");
    let key = key(data.path());
    let first = demo(&host).await;
    let blobs_before = std::fs::read_dir(data.path().join("blobs/sha256"))
        .expect("blobs")
        .count();
    assert!(blobs_before > 0, "the demo leaves artifacts");

    // 1: every demo task is settled: all go.
    let p1 = out.path().join("a1.tar");
    let done = archive::archive(&host.store, &key, FAR, &p1).expect("archive");
    let a1 = done.archive.expect("archived");
    assert_eq!(a1.tasks, first.len() as u64);
    assert_eq!(tasks_stored(&host), 0);
    assert!(done.blobs_collected > 0, "the pruned artifacts' blobs go");
    let pack1 = read(&p1);
    assert!(verify(&pack1).ok(), "{}", verify(&pack1));
    let replayed = hcp_receipts::replay(&pack1, &PepDecider::new(&pack1));
    assert!(replayed.ok(), "{:?}", replayed.issues);
    assert_eq!(replayed.matched, pack1.hosts[0].receipts.len());
    assert_eq!(
        a1.anchor.pack_sha256,
        hcp_receipts::Digest::of(&std::fs::read(&p1).expect("read"))
    );
    for task in &first {
        assert!(
            pack1.messages.keys().any(|m| m.starts_with(task.as_str())),
            "the pack holds the messages of {task}"
        );
    }
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    // Nothing more is old enough: a second run archives nothing.
    let again =
        archive::archive(&host.store, &key, FAR, &out.path().join("none.tar")).expect("run");
    assert!(again.archive.is_none());

    // 2: a task waiting for an approval stops the stretch before it; the
    // settled task after it stays too.
    let doc = submit(
        &host,
        &example("document-analysis", "doc-2"),
        "harness-local-01",
    );
    assert_eq!(run(&host, &doc).await["type"], "task_completed");
    let waiting = submit(
        &host,
        &example("cvd-material-synthesis", "cvd-3"),
        "harness-alpha-001",
    );
    assert_eq!(wire(&waiting.answer)["status"], "pending_approval");
    let later = submit(
        &host,
        &example("document-analysis", "doc-3"),
        "harness-local-01",
    );
    assert_eq!(run(&host, &later).await["type"], "task_completed");
    let p2 = out.path().join("a2.tar");
    let a2 = archive::archive(&host.store, &key, FAR, &p2)
        .expect("archive")
        .archive
        .expect("archived");
    assert_eq!(a2.tasks, 1, "only doc-2 goes");
    assert_eq!(a2.anchor.first_seq, a1.anchor.tree_size);
    assert_eq!(
        tasks_stored(&host),
        2,
        "the waiting task and the one after it stay"
    );
    let pack2 = read(&p2);
    assert!(verify(&pack2).ok(), "{}", verify(&pack2));
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);

    // 3: once decided and run, the rest goes.
    let accepted = decide(&host, &waiting, true);
    assert_eq!(run(&host, &accepted).await["type"], "task_completed");
    let p3 = out.path().join("a3.tar");
    let a3 = archive::archive(&host.store, &key, FAR, &p3)
        .expect("archive")
        .archive
        .expect("archived");
    assert_eq!(a3.tasks, 2);
    assert_eq!(tasks_stored(&host), 0);
    let pack3 = read(&p3);
    assert!(verify(&pack3).ok(), "{}", verify(&pack3));
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    assert_eq!(archive::archives(&host.store).expect("list").len(), 3);
    let summary = archive::summary(&host.store).expect("summary");
    assert_eq!((summary.archives, summary.tasks), (3, 8));

    // Packs that start at an anchor replay as the first does.
    for pack in [&pack2, &pack3] {
        let replayed = hcp_receipts::replay(pack, &PepDecider::new(pack));
        assert!(replayed.ok(), "{:?}", replayed.issues);
        assert_eq!(replayed.matched, pack.hosts[0].receipts.len());
    }

    // The series verifies in order, and fails on a gap or a reorder.
    assert_eq!(
        series(&[("a1", &pack1), ("a2", &pack2), ("a3", &pack3)]),
        Vec::<String>::new()
    );
    let gap = series(&[("a1", &pack1), ("a3", &pack3)]);
    assert!(gap.iter().any(|p| p.contains("gap")), "{gap:?}");
    let reordered = series(&[("a2", &pack2), ("a1", &pack1)]);
    assert!(!reordered.is_empty(), "a reorder is refused");

    // A task pruned is no longer exported from the store, and says why.
    let err =
        evidence::export(&host.store, &Selection::Task(first[0].clone())).expect_err("archived");
    assert!(format!("{err:#}").contains("archived"), "{err:#}");
}

/// The hcp binary with the test's data directory.
fn hcp(data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcp"));
    cmd.env("HCP_DATA_DIR", data).env_remove(archive::FAULT_ENV);
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_at_any_point_of_an_archive_run_loses_nothing_and_a_rerun_completes() {
    for point in ["after_pack_write", "before_commit", "after_commit"] {
        let (data, host) = lab();
        let tasks = demo(&host).await;
        drop(host);
        let out = tempfile::tempdir().expect("tempdir");
        let pack_path = out.path().join("a1.tar");
        let crashed = hcp(data.path())
            .args(["evidence", "archive", "--before", FAR, "-o"])
            .arg(&pack_path)
            .env(archive::FAULT_ENV, format!("archive:{point}"))
            .output()
            .expect("run hcp");
        assert!(!crashed.status.success(), "{point}: the fault hook aborts");
        assert!(
            String::from_utf8_lossy(&crashed.stderr).contains(point),
            "{point}: {:?} {} {}",
            crashed.status,
            String::from_utf8_lossy(&crashed.stdout),
            String::from_utf8_lossy(&crashed.stderr)
        );

        // The store verifies, and holds the tasks unless the prune committed.
        let host = open(data.path());
        let check = evidence::verify_store(&host.store).expect("check");
        assert!(check.ok(), "{point}: {:?}", check.problems);
        let pruned = point == "after_commit";
        assert_eq!(
            tasks_stored(&host),
            if pruned { 0 } else { tasks.len() as i64 },
            "{point}"
        );
        // The pack on disk (written before the crash) verifies.
        let written = read(&pack_path);
        assert!(verify(&written).ok(), "{point}: {}", verify(&written));
        let pending = archive::archives(&host.store).expect("list");
        assert_eq!(pending.len(), usize::from(pruned), "{point}");
        drop(host);

        // A rerun completes: the pack verifies, the store is whole, and no
        // blob an archive listed is left behind.
        let rerun = hcp(data.path())
            .args(["evidence", "archive", "--json", "--before", FAR, "-o"])
            .arg(&pack_path)
            .output()
            .expect("run hcp");
        assert!(
            rerun.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&rerun.stderr)
        );
        let verified = hcp(data.path())
            .args(["evidence", "verify"])
            .arg(&pack_path)
            .output()
            .expect("run hcp");
        assert!(
            verified.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&verified.stdout)
        );
        let host = open(data.path());
        let check = evidence::verify_store(&host.store).expect("check");
        assert!(check.ok(), "{point}: {:?}", check.problems);
        assert_eq!(tasks_stored(&host), 0, "{point}");
        let list = archive::archives(&host.store).expect("list");
        assert_eq!(list.len(), 1, "{point}");
        assert_eq!(list[0].blobs_pending, 0, "{point}");
        assert_eq!(
            list[0].anchor.pack_sha256,
            hcp_receipts::Digest::of(&std::fs::read(&pack_path).expect("read")),
            "{point}: the anchor names the pack on disk"
        );
        // The hashes before the anchor went with the prune, their frontier
        // stayed, and the log goes on from it: the next pack follows.
        assert_eq!(units_before(&host, list[0].anchor.tree_size), 0, "{point}");
        let s = submit(
            &host,
            &example("document-analysis", "after-crash"),
            "harness-local-01",
        );
        assert_eq!(run(&host, &s).await["type"], "task_completed", "{point}");
        let next = out.path().join("a2.tar");
        archive::archive(&host.store, &key(data.path()), FAR, &next)
            .expect("archive")
            .archive
            .expect("archived");
        let (p1, p2) = (read(&pack_path), read(&next));
        assert!(verify(&p2).ok(), "{point}: {}", verify(&p2));
        assert_eq!(
            series(&[("a1", &p1), ("a2", &p2)]),
            Vec::<String>::new(),
            "{point}"
        );
        let check = evidence::verify_store(&host.store).expect("check");
        assert!(check.ok(), "{point}: {:?}", check.problems);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_of_a_series_fails_clearly_on_a_gap_a_reorder_and_a_tampered_pack() {
    let (data, host) = lab();
    let key = key(data.path());
    let out = tempfile::tempdir().expect("tempdir");
    let mut paths = Vec::new();
    for i in 0..3 {
        let s = submit(
            &host,
            &example("document-analysis", &format!("doc-s{i}")),
            "harness-local-01",
        );
        assert_eq!(run(&host, &s).await["type"], "task_completed");
        let p = out.path().join(format!("a{i}.tar"));
        archive::archive(&host.store, &key, FAR, &p)
            .expect("archive")
            .archive
            .expect("archived");
        paths.push(p);
    }
    drop(host);
    let verify_cli = |packs: &[&Path]| {
        let o = hcp(data.path())
            .arg("evidence")
            .arg("verify")
            .args(packs)
            .output()
            .expect("run hcp");
        (
            o.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    };
    // What was archived, as status: three archives, three tasks.
    let listed = hcp(data.path())
        .args(["evidence", "archives", "--json"])
        .output()
        .expect("run hcp");
    assert!(listed.status.success());
    let listed: Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert_eq!(listed["summary"]["archives"], 3, "{listed}");
    assert_eq!(listed["summary"]["tasks"], 3, "{listed}");
    assert_eq!(listed["archives"].as_array().map(Vec::len), Some(3));
    let (a, b, c) = (&paths[0], &paths[1], &paths[2]);
    let (code, text) = verify_cli(&[a, b, c]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("series: 3 packs, unbroken"), "{text}");
    let (code, text) = verify_cli(&[a, c]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("[series]") && text.contains("gap"), "{text}");
    let (code, text) = verify_cli(&[b, a, c]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("[series]"), "{text}");

    // A receipt of the middle pack altered: that pack fails, and so does
    // the series.
    let mut bytes = std::fs::read(b).expect("read");
    let needle = b"\"reason_code\":\"";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("a receipt line")
        + needle.len();
    bytes[at] = if bytes[at] == b'a' { b'b' } else { b'a' };
    let tampered = out.path().join("tampered.tar");
    std::fs::write(&tampered, &bytes).expect("write");
    let (code, text) = verify_cli(&[a, &tampered, c]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("FAILED") || text.contains("[pack]"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_policys_retention_archives_what_is_older_than_it_under_the_data_dir() {
    // The repository's policy with a retention of one hour.
    let policies = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), policies.path().join(entry.file_name())).expect("copy");
        }
    }
    let budgets = policies.path().join("budgets.json");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&budgets).expect("read")).expect("json");
    doc["retention"] = json!({"hot_seconds": 3600, "every_seconds": 60});
    std::fs::write(&budgets, doc.to_string()).expect("write");
    let data = tempfile::tempdir().expect("tempdir");
    let host = Host::open(
        HostPaths {
            data_dir: data.path().to_path_buf(),
            cache_dir: cache_dir(),
            policies_dir: policies.path().to_path_buf(),
        },
        HostConfig {
            gate_clock: Some(weekday_morning()),
            ..HostConfig::default()
        },
    )
    .expect("host");
    host.install_manifest(&Path::new(REPO_ROOT).join("plugins/document-analysis/manifest.json"))
        .expect("install");
    let doc = submit(
        &host,
        &example("document-analysis", "doc-r"),
        "harness-local-01",
    );
    assert_eq!(run(&host, &doc).await["type"], "task_completed");

    // Now: nothing is an hour old.
    let now = time::OffsetDateTime::now_utc();
    assert!(host.archive_due(now, 4).expect("due").is_empty());
    assert_eq!(tasks_stored(&host), 1);
    // Two hours on: the task goes, to a pack under the data directory.
    let later = now + time::Duration::hours(2);
    let runs = host.archive_due(later, 4).expect("due");
    assert_eq!(runs.len(), 1);
    let a = runs[0].archive.as_ref().expect("archived");
    assert_eq!(a.tasks, 1);
    let path = data
        .path()
        .join("archive/hcp-archive-00000000000000000000.tar");
    assert_eq!(Path::new(&a.pack), path);
    assert!(verify(&read(&path)).ok());
    assert_eq!(tasks_stored(&host), 0);
}

/// The bytes a settled R1 task leaves hot in `hcp.db` (pages in use, after
/// the write-ahead log is checkpointed), and in a pack: printed for
/// docs/benchmarks.md (`cargo test -p hcp --test evidence --
/// bytes_per_r1_task --nocapture`); archiving frees the hot pages.
#[tokio::test(flavor = "multi_thread")]
#[allow(
    clippy::print_stdout,
    reason = "the figures are the point: docs/benchmarks.md"
)]
async fn bytes_per_r1_task_hot_and_in_a_pack() {
    const TASKS: usize = 200;
    let (data, host) = lab();
    let used = |host: &Host| -> i64 {
        let db = host.store.db();
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .expect("checkpoint");
        let pages: i64 = db
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .expect("pages");
        let free: i64 = db
            .query_row("PRAGMA freelist_count", [], |r| r.get(0))
            .expect("free");
        let size: i64 = db
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("size");
        (pages - free) * size
    };
    // One task first: the policy snapshot, the manifest, the first pages.
    let warm = submit(
        &host,
        &example("document-analysis", "warm"),
        "harness-local-01",
    );
    assert_eq!(run(&host, &warm).await["type"], "task_completed");
    let before = used(&host);
    for i in 0..TASKS {
        let s = submit(
            &host,
            &example("document-analysis", &format!("r1-{i}")),
            "harness-local-01",
        );
        assert_eq!(run(&host, &s).await["type"], "task_completed");
    }
    let after = used(&host);
    let hot = (after - before) / TASKS as i64;
    let out = tempfile::tempdir().expect("tempdir");
    let path = out.path().join("a.tar");
    let a = archive::archive(&host.store, &key(data.path()), FAR, &path)
        .expect("archive")
        .archive
        .expect("archived");
    let pack = a.pack_bytes / (TASKS as u64 + 1);
    let pruned = used(&host);
    println!(
        "bytes per R1 task: hot {hot} (hcp.db pages in use), pack {pack}; \
         hot store after archiving {pruned} bytes in use (was {after})"
    );
    assert!(hot > 0 && pack > 0);
    assert!(pruned < after, "archiving frees hot pages");
}

/// Receipt units (rows of `receipt_blocks` and `receipts`) that start
/// before `seq`: their hashes are kept.
fn units_before(host: &Host, seq: u64) -> i64 {
    let seq = i64::try_from(seq).expect("seq");
    host.store
        .db()
        .query_row(
            "SELECT (SELECT COUNT(*) FROM receipt_blocks WHERE first_seq < ?1)
                  + (SELECT COUNT(*) FROM receipts WHERE seq < ?1)",
            [seq],
            |r| r.get(0),
        )
        .expect("count")
}

#[tokio::test(flavor = "multi_thread")]
async fn archived_hashes_are_pruned_to_a_frontier_and_the_log_goes_on_provably_across_the_anchor() {
    let (data, host) = lab();
    let key = key(data.path());
    let out = tempfile::tempdir().expect("tempdir");
    let doc = |id: &str| example("document-analysis", id);

    // 1: two tasks archived; every hash before the anchor goes, the
    // frontier stays.
    for id in ["f-1", "f-2"] {
        let s = submit(&host, &doc(id), "harness-local-01");
        assert_eq!(run(&host, &s).await["type"], "task_completed");
    }
    let a1_path = out.path().join("a1.tar");
    let a1 = archive::archive(&host.store, &key, FAR, &a1_path)
        .expect("archive")
        .archive
        .expect("archived");
    let anchor = a1.anchor.tree_size;
    assert_eq!(
        units_before(&host, anchor),
        0,
        "no hash before the anchor stays"
    );
    let pruned = hcp_store::receipt_hashes::pruned(&host.store.db())
        .expect("read")
        .expect("a frontier");
    assert_eq!(pruned.frontier.size, anchor);
    assert_eq!(pruned.frontier.root(), a1.anchor.root_hash);
    assert_eq!(pruned.head, a1.anchor.head);
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);

    // 2: the host opens again on a log whose every hash was pruned, and
    // goes on: new receipts, checkpoints and their proofs.
    drop(host);
    let host = open(data.path());
    let s = submit(&host, &doc("f-3"), "harness-local-01");
    let task = s.task_id.clone().expect("task id");
    assert_eq!(run(&host, &s).await["type"], "task_completed");
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    // A task's pack after the anchor: inclusion proofs from the frontier.
    let one = evidence::export(&host.store, &Selection::Task(task)).expect("export");
    assert!(verify(&one).ok(), "{}", verify(&one));
    // The hot log from the anchor: the consistency proof from it.
    let (_, hot) = export_all(&host);
    assert_eq!(hot.hosts[0].checkpoints[0].tree_size, anchor);
    assert!(verify(&hot).ok(), "{}", verify(&hot));
    let replayed = hcp_receipts::replay(&hot, &PepDecider::new(&hot));
    assert!(replayed.ok(), "{:?}", replayed.issues);

    // 3: the next archive starts at the anchor; the series verifies
    // unbroken, with the command line too.
    let a2_path = out.path().join("a2.tar");
    let a2 = archive::archive(&host.store, &key, FAR, &a2_path)
        .expect("archive")
        .archive
        .expect("archived");
    assert_eq!(a2.anchor.first_seq, anchor);
    assert_eq!(units_before(&host, a2.anchor.tree_size), 0);
    let (p1, p2) = (read(&a1_path), read(&a2_path));
    assert!(verify(&p2).ok(), "{}", verify(&p2));
    assert_eq!(series(&[("a1", &p1), ("a2", &p2)]), Vec::<String>::new());
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    drop(host);
    let verified = hcp(data.path())
        .args(["evidence", "verify"])
        .arg(&a1_path)
        .arg(&a2_path)
        .output()
        .expect("run hcp");
    let text = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{text}");
    assert!(text.contains("series: 2 packs, unbroken"), "{text}");

    // A frontier that does not give the anchor's root is reported.
    let host = open(data.path());
    host.store
        .db()
        .execute(
            "UPDATE evidence_archives SET frontier = ?1 WHERE number = 2",
            [serde_json::to_string(&pruned.frontier).expect("json")],
        )
        .expect("update");
    let check = evidence::verify_store(&host.store).expect("check");
    assert!(
        check.problems.iter().any(|p| p.contains("frontier")),
        "{:?}",
        check.problems
    );
}

/// The window of the message dedup: a `(caller_id, message_id)` is a
/// duplicate while its task is hot, and is forgotten with the task's row
/// when it is archived (nothing else refuses it: the envelope's
/// `timestamp` is not compared with the clock), so the same message
/// submitted after the archive runs again as a new task. docs/security.md
/// ("Archive and prune") says so: keep the retention longer than any
/// caller retries.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_is_a_duplicate_while_its_task_is_hot_and_new_once_it_is_archived() {
    let (data, host) = lab();
    let key = key(data.path());
    let out = tempfile::tempdir().expect("tempdir");
    let m = example("document-analysis", "dedup-1");
    let first = submit(&host, &m, "harness-local-01");
    assert_eq!(run(&host, &first).await["type"], "task_completed");
    let again = submit(&host, &m, "harness-local-01");
    assert!(again.duplicate, "hot: the same message is a duplicate");
    assert_eq!(again.task_id, first.task_id);
    assert!(!again.runnable);
    archive::archive(&host.store, &key, FAR, &out.path().join("a1.tar"))
        .expect("archive")
        .archive
        .expect("archived");
    let after = submit(&host, &m, "harness-local-01");
    assert!(!after.duplicate, "archived: the message is new again");
    assert_ne!(after.task_id, first.task_id);
    assert_eq!(run(&host, &after).await["type"], "task_completed");
}
