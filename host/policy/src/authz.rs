//! Cedar, the policy decision point: `authz.cedar`, checked against the
//! schema in `schemas/policy/authz.cedarschema`, answers `invoke` and
//! `approve` requests.
//!
//! Fail closed: a request the host cannot express, or one during which any
//! policy fails to evaluate, is denied. (Cedar itself skips a policy that
//! errors, which would let a broken `forbid` allow; this module does not.)

use crate::caller::Caller;
use cedar_policy as cedar;
use hcp_contracts::manifest::Declaration;
use hcp_contracts::message::RejectReason;
use hcp_contracts::{DataClass, Problem, RiskLevel};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::str::FromStr as _;
use std::sync::{Arc, Mutex};

/// The Cedar schema the host's entities and contexts follow.
pub const CEDAR_SCHEMA: &str = include_str!("../../../schemas/policy/authz.cedarschema");

/// Reason codes a `forbid` policy may give with `@reason`.
const REASONS: [(&str, RejectReason); 3] = [
    ("forbidden", RejectReason::Forbidden),
    ("risk_too_high", RejectReason::RiskTooHigh),
    ("resource_unavailable", RejectReason::ResourceUnavailable),
];

/// The checked Cedar policies.
#[derive(Debug, Clone)]
pub struct Authz {
    policies: cedar::PolicySet,
    schema: cedar::Schema,
    reasons: BTreeMap<String, RejectReason>,
    built: Built,
}

/// The entities and contexts of recent requests, by their JSON text.
/// Building them (parsing, and checking them against the schema) was most
/// of a decision's cost, and the same caller asks for the same capability
/// in the same circumstances again and again; the same JSON under the same
/// schema gives the same entities and context.
///
/// And the decisions themselves, by their entities' and request's JSON
/// text: Cedar's answer is a function of the policies (this set's, fixed),
/// the entities and the request, so the same text gets the same answer
/// without the request's entity ids parsed, the request checked against
/// the schema and the policies evaluated again (most of what a decision
/// still cost with its entities and context built).
#[derive(Debug, Default)]
struct Built {
    entities: Cache<Arc<cedar::Entities>>,
    contexts: Cache<cedar::Context>,
    decisions: Cache<AuthzDecision>,
}

impl Clone for Built {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// At most this many of each are kept; a cache starts afresh when full.
const BUILT: usize = 256;

#[derive(Debug)]
struct Cache<T>(Mutex<HashMap<String, T>>);

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<T: Clone> Cache<T> {
    fn get_or_build<E>(&self, key: String, build: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let mut built = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(value) = built.get(&key) {
            return Ok(value.clone());
        }
        let value = build()?;
        if built.len() >= BUILT {
            built.clear();
        }
        built.insert(key, value.clone());
        Ok(value)
    }
}

/// What is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthzAction {
    /// A caller submits a task.
    Invoke,
    /// An operator approves a task.
    Approve,
}

impl AuthzAction {
    /// The Cedar action id.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invoke => "invoke",
            Self::Approve => "approve",
        }
    }
}

/// The task facts Cedar sees as `context`.
#[derive(Debug, Clone)]
pub struct AuthzContext<'a> {
    /// The assessed risk level.
    pub risk: RiskLevel,
    /// The task's data classification.
    pub data: DataClass,
    /// Whether an unattended-hours window applies.
    pub unattended: bool,
    /// Declared resources now in use.
    pub busy_resources: &'a BTreeSet<String>,
    /// The caller that submitted the task.
    pub submitter: &'a str,
}

/// Cedar's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthzDecision {
    /// Allowed: a permit matched, no forbid matched, nothing failed.
    pub allowed: bool,
    /// `@id`s of the policies that decided (permits when allowed, forbids
    /// when denied by a forbid; empty when no permit matched).
    pub policies: Vec<String>,
    /// Evaluation errors; any one of them denies.
    pub errors: Vec<String>,
    /// For a denial by forbid policies: the reason code they give.
    pub reason: Option<RejectReason>,
}

/// A data classification as Cedar sees it: T1 = 1 … T4 = 4.
pub(crate) fn data_rank(class: DataClass) -> i64 {
    match class {
        DataClass::T1 => 1,
        DataClass::T2 => 2,
        DataClass::T3 => 3,
        DataClass::T4 => 4,
    }
}

impl Authz {
    /// Parses `text` and checks it: every policy has a unique `@id`,
    /// `@reason` only on forbids and with a known code, no templates, and
    /// the whole set validates against the schema (strict mode).
    ///
    /// # Errors
    ///
    /// Every problem, located by line and column.
    pub fn parse(text: &str) -> Result<Self, Vec<Problem>> {
        let schema = cedar::Schema::from_cedarschema_str(CEDAR_SCHEMA)
            .map(|(schema, _warnings)| schema)
            .map_err(|e| {
                vec![Problem::new(
                    "",
                    format!("the embedded Cedar schema does not load: {e}"),
                )]
            })?;
        if let Some(problem) = too_deep(text) {
            return Err(vec![problem]);
        }
        let parsed = cedar::PolicySet::from_str(text).map_err(|errs| {
            errs.iter()
                .map(|e| located(text, e, e.to_string()))
                .collect::<Vec<_>>()
        })?;
        let mut problems = Vec::new();
        if parsed.templates().next().is_some() {
            problems.push(Problem::new(
                "",
                "templates are not supported: write static policies",
            ));
        }
        let mut policies: Vec<&cedar::Policy> = parsed.policies().collect();
        // Cedar names them policy0, policy1, … in the order they are written.
        policies.sort_by_key(|p| {
            p.id()
                .to_string()
                .strip_prefix("policy")
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(usize::MAX)
        });
        let mut renamed = Vec::new();
        let mut reasons = BTreeMap::new();
        let mut seen = BTreeSet::new();
        let mut searched = 0;
        for (i, policy) in policies.into_iter().enumerate() {
            // Where the policy starts: its own text, found after the previous one.
            let found = policy.to_cedar().and_then(|own| {
                text.get(searched..)?
                    .find(own.trim())
                    .map(|at| (at + searched, own))
            });
            let at = match found {
                Some((offset, own)) => {
                    searched = offset + own.trim().len();
                    let line = text.get(..offset).unwrap_or_default().matches('\n').count() + 1;
                    format!("line {line}")
                }
                None => format!("policy {}", i + 1),
            };
            let Some(id) = policy.annotation("id") else {
                problems.push(Problem::new(
                    at,
                    "has no @id(\"...\"): every policy needs one, unique",
                ));
                continue;
            };
            if id.is_empty() || !seen.insert(id.to_owned()) {
                problems.push(Problem::new(
                    at,
                    format!("@id({id:?}) is empty or used twice"),
                ));
                continue;
            }
            if let Some(reason) = policy.annotation("reason") {
                match REASONS.iter().find(|(name, _)| *name == reason) {
                    _ if policy.effect() == cedar::Effect::Permit => problems.push(Problem::new(
                        at,
                        format!("{id}: @reason belongs on forbid policies only"),
                    )),
                    Some((_, code)) => {
                        reasons.insert(id.to_owned(), *code);
                    }
                    None => problems.push(Problem::new(
                        at,
                        format!(
                            "{id}: @reason({reason:?}) is not one of {}",
                            REASONS.map(|(n, _)| format!("{n:?}")).join(", ")
                        ),
                    )),
                }
            }
            renamed.push(policy.new_id(cedar::PolicyId::new(id)));
        }
        let policies = cedar::PolicySet::from_policies(renamed)
            .map_err(|e| vec![Problem::new("", format!("policy set: {e}"))])?;
        let validation = cedar::Validator::new(schema.clone())
            .validate(&policies, cedar::ValidationMode::Strict);
        // Cedar reports them in no particular order: sort by place, then text.
        let mut invalid: Vec<(usize, Problem)> = validation
            .validation_errors()
            .map(|e| (offset(e).unwrap_or(0), located(text, e, e.to_string())))
            .collect();
        invalid.sort_by(|a, b| (a.0, &a.1.message).cmp(&(b.0, &b.1.message)));
        invalid.dedup();
        problems.extend(invalid.into_iter().map(|(_, p)| p));
        if problems.is_empty() {
            Ok(Self {
                policies,
                schema,
                reasons,
                built: Built::default(),
            })
        } else {
            Err(problems)
        }
    }

    /// The `@id` of every policy.
    pub fn policy_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .policies
            .policies()
            .map(|p| p.id().to_string())
            .collect();
        ids.sort();
        ids
    }

    /// Asks Cedar whether `caller` may `action` the capability `declaration`
    /// describes, in `context`. Never errs: what cannot be asked is denied.
    pub fn decide(
        &self,
        action: AuthzAction,
        caller: &Caller,
        declaration: &Declaration,
        context: &AuthzContext<'_>,
    ) -> AuthzDecision {
        let denied = |error: String| AuthzDecision {
            allowed: false,
            policies: Vec::new(),
            errors: vec![error],
            reason: None,
        };
        let asked = self.asked(action, caller, declaration, context);
        let key = format!("{}\n{}", asked.entities_key, asked.context_key);
        match self
            .built
            .decisions
            .get_or_build(key, || self.evaluate(action, caller, declaration, asked))
        {
            Ok(decision) => decision,
            Err(e) => denied(e.to_string()),
        }
    }

    /// Cedar's answer to what was `asked`, built and evaluated.
    fn evaluate(
        &self,
        action: AuthzAction,
        caller: &Caller,
        declaration: &Declaration,
        asked: Asked,
    ) -> Result<AuthzDecision, RequestError> {
        let (request, entities) = self.request(action, caller, declaration, asked)?;
        let response = cedar::Authorizer::new().is_authorized(&request, &self.policies, &entities);
        let mut policies: Vec<String> = response
            .diagnostics()
            .reason()
            .map(ToString::to_string)
            .collect();
        policies.sort();
        let mut errors: Vec<String> = response
            .diagnostics()
            .errors()
            .map(ToString::to_string)
            .collect();
        errors.sort();
        let allowed = response.decision() == cedar::Decision::Allow && errors.is_empty();
        let reason = (!allowed && !policies.is_empty()).then(|| {
            policies
                .iter()
                .map(|id| {
                    self.reasons
                        .get(id)
                        .copied()
                        .unwrap_or(RejectReason::Forbidden)
                })
                .min_by_key(|r| REASONS.iter().position(|(_, c)| c == r))
                .unwrap_or(RejectReason::Forbidden)
        });
        Ok(AuthzDecision {
            allowed,
            policies,
            errors,
            reason,
        })
    }

    /// The entities and context of a request as JSON, with their text.
    fn asked(
        &self,
        action: AuthzAction,
        caller: &Caller,
        declaration: &Declaration,
        context: &AuthzContext<'_>,
    ) -> Asked {
        let kind = caller.kind.as_str();
        let safety = &declaration.safety;
        // A caller listed for every capability (`all_capabilities`) is
        // listed for this one: Cedar sees it in `capabilities`, as if
        // callers.json named it.
        let mut capabilities: Vec<&str> = caller.capabilities.iter().map(|c| c.as_str()).collect();
        if caller.all_capabilities && !capabilities.contains(&declaration.name.as_str()) {
            capabilities.push(declaration.name.as_str());
        }
        let entities = json!([
            {
                "uid": { "type": "Hcp::Caller", "id": caller.id.as_str() },
                "attrs": {
                    "id": caller.id.as_str(),
                    "capabilities": capabilities,
                    "max_risk": caller.max_risk_level.rank(),
                    "max_data": data_rank(caller.max_data_classification),
                },
                "parents": [{ "type": "Hcp::Kind", "id": kind }],
            },
            { "uid": { "type": "Hcp::Kind", "id": kind }, "attrs": {}, "parents": [] },
            {
                "uid": { "type": "Hcp::Capability", "id": declaration.name },
                "attrs": {
                    "name": declaration.name,
                    "risk_ceiling": safety.risk_ceiling.rank(),
                    "requires_human_approval": safety.requires_human_approval,
                    "involves_physical_resources": safety.involves_physical_resources,
                    "resource_types": safety.resource_types,
                    "hazard_categories": safety.hazard_categories,
                },
                "parents": [],
            },
        ]);
        let context = json!({
            "risk": context.risk.rank(),
            "data": data_rank(context.data),
            "unattended": context.unattended,
            "busy_resources": context.busy_resources,
            "submitter": context.submitter,
        });
        Asked {
            entities_key: entities.to_string(),
            entities,
            context_key: format!("{}\n{context}", action.as_str()),
            context,
        }
    }

    fn request(
        &self,
        action: AuthzAction,
        caller: &Caller,
        declaration: &Declaration,
        asked: Asked,
    ) -> Result<(cedar::Request, Arc<cedar::Entities>), RequestError> {
        let Asked {
            entities,
            entities_key,
            context,
            context_key,
        } = asked;
        let entities = self.built.entities.get_or_build(entities_key, || {
            cedar::Entities::from_json_value(entities, Some(&self.schema))
                .map(Arc::new)
                .map_err(|e| RequestError::Entities(e.to_string()))
        })?;
        let uid = |kind: &str, id: &str| -> Result<cedar::EntityUid, RequestError> {
            cedar::EntityUid::from_json(json!({ "type": kind, "id": id })).map_err(|e| {
                RequestError::Entity {
                    kind: kind.to_owned(),
                    id: id.to_owned(),
                    reason: e.to_string(),
                }
            })
        };
        let action_uid = uid("Hcp::Action", action.as_str())?;
        let context = self.built.contexts.get_or_build(context_key, || {
            cedar::Context::from_json_value(context, Some((&self.schema, &action_uid)))
                .map_err(|e| RequestError::Context(e.to_string()))
        })?;
        let request = cedar::Request::new(
            uid("Hcp::Caller", caller.id.as_str())?,
            action_uid,
            uid("Hcp::Capability", &declaration.name)?,
            context,
            Some(&self.schema),
        )
        .map_err(|e| RequestError::Request(e.to_string()))?;
        Ok((request, entities))
    }
}

/// A request's entities and context as JSON, and their text (the caches'
/// keys).
struct Asked {
    entities: serde_json::Value,
    entities_key: String,
    context: serde_json::Value,
    context_key: String,
}

/// Why a Cedar request could not be built (the decision is then a denial
/// carrying this as its error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RequestError {
    #[error("entities: {0}")]
    Entities(String),
    #[error("entity {kind}::{id:?}: {reason}")]
    Entity {
        kind: String,
        id: String,
        reason: String,
    },
    #[error("context: {0}")]
    Context(String),
    #[error("request: {0}")]
    Request(String),
}

/// Where in the text the first label of a Cedar diagnostic points.
fn offset(diagnostic: &dyn miette::Diagnostic) -> Option<usize> {
    diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset())
}

/// A problem located at the first label of a Cedar diagnostic.
/// How deep Cedar text may nest: brackets, a run of unary operators, `if`s
/// within one policy. Cedar's parser recurses once per level with no bound
/// of its own: 100,000 parentheses overflowed the thread's stack, which
/// aborts the process (`hcp replay` reads the policy a pack recorded).
const MAX_CEDAR_NESTING: usize = 200;

/// The first place `text` nests past [`MAX_CEDAR_NESTING`], as a problem;
/// string literals and comments are skipped.
fn too_deep(text: &str) -> Option<Problem> {
    let bytes = text.as_bytes();
    let at = |i: usize, what: &str| {
        let before = &text[..i];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Some(Problem::new(
            format!("line {line}, column {column}"),
            format!("{what} nested more than {MAX_CEDAR_NESTING} deep"),
        ))
    };
    let (mut brackets, mut unary, mut ifs) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                // To the closing quote, escapes skipped.
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                brackets += 1;
                if brackets > MAX_CEDAR_NESTING {
                    return at(i, "brackets");
                }
            }
            b')' | b']' | b'}' => brackets = brackets.saturating_sub(1),
            b'!' | b'-' if bytes.get(i + 1) != Some(&b'=') => {
                unary += 1;
                if unary > MAX_CEDAR_NESTING {
                    return at(i, "unary operators");
                }
            }
            b';' => ifs = 0,
            b'i' if bytes.get(i + 1) == Some(&b'f')
                && !bytes
                    .get(i + 2)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')) =>
            {
                ifs += 1;
                if ifs > MAX_CEDAR_NESTING {
                    return at(i, "`if` expressions");
                }
            }
            _ => {}
        }
        // A run of unary operators ends at anything but another one, a
        // bracket or white space.
        if !matches!(b, b'!' | b'-' | b'(' | b'[' | b' ' | b'\t' | b'\n' | b'\r') {
            unary = 0;
        }
        i += 1;
    }
    None
}

fn located(text: &str, diagnostic: &dyn miette::Diagnostic, message: String) -> Problem {
    let offset = offset(diagnostic);
    let message = match diagnostic.help() {
        Some(help) => format!("{message} (help: {help})"),
        None => message,
    };
    match offset {
        Some(offset) => {
            let before = text.get(..offset).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Problem::new(format!("line {line}, column {column}"), message)
        }
        None => Problem::new("", message),
    }
}
