//! The review report as Markdown, for a ticket or a pull request.

use super::render::{
    effective_source, grant_lines, indent, limit_value, list_or_none, parameter_rows,
    procedure_lines, prohibited_lines, safety_lines, status_word, verdict_line,
};
use super::{ImportDocs, Review, same_component_note};
use std::fmt::Write as _;

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
    callers(&mut o, r);
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

/// Who may call: the policy set read, when approval applies, and each
/// caller with its ceilings and budgets.
fn callers(o: &mut String, r: &Review) {
    let _ = writeln!(o, "\n## Who may call\n");
    let Some(c) = &r.callers else {
        let why = r.callers_error.as_deref().unwrap_or("unknown");
        let _ = writeln!(o, "Not found out: {}", cell(why));
        return;
    };
    let _ = writeln!(
        o,
        "Policy set: {}. Approval: {}.\n",
        cell(&c.policy_set),
        cell(&c.approval)
    );
    if c.callers.is_empty() {
        let _ = writeln!(o, "No caller of this policy set lists it.");
        return;
    }
    let _ = writeln!(
        o,
        "| caller | kind | listed | risk up to | data up to | host calls | bytes | artifacts | \
         sessions (caller / capability) |\n|---|---|---|---|---|---|---|---|---|"
    );
    for a in &c.callers {
        let b = &a.budgets;
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} / {} |",
            a.id,
            a.kind,
            a.listed,
            a.max_risk_level,
            a.max_data_classification,
            b.host_calls,
            b.bytes,
            b.artifacts,
            b.caller_concurrent_sessions,
            b.capability_concurrent_sessions
        );
    }
}
