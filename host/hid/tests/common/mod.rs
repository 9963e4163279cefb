//! The rig the HID end-to-end tests share: the simulated executor on a
//! real pseudo-terminal, a session log on disk, and the mediator driving it.

#![allow(dead_code, unreachable_pub, reason = "each test binary uses a part")]

use hcp_hid::action::{Action, Mode, MouseButton, OperatorId, ProposalId};
use hcp_hid::device::DeviceConfig;
use hcp_hid::log::{EventType, SessionLog};
use hcp_hid::mediator::{Execution, Mediator, MediatorConfig, Outcome};
use hcp_hid::proposal::ProposalRequest;
use hcp_hid::sim::{Flavour, SimConfig, Simulator};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub const SESSION: &str = "sess-e2e";
pub const OBSERVE: &str = r#"{"type":"set_mode","mode":"OBSERVE"}"#;
pub const EXECUTE: &str = r#"{"type":"set_mode","mode":"EXECUTE"}"#;
pub const GET_STATUS: &str = r#"{"type":"get_status"}"#;

pub struct Rig {
    pub _dir: tempfile::TempDir,
    pub db: PathBuf,
    pub record: PathBuf,
    pub sim: Simulator,
    pub m: Arc<Mediator>,
    /// One rig at a time in a test binary, dropped last: the kernel hands
    /// a closed pseudo-terminal's number to the next one opened, so a rig
    /// that re-opens its device path after a disconnect would otherwise
    /// reach (and lock) another test's executor.
    pub _one_at_a_time: MutexGuard<'static, ()>,
}

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn rig_with(mut config: SimConfig) -> Rig {
    let one_at_a_time = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("hcp.db");
    let record = dir.path().join("typed.jsonl");
    config.record = Some(record.clone());
    let sim = Simulator::start(config).expect("simulator");
    let mut device = DeviceConfig::new(sim.path());
    device.answer_timeout = Duration::from_millis(300);
    let log = SessionLog::open(&db).expect("log");
    let m = Arc::new(Mediator::start(log, MediatorConfig::new(Some(device))));
    Rig {
        _dir: dir,
        db,
        record,
        sim,
        m,
        _one_at_a_time: one_at_a_time,
    }
}

pub fn rig(flavour: Flavour) -> Rig {
    rig_with(SimConfig::new(flavour))
}

pub fn alice() -> OperatorId {
    "alice".parse().expect("operator")
}

pub fn text(t: &str) -> ProposalRequest {
    ProposalRequest {
        action: Action::TypeText { text: t.into() },
        rationale: "The prompt is waiting for this input.".into(),
    }
}

pub fn click() -> ProposalRequest {
    ProposalRequest {
        action: Action::MouseClick {
            button: MouseButton::Left,
        },
        rationale: "The Save button is under the pointer.".into(),
    }
}

impl Rig {
    pub fn arm(&self) {
        let status = self.m.set_mode(&alice(), Mode::Execute).expect("armed");
        assert!(
            matches!(status.execution, Execution::Armed { .. }),
            "{status:?}"
        );
    }

    pub fn propose(&self, r: ProposalRequest) -> ProposalId {
        self.m.propose(SESSION, r).expect("proposed")
    }

    /// Proposes and approves; returns the outcome.
    pub fn run(&self, r: ProposalRequest) -> (ProposalId, Outcome) {
        let id = self.propose(r);
        let outcome = self.m.approve(&alice(), &id, false).expect("approved");
        assert_eq!(
            self.m.wait(SESSION, &id, Duration::ZERO).expect("wait"),
            outcome
        );
        (id, outcome)
    }

    pub fn performed_ids(&self) -> Vec<String> {
        self.sim
            .performed()
            .into_iter()
            .map(|p| p.proposal_id)
            .collect()
    }

    /// Lines received that carry an `execution_id`.
    pub fn action_lines(&self) -> Vec<String> {
        self.sim
            .received()
            .into_iter()
            .filter(|l| l.contains("execution_id"))
            .collect()
    }

    pub fn last_error(&self) -> String {
        SessionLog::open(&self.db)
            .expect("log")
            .entries()
            .expect("entries")
            .into_iter()
            .rfind(|e| e.event_type == EventType::Error)
            .and_then(|e| e.details["error_message"].as_str().map(str::to_owned))
            .expect("an ERROR entry")
    }

    pub fn halted(&self) -> String {
        match self.m.status().execution {
            Execution::Halted { reason } => reason,
            other => panic!("not halted: {other:?}"),
        }
    }
}
