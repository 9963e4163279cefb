//! The mediator without a device: modes, decisions, waiting, sessions.

use super::*;
use crate::action::{Action, OperatorId};
use crate::log::LogEntry;

fn mediator() -> (tempfile::TempDir, Mediator) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = SessionLog::open(&dir.path().join("hcp.db")).expect("log");
    (dir, Mediator::start(log, MediatorConfig::new(None)))
}

fn alice() -> OperatorId {
    "alice".parse().expect("operator")
}

fn request(text: &str) -> ProposalRequest {
    ProposalRequest {
        action: Action::TypeText { text: text.into() },
        rationale: "The prompt is waiting for this input.".into(),
    }
}

fn entries(m: &Mediator) -> Vec<LogEntry> {
    lock(&m.log).entries().expect("entries")
}

fn kinds(m: &Mediator) -> Vec<EventType> {
    entries(m).iter().map(|e| e.event_type).collect()
}

#[test]
fn observe_records_and_resolves_at_once() {
    let (_dir, m) = mediator();
    assert_eq!(m.status().mode, Mode::Observe);
    let id = m.propose("s1", request("ls")).expect("recorded");
    assert_eq!(
        m.wait("s1", &id, Duration::ZERO).expect("outcome"),
        Outcome::NotExecuted {
            mode: Mode::Observe,
            reason: "OBSERVE mode: nothing proposed is executed".into()
        }
    );
    assert!(matches!(
        m.approve(&alice(), &id, false),
        Err(MediatorError::NotPending(_))
    ));
    assert_eq!(kinds(&m), [EventType::Proposal]);
}

#[test]
fn suggest_shows_and_decides_but_never_executes() {
    let (_dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let a = m.propose("s1", request("ls")).expect("a");
    let b = m.propose("s1", request("pwd")).expect("b");
    assert_eq!(
        m.wait("s1", &a, Duration::from_millis(10)).expect("wait"),
        Outcome::TimedOut
    );
    assert_eq!(
        m.approve(&alice(), &a, false).expect("approve"),
        Outcome::NotExecuted {
            mode: Mode::Suggest,
            reason: "SUGGEST mode: proposals are shown, not executed".into()
        }
    );
    assert_eq!(
        m.reject(&alice(), &b, "Wrong window has focus.")
            .expect("reject"),
        Outcome::Rejected {
            operator_id: "alice".into(),
            reason: "Wrong window has focus.".into()
        }
    );
    assert!(matches!(
        m.reject(&alice(), &b, "again"),
        Err(MediatorError::NotPending(_))
    ));
    assert_eq!(
        kinds(&m),
        [
            EventType::ModeChange,
            EventType::Proposal,
            EventType::Proposal,
            EventType::Decision,
            EventType::Decision
        ]
    );
    let decision = &entries(&m)[4];
    assert_eq!(decision.operator_id, "alice");
    assert_eq!(decision.details["decision"], "REJECTED");
    assert_eq!(
        decision.details["override_reason"],
        "Wrong window has focus."
    );
    m.verify_log().expect("chain");
}

#[test]
fn execute_without_a_device_is_refused_and_logged() {
    let (_dir, m) = mediator();
    let err = m.set_mode(&alice(), Mode::Execute).expect_err("no device");
    assert_eq!(
        err.to_string(),
        "no HID executor is configured: EXECUTE cannot be armed"
    );
    assert_eq!(m.status().mode, Mode::Observe);
    let e = &entries(&m)[0];
    assert_eq!(e.event_type, EventType::Error);
    assert_eq!(e.operator_id, "alice");
    assert!(matches!(
        m.rearm(&alice()),
        Err(MediatorError::NotInExecute(Mode::Observe))
    ));
}

#[test]
fn credentials_need_an_acknowledgement_and_are_not_logged() {
    let (_dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let id = m
        .propose("s1", request("password=hunter22"))
        .expect("recorded");
    assert_eq!(
        m.proposals()[0].proposal["credential_warning"],
        serde_json::json!(true)
    );
    let err = m
        .approve(&alice(), &id, false)
        .expect_err("not acknowledged");
    assert_eq!(
        err.to_string(),
        format!(
            "proposal {id} carries credential_warning: approving it needs the operator to acknowledge the credential"
        )
    );
    m.approve(&alice(), &id, true).expect("acknowledged");
    let logged = serde_json::to_string(&entries(&m)).expect("json");
    assert!(!logged.contains("hunter22"), "{logged}");
    assert!(logged.contains("[17 characters withheld: credential_warning]"));
}

#[test]
fn refused_proposals_are_logged_as_errors() {
    let (_dir, m) = mediator();
    let err = m
        .propose("s1", request(&"a".repeat(1025)))
        .expect_err("too long");
    assert_eq!(
        err.to_string(),
        "proposal refused: payload.text is 1025 characters long; at most 1024 may be typed in one action"
    );
    let e = &entries(&m)[0];
    assert_eq!(e.event_type, EventType::Error);
    assert_eq!(e.operator_id, "host");
    assert_eq!(
        e.details["error_message"],
        "proposal refused: payload.text is 1025 characters long; at most 1024 may be typed in one action"
    );
    assert!(m.proposals().is_empty());
}

#[test]
fn guests_see_only_their_own_proposals() {
    let (_dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let id = m.propose("s1", request("ls")).expect("recorded");
    assert!(matches!(
        m.wait("s2", &id, Duration::ZERO),
        Err(MediatorError::UnknownProposal(_))
    ));
}

#[test]
fn pending_proposals_are_bounded_per_session() {
    let (_dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    for _ in 0..16 {
        m.propose("s1", request("ls")).expect("within the bound");
    }
    let err = m.propose("s1", request("ls")).expect_err("over");
    assert_eq!(
        err.to_string(),
        "session s1 already has 16 proposals waiting for a decision"
    );
    m.propose("s2", request("ls")).expect("another session");
}

#[test]
fn closing_a_session_withdraws_its_pending_proposals() {
    let (_dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let id = m.propose("s1", request("ls")).expect("recorded");
    let other = m.propose("s2", request("ls")).expect("recorded");
    m.close_session("s1").expect("closed");
    assert!(matches!(
        m.approve(&alice(), &id, false),
        Err(MediatorError::UnknownProposal(_))
    ));
    assert_eq!(m.proposals().len(), 1);
    let last = entries(&m).pop().expect("entry");
    assert_eq!(last.event_type, EventType::Decision);
    assert_eq!(last.operator_id, "host");
    assert_eq!(
        last.details["override_reason"],
        "the session ended before a decision"
    );
    m.approve(&alice(), &other, false)
        .expect("others untouched");
}

#[test]
fn a_waiting_guest_wakes_on_the_decision() {
    let (_dir, m) = mediator();
    let m = std::sync::Arc::new(m);
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let id = m.propose("s1", request("ls")).expect("recorded");
    let waiter = {
        let (m, id) = (m.clone(), id.clone());
        std::thread::spawn(move || m.wait("s1", &id, Duration::from_secs(5)))
    };
    std::thread::sleep(Duration::from_millis(50));
    m.reject(&alice(), &id, "Not now.").expect("reject");
    assert_eq!(
        waiter.join().expect("joined").expect("outcome"),
        Outcome::Rejected {
            operator_id: "alice".into(),
            reason: "Not now.".into()
        }
    );
}

#[test]
fn rejections_need_a_reason() {
    let (_dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let id = m.propose("s1", request("ls")).expect("recorded");
    for reason in ["", "a\nb", &"r".repeat(501)] {
        assert!(matches!(
            m.reject(&alice(), &id, reason),
            Err(MediatorError::BadReason)
        ));
    }
}

/// Writes down what it is asked to witness; refuses while `refuse` is set;
/// decides like the host's policy: the operators in `forbidden` may decide
/// nothing and not arm EXECUTE, an unacknowledged credential is refused.
#[derive(Debug, Default)]
struct Notary {
    seen: Mutex<Vec<String>>,
    refuse: std::sync::atomic::AtomicBool,
    forbidden: Mutex<Vec<String>>,
}

impl witness::Witness for Notary {
    fn decided(&self, d: &witness::Decided<'_>) -> Result<(), WitnessError> {
        if self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(WitnessError::Failed("the receipt store is full".into()));
        }
        lock(&self.seen).push(format!(
            "{} {} {} by {} ({})",
            d.verdict.as_str(),
            d.proposal,
            d.session,
            d.operator,
            d.reason.unwrap_or("-")
        ));
        if lock(&self.forbidden).iter().any(|o| o == d.operator) {
            return Err(WitnessError::Forbidden(format!(
                "operator {} may not decide here",
                d.operator
            )));
        }
        if d.verdict == witness::Verdict::Approve
            && d.credential_warning
            && !d.credential_acknowledged
        {
            return Err(WitnessError::Invalid("not acknowledged".into()));
        }
        Ok(())
    }

    fn mode_change(&self, c: &witness::ModeChange<'_>) -> Result<(), WitnessError> {
        lock(&self.seen).push(format!("mode {} -> {} by {}", c.from, c.to, c.operator));
        if c.to == Mode::Execute && lock(&self.forbidden).iter().any(|o| o == c.operator) {
            return Err(WitnessError::Forbidden(format!(
                "operator {} may not arm EXECUTE",
                c.operator
            )));
        }
        Ok(())
    }

    fn finished(
        &self,
        f: &witness::Finished<'_>,
    ) -> std::result::Result<(), witness::WitnessError> {
        lock(&self.seen).push(format!(
            "{} {} {} {} {}",
            f.result.as_str(),
            f.proposal,
            f.action_type,
            f.mode.as_str(),
            f.readiness.as_str()
        ));
        Ok(())
    }
}

fn witnessed() -> (tempfile::TempDir, Mediator, Arc<Notary>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = SessionLog::open(&dir.path().join("hcp.db")).expect("log");
    let notary = Arc::new(Notary::default());
    let m = Mediator::start(log, MediatorConfig::new(None).with_witness(notary.clone()));
    (dir, m, notary)
}

#[test]
fn every_decision_is_witnessed_before_it_takes_effect() {
    let (_dir, m, notary) = witnessed();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    assert_eq!(
        lock(&notary.seen).remove(0),
        "mode OBSERVE -> SUGGEST by alice"
    );
    let chosen: ProposalId = "prop-chosen-by-the-host".parse().expect("id");
    let a = m
        .propose_as("s1", chosen.clone(), request("ls"))
        .expect("a");
    assert_eq!(a, chosen, "the id chosen beforehand");
    assert!(matches!(
        m.propose_as("s1", chosen.clone(), request("ls")),
        Err(MediatorError::DuplicateProposal(_))
    ));
    let b = m.propose("s1", request("pwd")).expect("b");
    let c = m.propose("s1", request("whoami")).expect("c");

    // A witness that cannot record: the decision does not happen.
    notary
        .refuse
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let entries_before = entries(&m).len();
    assert!(matches!(
        m.approve(&alice(), &a, false),
        Err(MediatorError::Witness(e)) if e == "the receipt store is full"
    ));
    assert!(matches!(
        m.reject(&alice(), &b, "Not now."),
        Err(MediatorError::Witness(_))
    ));
    assert_eq!(entries(&m).len(), entries_before, "nothing logged");
    assert_eq!(
        m.wait("s1", &a, Duration::ZERO).expect("wait"),
        Outcome::TimedOut,
        "still pending"
    );
    notary
        .refuse
        .store(false, std::sync::atomic::Ordering::SeqCst);

    m.approve(&alice(), &a, false).expect("approve");
    m.reject(&alice(), &b, "Not now.").expect("reject");
    m.close_session("s1").expect("close");
    assert_eq!(
        *lock(&notary.seen),
        [
            format!("approve {a} s1 by alice (-)"),
            format!("not_executed {a} TYPE_TEXT SUGGEST off"),
            format!("reject {b} s1 by alice (Not now.)"),
            format!("withdraw {c} s1 by host (the session ended before a decision)"),
        ]
    );
}

/// Issue 12.10: an approval of a credential-like text without the
/// acknowledgement is refused, and the witness (the host's receipt) hears
/// of it; nothing else happens.
#[test]
fn an_unacknowledged_credential_approval_is_witnessed_and_refused() {
    let (_dir, m, notary) = witnessed();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let id = m
        .propose("s1", request("password=Tr0ub4dor&3xyzzy"))
        .expect("proposed");
    let before = entries(&m).len();
    assert!(matches!(
        m.approve(&alice(), &id, false),
        Err(MediatorError::CredentialNotAcknowledged(p)) if p == id.as_str()
    ));
    assert_eq!(entries(&m).len(), before, "no DECISION logged");
    assert_eq!(
        lock(&notary.seen).last().map(String::as_str),
        Some(format!("approve {id} s1 by alice (-)").as_str()),
        "the refused approval was witnessed"
    );
    assert_eq!(
        m.wait("s1", &id, Duration::ZERO).expect("wait"),
        Outcome::TimedOut
    );
    m.approve(&alice(), &id, true).expect("acknowledged");
}

/// Issue 16.1: the witness's policy decides who may decide and who may arm
/// EXECUTE; a refusal takes no effect, and leaving EXECUTE is never refused.
#[test]
fn the_policy_refuses_operators_it_does_not_let_decide() {
    let (_dir, m, notary) = witnessed();
    lock(&notary.forbidden).push("mallory".into());
    let mallory: OperatorId = "mallory".parse().expect("operator");
    match m.set_mode(&mallory, Mode::Execute) {
        Err(MediatorError::Forbidden(why)) => {
            assert_eq!(why, "operator mallory may not arm EXECUTE");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.status().mode, Mode::Observe);
    let last = entries(&m).pop().expect("an entry");
    assert_eq!(last.event_type, EventType::Error);
    assert_eq!(
        last.details["error_message"],
        "arming refused: refused by the policy: operator mallory may not arm EXECUTE"
    );
    m.set_mode(&mallory, Mode::Suggest)
        .expect("SUGGEST is anyone's");
    let id = m.propose("s1", request("ls")).expect("proposed");
    for result in [
        m.approve(&mallory, &id, false),
        m.reject(&mallory, &id, "Not mine."),
    ] {
        assert!(
            matches!(&result, Err(MediatorError::Forbidden(w)) if w == "operator mallory may not decide here"),
            "{result:?}"
        );
    }
    assert_eq!(
        m.wait("s1", &id, Duration::ZERO).expect("wait"),
        Outcome::TimedOut,
        "still pending"
    );
    m.set_mode(&mallory, Mode::Observe)
        .expect("leaving is anyone's");
}

/// Issue 12.13: the log keeps no plain SHA-256 of a withheld credential
/// text (anyone with the log could confirm a guess); with a digest key, an
/// HMAC-SHA256 under it.
#[test]
fn a_withheld_credential_has_only_a_keyed_digest() {
    let secret = "password=Tr0ub4dor&3xyzzy";
    let payload = serde_json::json!({"text": secret});
    let plain = hex::encode(hcp_contracts::jcs::sha256(&payload).expect("hash"));
    let key = b"a host secret of thirty-two bytes".to_vec();
    for digest_key in [None, Some(key.clone())] {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = SessionLog::open(&dir.path().join("hcp.db")).expect("log");
        let mut config = MediatorConfig::new(None);
        config.digest_key = digest_key.clone();
        let m = Mediator::start(log, config);
        m.set_mode(&alice(), Mode::Suggest).expect("suggest");
        m.propose("s1", request(secret)).expect("proposed");
        m.propose("s1", request("ls -l")).expect("proposed");
        let all = entries(&m);
        let proposals: Vec<_> = all
            .iter()
            .filter(|e| e.event_type == EventType::Proposal)
            .collect();
        let text = serde_json::to_string(&all).expect("json");
        assert!(!text.contains(&plain), "the plain digest is not logged");
        assert!(!text.contains("Tr0ub4dor"), "nor the text");
        let withheld = &proposals[0].details;
        assert_eq!(withheld.get("payload_sha256"), None);
        let expected = digest_key.as_deref().map(|k| {
            details::hmac_sha256(
                k,
                &hcp_contracts::jcs::canonical_bytes(&payload).expect("bytes"),
            )
            .expect("mac")
        });
        assert_eq!(
            withheld.get("payload_hmac_sha256").and_then(|v| v.as_str()),
            expected.as_deref()
        );
        // Other texts keep their plain digest.
        assert!(proposals[1].details.get("payload_sha256").is_some());
        m.verify_log().expect("the chain verifies without the key");
    }
}

/// A proposal that reaches the mediator after its session ended (the
/// guest's call outlived its task's deadline on a blocking thread, and the
/// session was closed meanwhile) is refused: before, it was recorded
/// pending for a session that no longer existed, and an operator could
/// approve it.
#[test]
fn a_proposal_after_its_session_ended_is_refused() {
    let (_dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    m.close_session("s-ended").expect("closed");
    let late = m.propose("s-ended", request("late"));
    assert!(
        matches!(late, Err(MediatorError::SessionEnded(ref s)) if s == "s-ended"),
        "{late:?}"
    );
    assert!(m.proposals().is_empty());
    // Another session is not affected.
    m.propose("s-open", request("ls")).expect("proposed");
}

/// Closing a session whose withdrawals cannot be logged still withdraws
/// them: the error is returned, and nothing it proposed stays pending for
/// an operator to approve. Before, the first failed entry returned early
/// and left the session's proposals pending.
#[test]
fn a_session_closed_while_the_log_fails_leaves_nothing_to_approve() {
    let (dir, m) = mediator();
    m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let a = m.propose("s1", request("ls")).expect("a");
    let b = m.propose("s1", request("pwd")).expect("b");
    rusqlite::Connection::open(dir.path().join("hcp.db"))
        .expect("db")
        .execute_batch(
            "CREATE TRIGGER no_decisions BEFORE INSERT ON hid_session_log \
             WHEN NEW.entry LIKE '%DECISION%' \
             BEGIN SELECT RAISE(ABORT, 'the disk refuses'); END;",
        )
        .expect("trigger");
    assert!(m.close_session("s1").is_err());
    assert!(m.proposals().is_empty(), "{:?}", m.proposals());
    for id in [a, b] {
        assert!(m.approve(&alice(), &id, false).is_err());
    }
}
