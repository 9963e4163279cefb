//! Writing a pack: a deterministic tar.

use super::proofs::encode_inclusion;
use super::{
    HostEntry, HostPaths, INDEX_PATH, Index, IndexEntry, KEYS_DIR, MANIFEST_PATH, MANIFESTS_DIR,
    MESSAGES_DIR, PACK_FORMAT, POLICY_DIR, Pack, PackError, PackManifest, check_path, path_error,
};
use crate::archive::{self, WriteProblem};
use crate::hash::Digest;
use crate::ids;
use std::collections::BTreeMap;

/// Writes `pack` as a deterministic tar (see [`crate::pack`]): the same
/// pack always gives the same bytes.
///
/// # Errors
///
/// An invalid host id or file name, two hosts or files with one path, two
/// different keys with one key id, or a record that cannot be encoded.
pub fn write(pack: &Pack) -> Result<Vec<u8>, PackError> {
    let entries = entries(pack)?;
    let index = Index {
        entries: entries
            .iter()
            .map(|(path, bytes)| IndexEntry {
                path: path.clone(),
                size: bytes.len() as u64,
                sha256: Digest::of(bytes),
            })
            .collect(),
    };
    let index_bytes = json(&index)?;
    let all = entries
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .chain([(INDEX_PATH, index_bytes.as_slice())]);
    archive::write(all).map_err(|e| match e {
        WriteProblem::Path { path, problem } => path_error(&path, problem),
        WriteProblem::Header { path, source } | WriteProblem::Append { path, source } => {
            PackError::Write(format!("{path}: {source}"))
        }
        WriteProblem::Finish(source) => PackError::Write(source.to_string()),
    })
}

fn json<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, PackError> {
    let mut out = serde_json::to_vec_pretty(value).map_err(|e| PackError::Write(e.to_string()))?;
    out.push(b'\n');
    Ok(out)
}

fn lines<T>(
    items: &[T],
    encode: impl Fn(&T) -> Result<Vec<u8>, String> + Sync,
) -> Result<Vec<u8>, PackError>
where
    T: Sync,
{
    let encoded = crate::par::map(items, |_, item| encode(item));
    let mut out = Vec::new();
    for line in encoded {
        out.extend(line.map_err(PackError::Write)?);
        out.push(b'\n');
    }
    Ok(out)
}

fn entries(pack: &Pack) -> Result<BTreeMap<String, Vec<u8>>, PackError> {
    let mut out = BTreeMap::new();
    let mut add = |path: String, bytes: Vec<u8>| -> Result<(), PackError> {
        check_path(&path)?;
        if out.insert(path.clone(), bytes).is_some() {
            return Err(PackError::Duplicate { path });
        }
        Ok(())
    };
    let mut hosts = Vec::new();
    for section in &pack.hosts {
        ids::check_host_id(&section.host_id).map_err(|e| PackError::Write(e.to_string()))?;
        let paths = HostPaths::of(&section.host_id);
        add(
            paths.receipts,
            lines(&section.receipts, |r| {
                r.canonical_bytes().map_err(|e| e.to_string())
            })?,
        )?;
        add(
            paths.checkpoints,
            lines(&section.checkpoints, |c| {
                c.canonical_bytes().map_err(|e| e.to_string())
            })?,
        )?;
        add(paths.inclusion, encode_inclusion(&section.inclusion)?)?;
        add(
            paths.consistency,
            lines(&section.consistency, |c| {
                serde_json::to_vec(c).map_err(|e| e.to_string())
            })?,
        )?;
        add(
            paths.inputs,
            lines(&section.inputs, hcp_contracts::jcs::canonical_bytes)?,
        )?;
        hosts.push(HostEntry {
            host_id: section.host_id.clone(),
            keys: section.keys.clone(),
            first_seq: section.first_seq,
            count: section.receipts.len() as u64,
            prev_hash: section.prev_hash,
            prev_checkpoint: section.prev_checkpoint,
        });
    }
    let mut keys = BTreeMap::new();
    for key in &pack.public_keys {
        if let Some(other) = keys.insert(key.key_id().clone(), key)
            && other != key
        {
            return Err(PackError::Write(format!(
                "two different keys have the id {}",
                key.key_id()
            )));
        }
    }
    for (id, key) in keys {
        add(
            format!("{KEYS_DIR}{id}.pub"),
            format!("{key}\n").into_bytes(),
        )?;
    }
    for (dir, files) in [
        (POLICY_DIR, &pack.policy),
        (MANIFESTS_DIR, &pack.manifests),
        (MESSAGES_DIR, &pack.messages),
    ] {
        for (name, bytes) in files {
            add(format!("{dir}{name}"), bytes.clone())?;
        }
    }
    let manifest = PackManifest {
        format: PACK_FORMAT.to_owned(),
        hosts,
        external_parents: pack.external_parents.clone(),
    };
    add(MANIFEST_PATH.to_owned(), json(&manifest)?)?;
    Ok(out)
}
