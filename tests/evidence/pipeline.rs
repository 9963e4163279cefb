//! The receipt writer's large batches: thousands of receipts in one
//! transaction, in several blocks of receipts. A large batch that stores verifies
//! like any other (signed denies among its allows); one whose writes fail
//! stores nothing of it, fails closed, and the log goes on after it with no
//! gap and no fork.
//!
//! A batch is made large on purpose: another connection holds the
//! database's write lock while the calls queue up behind the writer's
//! first batch, and lets go once all are queued.

use super::verify;
use hcp::evidence::{self, Recorder, Selection};
use hcp::hostkey::HostIdentity;
use hcp::store::Store;
use hcp_contracts::{DataClass, RiskLevel};
use hcp_policy::PolicySet;
use hcp_policy::pep::{BudgetCaps, Call, FsAccess, Op, SessionFacts, Surface};
use hcp_receipts::{HostKey, SigningPolicy, Verdict};
use hcp_sandbox::pep::{Governor as _, PolicyGovernor, UNLIMITED, now_ms};
use hcp_tests::{ManifestBuilder, REPO_ROOT};
use rusqlite::Connection;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Calls queued behind the writer's first batch: more than a block of
/// receipts holds (1024), so that the batch is stored in several.
const CALLS: usize = 3000;

/// The host's identity: the same key each time it is asked for.
fn identity() -> HostIdentity {
    let key = HostKey::from_seed(&[7; 32]);
    let host_id = format!("host-{}", key.key_id());
    HostIdentity { key, host_id }
}

struct Lab {
    dir: tempfile::TempDir,
    store: Arc<Store>,
    recorder: Recorder,
    policy: PolicySet,
    manifest: hcp_contracts::Manifest,
}

impl Lab {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(Store::open(&dir.path().join("data")).expect("store"));
        let recorder =
            Recorder::open(store.clone(), identity(), SigningPolicy::default()).expect("recorder");
        let policy = PolicySet::load(&Path::new(REPO_ROOT).join("policies")).expect("policy");
        let manifest = ManifestBuilder::new("probe", hcp_tests::PROBE).load(dir.path());
        Self {
            dir,
            store,
            recorder,
            policy,
            manifest,
        }
    }

    fn governor(&self, session: &str) -> PolicyGovernor {
        let facts = SessionFacts {
            budgets: BudgetCaps {
                artifacts: UNLIMITED,
                bytes: UNLIMITED,
                host_calls: UNLIMITED,
            },
            caller: "harness-local-01".into(),
            capability: self.manifest.id(),
            data_classification: DataClass::T1,
            envelope: self.manifest.doc.safety_envelope.clone(),
            expires_at_ms: now_ms() + 3_600_000,
            limits: (&self.manifest.limits).into(),
            risk_level: RiskLevel::R1,
            session_id: session.into(),
            surface: Surface::of(&self.manifest.grants),
            task_id: format!("task-{session}"),
        };
        hcp::engine::open_session(&self.recorder, &self.policy, facts, b"{}", Vec::new())
            .expect("session")
    }

    /// Runs `body` while another thread keeps writing receipts (a call,
    /// then a flush, over and over) until `body` returns.
    fn while_writing(&self, body: impl FnOnce()) {
        let governor = self.governor("busy");
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let fields = Vec::new();
                let call = Call::log("debug", "x", &fields);
                while !stop.load(Ordering::Relaxed) {
                    let _ = governor.check(&call);
                    self.recorder.flush().expect("flush");
                }
            });
            body();
            stop.store(true, Ordering::Relaxed);
        });
    }

    /// A second connection to the database, holding its write lock.
    fn lock(&self) -> Connection {
        let db = Connection::open(self.dir.path().join("data").join("hcp.db")).expect("db");
        db.busy_timeout(Duration::from_secs(10)).expect("timeout");
        db.execute_batch("BEGIN IMMEDIATE").expect("lock");
        db
    }

    /// Hands `CALLS` calls (every tenth denied) to the writer in one
    /// batch: `lock` is committed once they are all queued.
    fn queue(&self, governor: &PolicyGovernor, lock: Connection) -> usize {
        let fields = Vec::new();
        let allow = Call::log("debug", "x", &fields);
        let deny = Call::fs(Op::FsOpen, "/etc/passwd".into(), FsAccess::Read, None);
        // The writer takes the first and waits for the lock with it ...
        let _ = governor.check(&allow);
        std::thread::sleep(Duration::from_millis(200));
        // ... while the rest queue up behind it.
        let mut denied = 0;
        for i in 1..CALLS {
            if i % 10 == 0 {
                let _ = governor.check(&deny);
                denied += 1;
            } else {
                let _ = governor.check(&allow);
            }
        }
        lock.execute_batch("COMMIT").expect("unlock");
        denied
    }
}

#[test]
fn a_large_batch_stores_verifies_and_its_denies_are_signed() {
    let lab = Lab::new();
    let governor = lab.governor("large");
    let before = evidence::verify_store(&lab.store).expect("check").receipts;
    let denied = lab.queue(&governor, lab.lock());
    lab.recorder.close_session("large");
    lab.recorder.flush().expect("flush");
    let check = evidence::verify_store(&lab.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    assert_eq!(check.receipts, before + CALLS as u64, "{check:?}");
    assert_eq!(check.covered, check.receipts, "{check:?}");
    let pack = evidence::export(&lab.store, &Selection::Session("large".into())).expect("export");
    let report = verify(&pack);
    assert!(report.ok(), "{report}");
    let calls: Vec<_> = pack.hosts[0]
        .receipts
        .iter()
        .filter(|r| r.call != "session.open")
        .collect();
    assert_eq!(calls.len(), CALLS);
    let denies: Vec<_> = calls
        .iter()
        .filter(|r| r.verdict == Verdict::Deny)
        .collect();
    assert_eq!(denies.len(), denied);
    assert!(denies.iter().all(|r| r.is_signed()));
    // One chain through the session, in the order of the calls.
    for pair in calls.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1);
        assert_eq!(pair[1].parents, vec![pair[0].hash().expect("hash")]);
    }
}

#[test]
fn a_large_batch_that_cannot_be_written_stores_nothing_and_fails_closed() {
    let lab = Lab::new();
    let governor = lab.governor("lost");
    let before = evidence::verify_store(&lab.store).expect("check");
    assert!(before.ok(), "{:?}", before.problems);
    // Every block of receipts refused while the trigger exists, from the
    // middle of the batch on (a block holding a receipt past seq 1000).
    let lock = lab.lock();
    lock.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON receipt_blocks WHEN NEW.first_seq + NEW.count > 1001
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .expect("trigger");
    lab.queue(&governor, lock);
    let err = lab.recorder.flush().expect_err("stored");
    assert!(
        format!("{err:#}").contains("refused by the test"),
        "{err:#}"
    );
    assert!(lab.recorder.session_lost("lost"));
    let after = evidence::verify_store(&lab.store).expect("check");
    assert!(after.ok(), "{:?}", after.problems);
    // At most the first call, when it was a batch of its own: nothing of
    // the large one.
    assert!(
        after.receipts <= before.receipts + 1,
        "{} receipts stored after {}",
        after.receipts,
        before.receipts
    );
    // Meanwhile every decision fails closed (its receipt, a DENY, is the
    // next batch: below the trigger's seq, it stores and ends the failure).
    let fields = Vec::new();
    assert!(governor.check(&Call::log("debug", "x", &fields)).is_err());
    // Space for receipts again: the next batch stores, and the log goes
    // on from what was stored.
    Connection::open(lab.dir.path().join("data").join("hcp.db"))
        .expect("db")
        .execute_batch("DROP TRIGGER refuse")
        .expect("drop");
    lab.recorder.close_session("lost");
    let next = lab.governor("next");
    let denied = lab.queue(&next, lab.lock());
    assert!(denied > 0);
    lab.recorder.close_session("next");
    lab.recorder.flush().expect("flush");
    let check = evidence::verify_store(&lab.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
    assert_eq!(check.covered, check.receipts, "{check:?}");
    let report = verify(&evidence::export(&lab.store, &Selection::All).expect("export"));
    assert!(report.ok(), "{report}");
}

/// `hcp store check` and `GET /v1/receipts/verify` on a host that is
/// writing receipts: what they check is one moment of the store, so a
/// batch committed while they read is never reported as a problem.
#[test]
fn a_store_checked_while_receipts_are_written_shows_no_false_problem() {
    let lab = Lab::new();
    let mut problems = Vec::new();
    let mut checks = 0;
    lab.while_writing(|| {
        let started = Instant::now();
        while problems.is_empty() && checks < 150 && started.elapsed() < Duration::from_secs(8) {
            let check = evidence::verify_store(&lab.store).expect("check");
            problems = check.problems;
            checks += 1;
        }
    });
    assert!(problems.is_empty(), "check {checks}: {problems:?}");
    let check = evidence::verify_store(&lab.store).expect("check");
    assert!(check.receipts > 100, "too few receipts written: {check:?}");
}

/// A second host on the data directory (`hcp approvals approve` beside
/// `hcp serve`) opens the receipt log while the first writes to it: what
/// it reads of the log (its state, its last receipt) is one moment of it,
/// so it never finds them apart.
#[test]
fn a_host_opened_while_another_writes_receipts_finds_its_log_whole() {
    let lab = Lab::new();
    let mut opened = 0;
    let mut refused = None;
    lab.while_writing(|| {
        let started = Instant::now();
        while refused.is_none() && opened < 3000 && started.elapsed() < Duration::from_secs(10) {
            match Recorder::open(lab.store.clone(), identity(), SigningPolicy::default()) {
                Ok(second) => drop(second),
                Err(e) => refused = Some(format!("{e:#}")),
            }
            opened += 1;
        }
    });
    assert_eq!(refused, None, "open {opened}");
    let check = evidence::verify_store(&lab.store).expect("check");
    assert!(check.ok(), "{:?}", check.problems);
}
