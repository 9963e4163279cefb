//! The vocabulary of seed 004: modes, action types, checked actions, and the
//! identifiers that travel to the executor.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::fmt;

/// Longest text one TYPE_TEXT action may type, in characters (seed 004's
/// `MAX_TEXT_LENGTH`).
pub const MAX_TEXT_LENGTH: usize = 1024;
/// Shortest time between two actions, in milliseconds (seed 004's
/// `MIN_ACTION_DELAY_MS`).
pub const MIN_ACTION_DELAY_MS: u64 = 100;
/// Most keys in one KEY_COMBO.
pub const MAX_KEYS: usize = 5;
/// Largest relative mouse movement on either axis, in pixels.
pub const MAX_MOVE: i32 = 1000;

/// The key vocabulary of KEY_COMBO, spelled as the public firmware's key map
/// spells them (lower case; it upper-cases unknown names into adafruit_hid
/// `Keycode` attributes, which is how `up_arrow`, `page_up` and `f1` resolve).
pub const KEYS: &[&str] = &[
    "ctrl",
    "alt",
    "shift",
    "gui",
    "enter",
    "escape",
    "tab",
    "backspace",
    "delete",
    "space",
    "up_arrow",
    "down_arrow",
    "left_arrow",
    "right_arrow",
    "home",
    "end",
    "page_up",
    "page_down",
    "f1",
    "f2",
    "f3",
    "f4",
    "f5",
    "f6",
    "f7",
    "f8",
    "f9",
    "f10",
    "f11",
    "f12",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "n",
    "o",
    "p",
    "q",
    "r",
    "s",
    "t",
    "u",
    "v",
    "w",
    "x",
    "y",
    "z",
];

/// The operating mode (seed 004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Mode {
    /// Nothing proposed is shown for a decision or executed (the default).
    #[default]
    Observe,
    /// Proposals are shown and decided, never executed.
    Suggest,
    /// Approved proposals are executed.
    Execute,
}

impl Mode {
    /// The wire spelling, `OBSERVE` / `SUGGEST` / `EXECUTE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observe => "OBSERVE",
            Self::Suggest => "SUGGEST",
            Self::Execute => "EXECUTE",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "OBSERVE" => Ok(Self::Observe),
            "SUGGEST" => Ok(Self::Suggest),
            "EXECUTE" => Ok(Self::Execute),
            other => Err(format!(
                "{other:?} is not a mode (OBSERVE, SUGGEST, EXECUTE)"
            )),
        }
    }
}

/// The kind of an action (`action_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ActionType {
    /// Type a text.
    TypeText,
    /// Press keys together, then release them.
    KeyCombo,
    /// Move the pointer by a relative amount.
    MouseMove,
    /// Click a mouse button.
    MouseClick,
}

impl ActionType {
    /// The wire spelling, e.g. `TYPE_TEXT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TypeText => "TYPE_TEXT",
            Self::KeyCombo => "KEY_COMBO",
            Self::MouseMove => "MOUSE_MOVE",
            Self::MouseClick => "MOUSE_CLICK",
        }
    }
}

impl fmt::Display for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    /// The primary button.
    Left,
    /// The secondary button.
    Right,
    /// The wheel button.
    Middle,
}

/// An action as a guest asks for it: not checked yet. [`crate::proposal::check`]
/// turns it into a [`CheckedAction`].
///
/// As JSON it is `{"action_type": ..., "payload": {...}}`, the shape of
/// seed 004's proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "action_type",
    content = "payload",
    rename_all = "SCREAMING_SNAKE_CASE",
    deny_unknown_fields
)]
pub enum Action {
    /// Type `text`.
    TypeText {
        /// What to type.
        text: String,
    },
    /// Press `keys` together, then release them.
    KeyCombo {
        /// Key names from [`KEYS`].
        keys: Vec<String>,
    },
    /// Move the pointer by (`x`, `y`) pixels, relative to where it is.
    MouseMove {
        /// Horizontal movement, positive to the right.
        x: i64,
        /// Vertical movement, positive downwards.
        y: i64,
    },
    /// Click `button`.
    MouseClick {
        /// Which button.
        button: MouseButton,
    },
}

impl Action {
    /// Its kind.
    pub fn action_type(&self) -> ActionType {
        match self {
            Self::TypeText { .. } => ActionType::TypeText,
            Self::KeyCombo { .. } => ActionType::KeyCombo,
            Self::MouseMove { .. } => ActionType::MouseMove,
            Self::MouseClick { .. } => ActionType::MouseClick,
        }
    }
}

/// An action whose bounds were checked ([`crate::proposal::check`] is the
/// only way to make one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedAction(pub(crate) Action);

impl CheckedAction {
    /// The action.
    pub fn action(&self) -> &Action {
        &self.0
    }

    /// Its kind.
    pub fn action_type(&self) -> ActionType {
        self.0.action_type()
    }

    /// The `payload` object of seed 004 for this action.
    pub fn payload(&self) -> Value {
        match &self.0 {
            Action::TypeText { text } => json!({ "text": text }),
            Action::KeyCombo { keys } => json!({ "keys": keys }),
            Action::MouseMove { x, y } => json!({ "x": x, "y": y }),
            Action::MouseClick { button } => json!({ "button": button }),
        }
    }
}

/// The fixed `safety_bounds` object: `max_text_length` 1024,
/// `min_action_delay_ms` 100, exactly as the firmware checks them.
pub fn safety_bounds() -> Value {
    json!({
        "max_text_length": MAX_TEXT_LENGTH,
        "min_action_delay_ms": MIN_ACTION_DELAY_MS,
    })
}

/// Whether `id` is an identifier the executor's firmware accepts: 8 to 64
/// characters from `[A-Za-z0-9_-]`.
pub fn is_wire_id(id: &str) -> bool {
    (8..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh identifier.
            pub fn new() -> Self {
                Self(format!(concat!($prefix, "{}"), uuid::Uuid::now_v7().simple()))
            }

            /// The identifier's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                if is_wire_id(&s) {
                    Ok(Self(s))
                } else {
                    Err(format!(
                        "{s:?} is not an identifier (8 to 64 characters from [A-Za-z0-9_-])"
                    ))
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::try_from(s.to_owned())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// A proposal's id, `prop-<uuid v7>`.
    ProposalId,
    "prop-"
);
id_type!(
    /// An execution's id, `exec-<uuid v7>`.
    ExecutionId,
    "exec-"
);

/// An operator: 2 to 64 characters from `[A-Za-z0-9_-]`, never `host`
/// (the session log's name for the host itself).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct OperatorId(String);

/// The session log's operator for events the host records on its own.
pub const HOST_OPERATOR: &str = "host";

impl OperatorId {
    /// The operator's id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for OperatorId {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        let charset = s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !(2..=64).contains(&s.len()) || !charset {
            return Err(format!(
                "{s:?} is not an operator id (2 to 64 characters from [A-Za-z0-9_-])"
            ));
        }
        if s == HOST_OPERATOR {
            return Err(format!(
                "{s:?} is reserved for the host itself and cannot be an operator"
            ));
        }
        Ok(Self(s))
    }
}

impl std::str::FromStr for OperatorId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::try_from(s.to_owned())
    }
}

impl fmt::Display for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_wire_ids() {
        assert!(is_wire_id(ProposalId::new().as_str()));
        assert!(is_wire_id(ExecutionId::new().as_str()));
    }

    #[test]
    fn wire_ids_are_bounded_and_plain() {
        for bad in [
            "short",
            &"a".repeat(65),
            "has space1",
            "new\nline1",
            "quote\"d1",
        ] {
            assert!(!is_wire_id(bad), "{bad:?}");
        }
        assert!(is_wire_id("abcd-_09"));
        assert!(is_wire_id(&"a".repeat(64)));
    }

    #[test]
    fn operator_ids() {
        assert_eq!(
            OperatorId::try_from("host".to_owned()).expect_err("reserved"),
            "\"host\" is reserved for the host itself and cannot be an operator"
        );
        assert_eq!(
            OperatorId::try_from("a b".to_owned()).expect_err("space"),
            "\"a b\" is not an operator id (2 to 64 characters from [A-Za-z0-9_-])"
        );
        assert!(OperatorId::try_from("alice".to_owned()).is_ok());
    }

    #[test]
    fn action_json_is_the_proposal_shape() {
        let a: Action =
            serde_json::from_str(r#"{"action_type":"KEY_COMBO","payload":{"keys":["ctrl","c"]}}"#)
                .expect("parses");
        assert_eq!(
            a,
            Action::KeyCombo {
                keys: vec!["ctrl".into(), "c".into()]
            }
        );
    }
}
