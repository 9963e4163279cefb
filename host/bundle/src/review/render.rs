//! The review report as text (for a terminal) and as Markdown (for a
//! ticket or a pull request).

use super::{ImportDocs, Review, Status, same_component_note};
use crate::wit::InterfaceDoc;
use hcp_contracts::manifest::EnvelopeParameter;
use std::fmt::Write as _;

fn status_word(s: Status) -> &'static str {
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
fn verdict_line(r: &Review) -> String {
    let warned = r.verdicts.iter().any(|v| v.status == Status::Warn);
    if warned && r.outcome == Status::Pass {
        format!("{} (see WARN below)", outcome(r.outcome))
    } else {
        outcome(r.outcome).to_owned()
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

fn grant_lines(r: &Review) -> Vec<(&'static str, Vec<String>)> {
    let g = &r.grants;
    let fs = g
        .filesystem
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
        .collect();
    let net = g
        .network
        .iter()
        .map(|n| {
            let private = if n.allow_private {
                " (private addresses allowed)"
            } else {
                ""
            };
            format!("{}:{}{private}", n.host, n.port)
        })
        .collect();
    vec![
        ("filesystem", fs),
        ("network", net),
        ("env", g.env.clone()),
        ("instruments", g.instruments.clone()),
        ("devices", g.devices.clone()),
    ]
}

fn safety_lines(r: &Review) -> Vec<(&'static str, String)> {
    let s = &r.safety;
    let c = r.constraints.as_ref();
    vec![
        ("risk_ceiling", s.risk_ceiling.to_string()),
        (
            "risk_floor",
            s.risk_floor
                .map_or_else(|| "R1 (default)".to_owned(), |f| f.to_string()),
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
fn parameter_rows(r: &Review) -> Vec<(String, String, Option<String>)> {
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
fn effective_source(r: &Review) -> String {
    match &r.effective_envelope {
        None => "not computed (see the envelope verdict)".to_owned(),
        Some(e) if e.has_entry => format!("the publisher's, tightened by {}", e.policy),
        Some(e) => format!("the publisher's ({} has no entry for it)", e.policy),
    }
}

/// The prohibited actions tasks run under, each marked when only the
/// policy names it.
fn prohibited_lines(r: &Review) -> Vec<String> {
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
fn procedure_lines(r: &Review) -> Vec<(String, String)> {
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

fn limit_value(value: u64, declared: bool) -> String {
    if declared {
        value.to_string()
    } else {
        format!("{value} (default)")
    }
}

fn indent(text: &str, by: &str) -> String {
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

/// The report for a terminal.
pub fn text(r: &Review) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "review of {}@{}", r.capability, r.version);
    let _ = writeln!(o, "{}", indent(&r.description, "  "));
    let _ = writeln!(o);
    let _ = writeln!(o, "bundle     {} ({} bytes, {})", r.file, r.bytes, r.sha256);
    match &r.publisher {
        Some(p) => {
            let _ = writeln!(
                o,
                "publisher  {}, key {} ({})",
                p.publisher, p.key_id, p.public_key
            );
        }
        None => {
            let _ = writeln!(o, "publisher  none (no valid signature)");
        }
    }
    let wit = if r.wit_is_hosts {
        "this host's own files"
    } else {
        "differs from this host's files; the docs below are this host's"
    };
    let _ = writeln!(
        o,
        "world      {} (WIT package {}: {wit})",
        r.world, r.wit_package
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "verdict: {}", verdict_line(r));
    for v in &r.verdicts {
        let _ = writeln!(
            o,
            "  {}  {:<9}  {}",
            status_word(v.status),
            v.check,
            v.detail
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "digests");
    let width = r
        .files
        .keys()
        .map(String::len)
        .chain([crate::layout::COMPONENT.len()])
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        o,
        "  {:<width$}  {} (RFC 8785 canonical form)",
        "manifest", r.manifest_digest
    );
    let _ = writeln!(
        o,
        "  {:<width$}  {} ({} bytes)",
        crate::layout::COMPONENT,
        r.component_digest,
        r.component_bytes
    );
    for (path, digest) in &r.files {
        let _ = writeln!(o, "  {path:<width$}  {digest}");
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "safety (as the publisher declares it)");
    for (k, v) in safety_lines(r) {
        let _ = writeln!(o, "  {k:<28} {v}");
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "grants");
    for (what, lines) in grant_lines(r) {
        if lines.is_empty() {
            let _ = writeln!(o, "  {what:<12} none");
        }
        for (i, line) in lines.iter().enumerate() {
            let label = if i == 0 { what } else { "" };
            let _ = writeln!(o, "  {label:<12} {line}");
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "safety envelope");
    let _ = writeln!(o, "  effective             {}", effective_source(r));
    let params = parameter_rows(r);
    if params.is_empty() {
        let _ = writeln!(o, "  parameters            none");
    } else {
        let w = params
            .iter()
            .map(|(n, ..)| n.len())
            .chain(["parameters".len() - 2])
            .max()
            .unwrap_or(0);
        let pw = params
            .iter()
            .map(|(_, p, _)| p.len())
            .chain(["publisher".len()])
            .max()
            .unwrap_or(0);
        if params.iter().any(|(.., e)| e.is_some()) {
            let _ = writeln!(
                o,
                "  {:<w2$}  {:<pw$}  effective",
                "parameters",
                "publisher",
                w2 = w + 2
            );
        } else {
            let _ = writeln!(o, "  parameters");
        }
        for (name, publisher, effective) in params {
            match effective {
                Some(e) => {
                    let _ = writeln!(o, "    {name:<w$}  {publisher:<pw$}  {e}");
                }
                None => {
                    let _ = writeln!(o, "    {name:<w$}  {publisher}");
                }
            }
        }
    }
    let prohibited = prohibited_lines(r);
    if prohibited.is_empty() {
        let _ = writeln!(o, "  prohibited actions    none");
    } else {
        let _ = writeln!(o, "  prohibited actions");
        for a in &prohibited {
            let _ = writeln!(o, "    {a}");
        }
    }
    let procedures = procedure_lines(r);
    if procedures.is_empty() {
        let _ = writeln!(o, "  emergency procedures  none");
    } else {
        let _ = writeln!(o, "  emergency procedures");
        let w = procedures.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
        for (condition, procedure) in &procedures {
            let _ = writeln!(o, "    {condition:<w$}  -> {procedure}");
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "limits");
    for l in &r.limits {
        let _ = writeln!(o, "  {:<17} {}", l.name, limit_value(l.value, l.declared));
    }
    if let Some(u) = &r.upgrade {
        let _ = writeln!(o);
        let _ = writeln!(o, "compared with the installed {}", u.installed);
        if u.same_component {
            let _ = writeln!(o, "  {}", same_component_note(&u.installed));
        }
        if u.changes.is_empty() {
            let _ = writeln!(o, "  no difference in grants, safety or envelope");
        }
        for c in &u.changes {
            let _ = writeln!(o, "  {c}");
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "imports ({})", r.imports.len());
    if r.imports.is_empty() {
        let _ = writeln!(o, "  not audited (see the audit verdict)");
    }
    for i in &r.imports {
        let verdict = if i.allowed { "allowed" } else { "REFUSED" };
        let _ = writeln!(o, "  {verdict}  {}  ({})", i.name, i.because);
        match &i.docs {
            ImportDocs::Wit { interface } => {
                let _ = writeln!(o, "{}", interface_text(interface));
            }
            ImportDocs::Wasi { summary } => {
                let _ = writeln!(o, "      {summary}");
            }
            ImportDocs::None => {
                let _ = writeln!(o, "      (not an interface of this host)");
            }
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "exports");
    for e in &r.exports {
        let _ = writeln!(o, "  {e}");
    }
    o
}

fn interface_text(i: &InterfaceDoc) -> String {
    let mut o = indent(&i.docs, "      ");
    if !i.types.is_empty() {
        let _ = write!(o, "\n      types: {}", i.types.join(", "));
    }
    for f in &i.functions {
        let _ = write!(o, "\n      {}", f.signature);
        if !f.docs.is_empty() {
            let _ = write!(o, "\n{}", indent(&f.docs, "          "));
        }
    }
    o
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The report as Markdown.
pub fn markdown(r: &Review) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Review of `{}@{}`\n", r.capability, r.version);
    let _ = writeln!(o, "> {}\n", r.description.replace('\n', "\n> "));
    let _ = writeln!(o, "| | |\n|---|---|");
    let _ = writeln!(
        o,
        "| bundle | `{}` ({} bytes, `{}`) |",
        cell(&r.file),
        r.bytes,
        r.sha256
    );
    match &r.publisher {
        Some(p) => {
            let _ = writeln!(
                o,
                "| publisher | {}, key `{}` (`{}`) |",
                p.publisher, p.key_id, p.public_key
            );
        }
        None => {
            let _ = writeln!(o, "| publisher | none (no valid signature) |");
        }
    }
    let _ = writeln!(
        o,
        "| world | `{}` (WIT package `{}`{}) |",
        r.world,
        r.wit_package,
        if r.wit_is_hosts {
            ", this host's own files"
        } else {
            ", differs from this host's files"
        }
    );
    let _ = writeln!(o, "\n## Verdict: {}\n", verdict_line(r));
    let _ = writeln!(o, "| check | status | detail |\n|---|---|---|");
    for v in &r.verdicts {
        let _ = writeln!(
            o,
            "| {} | {} | {} |",
            v.check,
            status_word(v.status),
            cell(&v.detail)
        );
    }
    let _ = writeln!(o, "\n## Digests\n\n| file | sha256 |\n|---|---|");
    let _ = writeln!(
        o,
        "| manifest (RFC 8785 canonical form) | `{}` |",
        r.manifest_digest
    );
    let _ = writeln!(
        o,
        "| `{}` ({} bytes) | `{}` |",
        crate::layout::COMPONENT,
        r.component_bytes,
        r.component_digest
    );
    for (path, digest) in &r.files {
        let _ = writeln!(o, "| `{path}` | `{digest}` |");
    }
    let _ = writeln!(
        o,
        "\n## Safety (as the publisher declares it)\n\n| | |\n|---|---|"
    );
    for (k, v) in safety_lines(r) {
        let _ = writeln!(o, "| {k} | {} |", cell(&v));
    }
    let _ = writeln!(o, "\n## Grants\n\n| grant | value |\n|---|---|");
    for (what, lines) in grant_lines(r) {
        let value = if lines.is_empty() {
            "none".to_owned()
        } else {
            lines
                .iter()
                .map(|l| format!("`{}`", cell(l)))
                .collect::<Vec<_>>()
                .join("<br>")
        };
        let _ = writeln!(o, "| {what} | {value} |");
    }
    let _ = writeln!(o, "\n## Safety envelope\n");
    let _ = writeln!(o, "Effective: {}.\n", cell(&effective_source(r)));
    let params = parameter_rows(r);
    if params.is_empty() {
        let _ = writeln!(o, "Parameters: none.\n");
    } else if params.iter().any(|(.., e)| e.is_some()) {
        let _ = writeln!(o, "| parameter | publisher | effective |\n|---|---|---|");
        for (name, publisher, effective) in params {
            let _ = writeln!(
                o,
                "| {name} | {publisher} | {} |",
                effective.unwrap_or_default()
            );
        }
        let _ = writeln!(o);
    } else {
        let _ = writeln!(o, "| parameter | bounds |\n|---|---|");
        for (name, bounds, _) in params {
            let _ = writeln!(o, "| {name} | {bounds} |");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "Prohibited actions: {}.\n",
        list_or_none(&prohibited_lines(r))
    );
    let procedures: Vec<String> = procedure_lines(r)
        .iter()
        .map(|(c, p)| format!("{c} → {p}"))
        .collect();
    let _ = writeln!(o, "Emergency procedures: {}.", list_or_none(&procedures));
    let _ = writeln!(o, "\n## Limits\n\n| limit | value |\n|---|---|");
    for l in &r.limits {
        let _ = writeln!(o, "| {} | {} |", l.name, limit_value(l.value, l.declared));
    }
    if let Some(u) = &r.upgrade {
        let _ = writeln!(o, "\n## Compared with the installed `{}`\n", u.installed);
        if u.same_component {
            let _ = writeln!(o, "{}.\n", same_component_note(&u.installed));
        }
        if u.changes.is_empty() {
            let _ = writeln!(o, "No difference in grants, safety or envelope.");
        }
        for c in &u.changes {
            let mark = if c.widens { "**wider**" } else { "narrower" };
            let _ = writeln!(o, "- {mark}: {}", c.what);
        }
    }
    let _ = writeln!(o, "\n## Imports ({})\n", r.imports.len());
    if r.imports.is_empty() {
        let _ = writeln!(o, "Not audited (see the audit verdict).\n");
    }
    for i in &r.imports {
        let verdict = if i.allowed { "allowed" } else { "**REFUSED**" };
        let _ = writeln!(o, "### `{}`: {verdict} ({})\n", i.name, cell(&i.because));
        match &i.docs {
            ImportDocs::Wit { interface } => {
                let _ = writeln!(o, "{}\n", interface.docs);
                if !interface.types.is_empty() {
                    let _ = writeln!(o, "Types: {}.\n", interface.types.join(", "));
                }
                for f in &interface.functions {
                    let _ = writeln!(o, "- `{}`\n", f.signature);
                    if !f.docs.is_empty() {
                        let _ = writeln!(o, "{}\n", indent(&f.docs, "  "));
                    }
                }
            }
            ImportDocs::Wasi { summary } => {
                let _ = writeln!(o, "{summary}.\n");
            }
            ImportDocs::None => {
                let _ = writeln!(o, "Not an interface of this host.\n");
            }
        }
    }
    let _ = writeln!(o, "## Exports\n");
    for e in &r.exports {
        let _ = writeln!(o, "- `{e}`");
    }
    o
}
