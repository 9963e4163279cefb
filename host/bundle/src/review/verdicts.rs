//! The review's own verdicts beyond the install's checks: grants no
//! import uses, the effective envelope under the operator's policy, and a
//! component byte-identical to the installed version's.

use super::{Audit, EffectiveEnvelope, GrantKind, Status, Verdict};
use hcp_contracts::manifest::ManifestDoc;

/// What the report says of a component byte-identical to the installed
/// version's.
pub fn same_component_note(installed: &str) -> String {
    let version = installed.rsplit_once('@').map_or(installed, |(_, v)| v);
    format!("component byte-identical to {version}: only the manifest changed")
}

/// The kinds of grant the manifest gives, each with what it names and
/// which imports would use it.
fn granted(doc: &ManifestDoc) -> Vec<(GrantKind, String, String)> {
    GrantKind::ALL
        .into_iter()
        .filter_map(|grant| {
            let named = grant.named(&doc.grants);
            if named.is_empty() {
                return None;
            }
            let imports: Vec<&str> = grant.interfaces().map(|i| i.name).collect();
            Some((
                grant,
                format!("grants.{} ({})", grant.field(), named.join(", ")),
                format!("no {} import", imports.join(" or ")),
            ))
        })
        .collect()
}

/// Flags every grant no import of the component puts to use: authority
/// given for nothing, which a later version could use without a new
/// review of its grants.
pub(super) fn grants_verdict(doc: &ManifestDoc, audit: &Result<Audit, String>) -> Verdict {
    let Ok(audit) = audit else {
        return Verdict {
            check: "grants",
            status: Status::Warn,
            detail: "not checked: the surface audit did not run".to_owned(),
        };
    };
    let granted = granted(doc);
    let unused: Vec<String> = granted
        .iter()
        .filter(|(kind, ..)| !audit.uses.contains(kind))
        .map(|(_, what, why)| format!("{what}: {why}"))
        .collect();
    let (status, detail) = if !unused.is_empty() {
        (
            Status::Warn,
            format!(
                "granted but used by no import: {}; ask the publisher to drop {}",
                unused.join("; "),
                if unused.len() == 1 { "it" } else { "them" }
            ),
        )
    } else if granted.is_empty() {
        (
            Status::Pass,
            "none beyond what every capability has".to_owned(),
        )
    } else if granted.len() == 1 {
        (
            Status::Pass,
            "the one grant is used by an import".to_owned(),
        )
    } else {
        (
            Status::Pass,
            format!("each of the {} grants is used by an import", granted.len()),
        )
    };
    Verdict {
        check: "grants",
        status,
        detail,
    }
}

/// How the operator's policy changes the publisher's envelope.
pub(super) fn envelope_verdict(
    doc: &ManifestDoc,
    effective: &Result<EffectiveEnvelope, String>,
) -> Verdict {
    let e = match effective {
        Ok(e) => e,
        Err(why) => {
            return Verdict {
                check: "envelope",
                status: Status::Warn,
                detail: why.clone(),
            };
        }
    };
    let declared = &doc.safety_envelope;
    let mut detail = if !e.has_entry {
        format!(
            "{} has no entry for {}: tasks run under the publisher's envelope",
            e.policy, doc.capability.name
        )
    } else {
        let tightened = e
            .envelope
            .parameters
            .iter()
            .filter(|(name, p)| declared.parameters.get(*name) != Some(p))
            .count();
        let actions = e
            .envelope
            .prohibited_actions
            .iter()
            .filter(|a| !declared.prohibited_actions.contains(a))
            .count();
        let procedures = e
            .envelope
            .emergency_procedures
            .keys()
            .filter(|c| !declared.emergency_procedures.contains_key(*c))
            .count();
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        format!(
            "tasks run under the publisher's envelope as {} tightens it: {} bounded more tightly, \
             {} and {} added",
            e.policy,
            plural(tightened, "parameter", "parameters"),
            plural(actions, "prohibited action", "prohibited actions"),
            plural(procedures, "emergency procedure", "emergency procedures"),
        )
    };
    if !e.ignored.is_empty() {
        detail.push_str(&format!(
            "; looser policy values ignored: {}",
            e.ignored.join("; ")
        ));
    }
    Verdict {
        check: "envelope",
        status: if e.ignored.is_empty() {
            Status::Pass
        } else {
            Status::Warn
        },
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn doc(grants: serde_json::Value) -> ManifestDoc {
        serde_json::from_value(json!({
            "capability": {
                "name": "c", "version": "1.1.0", "description": "d",
                "input_schema": {}, "output_schema": {},
                "safety": {"risk_ceiling": "R4", "requires_human_approval": true,
                           "involves_physical_resources": true}
            },
            "component": {"path": "component.wasm", "world": "hcp:capability/capability@1.0.0"},
            "grants": grants,
            "safety_envelope": {
                "parameters": {"temperature": {"max": 800, "unit": "celsius", "hard_limit": true}},
                "prohibited_actions": ["mix"],
                "emergency_procedures": {"over_temperature": "shutdown"}
            }
        }))
        .expect("doc")
    }

    fn audit(uses: &[GrantKind]) -> Result<Audit, String> {
        Ok(Audit {
            imports: Vec::new(),
            exports: Vec::new(),
            uses: uses.iter().copied().collect::<BTreeSet<_>>(),
        })
    }

    #[test]
    fn every_kind_of_grant_no_import_uses_is_flagged() {
        let all = doc(json!({
            "filesystem": [{"path": "/srv/data", "access": "read-only"}],
            "network": [{"host": "example.com", "port": 443}],
            "env": ["LANG"],
            "instruments": ["cvd-rig"],
            "devices": ["hid"]
        }));
        let v = grants_verdict(&all, &audit(&[]));
        assert_eq!(v.status, Status::Warn);
        for expected in [
            "grants.filesystem (/srv/data): no wasi:filesystem import",
            "grants.network (example.com:443): no wasi:sockets or wasi:http import",
            "grants.env (LANG): no wasi:cli/environment import",
            "grants.instruments (cvd-rig): no hcp:capability/instrument import",
            "grants.devices (hid): no hcp:capability/hid import",
        ] {
            assert!(
                v.detail.contains(expected),
                "no {expected:?} in {}",
                v.detail
            );
        }
        // Used, each is fine; one left unused is named alone.
        use GrantKind::{Env, Filesystem, Hid, Instruments, Network};
        let v = grants_verdict(&all, &audit(&[Filesystem, Network, Env, Instruments, Hid]));
        assert_eq!(
            (v.status, v.detail.as_str()),
            (Status::Pass, "each of the 5 grants is used by an import")
        );
        let v = grants_verdict(&all, &audit(&[Filesystem, Network, Env, Hid]));
        assert_eq!(v.status, Status::Warn);
        assert_eq!(
            v.detail,
            "granted but used by no import: grants.instruments (cvd-rig): no \
             hcp:capability/instrument import; ask the publisher to drop it"
        );
        // Nothing granted, nothing to flag; no audit, nothing checked.
        let none = doc(json!({}));
        assert_eq!(
            grants_verdict(&none, &audit(&[Network])).status,
            Status::Pass
        );
        let v = grants_verdict(&all, &Err("no".to_owned()));
        assert_eq!(v.status, Status::Warn);
        assert!(v.detail.starts_with("not checked"), "{}", v.detail);
    }

    #[test]
    fn the_envelope_verdict_counts_what_the_policy_adds_and_flags_what_it_ignores() {
        let d = doc(json!({}));
        let effective = |envelope: serde_json::Value, ignored: Vec<String>| EffectiveEnvelope {
            policy: "policies/envelopes.json".to_owned(),
            has_entry: true,
            envelope: serde_json::from_value(envelope).expect("envelope"),
            ignored,
        };
        let tightened = effective(
            json!({
                "parameters": {
                    "temperature": {"max": 700, "unit": "celsius", "hard_limit": true},
                    "pressure": {"max": 3, "unit": "atm", "hard_limit": true}
                },
                "prohibited_actions": ["mix", "open_hot"],
                "emergency_procedures": {"over_temperature": "shutdown", "power_loss": "close"}
            }),
            Vec::new(),
        );
        let v = envelope_verdict(&d, &Ok(tightened));
        assert_eq!(v.status, Status::Pass);
        assert_eq!(
            v.detail,
            "tasks run under the publisher's envelope as policies/envelopes.json tightens it: \
             2 parameters bounded more tightly, 1 prohibited action and 1 emergency procedure added"
        );
        let mut unchanged = effective(
            serde_json::to_value(&d.safety_envelope).expect("json"),
            Vec::new(),
        );
        unchanged.has_entry = false;
        let v = envelope_verdict(&d, &Ok(unchanged));
        assert_eq!(
            (v.status, v.detail.as_str()),
            (
                Status::Pass,
                "policies/envelopes.json has no entry for c: tasks run under the publisher's envelope"
            )
        );
        let loose = effective(
            serde_json::to_value(&d.safety_envelope).expect("json"),
            vec!["temperature.max 900 is looser than 800".to_owned()],
        );
        let v = envelope_verdict(&d, &Ok(loose));
        assert_eq!(v.status, Status::Warn);
        assert!(
            v.detail
                .ends_with("looser policy values ignored: temperature.max 900 is looser than 800")
        );
        let v = envelope_verdict(&d, &Err("the gate would refuse every task".to_owned()));
        assert_eq!(
            (v.status, v.detail.as_str()),
            (Status::Warn, "the gate would refuse every task")
        );
    }

    #[test]
    fn the_note_names_the_installed_version() {
        assert_eq!(
            same_component_note("trivial@1.0.0"),
            "component byte-identical to 1.0.0: only the manifest changed"
        );
    }
}
