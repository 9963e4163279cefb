//! `document-analysis`: the R1 example of seed 001.
//!
//! Reads the document named by `inputs.document_uri` (a `file:` URI inside a
//! directory the manifest grants, or an `http(s)` URL on a host it grants),
//! and extracts key findings with confidence scores and source sections (see
//! [`analysis`]). The capability reads; it never writes.

pub mod analysis;
mod fetch;

use hcp_guest::{Failure, Task, log};
use serde::{Deserialize, Serialize};

/// The capability's inputs (`input_schema` in the manifest says the same).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// `file:///…` or `http(s)://…`.
    pub document_uri: String,
    /// Only `key_findings_extraction` is offered.
    pub analysis_type: AnalysisType,
    /// How many findings at most (1–50, default 5).
    #[serde(default = "default_max_findings")]
    pub max_findings: usize,
}

/// What to extract.
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AnalysisType {
    /// Sentences that state results, with confidence and section.
    KeyFindingsExtraction,
}

fn default_max_findings() -> usize {
    5
}

/// The capability's outputs.
#[derive(Debug, Serialize)]
pub struct Output {
    /// The findings, best first.
    pub findings: Vec<analysis::Finding>,
    /// What was read.
    pub document: DocumentInfo,
}

/// What was read, so the caller can check the findings against the source.
#[derive(Debug, Serialize)]
pub struct DocumentInfo {
    /// The URI as given.
    pub uri: String,
    /// Media type the document was read as.
    pub media_type: String,
    /// Size in bytes.
    pub size_bytes: usize,
    /// Title, sections and sentences found.
    #[serde(flatten)]
    pub summary: analysis::DocumentSummary,
}

fn analyze(_task: &Task, input: Input) -> Result<Output, Failure> {
    if !(1..=50).contains(&input.max_findings) {
        return Err(Failure::input("max_findings must be between 1 and 50"));
    }
    log::info(&format!("fetching {}", input.document_uri));
    let doc = fetch::fetch(&input.document_uri).map_err(|f| f.at("fetch", 1))?;
    let text = match doc.media_type.as_str() {
        "text/html" | "application/xhtml+xml" => analysis::html_to_text(&doc.text),
        "text/plain" | "text/markdown" => doc.text,
        other => {
            return Err(Failure::input(format!(
                "{}: media type {other} is not supported; send text, Markdown or HTML",
                input.document_uri
            ))
            .at("parse", 2));
        }
    };
    let (findings, summary) = analysis::key_findings(&text, input.max_findings);
    log::write(
        log::Level::Info,
        "analysis done",
        &[
            ("findings", &findings.len().to_string()),
            ("sentences", &summary.sentences.to_string()),
        ],
    );
    Ok(Output {
        findings,
        document: DocumentInfo {
            uri: input.document_uri,
            media_type: doc.media_type,
            size_bytes: doc.size,
            summary,
        },
    })
}

hcp_guest::export_capability!(analyze);
