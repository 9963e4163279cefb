//! What the text and the Markdown report both say, worded once: status
//! words, the outcome, and the lines of grants, safety, envelope and
//! limits ([`super::text`] and [`super::markdown`] lay them out).

use super::{Review, Status};
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::{EnvelopeParameter, FloorSource};
use std::fmt::Write as _;

pub(super) fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Conditional => "FLAG",
        Status::Fail => "FAIL",
        Status::Warn => "WARN",
    }
}

fn outcome(s: Status) -> &'static str {
    match s {
        Status::Pass => "installable",
        Status::Conditional => "installable only with an explicit flag (see FLAG below)",
        Status::Fail => "REFUSED (see FAIL below)",
        Status::Warn => "installable",
    }
}

/// The overall outcome, pointing at warnings when it is otherwise clean.
pub(super) fn verdict_line(r: &Review) -> String {
    let warned = r.verdicts.iter().any(|v| v.status == Status::Warn);
    if warned && r.outcome == Status::Pass {
        format!("{} (see WARN below)", outcome(r.outcome))
    } else {
        outcome(r.outcome).to_owned()
    }
}

pub(super) fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

/// Each grant of the manifest (the table's grant list, in its order) with
/// a line per item it names.
pub(super) fn grant_lines(r: &Review) -> Vec<(&'static str, Vec<String>)> {
    let g = &r.grants;
    let fs = || {
        g.filesystem
            .iter()
            .map(|f| {
                let guest = f.guest_path.as_deref().unwrap_or(&f.path);
                let mut line = format!("{} -> {guest} ({})", f.path, f.access.as_str());
                let bundled = crate::layout::bundled_dir(&f.path);
                if let Some(d) = r.data.iter().find(|d| bundled == Some(d.dir.as_str())) {
                    let _ = write!(
                        line,
                        ", shipped in the bundle: {} file{}, {} bytes",
                        d.files,
                        if d.files == 1 { "" } else { "s" },
                        d.bytes
                    );
                }
                line
            })
            .collect()
    };
    let net = || {
        g.network
            .iter()
            .map(|n| {
                let private = if n.allow_private {
                    " (private addresses allowed)"
                } else {
                    ""
                };
                format!("{}:{}{private}", n.host, n.port)
            })
            .collect()
    };
    Grant::ALL
        .into_iter()
        .map(|grant| {
            let lines = match grant.names(g) {
                Some(names) => names.to_vec(),
                None if grant == Grant::Filesystem => fs(),
                None if grant == Grant::Network => net(),
                None => grant.named(g),
            };
            (grant.field(), lines)
        })
        .collect()
}

pub(super) fn safety_lines(r: &Review) -> Vec<(&'static str, String)> {
    let s = &r.safety;
    let c = r.constraints.as_ref();
    vec![
        ("risk_ceiling", s.risk_ceiling.to_string()),
        (
            "risk_floor",
            match s.floor() {
                (floor, FloorSource::Declared) => floor.to_string(),
                (floor, FloorSource::Physical) => {
                    format!("{floor} (default for involves_physical_resources)")
                }
                (floor, FloorSource::Default) => format!("{floor} (default)"),
            },
        ),
        (
            "requires_human_approval",
            s.requires_human_approval.to_string(),
        ),
        (
            "involves_physical_resources",
            s.involves_physical_resources.to_string(),
        ),
        ("resource_types", list_or_none(&s.resource_types)),
        ("hazard_categories", list_or_none(&s.hazard_categories)),
        (
            "max_duration",
            c.and_then(|c| c.max_duration.clone())
                .unwrap_or_else(|| "PT10M (default)".to_owned()),
        ),
        (
            "concurrent_limit",
            c.and_then(|c| c.concurrent_limit)
                .map_or_else(|| "1 (default)".to_owned(), |n| n.to_string()),
        ),
    ]
}

fn bounds(p: &EnvelopeParameter) -> String {
    let unit = p
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    let mut bounds = Vec::new();
    if let Some(min) = p.min {
        bounds.push(format!("min {min}{unit}"));
    }
    if let Some(max) = p.max {
        bounds.push(format!("max {max}{unit}"));
    }
    let hard = if p.hard_limit {
        "hard limit"
    } else {
        "soft limit"
    };
    format!("{} ({hard})", bounds.join(", "))
}

/// Every parameter of either envelope: its name, the publisher's bounds
/// and, when the effective envelope is known, its bounds (`same` when the
/// policy left them as declared).
pub(super) fn parameter_rows(r: &Review) -> Vec<(String, String, Option<String>)> {
    let Some(effective) = &r.effective_envelope else {
        return r
            .envelope
            .parameters
            .iter()
            .map(|(name, p)| (name.clone(), bounds(p), None))
            .collect();
    };
    effective
        .envelope
        .parameters
        .iter()
        .map(|(name, p)| {
            let declared = r.envelope.parameters.get(name);
            let effective = if declared == Some(p) {
                "same".to_owned()
            } else {
                bounds(p)
            };
            (
                name.clone(),
                declared.map_or_else(|| "not declared".to_owned(), bounds),
                Some(effective),
            )
        })
        .collect()
}

/// Where the effective envelope comes from, in one line.
pub(super) fn effective_source(r: &Review) -> String {
    match &r.effective_envelope {
        None => "not computed (see the envelope verdict)".to_owned(),
        Some(e) if e.has_entry => format!("the publisher's, tightened by {}", e.policy),
        Some(e) => format!("the publisher's ({} has no entry for it)", e.policy),
    }
}

/// The prohibited actions tasks run under, each marked when only the
/// policy names it.
pub(super) fn prohibited_lines(r: &Review) -> Vec<String> {
    let declared = &r.envelope.prohibited_actions;
    let list = r
        .effective_envelope
        .as_ref()
        .map_or(declared, |e| &e.envelope.prohibited_actions);
    list.iter()
        .map(|a| {
            if declared.contains(a) {
                a.clone()
            } else {
                format!("{a} (added by the policy)")
            }
        })
        .collect()
}

/// The emergency procedures tasks run under, each marked when only the
/// policy names it.
pub(super) fn procedure_lines(r: &Review) -> Vec<(String, String)> {
    let declared = &r.envelope.emergency_procedures;
    let list = r
        .effective_envelope
        .as_ref()
        .map_or(declared, |e| &e.envelope.emergency_procedures);
    list.iter()
        .map(|(c, p)| {
            let mark = if declared.contains_key(c) {
                ""
            } else {
                " (added by the policy)"
            };
            (c.clone(), format!("{p}{mark}"))
        })
        .collect()
}

pub(super) fn limit_value(value: u64, declared: bool) -> String {
    if declared {
        value.to_string()
    } else {
        format!("{value} (default)")
    }
}

pub(super) fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{by}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
