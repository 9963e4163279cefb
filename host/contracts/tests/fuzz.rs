//! Whatever bytes arrive as a manifest or an HCP message, checking them
//! answers with a value or a clear error (a non-empty message), never a
//! panic: arbitrary bytes, and the shipped examples with bytes flipped,
//! inserted, deleted or cut. `PROPTEST_CASES` sets the number of cases
//! (64 by default; `scripts/fuzz` runs many more).

use hcp_contracts::manifest::from_value;
use hcp_contracts::message::{Envelope, TaskSubmit};
use hcp_contracts::{LoadOptions, problem};
use hcp_fuzzkit::{config, mutate};
use proptest::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory with a small component, and the shipped document-analysis
/// manifest pointing at it.
static MANIFEST: LazyLock<(tempfile::TempDir, Vec<u8>)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("component.wasm"), b"\0asm\x0d\0\x01\0").expect("component");
    std::fs::create_dir(dir.path().join("samples")).expect("granted directory");
    let text = std::fs::read_to_string(repo().join("plugins/document-analysis/manifest.json"))
        .expect("manifest");
    let mut doc: Value = serde_json::from_str(&text).expect("json");
    doc["component"]["path"] = "component.wasm".into();
    if let Some(component) = doc["component"].as_object_mut() {
        component.remove("digest");
    }
    (dir, serde_json::to_vec_pretty(&doc).expect("bytes"))
});

static SUBMITS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    [
        "document-analysis",
        "cvd-material-synthesis",
        "hid-assistant",
    ]
    .iter()
    .map(|p| {
        std::fs::read(repo().join(format!("plugins/{p}/examples/task_submit.json")))
            .expect("example")
    })
    .collect()
});

fn check_manifest(bytes: &[u8]) {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let base = MANIFEST.0.path();
    if let Err(e) = from_value(value, base, None, "manifest.json", LoadOptions::default()) {
        let text = e.to_string();
        assert!(
            text.starts_with("manifest.json") && text.len() > 20,
            "{text}"
        );
    }
}

fn check_message(bytes: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let envelope = match Envelope::parse(&value) {
        Ok(e) => e,
        Err(problems) => {
            assert!(!problems.is_empty());
            assert!(!problem::list(&problems).trim().is_empty());
            return;
        }
    };
    match envelope.payload_as::<TaskSubmit>() {
        Ok(submit) => {
            if let Err(problems) = submit.check() {
                assert!(!problems.is_empty());
                assert!(problems.iter().all(|p| !p.message.is_empty()));
            }
        }
        Err(problems) => assert!(!problems.is_empty()),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        check_manifest(&bytes);
        check_message(&bytes);
    }

    #[test]
    fn arbitrary_json(value in json_values()) {
        let bytes = serde_json::to_vec(&value).expect("json");
        check_manifest(&bytes);
        check_message(&bytes);
    }

    #[test]
    fn mutated_manifests(
        edits in hcp_fuzzkit::edits(1, 8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        check_manifest(&mutate(&MANIFEST.1, &edits, cut));
    }

    #[test]
    fn mutated_task_submits(
        which in 0usize..3,
        edits in hcp_fuzzkit::edits(1, 8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        check_message(&mutate(&SUBMITS[which], &edits, cut));
    }
}

/// JSON values of a few levels, with the keys these documents use.
fn json_values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::String),
    ];
    let key = prop_oneof![
        Just("capability".to_owned()),
        Just("payload".to_owned()),
        Just("type".to_owned()),
        Just("version".to_owned()),
        Just("grants".to_owned()),
        Just("component".to_owned()),
        "[a-z_]{1,12}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn the_unmutated_inputs_are_accepted() {
    let value: Value = serde_json::from_slice(&MANIFEST.1).expect("json");
    from_value(
        value,
        MANIFEST.0.path(),
        None,
        "manifest.json",
        LoadOptions::default(),
    )
    .expect("the base manifest checks");
    for bytes in SUBMITS.iter() {
        let value: Value = serde_json::from_slice(bytes).expect("json");
        let envelope = Envelope::parse(&value).expect("envelope");
        envelope
            .payload_as::<TaskSubmit>()
            .expect("payload")
            .check()
            .expect("checks");
    }
}
