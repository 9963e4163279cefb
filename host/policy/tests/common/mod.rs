//! Shared helpers: the shipped policy set, the seed's manifests and
//! messages, and the demo tokens of `policies/callers.json`.

#![allow(dead_code, unreachable_pub, reason = "each test binary uses a part")]

use hcp_contracts::manifest::ManifestDoc;
use hcp_contracts::message::TaskSubmit;
use hcp_policy::{Admission, AdmissionRequest, EquipmentState, PolicySet, Rejection};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;
use time::macros::datetime;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn policies_dir() -> PathBuf {
    repo().join("policies")
}

pub fn shipped() -> PolicySet {
    PolicySet::load(&policies_dir()).unwrap_or_else(|e| panic!("{e}"))
}

/// The shipped files' text, by name, to edit for one test.
pub fn shipped_sources() -> BTreeMap<String, String> {
    shipped().sources().clone()
}

/// The shipped set with `file` replaced.
pub fn with_file(file: &str, text: &str) -> PolicySet {
    let mut sources = shipped_sources();
    sources.insert(file.to_owned(), text.to_owned());
    PolicySet::from_sources("test", sources).unwrap_or_else(|e| panic!("{e}"))
}

/// The demo token of a shipped caller (see policies/README.md).
pub fn token(caller: &str) -> String {
    format!("demo-token-{caller}-not-a-secret")
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Seed 000's CVD declaration, with the seed's envelope.
pub fn cvd_manifest() -> ManifestDoc {
    let path = repo().join("schemas/fixtures/capability/valid/seed-cvd-declaration.json");
    serde_json::from_value(json(&path)).expect("manifest")
}

/// The document-analysis plugin's manifest (R1, file and http inputs).
pub fn document_manifest() -> ManifestDoc {
    let path = repo().join("plugins/document-analysis/manifest.json");
    serde_json::from_value(json(&path)).expect("manifest")
}

/// A seed task_submit payload from the message fixtures.
fn seed_submit(name: &str) -> TaskSubmit {
    let path = repo()
        .join("schemas/fixtures/hcp/task_submit/valid")
        .join(name);
    serde_json::from_value(json(&path)["payload"].clone()).expect("task_submit")
}

/// Seed 001's CVD task (700–750 °C, T2) from harness-alpha-001.
pub fn cvd_submit() -> TaskSubmit {
    seed_submit("seed-cvd.json")
}

/// Seed 001's document-analysis task (T1) from harness-local-01.
pub fn document_submit() -> TaskSubmit {
    seed_submit("seed-document-analysis.json")
}

/// The CVD task from `caller`, with `temperature_range` replaced.
pub fn cvd_task(caller: &str, temperature_range: Value) -> TaskSubmit {
    let mut submit = cvd_submit();
    submit.caller_id = caller.to_owned();
    submit.inputs["temperature_range"] = temperature_range;
    submit
}

/// Wednesday 15 January 2025, 10:00 in the lab (UTC+01:00): attended.
pub const WEDNESDAY_10AM: OffsetDateTime = datetime!(2025-01-15 10:00 +01:00);

pub fn manifest_for(submit: &TaskSubmit) -> ManifestDoc {
    match submit.capability.as_str() {
        "cvd-material-synthesis" => cvd_manifest(),
        _ => document_manifest(),
    }
}

/// Runs the gate with the caller's own demo token.
pub fn admit_at(
    set: &PolicySet,
    submit: &TaskSubmit,
    now: OffsetDateTime,
    equipment: &EquipmentState,
) -> Result<Admission, Rejection> {
    let manifest = manifest_for(submit);
    let credential = token(&submit.caller_id);
    set.admit(&AdmissionRequest {
        submit,
        credential: &credential,
        manifest: &manifest,
        now,
        equipment,
    })
}

pub fn admit(set: &PolicySet, submit: &TaskSubmit) -> Result<Admission, Rejection> {
    admit_at(set, submit, WEDNESDAY_10AM, &EquipmentState::idle())
}
