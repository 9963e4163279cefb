//! `hcp review`: everything a reviewer needs to approve a bundle, on one
//! page.

use super::dirs::PolicySource;
use super::output::for_terminal;
use super::{HostDirs, Outcome, print_json, sandbox};
use crate::install::{self, InstallError};
use crate::store::Store;
use hcp_bundle::review::{self, Status};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `hcp review`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Reviews a bundle without installing it: the verdict of every check an install \
runs (signature, trust, world, manifest, surface audit, install policy, comparison with the \
installed versions), the publisher and digests, the declaration's safety section, the grants, \
the safety envelope and limits, and each import of the component with the grant that allows \
it and the documentation of its interface (the host's WIT package); and who may call it under \
the policy set: each caller with its risk and data ceilings and its tasks' budgets, and when \
approval is asked.\n\n\
The policy set is --policies (HCP_POLICIES), else ./policies, else the data directory's; where \
none exists, the set shipped with hcp (the report says which). Without a data directory, no \
publisher is trusted and no version is installed, and nothing is written.\n\n\
Exit status: 0 installable, 1 refused or installable only with a flag, 2 not a readable bundle."
)]
pub struct ReviewArgs {
    /// The bundle (.hcpb).
    bundle: PathBuf,
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the report as Markdown.
    #[arg(long)]
    markdown: bool,
    #[command(flatten)]
    dirs: HostDirs,
}

pub(super) fn run(args: ReviewArgs) -> Outcome {
    let (paths, source, _temp) = args.dirs.paths_for_reading()?;
    let paths = &paths;
    let shown = args.bundle.display().to_string();
    let refused = |e: InstallError| match e {
        InstallError::Host(e) => e,
        other => anyhow::anyhow!("{shown}: {other}"),
    };
    let file = install::read_bundle_file(&args.bundle).map_err(refused)?;
    let shown_policies = paths.policies_dir.display();
    let policy_source = match source {
        PolicySource::Given => format!("{shown_policies} (given by --policies or HCP_POLICIES)"),
        PolicySource::Found => format!("{shown_policies}"),
        PolicySource::Shipped => "the policy set shipped with hcp (no --policies, no ./policies, \
                                  none in the data directory)"
            .to_owned(),
    };
    // Without a data directory, none is made: nothing trusted, nothing
    // installed.
    let store = if paths.data_dir.join("hcp.db").is_file() {
        Some(Store::open(&paths.data_dir)?)
    } else {
        eprintln!(
            "note: no data directory at {}: no publisher is trusted and no version is installed \
             in this review (give --data-dir or HCP_DATA_DIR for a host's)",
            paths.data_dir.display()
        );
        None
    };
    let report = install::review(
        store.as_ref(),
        &sandbox(paths)?,
        &file,
        &paths.policies_dir,
        &policy_source,
    )
    .map_err(refused)?;
    if args.json {
        print_json(&report)?;
    } else if args.markdown {
        print!("{}", for_terminal(&review::markdown(&report)));
    } else {
        print!("{}", for_terminal(&review::text(&report)));
    }
    Ok(if report.outcome == Status::Pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
