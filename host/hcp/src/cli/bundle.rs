//! `hcp bundle`: pack a plugin directory into a bundle, sign a bundle.

use super::progress::Progress;
use super::{DataDir, Outcome, print_json};
use crate::store::Store;
use anyhow::Context as _;
use hcp_bundle::{Bundle, Limits, PublisherName, WitSource};
use hcp_receipts::HostKey;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Bundle subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum BundleCommand {
    /// Pack a plugin directory (its manifest.json, the component it names,
    /// the data directories it grants as ${manifest_dir}/<dir>, and the WIT
    /// package) into an unsigned bundle. Builds nothing: build the component
    /// first.
    Pack {
        /// The plugin directory, holding manifest.json.
        dir: PathBuf,
        /// The bundle to write (replaced if it exists).
        #[arg(long, short, value_name = "PATH")]
        output: PathBuf,
        /// The WIT package the component was built against (a directory of
        /// *.wit files); default: this host's own.
        #[arg(long, value_name = "DIR")]
        wit: Option<PathBuf>,
        /// Print what was packed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign a bundle with a publisher key (`hcp keys generate`), replacing
    /// any signature it has.
    Sign {
        /// The bundle.
        bundle: PathBuf,
        /// The publisher's private key file (PKCS#8 PEM, mode 0600).
        #[arg(long, value_name = "PATH")]
        key: PathBuf,
        /// The publisher name to sign as; default: the name this data
        /// directory's trust store gives the key.
        #[arg(long, value_name = "NAME")]
        publisher: Option<PublisherName>,
        /// Write the signed bundle here instead of in place.
        #[arg(long, short, value_name = "PATH")]
        output: Option<PathBuf>,
        /// Print what was signed as JSON.
        #[arg(long)]
        json: bool,
        // The trust store that names the key (without --publisher).
        #[command(flatten)]
        data: DataDir,
    },
}

pub(super) fn run(cmd: BundleCommand) -> Outcome {
    match cmd {
        BundleCommand::Pack {
            dir,
            output,
            wit,
            json,
        } => pack(&dir, &output, wit.as_deref(), json),
        BundleCommand::Sign {
            bundle,
            key,
            publisher,
            output,
            json,
            data,
        } => sign(&data, &bundle, &key, publisher, output.as_deref(), json),
    }
}

fn pack(dir: &Path, output: &Path, wit: Option<&Path>, json: bool) -> Outcome {
    let source = wit.map_or(WitSource::Host, WitSource::Dir);
    let (bundle, bytes) = Progress::during(format!("packing {}", dir.display()), json, || {
        let bundle = hcp_bundle::pack_dir(dir, source)?;
        let bytes = bundle.to_bytes()?;
        write_atomically(output, &bytes)?;
        anyhow::Ok((bundle, bytes))
    })?;
    if json {
        print_json(&serde_json::json!({
            "bundle": bundle.id(),
            "path": output.display().to_string(),
            "bytes": bytes.len(),
            "signed": false,
            "manifest_digest": bundle.manifest_digest(),
            "component_digest": bundle.component_digest(),
            "component_bytes": bundle.component().len(),
            "wit": bundle.wit().id(),
            "data_dirs": bundle.data_dirs(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "packed {} into {} ({} bytes, unsigned)",
        bundle.id(),
        output.display(),
        bytes.len()
    );
    println!(
        "  manifest   {} (RFC 8785 canonical form)",
        bundle.manifest_digest()
    );
    println!(
        "  component  {} ({} bytes)",
        bundle.component_digest(),
        bundle.component().len()
    );
    let wit_files = bundle
        .entries()
        .keys()
        .filter(|p| p.starts_with("wit/"))
        .count();
    println!("  wit        {} ({wit_files} files)", bundle.wit().id());
    for d in bundle.data_dirs() {
        let n = bundle
            .entries()
            .keys()
            .filter(|p| {
                p.strip_prefix(d.as_str())
                    .is_some_and(|r| r.starts_with('/'))
            })
            .count();
        println!(
            "  data       {d}/ ({n} file{})",
            if n == 1 { "" } else { "s" }
        );
    }
    println!(
        "sign it with: hcp bundle sign {} --key <publisher key> --publisher <name>",
        output.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn sign(
    data: &DataDir,
    path: &Path,
    key_path: &Path,
    publisher: Option<PublisherName>,
    output: Option<&Path>,
    json: bool,
) -> Outcome {
    let key = HostKey::load(key_path)?;
    let publisher = match publisher {
        Some(p) => p,
        None => trusted_name(&data.path()?, &key)?,
    };
    let out = output.unwrap_or(path);
    let (bundle, bytes, replaced) =
        Progress::during(format!("signing {}", path.display()), json, || {
            let file = crate::install::read_bundle_file(path)
                .with_context(|| format!("{}", path.display()))?;
            let mut bundle = Bundle::read(&file.bytes, &Limits::default())
                .with_context(|| format!("{}", path.display()))?;
            let replaced = bundle.signature().map(|s| s.signed.publisher.clone());
            bundle.sign(&key, publisher.clone())?;
            let bytes = bundle.to_bytes()?;
            write_atomically(out, &bytes)?;
            anyhow::Ok((bundle, bytes, replaced))
        })?;
    if json {
        print_json(&serde_json::json!({
            "bundle": bundle.id(),
            "path": out.display().to_string(),
            "bytes": bytes.len(),
            "publisher": publisher.as_str(),
            "key_id": key.key_id().to_string(),
            "public_key": key.public().to_string(),
            "replaced_signature_of": replaced.as_ref().map(PublisherName::as_str),
            "manifest_digest": bundle.manifest_digest(),
            "component_digest": bundle.component_digest(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "signed {} as {publisher} with key {} into {} ({} bytes)",
        bundle.id(),
        key.key_id(),
        out.display(),
        bytes.len()
    );
    if let Some(previous) = replaced {
        println!("  replaced the signature of {previous}");
    }
    println!("  manifest   {}", bundle.manifest_digest());
    println!("  component  {}", bundle.component_digest());
    println!(
        "operators trust this publisher with: hcp trust add {publisher} {}",
        key.public()
    );
    Ok(ExitCode::SUCCESS)
}

/// The name this data directory's trust store gives `key`.
fn trusted_name(data_dir: &Path, key: &HostKey) -> anyhow::Result<PublisherName> {
    let hint = "give --publisher NAME";
    if !data_dir.join("hcp.db").exists() {
        anyhow::bail!(
            "{hint}: there is no trust store in {} to name key {}",
            data_dir.display(),
            key.key_id()
        );
    }
    let store = Store::open(data_dir)?;
    store
        .trusted_publishers()?
        .into_iter()
        .find(|t| &t.public_key == key.public())
        .map(|t| t.name)
        .with_context(|| {
            format!(
                "{hint}: no trusted publisher in {} has key {}",
                data_dir.display(),
                key.key_id()
            )
        })
}

/// Writes `bytes` to a temporary file next to `path`, then renames it.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}
