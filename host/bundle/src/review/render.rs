//! The review report as text (for a terminal) and as Markdown (for a
//! ticket or a pull request).

use super::{ImportDocs, Review, Status};
use crate::wit::InterfaceDoc;
use std::fmt::Write as _;

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Conditional => "FLAG",
        Status::Fail => "FAIL",
    }
}

fn outcome(s: Status) -> &'static str {
    match s {
        Status::Pass => "installable",
        Status::Conditional => "installable only with an explicit flag (see FLAG below)",
        Status::Fail => "REFUSED (see FAIL below)",
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

fn parameter_lines(r: &Review) -> Vec<(String, String)> {
    r.envelope
        .parameters
        .iter()
        .map(|(name, p)| {
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
            (name.clone(), format!("{} ({hard})", bounds.join(", ")))
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
    let _ = writeln!(o, "verdict: {}", outcome(r.outcome));
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
    let params = parameter_lines(r);
    if params.is_empty() {
        let _ = writeln!(o, "  parameters            none");
    } else {
        let _ = writeln!(o, "  parameters");
        let w = params.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (name, bounds) in params {
            let _ = writeln!(o, "    {name:<w$}  {bounds}");
        }
    }
    let e = &r.envelope;
    if e.prohibited_actions.is_empty() {
        let _ = writeln!(o, "  prohibited actions    none");
    } else {
        let _ = writeln!(o, "  prohibited actions");
        for a in &e.prohibited_actions {
            let _ = writeln!(o, "    {a}");
        }
    }
    if e.emergency_procedures.is_empty() {
        let _ = writeln!(o, "  emergency procedures  none");
    } else {
        let _ = writeln!(o, "  emergency procedures");
        let w = e
            .emergency_procedures
            .keys()
            .map(String::len)
            .max()
            .unwrap_or(0);
        for (condition, procedure) in &e.emergency_procedures {
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
    let _ = writeln!(o, "\n## Verdict: {}\n", outcome(r.outcome));
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
    let params = parameter_lines(r);
    if params.is_empty() {
        let _ = writeln!(o, "Parameters: none.\n");
    } else {
        let _ = writeln!(o, "| parameter | bounds |\n|---|---|");
        for (name, bounds) in params {
            let _ = writeln!(o, "| {name} | {bounds} |");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "Prohibited actions: {}.\n",
        list_or_none(&r.envelope.prohibited_actions)
    );
    let procedures: Vec<String> = r
        .envelope
        .emergency_procedures
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
