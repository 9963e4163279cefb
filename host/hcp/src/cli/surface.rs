//! `hcp surface`: a component's imports and exports against its grants.

use super::{Outcome, Paths, load_manifest, print_json, sandbox};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `hcp surface`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Compiles the manifest's component and lists every import with the grant \
that allows it, or why it is refused; every export; the grants; and the verdict. Nothing is \
instantiated or run.\n\nExit status: 0 allowed, 1 refused, 2 the manifest or component is \
invalid."
)]
pub struct SurfaceArgs {
    /// The capability manifest.
    manifest: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(paths: &Paths, args: SurfaceArgs) -> Outcome {
    let manifest = load_manifest(&args.manifest)?;
    let report = sandbox(paths)?.audit(&manifest)?;
    if args.json {
        print_json(&report)?;
    } else {
        println!("{report}");
    }
    Ok(if report.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
