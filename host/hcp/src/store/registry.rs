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

impl Store {
    /// Records an installed capability (replacing nothing: a version is
    /// installed once).
    ///
    /// # Errors
    ///
    /// That version is already installed, or the database fails.
    pub fn record_install(&self, i: &Installed) -> Result<()> {
        let v = &i.version;
        self.db()
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

    /// The highest installed version of `name` that `req` admits.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn select(&self, name: &str, req: &semver::VersionReq) -> Result<Option<Installed>> {
        Ok(self
            .installed()?
            .into_iter()
            .filter(|i| i.name == name && req.matches(&i.version))
            .max_by(|a, b| a.version.cmp(&b.version)))
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
}
