//! Bounded arguments: what a receipt keeps of a large call.
//!
//! A receipt's `args_hash` is the SHA-256 of the whole call
//! ([`Call::canonical_bytes`]), whatever its size. Its decision input keeps
//! the call itself only while the call's text fits in
//! [`ARGS_PREFIX_BYTES`]; a larger call is recorded as [`Call::bounded`]
//! (every string cut so that their total is at most that many bytes) plus a
//! [`FullArgs`] with what the decision needs from the rest: the bytes the
//! call charges to the `bytes` budget and the threat signals the host's scan
//! found in the whole text. Replay decides a bounded call from these
//! ([`super::decide_recorded`]): it does not scan text it does not have.

use super::cut::{Cutter, floor_boundary};
use super::error::{CanonicalError, InputError};
use super::interfaces::Call;
use super::threat::{Detector, Signals};
use hcp_receipts::Digest;
use serde::{Deserialize, Serialize};

/// Bytes of argument text a decision input keeps of one call (4 KiB). A
/// call whose text is larger is recorded with a prefix of at most this
/// many bytes, its SHA-256 and its size.
pub const ARGS_PREFIX_BYTES: usize = 4096;

/// What the decision input of a bounded call records about the whole call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FullArgs {
    /// SHA-256 of the whole call's canonical form (the receipt's
    /// `args_hash`); for a call whose credentials the host withheld (the
    /// call recorded with keyed digests in their place, its text whole or
    /// bounded), of the recorded form: a hash of the clear text would
    /// confirm a guessed secret.
    pub args_hash: Digest,
    /// What the whole call charges to the `bytes` budget ([`Call::bytes`]).
    pub bytes: u64,
    /// The detectors the threat scan of the whole call fired.
    pub signals: Vec<String>,
    /// Size of the whole call's canonical form.
    pub size: u64,
}

impl FullArgs {
    /// The facts of `call`, whose decision found `signals`.
    ///
    /// # Errors
    ///
    /// As [`Call::canonical_bytes`].
    pub fn of(call: &Call<'_>, signals: Signals) -> Result<Self, CanonicalError> {
        let bytes = call.canonical_bytes().map_err(CanonicalError)?;
        Ok(Self {
            args_hash: Digest::of(&bytes),
            bytes: call.bytes(),
            signals: signals.detectors().map(|d| d.name().to_owned()).collect(),
            size: bytes.len() as u64,
        })
    }

    /// The recorded signals.
    ///
    /// # Errors
    ///
    /// A name that is not a detector's.
    pub fn signals(&self) -> Result<Signals, InputError> {
        let mut signals = Signals::NONE;
        for name in &self.signals {
            let d = Detector::ALL
                .into_iter()
                .find(|d| d.name() == name)
                .ok_or_else(|| InputError::UnknownDetector(name.clone()))?;
            signals.add(d);
        }
        Ok(signals)
    }
}

/// A large text a decision input keeps as a large call is kept: its
/// SHA-256 and size, and a prefix of at most [`ARGS_PREFIX_BYTES`] (cut
/// on a character boundary). What a receipt keeps of a refused
/// `task_submit` and of a submission's free-form `context`: neither is
/// read by the decision it records, so replay needs no more of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundedText {
    /// The first bytes of the text, at most [`ARGS_PREFIX_BYTES`].
    pub prefix: String,
    /// SHA-256 of the whole text.
    pub sha256: Digest,
    /// Size of the whole text in bytes.
    pub size: u64,
}

impl BoundedText {
    /// `text` bounded, or `None` when it fits in [`ARGS_PREFIX_BYTES`] as
    /// it is.
    pub fn of(text: &str) -> Option<Self> {
        (text.len() > ARGS_PREFIX_BYTES).then(|| Self {
            prefix: text[..floor_boundary(text, ARGS_PREFIX_BYTES)].to_owned(),
            sha256: Digest::of(text.as_bytes()),
            size: text.len() as u64,
        })
    }
}

impl Call<'_> {
    /// The text of the call, in bytes (a bound of its canonical form's
    /// strings, escapes aside).
    fn text_len(&self) -> usize {
        self.target.len() + self.args.text_len()
    }

    /// The call as a decision input records it when its text is larger than
    /// [`ARGS_PREFIX_BYTES`]: every string cut so that the text kept is at
    /// most that many bytes in total (short identifying strings first, then
    /// the target, then the bulk: messages, fields, payloads, paths, as each
    /// interface's arguments order theirs), log fields past the budget
    /// dropped. `None` when the call fits as it is.
    pub fn bounded(&self) -> Option<Call<'static>> {
        if self.text_len() <= ARGS_PREFIX_BYTES {
            return None;
        }
        let mut c = Cutter::new(ARGS_PREFIX_BYTES);
        let mut args = self.args.cut(&mut c);
        let target = c.cut(&self.target);
        // The bulk, with what is left of the budget.
        self.args.cut_bulk(&mut args, &mut c);
        Some(Call {
            args,
            op: self.op,
            target,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::interfaces::Args;
    use super::super::interfaces::filesystem::{FsAccess, FsArgs};
    use super::super::interfaces::log::FIELD_BYTES;
    use super::*;
    use hcp_contracts::interfaces::Op;

    #[test]
    fn small_calls_are_kept_whole() {
        assert_eq!(Call::log("info", "hello", &[]).bounded(), None);
        let exact = "x".repeat(ARGS_PREFIX_BYTES - 4);
        assert_eq!(Call::log("info", &exact, &[]).bounded(), None);
    }

    #[test]
    fn large_text_keeps_its_hash_size_and_a_prefix_on_a_character_boundary() {
        assert_eq!(BoundedText::of(&"a".repeat(ARGS_PREFIX_BYTES)), None);
        let text = format!("a{}", "é".repeat(ARGS_PREFIX_BYTES));
        let b = BoundedText::of(&text).expect("bounded");
        assert_eq!(b.size, text.len() as u64);
        assert_eq!(b.sha256, Digest::of(text.as_bytes()));
        assert_eq!(b.prefix.len(), ARGS_PREFIX_BYTES - 1);
        assert!(text.starts_with(&b.prefix));
    }

    #[test]
    fn large_calls_keep_a_bounded_prefix() {
        let message = "é".repeat(3 << 20);
        let fields: Vec<(String, String)> = (0..10_000)
            .map(|i| (format!("k{i}"), "v".repeat(100)))
            .collect();
        let call = Call::log("info", &message, &fields);
        let bounded = call.bounded().expect("bounded");
        let bytes = bounded.canonical_bytes().expect("bytes");
        assert!(bytes.len() < ARGS_PREFIX_BYTES + 256, "{}", bytes.len());
        let Args::Log(a) = &bounded.args else {
            panic!("{bounded:?}")
        };
        assert_eq!(a.level, "info");
        assert!(message.starts_with(&*a.message));
        assert!(a.fields.is_empty());
        let full = FullArgs::of(&call, Signals::NONE).expect("full");
        assert_eq!(full.bytes, call.bytes());
        assert_eq!(
            full.args_hash,
            Digest::of(&call.canonical_bytes().expect("bytes"))
        );
        // A long path: cut, and what the call charges is recorded.
        let path = format!("/out/{}", "a".repeat(10_000));
        let fs = Call::fs(
            Op::FsOpen,
            path.clone(),
            FsAccess::Write,
            Some(path.clone()),
        );
        assert_eq!(fs.bytes(), 2 * path.len() as u64);
        let b = fs.bounded().expect("bounded");
        assert_eq!(b.target.len(), ARGS_PREFIX_BYTES);
        assert!(matches!(&b.args, Args::Fs(FsArgs { to: Some(t), .. }) if t.is_empty()));
    }

    /// Empty fields are not free: a call of six million of them, with no
    /// text at all, was recorded whole (every field kept, tens of MB per
    /// receipt).
    #[test]
    fn a_call_of_empty_fields_is_bounded_too() {
        let fields = vec![(String::new(), String::new()); 100_000];
        let call = Call::log("info", "", &fields);
        let bounded = call.bounded().expect("bounded");
        let Args::Log(a) = &bounded.args else {
            panic!("{bounded:?}")
        };
        assert!(
            a.fields.len() <= ARGS_PREFIX_BYTES / FIELD_BYTES,
            "{}",
            a.fields.len()
        );
        let bytes = bounded.canonical_bytes().expect("bytes");
        assert!(bytes.len() < 4 * ARGS_PREFIX_BYTES, "{}", bytes.len());
    }
}
