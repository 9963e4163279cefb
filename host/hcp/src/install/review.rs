//! `hcp review`: the checks of an install, none of them refusing, nothing
//! installed; the report is assembled by `hcp_bundle::review`.

use super::{
    BundleFile, Capabilities, InstallError, check_manifest, highest_installed, open, unpack,
};
use crate::store::Store;
use hcp_bundle::review::{Audit, AuditedImport, Findings, Review};
use hcp_policy::InstallPolicy;
use hcp_sandbox::audit::ImportVerdict;
use hcp_sandbox::{Sandbox, SurfaceReport};
use std::path::Path;

/// Everything `hcp review` reports: the same checks as an install, none of
/// them refusing, nothing installed.
///
/// # Errors
///
/// The bundle's format is refused (there is nothing to review), or the
/// host cannot do its part.
pub fn review(
    store: &Store,
    sandbox: &Sandbox,
    file: &BundleFile,
    policy_dir: &Path,
) -> Result<Review, InstallError> {
    let bundle = open(file)?;
    let trusted = store
        .trusted_publishers()?
        .iter()
        .map(crate::store::TrustedPublisher::as_trusted_key)
        .collect();
    // Held until the staged copy is deleted: an install's sweep of
    // leftovers must not delete it under the review.
    let caps = Capabilities::lock(store.dir())?;
    let staging = caps.stage()?;
    unpack(&bundle, &staging)?;
    let manifest = check_manifest(&bundle, &staging);
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
    let installed =
        highest_installed(store, &bundle.doc().capability.name)?.map(|(top, doc)| (top.id(), doc));
    let findings = Findings {
        file: file.path.display().to_string(),
        bytes: file.bytes.len() as u64,
        sha256: file.sha256.clone(),
        trusted,
        manifest: manifest.map(drop).map_err(|e| e.to_string()),
        audit,
        policy,
        installed,
    };
    Ok(Review::new(&bundle, findings))
}

fn audit_of(report: &SurfaceReport) -> Audit {
    Audit {
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
