//! The JSON Schemas in `schemas/`, compiled once, and validation that
//! reports every problem with its JSON pointer.
//!
//! Schemas given by capability authors (`input_schema`, `output_schema`) and
//! by callers (`expected_output.schema`) are compiled with [`compile_user`]:
//! no remote or file `$ref` is ever fetched.

use crate::problem::Problem;
use jsonschema::{Registry, Resource, Validator};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// A schema shipped with the host, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaId {
    /// `capability.schema.json`: the capability manifest.
    Capability,
    /// `hcp/envelope.schema.json`: the envelope of every HCP message.
    Envelope,
    /// `hcp/task_submit.payload.schema.json`.
    TaskSubmit,
    /// `hcp/task_accepted.payload.schema.json`.
    TaskAccepted,
    /// `hcp/task_rejected.payload.schema.json`.
    TaskRejected,
    /// `hcp/task_completed.payload.schema.json`.
    TaskCompleted,
    /// `hcp/task_failed.payload.schema.json`.
    TaskFailed,
    /// `hid/action_proposal.schema.json`: a guest's HID action, as shown to operators (seed 004).
    HidActionProposal,
    /// `hid/action_decision.schema.json`: an operator's decision on a proposal.
    HidActionDecision,
    /// `hid/action_execute.schema.json`: one line written to the HID executor.
    HidActionExecute,
    /// `hid/session_log.schema.json`: one entry of the HID session log.
    HidSessionLog,
    /// `hid/device_status.schema.json`: an HID executor's status report.
    HidDeviceStatus,
    /// `hid/job_status.schema.json`: seed 004's global job status envelope.
    JobStatus,
    /// `hid/job_manifest.schema.json`: seed 004's global job manifest.
    JobManifest,
}

macro_rules! schema_files {
    ($($id:ident => $file:literal),* $(,)?) => {
        impl SchemaId {
            /// Every shipped schema.
            pub const ALL: &'static [SchemaId] = &[$(SchemaId::$id),*];

            /// File name under `schemas/`.
            pub fn file(self) -> &'static str {
                match self { $(SchemaId::$id => $file),* }
            }

            /// The schema's text, embedded at build time.
            pub fn text(self) -> &'static str {
                match self {
                    $(SchemaId::$id => include_str!(concat!("../../../schemas/", $file))),*
                }
            }
        }
    };
}

schema_files! {
    Capability => "capability.schema.json",
    Envelope => "hcp/envelope.schema.json",
    TaskSubmit => "hcp/task_submit.payload.schema.json",
    TaskAccepted => "hcp/task_accepted.payload.schema.json",
    TaskRejected => "hcp/task_rejected.payload.schema.json",
    TaskCompleted => "hcp/task_completed.payload.schema.json",
    TaskFailed => "hcp/task_failed.payload.schema.json",
    HidActionProposal => "hid/action_proposal.schema.json",
    HidActionDecision => "hid/action_decision.schema.json",
    HidActionExecute => "hid/action_execute.schema.json",
    HidSessionLog => "hid/session_log.schema.json",
    HidDeviceStatus => "hid/device_status.schema.json",
    JobStatus => "hid/job_status.schema.json",
    JobManifest => "hid/job_manifest.schema.json",
}

const BASE: &str = "https://hcp.local/schemas/";

impl SchemaId {
    /// The schema's `$id`.
    pub fn uri(self) -> String {
        format!("{BASE}{}", self.file())
    }

    /// The parsed schema document.
    pub fn document(self) -> &'static Value {
        &DOCUMENTS[SchemaId::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or_default()]
    }

    /// Validates `instance`; every problem carries its pointer, prefixed
    /// with `prefix` (e.g. `/payload`).
    ///
    /// # Errors
    ///
    /// The problems, sorted by pointer.
    pub fn validate(self, instance: &Value, prefix: &str) -> Result<(), Vec<Problem>> {
        let validator = &VALIDATORS[SchemaId::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or_default()];
        problems_of(validator, instance, prefix)
    }
}

/// Shipped schemas are part of the binary: a broken one is a build defect,
/// caught by this crate's tests before anything ships.
#[expect(
    clippy::expect_used,
    reason = "embedded schemas are tested at build time"
)]
static DOCUMENTS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    SchemaId::ALL
        .iter()
        .map(|s| serde_json::from_str(s.text()).expect("embedded schema parses"))
        .collect()
});

#[expect(
    clippy::expect_used,
    reason = "embedded schemas are tested at build time"
)]
static REGISTRY: LazyLock<Registry<'static>> = LazyLock::new(|| {
    Registry::new()
        .extend(
            SchemaId::ALL
                .iter()
                .map(|s| (s.uri(), Resource::from_contents(s.document().clone()))),
        )
        .expect("embedded schema ids are valid URIs")
        .prepare()
        .expect("embedded schemas form a registry")
});

#[expect(
    clippy::expect_used,
    reason = "embedded schemas are tested at build time"
)]
static VALIDATORS: LazyLock<Vec<Validator>> = LazyLock::new(|| {
    SchemaId::ALL
        .iter()
        .map(|s| {
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .with_registry(&REGISTRY)
                .should_validate_formats(true)
                .build(s.document())
                .expect("embedded schema compiles")
        })
        .collect()
});

/// Compiles a schema supplied by an author or a caller.
///
/// The schema must itself be valid against its meta-schema; drafts other than
/// 2020-12 are honoured when `$schema` names them. References are resolved
/// only inside the document: nothing is fetched.
///
/// # Errors
///
/// Why the schema is not usable.
pub fn compile_user(schema: &Value) -> Result<Validator, UserSchemaError> {
    if let Err(e) = jsonschema::meta::validate(schema) {
        let at = e.instance_path().as_str().to_owned();
        return Err(UserSchemaError::Invalid {
            at,
            reason: e.to_string(),
        });
    }
    jsonschema::options()
        .should_validate_formats(true)
        .with_retriever(NoRetrieval)
        .build(schema)
        .map_err(|e| UserSchemaError::Unusable(e.to_string()))
}

/// Schemas [`compile_user_cached`] keeps at most, and the longest text it
/// keeps one for: a caller sending new schemas only ever replaces them.
const CACHED_SCHEMAS: usize = 64;
const CACHED_SCHEMA_BYTES: usize = 64 * 1024;

/// Validators compiled from callers' schemas, by the schema's text.
static USER_SCHEMAS: LazyLock<std::sync::Mutex<HashMap<String, Arc<Validator>>>> =
    LazyLock::new(Default::default);

/// [`compile_user`], compiled once per schema text: a caller sends the same
/// `expected_output.schema` with every task, and a task's submission is
/// checked both when it is submitted and when it runs. Only schemas that
/// compile are kept, at most [`CACHED_SCHEMAS`] of at most
/// [`CACHED_SCHEMA_BYTES`] each (the cache is emptied when full).
///
/// # Errors
///
/// Why the schema is not usable, as [`compile_user`].
pub fn compile_user_cached(schema: &Value) -> Result<Arc<Validator>, UserSchemaError> {
    let key = schema.to_string();
    let cache = || {
        USER_SCHEMAS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(v) = cache().get(&key) {
        return Ok(v.clone());
    }
    let validator = Arc::new(compile_user(schema)?);
    if key.len() <= CACHED_SCHEMA_BYTES {
        let mut cached = cache();
        if cached.len() >= CACHED_SCHEMAS {
            cached.clear();
        }
        cached.insert(key, validator.clone());
    }
    Ok(validator)
}

/// Why a schema supplied by an author or a caller is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserSchemaError {
    /// It is not valid against its meta-schema (`at`: where, empty for the
    /// whole document).
    #[error("not a valid JSON Schema{}: {reason}", if at.is_empty() { String::new() } else { format!(" at {at}") })]
    Invalid {
        /// JSON pointer into the schema.
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// It is valid but cannot be used (e.g. a reference to fetch).
    #[error("not a usable JSON Schema: {0}")]
    Unusable(String),
}

/// Validates `instance` against a compiled user schema.
///
/// # Errors
///
/// The problems, sorted by pointer, each prefixed with `prefix`.
pub fn validate_user(
    validator: &Validator,
    instance: &Value,
    prefix: &str,
) -> Result<(), Vec<Problem>> {
    problems_of(validator, instance, prefix)
}

fn problems_of(validator: &Validator, instance: &Value, prefix: &str) -> Result<(), Vec<Problem>> {
    let mut problems: Vec<Problem> = validator
        .iter_errors(instance)
        .map(|e| {
            Problem::new(
                format!("{prefix}{}", e.instance_path().as_str()),
                message(&e),
            )
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    problems.sort();
    problems.dedup();
    Err(problems)
}

/// The validator's message, but with every allowed value of an enum listed
/// (a caller, or a caller's model, needs them all to correct the input).
fn message(e: &jsonschema::ValidationError<'_>) -> String {
    if let jsonschema::error::ValidationErrorKind::Enum { options } = e.kind()
        && let Some(list) = options.as_array()
    {
        let list: Vec<String> = list.iter().map(Value::to_string).collect();
        return format!("{} is not one of {}", e.instance(), list.join(", "));
    }
    e.to_string()
}

/// A retriever that refuses every external reference.
struct NoRetrieval;

impl jsonschema::Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "external reference {} is not allowed: schemas must be self-contained",
            uri.as_str()
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_shipped_schema_compiles_and_is_valid() {
        for id in SchemaId::ALL {
            assert!(
                jsonschema::meta::validate(id.document()).is_ok(),
                "{} is not a valid schema",
                id.file()
            );
            // Forces compilation.
            let _ = id.validate(&json!({}), "");
        }
    }

    /// The two tests of the cache share it: one empties it while filling.
    static CACHE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_cached_user_schema_is_compiled_once_and_validates_as_compiled() {
        let _one = CACHE_TESTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let schema = json!({"type": "object", "required": ["cached-test-field"]});
        let a = compile_user_cached(&schema).expect("compiles");
        let b = compile_user_cached(&schema).expect("compiles");
        assert!(Arc::ptr_eq(&a, &b), "compiled twice");
        assert!(a.is_valid(&json!({"cached-test-field": 1})));
        assert!(!a.is_valid(&json!({})));
        // Another schema is another validator; a refused one is refused
        // every time.
        let other = compile_user_cached(&json!({"type": "string"})).expect("compiles");
        assert!(!Arc::ptr_eq(&a, &other));
        let bad = json!({"type": 5});
        assert!(compile_user_cached(&bad).is_err());
        assert!(compile_user_cached(&bad).is_err());
    }

    #[test]
    fn the_schema_cache_stays_bounded() {
        let _one = CACHE_TESTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for i in 0..(CACHED_SCHEMAS * 2 + 1) {
            compile_user_cached(&json!({"type": "object", "title": format!("bounded-{i}")}))
                .expect("compiles");
            let held = USER_SCHEMAS.lock().map(|c| c.len()).unwrap_or(0);
            assert!(held <= CACHED_SCHEMAS, "{held} schemas kept");
        }
        let huge = json!({"type": "string", "title": "x".repeat(CACHED_SCHEMA_BYTES)});
        let v = compile_user_cached(&huge).expect("compiles");
        assert!(v.is_valid(&json!("s")));
        let kept = USER_SCHEMAS
            .lock()
            .map(|c| c.contains_key(&huge.to_string()))
            .unwrap_or(true);
        assert!(!kept, "a schema over the size bound was kept");
    }

    #[test]
    fn user_schemas_cannot_fetch() {
        let err = compile_user(&json!({"$ref": "https://example.com/s.json"}))
            .expect_err("fetched")
            .to_string();
        assert!(err.contains("not allowed"), "{err}");
        let err = compile_user(&json!({"$ref": "file:///etc/passwd"}))
            .expect_err("read a file")
            .to_string();
        assert!(err.contains("not allowed"), "{err}");
    }

    #[test]
    fn invalid_user_schema_is_refused_with_its_location() {
        let err = compile_user(&json!({"type": "object", "properties": {"a": {"type": 5}}}))
            .expect_err("accepted")
            .to_string();
        assert!(err.contains("/properties/a/type"), "{err}");
    }
}
