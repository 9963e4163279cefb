//! Reading a line of a pack's receipts file without serde.
//!
//! [`scan`] accepts a line only if it is, byte for byte, what
//! [`Receipt::canonical_bytes`] writes for some receipt: the twenty fields in
//! order, no whitespace, strings without any escape or control character,
//! digests, key ids and signatures in lowercase hex, integers in shortest
//! decimal form. For such a line, serde would read exactly the values
//! `scan` reads, and writing them again gives the line back: so the
//! receipt's hash is the SHA-256 of the line, and what its signature covers
//! is the line with the signature's value replaced by `null`. Any other line
//! (escapes, whitespace, other key order, an integer out of range, ...) is
//! left to serde and re-serialized, as every line was before: the outcome,
//! and each message, are the same either way.

use crate::hash::Digest;
use crate::keys::KeyId;
use crate::receipt::{Receipt, Verdict};
use crate::view::{Origin, Parents, ReceiptView};
use hcp_contracts::RiskLevel;

/// Every field of a canonical line (see the module doc).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scanned<'a> {
    line: &'a str,
    args_hash: &'a str,
    call: &'a str,
    capability: &'a str,
    host_id: &'a str,
    input_hash: &'a str,
    key_id: Option<&'a str>,
    lamport: u64,
    parents: &'a str,
    policy_hash: &'a str,
    prev_hash: Option<Digest>,
    reason_code: &'a str,
    receipt_id: &'a str,
    risk: RiskLevel,
    seq: u64,
    session_id: Option<&'a str>,
    /// Where the signature's value starts, and its 128 hex digits.
    signature: Option<(usize, &'a str)>,
    task_id: Option<&'a str>,
    timestamp: &'a str,
    verdict: Verdict,
    version: u32,
}

/// Reads `line` if it is the canonical form of a receipt (see the module
/// doc); `None` for any other line, valid or not.
pub(crate) fn scan(line: &str) -> Option<Scanned<'_>> {
    let mut c = Cursor { text: line, at: 0 };
    c.eat("{\"args_hash\":")?;
    let args_hash = c.digest_hex()?;
    c.eat(",\"call\":")?;
    let call = c.string()?;
    c.eat(",\"capability\":")?;
    let capability = c.string()?;
    c.eat(",\"host_id\":")?;
    let host_id = c.string()?;
    c.eat(",\"input_hash\":")?;
    let input_hash = c.digest_hex()?;
    c.eat(",\"key_id\":")?;
    let key_id = c.optional(|c| c.hex(16))?;
    c.eat(",\"lamport\":")?;
    let lamport = c.integer()?;
    c.eat(",\"parents\":[")?;
    let parents = c.digests()?;
    c.eat(",\"policy_hash\":")?;
    let policy_hash = c.digest_hex()?;
    c.eat(",\"prev_hash\":")?;
    let prev_hash = c.optional(Cursor::digest)?;
    c.eat(",\"reason_code\":")?;
    let reason_code = c.string()?;
    c.eat(",\"receipt_id\":")?;
    let receipt_id = c.string()?;
    c.eat(",\"risk\":\"")?;
    let risk = c.risk()?;
    c.eat("\",\"seq\":")?;
    let seq = c.integer()?;
    c.eat(",\"session_id\":")?;
    let session_id = c.optional(Cursor::string)?;
    c.eat(",\"signature\":")?;
    let signature_at = c.at;
    let signature = c.optional(|c| c.hex(128))?.map(|hex| (signature_at, hex));
    c.eat(",\"task_id\":")?;
    let task_id = c.optional(Cursor::string)?;
    c.eat(",\"timestamp\":")?;
    let timestamp = c.string()?;
    c.eat(",\"verdict\":")?;
    let verdict = if c.eat("\"ALLOW\"").is_some() {
        Verdict::Allow
    } else {
        c.eat("\"DENY\"")?;
        Verdict::Deny
    };
    c.eat(",\"version\":")?;
    let version = u32::try_from(c.integer()?).ok()?;
    c.eat("}")?;
    (c.at == line.len()).then_some(Scanned {
        line,
        args_hash,
        call,
        capability,
        host_id,
        input_hash,
        key_id,
        lamport,
        parents,
        policy_hash,
        prev_hash,
        reason_code,
        receipt_id,
        risk,
        seq,
        session_id,
        signature,
        task_id,
        timestamp,
        verdict,
        version,
    })
}

impl<'a> Scanned<'a> {
    /// The view of the line.
    pub(crate) fn view(&self) -> ReceiptView<'a> {
        ReceiptView {
            call: self.call,
            capability: self.capability,
            host_id: self.host_id,
            key_id: self.key_id,
            lamport: self.lamport,
            parents: Parents::Text(self.parents),
            prev_hash: self.prev_hash,
            reason_code: self.reason_code,
            receipt_id: self.receipt_id,
            risk: self.risk,
            seq: self.seq,
            session_id: self.session_id,
            task_id: self.task_id,
            verdict: self.verdict,
            version: self.version,
            origin: Origin::Line {
                line: self.line,
                signature_at: self.signature.map(|(at, _)| at),
            },
        }
    }

    /// The receipt serde would read from the line.
    pub(crate) fn to_receipt(self) -> Receipt {
        let owned = |s: &str| s.to_owned();
        // Checked by `scan`: 64 lowercase hex digits.
        let digest = |hex: &str| Digest::from_hex(hex).unwrap_or_default();
        Receipt {
            args_hash: digest(self.args_hash),
            call: owned(self.call),
            capability: owned(self.capability),
            host_id: owned(self.host_id),
            input_hash: digest(self.input_hash),
            key_id: self.key_id.map(KeyId::from_checked),
            lamport: self.lamport,
            parents: Parents::Text(self.parents).iter().collect(),
            policy_hash: digest(self.policy_hash),
            prev_hash: self.prev_hash,
            reason_code: owned(self.reason_code),
            receipt_id: owned(self.receipt_id),
            risk: self.risk,
            seq: self.seq,
            session_id: self.session_id.map(owned),
            // Checked by `scan`: 128 lowercase hex digits.
            signature: self.signature.and_then(|(_, hex)| hex.parse().ok()),
            task_id: self.task_id.map(owned),
            timestamp: owned(self.timestamp),
            verdict: self.verdict,
            version: self.version,
        }
    }
}

/// A position in a line being scanned.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn eat(&mut self, literal: &str) -> Option<()> {
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(literal.as_bytes()).then(|| {
            self.at += literal.len();
        })
    }

    fn optional<T>(&mut self, value: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.eat("null").is_some() {
            Some(None)
        } else {
            value(self).map(Some)
        }
    }

    /// A string as serde_json writes it without escaping anything: no `"`,
    /// `\` or control character inside.
    fn string(&mut self) -> Option<&'a str> {
        self.eat("\"")?;
        let start = self.at;
        let len = self
            .text
            .as_bytes()
            .get(start..)?
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        let end = start + len;
        self.eat_at(end, b'"')?;
        self.text.get(start..end)
    }

    /// `"`, `digits` lowercase hex digits, `"`; returns the digits.
    fn hex(&mut self, digits: usize) -> Option<&'a str> {
        self.eat("\"")?;
        self.hex_digits(digits)
    }

    /// `"sha256:`, 64 lowercase hex digits, `"`.
    fn digest(&mut self) -> Option<Digest> {
        Digest::from_hex(self.digest_hex()?).ok()
    }

    /// As [`Cursor::digest`]; returns the hex digits.
    fn digest_hex(&mut self) -> Option<&'a str> {
        self.eat("\"sha256:")?;
        self.hex_digits(64)
    }

    /// `digits` lowercase hex digits then `"`; returns the digits.
    fn hex_digits(&mut self, digits: usize) -> Option<&'a str> {
        let start = self.at;
        let hex = self.text.get(start..start.checked_add(digits)?)?;
        if !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        self.eat_at(start + digits, b'"')?;
        Some(hex)
    }

    /// Digests joined by commas, then `]`; returns what is between the brackets.
    fn digests(&mut self) -> Option<&'a str> {
        let start = self.at;
        if self.eat("]").is_some() {
            return Some("");
        }
        loop {
            self.digest_hex()?;
            if self.eat(",").is_none() {
                break;
            }
        }
        let end = self.at;
        self.eat("]")?;
        self.text.get(start..end)
    }

    /// `0` or digits without a leading zero, within u64.
    fn integer(&mut self) -> Option<u64> {
        let bytes = self.text.as_bytes().get(self.at..)?;
        let len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 || (len > 1 && bytes[0] == b'0') {
            return None;
        }
        let mut n = 0u64;
        for &b in &bytes[..len] {
            n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        }
        self.at += len;
        Some(n)
    }

    /// `R1` to `R5` (the quotes are the caller's).
    fn risk(&mut self) -> Option<RiskLevel> {
        let rest = self.text.as_bytes().get(self.at..)?;
        let level = RiskLevel::ALL
            .into_iter()
            .find(|l| rest.starts_with(l.as_str().as_bytes()))?;
        self.at += level.as_str().len();
        Some(level)
    }

    /// Steps over `byte`, which must be at `at`.
    fn eat_at(&mut self, at: usize, byte: u8) -> Option<()> {
        (self.text.as_bytes().get(at) == Some(&byte)).then(|| {
            self.at = at + 1;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostKey;
    use crate::receipt::tests::sample;

    /// What serde makes of `line`, and whether writing it again gives `line`.
    fn serde_reading(line: &str) -> Option<(Receipt, bool)> {
        let r: Receipt = serde_json::from_str(line).ok()?;
        let same = r.canonical_bytes().ok()? == line.as_bytes();
        Some((r, same))
    }

    /// `scan` accepts only lines that serde reads and writes back unchanged,
    /// and reads the same receipt from them; of those it leaves to serde
    /// only lines with an escape in a string.
    fn agrees(line: &str) {
        let scanned = scan(line);
        match serde_reading(line) {
            Some((r, true)) => {
                let Some(s) = scanned else {
                    assert!(line.contains('\\'), "canonical line refused: {line}");
                    return;
                };
                assert_eq!(s.to_receipt(), r, "{line}");
                let view = s.view();
                assert_eq!(view.hash().ok(), r.hash().ok());
                assert_eq!(view.is_signed(), r.is_signed());
                assert_eq!(view.parents.iter().collect::<Vec<_>>(), r.parents);
                assert_eq!(view.check(), r.check());
                let key = HostKey::from_seed(&[5; 32]);
                assert_eq!(
                    view.verify_signature(key.public()),
                    r.verify_signature(key.public())
                );
            }
            _ => assert!(scanned.is_none(), "non-canonical line accepted: {line}"),
        }
    }

    fn samples() -> Vec<Receipt> {
        let key = HostKey::from_seed(&[5; 32]);
        let mut signed = sample();
        signed.sign(&key).expect("sign");
        let mut first = sample();
        (first.seq, first.prev_hash, first.parents) = (0, None, vec![]);
        first.receipt_id = "host-a:0".into();
        let mut many = sample();
        many.parents = (0..5u8).map(|i| Digest::of(&[i])).collect();
        many.task_id = Some("task é€😀 \u{7f}".into());
        many.verdict = Verdict::Deny;
        many.reason_code = "DENY_TOOL_NOT_FOUND".into();
        many.lamport = (1 << 53) - 1;
        vec![sample(), signed, first, many]
    }

    #[test]
    fn canonical_lines_are_read_as_serde_reads_them() {
        for r in samples() {
            let line = String::from_utf8(r.canonical_bytes().expect("bytes")).expect("utf8");
            let s = scan(&line).expect("canonical");
            assert_eq!(s.to_receipt(), r);
            agrees(&line);
        }
    }

    #[test]
    fn other_lines_are_left_to_serde() {
        let r = &samples()[1];
        let line = String::from_utf8(r.canonical_bytes().expect("bytes")).expect("utf8");
        let edits: Vec<(&str, &str)> = vec![
            ("{", "{ "),
            ("\"call\":", "\"call\" :"),
            (",\"version\":1}", ",\"version\":1 }"),
            (",\"version\":1}", ",\"version\":1.0}"),
            (",\"version\":1}", ",\"version\":01}"),
            (",\"version\":1}", ",\"version\":1e0}"),
            (",\"version\":1}", ",\"version\":4294967297}"),
            (",\"lamport\":7", ",\"lamport\":-0"),
            (",\"lamport\":7", ",\"lamport\":18446744073709551623"),
            ("fs.open", "fs\\u002eopen"),
            ("fs.open", "fs\\/open"),
            ("fs.open", "fs\\nopen"),
            ("\"task_id\":null,", ""),
            ("\"task_id\":null", "\"task_id\":\"\""),
            ("\"risk\":\"R1\"", "\"risk\":{\"R1\":null}"),
            (
                "\"ALLOW\",\"version\"",
                "\"ALLOW\",\"verdict\":\"ALLOW\",\"version\"",
            ),
            ("{\"args_hash\"", "{\"extra\":1,\"args_hash\""),
            ("\"args_hash\":\"sha256:", "\"args_hash\":\"SHA256:"),
            ("\"host_id\":\"host-a\",", ""),
        ];
        for (from, to) in edits {
            assert!(line.contains(from), "{from}");
            agrees(&line.replacen(from, to, 1));
        }
        // Hex digits (and everything else) in upper case, here and there.
        for at in (0..line.len()).step_by(7) {
            let mut bytes = line.clone().into_bytes();
            bytes[at] = bytes[at].to_ascii_uppercase();
            if let Ok(text) = String::from_utf8(bytes) {
                agrees(&text);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any edit of a canonical line: `scan` and serde agree (see `agrees`).
        #[test]
        fn scan_agrees_with_serde_on_edited_lines(
            pick in 0usize..4,
            edits in proptest::collection::vec((proptest::prelude::any::<usize>(), 0u8..128, 0u8..3), 1..4),
        ) {
            let r = &samples()[pick];
            let mut bytes = r.canonical_bytes().expect("bytes");
            for (at, byte, how) in edits {
                let at = at % (bytes.len() + 1);
                match how {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ if at < bytes.len() => { bytes.remove(at); }
                    _ => {}
                }
            }
            if let Ok(line) = String::from_utf8(bytes) {
                agrees(&line);
            }
        }
    }
}
