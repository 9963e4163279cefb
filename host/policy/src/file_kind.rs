//! The files of a policy set, their JSON Schemas (embedded from
//! `schemas/policy/`, compiled once) and syntax checking: the seven files
//! of the gate, then each interface's own optional file
//! ([`crate::operator::InterfaceFile`], declared by its policy module).

use crate::operator::InterfaceFile;
use crate::pep::interfaces::FILES;
use hcp_contracts::Problem;
use hcp_contracts::schema::{UserSchemaError, compile_user, validate_user};
use serde_json::Value;
use std::sync::LazyLock;

/// One file of a policy directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyFile {
    /// `callers.json`.
    Callers,
    /// `risk.json`.
    Risk,
    /// `context.json`.
    Context,
    /// `budgets.json`.
    Budgets,
    /// `envelopes.json`.
    Envelopes,
    /// `authz.cedar`.
    Authz,
    /// `dispatch.json`.
    Dispatch,
    /// An interface's own file (optional: [`PolicyFile::is_optional`]),
    /// e.g. `wasi:config`'s `config.json`.
    Interface(FileSlot),
}

/// Which of [`crate::interface_files`] a [`PolicyFile::Interface`]
/// is (only [`PolicyFile::ALL`] and [`PolicyFile::from_name`] make one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileSlot(u8);

impl FileSlot {
    /// The interface's file it names.
    pub fn file(self) -> Option<&'static InterfaceFile> {
        crate::interface_files().get(usize::from(self.0))
    }
}

/// An embedded policy schema that does not compile (a build fault,
/// reported as a problem of every file rather than a panic).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EmbeddedSchemaError {
    #[error("{0} has no JSON Schema")]
    Missing(&'static str),
    #[error("schemas/policy: {0}")]
    Json(String),
    #[error(transparent)]
    Compile(#[from] UserSchemaError),
}

type Compiled = Result<jsonschema::Validator, EmbeddedSchemaError>;

static CALLERS: LazyLock<Compiled> = LazyLock::new(|| compile(PolicyFile::Callers));
static RISK: LazyLock<Compiled> = LazyLock::new(|| compile(PolicyFile::Risk));
static CONTEXT: LazyLock<Compiled> = LazyLock::new(|| compile(PolicyFile::Context));
static BUDGETS: LazyLock<Compiled> = LazyLock::new(|| compile(PolicyFile::Budgets));
static ENVELOPES: LazyLock<Compiled> = LazyLock::new(|| compile(PolicyFile::Envelopes));
static DISPATCH: LazyLock<Compiled> = LazyLock::new(|| compile(PolicyFile::Dispatch));
/// The interfaces' files' schemas, by slot.
static INTERFACES: LazyLock<Vec<Compiled>> =
    LazyLock::new(|| FILES.iter().map(|f| embedded(f.schema)).collect());

/// The gate's files, in the order they are loaded and hashed.
const GATE: [PolicyFile; 7] = [
    PolicyFile::Callers,
    PolicyFile::Risk,
    PolicyFile::Context,
    PolicyFile::Budgets,
    PolicyFile::Envelopes,
    PolicyFile::Authz,
    PolicyFile::Dispatch,
];

// Slots are `u8`.
const _: () = assert!(FILES.len() <= u8::MAX as usize);

fn compile(file: PolicyFile) -> Compiled {
    let text = file
        .schema_text()
        .ok_or(EmbeddedSchemaError::Missing(file.name()))?;
    embedded(text)
}

/// Compiles an embedded policy schema.
pub(crate) fn embedded(text: &str) -> Compiled {
    let schema: Value =
        serde_json::from_str(text).map_err(|e| EmbeddedSchemaError::Json(e.to_string()))?;
    Ok(compile_user(&schema)?)
}

impl PolicyFile {
    /// Every file, in the order they are loaded and hashed: the gate's,
    /// then the interfaces'.
    pub const ALL: [PolicyFile; GATE.len() + FILES.len()] = {
        let mut all = [PolicyFile::Callers; GATE.len() + FILES.len()];
        let mut i = 0;
        while i < GATE.len() {
            all[i] = GATE[i];
            i += 1;
        }
        let mut slot = 0;
        while slot < FILES.len() {
            all[GATE.len() + slot] = PolicyFile::Interface(FileSlot(slot as u8));
            slot += 1;
        }
        all
    };

    /// The file's name in the policy directory.
    pub fn name(self) -> &'static str {
        match self {
            Self::Callers => "callers.json",
            Self::Risk => "risk.json",
            Self::Context => "context.json",
            Self::Budgets => "budgets.json",
            Self::Envelopes => "envelopes.json",
            Self::Authz => "authz.cedar",
            Self::Dispatch => "dispatch.json",
            Self::Interface(slot) => slot.file().map_or("", |f| f.name),
        }
    }

    /// Whether a policy directory may go without it (an interface's file:
    /// no value provided); an absent optional file is not hashed.
    pub fn is_optional(self) -> bool {
        matches!(self, Self::Interface(_))
    }

    /// The file whose name is `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the file is JSON (else Cedar).
    pub fn is_json(self) -> bool {
        self != Self::Authz
    }

    /// The JSON Schema text (`schemas/policy/<name>.schema.json`); `None`
    /// for `authz.cedar`, whose schema is [`crate::authz::CEDAR_SCHEMA`].
    pub fn schema_text(self) -> Option<&'static str> {
        match self {
            Self::Callers => Some(include_str!("../../../schemas/policy/callers.schema.json")),
            Self::Risk => Some(include_str!("../../../schemas/policy/risk.schema.json")),
            Self::Context => Some(include_str!("../../../schemas/policy/context.schema.json")),
            Self::Budgets => Some(include_str!("../../../schemas/policy/budgets.schema.json")),
            Self::Envelopes => Some(include_str!(
                "../../../schemas/policy/envelopes.schema.json"
            )),
            Self::Dispatch => Some(include_str!("../../../schemas/policy/dispatch.schema.json")),
            Self::Interface(slot) => slot.file().map(|f| f.schema),
            Self::Authz => None,
        }
    }

    fn validator(self) -> Option<&'static Compiled> {
        match self {
            Self::Callers => Some(&CALLERS),
            Self::Risk => Some(&RISK),
            Self::Context => Some(&CONTEXT),
            Self::Budgets => Some(&BUDGETS),
            Self::Envelopes => Some(&ENVELOPES),
            Self::Dispatch => Some(&DISPATCH),
            Self::Interface(slot) => INTERFACES.get(usize::from(slot.0)),
            Self::Authz => None,
        }
    }

    /// Parses a JSON policy file: valid JSON, valid against its schema.
    /// Duplicate keys and semantic checks come after.
    ///
    /// # Errors
    ///
    /// Every problem found, by JSON pointer.
    pub(crate) fn parse_json(self, text: &str) -> Result<Value, Vec<Problem>> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            vec![Problem::new(
                "",
                format!(
                    "not valid JSON: line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ),
            )]
        })?;
        let mut problems = Vec::new();
        match self.validator() {
            Some(Ok(validator)) => {
                if let Err(found) = validate_user(validator, &value, "") {
                    problems.extend(found);
                }
            }
            Some(Err(e)) => problems.push(Problem::new("", format!("embedded schema: {e}"))),
            None => problems.push(Problem::new("", "not a JSON policy file")),
        }
        if problems.is_empty() {
            Ok(value)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_schema_compiles() {
        for file in PolicyFile::ALL.into_iter().filter(|f| f.is_json()) {
            if let Some(Err(e)) = file.validator() {
                panic!("{}: {e}", file.name());
            }
        }
        assert_eq!(PolicyFile::from_name("risk.json"), Some(PolicyFile::Risk));
        assert_eq!(PolicyFile::from_name("README.md"), None);
    }
}
