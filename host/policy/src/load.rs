//! Loading a policy set: reading the files, checking each (syntax, schema,
//! semantics) and all together, and hashing them.
//!
//! # Ambient authority
//!
//! [`PolicySet::load`] reads the seven policy files (and the interfaces'
//! optional files, such as `config.json`) of the directory it is given,
//! and nothing else.

use crate::authz::Authz;
use crate::caller::Caller;
use crate::check;
use crate::file_kind::PolicyFile;
use crate::files::{BudgetsFile, CallersFile, ContextFile, DispatchFile, EnvelopesFile, RiskFile};
use crate::operator::{InterfaceFile, OperatorFile};
use crate::policy_set::PolicySet;
use hcp_contracts::Problem;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Largest policy file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// One problem in one file of a policy set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileProblem {
    /// The file's name, e.g. `callers.json`.
    pub file: String,
    /// Where in it and what.
    pub problem: Problem,
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.problem)
    }
}

/// Why a policy set was refused: every problem of every file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: invalid policy set:\n{}", list(.problems))]
pub struct PolicyError {
    /// The directory (or other origin) of the files.
    pub origin: String,
    /// Every problem found, by file.
    pub problems: Vec<FileProblem>,
}

fn list(problems: &[FileProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl PolicySet {
    /// Reads and checks the policy files in `dir` (`callers.json`,
    /// `risk.json`, `context.json`, `budgets.json`, `envelopes.json`,
    /// `authz.cedar`, `dispatch.json`; every one is required, other files
    /// are ignored).
    ///
    /// # Errors
    ///
    /// Every problem of every file, each with its file and JSON pointer (or
    /// line and column in `authz.cedar`), unreadable and missing files
    /// included.
    pub fn load(dir: &Path) -> Result<Self, PolicyError> {
        let mut sources = BTreeMap::new();
        let mut loader = Loader::default();
        for file in PolicyFile::ALL {
            let path = dir.join(file.name());
            let read = std::fs::metadata(&path).and_then(|meta| {
                if meta.len() > MAX_FILE_BYTES {
                    Err(std::io::Error::other(format!(
                        "larger than {MAX_FILE_BYTES} bytes"
                    )))
                } else {
                    std::fs::read_to_string(&path)
                }
            });
            match read {
                Ok(text) => {
                    sources.insert(file.name().to_owned(), text);
                }
                Err(e) if file.is_optional() && e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => loader.problem(
                    file.name(),
                    Problem::new("", format!("cannot read {}: {e}", path.display())),
                ),
            }
        }
        Self::build(&dir.display().to_string(), sources, loader)
    }

    /// Checks policy files given as text, by file name (e.g. the sources
    /// recorded with a receipt, for replay). `origin` names them in errors.
    ///
    /// # Errors
    ///
    /// As [`PolicySet::load`].
    pub fn from_sources(
        origin: &str,
        sources: BTreeMap<String, String>,
    ) -> Result<Self, PolicyError> {
        Self::build(origin, sources, Loader::default())
    }

    fn build(
        origin: &str,
        sources: BTreeMap<String, String>,
        mut loader: Loader,
    ) -> Result<Self, PolicyError> {
        // The bound of a file read from the policy directory holds for
        // text from anywhere (a pack's recorded policy, for replay).
        let mut sources = sources;
        sources.retain(|name, text| {
            let fits = text.len() as u64 <= MAX_FILE_BYTES;
            if !fits {
                loader.problem(
                    name,
                    Problem::new(
                        "",
                        format!("{} bytes, larger than {MAX_FILE_BYTES} bytes", text.len()),
                    ),
                );
            }
            fits
        });
        for name in sources.keys() {
            if PolicyFile::from_name(name).is_none() {
                loader.problem(
                    name,
                    Problem::new(
                        "",
                        format!(
                            "not a policy file (expected {})",
                            PolicyFile::ALL.map(|f| f.name()).join(", ")
                        ),
                    ),
                );
            }
        }
        let text = |file: PolicyFile| sources.get(file.name()).map(String::as_str);
        let callers: Option<CallersFile> = loader.json(
            PolicyFile::Callers,
            text(PolicyFile::Callers),
            check::callers,
        );
        let risk: Option<RiskFile> =
            loader.json(PolicyFile::Risk, text(PolicyFile::Risk), check::risk);
        let context: Option<ContextFile> = loader.json(
            PolicyFile::Context,
            text(PolicyFile::Context),
            check::context,
        );
        let budgets: Option<BudgetsFile> =
            loader.json(PolicyFile::Budgets, text(PolicyFile::Budgets), |_| {
                Vec::new()
            });
        let envelopes: Option<EnvelopesFile> = loader.json(
            PolicyFile::Envelopes,
            text(PolicyFile::Envelopes),
            check::envelopes,
        );
        let dispatch: Option<DispatchFile> = loader.json(
            PolicyFile::Dispatch,
            text(PolicyFile::Dispatch),
            check::dispatch,
        );
        // The interfaces' files, optional: without one, no value is
        // provided.
        let mut interface_files = Some(Vec::new());
        for file in PolicyFile::ALL {
            let PolicyFile::Interface(slot) = file else {
                continue;
            };
            let doc = slot.file().and_then(|f| match text(file) {
                None => Some((f.empty)()),
                Some(t) => loader.interface(file, f, t),
            });
            match (doc, interface_files.as_mut()) {
                (Some(doc), Some(docs)) => docs.push(doc),
                _ => interface_files = None,
            }
        }
        let authz = match text(PolicyFile::Authz) {
            None => {
                loader.missing(PolicyFile::Authz);
                None
            }
            Some(t) => Authz::parse(t)
                .map_err(|found| {
                    for p in found {
                        loader.problem(PolicyFile::Authz.name(), p);
                    }
                })
                .ok(),
        };
        if let (Some(b), Some(c)) = (&budgets, &callers) {
            for p in check::budgets_callers(b, c) {
                loader.problem(PolicyFile::Budgets.name(), p);
            }
        }
        let hash = loader.hash(&sources);
        match (
            callers,
            risk,
            context,
            budgets,
            envelopes,
            authz,
            dispatch,
            interface_files,
            hash,
        ) {
            (
                Some(callers),
                Some(risk),
                Some(context),
                Some(budgets),
                Some(envelopes),
                Some(authz),
                Some(dispatch),
                Some(interface_files),
                Some(hash),
            ) if loader.problems.is_empty() => {
                let callers = callers
                    .callers
                    .into_iter()
                    .map(|c| {
                        let caller = Caller {
                            id: c.id.clone(),
                            description: c.description,
                            kind: c.kind,
                            capabilities: c.capabilities.into_iter().collect(),
                            all_capabilities: c.all_capabilities,
                            amqp_user: c.amqp_user,
                            amqp_reply_to: c
                                .amqp_reply_to
                                .as_deref()
                                .and_then(|p| crate::reply_to::compile(p).ok()),
                            mcp_stdio: c.mcp_stdio,
                            max_risk_level: c.max_risk_level,
                            max_data_classification: c.max_data_classification,
                            credential: c.credential,
                        };
                        (c.id, caller)
                    })
                    .collect();
                Ok(Self {
                    callers,
                    risk,
                    context,
                    budgets,
                    envelopes,
                    authz,
                    dispatch,
                    interface_files,
                    hash,
                    // A map of strings to strings always has a JSON form.
                    sources_json: serde_json::to_string(&sources).unwrap_or_default().into(),
                    sources,
                })
            }
            _ => Err(PolicyError {
                origin: origin.to_owned(),
                problems: loader.problems,
            }),
        }
    }
}

#[derive(Default)]
struct Loader {
    problems: Vec<FileProblem>,
    parsed: BTreeMap<&'static str, Value>,
}

impl Loader {
    fn problem(&mut self, file: &str, problem: Problem) {
        self.problems.push(FileProblem {
            file: file.to_owned(),
            problem,
        });
    }

    fn missing(&mut self, file: PolicyFile) {
        if self.problems.iter().any(|p| p.file == file.name()) {
            return; // already said why (cannot read it)
        }
        self.problem(
            file.name(),
            Problem::new(
                "",
                "missing: every policy file is required (an empty one says \"nothing here\")",
            ),
        );
    }

    fn json<T: DeserializeOwned>(
        &mut self,
        file: PolicyFile,
        text: Option<&str>,
        semantic: fn(&T) -> Vec<Problem>,
    ) -> Option<T> {
        self.json_with(file, text, |value| {
            serde_json::from_value::<T>(value)
                .map(|doc| {
                    let found = semantic(&doc);
                    (doc, found)
                })
                .map_err(|e| e.to_string())
        })
    }

    /// An interface's own file, read by its [`InterfaceFile::read`].
    fn interface(
        &mut self,
        file: PolicyFile,
        declared: &InterfaceFile,
        text: &str,
    ) -> Option<std::sync::Arc<dyn OperatorFile>> {
        self.json_with(file, Some(text), |value| {
            (declared.read)(value).map(|doc| {
                let found = doc.problems();
                (doc, found)
            })
        })
    }

    /// A JSON file: its syntax, its schema and duplicate keys here, what
    /// `read` finds (the document and its semantic problems, or why it
    /// does not fit its type) after.
    fn json_with<T>(
        &mut self,
        file: PolicyFile,
        text: Option<&str>,
        read: impl FnOnce(Value) -> Result<(T, Vec<Problem>), String>,
    ) -> Option<T> {
        let Some(text) = text else {
            self.missing(file);
            return None;
        };
        let duplicates = crate::dupkeys::duplicate_keys(text);
        let (doc, mut problems) = match file.parse_json(text) {
            Err(problems) => (None, problems),
            Ok(value) => match read(value.clone()) {
                Ok((doc, found)) => {
                    self.parsed.insert(file.name(), value);
                    (Some(doc), found)
                }
                Err(e) => (None, vec![Problem::new("", e)]),
            },
        };
        problems.extend(duplicates);
        problems.sort();
        problems.dedup();
        for p in problems {
            self.problem(file.name(), p);
        }
        doc
    }

    fn hash(&mut self, sources: &BTreeMap<String, String>) -> Option<String> {
        let mut canonical = serde_json::Map::new();
        for file in PolicyFile::ALL {
            let content = match (self.parsed.get(file.name()), sources.get(file.name())) {
                (Some(value), _) => value.clone(),
                (None, Some(text)) if !file.is_json() => Value::String(text.clone()),
                (None, None) if file.is_optional() => continue,
                _ => return None,
            };
            canonical.insert(file.name().to_owned(), content);
        }
        hcp_contracts::jcs::sha256_tagged(&Value::Object(canonical))
            .map_err(|e| self.problem("", Problem::new("", e)))
            .ok()
    }
}

impl PolicyFile {
    /// Checks one file alone: syntax, schema, and what can be checked
    /// without the other files (cross-file references are checked by
    /// [`PolicySet::load`]).
    ///
    /// # Errors
    ///
    /// Every problem, by JSON pointer (line and column for `authz.cedar`).
    pub fn check(self, text: &str) -> Result<(), Vec<Problem>> {
        let mut loader = Loader::default();
        if self == Self::Authz {
            return Authz::parse(text).map(drop);
        }
        let text = Some(text);
        match self {
            Self::Callers => drop(loader.json::<CallersFile>(self, text, check::callers)),
            Self::Risk => drop(loader.json::<RiskFile>(self, text, check::risk)),
            Self::Context => drop(loader.json::<ContextFile>(self, text, check::context)),
            Self::Budgets => drop(loader.json::<BudgetsFile>(self, text, |_| Vec::new())),
            Self::Envelopes => drop(loader.json::<EnvelopesFile>(self, text, check::envelopes)),
            Self::Dispatch => drop(loader.json::<DispatchFile>(self, text, check::dispatch)),
            Self::Interface(slot) => {
                if let (Some(declared), Some(text)) = (slot.file(), text) {
                    drop(loader.interface(self, declared, text));
                }
            }
            Self::Authz => {}
        }
        if loader.problems.is_empty() {
            Ok(())
        } else {
            Err(loader.problems.into_iter().map(|p| p.problem).collect())
        }
    }
}
