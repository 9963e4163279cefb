//! Where a command finds the host's state: `--data-dir`, `--cache-dir`,
//! `--policies` (and `HCP_DATA_DIR`, `HCP_CACHE_DIR`, `HCP_POLICIES`).
//!
//! Each command takes the ones it uses and no other: a command that reads
//! no store has no `--data-dir`. A group whose every subcommand uses them
//! (`hcp tasks`, `hcp trust`, ...) declares them once, as global options of
//! the group, so they are accepted before or after the subcommand's name.
//!
//! The flags were global options of `hcp` itself; that position (`hcp
//! --data-dir DIR install ...`) is still accepted: [`legacy_order`] moves
//! them after the subcommand, where the command that takes them finds them
//! and a command that does not refuses them.

use std::ffi::OsString;
use std::path::PathBuf;

/// `--data-dir`: commands that read or write the host's database.
#[derive(Debug, Clone, clap::Args)]
pub struct DataDir {
    /// Data directory (SQLite database, installed capabilities, artifacts,
    /// keys).
    #[arg(
        long = "data-dir",
        global = true,
        help_heading = "Directories",
        env = "HCP_DATA_DIR",
        default_value = ".hcp",
        value_name = "DIR"
    )]
    data_dir: PathBuf,
}

impl DataDir {
    /// The data directory, absolute.
    pub(crate) fn path(&self) -> anyhow::Result<PathBuf> {
        Ok(std::path::absolute(&self.data_dir)?)
    }
}

/// `--data-dir` and `--cache-dir`: commands that compile components.
#[derive(Debug, Clone, clap::Args)]
pub struct CacheDirs {
    #[command(flatten)]
    data: DataDir,
    /// Compiled-code cache (default: `cache/` in the data directory).
    #[arg(
        long,
        global = true,
        help_heading = "Directories",
        env = "HCP_CACHE_DIR",
        value_name = "DIR"
    )]
    cache_dir: Option<PathBuf>,
}

impl CacheDirs {
    /// The data directory, absolute.
    pub(crate) fn data_dir(&self) -> anyhow::Result<PathBuf> {
        self.data.path()
    }

    /// The compiled-code cache, absolute.
    pub(crate) fn cache_dir(&self) -> anyhow::Result<PathBuf> {
        match &self.cache_dir {
            Some(dir) => Ok(std::path::absolute(dir)?),
            None => Ok(self.data.path()?.join("cache")),
        }
    }
}

impl CacheDirs {
    /// The compiled-code cache of a command that only reads (`hcp surface`,
    /// `hcp review`): `--cache-dir` / `HCP_CACHE_DIR`, or `cache/` of the
    /// data directory when that exists; otherwise a temporary directory,
    /// removed when the returned handle drops, so that the command makes
    /// no `.hcp` where it is run.
    pub(crate) fn cache_dir_or_temp(&self) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
        if self.cache_dir.is_some() || self.data.path()?.is_dir() {
            return Ok((self.cache_dir()?, None));
        }
        let temp = tempfile::Builder::new().prefix("hcp-cache-").tempdir()?;
        Ok((temp.path().to_path_buf(), Some(temp)))
    }
}

/// `--data-dir`, `--cache-dir` and `--policies`: commands that run, admit
/// or install capabilities.
#[derive(Debug, Clone, clap::Args)]
pub struct HostDirs {
    #[command(flatten)]
    dirs: CacheDirs,
    /// The operator's policy directory (callers, risk, context, budgets,
    /// envelopes, install policy, Cedar authorization). Default:
    /// ./policies if it is a directory, else policies/ in the data
    /// directory (`hcp init` makes it).
    #[arg(
        long,
        global = true,
        help_heading = "Directories",
        env = "HCP_POLICIES",
        value_name = "DIR"
    )]
    policies: Option<PathBuf>,
}

impl HostDirs {
    /// The three directories, absolute.
    ///
    /// # Errors
    ///
    /// A directory cannot be made absolute, or there is no policy set where
    /// the command looks (one error naming the directory, why it looked
    /// there, and `hcp init`).
    pub(crate) fn paths(&self) -> anyhow::Result<super::Paths> {
        let data_dir = self.dirs.data_dir()?;
        let policies_dir = match &self.policies {
            Some(dir) => std::path::absolute(dir)?,
            None => super::init::default_policies(&data_dir)?,
        };
        let paths = super::Paths {
            cache_dir: self.dirs.cache_dir()?,
            data_dir,
            policies_dir,
        };
        super::init::require_policies(&paths, self.policies.is_some())?;
        Ok(paths)
    }
}

/// Where the policy set a command reads comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PolicySource {
    /// `--policies` or `HCP_POLICIES`.
    Given,
    /// `./policies`, or `policies/` of the data directory.
    Found,
    /// None of them exists: the set shipped with `hcp` (this repository's
    /// `policies/`), for commands that only read it.
    Shipped,
}

impl HostDirs {
    /// The directories of a command that reads the policy set and need not
    /// have one of its own (`hcp review`): as [`HostDirs::paths`], but
    /// where no policy set is found the shipped one stands in (written into
    /// a temporary directory, removed when the returned handle drops), and
    /// the cache is [`CacheDirs::cache_dir_or_temp`]'s.
    pub(crate) fn paths_for_reading(
        &self,
    ) -> anyhow::Result<(super::Paths, PolicySource, Vec<tempfile::TempDir>)> {
        let data_dir = self.dirs.data_dir()?;
        let mut held = Vec::new();
        let (cache_dir, temp) = self.dirs.cache_dir_or_temp()?;
        held.extend(temp);
        let (policies_dir, source) = match &self.policies {
            Some(dir) => (std::path::absolute(dir)?, PolicySource::Given),
            None => {
                let found = super::init::default_policies(&data_dir)?;
                if found.join("callers.json").is_file() {
                    (found, PolicySource::Found)
                } else {
                    let temp = tempfile::Builder::new().prefix("hcp-policies-").tempdir()?;
                    for (name, text) in super::init::shipped_policies() {
                        std::fs::write(temp.path().join(name), text)?;
                    }
                    let dir = temp.path().to_path_buf();
                    held.push(temp);
                    (dir, PolicySource::Shipped)
                }
            }
        };
        let paths = super::Paths {
            cache_dir,
            data_dir,
            policies_dir,
        };
        if source == PolicySource::Given {
            super::init::require_policies(&paths, true)?;
        }
        Ok((paths, source, held))
    }
}

/// The options [`legacy_order`] moves.
const MOVED: [&str; 3] = ["--data-dir", "--cache-dir", "--policies"];

/// Moves `--data-dir`, `--cache-dir` and `--policies` (with their values)
/// written before the subcommand's name to the end of the arguments (before
/// a `--`, if any), where the subcommand that takes them parses them.
/// Everything else keeps its order.
pub(crate) fn legacy_order(args: Vec<OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    let mut moved = Vec::new();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        let takes_value = MOVED.contains(&text.as_ref());
        let inline = MOVED
            .iter()
            .any(|m| text.strip_prefix(m).is_some_and(|r| r.starts_with('=')));
        if takes_value {
            moved.push(arg);
            moved.extend(args.next());
        } else if inline {
            moved.push(arg);
        } else if text.starts_with('-') {
            // `--help`, `--version`: `hcp` takes no other option.
            out.push(arg);
        } else {
            // The subcommand: the rest is its own.
            out.push(arg);
            break;
        }
    }
    let rest: Vec<OsString> = args.collect();
    let end = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
    out.extend(rest[..end].iter().cloned());
    out.extend(moved);
    out.extend(rest[end..].iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::legacy_order;
    use std::ffi::OsString;

    fn order(args: &[&str]) -> Vec<String> {
        legacy_order(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|a| a.into_string().expect("utf-8"))
            .collect()
    }

    #[test]
    fn options_before_the_subcommand_move_after_it() {
        assert_eq!(
            order(&[
                "hcp",
                "--data-dir",
                "d",
                "--policies=p",
                "run",
                "--manifest",
                "m"
            ]),
            [
                "hcp",
                "run",
                "--manifest",
                "m",
                "--data-dir",
                "d",
                "--policies=p"
            ]
        );
        assert_eq!(
            order(&[
                "hcp",
                "--cache-dir",
                "c",
                "evidence",
                "export",
                "--all",
                "--",
                "x"
            ]),
            [
                "hcp",
                "evidence",
                "export",
                "--all",
                "--cache-dir",
                "c",
                "--",
                "x"
            ]
        );
    }

    #[test]
    fn everything_else_keeps_its_place() {
        let same = ["hcp", "run", "--data-dir", "d", "--manifest", "m"];
        assert_eq!(order(&same), same);
        assert_eq!(order(&["hcp", "--help"]), ["hcp", "--help"]);
        // A value that looks like the option is the subcommand's own.
        assert_eq!(
            order(&["hcp", "tasks", "show", "--data-dir"]),
            ["hcp", "tasks", "show", "--data-dir"]
        );
        // A missing value stays missing: clap says so.
        assert_eq!(order(&["hcp", "--data-dir"]), ["hcp", "--data-dir"]);
    }
}
