//! Trusted publishers: a name and its Ed25519 public key. A bundle installs
//! only when its signature verifies under a key recorded here, under the
//! very name it was signed with. One key per publisher and one publisher
//! per key: rotating a key is `remove` then `add`.

use super::{Store, now};
use anyhow::{Context as _, Result};
use hcp_bundle::{PublisherName, TrustedKey};
use hcp_receipts::PublicKey;
use rusqlite::{OptionalExtension, params};

/// A trusted publisher as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedPublisher {
    /// Name.
    pub name: PublisherName,
    /// Key.
    pub public_key: PublicKey,
    /// When it was added (RFC 3339 UTC).
    pub added_at: String,
}

impl TrustedPublisher {
    /// As the bundle crate's trust check takes it.
    pub fn as_trusted_key(&self) -> TrustedKey {
        TrustedKey {
            publisher: self.name.clone(),
            public_key: self.public_key.clone(),
        }
    }
}

/// What `trust add` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// A new record.
    New,
    /// The same name and key were trusted already.
    AlreadyTrusted,
}

fn publisher(name: String, key: String, added_at: String) -> Result<TrustedPublisher> {
    Ok(TrustedPublisher {
        name: PublisherName::try_from(name).map_err(anyhow::Error::msg)?,
        public_key: key
            .parse()
            .map_err(|e: String| anyhow::anyhow!("trust store: {e}"))?,
        added_at,
    })
}

impl Store {
    /// Trusts `key` as `name`.
    ///
    /// # Errors
    ///
    /// The name is trusted with another key, or the key under another
    /// name; or the database fails.
    pub fn trust_publisher(&self, name: &PublisherName, key: &PublicKey) -> Result<Added> {
        let db = self.db();
        // The write lock first: read, then written, with no other
        // process's commit in between (a deferred transaction would fail
        // busy at once when one came).
        let tx =
            rusqlite::Transaction::new_unchecked(&db, rusqlite::TransactionBehavior::Immediate)?;
        let by_name: Option<String> = tx
            .query_row(
                "SELECT public_key FROM trusted_publishers WHERE name = ?1",
                params![name.as_str()],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(existing) = by_name {
            if existing == key.to_string() {
                return Ok(Added::AlreadyTrusted);
            }
            let existing: PublicKey = existing.parse().map_err(anyhow::Error::msg)?;
            anyhow::bail!(
                "publisher {name} is already trusted with key {}; to rotate its key, \
                 `hcp trust remove {name}` first",
                existing.key_id()
            );
        }
        let by_key: Option<String> = tx
            .query_row(
                "SELECT name FROM trusted_publishers WHERE key_id = ?1",
                params![key.key_id().as_str()],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(other) = by_key {
            anyhow::bail!(
                "key {} is already trusted as publisher {other}; a key belongs to one publisher",
                key.key_id()
            );
        }
        tx.execute(
            "INSERT INTO trusted_publishers (name, public_key, key_id, added_at) VALUES (?1, ?2, ?3, ?4)",
            params![name.as_str(), key.to_string(), key.key_id().as_str(), now()],
        )?;
        tx.commit()?;
        Ok(Added::New)
    }

    /// Every trusted publisher, by name.
    ///
    /// # Errors
    ///
    /// The database fails, or holds a malformed record.
    pub fn trusted_publishers(&self) -> Result<Vec<TrustedPublisher>> {
        let db = self.db();
        let mut stmt =
            db.prepare("SELECT name, public_key, added_at FROM trusted_publishers ORDER BY name")?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<Vec<(String, String, String)>>>()?;
        rows.into_iter()
            .map(|(n, k, a)| publisher(n, k, a))
            .collect::<Result<_>>()
            .context("trust store")
    }

    /// Stops trusting `name`.
    ///
    /// # Errors
    ///
    /// The name is not trusted, or the database fails.
    pub fn distrust_publisher(&self, name: &PublisherName) -> Result<TrustedPublisher> {
        let db = self.db();
        // The write lock first: read, then written, with no other
        // process's commit in between (a deferred transaction would fail
        // busy at once when one came).
        let tx =
            rusqlite::Transaction::new_unchecked(&db, rusqlite::TransactionBehavior::Immediate)?;
        let row: Option<(String, String, String)> = tx
            .query_row(
                "SELECT name, public_key, added_at FROM trusted_publishers WHERE name = ?1",
                params![name.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((n, k, a)) = row else {
            anyhow::bail!("publisher {name} is not trusted (hcp trust list)");
        };
        tx.execute(
            "DELETE FROM trusted_publishers WHERE name = ?1",
            params![name.as_str()],
        )?;
        tx.commit()?;
        publisher(n, k, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_receipts::HostKey;

    #[test]
    fn add_list_remove() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let acme: PublisherName = "acme".parse().expect("name");
        let other: PublisherName = "other".parse().expect("name");
        let k1 = HostKey::from_seed(&[1; 32]);
        let k2 = HostKey::from_seed(&[2; 32]);
        assert_eq!(
            store.trust_publisher(&acme, k1.public()).expect("add"),
            Added::New
        );
        assert_eq!(
            store.trust_publisher(&acme, k1.public()).expect("again"),
            Added::AlreadyTrusted
        );
        let e = store
            .trust_publisher(&acme, k2.public())
            .expect_err("rotate");
        assert_eq!(
            e.to_string(),
            format!(
                "publisher acme is already trusted with key {}; to rotate its key, \
                 `hcp trust remove acme` first",
                k1.key_id()
            )
        );
        let e = store
            .trust_publisher(&other, k1.public())
            .expect_err("same key");
        assert_eq!(
            e.to_string(),
            format!(
                "key {} is already trusted as publisher acme; a key belongs to one publisher",
                k1.key_id()
            )
        );
        drop(store);
        let store = Store::open(dir.path()).expect("reopen");
        let list = store.trusted_publishers().expect("list");
        assert_eq!(list.len(), 1);
        assert_eq!(&list[0].public_key, k1.public());
        store.distrust_publisher(&acme).expect("remove");
        assert!(store.trusted_publishers().expect("list").is_empty());
        assert_eq!(
            store
                .distrust_publisher(&acme)
                .expect_err("gone")
                .to_string(),
            "publisher acme is not trusted (hcp trust list)"
        );
    }
}
