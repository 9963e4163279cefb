//! A guest's proposal, checked: bounds, characters, the key vocabulary, and
//! whether the text looks like a secret.
//!
//! Everything a guest sends is refused here, before any state changes and
//! long before the wire, when it does not fit:
//!
//! - TYPE_TEXT: 1 to [`MAX_TEXT_LENGTH`] characters, printable ASCII only
//!   (U+0020 to U+007E). The executor types through a US keyboard layout
//!   and cannot type anything else; control characters (newline, NUL,
//!   escape) would press keys the operator did not read, so Enter or Tab is
//!   a KEY_COMBO of its own.
//! - KEY_COMBO: 1 to [`MAX_KEYS`] distinct keys from [`KEYS`].
//! - MOUSE_MOVE: a relative move, each axis within ±[`MAX_MOVE`] pixels.
//! - MOUSE_CLICK: `left`, `right` or `middle`.
//! - rationale: 10 to 2000 characters; newlines and tabs allowed, no other
//!   control characters, no Unicode bidirectional controls (which could make
//!   the operator read something other than what is stored).

use crate::action::{
    Action, CheckedAction, KEYS, MAX_KEYS, MAX_MOVE, MAX_TEXT_LENGTH, Mode, ProposalId,
    safety_bounds,
};
use crate::credential;
use hcp_contracts::problem::{self, Problem};
use hcp_contracts::schema::SchemaId;
use serde::Deserialize;
use serde_json::{Value, json};

/// Rationale length bounds, in characters (seed 004's schema).
pub const RATIONALE_CHARS: std::ops::RangeInclusive<usize> = 10..=2000;
/// Session id length bounds (the HCP envelope's).
const SESSION_CHARS: std::ops::RangeInclusive<usize> = 1..=256;

/// What a guest proposes: an action and why.
///
/// As JSON: `{"action_type": ..., "payload": {...}, "rationale": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalRequest {
    /// The action.
    pub action: Action,
    /// The guest's explanation, shown to the operator.
    pub rationale: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestJson {
    action_type: Value,
    payload: Value,
    rationale: String,
}

impl ProposalRequest {
    /// Parses `{"action_type", "payload", "rationale"}`; unknown fields are
    /// refused.
    ///
    /// # Errors
    ///
    /// [`ProposalError::Malformed`] with serde's message.
    pub fn from_json(text: &str) -> Result<Self, ProposalError> {
        let raw: RequestJson =
            serde_json::from_str(text).map_err(|e| ProposalError::Malformed(e.to_string()))?;
        let action = serde_json::from_value(json!({
            "action_type": raw.action_type,
            "payload": raw.payload,
        }))
        .map_err(|e| ProposalError::Malformed(e.to_string()))?;
        Ok(Self {
            action,
            rationale: raw.rationale,
        })
    }
}

/// Why a proposal was refused. Every message names the field and the bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalError {
    /// Not the proposal's JSON shape.
    #[error("proposal is malformed: {0}")]
    Malformed(String),
    /// The session id is empty, too long or carries control characters.
    #[error("session id {0:?} is not 1 to 256 printable characters")]
    BadSession(String),
    /// TYPE_TEXT with nothing to type.
    #[error("payload.text is empty: nothing to type")]
    EmptyText,
    /// TYPE_TEXT over [`MAX_TEXT_LENGTH`].
    #[error(
        "payload.text is {chars} characters long; at most {MAX_TEXT_LENGTH} may be typed in one action"
    )]
    TextTooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// TYPE_TEXT with a character the executor must not type.
    #[error("payload.text character {index} is {ch:?} (U+{code:04X}): only printable ASCII (U+0020 to U+007E) can be typed; use KEY_COMBO for Enter and Tab", code = u32::from(*ch))]
    TextCharacter {
        /// Its position, counted in characters from 0.
        index: usize,
        /// The character.
        ch: char,
    },
    /// KEY_COMBO without keys.
    #[error("payload.keys is empty: a combo needs 1 to {MAX_KEYS} keys")]
    NoKeys,
    /// KEY_COMBO over [`MAX_KEYS`].
    #[error("payload.keys has {count} keys; a combo has at most {MAX_KEYS}")]
    TooManyKeys {
        /// How many.
        count: usize,
    },
    /// A key outside [`KEYS`].
    #[error(
        "payload.keys/{index} is {key:?}, not a key of the vocabulary (lower case: ctrl, alt, shift, gui, enter, escape, tab, backspace, delete, space, arrows as up_arrow, home, end, page_up, page_down, f1 to f12, a to z)"
    )]
    UnknownKey {
        /// Its position.
        index: usize,
        /// The name given.
        key: String,
    },
    /// The same key twice.
    #[error("payload.keys names {0:?} twice")]
    DuplicateKey(String),
    /// MOUSE_MOVE beyond ±[`MAX_MOVE`].
    #[error("payload.{axis} is {value}; a relative move is at most {MAX_MOVE} pixels either way")]
    MoveOutOfRange {
        /// `x` or `y`.
        axis: char,
        /// The value given.
        value: i64,
    },
    /// The rationale is too short or too long.
    #[error("rationale is {chars} characters long; it must be 10 to 2000")]
    RationaleLength {
        /// Its length.
        chars: usize,
    },
    /// The rationale carries a control or bidirectional-control character.
    #[error("rationale character {index} is {ch:?} (U+{code:04X}): control characters are not allowed", code = u32::from(*ch))]
    RationaleCharacter {
        /// Its position in characters.
        index: usize,
        /// The character.
        ch: char,
    },
    /// The proposal does not pass the shipped `action_proposal` schema (a
    /// host defect if the checks above passed).
    #[error("proposal does not fit action_proposal:\n{}", problem::list(.0))]
    Contract(Vec<Problem>),
}

/// A checked proposal, as the host records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// Its id.
    pub id: ProposalId,
    /// The guest's session.
    pub session: String,
    /// When it was made (RFC 3339, UTC, milliseconds).
    pub timestamp: String,
    /// The checked action.
    pub action: CheckedAction,
    /// The guest's explanation.
    pub rationale: String,
    /// The text looks like a secret ([`credential`]).
    pub credential_warning: bool,
}

impl Proposal {
    /// Seed 004's `action_proposal` object for this proposal, with the mode
    /// it was made in.
    pub fn to_contract(&self, mode: Mode) -> Value {
        json!({
            "proposal_id": self.id,
            "timestamp": self.timestamp,
            "mode": mode,
            "action_type": self.action.action_type(),
            "payload": self.action.payload(),
            "rationale": self.rationale,
            "credential_warning": self.credential_warning,
            "safety_bounds": safety_bounds(),
        })
    }
}

/// Checks `request` from `session`, made in `mode`, to be proposal `id`;
/// sets `credential_warning`.
///
/// # Errors
///
/// The first bound the request breaks ([`ProposalError`]).
pub fn check(
    session: &str,
    id: ProposalId,
    request: ProposalRequest,
    mode: Mode,
) -> Result<Proposal, ProposalError> {
    if !SESSION_CHARS.contains(&session.chars().count()) || session.chars().any(char::is_control) {
        return Err(ProposalError::BadSession(
            session.chars().take(64).collect(),
        ));
    }
    let ProposalRequest { action, rationale } = request;
    let credential_warning = check_action(&action)?;
    check_rationale(&rationale)?;
    let proposal = Proposal {
        id,
        session: session.to_owned(),
        timestamp: hcp_contracts::message::now_rfc3339(),
        action: CheckedAction(action),
        rationale,
        credential_warning,
    };
    SchemaId::HidActionProposal
        .validate(&proposal.to_contract(mode), "")
        .map_err(ProposalError::Contract)?;
    Ok(proposal)
}

/// Checks one action's bounds; returns whether its text looks like a secret.
fn check_action(action: &Action) -> Result<bool, ProposalError> {
    match action {
        Action::TypeText { text } => {
            if text.is_empty() {
                return Err(ProposalError::EmptyText);
            }
            // Count without walking a huge text twice: stop past the bound.
            let chars = text.chars().take(MAX_TEXT_LENGTH + 1).count();
            if chars > MAX_TEXT_LENGTH {
                return Err(ProposalError::TextTooLong {
                    chars: text.chars().count(),
                });
            }
            if let Some((index, ch)) = text
                .chars()
                .enumerate()
                .find(|(_, c)| !(' '..='~').contains(c))
            {
                return Err(ProposalError::TextCharacter { index, ch });
            }
            Ok(credential::looks_like_secret(text).is_some())
        }
        Action::KeyCombo { keys } => {
            if keys.is_empty() {
                return Err(ProposalError::NoKeys);
            }
            if keys.len() > MAX_KEYS {
                return Err(ProposalError::TooManyKeys { count: keys.len() });
            }
            for (index, key) in keys.iter().enumerate() {
                if !KEYS.contains(&key.as_str()) {
                    return Err(ProposalError::UnknownKey {
                        index,
                        key: key.chars().take(64).collect(),
                    });
                }
                if keys[..index].contains(key) {
                    return Err(ProposalError::DuplicateKey(key.clone()));
                }
            }
            Ok(false)
        }
        Action::MouseMove { x, y } => {
            for (axis, value) in [('x', *x), ('y', *y)] {
                if value.unsigned_abs() > MAX_MOVE.unsigned_abs().into() {
                    return Err(ProposalError::MoveOutOfRange { axis, value });
                }
            }
            Ok(false)
        }
        Action::MouseClick { .. } => Ok(false),
    }
}

fn check_rationale(rationale: &str) -> Result<(), ProposalError> {
    let chars = rationale.chars().take(RATIONALE_CHARS.end() + 1).count();
    if !RATIONALE_CHARS.contains(&chars) {
        return Err(ProposalError::RationaleLength {
            chars: rationale.chars().count(),
        });
    }
    let forbidden = |c: &char| {
        (c.is_control() && *c != '\n' && *c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
    };
    if let Some((index, ch)) = rationale.chars().enumerate().find(|(_, c)| forbidden(c)) {
        return Err(ProposalError::RationaleCharacter { index, ch });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::MouseButton;

    const WHY: &str = "The prompt is waiting for this input.";

    fn propose(action: Action) -> Result<Proposal, ProposalError> {
        check(
            "sess-1",
            ProposalId::new(),
            ProposalRequest {
                action,
                rationale: WHY.into(),
            },
            Mode::Suggest,
        )
    }

    fn text(t: &str) -> Action {
        Action::TypeText { text: t.into() }
    }

    fn keys(k: &[&str]) -> Action {
        Action::KeyCombo {
            keys: k.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn bounds_are_refused_with_exact_errors() {
        let cases: Vec<(Action, ProposalError)> = vec![
            (text(""), ProposalError::EmptyText),
            (
                text(&"a".repeat(1025)),
                ProposalError::TextTooLong { chars: 1025 },
            ),
            (
                text("ls\nrm -rf /"),
                ProposalError::TextCharacter { index: 2, ch: '\n' },
            ),
            (
                text("a\0b"),
                ProposalError::TextCharacter { index: 1, ch: '\0' },
            ),
            (
                text("x\r"),
                ProposalError::TextCharacter { index: 1, ch: '\r' },
            ),
            (
                text("caf\u{e9}"),
                ProposalError::TextCharacter {
                    index: 3,
                    ch: '\u{e9}',
                },
            ),
            (keys(&[]), ProposalError::NoKeys),
            (
                keys(&["ctrl", "alt", "shift", "gui", "a", "b"]),
                ProposalError::TooManyKeys { count: 6 },
            ),
            (
                keys(&["ctrl", "CTRL"]),
                ProposalError::UnknownKey {
                    index: 1,
                    key: "CTRL".into(),
                },
            ),
            (
                keys(&["ctrl", "ctrl"]),
                ProposalError::DuplicateKey("ctrl".into()),
            ),
            (
                Action::MouseMove { x: 1001, y: 0 },
                ProposalError::MoveOutOfRange {
                    axis: 'x',
                    value: 1001,
                },
            ),
            (
                Action::MouseMove { x: 0, y: i64::MIN },
                ProposalError::MoveOutOfRange {
                    axis: 'y',
                    value: i64::MIN,
                },
            ),
        ];
        for (action, expected) in cases {
            assert_eq!(propose(action.clone()), Err(expected), "{action:?}");
        }
    }

    #[test]
    fn messages_name_the_field_and_bound() {
        assert_eq!(
            ProposalError::TextTooLong { chars: 1025 }.to_string(),
            "payload.text is 1025 characters long; at most 1024 may be typed in one action"
        );
        assert_eq!(
            ProposalError::TextCharacter { index: 2, ch: '\n' }.to_string(),
            "payload.text character 2 is '\\n' (U+000A): only printable ASCII (U+0020 to U+007E) \
             can be typed; use KEY_COMBO for Enter and Tab"
        );
        assert_eq!(
            ProposalError::TooManyKeys { count: 6 }.to_string(),
            "payload.keys has 6 keys; a combo has at most 5"
        );
    }

    #[test]
    fn limits_themselves_are_accepted() {
        for action in [
            text(&"~".repeat(1024)),
            keys(&["ctrl", "alt", "shift", "gui", "f12"]),
            Action::MouseMove { x: -1000, y: 1000 },
            Action::MouseClick {
                button: MouseButton::Middle,
            },
        ] {
            let p = propose(action.clone()).unwrap_or_else(|e| panic!("{action:?}: {e}"));
            assert!(!p.credential_warning);
            SchemaId::HidActionProposal
                .validate(&p.to_contract(Mode::Execute), "")
                .expect("the contract");
        }
    }

    #[test]
    fn rationale_bounds() {
        let mut req = ProposalRequest {
            action: text("ls"),
            rationale: "short".into(),
        };
        assert_eq!(
            check("s", ProposalId::new(), req.clone(), Mode::Suggest),
            Err(ProposalError::RationaleLength { chars: 5 })
        );
        req.rationale = "Looks fine \u{202E}txt.exe".into();
        assert_eq!(
            check("s", ProposalId::new(), req.clone(), Mode::Suggest),
            Err(ProposalError::RationaleCharacter {
                index: 11,
                ch: '\u{202E}'
            })
        );
        req.rationale = "Two lines:\n\tfirst and second.".into();
        assert!(check("s", ProposalId::new(), req.clone(), Mode::Suggest).is_ok());
        assert_eq!(
            check("", ProposalId::new(), req, Mode::Suggest),
            Err(ProposalError::BadSession(String::new()))
        );
    }

    #[test]
    fn credential_warning_is_set_for_secrets_only() {
        let p = propose(text("password=hunter22")).expect("valid");
        assert!(p.credential_warning);
        let p = propose(text("-----BEGIN OPENSSH PRIVATE KEY-----")).expect("valid");
        assert!(p.credential_warning);
        let p = propose(text("echo hello")).expect("valid");
        assert!(!p.credential_warning);
    }

    #[test]
    fn json_requests_are_strict() {
        let ok = ProposalRequest::from_json(
            r#"{"action_type":"MOUSE_MOVE","payload":{"x":5,"y":-5},"rationale":"Move onto the button."}"#,
        )
        .expect("parses");
        assert_eq!(ok.action, Action::MouseMove { x: 5, y: -5 });
        for (text, expected) in [
            (
                r#"{"action_type":"TYPE_TEXT","payload":{"text":"a"},"rationale":"xxxxxxxxxxxx","mode":"EXECUTE"}"#,
                "proposal is malformed: unknown field `mode`, expected one of `action_type`, `payload`, `rationale` at line 1 column 83",
            ),
            (
                r#"{"action_type":"TYPE_TEXT","payload":{"text":"a","extra":1},"rationale":"xxxxxxxxxxxx"}"#,
                "proposal is malformed: unknown field `extra`, expected `text`",
            ),
            (
                r#"{"action_type":"MOUSE_MOVE","payload":{"x":1.5,"y":0},"rationale":"xxxxxxxxxxxx"}"#,
                "proposal is malformed: invalid type: floating point `1.5`, expected i64",
            ),
            (
                r#"{"action_type":"SHELL","payload":{},"rationale":"xxxxxxxxxxxx"}"#,
                "proposal is malformed: unknown variant `SHELL`, expected one of `TYPE_TEXT`, `KEY_COMBO`, `MOUSE_MOVE`, `MOUSE_CLICK`",
            ),
        ] {
            let err = ProposalRequest::from_json(text).expect_err(text);
            assert_eq!(err.to_string(), expected);
        }
    }
}
