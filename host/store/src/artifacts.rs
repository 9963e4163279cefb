//! The `artifacts` and `artifact_access` tables and the blobs they name
//! (`blobs/sha256/`, and `blobs/sealed/` for T3 and T4 content sealed with
//! the data key); with [`super::checkpoints`], the sandbox's
//! [`TaskStore`].

use super::{Store, now, sync_dir};
use anyhow::{Context as _, Result};
use hcp_sandbox::{
    StateSpace, StateUpdate, StateUsage, StoredArtifact, TaskMeta, TaskStore, TaskStoreError,
};
use rusqlite::{OptionalExtension, params};
use sha2::{Digest as _, Sha256};
use std::io::Write as _;
use std::path::PathBuf;

impl Store {
    fn blob_path(&self, hex: &str, sealed: bool) -> PathBuf {
        let dir = if sealed {
            "blobs/sealed"
        } else {
            "blobs/sha256"
        };
        self.dir.join(dir).join(hex)
    }

    /// Writes `content` as a blob named by its sha256 (sealed with the data
    /// key when `sealed`); returns the hex sha256 of the plaintext.
    fn put_blob(&self, content: &[u8], sealed: bool) -> Result<String> {
        let hex = hex::encode(Sha256::digest(content));
        let path = self.blob_path(&hex, sealed);
        if path.exists() {
            return Ok(hex);
        }
        let bytes = if sealed {
            self.data_key.seal(content, &format!("sha256:{hex}"))?
        } else {
            content.to_vec()
        };
        let dir = path.parent().unwrap_or(&self.dir).to_path_buf();
        let tmp = dir.join(format!(".{hex}.{}.tmp", uuid::Uuid::new_v4()));
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            // A full disk leaves no partial blob behind.
            let _ = std::fs::remove_file(&tmp);
        }
        written.with_context(|| format!("{}", tmp.display()))?;
        sync_dir(&dir);
        Ok(hex)
    }

    /// Reads an artifact by its `hcp://<session>/artifacts/<name>` URI.
    ///
    /// # Errors
    ///
    /// A malformed URI, an unknown artifact, or a blob that no longer matches
    /// its checksum.
    pub fn artifact(
        &self,
        uri: &str,
    ) -> Result<(StoredArtifact, Vec<u8>, hcp_contracts::DataClass)> {
        let (session, name) = parse_artifact_uri(uri)?;
        let row = self
            .db()
            .prepare_cached(
                "SELECT mime_type, size_bytes, checksum, sealed, data_class
                 FROM artifacts WHERE session_id = ?1 AND name = ?2",
            )?
            .query_row(params![session, name], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)? != 0,
                    r.get::<_, String>(4)?,
                ))
            })
            .optional()?;
        let Some((mime_type, size, checksum, sealed, class)) = row else {
            return Err(NoSuchArtifact(format!("{uri}: no such artifact")).into());
        };
        let hex = checksum.trim_start_matches("sha256:");
        let stored = std::fs::read(self.blob_path(hex, sealed))
            .with_context(|| format!("{uri}: content is missing"))?;
        let bytes = if sealed {
            self.data_key
                .open(&stored, &checksum)
                .with_context(|| uri.to_owned())?
        } else {
            stored
        };
        if hex::encode(Sha256::digest(&bytes)) != hex {
            anyhow::bail!("{uri}: content does not match its checksum {checksum}");
        }
        let class = class
            .parse()
            .map_err(|e: String| anyhow::anyhow!("{uri}: stored classification: {e}"))?;
        Ok((
            StoredArtifact {
                name: name.to_owned(),
                mime_type,
                uri: uri.to_owned(),
                size_bytes: u64::try_from(size).unwrap_or(0),
                checksum,
            },
            bytes,
            class,
        ))
    }

    /// Records an access to an artifact (T2 and above are logged).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn log_artifact_access(&self, uri: &str, accessor: &str, purpose: &str) -> Result<()> {
        self.db()
            .prepare_cached(
                "INSERT INTO artifact_access (uri, accessor, purpose, at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![uri, accessor, purpose, now()])?;
        Ok(())
    }
}

/// Splits `hcp://<session>/artifacts/<name>`.
///
/// # Errors
///
/// Anything else.
pub fn parse_artifact_uri(uri: &str) -> Result<(&str, &str)> {
    parse_uri(uri).map_err(|why| NoSuchArtifact(why).into())
}

/// No artifact has this URI (or it is not an artifact URI): what
/// [`Store::artifact`] answers then, as against a store that fails to read
/// one it holds.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoSuchArtifact(pub String);

fn parse_uri(uri: &str) -> std::result::Result<(&str, &str), String> {
    let rest = uri
        .strip_prefix("hcp://")
        .ok_or_else(|| format!("{uri:?} is not an hcp:// artifact URI"))?;
    match rest.split_once("/artifacts/") {
        Some((session, name)) if !session.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((session, name))
        }
        _ => Err(format!(
            "{uri:?} is not of the form hcp://<session>/artifacts/<name>"
        )),
    }
}

impl TaskStore for Store {
    fn put_artifact(
        &self,
        task: &TaskMeta,
        name: &str,
        mime_type: &str,
        content: &[u8],
    ) -> Result<StoredArtifact, TaskStoreError> {
        let stored = StoredArtifact::describe(&task.session_id, name, mime_type, content);
        let sealed = task.data_classification.encrypted_at_rest();
        self.put_blob(content, sealed)
            .map_err(|e| TaskStoreError(format!("{e:#}")))?;
        self.db()
            .prepare_cached(
                "INSERT INTO artifacts (session_id, name, task_id, mime_type, size_bytes, checksum, created_at, data_class, sealed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")
            .and_then(|mut insert| insert.execute(
                params![
                    task.session_id,
                    name,
                    task.task_id,
                    mime_type,
                    i64::try_from(stored.size_bytes).unwrap_or(i64::MAX),
                    stored.checksum,
                    now(),
                    task.data_classification.as_str(),
                    i64::from(sealed)
                ],
            ))
            .map_err(|e| TaskStoreError(e.to_string()))?;
        Ok(stored)
    }

    fn operator_secret(
        &self,
        interface: &str,
        capability: &str,
        name: &str,
    ) -> Result<Option<hcp_sandbox::OperatorSecret>, TaskStoreError> {
        self.operator_secret_of(interface, capability, name)
    }

    fn save_checkpoint(
        &self,
        task: &TaskMeta,
        id: &str,
        label: &str,
        state: &[u8],
    ) -> Result<(), TaskStoreError> {
        self.insert_checkpoint(task, id, label, state)
            .map_err(|e| TaskStoreError(e.to_string()))
    }

    fn load_checkpoint(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<Vec<u8>>, TaskStoreError> {
        self.checkpoint_state(session_id, id)
            .map_err(|e| TaskStoreError(e.to_string()))
    }

    // Interface state: in `super::interface_state`.

    fn state_get(&self, at: StateSpace<'_>, key: &str) -> Result<Option<Vec<u8>>, TaskStoreError> {
        self.state_value(at, key).map_err(state_error)
    }

    fn state_set(&self, at: StateSpace<'_>, key: &str, value: &[u8]) -> Result<(), TaskStoreError> {
        self.state_put(at, key, value).map_err(state_error)
    }

    fn state_delete(&self, at: StateSpace<'_>, key: &str) -> Result<(), TaskStoreError> {
        self.state_remove(at, key).map_err(state_error)
    }

    fn state_keys(
        &self,
        at: StateSpace<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, TaskStoreError> {
        self.state_page(at, offset, limit).map_err(state_error)
    }

    fn state_usage(&self, at: StateSpace<'_>, key: &str) -> Result<StateUsage, TaskStoreError> {
        self.state_held(at, key).map_err(state_error)
    }

    fn state_update(
        &self,
        at: StateSpace<'_>,
        key: &str,
        update: StateUpdate<'_>,
    ) -> Result<Vec<u8>, TaskStoreError> {
        self.state_replace(at, key, update)
    }
}

fn state_error(e: rusqlite::Error) -> TaskStoreError {
    TaskStoreError(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TaskMeta {
        TaskMeta {
            task_id: "task-1".into(),
            session_id: "session-1".into(),
            capability: "c".into(),
            version: "1.0.0".into(),
            resume: None,
            data_classification: hcp_contracts::DataClass::T1,
        }
    }

    #[test]
    fn artifacts_survive_reopening_and_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = Store::open(dir.path()).expect("open");
            let a = store
                .put_artifact(&meta(), "raw.json", "application/json", b"{\"a\":1}")
                .expect("put");
            assert_eq!(a.uri, "hcp://session-1/artifacts/raw.json");
            store
                .save_checkpoint(&meta(), "ckpt-001", "ramp", b"state")
                .expect("save");
        }
        let store = Store::open(dir.path()).expect("reopen");
        let (a, bytes, class) = store
            .artifact("hcp://session-1/artifacts/raw.json")
            .expect("get");
        assert_eq!(class, hcp_contracts::DataClass::T1);
        assert_eq!(bytes, b"{\"a\":1}");
        assert_eq!(a.size_bytes, 7);
        assert_eq!(
            store
                .load_checkpoint("session-1", "ckpt-001")
                .expect("load"),
            Some(b"state".to_vec())
        );
        // A tampered blob is refused.
        let hex = a.checksum.trim_start_matches("sha256:");
        std::fs::write(dir.path().join("blobs/sha256").join(hex), b"evil").expect("write");
        let err = store
            .artifact("hcp://session-1/artifacts/raw.json")
            .expect_err("tampered blob accepted");
        assert!(format!("{err:#}").contains("does not match its checksum"));
    }

    #[test]
    fn t3_artifacts_are_sealed_at_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let meta = TaskMeta {
            data_classification: hcp_contracts::DataClass::T3,
            ..meta()
        };
        let a = store
            .put_artifact(&meta, "secret.txt", "text/plain", b"confidential findings")
            .expect("put");
        let hex = a.checksum.trim_start_matches("sha256:");
        assert!(!dir.path().join("blobs/sha256").join(hex).exists());
        let on_disk =
            std::fs::read(dir.path().join("blobs/sealed").join(hex)).expect("sealed blob");
        assert!(!on_disk.windows(12).any(|w| w == b"confidential"));
        let (_, bytes, class) = store.artifact(&a.uri).expect("get");
        assert_eq!(bytes, b"confidential findings");
        assert_eq!(class, hcp_contracts::DataClass::T3);
    }

    #[test]
    fn artifact_uris() {
        assert!(parse_artifact_uri("hcp://s/artifacts/a.json").is_ok());
        for bad in [
            "http://s/artifacts/a",
            "hcp://s/a",
            "hcp:///artifacts/a",
            "hcp://s/artifacts/a/b",
        ] {
            assert!(parse_artifact_uri(bad).is_err(), "{bad}");
        }
    }
}
