//! `hcp review`: the checks of an install, none of them refusing, nothing
//! installed; the report is assembled by `hcp_bundle::review`.

use super::{BundleFile, InstallError, highest_installed, open, unpacked};
use crate::store::Store;
use hcp_bundle::review::{
    ApprovalFinding, Audit, AuditedImport, CallerAccess, CallerBudgets, Callers, EffectiveEnvelope,
    Findings, Review,
};
use hcp_contracts::manifest::ManifestDoc;
use hcp_policy::{InstallPolicy, PolicyFile, PolicySet};
use hcp_sandbox::audit::ImportVerdict;
use hcp_sandbox::{Sandbox, SurfaceReport};
use std::path::Path;

/// Everything `hcp review` reports: the same checks as an install, none of
/// them refusing, nothing installed; and who may call the capability
/// under the policy set in `policy_dir`, which `policy_source` names for
/// the reader (where it came from). Without a `store` (no data
/// directory), no publisher is trusted and no version is installed.
///
/// # Errors
///
/// The bundle's format is refused (there is nothing to review), or the
/// host cannot do its part.
pub fn review(
    store: Option<&Store>,
    sandbox: &Sandbox,
    file: &BundleFile,
    policy_dir: &Path,
    policy_source: &str,
) -> Result<Review, InstallError> {
    let bundle = open(file)?;
    let trusted = match store {
        Some(store) => store
            .trusted_publishers()?
            .iter()
            .map(crate::store::TrustedPublisher::as_trusted_key)
            .collect(),
        None => Vec::new(),
    };
    // Unpacked outside the capabilities directory: the review takes no
    // lock, so that a long compile never holds up an install.
    let (_unpacked, manifest) = unpacked(&bundle)?;
    let audit = match &manifest {
        Err(_) => Err("not run: the manifest is invalid".to_owned()),
        Ok(m) => sandbox
            .audit(m)
            .map(|report| audit_of(&report))
            .map_err(|e| e.to_string()),
    };
    let policy = match (&manifest, InstallPolicy::load(policy_dir)) {
        (_, Err(e)) => Err(format!("not checked: {e}")),
        (Err(_), _) => Err("not checked: the manifest is invalid".to_owned()),
        (Ok(m), Ok(p)) => Ok((p.origin().to_owned(), p.check(m))),
    };
    let installed = match store {
        Some(store) => highest_installed(store, &bundle.doc().capability.name)?,
        None => None,
    };
    let installed_component = installed.as_ref().map(|(top, _)| top.digest.clone());
    let installed = installed.map(|(top, doc)| (top.id(), doc));
    let findings = Findings {
        file: file.path.display().to_string(),
        bytes: file.bytes.len() as u64,
        sha256: file.sha256.clone(),
        trusted,
        manifest: manifest.map(drop).map_err(|e| e.to_string()),
        audit,
        policy,
        installed,
        installed_component,
        effective_envelope: effective_envelope(bundle.doc(), policy_dir),
        approval: approval(bundle.doc(), policy_dir),
        callers: callers(bundle.doc(), policy_dir, policy_source),
    };
    Ok(Review::new(&bundle, findings))
}

/// The envelope the gate would run this capability's tasks under: the
/// declaration's, tightened by the operator's `envelopes.json` (the gate's
/// own merge, [`PolicySet::effective_envelope`]).
fn effective_envelope(doc: &ManifestDoc, policy_dir: &Path) -> Result<EffectiveEnvelope, String> {
    let file = policy_dir
        .join(PolicyFile::Envelopes.name())
        .display()
        .to_string();
    let set = PolicySet::load(policy_dir)
        .map_err(|e| format!("not computed: the operator's policy does not load: {e}"))?;
    let merged = set.effective_envelope(doc).map_err(|r| {
        format!(
            "the gate would refuse every task of this capability until the policy is fixed: {}",
            r.reason_message
        )
    })?;
    Ok(EffectiveEnvelope {
        policy: file,
        has_entry: set.envelope_policy(&doc.capability.name).is_some(),
        envelope: merged.envelope,
        ignored: merged.ignored,
    })
}

/// Whether the operator's policy can ever ask the approval the declaration
/// requires ([`PolicySet::approval_reach`], the gate's own assessment);
/// `None` when it requires none.
fn approval(doc: &ManifestDoc, policy_dir: &Path) -> Option<Result<ApprovalFinding, String>> {
    if !doc.capability.safety.requires_human_approval {
        return None;
    }
    Some(match PolicySet::load(policy_dir) {
        Err(e) => Err(format!("the operator's policy does not load: {e}")),
        Ok(set) => Ok(set.approval_reach(&doc.capability).map_or_else(
            || ApprovalFinding {
                asked: true,
                detail: "required by the declaration".to_owned(),
            },
            |reach| ApprovalFinding {
                asked: reach.reachable,
                detail: reach.detail,
            },
        )),
    })
}

/// Who may call the capability under the policy set: when approval
/// applies, and every caller `callers.json` lists it for, with the ceilings
/// and budgets the gate gives its tasks.
fn callers(doc: &ManifestDoc, policy_dir: &Path, source: &str) -> Result<Callers, String> {
    let set = PolicySet::load(policy_dir)
        .map_err(|e| format!("the operator's policy does not load: {e}"))?;
    let declaration = &doc.capability;
    let ceiling = declaration.safety.risk_ceiling;
    let approval = match set.approval_reach(declaration) {
        None => "never asked: the declaration requires none".to_owned(),
        Some(reach) => reach.detail,
    };
    let callers = set
        .callers()
        .values()
        .filter(|c| c.lists(&declaration.name))
        .map(|c| {
            let b = set.budgets_for(c.id.as_str(), declaration);
            CallerAccess {
                id: c.id.as_str().to_owned(),
                kind: serde_json::to_value(c.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                listed: if c.all_capabilities {
                    "all_capabilities"
                } else {
                    "listed by name"
                },
                max_risk_level: c.max_risk_level.min(ceiling).to_string(),
                max_data_classification: c.max_data_classification.to_string(),
                budgets: CallerBudgets {
                    host_calls: b.host_calls,
                    bytes: b.bytes,
                    artifacts: b.artifacts,
                    caller_concurrent_sessions: b.caller_concurrent_sessions,
                    capability_concurrent_sessions: b.capability_concurrent_sessions,
                },
            }
        })
        .collect();
    Ok(Callers {
        policy_set: source.to_owned(),
        approval,
        callers,
    })
}

fn audit_of(report: &SurfaceReport) -> Audit {
    Audit {
        uses: report
            .imports
            .iter()
            .filter_map(|i| match &i.verdict {
                ImportVerdict::Allowed { granted_by } => granted_by.grant(),
                ImportVerdict::Refused { .. } => None,
            })
            .collect(),
        imports: report
            .imports
            .iter()
            .map(|i| match &i.verdict {
                ImportVerdict::Allowed { granted_by } => AuditedImport {
                    name: i.name.clone(),
                    allowed: true,
                    because: granted_by.describe().to_owned(),
                },
                ImportVerdict::Refused { reason } => AuditedImport {
                    name: i.name.clone(),
                    allowed: false,
                    because: reason.clone(),
                },
            })
            .collect(),
        exports: report.exports.clone(),
    }
}
