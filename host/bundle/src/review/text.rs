//! The review report as text, for a terminal.

use super::render::{
    effective_source, grant_lines, indent, limit_value, parameter_rows, procedure_lines,
    prohibited_lines, safety_lines, status_word, verdict_line,
};
use super::{ImportDocs, Review, same_component_note};
use crate::wit::InterfaceDoc;
use std::fmt::Write as _;

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
    caller_lines(&mut o, r);
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

/// Who may call: the policy set read, when approval applies, and each
/// caller with its ceilings and budgets.
fn caller_lines(o: &mut String, r: &Review) {
    let _ = writeln!(o, "who may call");
    let Some(c) = &r.callers else {
        let why = r.callers_error.as_deref().unwrap_or("unknown");
        let _ = writeln!(o, "  not found out: {why}");
        return;
    };
    let _ = writeln!(o, "  policy set  {}", c.policy_set);
    let _ = writeln!(o, "  approval    {}", c.approval);
    if c.callers.is_empty() {
        let _ = writeln!(
            o,
            "  callers     none: no caller of this policy set lists it"
        );
    }
    let w = c.callers.iter().map(|a| a.id.len()).max().unwrap_or(0);
    for a in &c.callers {
        let b = &a.budgets;
        let _ = writeln!(
            o,
            "  {:<w$}  {} ({}), risk up to {}, data up to {}; per task {} host calls, {} bytes, \
             {} artifacts; {} sessions of the caller, {} of the capability at once",
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
