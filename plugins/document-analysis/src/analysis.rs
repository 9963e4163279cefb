//! Key-finding extraction: pure text processing, no host calls.
//!
//! The document is split into sections (Markdown, numbered or plain
//! headings), each section into sentences, and every sentence is scored by the
//! evidence that it states a result: reporting cues ("we show", "results
//! indicate"), result verbs ("achieves", "improves"), quantities ("95%",
//! "3-fold"), significance, the section it sits in, minus hedges. The best
//! sentences, deduplicated, are the findings; the score becomes the
//! confidence. Every statement is a sentence of the document, verbatim but for
//! whitespace.

use serde::Serialize;

/// One extracted finding, the seed's output shape.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// The sentence, as the document states it.
    pub statement: String,
    /// How strongly the sentence reads as a reported result, 0–1.
    pub confidence: f64,
    /// Where it stands, e.g. `Results, Section 3.2`.
    pub source_section: String,
}

/// What was read, for the caller to check the findings against.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DocumentSummary {
    /// The first heading, or the first line.
    pub title: String,
    /// Number of sections found.
    pub sections: usize,
    /// Number of sentences considered.
    pub sentences: usize,
}

/// A section: its label for `source_section` and its body text.
#[derive(Debug, Clone)]
struct Section {
    label: String,
    /// Lower-cased name used to weigh the section (e.g. "results").
    kind: String,
    body: String,
}

/// Extracts at most `max` findings from `text`.
pub fn key_findings(text: &str, max: usize) -> (Vec<Finding>, DocumentSummary) {
    let text = normalize(text);
    let (title, sections) = split_sections(&text);
    let mut scored: Vec<(f64, usize, Finding)> = Vec::new();
    let mut sentence_count = 0;
    for section in &sections {
        let weight = section_weight(&section.kind);
        let Some(weight) = weight else { continue };
        for sentence in sentences(&section.body) {
            sentence_count += 1;
            let Some(score) = score_sentence(&sentence) else {
                continue;
            };
            let score = score + weight;
            if score < 1.5 {
                continue;
            }
            let order = scored.len();
            scored.push((
                score,
                order,
                Finding {
                    statement: sentence,
                    confidence: confidence(score),
                    source_section: section.label.clone(),
                },
            ));
        }
    }
    // Best first; the document's order breaks ties.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut findings: Vec<Finding> = Vec::new();
    for (_, _, finding) in scored {
        if findings.len() >= max {
            break;
        }
        if findings
            .iter()
            .any(|f| similarity(&f.statement, &finding.statement) > 0.6)
        {
            continue;
        }
        findings.push(finding);
    }
    let summary = DocumentSummary {
        title,
        sections: sections.len(),
        sentences: sentence_count,
    };
    (findings, summary)
}

/// Turns HTML into text with Markdown headings; leaves other text alone.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    let mut skip_until: Option<&str> = None;
    while let Some(lt) = rest.find('<') {
        if skip_until.is_none() {
            out.push_str(&decode_entities(&rest[..lt]));
        }
        let Some(gt) = rest[lt..].find('>') else {
            rest = "";
            break;
        };
        let tag = rest[lt + 1..lt + gt].trim().to_ascii_lowercase();
        rest = &rest[lt + gt + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if let Some(end) = skip_until {
            if tag.starts_with('/') && name == end {
                skip_until = None;
            }
            continue;
        }
        match name.as_str() {
            "script" | "style" if !tag.starts_with('/') => {
                skip_until = Some(if name == "script" { "script" } else { "style" });
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" if !tag.starts_with('/') => {
                let level = name[1..].parse::<usize>().unwrap_or(1);
                out.push_str("\n\n");
                out.push_str(&"#".repeat(level));
                out.push(' ');
            }
            "p" | "div" | "br" | "li" | "tr" | "section" | "article" | "h1" | "h2" | "h3"
            | "h4" | "h5" | "h6" => out.push_str("\n\n"),
            _ => {}
        }
    }
    if skip_until.is_none() {
        out.push_str(&decode_entities(rest));
    }
    out
}

fn decode_entities(s: &str) -> String {
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn normalize(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Splits the text at headings. Text before the first heading is a section
/// labelled with the title.
fn split_sections(text: &str) -> (String, Vec<Section>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut title: Option<String> = None;
    let mut sections: Vec<Section> = Vec::new();
    // The current top-level heading name ("Results") and the current section.
    let mut top_name = String::new();
    let mut current = Section {
        label: String::new(),
        kind: String::new(),
        body: String::new(),
    };
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim();
        let prev_blank = i == 0 || lines[i - 1].trim().is_empty();
        let next_blank = i + 1 >= lines.len() || lines[i + 1].trim().is_empty();
        if let Some(heading) = heading(line, prev_blank && next_blank) {
            if !current.body.trim().is_empty() {
                sections.push(current.clone());
            }
            if heading.level == 1 && title.is_none() && heading.number.is_none() {
                title = Some(heading.name.clone());
            }
            let name_kind = heading.name.to_ascii_lowercase();
            let (label, kind) = match &heading.number {
                Some(number) if number.contains('.') && !top_name.is_empty() => (
                    format!("{top_name}, Section {number}"),
                    top_name.to_ascii_lowercase(),
                ),
                Some(number) => {
                    top_name = heading.name.clone();
                    (format!("{}, Section {number}", heading.name), name_kind)
                }
                None if heading.level <= 2 => {
                    top_name = heading.name.clone();
                    (heading.name.clone(), name_kind)
                }
                None if !top_name.is_empty() => (
                    format!("{top_name}, {}", heading.name),
                    top_name.to_ascii_lowercase(),
                ),
                None => (heading.name.clone(), name_kind),
            };
            current = Section {
                label,
                kind,
                body: String::new(),
            };
            continue;
        }
        if line.is_empty() {
            current.body.push_str("\n\n");
        } else {
            if title.is_none() && sections.is_empty() && current.body.trim().is_empty() {
                title = Some(line.trim_start_matches('#').trim().to_owned());
            }
            current.body.push_str(line);
            current.body.push('\n');
        }
    }
    if !current.body.trim().is_empty() {
        sections.push(current);
    }
    let title = title.unwrap_or_default();
    for s in &mut sections {
        if s.label.is_empty() {
            s.label = if title.is_empty() {
                "Body".to_owned()
            } else {
                title.clone()
            };
        }
    }
    (title, sections)
}

struct Heading {
    level: usize,
    number: Option<String>,
    name: String,
}

/// Recognizes `# Name`, `3.2 Name`, `3.2. Name` and, standing alone between
/// blank lines, a short line without final punctuation such as `Results`.
fn heading(line: &str, isolated: bool) -> Option<Heading> {
    if line.is_empty() || line.len() > 100 {
        return None;
    }
    if let Some(stripped) = line.strip_prefix('#') {
        let level = 1 + stripped.chars().take_while(|&c| c == '#').count();
        let rest = stripped.trim_start_matches('#');
        if !rest.starts_with(' ') {
            return None;
        }
        let (number, name) = split_number(rest.trim());
        return Some(Heading {
            level,
            number,
            name,
        });
    }
    if !isolated || line.ends_with(['.', ',', ';', ':', '?', '!']) {
        return None;
    }
    let (number, name) = split_number(line);
    let words = name.split_whitespace().count();
    let starts_upper = name.chars().next().is_some_and(char::is_uppercase);
    if words == 0 || words > 8 || !starts_upper {
        return None;
    }
    let level = number
        .as_ref()
        .map_or(1, |n| n.split('.').filter(|p| !p.is_empty()).count());
    Some(Heading {
        level,
        number,
        name,
    })
}

/// `3.2 Catalyst` → (`3.2`, `Catalyst`); `Results` → (None, `Results`).
fn split_number(s: &str) -> (Option<String>, String) {
    let token: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let digits = token.trim_end_matches('.');
    if !digits.is_empty()
        && digits.chars().next().is_some_and(|c| c.is_ascii_digit())
        && s[token.len()..].starts_with(' ')
    {
        (Some(digits.to_owned()), s[token.len()..].trim().to_owned())
    } else {
        (None, s.trim().to_owned())
    }
}

/// Additive weight of a section by its name; `None` skips it entirely.
fn section_weight(kind: &str) -> Option<f64> {
    let has = |words: &[&str]| words.iter().any(|w| kind.contains(w));
    if has(&[
        "reference",
        "bibliograph",
        "acknowledg",
        "funding",
        "author",
    ]) {
        return None;
    }
    Some(if has(&["result", "finding"]) {
        1.0
    } else if has(&["conclusion", "discussion", "summary"]) {
        0.8
    } else if has(&["abstract"]) {
        0.6
    } else if has(&["introduction", "background", "related work", "motivation"]) {
        -0.8
    } else if has(&["method", "material", "experimental", "setup", "procedure"]) {
        -0.6
    } else {
        0.0
    })
}

const ABBREVIATIONS: &[&str] = &[
    "e.g.", "i.e.", "al.", "fig.", "figs.", "eq.", "eqs.", "vs.", "approx.", "dr.", "cf.", "no.",
    "ref.", "refs.", "sec.", "tab.", "etc.", "ca.", "st.", "mr.", "ms.",
];

/// Splits a section body into sentences; a blank line always ends one.
fn sentences(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    for paragraph in body.split("\n\n") {
        let words: Vec<&str> = paragraph.split_whitespace().collect();
        let mut current: Vec<&str> = Vec::new();
        for (i, word) in words.iter().enumerate() {
            current.push(word);
            let ends = word.ends_with(['.', '!', '?'])
                || word.ends_with(".\"")
                || word.ends_with(".)")
                || word.ends_with(".”");
            if !ends {
                continue;
            }
            let lower = word.to_lowercase();
            if ABBREVIATIONS.iter().any(|a| lower.ends_with(a)) {
                continue;
            }
            let next_starts_sentence = words.get(i + 1).is_none_or(|next| {
                next.chars()
                    .next()
                    .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit() || "\"“(".contains(c))
            });
            if next_starts_sentence {
                out.push(current.join(" "));
                current.clear();
            }
        }
        if !current.is_empty() {
            out.push(current.join(" "));
        }
    }
    out
}

const REPORTING_CUES: &[&str] = &[
    "we found",
    "we find",
    "we show",
    "we demonstrate",
    "we report",
    "we observe",
    "we observed",
    "we conclude",
    "our results",
    "our data",
    "results show",
    "results indicate",
    "results demonstrate",
    "results reveal",
    "data show",
    "this study shows",
    "this work shows",
    "in conclusion",
    "key finding",
    "was found",
    "were found",
    "is shown",
    "are shown",
    "demonstrates",
    "demonstrated",
    "reveals",
    "revealed",
    "confirms",
    "confirmed",
];

const RESULT_VERBS: &[&str] = &[
    "achieve",
    "improve",
    "increase",
    "reduce",
    "decrease",
    "outperform",
    "enable",
    "yield",
    "exhibit",
    "lower than",
    "higher than",
    "compared to",
    "compared with",
    "relative to",
    "resulted in",
    "leads to",
    "led to",
];

const HEDGES: &[&str] = &[
    " may ",
    " might ",
    " could ",
    " possibly",
    " perhaps",
    " unclear",
    " future work",
];

/// Scores one sentence on its own; `None` when it cannot be a finding.
fn score_sentence(sentence: &str) -> Option<f64> {
    let words = sentence.split_whitespace().count();
    if !(6..=80).contains(&words) || sentence.ends_with('?') {
        return None;
    }
    let lower = format!(" {} ", sentence.to_lowercase());
    let mut score = 0.0;
    if REPORTING_CUES.iter().any(|c| lower.contains(c)) {
        score += 2.0;
    }
    let verbs = RESULT_VERBS.iter().filter(|v| lower.contains(*v)).count();
    score += (verbs as f64).min(2.0);
    let quantities = quantity_count(sentence);
    if quantities.with_unit > 0 {
        score += 1.0;
    }
    score += (quantities.plain as f64 * 0.3).min(0.6);
    if lower.contains("significant") || lower.contains("p <") || lower.contains("p<") {
        score += 0.5;
    }
    let hedges = HEDGES.iter().filter(|h| lower.contains(*h)).count();
    score -= hedges as f64 * 0.5;
    if words > 50 {
        score -= 0.5;
    }
    Some(score)
}

struct Quantities {
    with_unit: usize,
    plain: usize,
}

/// Counts numbers, telling those with a relative unit (`%`, `-fold`, `×`).
fn quantity_count(sentence: &str) -> Quantities {
    let mut q = Quantities {
        with_unit: 0,
        plain: 0,
    };
    for token in sentence.split_whitespace() {
        let t = token.trim_matches(|c: char| "()[],;:".contains(c));
        if !t.chars().any(|c| c.is_ascii_digit()) {
            continue;
        }
        let lower = t.to_lowercase();
        if lower.ends_with('%')
            || lower.ends_with("%.")
            || lower.contains("-fold")
            || lower.contains('×')
            || lower.ends_with('x')
        {
            q.with_unit += 1;
        } else if t.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            q.plain += 1;
        }
    }
    q
}

/// Maps a score onto 0.5–0.99, rounded to two decimals.
fn confidence(score: f64) -> f64 {
    let c = 0.5 + 0.49 * ((score - 1.0) / 3.0).tanh();
    (c.clamp(0.0, 0.99) * 100.0).round() / 100.0
}

/// Jaccard similarity of the sets of lower-cased words.
fn similarity(a: &str, b: &str) -> f64 {
    let set = |s: &str| -> std::collections::BTreeSet<String> {
        s.split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (a, b) = (set(a), set(b));
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAPER: &str = "# Ambient catalysis\n\n\
        ## Abstract\n\nWe report a copper catalyst for CO2 reduction.\n\n\
        ## 1 Introduction\n\nCatalysts have been studied for decades by many groups worldwide.\n\n\
        ## 3 Results\n\n### 3.2 Conversion\n\n\
        The proposed catalyst achieves 95% conversion rate under ambient conditions. \
        The reactor was cleaned with ethanol before each run of the series.\n\n\
        ### 3.4 Selectivity\n\nReaction selectivity improves by 23% compared to baseline.\n\n\
        ## References\n\n1. Smith et al. showed a 99% yield in 2019 with a different method.\n";

    #[test]
    fn findings_come_from_the_results_with_their_sections() {
        let (findings, summary) = key_findings(PAPER, 5);
        assert_eq!(summary.title, "Ambient catalysis");
        let statements: Vec<&str> = findings.iter().map(|f| f.statement.as_str()).collect();
        assert!(statements.contains(
            &"The proposed catalyst achieves 95% conversion rate under ambient conditions."
        ));
        assert!(statements.contains(&"Reaction selectivity improves by 23% compared to baseline."));
        let conversion = findings
            .iter()
            .find(|f| f.statement.contains("95%"))
            .expect("conversion finding");
        assert_eq!(conversion.source_section, "Results, Section 3.2");
        assert!(conversion.confidence > 0.5 && conversion.confidence < 1.0);
        // Nothing from the references, nothing procedural.
        assert!(!statements.iter().any(|s| s.contains("Smith")));
        assert!(!statements.iter().any(|s| s.contains("ethanol")));
    }

    #[test]
    fn a_different_document_gives_different_findings() {
        let text = "Results\n\nWe found that the new alloy is 3-fold stronger than steel.\n";
        let (findings, _) = key_findings(text, 5);
        assert_eq!(findings.len(), 1);
        assert_eq!(
            findings[0].statement,
            "We found that the new alloy is 3-fold stronger than steel."
        );
        assert_eq!(findings[0].source_section, "Results");
    }

    #[test]
    fn abbreviations_and_decimals_do_not_split_sentences() {
        let s = sentences("Yields rose to 4.5 mg (see Fig. 2) as e.g. shown. Next one here.");
        assert_eq!(
            s,
            vec![
                "Yields rose to 4.5 mg (see Fig. 2) as e.g. shown.",
                "Next one here."
            ]
        );
    }

    #[test]
    fn html_headings_become_sections() {
        let html = "<html><head><style>p{}</style></head><body><h2>Results</h2>\
            <p>Our results show a 40% drop in latency &amp; cost.</p></body></html>";
        let (findings, _) = key_findings(&html_to_text(html), 3);
        assert_eq!(findings.len(), 1);
        assert_eq!(
            findings[0].statement,
            "Our results show a 40% drop in latency & cost."
        );
        assert_eq!(findings[0].source_section, "Results");
    }

    #[test]
    fn an_empty_document_has_no_findings() {
        let (findings, summary) = key_findings("", 5);
        assert!(findings.is_empty());
        assert_eq!(summary.sentences, 0);
    }
}
