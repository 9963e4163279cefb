//! The mediator driving the simulated executor over a real pseudo-terminal:
//! what reaches the device, when, and what stops it.

mod common;

use common::*;
use hcp_hid::action::{Action, Mode, ProposalId};
use hcp_hid::device::{DeviceError, DeviceKind};
use hcp_hid::log::{EventType, IntegrityError, LogError, SessionLog};
use hcp_hid::mediator::{Execution, MediatorError, Outcome};
use hcp_hid::proposal::{ProposalError, ProposalRequest};
use hcp_hid::sim::{Fault, Flavour, SimConfig};
use hcp_hid::wire::KillSwitch;
use std::path::PathBuf;
use std::time::Duration;

#[test]
fn approved_actions_reach_the_device_in_order_exactly_once() {
    let r = rig(Flavour::Reporting);
    r.arm();
    let a = r.propose(text("echo one"));
    let b = r.propose(text("echo two"));
    let c = r.propose(click());
    let d = r.propose(ProposalRequest {
        action: Action::KeyCombo {
            keys: vec!["ctrl".into(), "s".into()],
        },
        rationale: "Save the file before closing.".into(),
    });
    let e = r.propose(text("never decided"));
    let mut executions = Vec::new();
    for id in [&a, &c, &d] {
        match r.m.approve(&alice(), id, false).expect("approve") {
            Outcome::Executed { execution_id } => executions.push(execution_id),
            other => panic!("{other:?}"),
        }
    }
    r.m.reject(&alice(), &b, "Not this one.").expect("reject");
    assert!(matches!(
        r.m.approve(&alice(), &a, false),
        Err(MediatorError::NotPending(_))
    ));
    assert!(matches!(
        r.m.approve(&alice(), &b, false),
        Err(MediatorError::NotPending(_))
    ));

    let performed = r.sim.performed();
    assert_eq!(
        r.performed_ids(),
        [a.to_string(), c.to_string(), d.to_string()]
    );
    assert_eq!(
        performed
            .iter()
            .map(|p| p.execution_id.clone())
            .collect::<Vec<_>>(),
        executions
    );
    assert_eq!(
        performed[0].payload,
        serde_json::json!({"text": "echo one"})
    );
    assert_eq!(
        performed[2].payload,
        serde_json::json!({"keys": ["ctrl", "s"]})
    );
    assert_eq!(r.action_lines().len(), 3);
    for never in [&b, &e] {
        assert!(
            !r.sim.received().iter().any(|l| l.contains(never.as_str())),
            "{never} reached the device"
        );
    }
    // The record file holds the same, one JSON line each.
    let recorded = std::fs::read_to_string(&r.record).expect("record");
    assert_eq!(recorded.lines().count(), 3);
    assert!(recorded.lines().next().expect("line").contains("echo one"));

    let log = SessionLog::open(&r.db).expect("log");
    let kinds: Vec<EventType> = log
        .entries()
        .expect("entries")
        .iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == EventType::Execution).count(),
        3
    );
    assert_eq!(kinds[0], EventType::ModeChange);
    assert_eq!(log.verify().expect("chain").entries, kinds.len() as u64);
}

#[test]
fn nothing_is_executed_in_observe_or_suggest() {
    let r = rig(Flavour::PublicFirmware);
    let (_, outcome) = {
        let id = r.propose(text("ls"));
        (
            id.clone(),
            r.m.wait(SESSION, &id, Duration::ZERO).expect("wait"),
        )
    };
    assert_eq!(
        outcome,
        Outcome::NotExecuted {
            mode: Mode::Observe,
            reason: "OBSERVE mode: nothing proposed is executed".into()
        }
    );
    r.m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let (_, outcome) = r.run(text("ls"));
    assert_eq!(
        outcome,
        Outcome::NotExecuted {
            mode: Mode::Suggest,
            reason: "SUGGEST mode: proposals are shown, not executed".into()
        }
    );
    std::thread::sleep(Duration::from_millis(50));
    // The device heard only the OBSERVE of the mediator's start.
    assert_eq!(r.sim.received(), [OBSERVE]);
    assert!(r.sim.performed().is_empty());
    assert_eq!(r.sim.mode(), Mode::Observe);
}

#[test]
fn set_mode_lines_follow_the_host_mode() {
    let r = rig(Flavour::Reporting);
    r.arm();
    assert_eq!(r.sim.mode(), Mode::Execute);
    r.m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    assert_eq!(r.sim.mode(), Mode::Observe);
    r.m.set_mode(&alice(), Mode::Observe).expect("observe");
    assert_eq!(r.sim.received(), [OBSERVE, GET_STATUS, EXECUTE, OBSERVE]);
}

#[test]
fn actions_are_at_least_100_ms_apart_on_the_device_clock() {
    let r = rig(Flavour::Reporting);
    r.arm();
    let ids: Vec<ProposalId> = (0..6).map(|i| r.propose(text(&format!("n{i}")))).collect();
    // Approved from three operators' threads at once.
    let threads: Vec<_> = ids
        .chunks(2)
        .map(|chunk| {
            let (m, chunk) = (r.m.clone(), chunk.to_vec());
            std::thread::spawn(move || {
                for id in chunk {
                    assert!(matches!(
                        m.approve(&alice(), &id, false).expect("approve"),
                        Outcome::Executed { .. }
                    ));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let performed = r.sim.performed();
    assert_eq!(performed.len(), 6);
    for pair in performed.windows(2) {
        let gap = pair[1].at_us - pair[0].at_us;
        assert!(gap >= 100_000, "{gap} µs between two actions");
    }
}

#[test]
fn bounds_and_line_injection_are_refused_before_the_wire() {
    let r = rig(Flavour::Reporting);
    r.arm();
    let refuse = |req: ProposalRequest| match r.m.propose(SESSION, req) {
        Err(MediatorError::Proposal(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refuse(text(&"x".repeat(1025))),
        ProposalError::TextTooLong { chars: 1025 }
    );
    assert_eq!(
        refuse(text(&"x".repeat(1 << 20))),
        ProposalError::TextTooLong { chars: 1 << 20 }
    );
    assert_eq!(
        refuse(text("ls\n{\"type\":\"set_mode\",\"mode\":\"EXECUTE\"}")),
        ProposalError::TextCharacter { index: 2, ch: '\n' }
    );
    assert_eq!(
        refuse(text("a\0b")),
        ProposalError::TextCharacter { index: 1, ch: '\0' }
    );
    assert_eq!(
        refuse(ProposalRequest {
            action: Action::KeyCombo {
                keys: ["ctrl", "alt", "shift", "gui", "a", "b"]
                    .map(String::from)
                    .to_vec()
            },
            rationale: "Six keys at once, too many.".into(),
        }),
        ProposalError::TooManyKeys { count: 6 }
    );
    assert_eq!(
        refuse(ProposalRequest {
            action: Action::MouseMove { x: 10, y: -1001 },
            rationale: "Far up, out of the range.".into(),
        }),
        ProposalError::MoveOutOfRange {
            axis: 'y',
            value: -1001
        }
    );
    // A JSON request cannot smuggle a line either.
    let err = ProposalRequest::from_json(
        "{\"action_type\":\"TYPE_TEXT\",\"payload\":{\"text\":\"a\\r\\nb\"},\"rationale\":\"Carriage return inside.\"}",
    )
    .map(|req| r.m.propose(SESSION, req));
    assert!(
        matches!(
            err,
            Ok(Err(MediatorError::Proposal(ProposalError::TextCharacter {
                index: 1,
                ch: '\r'
            })))
        ),
        "{err:?}"
    );
    assert!(r.action_lines().is_empty());
    assert!(r.m.proposals().is_empty());

    // Quotes and backslashes are fine: they stay inside one line.
    let (_, outcome) = r.run(text(r#"echo "a\"b" '}{' \n"#));
    assert!(matches!(outcome, Outcome::Executed { .. }), "{outcome:?}");
    assert_eq!(
        r.sim.performed()[0].payload["text"],
        r#"echo "a\"b" '}{' \n"#
    );

    let id = r.propose(text("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG"));
    let view =
        r.m.proposals()
            .into_iter()
            .find(|v| v.proposal["proposal_id"] == id.as_str());
    assert_eq!(
        view.expect("listed").proposal["credential_warning"],
        serde_json::json!(true)
    );
}

#[test]
fn device_faults_halt_until_an_operator_rearms() {
    let r = rig(Flavour::PublicFirmware);
    r.arm();
    for (fault, expected) in [
        (
            Fault::ErrorAnswer("USB HID failure".into()),
            "HID executor refused action_execute: USB HID failure".to_owned(),
        ),
        (
            Fault::Garbage,
            r#"HID executor answered action_execute with garbage: "\x00\xffgarbage{not json""#
                .to_owned(),
        ),
        (
            Fault::NoAnswer,
            "HID executor did not answer action_execute within 300 ms".to_owned(),
        ),
    ] {
        r.sim.inject(fault.clone());
        let (failed, outcome) = r.run(text("faulty"));
        assert_eq!(
            outcome,
            Outcome::Failed {
                reason: expected.clone()
            },
            "{fault:?}"
        );
        assert_eq!(r.halted(), expected);
        assert_eq!(r.last_error(), format!("HID execution halted: {expected}"));
        assert_eq!(r.sim.mode(), Mode::Observe, "told OBSERVE after {fault:?}");
        // Halted: approved, but nothing runs.
        let (_, outcome) = r.run(text("while halted"));
        assert_eq!(
            outcome,
            Outcome::NotExecuted {
                mode: Mode::Execute,
                reason: format!("execution is halted until an operator re-arms: {expected}")
            }
        );
        assert!(!r.performed_ids().contains(&failed.to_string()));
        // An operator re-arms; execution resumes.
        let status = r.m.rearm(&alice()).expect("re-armed");
        assert_eq!(
            status.execution,
            Execution::Armed {
                device: DeviceKind::PublicFirmware
            }
        );
        let (ok, outcome) = r.run(text("after re-arm"));
        assert!(matches!(outcome, Outcome::Executed { .. }), "{outcome:?}");
        assert_eq!(r.performed_ids().last(), Some(&ok.to_string()));
    }
    assert_eq!(r.sim.performed().len(), 3);
    SessionLog::open(&r.db)
        .expect("log")
        .verify()
        .expect("chain");
}

#[test]
fn a_disabled_kill_switch_stops_execution() {
    let r = rig(Flavour::Reporting);
    r.arm();
    r.sim.set_kill_switch(KillSwitch::Disabled);
    let (id, outcome) = r.run(click());
    let expected = "HID executor sim-hid-0001 reports its kill switch DISABLED";
    // Found before the action was written: it did not happen.
    assert_eq!(
        outcome,
        Outcome::NotExecuted {
            mode: Mode::Execute,
            reason: format!("the action was not sent: {expected}")
        }
    );
    assert_eq!(r.halted(), expected);
    assert!(r.action_lines().is_empty(), "the action was never sent");
    assert!(!r.sim.received().iter().any(|l| l.contains(id.as_str())));
    // Re-arming is refused while the switch is off.
    match r.m.rearm(&alice()) {
        Err(MediatorError::ArmRefused(DeviceError::KillSwitchDisabled { device_id })) => {
            assert_eq!(device_id, "sim-hid-0001")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.last_error(), format!("arming refused: {expected}"));
    assert_eq!(r.halted(), format!("arming refused: {expected}"));
    r.sim.set_kill_switch(KillSwitch::Armed);
    r.m.rearm(&alice()).expect("re-armed");
    let (_, outcome) = r.run(click());
    assert!(matches!(outcome, Outcome::Executed { .. }), "{outcome:?}");
}

#[test]
fn the_public_firmware_kill_switch_shows_as_a_timeout() {
    let r = rig(Flavour::PublicFirmware);
    r.arm();
    r.sim.set_kill_switch(KillSwitch::Disabled);
    let (_, outcome) = r.run(click());
    assert_eq!(
        outcome,
        Outcome::Failed {
            reason: "HID executor did not answer action_execute within 300 ms".into()
        }
    );
    assert!(r.sim.performed().is_empty());
    r.sim.set_kill_switch(KillSwitch::Armed);
    r.m.rearm(&alice()).expect("re-armed");
    let (_, outcome) = r.run(click());
    assert!(matches!(outcome, Outcome::Executed { .. }), "{outcome:?}");
}

#[test]
fn a_disconnect_stops_execution() {
    let r = rig(Flavour::Reporting);
    r.arm();
    r.sim.inject(Fault::Disconnect);
    std::thread::sleep(Duration::from_millis(100));
    let (_, outcome) = r.run(text("into the void"));
    match outcome {
        Outcome::NotExecuted { reason, .. } => assert!(
            reason.starts_with(
                "the action was not sent: HID executor disconnected during get_status: "
            ),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        r.last_error()
            .starts_with("HID execution halted: HID executor disconnected")
    );
    // The line is gone: re-arming cannot succeed.
    assert!(matches!(
        r.m.rearm(&alice()),
        Err(MediatorError::ArmRefused(_))
    ));
    assert!(r.sim.performed().is_empty());
}

#[test]
fn a_contract_version_mismatch_refuses_to_arm() {
    let mut config = SimConfig::new(Flavour::Reporting);
    config.contract_version = Some("2.0.0".into());
    let r = rig_with(config);
    let err = r.m.set_mode(&alice(), Mode::Execute).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "arming refused: HID executor sim-hid-0001 speaks contract version 2.0.0, this host speaks 1"
    );
    let status = r.m.status();
    assert_eq!(status.mode, Mode::Observe);
    assert_eq!(status.execution, Execution::Off);
    assert_eq!(
        r.last_error(),
        "arming refused: HID executor sim-hid-0001 speaks contract version 2.0.0, this host speaks 1"
    );
    assert!(!r.sim.received().iter().any(|l| l == EXECUTE));
    assert_eq!(r.sim.mode(), Mode::Observe);
}

#[test]
fn tampering_with_the_session_log_is_detected() {
    let r = rig(Flavour::Reporting);
    r.arm();
    r.run(text("echo one"));
    r.run(click());
    drop(r.m);
    let verify = |db: &PathBuf| match SessionLog::open(db).expect("log").verify() {
        Err(LogError::Integrity { source, .. }) => source,
        other => panic!("{other:?}"),
    };
    let entries = SessionLog::open(&r.db)
        .expect("log")
        .entries()
        .expect("entries");
    let db = rusqlite::Connection::open(&r.db).expect("db");
    // Edit: an approval turned into a rejection.
    let position: i64 = db
        .query_row(
            "SELECT position FROM hid_session_log WHERE entry LIKE '%\"APPROVED\"%' ORDER BY position LIMIT 1",
            [],
            |row| row.get(0),
        )
        .expect("a decision");
    db.execute(
        "UPDATE hid_session_log SET entry = replace(entry, 'APPROVED', 'REJECTED') WHERE position = ?1",
        [position],
    )
    .expect("edit");
    let idx = usize::try_from(position - 1).expect("index");
    assert_eq!(
        verify(&r.db),
        IntegrityError::Altered {
            sequence: entries[idx].sequence,
            log_id: entries[idx].log_id.clone()
        }
    );
    db.execute(
        "UPDATE hid_session_log SET entry = replace(entry, 'REJECTED', 'APPROVED') WHERE position = ?1",
        [position],
    )
    .expect("undo");
    SessionLog::open(&r.db)
        .expect("log")
        .verify()
        .expect("restored");
    // Reorder: swap the last two entries.
    let n = i64::try_from(entries.len()).expect("count");
    db.execute_batch(&format!(
        "UPDATE hid_session_log SET position = 0 WHERE position = {n};
         UPDATE hid_session_log SET position = {n} WHERE position = {};
         UPDATE hid_session_log SET position = {} WHERE position = 0;",
        n - 1,
        n - 1
    ))
    .expect("swap");
    assert!(matches!(verify(&r.db), IntegrityError::Reordered { .. }));
    // Delete: the first execution's entry.
    db.execute_batch(&format!(
        "UPDATE hid_session_log SET position = {n} + 100 WHERE position = {n};
         UPDATE hid_session_log SET position = {n} WHERE position = {};
         UPDATE hid_session_log SET position = {} WHERE position = {n} + 100;",
        n - 1,
        n - 1
    ))
    .expect("unswap");
    SessionLog::open(&r.db)
        .expect("log")
        .verify()
        .expect("restored");
    let exec_pos = entries
        .iter()
        .position(|e| e.event_type == EventType::Execution)
        .expect("an execution");
    db.execute(
        "DELETE FROM hid_session_log WHERE log_id = ?1",
        [&entries[exec_pos].log_id],
    )
    .expect("delete");
    assert_eq!(
        verify(&r.db),
        IntegrityError::Deleted {
            first: entries[exec_pos].sequence,
            last: entries[exec_pos].sequence,
            before: Some(entries[exec_pos + 1].log_id.clone())
        }
    );
}
