//! What a merge takes from every pack besides host sections: public keys,
//! policy snapshots, manifests and messages.

use super::MergeError;
use crate::hash::Digest;
use crate::keys::{KeyId, PublicKey};
use crate::pack::Pack;
use std::collections::{BTreeMap, BTreeSet};

/// The union of the packs' keys, by key id.
pub(super) fn keys(packs: &[(String, Pack)]) -> Result<Vec<PublicKey>, MergeError> {
    let mut keys: BTreeMap<KeyId, (&PublicKey, usize)> = BTreeMap::new();
    for (p, (_, pack)) in packs.iter().enumerate() {
        for key in &pack.public_keys {
            match keys.get(key.key_id()) {
                Some((held, by)) if *held != key => {
                    return Err(MergeError::KeyConflict {
                        key_id: key.key_id().to_string(),
                        first: packs[*by].0.clone(),
                        second: packs[p].0.clone(),
                    });
                }
                Some(_) => {}
                None => {
                    keys.insert(key.key_id().clone(), (key, p));
                }
            }
        }
    }
    Ok(keys.into_values().map(|(k, _)| k.clone()).collect())
}

/// The union of one kind of opaque files (`dir` is `manifests/` or
/// `messages/`, for errors).
pub(super) fn opaque(
    packs: &[(String, Pack)],
    dir: &str,
    files: impl Fn(&Pack) -> &BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Vec<u8>>, MergeError> {
    let mut out: BTreeMap<String, (Vec<u8>, usize)> = BTreeMap::new();
    for (p, (_, pack)) in packs.iter().enumerate() {
        for (name, bytes) in files(pack) {
            match out.get(name) {
                Some((held, by)) if held != bytes => {
                    return Err(MergeError::FileConflict {
                        path: format!("{dir}{name}"),
                        first: packs[*by].0.clone(),
                        second: packs[p].0.clone(),
                    });
                }
                Some(_) => {}
                None => {
                    out.insert(name.clone(), (bytes.clone(), p));
                }
            }
        }
    }
    Ok(out.into_iter().map(|(k, (v, _))| (k, v)).collect())
}

/// A policy snapshot of a pack: its files by name, and the hex of its hash
/// when the pack says it (its directory, or the one hash its receipts name).
struct Snapshot {
    hex: Option<String>,
    files: BTreeMap<String, Vec<u8>>,
    pack: usize,
}

/// A pack's snapshots. Files directly under `policy/` are the snapshot of
/// a pack of one; the exporter writes it so when the pack's receipts name
/// one policy hash, which is then its hash.
fn snapshots(p: usize, pack: &Pack) -> Vec<Snapshot> {
    let (flat, dirs) = pack.policy_layout();
    let mut out = Vec::with_capacity(dirs.len() + 1);
    if !flat.is_empty() {
        let named: BTreeSet<Digest> = pack
            .hosts
            .iter()
            .flat_map(|h| h.receipts.iter().map(|r| r.policy_hash))
            .collect();
        out.push(Snapshot {
            hex: (named.len() == 1)
                .then(|| named.first().map(Digest::to_hex))
                .flatten(),
            files: flat,
            pack: p,
        });
    }
    out.extend(dirs.into_iter().map(|(dir, files)| Snapshot {
        hex: Some(dir.to_owned()),
        files,
        pack: p,
    }));
    out
}

/// Every distinct policy snapshot of the packs, laid out as the exporter
/// lays out those of a pack: the files of the one snapshot directly under
/// `policy/` when the merged receipts name one policy (`named`), each
/// snapshot under `<hex of its hash>/` when they name several or the packs
/// hold several.
pub(super) fn policy(
    packs: &[(String, Pack)],
    named: &BTreeSet<Digest>,
) -> Result<BTreeMap<String, Vec<u8>>, MergeError> {
    let mut by_hex: BTreeMap<String, Snapshot> = BTreeMap::new();
    let mut unnamed: Vec<Snapshot> = Vec::new();
    for (p, (_, pack)) in packs.iter().enumerate() {
        for snapshot in snapshots(p, pack) {
            let Some(hex) = snapshot.hex.clone() else {
                unnamed.push(snapshot);
                continue;
            };
            match by_hex.get(&hex) {
                Some(held) => {
                    if let Some(name) = differing(&held.files, &snapshot.files) {
                        return Err(MergeError::FileConflict {
                            path: format!("policy/{hex}/{name} (the policy snapshot {hex})"),
                            first: packs[held.pack].0.clone(),
                            second: packs[p].0.clone(),
                        });
                    }
                }
                None => {
                    by_hex.insert(hex, snapshot);
                }
            }
        }
    }
    // A snapshot with no name is one of the named ones, or the only one.
    unnamed.retain(|s| !by_hex.values().any(|n| n.files == s.files));
    unnamed.sort_by(|a, b| a.files.cmp(&b.files));
    unnamed.dedup_by(|a, b| a.files == b.files);
    let distinct = by_hex.len() + unnamed.len();
    if distinct == 0 {
        return Ok(BTreeMap::new());
    }
    if distinct == 1 && (named.len() <= 1 || unnamed.len() == 1) {
        let only = by_hex
            .into_values()
            .chain(unnamed)
            .next()
            .map(|s| s.files)
            .unwrap_or_default();
        return Ok(only);
    }
    if let Some(s) = unnamed.first() {
        return Err(MergeError::UnnamedPolicy {
            pack: packs[s.pack].0.clone(),
        });
    }
    let mut out = BTreeMap::new();
    for (hex, snapshot) in by_hex {
        for (name, bytes) in snapshot.files {
            out.insert(format!("{hex}/{name}"), bytes);
        }
    }
    Ok(out)
}

/// The first file name two snapshots disagree on (held by one only, or
/// with different bytes).
fn differing<'a>(
    a: &'a BTreeMap<String, Vec<u8>>,
    b: &'a BTreeMap<String, Vec<u8>>,
) -> Option<&'a str> {
    a.keys()
        .chain(b.keys())
        .filter(|name| a.get(*name) != b.get(*name))
        .min()
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::HostKey;

    #[test]
    fn one_key_id_for_two_keys_is_refused() {
        let a = HostKey::from_seed(&[1; 32]).public().clone();
        let b = HostKey::from_seed(&[2; 32]).public().clone();
        let colliding = b.with_id(a.key_id());
        let pack = |key: &PublicKey| Pack {
            public_keys: vec![key.clone()],
            ..Pack::default()
        };
        let packs = vec![
            ("a.tar".to_owned(), pack(&a)),
            ("b.tar".to_owned(), pack(&b)),
            ("c.tar".to_owned(), pack(&a)),
        ];
        assert_eq!(keys(&packs).expect("keys").len(), 2);
        let packs = vec![
            ("a.tar".to_owned(), pack(&a)),
            ("b.tar".to_owned(), pack(&colliding)),
        ];
        let err = keys(&packs).expect_err("conflict");
        assert_eq!(
            err.to_string(),
            format!(
                "a.tar and b.tar hold different public keys with the key id {}",
                a.key_id()
            )
        );
        let merged = super::super::merge_labeled(packs).expect_err("conflict");
        assert_eq!(merged, err);
    }
}
