//! Installed capabilities: several versions side by side; the task layer
//! picks the highest version a `capability_version` range admits.

use super::Store;
use anyhow::{Context as _, Result};
use rusqlite::{OptionalExtension, params};
use std::path::PathBuf;

/// One installed capability version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Capability name.
    pub name: String,
    /// Version.
    pub version: semver::Version,
    /// Its directory under the data directory (manifest, component, WIT).
    pub dir: PathBuf,
    /// `sha256:` of the component.
    pub digest: String,
    /// Publisher that signed it, if any.
    pub publisher: Option<String>,
    /// Installed with `--allow-unsigned`.
    pub unsigned: bool,
    /// When.
    pub installed_at: String,
}

impl Installed {
    /// The installed manifest.
    pub fn manifest_path(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }

    /// `name@version`.
    pub fn id(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// What a `capability_version` range selects among the installed versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// The highest version it admits.
    One(Installed),
    /// No installed version matches.
    None,
    /// The highest versions it admits are equal in precedence (recorded by
    /// a host that allowed it): why none is chosen.
    Ambiguous(String),
}

/// name, version, dir, digest, publisher, unsigned, installed_at.
type Row = (String, String, String, String, Option<String>, i64, String);

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn installed(
    (name, version, dir, digest, publisher, unsigned, installed_at): Row,
) -> Result<Installed> {
    Ok(Installed {
        version: semver::Version::parse(&version)
            .with_context(|| format!("registry: {name}@{version}"))?,
        name,
        dir: PathBuf::from(dir),
        digest,
        publisher,
        unsigned: unsigned != 0,
        installed_at,
    })
}

const COLUMNS: &str = "name, version, dir, digest, publisher, unsigned, installed_at";

/// The installed version of `name` equal in precedence to `version`, read
/// on `db` (the store's connection, or a transaction on it).
fn equal_in_precedence(
    db: &rusqlite::Connection,
    name: &str,
    version: &semver::Version,
) -> Result<Option<Installed>> {
    let rows = db
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM capabilities WHERE name = ?1 AND major = ?2 AND minor = ?3 \
             AND patch = ?4 ORDER BY version"
        ))?
        .query_map(
            params![
                name,
                i64::try_from(version.major)?,
                i64::try_from(version.minor)?,
                i64::try_from(version.patch)?
            ],
            row,
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for found in rows {
        let found = installed(found)?;
        if found.version.cmp_precedence(version) == std::cmp::Ordering::Equal {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Why `new` is not installed beside `installed`, equal to it in precedence.
fn same_precedence(new: &Installed, installed: &Installed) -> String {
    if new.version == installed.version {
        format!("{} is already installed", new.id())
    } else {
        same_precedence_message(&new.id(), installed)
    }
}

/// Why `new` (`name@version`) is refused beside `installed`, a different
/// version equal to it in precedence.
pub fn same_precedence_message(new: &str, installed: &Installed) -> String {
    format!(
        "{new} is equal in precedence to the installed {} (versions that differ only in build \
         metadata are the same version to a task's capability_version): hcp remove {} first, \
         or give this one another version",
        installed.id(),
        installed.id()
    )
}

impl Store {
    /// Records an installed capability (replacing nothing: a version is
    /// installed once).
    ///
    /// # Errors
    ///
    /// That version is already installed, or the database fails.
    pub fn record_install(&self, i: &Installed) -> Result<()> {
        self.record_install_trusted(i, None)
    }

    /// [`Store::record_install`] of a bundle signed by `signer` (its name
    /// and public key), in one transaction with the check that the
    /// publisher is still trusted with that key: a `hcp trust remove`
    /// between the install's first check and its end refuses the install
    /// instead of leaving a distrusted publisher's capability installed.
    ///
    /// # Errors
    ///
    /// The publisher is no longer trusted, the version is installed
    /// already, or the database fails.
    pub fn record_signed_install(
        &self,
        i: &Installed,
        publisher: &str,
        public_key: &str,
    ) -> Result<()> {
        self.record_install_trusted(i, Some((publisher, public_key)))
    }

    fn record_install_trusted(&self, i: &Installed, signer: Option<(&str, &str)>) -> Result<()> {
        let v = &i.version;
        let db = self.db();
        let tx =
            rusqlite::Transaction::new_unchecked(&db, rusqlite::TransactionBehavior::Immediate)?;
        if let Some((publisher, key)) = signer {
            let trusted: Option<i64> = tx
                .prepare_cached(
                    "SELECT 1 FROM trusted_publishers WHERE name = ?1 AND public_key = ?2",
                )?
                .query_row(params![publisher, key], |r| r.get(0))
                .optional()?;
            if trusted.is_none() {
                anyhow::bail!(
                    "publisher {publisher} is no longer trusted (it was removed while {} was \
                     being installed): nothing was installed",
                    i.id()
                );
            }
        }
        // One version per precedence: a task's `=1.0.0` names exactly one
        // installed version (build metadata is ignored when versions are
        // compared, so `1.0.0+build.2` would be run for it too).
        if let Some(same) = equal_in_precedence(&tx, &i.name, v)? {
            anyhow::bail!("{}", same_precedence(i, &same));
        }
        tx
            .prepare_cached(
                &format!("INSERT INTO capabilities ({COLUMNS}, major, minor, patch) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"))?.execute(
                params![
                    i.name,
                    v.to_string(),
                    i.dir.display().to_string(),
                    i.digest,
                    i.publisher,
                    i64::from(i.unsigned),
                    i.installed_at,
                    i64::try_from(v.major)?,
                    i64::try_from(v.minor)?,
                    i64::try_from(v.patch)?
                ],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                    anyhow::anyhow!("{} is already installed", i.id())
                }
                e => e.into(),
            })?;
        tx.commit()?;
        Ok(())
    }

    /// Every installed capability, by name then version.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn installed(&self) -> Result<Vec<Installed>> {
        let db = self.db();
        let mut stmt = db.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM capabilities ORDER BY name, major, minor, patch, version"
        ))?;
        let rows = stmt
            .query_map([], row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().map(installed).collect()
    }

    /// One installed version.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn installed_version(&self, name: &str, version: &str) -> Result<Option<Installed>> {
        let found = self
            .db()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM capabilities WHERE name = ?1 AND version = ?2"
            ))?
            .query_row(params![name, version], row)
            .optional()?;
        found.map(installed).transpose()
    }

    /// The installed version of `name` equal in precedence to `version`
    /// (the same version, or one that differs from it only in build
    /// metadata), if any.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn installed_equal(
        &self,
        name: &str,
        version: &semver::Version,
    ) -> Result<Option<Installed>> {
        equal_in_precedence(&self.db(), name, version)
    }

    /// The highest installed version of `name` that `req` admits.
    ///
    /// Versions are compared by precedence, build metadata ignored (as
    /// `req` ignores it): an install refuses a version equal in precedence
    /// to an installed one, and two such versions recorded before that
    /// refusal existed are [`Selection::Ambiguous`], never a choice made
    /// by their metadata.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn select(&self, name: &str, req: &semver::VersionReq) -> Result<Selection> {
        let mut matching: Vec<Installed> = self
            .installed()?
            .into_iter()
            .filter(|i| i.name == name && req.matches(&i.version))
            .collect();
        matching.sort_by(|a, b| b.version.cmp_precedence(&a.version));
        let mut highest = matching.into_iter();
        let Some(top) = highest.next() else {
            return Ok(Selection::None);
        };
        if let Some(next) = highest.next()
            && top.version.cmp_precedence(&next.version) == std::cmp::Ordering::Equal
        {
            return Ok(Selection::Ambiguous(format!(
                "{} and {} are both installed and equal in precedence (they differ only in build \
                 metadata), so {req} does not name one of them: hcp remove one of them",
                top.id(),
                next.id()
            )));
        }
        Ok(Selection::One(top))
    }

    /// Forgets an installed version (the caller removes its files).
    ///
    /// # Errors
    ///
    /// Not installed, or the database fails.
    pub fn record_removal(&self, name: &str, version: &str) -> Result<()> {
        let n = self
            .db()
            .prepare_cached("DELETE FROM capabilities WHERE name = ?1 AND version = ?2")?
            .execute(params![name, version])?;
        if n == 0 {
            anyhow::bail!("{name}@{version} is not installed");
        }
        Ok(())
    }
}

impl Selection {
    /// The version selected, if one was.
    pub fn one(self) -> Option<Installed> {
        match self {
            Self::One(installed) => Some(installed),
            Self::None | Self::Ambiguous(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str) -> Installed {
        Installed {
            name: "cap".into(),
            version: semver::Version::parse(version).expect("v"),
            dir: PathBuf::from(format!("/x/{version}")),
            digest: "sha256:00".into(),
            publisher: None,
            unsigned: true,
            installed_at: "t".into(),
        }
    }

    /// A signed install is recorded only while its publisher is trusted
    /// with the key that signed it: checked in the transaction that
    /// records it, so a `hcp trust remove` that came first refuses it.
    #[test]
    fn a_signed_install_is_recorded_only_while_its_publisher_is_trusted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let key = hcp_receipts::HostKey::generate().expect("key");
        let public = key.public().to_string();
        let name = hcp_bundle::PublisherName::try_from("acme-labs".to_owned()).expect("name");
        store.trust_publisher(&name, key.public()).expect("trust");
        let signed = |v: &str| Installed {
            publisher: Some("acme-labs".into()),
            unsigned: false,
            ..at(v)
        };
        store
            .record_signed_install(&signed("1.0.0"), "acme-labs", &public)
            .expect("trusted");
        store.distrust_publisher(&name).expect("distrust");
        let e = store
            .record_signed_install(&signed("1.1.0"), "acme-labs", &public)
            .expect_err("recorded after the publisher was distrusted");
        assert_eq!(
            e.to_string(),
            "publisher acme-labs is no longer trusted (it was removed while cap@1.1.0 was \
             being installed): nothing was installed"
        );
        let versions: Vec<String> = store
            .installed()
            .expect("installed")
            .into_iter()
            .map(|i| i.version.to_string())
            .collect();
        assert_eq!(versions, ["1.0.0"]);
    }

    #[test]
    fn ranges_pick_the_highest_installed_match() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        for v in ["1.0.0", "1.4.2", "2.0.0", "2.1.0-rc.1", "1.10.0"] {
            store.record_install(&at(v)).expect("install");
        }
        let pick = |r: &str| {
            store
                .select("cap", &semver::VersionReq::parse(r).expect("req"))
                .expect("select")
                .one()
                .map(|i| i.version.to_string())
        };
        assert_eq!(pick("1.x").as_deref(), Some("1.10.0"));
        assert_eq!(pick(">=2.0.0").as_deref(), Some("2.0.0"));
        assert_eq!(pick("*").as_deref(), Some("2.0.0"));
        assert_eq!(pick("3.x"), None);
        assert!(store.record_install(&at("1.0.0")).is_err());
        store.record_removal("cap", "1.10.0").expect("remove");
        assert_eq!(pick("1.x").as_deref(), Some("1.4.2"));
    }

    /// A version equal in precedence to an installed one (the same but
    /// for its build metadata) is refused: `=1.0.0` would have run
    /// `1.0.0+build.2`, since a range ignores build metadata and the
    /// selection took the higher by it. Two such versions a host recorded
    /// before the refusal make the selection ambiguous, never a choice.
    #[test]
    fn a_version_equal_in_precedence_to_an_installed_one_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        store.record_install(&at("1.0.0")).expect("install");
        let e = store
            .record_install(&at("1.0.0+build.2"))
            .expect_err("installed beside 1.0.0");
        assert_eq!(
            e.to_string(),
            "cap@1.0.0+build.2 is equal in precedence to the installed cap@1.0.0 (versions that \
             differ only in build metadata are the same version to a task's capability_version): \
             hcp remove cap@1.0.0 first, or give this one another version"
        );
        let e = store.record_install(&at("1.0.0")).expect_err("twice");
        assert_eq!(e.to_string(), "cap@1.0.0 is already installed");
        // A pre-release differs in precedence.
        store.record_install(&at("1.0.0-rc.1")).expect("install");
        let pin = semver::VersionReq::parse("=1.0.0").expect("req");
        let picked = store.select("cap", &pin).expect("select");
        assert_eq!(
            picked.one().map(|i| i.version.to_string()).as_deref(),
            Some("1.0.0")
        );
        // As an older host could have recorded it.
        store
            .db()
            .execute(
                "INSERT INTO capabilities (name, version, dir, digest, publisher, unsigned, \
                 installed_at, major, minor, patch) VALUES ('cap', '1.0.0+build.2', '/x/b', \
                 'sha256:00', NULL, 1, 't', 1, 0, 0)",
                [],
            )
            .expect("insert");
        assert_eq!(
            store.select("cap", &pin).expect("select"),
            Selection::Ambiguous(
                "cap@1.0.0 and cap@1.0.0+build.2 are both installed and equal in precedence \
                 (they differ only in build metadata), so =1.0.0 does not name one of them: \
                 hcp remove one of them"
                    .to_owned()
            )
        );
    }
}
