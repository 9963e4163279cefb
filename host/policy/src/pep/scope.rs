//! A session's decision scope: what was admitted ([`SessionFacts`]), compiled
//! once with the policy's dispatch settings into lookups, so that deciding a
//! call is a few hash lookups and bounds checks.

use super::threat::Scan;
use crate::PolicySet;
use crate::files::ThreatScan;
use crate::operator::OperatorValue;
use hcp_contracts::interfaces::Op;
use hcp_contracts::manifest::{Access, Grants, Limits, NetHost, SafetyEnvelope, TableGrants};
use hcp_contracts::{DataClass, RiskLevel};
use hcp_instruments::envelope::Guard;
use hcp_receipts::Digest;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr as _;

/// Everything the host admitted a session with, as the PEP needs it. The
/// gate builds it from the `Admission` and the manifest
/// ([`SessionFacts::new`]); it is recorded once per session (the
/// `session.open` receipt's decision input) and every call's decision input
/// names it by hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionFacts {
    /// What the session may spend.
    pub budgets: BudgetCaps,
    /// The caller.
    pub caller: String,
    /// `name@version`.
    pub capability: String,
    /// Approved data classification.
    pub data_classification: DataClass,
    /// The effective safety envelope.
    pub envelope: SafetyEnvelope,
    /// When the session expires (Unix time, milliseconds).
    pub expires_at_ms: u64,
    /// The manifest's per-task limits the PEP enforces.
    pub limits: CallLimits,
    /// Approved risk level.
    pub risk_level: RiskLevel,
    /// The session.
    pub session_id: String,
    /// The granted surface.
    pub surface: Surface,
    /// The task.
    pub task_id: String,
}

/// The policy's budgets of a session (`budgets.json` through the gate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetCaps {
    /// Artifacts.
    pub artifacts: u64,
    /// Bytes moved through host calls.
    pub bytes: u64,
    /// Host calls (allowed or denied).
    pub host_calls: u64,
}

impl From<crate::Budgets> for BudgetCaps {
    fn from(b: crate::Budgets) -> Self {
        Self {
            artifacts: b.artifacts,
            bytes: b.bytes,
            host_calls: b.host_calls,
        }
    }
}

/// The manifest's limits the PEP enforces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallLimits {
    /// Bytes of all artifacts.
    pub artifact_bytes: u64,
    /// Artifacts.
    pub artifacts: u64,
    /// Bytes of one checkpoint.
    pub checkpoint_bytes: u64,
    /// Checkpoints.
    pub checkpoints: u64,
    /// The limits of the interfaces of the table's grants with a shape
    /// (`Grant::shape`) the manifest grants, by name (`kv_bytes`, ...),
    /// after the fields above; none when it grants none, so that the facts
    /// of such sessions hash as before.
    #[serde(flatten, deserialize_with = "table_limits")]
    pub table: BTreeMap<String, u64>,
}

/// The table limits of recorded facts: limits of the limit set only (an
/// unknown field is refused here).
fn table_limits<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u64>, D::Error> {
    let map = BTreeMap::<String, u64>::deserialize(d)?;
    match map.keys().find(|k| !Limits::NAMES.contains(&k.as_str())) {
        Some(k) => Err(serde::de::Error::unknown_field(k, Limits::NAMES)),
        None => Ok(map),
    }
}

impl From<&Limits> for CallLimits {
    fn from(l: &Limits) -> Self {
        Self {
            artifact_bytes: l.artifact_bytes,
            artifacts: l.artifacts,
            checkpoint_bytes: l.checkpoint_bytes,
            checkpoints: l.checkpoints,
            table: BTreeMap::new(),
        }
    }
}

impl CallLimits {
    /// The limits of a task of `manifest`: those above, and the limits of
    /// the interfaces its table grants enable ([`CallLimits::table`]).
    pub fn of(manifest: &hcp_contracts::Manifest) -> Self {
        let mut limits = Self::from(&manifest.limits);
        for (grant, _) in manifest.grants.table.iter() {
            for name in grant.interfaces().flat_map(|i| i.limits.iter()) {
                if let Some((_, value)) = manifest.limits.each().find(|(n, _)| n == name) {
                    limits.table.insert((*name).to_owned(), value);
                }
            }
        }
        limits
    }

    /// The table limit `name` (`kv_bytes`, ...) of the session; `None`
    /// when its grant is not granted.
    pub fn table_limit(&self, name: &str) -> Option<u64> {
        self.table.get(name).copied()
    }
}

/// The granted surface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Surface {
    /// Devices.
    pub devices: Vec<String>,
    /// Directories, by guest path.
    pub filesystem: Vec<FsSurface>,
    /// Instruments.
    pub instruments: Vec<String>,
    /// Destinations.
    pub network: Vec<NetSurface>,
    /// The table's grants with a shape (`grants.config`, ...), as the
    /// manifest resolved them, after the fields above: absent when none,
    /// so that the facts of sessions without them hash as before (an
    /// unknown field is refused there).
    #[serde(flatten)]
    pub table: TableGrants,
}

/// A granted directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsSurface {
    /// Read-only or read-write.
    pub access: Access,
    /// Absolute path the guest sees.
    pub guest_path: String,
}

/// A granted destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetSurface {
    /// Name (lower case) or address literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Surface {
    /// The surface of a manifest's grants.
    pub fn of(grants: &Grants) -> Self {
        Self {
            devices: grants.devices.clone(),
            filesystem: grants
                .filesystem
                .iter()
                .map(|g| FsSurface {
                    access: g.access,
                    guest_path: g.guest_path.clone(),
                })
                .collect(),
            instruments: grants.instruments.clone(),
            network: grants
                .network
                .iter()
                .map(|g| NetSurface {
                    host: match &g.host {
                        NetHost::Ip(ip) => ip.to_string(),
                        NetHost::Name(n) => n.clone(),
                    },
                    port: g.port,
                })
                .collect(),
            table: grants.table.clone(),
        }
    }
}

/// A session's facts could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("session {session_id}: decision scope: {reason}")]
pub struct ScopeError {
    /// The session.
    pub session_id: String,
    /// What is wrong.
    pub reason: String,
}

/// A session's compiled decision scope. Immutable; shared by every call of
/// the session.
#[derive(Debug, Clone)]
pub struct Scope {
    pub(crate) facts: SessionFacts,
    facts_hash: Digest,
    policy_hash: Digest,
    envelope_hash: Digest,
    pub(crate) scan: Scan,
    denied: u64,
    /// Granted directories, longest guest path first.
    pub(crate) fs: Vec<(String, Access)>,
    pub(crate) addrs: HashSet<SocketAddr>,
    pub(crate) names: HashMap<String, Vec<u16>>,
    pub(crate) instruments: HashSet<String>,
    pub(crate) guard: Guard,
    /// The smaller of the manifest's and the policy's artifact count.
    pub(crate) max_artifacts: u64,
    /// The values the operator's policy provides the session, by
    /// interface, by granted name ([`crate::operator`]).
    operator: BTreeMap<&'static str, BTreeMap<String, OperatorValue>>,
}

// The calls turned off are a bit set of `u64`.
const _: () = assert!(Op::ALL.len() <= 64);

fn op_bit(op: Op) -> u64 {
    1 << (op as u32)
}

impl Scope {
    /// Compiles `facts` under `policy` (its `dispatch.json` settings for the
    /// capability, and its hash).
    ///
    /// # Errors
    ///
    /// Facts that cannot be compiled (malformed capability, address or
    /// path); the session must not start (fail closed).
    pub fn compile(policy: &PolicySet, facts: SessionFacts) -> Result<Self, ScopeError> {
        let name = facts
            .capability
            .split_once('@')
            .map_or(facts.capability.as_str(), |(n, _)| n)
            .to_owned();
        let (scan, denied) = policy.dispatch_rules().settings(&name);
        let policy_hash = Digest::from_str(policy.policy_hash()).map_err(|reason| ScopeError {
            session_id: facts.session_id.clone(),
            reason: format!("policy hash: {reason}"),
        })?;
        let mut scope = Self::with_settings(facts, scan, &denied, policy_hash)?;
        // Each interface's file says what it provides the granted names.
        for (file, doc) in policy.interface_files() {
            let values = doc.values(&name, &scope.facts.surface.table);
            if !values.is_empty() {
                scope.operator.insert(file.interface, values);
            }
        }
        Ok(scope)
    }

    /// Compiles `facts` with explicit settings (hosts and tests without a
    /// policy set; `policy_hash` names what they stand for).
    ///
    /// # Errors
    ///
    /// As [`Scope::compile`].
    pub fn with_settings(
        facts: SessionFacts,
        scan: ThreatScan,
        denied_calls: &[Op],
        policy_hash: Digest,
    ) -> Result<Self, ScopeError> {
        let bad = |reason: String| ScopeError {
            session_id: facts.session_id.clone(),
            reason,
        };
        if !facts.capability.contains('@') {
            return Err(bad(format!(
                "capability {:?} must be name@version",
                facts.capability
            )));
        }
        let facts_hash = Digest::of_canonical(&facts).map_err(bad)?;
        let envelope_hash = Digest::of_canonical(&facts.envelope).map_err(bad)?;
        let mut fs = Vec::new();
        for g in &facts.surface.filesystem {
            if !g.guest_path.starts_with('/') {
                return Err(bad(format!(
                    "granted guest path {:?} is not absolute",
                    g.guest_path
                )));
            }
            let path = if g.guest_path.len() > 1 {
                g.guest_path.trim_end_matches('/').to_owned()
            } else {
                g.guest_path.clone()
            };
            fs.push((path, g.access));
        }
        fs.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        let mut addrs = HashSet::new();
        let mut names: HashMap<String, Vec<u16>> = HashMap::new();
        for g in &facts.surface.network {
            match g.host.parse::<IpAddr>() {
                Ok(ip) => {
                    addrs.insert(canonical(SocketAddr::new(ip, g.port)));
                }
                Err(_) => names
                    .entry(normalize_name(&g.host))
                    .or_default()
                    .push(g.port),
            }
        }
        let scan = Scan {
            terminal_escape: scan.terminal_escape,
            prompt_injection: scan.prompt_injection,
            shell_metacharacters: scan.shell_metacharacters,
        };
        Ok(Self {
            facts_hash,
            policy_hash,
            envelope_hash,
            scan,
            denied: denied_calls.iter().fold(0, |m, op| m | op_bit(*op)),
            fs,
            addrs,
            names,
            instruments: facts.surface.instruments.iter().cloned().collect(),
            guard: Guard::new(facts.envelope.clone()),
            max_artifacts: facts.limits.artifacts.min(facts.budgets.artifacts),
            operator: BTreeMap::new(),
            facts,
        })
    }

    /// The facts it was compiled from.
    pub fn facts(&self) -> &SessionFacts {
        &self.facts
    }

    /// SHA-256 of the facts' canonical form: how decision inputs name them.
    pub fn facts_hash(&self) -> Digest {
        self.facts_hash
    }

    /// The policy it was compiled under.
    pub fn policy_hash(&self) -> Digest {
        self.policy_hash
    }

    /// SHA-256 of the effective envelope's canonical form.
    pub fn envelope_hash(&self) -> Digest {
        self.envelope_hash
    }

    /// The value the operator's policy provides `interface`'s granted
    /// name `name` with; `None` when the name is not granted or not
    /// provided.
    pub fn operator_value(&self, interface: &str, name: &str) -> Option<&OperatorValue> {
        self.operator.get(interface).and_then(|v| v.get(name))
    }

    /// Every granted name of `interface` the operator's policy provides,
    /// in order, with its value.
    pub fn operator_values(&self, interface: &str) -> impl Iterator<Item = (&str, &OperatorValue)> {
        self.operator
            .get(interface)
            .into_iter()
            .flat_map(|v| v.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// Every secret the session may read, of every interface: (interface,
    /// name). A task's answer never carries their values.
    pub fn operator_secrets(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.operator.iter().flat_map(|(interface, values)| {
            values
                .iter()
                .filter(|(_, v)| **v == OperatorValue::Secret)
                .map(|(name, _)| (*interface, name.as_str()))
        })
    }

    /// Whether the operator turned `op` off for this capability.
    pub(crate) fn is_denied(&self, op: Op) -> bool {
        self.denied & op_bit(op) != 0
    }

    /// The access of the most specific grant holding `path`, if any.
    pub(crate) fn fs_access(&self, path: &str) -> Option<Access> {
        self.fs
            .iter()
            .find(|(g, _)| {
                g == "/"
                    || path == g
                    || (path.starts_with(g.as_str()) && path.as_bytes().get(g.len()) == Some(&b'/'))
            })
            .map(|(_, a)| *a)
    }
}

/// Lower case, without a trailing dot.
pub(crate) fn normalize_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// IPv4-mapped IPv6 addresses as the IPv4 address they carry.
pub(crate) fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
            None => addr,
        },
        IpAddr::V4(_) => addr,
    }
}
