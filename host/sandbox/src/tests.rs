//! Tasks run end to end through [`PreparedCapability::run`] on components
//! written for the case: a real guest (`trivial`, which echoes its inputs)
//! with a core module appended that does what the case needs before the
//! call (its start function runs while the component is instantiated).

use crate::pep::NoReceipts;
use crate::{PreparedCapability, RunResult, Sandbox, SandboxConfig, TaskRequest};
use hcp_contracts::message::ErrorCode;
use hcp_contracts::{DataClass, RiskLevel};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `component` with one more core module, instantiated after everything
/// the component already instantiates: `module` (which imports nothing).
///
/// A component's sections may come in any order and repeat; the appended
/// module takes the next index of the core module space, which is the
/// number of core modules the component declares at its top level.
fn with_core_module(component: &[u8], module: &wasm_encoder::Module) -> Vec<u8> {
    use wasmparser::{Parser, Payload};
    let mut modules = 0u32;
    // 1 inside the outer component, more inside a nested module or component.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        match payload.expect("the guest parses") {
            Payload::Version { .. } => depth += 1,
            Payload::End(_) => depth -= 1,
            Payload::ModuleSection { .. } if depth == 1 => modules += 1,
            _ => {}
        }
    }
    let mut appended = wasm_encoder::Component::new();
    appended.section(&wasm_encoder::ModuleSection(module));
    let mut instances = wasm_encoder::InstanceSection::new();
    instances.instantiate::<[(&str, wasm_encoder::ModuleArg); 0], &str>(modules, []);
    appended.section(&instances);
    let appended = appended.finish();
    // Both start with the same 8 bytes (magic and component version).
    let mut out = component.to_vec();
    out.extend_from_slice(&appended[8..]);
    out
}

/// A core module whose start function loops forever.
fn looping_start() -> wasm_encoder::Module {
    use wasm_encoder::{
        CodeSection, Function, FunctionSection, Instruction, Module, StartSection, TypeSection,
    };
    let mut types = TypeSection::new();
    types.ty().function([], []);
    let mut functions = FunctionSection::new();
    functions.function(0);
    let mut spin = Function::new([]);
    spin.instruction(&Instruction::Loop(wasm_encoder::BlockType::Empty))
        .instruction(&Instruction::Br(0))
        .instruction(&Instruction::End)
        .instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&spin);
    let mut module = Module::new();
    module
        .section(&types)
        .section(&functions)
        .section(&StartSection { function_index: 0 })
        .section(&code);
    module
}

/// The request of one task of `prepared` with `deadline`, run without a gate.
fn request(prepared: &PreparedCapability, deadline: Duration) -> TaskRequest {
    let governor = prepared.standalone_governor(
        "task-1",
        "session-1",
        deadline,
        &Default::default(),
        Arc::new(NoReceipts),
    );
    TaskRequest {
        task_id: "task-1".into(),
        session_id: "session-1".into(),
        caller_id: "tester".into(),
        intent: "start".into(),
        inputs: json!({}),
        constraints: json!({}),
        context: None,
        resume: None,
        risk_level: RiskLevel::R1,
        data_classification: DataClass::T1,
        deadline,
        envelope: Default::default(),
        governor,
        hid: None,
    }
}

/// A start function that never returns is stopped at the task's deadline,
/// and the task ends `timeout`, as a loop in the call does. It ended
/// `resource_unavailable` ("could not be instantiated: … wasm trap:
/// interrupt") before: the deadline's trap was taken for the host failing
/// to instantiate.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_function_that_loops_forever_ends_at_the_deadline_as_a_timeout() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let guest = std::fs::read(hcp_tests::TRIVIAL).expect("the trivial guest");
    let component = tmp.path().join("looping-start.wasm");
    std::fs::write(&component, with_core_module(&guest, &looping_start())).expect("write");
    let manifest = hcp_tests::ManifestBuilder::new(
        "looping-start",
        component.to_str().expect("a UTF-8 temporary path"),
    )
    .load(tmp.path());
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(hcp_tests::cache_dir()),
        pool_instances: 4,
        ..SandboxConfig::default()
    })
    .expect("sandbox");
    let prepared = sandbox
        .prepare(Arc::new(manifest))
        .expect("the guest with a looping start function prepares");
    let deadline = Duration::from_millis(500);
    let started = Instant::now();
    let run = prepared
        .run(
            request(&prepared, deadline),
            Arc::new(crate::MemoryStore::new()),
        )
        .await;
    let RunResult::Failed(failure) = &run.result else {
        panic!(
            "a start function that never returns completed: {:?}",
            run.result
        );
    };
    assert_eq!(failure.code, ErrorCode::Timeout, "{}", failure.message);
    assert_eq!(
        failure.message,
        "stopped at its deadline of PT0.5S (while instantiating, in a start function)"
    );
    assert!(
        run.risk_events.iter().any(|e| e == "timeout"),
        "{:?}",
        run.risk_events
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
