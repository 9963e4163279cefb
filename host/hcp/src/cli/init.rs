//! `hcp init`: a data directory with a starting policy set, so that `hcp
//! run`, `hcp submit`, `hcp install` and `hcp serve` work outside this
//! repository; and where the policies are found when no `--policies` /
//! `HCP_POLICIES` names them.
//!
//! # Where the policies are
//!
//! `--policies` or `HCP_POLICIES` when given; otherwise `./policies` when it
//! is a directory (this repository's shipped set, as before); otherwise
//! `policies/` in the data directory, which `hcp init` writes.
//!
//! # What `hcp init` writes
//!
//! - `<dir>/policies/`: the gate's seven files and `install.json`, checked
//!   with the same loaders the host uses before they are put in place (one
//!   rename: a set is complete or absent). Two callers, each with a fresh
//!   random token that is printed once and stored only as its SHA-256: a
//!   local `developer` (supervised session) listed for every installed
//!   capability up to R2 and T2, and an `operator` (approves, up to R4 and
//!   T3). Cedar's rules are the shipped ones.
//! - `<dir>/keys/publisher.key`: a publisher key (mode 0600), trusted in
//!   this data directory as `local-developer`, so `hcp bundle sign --key`
//!   signs the author's own bundles for `hcp install` here.
//! - The host key (`keys/host.key`), as `hcp keys init` makes it.
//!
//! An existing policy set is never replaced (its tokens were shown once).

use super::{DataDir, Outcome, Paths};
use crate::store::{Added, Store};
use anyhow::Context as _;
use hcp_bundle::PublisherName;
use hcp_policy::{InstallPolicy, PolicySet};
use hcp_receipts::HostKey;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `hcp init`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Makes a data directory that the host runs from outside this repository: \
policies/ with a starting policy set (a local developer caller allowed every installed \
capability up to R2, an operator), a publisher key trusted here as local-developer for signing \
your own bundles, and the host key.\n\n\
The callers' tokens are printed once, on stdout; the policy keeps only their SHA-256. Nothing \
is replaced: an existing policies/ refuses the command.\n\n\
Commands find these policies by themselves when neither --policies nor HCP_POLICIES is given \
and ./policies does not exist."
)]
pub struct InitArgs {
    /// The data directory to make (default: --data-dir, HCP_DATA_DIR or
    /// `.hcp`).
    dir: Option<PathBuf>,
    #[command(flatten)]
    data: DataDir,
}

/// The developer caller `hcp init` writes.
pub(crate) const DEVELOPER: &str = "developer";
/// The operator `hcp init` writes.
pub(crate) const OPERATOR: &str = "operator";
/// The publisher name of the key `hcp init` makes.
pub(crate) const PUBLISHER: &str = "local-developer";

/// The policies when neither `--policies` nor `HCP_POLICIES` names them.
///
/// # Errors
///
/// The working directory cannot be read.
pub(super) fn default_policies(data_dir: &Path) -> std::io::Result<PathBuf> {
    let here = Path::new("policies");
    if here.is_dir() {
        return std::path::absolute(here);
    }
    Ok(data_dir.join("policies"))
}

/// One clear error when there is no policy set where the command looks:
/// the directory, why it looked there, and what to do.
///
/// # Errors
///
/// No `callers.json` in the policy directory.
pub(super) fn require_policies(paths: &Paths, given: bool) -> anyhow::Result<()> {
    let dir = &paths.policies_dir;
    if dir.join("callers.json").is_file() {
        return Ok(());
    }
    let why = if given {
        "named by --policies or HCP_POLICIES".to_owned()
    } else {
        "the data directory's, as ./policies does not exist here".to_owned()
    };
    let what = if dir.is_dir() {
        "has no callers.json"
    } else {
        "does not exist"
    };
    anyhow::bail!(
        "no policy set: {} ({why}) {what}. Run `hcp init` to make a data directory with a \
         starting policy set, or give a policy directory with --policies or HCP_POLICIES",
        dir.display()
    )
}

/// A fresh bearer token: 32 random bytes, hex.
fn token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("random source: {e}"))?;
    Ok(format!("hcp-{}", hex::encode(bytes)))
}

struct NewCaller {
    id: &'static str,
    token: String,
    summary: &'static str,
}

fn caller(
    id: &str,
    description: &str,
    kind: &str,
    token: &str,
    max_risk: &str,
    max_data: &str,
) -> anyhow::Result<Value> {
    let credential = hcp_policy::hash_credential(token).map_err(anyhow::Error::msg)?;
    Ok(json!({
        "id": id,
        "description": description,
        "kind": kind,
        "credential": credential.to_string(),
        "capabilities": [],
        "all_capabilities": true,
        "max_risk_level": max_risk,
        "max_data_classification": max_data,
    }))
}

/// The starting policy set: file name and content.
fn policy_files(callers: &[NewCaller]) -> anyhow::Result<Vec<(&'static str, String)>> {
    let [developer, operator] = callers else {
        anyhow::bail!("two callers expected");
    };
    let callers = json!({
        "callers": [
            caller(
                developer.id,
                "The local developer (made by hcp init): every installed capability, up to R2.",
                "supervised_session",
                &developer.token,
                "R2",
                "T2",
            )?,
            caller(
                operator.id,
                "The local operator (made by hcp init): approves tasks of every installed \
                 capability, up to R4, never their own.",
                "operator",
                &operator.token,
                "R4",
                "T3",
            )?,
        ]
    });
    let pretty = |v: &Value| -> anyhow::Result<String> {
        Ok(format!("{}\n", serde_json::to_string_pretty(v)?))
    };
    Ok(vec![
        ("callers.json", pretty(&callers)?),
        ("risk.json", pretty(&json!({ "capabilities": {} }))?),
        (
            "context.json",
            pretty(&json!({
                "unattended_hours": [],
                "resources": {},
                "default_when_busy": "reject"
            }))?,
        ),
        (
            "budgets.json",
            pretty(&json!({
                "defaults": {
                    "host_calls": 10000,
                    "bytes": 67_108_864,
                    "artifacts": 32,
                    "concurrent_sessions": 4
                }
            }))?,
        ),
        ("envelopes.json", pretty(&json!({ "capabilities": {} }))?),
        (
            "dispatch.json",
            pretty(&json!({
                "threat_scan": {
                    "terminal_escape": "deny",
                    "prompt_injection": "record",
                    "shell_metacharacters": "deny"
                }
            }))?,
        ),
        (
            "authz.cedar",
            include_str!("../../../../policies/authz.cedar").to_owned(),
        ),
        (
            "install.json",
            pretty(&json!({
                "max_risk_ceiling": "R4",
                "filesystem": { "bundled_data": true, "roots": [] },
                "network": { "allow": [], "deny": ["169.254.169.254"], "allow_private": false },
                "env": [],
                "instruments": [],
                "devices": []
            }))?,
        ),
        (
            "README.md",
            include_str!("../../templates/policies/README.md").to_owned(),
        ),
    ])
}

/// Writes the set into a fresh directory next to `dest`, loads it as the
/// host will, then renames it into place.
fn write_policies(dest: &Path, files: &[(&str, String)]) -> anyhow::Result<()> {
    let parent = dest
        .parent()
        .context("the policy directory has no parent")?;
    let tmp = parent.join(format!(".policies.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        std::fs::create_dir(&tmp).with_context(|| format!("{}", tmp.display()))?;
        for (name, text) in files {
            let path = tmp.join(name);
            std::fs::write(&path, text).with_context(|| format!("{}", path.display()))?;
        }
        PolicySet::load(&tmp).map_err(|e| anyhow::anyhow!("the starting policy set: {e}"))?;
        InstallPolicy::load(&tmp).map_err(|e| anyhow::anyhow!("the starting install.json: {e}"))?;
        std::fs::rename(&tmp, dest).with_context(|| format!("{}", dest.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// The publisher key of this data directory, made on first use, trusted as
/// [`PUBLISHER`].
fn publisher_key(dir: &Path) -> anyhow::Result<(PathBuf, HostKey, Added)> {
    let path = dir.join("keys").join("publisher.key");
    let key = if path.exists() {
        HostKey::load(&path)?
    } else {
        std::fs::create_dir_all(dir.join("keys"))
            .with_context(|| format!("{}", dir.join("keys").display()))?;
        let key = HostKey::generate()?;
        key.save(&path)?;
        key
    };
    let name = PublisherName::try_from(PUBLISHER.to_owned()).map_err(anyhow::Error::msg)?;
    let added = Store::open(dir)?.trust_publisher(&name, key.public())?;
    Ok((path, key, added))
}

pub(super) fn run(args: InitArgs) -> Outcome {
    let default_dir = args.data.path()?;
    let dir = match args.dir {
        Some(d) => std::path::absolute(d)?,
        None => default_dir.clone(),
    };
    let policies = dir.join("policies");
    if policies.exists() {
        anyhow::bail!(
            "{} exists already: `hcp init` never replaces a policy set (its tokens were shown \
             when it was made); edit it, or init another directory",
            policies.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
    let callers = [
        NewCaller {
            id: DEVELOPER,
            token: token()?,
            summary: "supervised_session  every installed capability, up to R2, data up to T2",
        },
        NewCaller {
            id: OPERATOR,
            token: token()?,
            summary: "operator            approves every installed capability, up to R4, data up to T3",
        },
    ];
    write_policies(&policies, &policy_files(&callers)?)?;
    let host = crate::hostkey::load_or_init(&dir)?;
    let (key_path, key, _) = publisher_key(&dir)?;

    println!("initialized {}", dir.display());
    println!("  policies   {}", policies.display());
    println!(
        "  host key   {} ({})",
        crate::hostkey::key_path(&dir).display(),
        host.key.key_id()
    );
    println!(
        "  publisher  {PUBLISHER}, key {} ({}), trusted here",
        key_path.display(),
        key.key_id()
    );
    println!();
    println!("callers (tokens are shown only now; the policy keeps their SHA-256):");
    for c in &callers {
        println!("  {:<10} {}", c.id, c.summary);
        println!("  {:<10} token {}", "", c.token);
    }
    println!();
    if dir != default_dir {
        println!(
            "use this data directory with: export HCP_DATA_DIR={}",
            dir.display()
        );
    }
    if Path::new("policies").is_dir() {
        println!(
            "note: ./policies exists here and is found first; give --policies {} to use these",
            policies.display()
        );
    }
    println!("next: hcp new <name>  (a capability to build, run and install here)");
    Ok(ExitCode::SUCCESS)
}

/// The starting set of a development data directory (`hcp dev`): the
/// policy set, host key and publisher key `hcp init` writes, with fresh
/// tokens that are never shown (`hcp dev` acts with the data directory's
/// authority, as `hcp submit` does). An existing policy set is kept.
/// Returns the publisher key's path, the key and the name it is trusted
/// under.
pub(super) fn init_development(dir: &Path) -> anyhow::Result<(PathBuf, HostKey, &'static str)> {
    let policies = dir.join("policies");
    if !policies.exists() {
        let callers = [DEVELOPER, OPERATOR].map(|id| NewCaller {
            id,
            token: String::new(),
            summary: "",
        });
        let mut callers = callers;
        for c in &mut callers {
            c.token = token()?;
        }
        write_policies(&policies, &policy_files(&callers)?)?;
    }
    crate::hostkey::load_or_init(dir)?;
    let (path, key, _) = publisher_key(dir)?;
    Ok((path, key, PUBLISHER))
}
