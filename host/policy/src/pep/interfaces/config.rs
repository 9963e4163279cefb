//! The PEP's rules of `wasi:config/store`: a capability reads a key only
//! where its manifest grants it (`grants.config`) and the operator's policy
//! provides it (`config.json`); `get-all` answers only such keys. A key
//! not granted, or granted but not provided, is `DENY_TOOL_NOT_FOUND`.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, ConfigArgs, Op};
use crate::pep::decide::{Decision, args_invalid, malformed, not_found};
use crate::pep::scope::{ConfigValue, Scope};

/// `config.get`, `config.get_all`.
#[derive(Debug)]
pub(crate) struct Config;

impl InterfaceRules for Config {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        let key = call.target.as_ref();
        let granted = &scope.facts.surface.config;
        let Args::Config(a) = &call.args else {
            return malformed(call);
        };
        match call.op {
            Op::ConfigGet if !granted.iter().any(|k| k == key) => not_found(format!(
                "config key \"{}\" is not granted to {} (grants.config)",
                key.escape_debug(),
                scope.facts.capability
            )),
            Op::ConfigGet if scope.config_value(key).is_none() => not_found(format!(
                "config key \"{}\" is granted to {} but the operator's policy provides no value for it (config.json)",
                key.escape_debug(),
                scope.facts.capability
            )),
            Op::ConfigGetAll if granted.is_empty() => not_found(format!(
                "no config key is granted to {} (grants.config)",
                scope.facts.capability
            )),
            Op::ConfigGet | Op::ConfigGetAll => answered(scope, call, a),
            _ => malformed(call),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        match &call.args {
            Args::Config(a)
                if call.op == Op::ConfigGet && a.keys.iter().any(|k| *k != call.target) =>
            {
                args_invalid("config.get answers only the key asked for".into())
            }
            _ => Ok(()),
        }
    }
}

/// The keys the host would answer are granted and provided, with a
/// secret's digest for each secret the policy marks among them: a host
/// call cannot be made to answer more.
fn answered(scope: &Scope, call: &Call<'_>, a: &ConfigArgs<'_>) -> Result<(), Decision> {
    let mut secrets = 0;
    for k in &a.keys {
        match scope.config_value(k) {
            None => {
                return not_found(format!(
                    "config key \"{}\" is not granted and provided",
                    k.escape_debug()
                ));
            }
            Some(ConfigValue::Secret) => secrets += 1,
            Some(ConfigValue::Plain(_)) => {}
        }
    }
    if secrets == a.secrets.len() {
        Ok(())
    } else {
        malformed(call)
    }
}
