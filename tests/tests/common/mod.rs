//! Sandbox glue shared by the test programs that drive the probe guest
//! directly (no host around it): the sandbox they share, the request of a
//! probe task, and the governor a task with budgets gets.

#![allow(
    dead_code,
    reason = "each test program includes this module and uses only a part of it"
)]

use hcp_contracts::manifest::SafetyEnvelope;
use hcp_contracts::{DataClass, RiskLevel};
use hcp_sandbox::pep::{self, BudgetCaps, Governor, PolicyGovernor, VerdictSink};
use hcp_sandbox::{PreparedCapability, Sandbox, SandboxConfig, TaskRequest, TaskRun};
use hcp_tests::cache_dir;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// A sandbox with the shared compiled-code cache and `pool_instances`.
pub(crate) fn sandbox(pool_instances: u32) -> Sandbox {
    Sandbox::new(SandboxConfig {
        cache_dir: Some(cache_dir()),
        pool_instances,
        ..SandboxConfig::default()
    })
    .expect("sandbox")
}

/// One task of the probe: caller `tester`, risk R1, data T1, no
/// constraints, context, resume or HID broker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProbeTask<'a> {
    pub(crate) task_id: &'a str,
    pub(crate) session_id: &'a str,
    pub(crate) intent: &'a str,
    pub(crate) deadline: Duration,
}

impl ProbeTask<'_> {
    /// A policy governor of the task under `budgets`, its session expiring
    /// `expires_in_ms` from now, its verdicts going to `sink`.
    pub(crate) fn governor(
        &self,
        prepared: &PreparedCapability,
        envelope: &SafetyEnvelope,
        budgets: BudgetCaps,
        expires_in_ms: u64,
        sink: Arc<dyn VerdictSink>,
    ) -> Arc<dyn Governor> {
        let facts = pep::Standalone {
            task_id: self.task_id,
            session_id: self.session_id,
            caller: "tester",
            risk_level: RiskLevel::R1,
            data_classification: DataClass::T1,
            envelope,
            expires_at_ms: pep::now_ms() + expires_in_ms,
            budgets,
        }
        .facts(prepared.manifest());
        Arc::new(PolicyGovernor::standalone(facts, sink).expect("governor"))
    }

    /// The request of the task.
    pub(crate) fn request(
        &self,
        inputs: Value,
        envelope: SafetyEnvelope,
        governor: Arc<dyn Governor>,
    ) -> TaskRequest {
        TaskRequest {
            task_id: self.task_id.into(),
            session_id: self.session_id.into(),
            caller_id: "tester".into(),
            intent: self.intent.into(),
            inputs,
            constraints: json!({}),
            context: None,
            resume: None,
            risk_level: RiskLevel::R1,
            data_classification: DataClass::T1,
            deadline: self.deadline,
            envelope,
            governor,
            hid: None,
        }
    }
}

/// What the host wrote into the task's log.
pub(crate) fn host_notes(run: &TaskRun) -> Vec<String> {
    run.log
        .entries
        .iter()
        .filter(|e| e.source == hcp_sandbox::tasklog::LogSource::Host)
        .map(|e| e.message.clone())
        .collect()
}
