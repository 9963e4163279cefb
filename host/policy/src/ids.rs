//! Identifiers used in policy files, each a newtype checked on
//! `TryFrom<String>` (and so on deserialization).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid {what}: {rule}")]
pub struct IdError {
    /// The kind of identifier, e.g. `caller id`.
    pub what: &'static str,
    /// The rejected value.
    pub value: String,
    /// What a valid one looks like.
    pub rule: &'static str,
}

/// Whether `s` is 1–`max` characters of `[a-z0-9]` first, then `extra`.
fn shaped(s: &str, max: usize, first: fn(u8) -> bool, rest: fn(u8) -> bool) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && first(bytes[0])
        && bytes[1..].iter().all(|b| rest(*b))
}

macro_rules! identifier {
    ($(#[$doc:meta])* $name:ident, $what:literal, $rule:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The identifier as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;

            fn try_from(value: String) -> Result<Self, Self::Error> {
                let check: fn(&str) -> bool = $check;
                if check(&value) {
                    Ok(Self(value))
                } else {
                    Err(IdError { what: $what, value, rule: $rule })
                }
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;

            fn try_from(value: &str) -> Result<Self, Self::Error> {
                Self::try_from(value.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

identifier!(
    /// A caller's identity, as `task_submit.caller_id` carries it
    /// (e.g. `harness-alpha-001`).
    CallerId,
    "caller id",
    "1 to 128 characters of letters, digits, '.', '_', '-', ':' or '@', starting with a letter or digit",
    |s| shaped(s, 128, |b| b.is_ascii_alphanumeric(), |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':' | b'@')
    })
);

identifier!(
    /// A capability's name, as its declaration states it
    /// (e.g. `cvd-material-synthesis`).
    CapabilityName,
    "capability name",
    "1 to 64 characters of a-z, 0-9 and '-', starting with a letter or digit",
    |s| shaped(s, 64, lower_alnum, |b| lower_alnum(b) || b == b'-')
);

identifier!(
    /// The identifier of a risk or context rule (e.g. `cvd-above-800c`),
    /// recorded when the rule fires.
    RuleId,
    "rule id",
    "1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit",
    |s| shaped(s, 64, lower_alnum, |b| lower_alnum(b) || b == b'-' || b == b'_')
);

identifier!(
    /// A kind of physical or virtual resource, as a declaration's
    /// `safety.resource_types` names it (e.g. `high_temperature_furnace`).
    ResourceType,
    "resource type",
    "1 to 64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit",
    |s| shaped(s, 64, lower_alnum, |b| lower_alnum(b) || b == b'-' || b == b'_')
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_validate() {
        assert!(CallerId::try_from("harness-alpha-001").is_ok());
        assert!(CallerId::try_from("ops@lab.example").is_ok());
        assert_eq!(
            CallerId::try_from("-bad")
                .expect_err("accepted")
                .to_string(),
            "\"-bad\" is not a valid caller id: 1 to 128 characters of letters, digits, '.', '_', \
             '-', ':' or '@', starting with a letter or digit"
        );
        assert!(CallerId::try_from("").is_err());
        assert!(CallerId::try_from("a".repeat(129)).is_err());
        assert!(CapabilityName::try_from("cvd-material-synthesis").is_ok());
        assert!(CapabilityName::try_from("CVD").is_err());
        assert!(RuleId::try_from("cvd_above-800c").is_ok());
        assert!(RuleId::try_from("a b").is_err());
        assert!(ResourceType::try_from("high_temperature_furnace").is_ok());
        let parsed: Result<CallerId, _> = serde_json::from_str("\"no spaces\"");
        assert!(parsed.is_err());
    }
}
