//! A policy reload in the engine: the set swaps whole or not at all, each
//! attempt is a `policy.reload` receipt, every later decision names the new
//! hash, and an `--all` pack carries every snapshot its receipts name and
//! replays each receipt under its own.

use super::{decide, example, export_all, run, submit, verify, weekday_morning};
use hcp::engine::{Host, HostConfig, HostPaths, ReloadError};
use hcp_policy::pep::PepDecider;
use hcp_receipts::{Verdict, reason};
use hcp_tests::{REPO_ROOT, cache_dir, wire};
use std::path::Path;

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_is_recorded_and_every_receipt_replays_under_its_own_policy() {
    let data = tempfile::tempdir().expect("tempdir");
    let policies = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), policies.path().join(entry.file_name())).expect("copy");
    }
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
    for plugin in ["document-analysis", "cvd-material-synthesis"] {
        host.install_manifest(
            &Path::new(REPO_ROOT).join(format!("plugins/{plugin}/manifest.json")),
        )
        .expect("install");
    }
    let first = host.policy().policy_hash().to_owned();
    let doc = submit(
        &host,
        &example("document-analysis", "doc-1"),
        "harness-local-01",
    );
    assert_eq!(run(&host, &doc).await["type"], "task_completed");
    // Admitted under the first set, approved under the second.
    let cvd = submit(
        &host,
        &example("cvd-material-synthesis", "cvd-1"),
        "harness-alpha-001",
    );
    assert_eq!(
        wire(&cvd.answer)["status"],
        "pending_approval",
        "{}",
        cvd.answer
    );

    // An edit alone changes nothing; a reload swaps the set.
    let callers = policies.path().join("callers.json");
    let text = std::fs::read_to_string(&callers).expect("callers");
    let edited = text.replacen(
        "\"description\": \"The seed's",
        "\"description\": \"Edited: the seed's",
        1,
    );
    assert_ne!(edited, text);
    std::fs::write(&callers, edited).expect("edit");
    assert_eq!(host.policy().policy_hash(), first);
    let reloaded = host.reload_policy("operator-lab-01").expect("reload");
    assert_eq!(reloaded.old_hash, first);
    assert_ne!(reloaded.new_hash, first);
    let second = reloaded.new_hash;
    assert_eq!(host.policy().policy_hash(), second);

    // A bad edit is refused whole: every problem, the set kept.
    std::fs::write(policies.path().join("dispatch.json"), "[]").expect("break");
    match host.reload_policy("signal:SIGHUP") {
        Err(ReloadError::Invalid { kept, error }) => {
            assert_eq!(kept, second);
            assert!(
                error.problems.iter().all(|p| p.file == "dispatch.json"),
                "{error}"
            );
            assert!(!error.problems.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(host.policy().policy_hash(), second);

    let accepted = decide(&host, &cvd, true);
    assert_eq!(run(&host, &accepted).await["type"], "task_completed");
    let doc2 = submit(
        &host,
        &example("document-analysis", "doc-2"),
        "harness-local-01",
    );
    assert_eq!(run(&host, &doc2).await["type"], "task_completed");

    let (_, pack) = export_all(&host);
    let report = verify(&pack);
    assert!(report.ok(), "{report}");
    let receipts = &pack.hosts[0].receipts;
    let reloads: Vec<(Verdict, &str, String)> = receipts
        .iter()
        .filter(|r| r.call == "policy.reload")
        .map(|r| (r.verdict, r.reason_code.as_str(), r.policy_hash.to_string()))
        .collect();
    assert_eq!(
        reloads,
        [
            (Verdict::Allow, reason::ALLOW, second.clone()),
            (Verdict::Deny, reason::DENY_ARGS_INVALID, second.clone()),
        ]
    );
    let doc_task = doc.task_id.as_deref().expect("task");
    let at = receipts
        .iter()
        .position(|r| r.call == "policy.reload")
        .expect("reload receipt");
    for (i, r) in receipts.iter().enumerate() {
        let expected = if i < at { &first } else { &second };
        assert_eq!(
            &r.policy_hash.to_string(),
            expected,
            "{} {}",
            r.receipt_id,
            r.call
        );
        if r.task_id.as_deref() == Some(doc_task) {
            assert!(i < at);
        }
    }
    assert_eq!(pack.policy_snapshots().len(), 2);
    let replayed = hcp_receipts::replay(&pack, &PepDecider::new(&pack));
    assert!(replayed.ok(), "{:?}", replayed.issues);
    assert_eq!(
        (replayed.replayed, replayed.matched),
        (receipts.len(), receipts.len())
    );
}
