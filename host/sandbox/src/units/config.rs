//! `wasi:config/store` (the WASI proposal's runtime configuration, the
//! WIT vendored in `wit/deps/config`): a capability reads the values the
//! operator's policy provides it (`config.json`), only the keys its
//! manifest grants (`grants.config`). Each `get` and `get-all` is one PEP
//! decision with its receipt (`config.get`, `config.get_all`), made before
//! anything is answered; a denial reaches the guest as
//! `error::upstream("denied (<reason code>): <message>")`.
//!
//! Plain values come from the session's scope (the policy compiled into
//! it); secrets from the host's store ([`TaskStore::operator_secret`]),
//! sealed at rest. A call's decision input names what it would answer:
//! the keys, and each secret by its keyed digest, never its value.
//!
//! The host implementation is this crate's own, not wasmtime-wasi-config's:
//! that one answers from a map without a hook before each call.
//!
//! [`TaskStore::operator_secret`]: crate::store::TaskStore::operator_secret

use super::context::HcpCtx;
use crate::pep::Call;
use hcp_policy::operator::OperatorValue;
use hcp_policy::pep::interfaces::config::INTERFACE;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit/deps/config",
        world: "wasi:config/imports",
        imports: { default: trappable },
    });
}

use bindings::wasi::config::store::{self as wit, Error};

impl HcpCtx {
    /// Asks the PEP about a `wasi:config` call: `Err` is the guest's error.
    fn govern_config(&mut self, call: &Call<'_>) -> Result<(), Error> {
        match self.pep.check(call) {
            Ok(signals) => {
                self.note_signals(call.op, signals);
                Ok(())
            }
            Err(denial) => {
                self.note_denial(&denial);
                Err(Error::Upstream(format!(
                    "denied ({}): {}",
                    denial.reason, denial.message
                )))
            }
        }
    }

    /// The secret `key`, from the store; the guest's error when it cannot
    /// be opened or the operator set none.
    fn config_secret(&self, key: &str) -> Result<crate::store::OperatorSecret, Error> {
        match self
            .store
            .operator_secret(INTERFACE, &self.meta.capability, key)
        {
            Ok(Some(secret)) => Ok(secret),
            Ok(None) => Err(Error::Upstream(format!(
                "the operator has set no value for secret {key} (hcp config secret set)"
            ))),
            Err(e) => Err(Error::Io(e.0)),
        }
    }
}

impl wit::Host for HcpCtx {
    fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<String>, Error>> {
        self.host_calls += 1;
        let provided = self
            .pep
            .scope()
            .and_then(|s| s.operator_value(INTERFACE, &key).cloned());
        Ok(match provided {
            // Not granted, or not provided: the PEP says which.
            None => self
                .govern_config(&Call::config(&key, Vec::new(), Vec::new()))
                .map(|()| None),
            Some(OperatorValue::Plain(value)) => self
                .govern_config(&Call::config(&key, vec![key.clone()], Vec::new()))
                .map(|()| Some(value)),
            Some(OperatorValue::Secret) => match self.config_secret(&key) {
                Ok(secret) => self
                    .govern_config(&Call::config(
                        &key,
                        vec![key.clone()],
                        vec![secret.digest.clone()],
                    ))
                    .map(|()| Some(secret.value)),
                Err(e) => {
                    // Decided all the same (a receipt of the attempt,
                    // answering nothing), then the reason.
                    self.govern_config(&Call::config(&key, Vec::new(), Vec::new()))
                        .and(Err(e))
                }
            },
        })
    }

    fn get_all(&mut self) -> wasmtime::Result<Result<Vec<(String, String)>, Error>> {
        self.host_calls += 1;
        let provided: Vec<(String, OperatorValue)> = self
            .pep
            .scope()
            .map(|s| {
                s.operator_values(INTERFACE)
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut pairs = Vec::with_capacity(provided.len());
        let mut digests = Vec::new();
        for (key, value) in provided {
            match value {
                OperatorValue::Plain(v) => pairs.push((key, v)),
                OperatorValue::Secret => match self.config_secret(&key) {
                    Ok(secret) => {
                        digests.push(secret.digest);
                        pairs.push((key, secret.value));
                    }
                    // A secret not set is left out, as a key not provided.
                    Err(Error::Upstream(_)) => {}
                    Err(e) => return Ok(Err(e)),
                },
            }
        }
        let keys = pairs.iter().map(|(k, _)| k.clone()).collect();
        Ok(self
            .govern_config(&Call::config("", keys, digests))
            .map(|()| pairs))
    }
}

/// The sandbox unit of `wasi:config`: audited and linked only with
/// `grants.config`.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: "wasi:config",
    audit: |_, grants| {
        if hcp_contracts::interfaces::Grant::Config.is_granted(grants) {
            Ok(crate::units::unit::GrantedBy::Grant(
                hcp_contracts::interfaces::Grant::Config,
            ))
        } else {
            Err("no config key is granted (grants.config)".into())
        }
    },
    link: |l, _, grants| {
        if hcp_contracts::interfaces::Grant::Config.is_granted(grants) {
            wit::add_to_linker::<crate::task::TaskState, super::context::HcpData>(l, |s| {
                &mut s.hcp
            })?;
        }
        Ok(())
    },
};
