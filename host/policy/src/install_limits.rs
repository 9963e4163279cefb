//! `install.json` `limits`: the most a manifest may ask for each of its
//! limits. Every limit a task runs under is bounded at install: the
//! manifest's `limits` (memory, table elements, instances, output, log,
//! artifacts, checkpoints), its `max_duration` and its `concurrent_limit`.
//! Where `install.json` sets no bound, the built-in maximum
//! ([`BUILT_IN`]) applies; a limit the manifest does not set is checked at
//! the host's default for it.

use hcp_contracts::manifest::{Limits, Manifest};
use hcp_contracts::{IsoDuration, Problem};
use serde::{Deserialize, Serialize};
use std::time::Duration;

macro_rules! bounds {
    ($($name:ident: $about:literal, $default:expr, $max:expr;)*) => {
        /// The bounds as written; each optional: one per limit of the
        /// manifest's limit set ([`hcp_contracts::limit_set`]), then the
        /// declaration's two.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct LimitBounds {
            $(
                #[doc = $about]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<u64>,
            )*
            /// The longest `max_duration` (ISO 8601).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_duration: Option<String>,
            /// The highest `concurrent_limit`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub concurrent_limit: Option<u64>,
        }

        impl LimitBounds {
            /// The bound of each limit of the set, by name, in the set's order.
            fn each(&self) -> impl Iterator<Item = (&'static str, Option<u64>)> {
                [$((stringify!($name), self.$name),)*].into_iter()
            }
        }
    };
}

hcp_contracts::limit_set!(bounds);

/// The built-in maxima, where `install.json` sets no bound.
pub const BUILT_IN: BuiltIn = BuiltIn {
    limits: Limits::BUILT_IN_MAX,
    max_duration: Duration::from_secs(7 * 86_400),
    concurrent_limit: 64,
};

/// Every bound, set (see [`BUILT_IN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    /// Each limit of the manifest's limit set ([`Limits::BUILT_IN_MAX`]:
    /// memory 1 GiB, table elements 1,000,000, instances 256, output and
    /// log 16 MiB, 1,024 artifacts of 1 GiB in all, 1,024 checkpoints of
    /// 64 MiB each).
    pub limits: Limits,
    /// The longest `max_duration` (P7D).
    pub max_duration: Duration,
    /// The highest `concurrent_limit` (64).
    pub concurrent_limit: u64,
}

impl LimitBounds {
    /// Problems of the bounds as written (`at`: the JSON pointer of
    /// `limits`).
    pub(crate) fn problems(&self, at: &str) -> Vec<Problem> {
        match self.max_duration.as_deref().map(IsoDuration::parse) {
            Some(Err(e)) => vec![Problem::new(format!("{at}/max_duration"), e)],
            _ => Vec::new(),
        }
    }

    /// Every limit of `manifest` above its bound, each with both values.
    pub(crate) fn check(&self, manifest: &Manifest) -> Vec<String> {
        let b = &BUILT_IN;
        let mut reasons = Vec::new();
        let counts = manifest
            .doc
            .limits
            .each()
            .zip(manifest.limits.each())
            .zip(self.each())
            .zip(b.limits.each());
        for ((((name, written), (_, asked)), (_, bound)), (_, built_in)) in counts {
            let field = format!("limits.{name}");
            if let Some(reason) = above(&field, written.is_some(), asked, bound, built_in) {
                reasons.push(reason);
            }
        }
        let constraints = manifest.doc.capability.constraints.as_ref();
        let bound = self
            .max_duration
            .as_deref()
            .and_then(|t| IsoDuration::parse(t).ok())
            .map(IsoDuration::get);
        let limit = bound.unwrap_or(b.max_duration);
        if manifest.max_duration > limit {
            let asked = IsoDuration::from_duration(manifest.max_duration);
            reasons.push(format!(
                "capability.constraints.max_duration {}{asked} is above the most this host installs, {} {}",
                if constraints.and_then(|c| c.max_duration.as_ref()).is_some() {
                    ""
                } else {
                    "(the default) "
                },
                IsoDuration::from_duration(limit),
                source("limits.max_duration", bound.is_some()),
            ));
        }
        if let Some(reason) = above(
            "capability.constraints.concurrent_limit",
            constraints.and_then(|c| c.concurrent_limit).is_some(),
            u64::from(manifest.concurrent_limit),
            self.concurrent_limit,
            b.concurrent_limit,
        ) {
            reasons.push(reason);
        }
        reasons
    }
}

fn source(field: &str, set: bool) -> String {
    if set {
        format!("(install.json {field})")
    } else {
        format!("(the built-in maximum; install.json sets no {field})")
    }
}

fn above(
    field: &str,
    written: bool,
    asked: u64,
    bound: Option<u64>,
    built_in: u64,
) -> Option<String> {
    let limit = bound.unwrap_or(built_in);
    (asked > limit).then(|| {
        let bound_field = field.replace("capability.constraints.", "limits.");
        format!(
            "{field} {}{asked} is above the most this host installs, {limit} {}",
            if written { "" } else { "(the default) " },
            source(&bound_field, bound.is_some())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `install.json`'s schema bounds exactly the limit set, and the two
    /// limits of the declaration.
    #[test]
    fn the_install_schema_bounds_the_limit_set() {
        let schema: serde_json::Value =
            serde_json::from_str(crate::install::INSTALL_SCHEMA).expect("schema");
        let props = schema
            .pointer("/properties/limits/properties")
            .and_then(|p| p.as_object())
            .expect("limits properties");
        let mut listed: Vec<&str> = props.keys().map(String::as_str).collect();
        let mut set: Vec<&str> = Limits::NAMES.to_vec();
        set.extend(["max_duration", "concurrent_limit"]);
        listed.sort_unstable();
        set.sort_unstable();
        assert_eq!(listed, set);
        let bounds = LimitBounds::default();
        assert_eq!(bounds.each().count(), Limits::NAMES.len());
    }
}
