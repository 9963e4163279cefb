//! Values the operator provides an interface, beside what a bundle brings
//! (`wasi:config`'s keys, some of them secret): the platform's part.
//!
//! An interface declares it once, in its policy module
//! (`pep/interfaces/<name>.rs`), as an [`InterfaceFile`] listed in
//! `pep/interfaces/mod.rs`: its own optional policy file (name, embedded
//! JSON Schema, how it is read and checked, which values it provides a
//! session) and, when some values are secret, where the operator's sealed
//! secrets rest ([`SecretSpace`]). The rest iterates the list and names no
//! interface: loading, checking and hashing the file
//! ([`crate::PolicyFile`]), the session's values ([`OperatorValue`] in
//! [`crate::pep::Scope`], by interface and name), the host's store of
//! sealed secrets (`hcp_store::operator_secrets`), withholding them from a
//! task's answer, and the `hcp <command> secret set` commands.

use hcp_contracts::Problem;
use hcp_contracts::manifest::TableGrants;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A value the operator's policy provides a granted name of an interface
/// with.
#[derive(Clone, PartialEq, Eq)]
pub enum OperatorValue {
    /// A plain value, written in the interface's policy file.
    Plain(String),
    /// A secret, sealed in the host's data directory.
    Secret,
}

impl std::fmt::Debug for OperatorValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Plain(_) => "Plain(..)",
            Self::Secret => "Secret",
        })
    }
}

/// An interface's policy file, read and checked against its schema.
pub trait OperatorFile: std::fmt::Debug + Send + Sync {
    /// What the schema cannot say, by JSON pointer.
    fn problems(&self) -> Vec<Problem> {
        Vec::new()
    }

    /// The values it provides `capability` (a name, without version) for
    /// the names the session's manifest grants (`granted`), by name.
    fn values(&self, capability: &str, granted: &TableGrants) -> BTreeMap<String, OperatorValue>;
}

/// Where an interface's secrets rest and how the operator sets them.
#[derive(Debug)]
pub struct SecretSpace {
    /// The folder under the data directory: `<dir>/<capability>/<name>.sealed`.
    pub dir: &'static str,
    /// The associated data each is sealed with, `<label>:<capability>/<name>`,
    /// so that a sealed value cannot be moved to another name.
    pub label: &'static str,
    /// What a name is, in errors (`config key`).
    pub noun: &'static str,
    /// The `hcp` command that sets them: `hcp <command> secret set`.
    pub command: &'static str,
    /// Its help: the command's, `secret`'s and `set`'s.
    pub help: [&'static str; 3],
    /// `set`'s argument naming the secret: its id (`key`), value name
    /// (`KEY`) and help.
    pub name_arg: (&'static str, &'static str, &'static str),
}

/// An interface's own optional policy file.
#[derive(Debug)]
pub struct InterfaceFile {
    /// The interface (`wasi:config`), as the table of interfaces names it.
    pub interface: &'static str,
    /// The file's name in the policy directory (`config.json`).
    pub name: &'static str,
    /// Its JSON Schema's text (`schemas/policy/<stem>.schema.json`).
    pub schema: &'static str,
    /// The file as the repository's `policies/` ships it (part of the
    /// policy set `hcp` stands in with where it finds none).
    pub shipped: &'static str,
    /// Reads a file valid against the schema ([`read_as`]).
    pub read: fn(Value) -> Result<Arc<dyn OperatorFile>, String>,
    /// The file of a policy directory without it: no value provided.
    pub empty: fn() -> Arc<dyn OperatorFile>,
    /// Where its secrets rest, when some values may be secret.
    pub secrets: Option<SecretSpace>,
}

/// [`InterfaceFile::read`] of a file whose type is `T`.
///
/// # Errors
///
/// The file does not fit `T`.
pub fn read_as<T: DeserializeOwned + OperatorFile + 'static>(
    value: Value,
) -> Result<Arc<dyn OperatorFile>, String> {
    serde_json::from_value::<T>(value)
        .map(|doc| Arc::new(doc) as Arc<dyn OperatorFile>)
        .map_err(|e| e.to_string())
}

/// [`InterfaceFile::empty`] of a file whose type is `T`.
pub fn empty_of<T: Default + OperatorFile + 'static>() -> Arc<dyn OperatorFile> {
    Arc::new(T::default())
}
