//! The PEP's rules of `wasi:config/store`: a capability reads a key only
//! where its manifest grants it (`grants.config`) and the operator's policy
//! provides it (`config.json`); `get-all` answers only such keys. A key
//! not granted, or granted but not provided, is `DENY_TOOL_NOT_FOUND`.
//!
//! The values are the operator's, in the interface's own policy file,
//! `config.json` ([`FILE`], [`ConfigFile`]): a plain value written there,
//! or a secret, which the file only marks (`{"secret": true}`): its value
//! is sealed at rest in the data directory (`hcp config secret set`, the
//! platform's command for the [`SecretSpace`] declared here), never
//! written in a policy file. The file is optional: a policy directory
//! without it provides no value (and hashes as it did before the file
//! existed).

use super::{Args, Call, InterfaceRules, OwnArgs, de, list_len, malformed};
use crate::ids::CapabilityName;
use crate::operator::{InterfaceFile, OperatorFile, OperatorValue, SecretSpace};
use crate::pep::cut::{Cutter, Text};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::verdict::{Decision, args_invalid, not_found};
use hcp_contracts::interfaces::Grant;
use hcp_contracts::interfaces::Op;
use hcp_contracts::manifest::TableGrants;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The interface, as the table of interfaces names it.
pub const INTERFACE: &str = "wasi:config";

/// `config.json`, the interface's policy file, and where its secrets rest:
/// `config/<capability>/<key>.sealed` under the data directory, sealed
/// with the associated data `wasi-config:<capability>/<key>`.
pub(crate) const FILE: InterfaceFile = InterfaceFile {
    interface: INTERFACE,
    name: "config.json",
    schema: include_str!("../../../../../schemas/policy/config.schema.json"),
    shipped: include_str!("../../../../../policies/config.json"),
    read: crate::operator::read_as::<ConfigFile>,
    empty: crate::operator::empty_of::<ConfigFile>,
    secrets: Some(SecretSpace {
        dir: "config",
        label: "wasi-config",
        noun: "config key",
        command: "config",
        help: [
            "The operator's `wasi:config` secrets: seal a value for a capability",
            "The values of keys `config.json` marks secret",
            "Seal the value read from stdin (one trailing newline dropped) as secret KEY of \
             CAPABILITY, replacing any earlier value. The policy's `config.json` must mark the \
             key `{\"secret\": true}` for a capability granted it to read it",
        ],
        name_arg: ("key", "KEY", "The key (`[A-Za-z0-9_.-]`, at most 128)"),
    }),
};

/// `config.json`, the whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// By capability name, by key.
    #[serde(default)]
    pub capabilities: BTreeMap<CapabilityName, BTreeMap<String, ConfigEntry>>,
}

/// One key's value: plain, or a secret sealed in the data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigEntry {
    /// The plain value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `true`: the value is a secret, set with `hcp config secret set`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

impl OperatorFile for ConfigFile {
    /// What the schema cannot say: an entry is a value or a secret, not
    /// both nor neither.
    fn problems(&self) -> Vec<hcp_contracts::Problem> {
        let mut problems = Vec::new();
        for (cap, keys) in &self.capabilities {
            for (key, entry) in keys {
                if entry.value.is_some() == entry.secret {
                    problems.push(hcp_contracts::Problem::new(
                        format!(
                            "/capabilities/{}/{}",
                            cap.as_str(),
                            key.replace('~', "~0").replace('/', "~1")
                        ),
                        "give either a plain \"value\" or \"secret\": true".to_owned(),
                    ));
                }
            }
        }
        problems
    }

    /// The granted keys (`grants.config`) the file provides `capability`.
    fn values(&self, capability: &str, granted: &TableGrants) -> BTreeMap<String, OperatorValue> {
        let mut values = BTreeMap::new();
        let Some((_, provided)) = self
            .capabilities
            .iter()
            .find(|(n, _)| n.as_str() == capability)
        else {
            return values;
        };
        for key in granted.names(Grant::Config) {
            if let Some(entry) = provided.get(&key) {
                let value = match &entry.value {
                    Some(v) if !entry.secret => OperatorValue::Plain(v.clone()),
                    _ => OperatorValue::Secret,
                };
                values.insert(key, value);
            }
        }
        values
    }
}

/// `config.get` (the target is the key asked for) and `config.get_all`:
/// what the host would answer, as receipts may show it. Values are not
/// recorded; a secret's is named by its keyed digest
/// (`[withheld: hmac-sha256:…]`, see `hcp_store::withhold`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigArgs<'a> {
    /// The keys the answer would hold: granted keys the operator's policy
    /// provides (for `config.get`, the target when it is one).
    pub keys: Vec<Text<'a>>,
    /// The keyed digests of the secret values among them.
    pub secrets: Vec<Text<'a>>,
}

impl<'a> Call<'a> {
    /// `config.get` of `key` (`keys` holds it when the policy provides
    /// it) or, with an empty `key`, `config.get_all`; `secrets` are the
    /// keyed digests of the secret values the answer would hold.
    pub fn config(key: &'a str, keys: Vec<String>, secrets: Vec<String>) -> Self {
        Self {
            op: if key.is_empty() {
                Op::ConfigGetAll
            } else {
                Op::ConfigGet
            },
            target: Cow::Borrowed(key),
            args: Args::Config(ConfigArgs {
                keys: keys.into_iter().map(Text::Owned).collect(),
                secrets: secrets.into_iter().map(Text::Owned).collect(),
            }),
        }
    }
}

impl OwnArgs for ConfigArgs<'_> {
    type Static = ConfigArgs<'static>;

    fn into_static(self) -> ConfigArgs<'static> {
        let o = |v: Vec<Text<'_>>| v.into_iter().map(|t| Cow::Owned(t.into_owned())).collect();
        ConfigArgs {
            keys: o(self.keys),
            secrets: o(self.secrets),
        }
    }

    fn text_len(&self) -> usize {
        list_len(&self.keys) + list_len(&self.secrets)
    }

    fn cut(&self, c: &mut Cutter) -> ConfigArgs<'static> {
        ConfigArgs {
            keys: self.keys.iter().map(|k| c.cut(k)).collect(),
            secrets: self.secrets.iter().map(|d| c.cut(d)).collect(),
        }
    }
}

/// The call's arguments, when they are `config.*`'s.
fn own<'c>(call: &'c Call<'_>) -> Option<&'c ConfigArgs<'c>> {
    match &call.args {
        Args::Config(a) => Some(a),
        _ => None,
    }
}

/// `config.get`, `config.get_all`.
#[derive(Debug)]
pub(crate) struct Config;

impl InterfaceRules for Config {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        let key = call.target.as_ref();
        let granted = &scope.facts.surface.table;
        let Some(a) = own(call) else {
            return malformed(call);
        };
        match call.op {
            Op::ConfigGet if !granted.holds(Grant::Config, key) => not_found(format!(
                "config key \"{}\" is not granted to {} (grants.config)",
                key.escape_debug(),
                scope.facts.capability
            )),
            Op::ConfigGet if scope.operator_value(INTERFACE, key).is_none() => not_found(format!(
                "config key \"{}\" is granted to {} but the operator's policy provides no value for it (config.json)",
                key.escape_debug(),
                scope.facts.capability
            )),
            Op::ConfigGetAll if granted.items(Grant::Config).is_empty() => not_found(format!(
                "no config key is granted to {} (grants.config)",
                scope.facts.capability
            )),
            Op::ConfigGet | Op::ConfigGetAll => answered(scope, call, a),
            _ => malformed(call),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        match own(call) {
            Some(a) if call.op == Op::ConfigGet && a.keys.iter().any(|k| *k != call.target) => {
                args_invalid("config.get answers only the key asked for".into())
            }
            _ => Ok(()),
        }
    }

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(Args::Config(de(op, raw)?))
    }
}

/// The keys the host would answer are granted and provided, with a
/// secret's digest for each secret the policy marks among them: a host
/// call cannot be made to answer more.
fn answered(scope: &Scope, call: &Call<'_>, a: &ConfigArgs<'_>) -> Result<(), Decision> {
    let mut secrets = 0;
    for k in &a.keys {
        match scope.operator_value(INTERFACE, k) {
            None => {
                return not_found(format!(
                    "config key \"{}\" is not granted and provided",
                    k.escape_debug()
                ));
            }
            Some(OperatorValue::Secret) => secrets += 1,
            Some(OperatorValue::Plain(_)) => {}
        }
    }
    if secrets == a.secrets.len() {
        Ok(())
    } else {
        malformed(call)
    }
}
