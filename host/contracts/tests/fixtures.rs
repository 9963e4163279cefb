//! Every fixture under `schemas/fixtures/`: valid ones load, invalid ones
//! are refused with exactly the message in their `.err` golden file.
//!
//! `BLESS=1 cargo test -p hcp-contracts --test fixtures` rewrites the golden
//! files; review the diff.

use hcp_contracts::message::{Envelope, MessageType, TaskSubmit};
use hcp_contracts::schema::SchemaId;
use hcp_contracts::{LoadOptions, manifest, problem};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/fixtures")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

/// Compares `actual` with the golden file next to `fixture`, or writes it
/// under `BLESS=1`. Returns a mismatch description.
fn golden(fixture: &Path, actual: &str) -> Option<String> {
    let path = fixture.with_extension("err");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, format!("{actual}\n")).expect("bless");
        return None;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    (expected.trim_end() != actual).then(|| {
        format!(
            "{}:\n--- expected ({})\n{}\n--- actual\n{actual}\n",
            fixture.display(),
            path.display(),
            expected.trim_end()
        )
    })
}

/// Error text without this machine's paths.
fn portable(text: &str, dir: &Path) -> String {
    let canonical = dir.canonicalize().expect("canonical");
    let absolute = std::path::absolute(dir).expect("absolute");
    text.replace(&canonical.display().to_string(), "<fixtures>")
        .replace(&absolute.display().to_string(), "<fixtures>")
}

#[test]
fn capability_manifests() {
    let dir = fixtures().join("capability");
    for path in json_files(&dir.join("valid")) {
        if let Err(e) = manifest::load(&path, LoadOptions::default()) {
            panic!("{} should be valid: {e}", path.display());
        }
    }
    let mut mismatches = Vec::new();
    for path in json_files(&dir.join("invalid")) {
        match manifest::load(&path, LoadOptions::default()) {
            Ok(_) => mismatches.push(format!("{} was accepted", path.display())),
            Err(e) => mismatches.extend(golden(&path, &portable(&e.to_string(), &dir))),
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn a_bundle_requires_a_pinned_digest() {
    let path = fixtures().join("capability/valid/minimal.json");
    let err = manifest::load(
        &path,
        LoadOptions {
            require_digest: true,
        },
    )
    .expect_err("unpinned");
    assert_eq!(
        err.problems()[0].to_string(),
        "/component/digest: required here: the component's digest is \
         sha256:0b3485c650f040851c295ad6c61893a070f76b2012ed1e2f9c80f9f77fe127c0"
    );
    let pinned = fixtures().join("capability/valid/seed-cvd-declaration.json");
    let m = manifest::load(
        &pinned,
        LoadOptions {
            require_digest: true,
        },
    )
    .expect("pinned");
    assert!(m.component.pinned);
}

fn check_message(value: &serde_json::Value, kind: MessageType) -> Result<(), String> {
    let envelope = Envelope::parse(value).map_err(|p| problem::list(&p))?;
    if envelope.kind != kind {
        return Err(format!(
            "type is {}, not {}",
            envelope.kind.as_str(),
            kind.as_str()
        ));
    }
    if kind == MessageType::TaskSubmit {
        let submit: TaskSubmit = envelope.payload_as().map_err(|p| problem::list(&p))?;
        submit.check().map_err(|p| problem::list(&p))?;
    }
    Ok(())
}

#[test]
fn hcp_messages() {
    let mut mismatches = Vec::new();
    for (dir, kind) in [
        ("task_submit", MessageType::TaskSubmit),
        ("task_accepted", MessageType::TaskAccepted),
        ("task_rejected", MessageType::TaskRejected),
        ("task_completed", MessageType::TaskCompleted),
        ("task_failed", MessageType::TaskFailed),
    ] {
        let dir = fixtures().join("hcp").join(dir);
        for path in json_files(&dir.join("valid")) {
            let value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
            if let Err(e) = check_message(&value, kind) {
                mismatches.push(format!("{} should be valid:\n{e}", path.display()));
            }
        }
        for path in json_files(&dir.join("invalid")) {
            let value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
            match check_message(&value, kind) {
                Ok(()) => mismatches.push(format!("{} was accepted", path.display())),
                Err(e) => mismatches.extend(golden(&path, &e)),
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// A document checked against one shipped schema, every problem listed.
fn check_against(path: &Path, id: SchemaId) -> Result<(), String> {
    let text = std::fs::read_to_string(path).expect("read");
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("  (document): not JSON: {e}"))?;
    id.validate(&value, "").map_err(|p| problem::list(&p))
}

#[test]
fn hid_contracts() {
    let mut mismatches = Vec::new();
    for (dir, id) in [
        ("action_proposal", SchemaId::HidActionProposal),
        ("action_decision", SchemaId::HidActionDecision),
        ("action_execute", SchemaId::HidActionExecute),
        ("session_log", SchemaId::HidSessionLog),
        ("device_status", SchemaId::HidDeviceStatus),
        ("job_status", SchemaId::JobStatus),
        ("job_manifest", SchemaId::JobManifest),
    ] {
        let dir = fixtures().join("hid").join(dir);
        for path in json_files(&dir.join("valid")) {
            if let Err(e) = check_against(&path, id) {
                mismatches.push(format!("{} should be valid:\n{e}", path.display()));
            }
        }
        for path in json_files(&dir.join("invalid")) {
            match check_against(&path, id) {
                Ok(()) => mismatches.push(format!("{} was accepted", path.display())),
                Err(e) => mismatches.extend(golden(&path, &e)),
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn wit_package_version_matches_the_host_constant() {
    let world =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/world.wit"))
            .expect("wit/world.wit");
    let expected = format!(
        "package {}@{};",
        manifest::HOST_WIT_PACKAGE,
        manifest::HOST_WIT_VERSION
    );
    assert!(
        world.contains(&expected),
        "wit/world.wit does not declare {expected}"
    );
}
