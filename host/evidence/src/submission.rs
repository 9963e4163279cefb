//! The submission an admission's decision input shares with `tasks`: the
//! gate's receipt records the task's `task_submit` payload in its decision
//! input (`hcp_policy::pep::gate::AdmissionInput::submit`, what replay
//! decides from), and `tasks` keeps the message as received. Stored twice,
//! that was the largest part of a task's row and of its admission receipt.
//!
//! So the writer stores an admitted task's decision input as the bytes
//! around the payload ([`super::block`], input kind 2) when the payload it
//! holds is the one `tasks` keeps, byte for byte in canonical form
//! ([`payload`]); readers put it back from the task's row, and check the
//! whole against the receipt's `input_hash`. Nothing a pack carries, a
//! receipt signs or replay reads changes: only where the hot store keeps
//! the bytes.
//!
//! Only an ALLOW: a refused task's row may keep a bounded or withheld form
//! of its message afterwards (`hcp_engine`'s `reject_task`), so its
//! decision input is stored whole as before. A row that rests sealed (T3,
//! T4, a credential in the message) is not read here: such an input is
//! stored whole too. A task's row and its receipts are pruned in one
//! transaction ([`super::archive`]), so the row is there while the
//! receipt's bytes are.

use anyhow::{Context as _, Result};
use rusqlite::{Connection, OptionalExtension as _, params};

/// The canonical bytes (RFC 8785) of `task_id`'s `task_submit` payload as
/// `tasks` keeps it; `None` when the task has no row, its messages rest
/// sealed, or its message has no payload.
///
/// # Errors
///
/// The database fails, or the payload has no canonical form.
pub(crate) fn payload(db: &Connection, task_id: &str) -> Result<Option<Vec<u8>>> {
    let text: Option<String> = db
        .prepare_cached("SELECT submit FROM tasks WHERE task_id = ?1")?
        .query_row(params![task_id], |r| r.get(0))
        .optional()?;
    // A sealed row is not JSON: not read here (see the module doc).
    let Some(message) = text.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        return Ok(None);
    };
    let Some(payload) = message.get("payload").filter(|p| p.is_object()) else {
        return Ok(None);
    };
    hcp_contracts::jcs::canonical_bytes(payload)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("task {task_id}: its stored submission"))
}

/// Where `payload` is in the canonical decision input `input` as the value
/// of its `submit` member: the offset of its first byte. Whichever
/// occurrence is found, the bytes around it and `payload` make `input`
/// again.
pub(crate) fn find(input: &[u8], payload: &[u8]) -> Option<usize> {
    const KEY: &[u8] = b"\"submit\":";
    if payload.is_empty() || input.len() < KEY.len() + payload.len() {
        return None;
    }
    let last = input.len() - payload.len();
    (KEY.len()..=last)
        .rev()
        .find(|&at| &input[at - KEY.len()..at] == KEY && &input[at..at + payload.len()] == payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_is_found_as_the_submit_member_only() {
        let payload = br#"{"a":1}"#;
        let input = br#"{"kind":"gate.admission","submit":{"a":1},"z":true}"#;
        let at = find(input, payload).expect("found");
        assert_eq!(&input[at..at + payload.len()], payload);
        assert_eq!(&input[..at], br#"{"kind":"gate.admission","submit":"#);
        // The same bytes elsewhere, not as `submit`'s value: not found.
        assert_eq!(find(br#"{"other":{"a":1}}"#, payload), None);
        assert_eq!(find(br#"{"submit":{"a":2}}"#, payload), None);
        assert_eq!(find(b"", payload), None);
        assert_eq!(find(input, b""), None);
    }
}
