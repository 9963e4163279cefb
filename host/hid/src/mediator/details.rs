//! What the session log says of a proposal, and of its text when that looks
//! like a secret.

use crate::action::Action;
use crate::proposal::Proposal;
use hmac::{Hmac, Mac as _};
use serde_json::{Map, Value, json};
use sha2::Sha256;

/// At most `max` characters of `s`.
pub(super) fn bounded(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The PROPOSAL entry's details. The text of a credential-like proposal is
/// never logged, nor its plain SHA-256 (anyone holding the log could
/// confirm a guessed secret with it): only its length and, when the host
/// keeps a digest key, `payload_hmac_sha256`, the HMAC-SHA256 of the
/// payload's canonical form (RFC 8785) under that key. Other proposals
/// carry the payload's `payload_sha256`.
pub(super) fn proposal_details(p: &Proposal, digest_key: Option<&[u8]>) -> Map<String, Value> {
    let summary = match p.action.action() {
        Action::TypeText { text } if p.credential_warning => {
            format!(
                "[{} characters withheld: credential_warning]",
                text.chars().count()
            )
        }
        Action::TypeText { text } => bounded(text, 200),
        Action::KeyCombo { keys } => keys.join("+"),
        Action::MouseMove { x, y } => format!("move by x={x}, y={y}"),
        Action::MouseClick { button } => format!("{button:?} click").to_lowercase(),
    };
    let mut d = Map::new();
    d.insert("session_id".into(), json!(bounded(&p.session, 256)));
    d.insert("action_type".into(), json!(p.action.action_type()));
    d.insert("payload_summary".into(), json!(summary));
    if !p.credential_warning {
        if let Ok(hash) = hcp_contracts::jcs::sha256(&p.action.payload()) {
            d.insert("payload_sha256".into(), json!(hex::encode(hash)));
        }
    } else if let Some(key) = digest_key
        && let Ok(canonical) = hcp_contracts::jcs::canonical_bytes(&p.action.payload())
        && let Some(mac) = hmac_sha256(key, &canonical)
    {
        d.insert("payload_hmac_sha256".into(), json!(mac));
    }
    d.insert("credential_warning".into(), json!(p.credential_warning));
    d.insert("rationale".into(), json!(bounded(&p.rationale, 500)));
    d
}

/// HMAC-SHA256 of `data` under `key`, in hex (`None` never happens: HMAC
/// takes a key of any length).
pub(super) fn hmac_sha256(key: &[u8], data: &[u8]) -> Option<String> {
    let mut mac = <Hmac<Sha256>>::new_from_slice(key).ok()?;
    mac.update(data);
    Some(hex::encode(mac.finalize().into_bytes()))
}
