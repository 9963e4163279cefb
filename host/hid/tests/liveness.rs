//! The executor's liveness and what is known of a failed write: the
//! mediator driving the simulated executor over a real pseudo-terminal.

mod common;

use common::*;
use hcp_hid::action::Mode;
use hcp_hid::log::{EventType, SessionLog};
use hcp_hid::mediator::{Execution, Outcome};
use hcp_hid::sim::{Fault, Flavour};
use hcp_hid::wire::KillSwitch;
use std::time::Duration;

/// The EXECUTION entries of the session log.
fn executions(r: &Rig) -> Vec<serde_json::Map<String, serde_json::Value>> {
    SessionLog::open(&r.db)
        .expect("log")
        .entries()
        .expect("entries")
        .into_iter()
        .filter(|e| e.event_type == EventType::Execution)
        .map(|e| e.details)
        .collect()
}

/// Issue 12.11: a write that never happened (the line was gone before any
/// byte was written) is recorded as not sent, and the task is told the
/// action was not executed, not that it may have happened.
#[test]
fn a_write_that_never_happened_is_recorded_as_not_sent() {
    let r = rig(Flavour::PublicFirmware);
    r.arm();
    r.sim.inject(Fault::Disconnect);
    std::thread::sleep(Duration::from_millis(200));
    let (_, outcome) = r.run(text("into the void"));
    match &outcome {
        Outcome::NotExecuted { mode, reason } => {
            assert_eq!(*mode, Mode::Execute);
            assert!(
                reason.starts_with(
                    "the action was not sent: HID executor disconnected during action_execute: "
                ) && reason.ends_with("(nothing was written)"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    let last = executions(&r).pop().expect("an EXECUTION entry");
    assert_eq!(last["result"], "failed");
    assert_eq!(last["sent"], false, "{last:?}");
    assert!(
        r.halted()
            .starts_with("HID executor disconnected during action_execute")
    );
}

/// Issue 12.12: the public firmware reports no status, so the periodic
/// check sends it what arming sent (`set_mode EXECUTE`, answered and
/// harmless). Silence or a hang-up halts execution before an approval is
/// spent on a dead device: the next approval sends nothing and its task
/// is told it was not executed.
#[test]
fn a_silent_or_gone_public_firmware_halts_before_an_approval() {
    let silent = "HID executor did not answer set_mode EXECUTE within 300 ms".to_owned();
    for (fault, expected) in [(None, silent), (Some(Fault::Disconnect), String::new())] {
        let r = rig(Flavour::PublicFirmware);
        r.arm();
        // Alive: the probe is answered and changes nothing.
        let status = r.m.check_device().expect("checked");
        assert!(
            matches!(status.execution, Execution::Armed { .. }),
            "{status:?}"
        );
        assert_eq!(r.sim.received().last().map(String::as_str), Some(EXECUTE));
        let id = r.propose(text("after the device is gone"));
        match &fault {
            Some(f) => {
                r.sim.inject(f.clone());
                std::thread::sleep(Duration::from_millis(200));
            }
            // The physical kill switch cuts the line: silence.
            None => r.sim.set_kill_switch(KillSwitch::Disabled),
        }
        let status = r.m.check_device().expect("checked");
        let reason = match status.execution {
            Execution::Halted { reason } => reason,
            other => panic!("not halted by the check: {other:?}"),
        };
        if fault.is_none() {
            assert_eq!(reason, expected);
        } else {
            assert!(
                reason.starts_with("HID executor disconnected during set_mode EXECUTE: "),
                "{reason}"
            );
        }
        assert_eq!(r.last_error(), format!("HID execution halted: {reason}"));
        let outcome = r.m.approve(&alice(), &id, false).expect("approved");
        assert_eq!(
            outcome,
            Outcome::NotExecuted {
                mode: Mode::Execute,
                reason: format!("execution is halted until an operator re-arms: {reason}")
            }
        );
        assert!(r.action_lines().is_empty(), "nothing was sent");
        assert!(executions(&r).is_empty(), "no execution was attempted");
    }
}

/// Issue 16.2: only proposals made in EXECUTE mode are executed. One made
/// in SUGGEST mode and approved after arming is recorded as not executed
/// (it still shows `mode: SUGGEST`); the guest proposes it again.
#[test]
fn a_proposal_made_in_suggest_mode_is_not_executed_after_arming() {
    let r = rig(Flavour::PublicFirmware);
    r.m.set_mode(&alice(), Mode::Suggest).expect("suggest");
    let early = r.propose(click());
    r.arm();
    let view =
        r.m.proposals()
            .into_iter()
            .find(|v| v.proposal["proposal_id"] == early.as_str())
            .expect("listed");
    assert_eq!(view.proposal["mode"], "SUGGEST");
    let outcome = r.m.approve(&alice(), &early, false).expect("approved");
    assert_eq!(
        outcome,
        Outcome::NotExecuted {
            mode: Mode::Execute,
            reason: "proposed in SUGGEST mode: only proposals made in EXECUTE mode are executed; propose it again".into()
        }
    );
    assert!(r.action_lines().is_empty());
    assert!(matches!(r.m.status().execution, Execution::Armed { .. }));
    let (again, outcome) = r.run(click());
    assert!(matches!(outcome, Outcome::Executed { .. }), "{outcome:?}");
    assert_eq!(r.performed_ids(), [again.to_string()]);
}

/// Arming whose MODE_CHANGE cannot be logged leaves the host not armed,
/// and the device is told OBSERVE again: before, the error returned with
/// the device still in EXECUTE while the host was not armed.
#[test]
fn arming_that_cannot_be_logged_leaves_the_device_in_observe() {
    let r = rig(Flavour::Reporting);
    rusqlite::Connection::open(&r.db)
        .expect("db")
        .execute_batch(
            "CREATE TRIGGER no_mode_change BEFORE INSERT ON hid_session_log \
             WHEN NEW.entry LIKE '%MODE_CHANGE%' \
             BEGIN SELECT RAISE(ABORT, 'the disk refuses'); END;",
        )
        .expect("trigger");
    let refused = r.m.set_mode(&alice(), Mode::Execute);
    assert!(refused.is_err(), "{refused:?}");
    let status = r.m.status();
    assert_eq!(status.mode, Mode::Observe, "{status:?}");
    assert!(
        !matches!(status.execution, Execution::Armed { .. }),
        "{status:?}"
    );
    assert_eq!(r.sim.mode(), Mode::Observe, "the device was left armed");
}

/// A kill switch reported DISABLED between the status the host asked for
/// and the action's line is found before the line is written: the action
/// is recorded as not sent and the task told it was not executed. Before,
/// every error but a failed encoding or an unwritten line counted as
/// "sent", so this one was recorded as an action that may have happened.
#[test]
fn a_disabled_switch_reported_before_the_write_is_recorded_as_not_sent() {
    let r = rig(Flavour::Reporting);
    r.arm();
    // Answers the execution's status request, then reports the switch off.
    r.sim.inject(Fault::ThenStatus(KillSwitch::Disabled));
    let (id, outcome) = r.run(click());
    let expected = "HID executor sim-hid-0001 reports its kill switch DISABLED";
    assert_eq!(
        outcome,
        Outcome::NotExecuted {
            mode: Mode::Execute,
            reason: format!("the action was not sent: {expected}")
        }
    );
    let last = executions(&r).pop().expect("an EXECUTION entry");
    assert_eq!(last["sent"], false, "{last:?}");
    assert!(r.action_lines().is_empty(), "the action was never sent");
    assert!(!r.sim.received().iter().any(|l| l.contains(id.as_str())));
}
