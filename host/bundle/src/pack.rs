//! Packing a plugin directory: its `manifest.json`, the component it names,
//! the WIT package, and the data directories it grants as
//! `${manifest_dir}/<dir>`. Nothing is built.
//!
//! # Ambient authority
//!
//! [`pack_dir`] reads the plugin directory's `manifest.json`, the component
//! and granted directories the manifest names (through
//! `hcp_contracts::manifest::load`), the bundled data directories, and the
//! WIT directory it is given. It writes nothing.

use crate::bundle::{Bundle, data_dirs};
use crate::error::BundleError;
use crate::layout::{COMPONENT, MANIFEST, WIT_DIR, check_path};
use crate::wit::HOST_WIT;
use hcp_contracts::manifest::{LoadOptions, ManifestDoc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Where the WIT package of a bundle comes from.
#[derive(Debug, Clone, Copy)]
pub enum WitSource<'a> {
    /// The host's own `wit/` (compiled in).
    Host,
    /// The `*.wit` files of a directory (the package the component was
    /// built against, when it is not the host's).
    Dir(&'a Path),
}

/// Packs the plugin directory `dir` into an unsigned bundle: the manifest is
/// checked (`hcp_contracts::manifest::load`), its `component.path` becomes
/// `component.wasm` and `component.digest` is pinned to the component's
/// sha256.
///
/// # Errors
///
/// An invalid manifest, a pinned digest the component no longer matches, a
/// read-write or unsafe `${manifest_dir}` grant, a link or special file in
/// a bundled directory, or a file that cannot be read.
pub fn pack_dir(dir: &Path, wit: WitSource<'_>) -> Result<Bundle, BundleError> {
    let manifest_path = dir.join(MANIFEST);
    let checked = hcp_contracts::manifest::load(&manifest_path, LoadOptions::default())
        .map_err(|e| BundleError::Pack(with_sources(&e)))?;
    let text = read_file(&manifest_path, 1 << 20)?;
    let mut manifest: Value = serde_json::from_slice(&text).map_err(|e| {
        BundleError::Pack(format!("{}: not valid JSON: {e}", manifest_path.display()))
    })?;
    let component = checked.component.bytes.to_vec();
    let digest = checked.component.digest.clone();
    let object = manifest
        .get_mut("component")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| BundleError::Pack("manifest.json has no component object".into()))?;
    object.insert("path".into(), Value::from(COMPONENT));
    object.insert("digest".into(), Value::from(digest));

    let mut entries = BTreeMap::new();
    let mut text = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| BundleError::Pack(format!("manifest.json: {e}")))?;
    text.push(b'\n');
    entries.insert(MANIFEST.to_owned(), text);
    entries.insert(COMPONENT.to_owned(), component);
    match wit {
        WitSource::Host => {
            for (name, text) in HOST_WIT {
                entries.insert(format!("{WIT_DIR}/{name}"), text.as_bytes().to_vec());
            }
        }
        WitSource::Dir(wit_dir) => add_wit_dir(&mut entries, wit_dir)?,
    }
    let doc: ManifestDoc = serde_json::from_value(manifest.clone())
        .map_err(|e| BundleError::Pack(format!("manifest.json: {e}")))?;
    for rel in data_dirs(&doc)? {
        add_tree(&mut entries, &dir.join(&rel), &rel)?;
    }
    let bundle = Bundle::from_entries(entries)?;
    bundle.check_world().map_err(|e| {
        BundleError::Pack(format!(
            "{e}; pack with --wit <dir> naming the WIT package the component was built against"
        ))
    })?;
    Ok(bundle)
}

fn add_wit_dir(entries: &mut BTreeMap<String, Vec<u8>>, dir: &Path) -> Result<(), BundleError> {
    let io = |source| BundleError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".wit") && entry.file_type().map_err(io)?.is_file() {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        let path = format!("{WIT_DIR}/{name}");
        check_path(&path)?;
        entries.insert(path, read_file(&dir.join(&name), 256 << 10)?);
    }
    Ok(())
}

/// Adds every regular file under `dir` as `<rel>/...`; links and special
/// files are refused.
fn add_tree(
    entries: &mut BTreeMap<String, Vec<u8>>,
    dir: &Path,
    rel: &str,
) -> Result<(), BundleError> {
    let io = |source| BundleError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut children: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    children.sort_by_key(std::fs::DirEntry::file_name);
    for child in children {
        let name = child.file_name().to_string_lossy().into_owned();
        let path = format!("{rel}/{name}");
        let kind = child.file_type().map_err(io)?;
        if kind.is_symlink() {
            return Err(BundleError::Pack(format!(
                "{}: a symbolic link; a bundle ships regular files only",
                child.path().display()
            )));
        }
        if kind.is_dir() {
            add_tree(entries, &child.path(), &path)?;
        } else if kind.is_file() {
            check_path(&path)?;
            entries.insert(path, read_file(&child.path(), 64 << 20)?);
        } else {
            return Err(BundleError::Pack(format!(
                "{}: not a regular file; a bundle ships regular files only",
                child.path().display()
            )));
        }
    }
    Ok(())
}

fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, BundleError> {
    use std::io::Read as _;
    let io = |source| BundleError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len > limit {
        return Err(BundleError::Pack(format!(
            "{}: {len} bytes, over the limit of {limit}",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// An error and the errors that caused it, `: `-separated, each said once.
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}
