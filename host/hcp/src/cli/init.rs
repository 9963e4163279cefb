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
//! - `<dir>/keys/publisher.key`: a publisher key (mode 0600), and its
//!   public key in `keys/publisher.pub`, trusted in this data directory
//!   under a name of this host's own: `--publisher`, or the host's name
//!   and the key id's first 8 digits (`lab-3-5f0c9a1e`), so that two
//!   hosts' authors never sign as the same publisher. `hcp bundle sign
//!   --key` signs the author's own bundles as that name; another host
//!   installs them after `hcp trust add <name> <publisher.pub>`.
//! - The host key (`keys/host.key`), as `hcp keys init` makes it.
//!
//! `install.json` admits no destination, instrument or device; the example
//! bundles of this repository (`plugins/`, `scripts/bundle-examples`) need
//! [`EXAMPLE_ADMISSIONS`], which `--with-examples` adds and which the
//! output names otherwise.
//!
//! An existing policy set is never replaced (its tokens were shown once).

use super::{DataDir, Outcome, Paths, print_json};
use crate::store::Store;
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
capability up to R2, an operator), a publisher key for signing your own bundles (trusted here \
under this host's publisher name: --publisher, or the host name and the key's id, so that two \
hosts never sign as the same publisher), and the host key.\n\n\
The install policy admits no network destination, instrument or device: --with-examples admits \
those the example bundles of the HCP repository need (plugins/, scripts/bundle-examples); \
without it, the output names the lines to add.\n\n\
The callers' tokens are printed once, on stdout; the policy keeps only their SHA-256. Nothing \
is replaced: an existing policies/ refuses the command.\n\n\
Commands find these policies by themselves when neither --policies nor HCP_POLICIES is given \
and ./policies does not exist."
)]
pub struct InitArgs {
    /// The data directory to make (default: --data-dir, HCP_DATA_DIR or
    /// `.hcp`).
    dir: Option<PathBuf>,
    /// The publisher name this host's key signs as (letters, digits, `.`,
    /// `_`, `-`; at most 64). Default: the host's name and the key id's
    /// first 8 digits, e.g. `lab-3-5f0c9a1e`.
    #[arg(long, value_name = "NAME")]
    publisher: Option<PublisherName>,
    /// Admit in install.json what the example bundles (plugins/) grant:
    /// the destination example.com:443, the instrument cvd-rig, the device
    /// hid.
    #[arg(long)]
    with_examples: bool,
    /// Print the result as JSON (the callers' tokens included: they are
    /// shown only now).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataDir,
}

/// The developer caller `hcp init` writes.
pub(crate) const DEVELOPER: &str = "developer";
/// The operator `hcp init` writes.
pub(crate) const OPERATOR: &str = "operator";
/// What the example bundles of this repository (`plugins/`, installed by
/// `scripts/bundle-examples`) grant beyond bundled data, as `install.json`
/// admits it: (field, value).
pub(crate) const EXAMPLE_ADMISSIONS: [(&str, &str); 3] = [
    ("network.allow", "example.com:443"),
    ("instruments", "cvd-rig"),
    ("devices", "hid"),
];

/// The policy set shipped with `hcp` (this repository's `policies/`, but the
/// interfaces' own files: [`shipped_policies`]): what
/// `hcp review` reads where no policy set is given or found.
const SHIPPED_POLICIES: [(&str, &str); 8] = [
    (
        "callers.json",
        include_str!("../../../../policies/callers.json"),
    ),
    ("risk.json", include_str!("../../../../policies/risk.json")),
    (
        "context.json",
        include_str!("../../../../policies/context.json"),
    ),
    (
        "budgets.json",
        include_str!("../../../../policies/budgets.json"),
    ),
    (
        "envelopes.json",
        include_str!("../../../../policies/envelopes.json"),
    ),
    (
        "dispatch.json",
        include_str!("../../../../policies/dispatch.json"),
    ),
    (
        "install.json",
        include_str!("../../../../policies/install.json"),
    ),
    (
        "authz.cedar",
        include_str!("../../../../policies/authz.cedar"),
    ),
];

/// [`SHIPPED_POLICIES`] and each interface's own file as `policies/` ships
/// it (`hcp_policy::operator`).
pub(super) fn shipped_policies() -> impl Iterator<Item = (&'static str, &'static str)> {
    SHIPPED_POLICIES.into_iter().chain(
        hcp_policy::interface_files()
            .iter()
            .map(|f| (f.name, f.shipped)),
    )
}

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
    kind: &'static str,
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

/// The starting policy set: file name and content; `examples` admits
/// [`EXAMPLE_ADMISSIONS`] in `install.json`.
fn policy_files(
    callers: &[NewCaller],
    examples: bool,
) -> anyhow::Result<Vec<(&'static str, String)>> {
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
    let admitted = |field: &str| -> Vec<&str> {
        EXAMPLE_ADMISSIONS
            .iter()
            .filter(|(f, _)| examples && *f == field)
            .map(|(_, v)| *v)
            .collect()
    };
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
                "network": {
                    "allow": admitted("network.allow"),
                    "deny": ["169.254.169.254"],
                    "allow_private": false
                },
                "env": [],
                "instruments": admitted("instruments"),
                "devices": admitted("devices")
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

/// This data directory's publisher: its key file, the key, and the name it
/// is trusted under here.
struct Publisher {
    key_path: PathBuf,
    public_path: PathBuf,
    key: HostKey,
    name: PublisherName,
}

/// The publisher key of this data directory, made on first use, and its
/// public key beside it; trusted as `chosen`, or as the name this trust
/// store already gives it, or as [`default_publisher`].
fn publisher_key(dir: &Path, chosen: Option<PublisherName>) -> anyhow::Result<Publisher> {
    let keys = dir.join("keys");
    let key_path = keys.join("publisher.key");
    let public_path = keys.join("publisher.pub");
    let key = if key_path.exists() {
        HostKey::load(&key_path)?
    } else {
        std::fs::create_dir_all(&keys).with_context(|| format!("{}", keys.display()))?;
        let key = HostKey::generate()?;
        key.save(&key_path)?;
        key
    };
    std::fs::write(&public_path, format!("{}\n", key.public()))
        .with_context(|| format!("{}", public_path.display()))?;
    let store = Store::open(dir)?;
    let known = store
        .trusted_publishers()?
        .into_iter()
        .find(|t| &t.public_key == key.public())
        .map(|t| t.name);
    let name = match (chosen, known) {
        (Some(chosen), Some(known)) if chosen != known => anyhow::bail!(
            "{} is trusted here as publisher {known} already; a key has one publisher name \
             (init without --publisher keeps it)",
            key_path.display()
        ),
        (Some(name), _) | (None, Some(name)) => name,
        (None, None) => default_publisher(&host_name(), &key)?,
    };
    store.trust_publisher(&name, key.public())?;
    Ok(Publisher {
        key_path,
        public_path,
        key,
        name,
    })
}

/// This machine's name, as the kernel gives it (`host` when it cannot be
/// read).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The publisher name of a host called `host` with `key`: the host name's
/// first label in lower case (other characters as `-`, at most 40), `-`,
/// and the key id's first 8 digits. Two hosts' keys differ, so their names
/// do even where the hosts' names are the same.
fn default_publisher(host: &str, key: &HostKey) -> anyhow::Result<PublisherName> {
    let label: String = host
        .split('.')
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .skip_while(|c| *c == '-')
        .take(40)
        .collect();
    let label = label.trim_end_matches('-');
    let label = if label.is_empty() { "host" } else { label };
    let id = key.key_id().to_string();
    PublisherName::try_from(format!("{label}-{}", &id[..id.len().min(8)]))
        .map_err(anyhow::Error::msg)
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
            kind: "supervised_session",
            token: token()?,
            summary: "every installed capability, up to R2, data up to T2",
        },
        NewCaller {
            id: OPERATOR,
            kind: "operator",
            token: token()?,
            summary: "approves every installed capability, up to R4, data up to T3",
        },
    ];
    write_policies(&policies, &policy_files(&callers, args.with_examples)?)?;
    let host = crate::hostkey::load_or_init(&dir)?;
    let publisher = publisher_key(&dir, args.publisher)?;
    let trust = format!(
        "hcp trust add {} {}",
        publisher.name,
        publisher.key.public()
    );
    let examples_missing: Vec<String> = if args.with_examples {
        Vec::new()
    } else {
        EXAMPLE_ADMISSIONS
            .iter()
            .map(|(field, value)| format!("{field} \"{value}\""))
            .collect()
    };
    let shadowed = Path::new("policies").is_dir();

    if args.json {
        print_json(&json!({
            "data_dir": dir.display().to_string(),
            "policies": policies.display().to_string(),
            "host": {
                "host_id": host.host_id,
                "key_id": host.key.key_id().to_string(),
                "public_key": host.key.public().to_string(),
                "key_file": crate::hostkey::key_path(&dir).display().to_string(),
            },
            "publisher": {
                "name": publisher.name.as_str(),
                "key_id": publisher.key.key_id().to_string(),
                "public_key": publisher.key.public().to_string(),
                "key_file": publisher.key_path.display().to_string(),
                "public_key_file": publisher.public_path.display().to_string(),
                "trust_command": trust,
            },
            "callers": callers.iter().map(|c| json!({
                "id": c.id,
                "kind": c.kind,
                "summary": c.summary,
                "token": c.token,
            })).collect::<Vec<_>>(),
            "examples_admitted": args.with_examples,
            "install_policy_lacks_for_examples": examples_missing,
            "policies_shadowed_by": shadowed.then_some("./policies"),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }

    println!("initialized {}", dir.display());
    println!("  policies   {}", policies.display());
    println!(
        "  host key   {} ({})",
        crate::hostkey::key_path(&dir).display(),
        host.key.key_id()
    );
    println!(
        "  publisher  {}, key {} ({}), trusted here",
        publisher.name,
        publisher.key_path.display(),
        publisher.key.key_id()
    );
    println!();
    println!("callers (tokens are shown only now; the policy keeps their SHA-256):");
    for c in &callers {
        println!("  {:<10} {:<19} {}", c.id, c.kind, c.summary);
        println!("  {:<10} token {}", "", c.token);
    }
    println!();
    if args.with_examples {
        println!(
            "install.json admits the example bundles (plugins/): {}",
            EXAMPLE_ADMISSIONS
                .iter()
                .map(|(field, value)| format!("{field} \"{value}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else {
        println!(
            "the example bundles (plugins/) install here once {} admits: {} (or init with \
             --with-examples)",
            policies.join("install.json").display(),
            examples_missing.join(", ")
        );
    }
    println!(
        "other hosts install bundles signed here after: {} (or the file {})",
        trust,
        publisher.public_path.display()
    );
    if dir != default_dir {
        println!(
            "use this data directory with: export HCP_DATA_DIR={}",
            dir.display()
        );
    }
    if shadowed {
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
pub(super) fn init_development(dir: &Path) -> anyhow::Result<(PathBuf, HostKey, PublisherName)> {
    let policies = dir.join("policies");
    if !policies.exists() {
        let callers = [
            NewCaller {
                id: DEVELOPER,
                kind: "supervised_session",
                token: token()?,
                summary: "",
            },
            NewCaller {
                id: OPERATOR,
                kind: "operator",
                token: token()?,
                summary: "",
            },
        ];
        write_policies(&policies, &policy_files(&callers, false)?)?;
    }
    crate::hostkey::load_or_init(dir)?;
    let publisher = publisher_key(dir, None)?;
    Ok((publisher.key_path, publisher.key, publisher.name))
}

#[cfg(test)]
mod tests {
    use super::default_publisher;
    use hcp_receipts::HostKey;

    #[test]
    fn the_default_publisher_is_the_host_name_and_the_key_id() {
        let key = HostKey::generate().expect("key");
        let id = key.key_id().to_string();
        let name = |host: &str| default_publisher(host, &key).expect(host).to_string();
        assert_eq!(name("Lab-3.example.org"), format!("lab-3-{}", &id[..8]));
        assert_eq!(name(""), format!("host-{}", &id[..8]));
        assert_eq!(name("--_ü"), format!("host-{}", &id[..8]));
        assert_eq!(name("a b"), format!("a-b-{}", &id[..8]));
        assert_eq!(
            name(&"x".repeat(100)),
            format!("{}-{}", "x".repeat(40), &id[..8])
        );
    }
}
