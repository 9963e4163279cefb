//! The review report of a bundle: everything a reviewer needs to approve it
//! from one page. The host gathers what needs I/O (trust store, surface
//! audit, policy, installed versions) and hands it in as [`Findings`];
//! this module assembles the report and renders it as text or Markdown
//! (JSON through serde).

mod markdown;
mod render;
mod text;
mod verdicts;

use crate::bundle::Bundle;
use crate::diff::{self, Change};
use crate::signature::{SignatureStatus, Signer, TrustedKey, check_trust};
use crate::wit::{InterfaceDoc, WitPackage, wasi_summary};
use hcp_contracts::manifest::{
    DeclaredConstraints, GrantsDoc, HOST_WIT_PACKAGE, Limits, ManifestDoc, Safety, SafetyEnvelope,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub use markdown::markdown;
pub use text::text;
pub use verdicts::same_component_note;
use verdicts::{envelope_verdict, grants_verdict};

/// One import's audit verdict, as the host's surface audit gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditedImport {
    /// The import, e.g. `wasi:filesystem/types@0.2.12`.
    pub name: String,
    /// Whether the grants allow it.
    pub allowed: bool,
    /// The grant that allows it, or why it is refused.
    pub because: String,
}

/// A kind of grant an import can put to use: the grants of the table of
/// interfaces.
pub use hcp_contracts::interfaces::Grant as GrantKind;

/// The surface audit's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Audit {
    /// Every import.
    pub imports: Vec<AuditedImport>,
    /// Every export.
    pub exports: Vec<String>,
    /// The grants some allowed import puts to use (an import that is
    /// always granted, or linked but inert, uses none).
    pub uses: BTreeSet<GrantKind>,
}

/// The envelope tasks run under once the operator's policy has tightened
/// the publisher's, as the host's gate computes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EffectiveEnvelope {
    /// The policy file that tightens it (`envelopes.json`).
    pub policy: String,
    /// Whether that file has an entry for this capability (else the
    /// publisher's envelope stands as declared).
    pub has_entry: bool,
    /// The merged envelope.
    pub envelope: SafetyEnvelope,
    /// Policy values looser than the publisher's, ignored (a policy never
    /// loosens).
    pub ignored: Vec<String>,
}

/// What the host found out about a bundle, to be assembled into a
/// [`Review`].
#[derive(Debug, Clone)]
pub struct Findings {
    /// The bundle file as named on the command line.
    pub file: String,
    /// Its size.
    pub bytes: u64,
    /// `sha256:` of the file.
    pub sha256: String,
    /// The host's trusted publishers.
    pub trusted: Vec<TrustedKey>,
    /// The manifest check (`hcp_contracts::manifest::from_value` with the
    /// digest required): `Err` holds its message.
    pub manifest: Result<(), String>,
    /// The surface audit, or why it could not run.
    pub audit: Result<Audit, String>,
    /// The install policy's verdict: the policy's name and every reason it
    /// refuses (empty: within the policy), or why it could not be checked.
    pub policy: Result<(String, Vec<String>), String>,
    /// The highest installed version of the same capability and its
    /// manifest, if any.
    pub installed: Option<(String, ManifestDoc)>,
    /// `sha256:` of that installed version's component.
    pub installed_component: Option<String>,
    /// The effective envelope under the operator's policy, or why it
    /// cannot be computed (a policy that does not load, or an envelope the
    /// gate cannot merge and so refuses every task of).
    pub effective_envelope: Result<EffectiveEnvelope, String>,
    /// For a declaration that requires human approval: whether the
    /// operator's policy can ever ask for it, or why that could not be
    /// found out (a policy that does not load). `None` when the
    /// declaration requires none.
    pub approval: Option<Result<ApprovalFinding, String>>,
    /// Who may call the capability under the operator's policy, or why
    /// that could not be found out (a policy that does not load).
    pub callers: Result<Callers, String>,
}

/// Who may call a capability under a policy set, as the gate admits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Callers {
    /// The policy set read, and where it came from (given, found, or the
    /// shipped one).
    pub policy_set: String,
    /// When approval applies: the levels it is asked at, or that it is
    /// never asked.
    pub approval: String,
    /// Every caller `callers.json` lets submit tasks of it (Cedar's
    /// `forbid` rules may refuse some tasks still), by id.
    pub callers: Vec<CallerAccess>,
}

/// One caller who may call the capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallerAccess {
    /// The caller's id.
    pub id: String,
    /// `service`, `supervised_session`, `operator`, ...
    pub kind: String,
    /// Listed by name, or through `all_capabilities`.
    pub listed: &'static str,
    /// The highest assessed risk its tasks are admitted at (the lower of
    /// its `max_risk_level` and the declaration's ceiling).
    pub max_risk_level: String,
    /// The most sensitive data class it may submit.
    pub max_data_classification: String,
    /// Its tasks' budgets.
    pub budgets: CallerBudgets,
}

/// A caller's budgets for one task of the capability, as the gate computes
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CallerBudgets {
    /// Host calls per task.
    pub host_calls: u64,
    /// Bytes moved through host calls per task.
    pub bytes: u64,
    /// Artifacts per task.
    pub artifacts: u64,
    /// Sessions of this caller at once.
    pub caller_concurrent_sessions: u32,
    /// Sessions of this capability at once.
    pub capability_concurrent_sessions: u32,
}

/// Whether the gate can ever ask a human to approve a task of a
/// capability whose declaration requires approval, under the operator's
/// policy (as the host's gate assesses risk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalFinding {
    /// Some task can be admitted at a level that needs approval.
    pub asked: bool,
    /// Why, in words.
    pub detail: String,
}

/// A verdict's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Fine.
    Pass,
    /// Installable only with an explicit flag.
    Conditional,
    /// Refused.
    Fail,
    /// For the reviewer's attention; installs as it would without it.
    Warn,
}

/// One check and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// `signature`, `trust`, `world`, `manifest`, `audit`, `grants`,
    /// `policy`, `envelope`, `approval` (only when the declaration requires
    /// approval), `upgrade`.
    pub check: &'static str,
    /// Outcome.
    pub status: Status,
    /// Why.
    pub detail: String,
}

/// An import with its grant and the documentation of its interface.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReview {
    /// The import as the component names it.
    pub name: String,
    /// Whether the grants allow it.
    pub allowed: bool,
    /// The grant that allows it, or why it is refused.
    pub because: String,
    /// The interface's documentation.
    pub docs: ImportDocs,
}

/// Documentation of an imported interface.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum ImportDocs {
    /// From the host's WIT package (`///` comments in `wit/*.wit`).
    Wit {
        /// The interface.
        interface: InterfaceDoc,
    },
    /// A WASI interface: what it gives a capability on this host.
    Wasi {
        /// One line.
        summary: String,
    },
    /// Nothing known: the interface is not provided by this host.
    None,
}

/// One limit, with where its value comes from.
#[derive(Debug, Clone, Serialize)]
pub struct LimitLine {
    /// e.g. `memory_bytes`.
    pub name: &'static str,
    /// Its value.
    pub value: u64,
    /// Whether the manifest sets it (else the host's default).
    pub declared: bool,
}

/// A bundled data directory.
#[derive(Debug, Clone, Serialize)]
pub struct DataDir {
    /// `samples`.
    pub dir: String,
    /// Files under it.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// The review report.
#[derive(Debug, Clone, Serialize)]
pub struct Review {
    /// The bundle file.
    pub file: String,
    /// Its size.
    pub bytes: u64,
    /// Its sha256.
    pub sha256: String,
    /// `name`.
    pub capability: String,
    /// `version`.
    pub version: String,
    /// The declaration's description.
    pub description: String,
    /// `component.world`.
    pub world: String,
    /// The bundled WIT package, `name@version`.
    pub wit_package: String,
    /// Whether its files are exactly this host's.
    pub wit_is_hosts: bool,
    /// The verified signer, if any.
    pub publisher: Option<Signer>,
    /// `sha256:` of the canonical manifest.
    pub manifest_digest: String,
    /// `sha256:` of the component.
    pub component_digest: String,
    /// Its size.
    pub component_bytes: u64,
    /// `sha256:` of every other file.
    pub files: BTreeMap<String, String>,
    /// Every check, in order.
    pub verdicts: Vec<Verdict>,
    /// The overall outcome.
    pub outcome: Status,
    /// The declaration's safety section.
    pub safety: Safety,
    /// The declaration's constraints.
    pub constraints: Option<DeclaredConstraints>,
    /// The grants as written.
    pub grants: GrantsDoc,
    /// Data shipped in the bundle.
    pub data: Vec<DataDir>,
    /// The publisher's safety envelope.
    pub envelope: SafetyEnvelope,
    /// The envelope tasks run under after the operator's policy; `None`
    /// when it cannot be computed (the `envelope` verdict says why).
    pub effective_envelope: Option<EffectiveEnvelope>,
    /// Every limit.
    pub limits: Vec<LimitLine>,
    /// Every import, with its docs; empty when the audit could not run.
    pub imports: Vec<ImportReview>,
    /// Every export.
    pub exports: Vec<String>,
    /// The installed version compared with, and the differences.
    pub upgrade: Option<Upgrade>,
    /// Who may call it under the operator's policy; `None` when that could
    /// not be found out (`callers_error` says why).
    pub callers: Option<Callers>,
    /// Why `callers` is `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callers_error: Option<String>,
}

/// The comparison with the highest installed version.
#[derive(Debug, Clone, Serialize)]
pub struct Upgrade {
    /// `name@version` installed.
    pub installed: String,
    /// Every difference, widening first.
    pub changes: Vec<Change>,
    /// The component is byte-identical to the installed one's: only the
    /// manifest changed.
    pub same_component: bool,
}

impl Review {
    /// Assembles the report.
    pub fn new(bundle: &Bundle, findings: Findings) -> Self {
        let doc = bundle.doc();
        let host_wit = WitPackage::host().ok();
        let mut verdicts = Vec::new();
        let status = bundle.signature_status();
        let publisher = match &status {
            SignatureStatus::Verified(s) => Some(Signer::clone(s)),
            _ => None,
        };
        verdicts.push(signature_verdict(&status));
        verdicts.push(trust_verdict(&status, &findings.trusted));
        verdicts.push(result_verdict(
            "world",
            bundle.check_world().map(|()| {
                format!(
                    "targets {}; this host implements {HOST_WIT_PACKAGE}@{}",
                    doc.component.world,
                    hcp_contracts::manifest::HOST_WIT_VERSION
                )
            }),
        ));
        verdicts.push(result_verdict(
            "manifest",
            findings
                .manifest
                .clone()
                .map(|()| "valid; the component's digest is pinned".to_owned()),
        ));
        verdicts.push(result_verdict(
            "audit",
            findings.audit.as_ref().map_err(Clone::clone).and_then(|a| {
                let refused: Vec<&str> = a
                    .imports
                    .iter()
                    .filter(|i| !i.allowed)
                    .map(|i| i.name.as_str())
                    .collect();
                // The host's audit says "linked, inert: ..." of an import
                // it links without authority (not granted, every use denied).
                let inert = a
                    .imports
                    .iter()
                    .filter(|i| i.allowed && i.because.starts_with("linked, inert"))
                    .count();
                if refused.is_empty() && inert > 0 {
                    Ok(format!(
                        "{} imports, every one within the grants ({inert} linked, inert)",
                        a.imports.len()
                    ))
                } else if refused.is_empty() {
                    Ok(format!(
                        "{} imports, every one within the grants",
                        a.imports.len()
                    ))
                } else {
                    Err(format!(
                        "{} of {} imports outside the grants: {}",
                        refused.len(),
                        a.imports.len(),
                        refused.join(", ")
                    ))
                }
            }),
        ));
        verdicts.push(grants_verdict(doc, &findings.audit));
        verdicts.push(result_verdict(
            "policy",
            findings.policy.clone().and_then(|(name, reasons)| {
                if reasons.is_empty() {
                    Ok(format!("within {name}"))
                } else {
                    Err(format!("refused by {name}: {}", reasons.join("; ")))
                }
            }),
        ));
        verdicts.push(envelope_verdict(doc, &findings.effective_envelope));
        if let Some(approval) = &findings.approval {
            verdicts.push(approval_verdict(approval));
        }
        let upgrade = findings.installed.as_ref().map(|(id, old)| Upgrade {
            installed: id.clone(),
            changes: diff::compare(old, doc),
            same_component: findings.installed_component.as_deref()
                == Some(bundle.component_digest()),
        });
        let mut upgrade_verdict = match &upgrade {
            None => Verdict {
                check: "upgrade",
                status: Status::Pass,
                detail: format!("no version of {} is installed", doc.capability.name),
            },
            Some(u) if diff::widens(&u.changes) => Verdict {
                check: "upgrade",
                status: Status::Conditional,
                detail: format!(
                    "widens what {} may do ({} change{}); installable only with --accept-new-grants",
                    u.installed,
                    u.changes.iter().filter(|c| c.widens).count(),
                    if u.changes.iter().filter(|c| c.widens).count() == 1 {
                        ""
                    } else {
                        "s"
                    }
                ),
            },
            Some(u) => Verdict {
                check: "upgrade",
                status: Status::Pass,
                detail: format!("allows nothing {} did not", u.installed),
            },
        };
        if let Some(u) = upgrade.as_ref().filter(|u| u.same_component) {
            upgrade_verdict
                .detail
                .push_str(&format!("; {}", same_component_note(&u.installed)));
        }
        verdicts.push(upgrade_verdict);
        let outcome = if verdicts.iter().any(|v| v.status == Status::Fail) {
            Status::Fail
        } else if verdicts.iter().any(|v| v.status == Status::Conditional) {
            Status::Conditional
        } else {
            Status::Pass
        };
        let (imports, exports) = match &findings.audit {
            Ok(a) => (
                a.imports
                    .iter()
                    .map(|i| ImportReview {
                        name: i.name.clone(),
                        allowed: i.allowed,
                        because: i.because.clone(),
                        docs: import_docs(&i.name, host_wit.as_ref()),
                    })
                    .collect(),
                a.exports.clone(),
            ),
            Err(_) => (Vec::new(), Vec::new()),
        };
        let files = bundle.file_digests();
        let data = bundle
            .data_dirs()
            .iter()
            .map(|dir| {
                let (files, bytes) = bundle
                    .entries()
                    .iter()
                    .filter(|(p, _)| {
                        p.strip_prefix(dir.as_str())
                            .is_some_and(|r| r.starts_with('/'))
                    })
                    .fold((0, 0u64), |(n, b), (_, bytes)| {
                        (n + 1, b + bytes.len() as u64)
                    });
                DataDir {
                    dir: dir.clone(),
                    files,
                    bytes,
                }
            })
            .collect();
        Self {
            file: findings.file,
            bytes: findings.bytes,
            sha256: findings.sha256,
            capability: doc.capability.name.clone(),
            version: doc.capability.version.clone(),
            description: doc.capability.description.clone(),
            world: doc.component.world.clone(),
            wit_package: bundle.wit().id(),
            wit_is_hosts: bundle.wit_is_hosts(),
            publisher,
            manifest_digest: bundle.manifest_digest().to_owned(),
            component_digest: bundle.component_digest().to_owned(),
            component_bytes: bundle.component().len() as u64,
            files: files
                .into_iter()
                .filter(|(p, _)| p != crate::layout::COMPONENT)
                .collect(),
            verdicts,
            outcome,
            safety: doc.capability.safety.clone(),
            constraints: doc.capability.constraints.clone(),
            grants: doc.grants.clone(),
            data,
            envelope: doc.safety_envelope.clone(),
            effective_envelope: findings.effective_envelope.ok(),
            limits: limits(doc),
            imports,
            exports,
            upgrade,
            callers_error: findings.callers.as_ref().err().cloned(),
            callers: findings.callers.ok(),
        }
    }
}

/// A declared approval the policy can never ask for is a warning: the
/// capability's tasks run without the human its publisher asks for.
fn approval_verdict(approval: &Result<ApprovalFinding, String>) -> Verdict {
    let (status, detail) = match approval {
        Ok(a) if a.asked => (Status::Pass, a.detail.clone()),
        Ok(a) => (Status::Warn, a.detail.clone()),
        Err(e) => (Status::Warn, format!("not checked: {e}")),
    };
    Verdict {
        check: "approval",
        status,
        detail,
    }
}

fn signature_verdict(status: &SignatureStatus) -> Verdict {
    let (status, detail) = match status {
        SignatureStatus::Verified(s) => (
            Status::Pass,
            format!(
                "signed by {} with key {}; the signature covers the manifest and every file",
                s.publisher, s.key_id
            ),
        ),
        SignatureStatus::Unsigned => (
            Status::Conditional,
            "unsigned: nobody vouches for this bundle; installable only with --allow-unsigned, \
             for local development"
                .to_owned(),
        ),
        SignatureStatus::Invalid(reason) => (Status::Fail, reason.clone()),
    };
    Verdict {
        check: "signature",
        status,
        detail,
    }
}

fn trust_verdict(status: &SignatureStatus, trusted: &[TrustedKey]) -> Verdict {
    let (status, detail) = match status {
        SignatureStatus::Verified(s) => match check_trust(s, trusted) {
            Ok(t) => (
                Status::Pass,
                format!(
                    "publisher {} is trusted on this host with key {}",
                    t.publisher,
                    t.public_key.key_id()
                ),
            ),
            Err(e) => (Status::Fail, e.to_string()),
        },
        SignatureStatus::Unsigned => (
            Status::Conditional,
            "no publisher to trust (unsigned)".to_owned(),
        ),
        SignatureStatus::Invalid(_) => (
            Status::Fail,
            "not checked: the signature is invalid".to_owned(),
        ),
    };
    Verdict {
        check: "trust",
        status,
        detail,
    }
}

fn result_verdict(check: &'static str, result: Result<String, String>) -> Verdict {
    match result {
        Ok(detail) => Verdict {
            check,
            status: Status::Pass,
            detail,
        },
        Err(detail) => Verdict {
            check,
            status: Status::Fail,
            detail,
        },
    }
}

fn import_docs(name: &str, host: Option<&WitPackage>) -> ImportDocs {
    let path = name.split_once('@').map_or(name, |(p, _)| p);
    if let Some((package, interface)) = path.split_once('/')
        && package == HOST_WIT_PACKAGE
        && let Some(doc) = host.and_then(|h| h.interfaces.get(interface))
    {
        return ImportDocs::Wit {
            interface: doc.clone(),
        };
    }
    match wasi_summary(path) {
        Some(summary) => ImportDocs::Wasi {
            summary: summary.to_owned(),
        },
        None => ImportDocs::None,
    }
}

fn limits(doc: &ManifestDoc) -> Vec<LimitLine> {
    doc.limits
        .each()
        .zip(Limits::DEFAULT.each())
        .map(|((name, declared), (_, default))| (name, declared, default))
        .map(|(name, declared, default)| LimitLine {
            name,
            value: declared.unwrap_or(default),
            declared: declared.is_some(),
        })
        .collect()
}
