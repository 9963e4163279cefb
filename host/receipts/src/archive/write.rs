//! Writing a deterministic tar archive.

use super::{PathProblem, check_path};

/// Why an archive could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteProblem {
    /// An entry path breaks the rule.
    #[error("entry {path:?}: {problem}")]
    Path {
        /// The entry.
        path: String,
        /// What is wrong with it.
        problem: PathProblem,
    },
    /// The entry's header could not be made.
    #[error("{path}: {source}")]
    Header {
        /// The entry.
        path: String,
        /// What the tar writer said.
        source: std::io::Error,
    },
    /// The entry could not be appended.
    #[error("{path}: {source}")]
    Append {
        /// The entry.
        path: String,
        /// What the tar writer said.
        source: std::io::Error,
    },
    /// The end of the archive could not be written.
    #[error("{0}")]
    Finish(std::io::Error),
}

/// Writes `entries` as a deterministic ustar archive (see the module doc),
/// sorted by path whatever their order here.
///
/// # Errors
///
/// The first entry (in path order) whose path breaks the rule or that
/// cannot be written.
pub fn write<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Vec<u8>, WriteProblem> {
    let mut all: Vec<(&str, &[u8])> = entries.into_iter().collect();
    all.sort_by(|a, b| a.0.cmp(b.0));
    let total: usize = all
        .iter()
        .map(|(_, b)| 512 + b.len().next_multiple_of(512))
        .sum();
    let mut builder = tar::Builder::new(Vec::with_capacity(total + 1024));
    for (path, bytes) in all {
        check_path(path).map_err(|problem| WriteProblem::Path {
            path: path.to_owned(),
            problem,
        })?;
        let header = header(path, bytes.len() as u64).map_err(|source| WriteProblem::Header {
            path: path.to_owned(),
            source,
        })?;
        builder
            .append(&header, bytes)
            .map_err(|source| WriteProblem::Append {
                path: path.to_owned(),
                source,
            })?;
    }
    builder.into_inner().map_err(WriteProblem::Finish)
}

/// The fixed ustar header of a regular file.
fn header(path: &str, size: u64) -> std::io::Result<tar::Header> {
    let mut h = tar::Header::new_ustar();
    h.set_path(path)?;
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_username("")?;
    h.set_groupname("")?;
    h.set_device_major(0)?;
    h.set_device_minor(0)?;
    h.set_cksum();
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::super::{TarLimits, read_entries};
    use super::*;

    #[test]
    fn the_same_entries_give_the_same_bytes_in_any_order() {
        let one = write([("b.txt", &b"two"[..]), ("a/x.txt", b"one")]).expect("write");
        let two = write([("a/x.txt", &b"one"[..]), ("b.txt", b"two")]).expect("write");
        assert_eq!(one, two);
        // Two headers, two padded bodies, the end-of-archive marker.
        assert_eq!(one.len(), 2 * (512 + 512) + 1024);
        let read = read_entries(
            &one,
            TarLimits {
                entries: 10,
                total_bytes: 100,
            },
            |_| 100,
            |p| check_path(p).map_err(|e| e.to_string()),
            |p| format!("{p:?}"),
        )
        .expect("read");
        let paths: Vec<&str> = read.keys().map(String::as_str).collect();
        assert_eq!(paths, ["a/x.txt", "b.txt"]);
        assert_eq!(read["b.txt"], b"two");
    }

    #[test]
    fn a_path_outside_the_rule_is_refused() {
        let err = write([("ok.txt", &b""[..]), ("../x", b"")]).expect_err("refused");
        assert!(matches!(
            err,
            WriteProblem::Path {
                problem: PathProblem::Traversal,
                ..
            }
        ));
    }
}
