//! {{name}}: counts the lines, words and bytes of every file in a directory
//! the manifest grants, returns the counts, and writes them as a CSV
//! artifact.
//!
//! The host gives the component nothing but what `manifest.json` grants:
//! here one directory, read-only, seen by the guest at `/data`. Reading
//! anywhere else fails as if the path did not exist, and every call the
//! component makes (each file opened, each log line, the artifact) is
//! decided by the host's policy and recorded in a receipt.

use hcp_guest::log::Level;
use hcp_guest::{Failure, Task, artifacts, log};
use serde::{Deserialize, Serialize};

/// `inputs` of the task_submit (checked against the manifest's
/// `input_schema` before the component runs).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    /// The directory to count, as the guest sees it: a granted `guest_path`.
    directory: String,
}

/// `outputs` of task_completed (checked against `output_schema`).
#[derive(Debug, Serialize)]
struct Output {
    /// One entry per regular file, by name.
    files: Vec<Counts>,
    /// The sums over every file.
    total: Counts,
    /// The CSV report: an `hcp://` artifact URI.
    report: String,
}

/// The counts of one file (or of all of them).
#[derive(Debug, Clone, Default, Serialize)]
struct Counts {
    name: String,
    lines: u64,
    words: u64,
    bytes: u64,
}

fn count_text(name: String, bytes: &[u8]) -> Counts {
    let text = String::from_utf8_lossy(bytes);
    Counts {
        name,
        lines: text.lines().count() as u64,
        words: text.split_whitespace().count() as u64,
        bytes: bytes.len() as u64,
    }
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn count(_task: &Task, input: Input) -> Result<Output, Failure> {
    let dir = &input.directory;
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::unavailable(format!("cannot read {dir}: {e} (is it granted?)")))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Failure::unavailable(format!("{dir}: {e}")))?;
        let path = entry.path();
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !is_file {
            continue;
        }
        let bytes = std::fs::read(&path)
            .map_err(|e| Failure::unavailable(format!("{}: {e}", path.display())))?;
        let counts = count_text(entry.file_name().to_string_lossy().into_owned(), &bytes);
        let words = counts.words.to_string();
        log::write(
            Level::Info,
            "counted",
            &[("file", counts.name.as_str()), ("words", words.as_str())],
        );
        files.push(counts);
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let total = files.iter().fold(
        Counts {
            name: "total".into(),
            ..Counts::default()
        },
        |sum, c| Counts {
            lines: sum.lines + c.lines,
            words: sum.words + c.words,
            bytes: sum.bytes + c.bytes,
            ..sum
        },
    );
    let mut csv = String::from("file,lines,words,bytes\n");
    for c in files.iter().chain([&total]) {
        csv.push_str(&format!(
            "{},{},{},{}\n",
            csv_field(&c.name),
            c.lines,
            c.words,
            c.bytes
        ));
    }
    // The host stores the artifact, content-addressed, and answers its URI.
    let report = artifacts::create("word-count.csv", "text/csv", csv.as_bytes())?;
    log::info(&format!("{} files, {} words", files.len(), total.words));
    Ok(Output {
        files,
        total,
        report,
    })
}

hcp_guest::export_capability!(count);
