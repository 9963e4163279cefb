//! What a new version may do that an installed one may not: grants, the
//! declaration's safety section, and the safety envelope.
//!
//! A change *widens* when the new manifest allows something the old did
//! not: a new or broader grant, a higher risk ceiling, a lower risk floor,
//! no more human approval, new physical resources or hazards, an envelope
//! bound raised or removed, a hard limit made soft, a prohibited action or
//! emergency procedure dropped or changed. Everything else that differs
//! *narrows*. Limits and constraints are not compared.

use hcp_contracts::RiskLevel;
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::{Access, EnvelopeParameter, ManifestDoc};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One difference between two manifests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Whether it allows more than before.
    pub widens: bool,
    /// What changed, e.g. `grants.network: + example.org:443`.
    pub what: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.widens { "wider" } else { "narrower" };
        write!(f, "{mark:<8} {}", self.what)
    }
}

/// Every difference of `new` from `old`, widening ones first.
pub fn compare(old: &ManifestDoc, new: &ManifestDoc) -> Vec<Change> {
    let mut d = Diff::default();
    for grant in Grant::ALL {
        let what = format!("grants.{}", grant.field());
        match grant {
            Grant::Filesystem => d.filesystem(old, new),
            Grant::Network => d.network(old, new),
            _ => match (grant.names(&old.grants), grant.names(&new.grants)) {
                (Some(o), Some(n)) => d.names(&what, &o, &n, true),
                // A structured grant without rules of its own here: what
                // it names, added or removed.
                _ => d.names(
                    &what,
                    &grant.named(&old.grants),
                    &grant.named(&new.grants),
                    true,
                ),
            },
        }
    }
    d.safety(old, new);
    d.envelope(old, new);
    let mut changes = d.0;
    changes.sort_by_key(|c| !c.widens);
    changes
}

/// Whether any change widens.
pub fn widens(changes: &[Change]) -> bool {
    changes.iter().any(|c| c.widens)
}

#[derive(Default)]
struct Diff(Vec<Change>);

impl Diff {
    fn push(&mut self, widens: bool, what: String) {
        self.0.push(Change { widens, what });
    }

    fn filesystem(&mut self, old: &ManifestDoc, new: &ManifestDoc) {
        let covers = |o: &str, n: &str| {
            n == o || n.strip_prefix(o).is_some_and(|rest| rest.starts_with('/'))
        };
        for n in &new.grants.filesystem {
            let by = old
                .grants
                .filesystem
                .iter()
                .filter(|o| covers(&o.path, &n.path))
                .map(|o| o.access)
                .max_by_key(|a| *a == Access::ReadWrite);
            match by {
                None => self.push(
                    true,
                    format!("grants.filesystem: + {} ({})", n.path, n.access.as_str()),
                ),
                Some(Access::ReadOnly) if n.access == Access::ReadWrite => self.push(
                    true,
                    format!("grants.filesystem: {} read-only -> read-write", n.path),
                ),
                Some(_) => {}
            }
        }
        for o in &old.grants.filesystem {
            match new.grants.filesystem.iter().find(|n| n.path == o.path) {
                None => self.push(false, format!("grants.filesystem: - {}", o.path)),
                Some(n) if o.access == Access::ReadWrite && n.access == Access::ReadOnly => self
                    .push(
                        false,
                        format!("grants.filesystem: {} read-write -> read-only", o.path),
                    ),
                Some(_) => {}
            }
        }
    }

    fn network(&mut self, old: &ManifestDoc, new: &ManifestDoc) {
        let key = |host: &str, port: u16| format!("{}:{port}", host.to_ascii_lowercase());
        let old_map: BTreeMap<String, bool> = old
            .grants
            .network
            .iter()
            .map(|g| (key(&g.host, g.port), g.allow_private))
            .collect();
        let new_map: BTreeMap<String, bool> = new
            .grants
            .network
            .iter()
            .map(|g| (key(&g.host, g.port), g.allow_private))
            .collect();
        for (dest, &private) in &new_map {
            let note = if private { " (private allowed)" } else { "" };
            match old_map.get(dest) {
                None => self.push(true, format!("grants.network: + {dest}{note}")),
                Some(false) if private => self.push(
                    true,
                    format!("grants.network: {dest} now allows private addresses"),
                ),
                Some(true) if !private => self.push(
                    false,
                    format!("grants.network: {dest} no longer allows private addresses"),
                ),
                Some(_) => {}
            }
        }
        for dest in old_map.keys().filter(|d| !new_map.contains_key(*d)) {
            self.push(false, format!("grants.network: - {dest}"));
        }
    }

    /// Set differences; `added_widens` says which direction is wider.
    fn names(&mut self, what: &str, old: &[String], new: &[String], added_widens: bool) {
        let o: BTreeSet<&String> = old.iter().collect();
        let n: BTreeSet<&String> = new.iter().collect();
        for added in n.difference(&o) {
            self.push(added_widens, format!("{what}: + {added}"));
        }
        for removed in o.difference(&n) {
            self.push(!added_widens, format!("{what}: - {removed}"));
        }
    }

    fn safety(&mut self, old: &ManifestDoc, new: &ManifestDoc) {
        let (o, n) = (&old.capability.safety, &new.capability.safety);
        if o.risk_ceiling != n.risk_ceiling {
            self.push(
                n.risk_ceiling > o.risk_ceiling,
                format!(
                    "safety.risk_ceiling: {} -> {}",
                    o.risk_ceiling, n.risk_ceiling
                ),
            );
        }
        let (of, nf) = (
            o.risk_floor.unwrap_or(RiskLevel::R1),
            n.risk_floor.unwrap_or(RiskLevel::R1),
        );
        if of != nf {
            self.push(nf < of, format!("safety.risk_floor: {of} -> {nf}"));
        }
        if o.requires_human_approval != n.requires_human_approval {
            self.push(
                !n.requires_human_approval,
                format!(
                    "safety.requires_human_approval: {} -> {}",
                    o.requires_human_approval, n.requires_human_approval
                ),
            );
        }
        if o.involves_physical_resources != n.involves_physical_resources {
            self.push(
                n.involves_physical_resources,
                format!(
                    "safety.involves_physical_resources: {} -> {}",
                    o.involves_physical_resources, n.involves_physical_resources
                ),
            );
        }
        self.names(
            "safety.resource_types",
            &o.resource_types,
            &n.resource_types,
            true,
        );
        self.names(
            "safety.hazard_categories",
            &o.hazard_categories,
            &n.hazard_categories,
            true,
        );
    }

    fn envelope(&mut self, old: &ManifestDoc, new: &ManifestDoc) {
        let (o, n) = (&old.safety_envelope, &new.safety_envelope);
        for (name, op) in &o.parameters {
            match n.parameters.get(name) {
                None => self.push(
                    true,
                    format!("safety_envelope.parameters: - {name} (no longer bounded)"),
                ),
                Some(np) => self.parameter(name, op, np),
            }
        }
        for name in n
            .parameters
            .keys()
            .filter(|k| !o.parameters.contains_key(*k))
        {
            self.push(false, format!("safety_envelope.parameters: + {name}"));
        }
        // Fewer prohibited actions is wider.
        self.names(
            "safety_envelope.prohibited_actions",
            &o.prohibited_actions,
            &n.prohibited_actions,
            false,
        );
        for (condition, procedure) in &o.emergency_procedures {
            match n.emergency_procedures.get(condition) {
                None => self.push(
                    true,
                    format!("safety_envelope.emergency_procedures: - {condition}"),
                ),
                Some(p) if p != procedure => self.push(
                    true,
                    format!(
                        "safety_envelope.emergency_procedures: {condition}: {procedure} -> {p}"
                    ),
                ),
                Some(_) => {}
            }
        }
        for condition in n
            .emergency_procedures
            .keys()
            .filter(|k| !o.emergency_procedures.contains_key(*k))
        {
            self.push(
                false,
                format!("safety_envelope.emergency_procedures: + {condition}"),
            );
        }
    }

    fn parameter(&mut self, name: &str, o: &EnvelopeParameter, n: &EnvelopeParameter) {
        let at = format!("safety_envelope.parameters.{name}");
        if o.unit != n.unit {
            self.push(
                true,
                format!(
                    "{at}.unit: {} -> {} (bounds in another unit cannot be compared)",
                    o.unit.as_deref().unwrap_or("none"),
                    n.unit.as_deref().unwrap_or("none")
                ),
            );
            return;
        }
        let show = |v: Option<f64>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
        // (bound name, old, new, whether a larger new value widens)
        for (bound, ov, nv, larger_widens) in
            [("max", o.max, n.max, true), ("min", o.min, n.min, false)]
        {
            let widens = match (ov, nv) {
                (None, None) => continue,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) if a == b => continue,
                (Some(a), Some(b)) => (b > a) == larger_widens,
            };
            self.push(
                widens,
                format!("{at}.{bound}: {} -> {}", show(ov), show(nv)),
            );
        }
        if o.hard_limit != n.hard_limit {
            self.push(
                !n.hard_limit,
                format!("{at}.hard_limit: {} -> {}", o.hard_limit, n.hard_limit),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(patch: serde_json::Value) -> ManifestDoc {
        let mut base = json!({
            "capability": {
                "name": "c", "version": "1.0.0", "description": "d",
                "input_schema": {}, "output_schema": {},
                "safety": {"risk_ceiling": "R2", "requires_human_approval": true,
                           "involves_physical_resources": false}
            },
            "component": {"path": "component.wasm", "world": "hcp:capability/capability@1.0.0"},
            "grants": {
                "filesystem": [{"path": "/srv/data", "access": "read-only"}],
                "network": [{"host": "example.com", "port": 443}],
                "env": ["LANG"]
            },
            "safety_envelope": {
                "parameters": {"temperature": {"max": 800, "unit": "celsius", "hard_limit": true}},
                "prohibited_actions": ["mix"],
                "emergency_procedures": {"over_temperature": "shutdown"}
            }
        });
        merge(&mut base, patch);
        serde_json::from_value(base).expect("doc")
    }

    fn merge(base: &mut serde_json::Value, patch: serde_json::Value) {
        match (base, patch) {
            (serde_json::Value::Object(b), serde_json::Value::Object(p)) => {
                for (k, v) in p {
                    merge(b.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (b, p) => *b = p,
        }
    }

    fn lines(old: &ManifestDoc, new: &ManifestDoc) -> Vec<String> {
        compare(old, new).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_same_manifest_has_no_changes() {
        assert!(compare(&doc(json!({})), &doc(json!({}))).is_empty());
    }

    #[test]
    fn widening_grants_and_safety() {
        let old = doc(json!({}));
        let new = doc(json!({
            "capability": {"safety": {"risk_ceiling": "R3", "requires_human_approval": false,
                                      "hazard_categories": ["toxic_gas"]}},
            "grants": {
                "filesystem": [{"path": "/srv/data", "access": "read-write"},
                               {"path": "/srv/other", "access": "read-only"}],
                "network": [{"host": "example.com", "port": 443, "allow_private": true},
                            {"host": "example.org", "port": 443}],
                "env": ["LANG", "HOME"]
            }
        }));
        assert_eq!(
            lines(&old, &new),
            [
                "wider    grants.filesystem: /srv/data read-only -> read-write",
                "wider    grants.filesystem: + /srv/other (read-only)",
                "wider    grants.network: example.com:443 now allows private addresses",
                "wider    grants.network: + example.org:443",
                "wider    grants.env: + HOME",
                "wider    safety.risk_ceiling: R2 -> R3",
                "wider    safety.requires_human_approval: true -> false",
                "wider    safety.hazard_categories: + toxic_gas",
            ]
        );
        assert!(widens(&compare(&old, &new)));
    }

    #[test]
    fn narrowing_needs_nothing() {
        let old = doc(json!({}));
        let new = doc(json!({
            "capability": {"safety": {"risk_ceiling": "R1"}},
            "grants": {"filesystem": [{"path": "/srv/data/sub", "access": "read-only"}],
                       "network": [], "env": []},
            "safety_envelope": {
                "parameters": {"temperature": {"max": 700, "min": 20, "unit": "celsius", "hard_limit": true},
                               "pressure": {"max": 5}},
                "prohibited_actions": ["mix", "vent"],
                "emergency_procedures": {"over_temperature": "shutdown", "leak": "close"}
            }
        }));
        let changes = compare(&old, &new);
        assert!(!widens(&changes), "{changes:?}");
        assert_eq!(
            lines(&old, &new),
            [
                "narrower grants.filesystem: - /srv/data",
                "narrower grants.network: - example.com:443",
                "narrower grants.env: - LANG",
                "narrower safety.risk_ceiling: R2 -> R1",
                "narrower safety_envelope.parameters.temperature.max: 800 -> 700",
                "narrower safety_envelope.parameters.temperature.min: none -> 20",
                "narrower safety_envelope.parameters: + pressure",
                "narrower safety_envelope.prohibited_actions: + vent",
                "narrower safety_envelope.emergency_procedures: + leak",
            ]
        );
    }

    #[test]
    fn widening_envelopes() {
        let old = doc(json!({}));
        let raised = doc(json!({"safety_envelope": {
            "parameters": {"temperature": {"max": 1000, "unit": "celsius", "hard_limit": false}},
            "prohibited_actions": [],
            "emergency_procedures": {"over_temperature": "log_only"}
        }}));
        assert_eq!(
            lines(&old, &raised),
            [
                "wider    safety_envelope.parameters.temperature.max: 800 -> 1000",
                "wider    safety_envelope.parameters.temperature.hard_limit: true -> false",
                "wider    safety_envelope.prohibited_actions: - mix",
                "wider    safety_envelope.emergency_procedures: over_temperature: shutdown -> log_only",
            ]
        );
        let mut dropped = doc(json!({}));
        dropped.safety_envelope.parameters.clear();
        dropped.safety_envelope.emergency_procedures.clear();
        assert_eq!(
            lines(&old, &dropped),
            [
                "wider    safety_envelope.parameters: - temperature (no longer bounded)",
                "wider    safety_envelope.emergency_procedures: - over_temperature",
            ]
        );
        let kelvin =
            doc(json!({"safety_envelope": {"parameters": {"temperature": {"unit": "kelvin"}}}}));
        assert_eq!(
            lines(&old, &kelvin),
            [
                "wider    safety_envelope.parameters.temperature.unit: celsius -> kelvin (bounds in another unit cannot be compared)"
            ]
        );
    }
}
