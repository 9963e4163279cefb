//! Receipt blocks: how a batch's receipts are stored (`receipt_blocks`).
//!
//! One row holds up to [`MAX_RECORDS`] consecutive receipts of the log:
//! `first_seq`, `count`, `hashes` (each receipt's hash, 32 bytes, in
//! order: what the chain, the Merkle proofs and the store's mark read,
//! without the rest) and `data`, the receipts and their decision inputs in
//! a compact form. Nothing in `data` is rendered JSON: a receipt is its
//! fields, with what repeats from one receipt to the next (the host, the
//! capability, the session, the call's name, the policy's hash, ...) held
//! once per block in a table of strings and one of digests, the previous
//! receipt's hash not written again as `prev_hash`, and a host call's
//! decision input as its parts (the call's canonical bytes, the counters,
//! the scope's digest) rather than its JSON. Readers decode a receipt to
//! the same [`Receipt`] that was appended, whose canonical form
//! ([`Receipt::canonical_bytes`]) is then the bytes its hash covers, byte
//! for byte; a host call's input is rendered again by the function that
//! rendered it to be hashed ([`hcp_policy::pep::input::call_input`]).
//!
//! A receipt of about 1.1 KB as a row of its own (canonical JSON and
//! input JSON) is about 200 bytes here: that is what the write-ahead log,
//! its checksums, the database file and every fsync carry per receipt
//! (docs/benchmarks.md, "Receipt blocks").
//!
//! # `data`
//!
//! ```text
//! data    = FORMAT strings digests record*
//! strings = n:varint (len:varint utf8)*      -- indices from 0
//! digests = n:varint [32]*                   -- indices from 0
//! record  = flags:varint risk:u8 lamport:zigzag(delta) args_hash:[32] input_hash:[32]
//!           call:str capability:str host_id:str
//!           [key_id:str signature:[64]]          -- flag SIGNED
//!           parents:n:varint (0 [32] | 1)*       -- 1: the same as prev_hash
//!           policy_hash:dig
//!           [prev_hash:[32]]                     -- flag PREV_WRITTEN (else the previous record's hash)
//!           reason_code:str
//!           [receipt_id:str]                     -- flag ID_WRITTEN (else "<host_id>:<seq>")
//!           [session_id:str] [task_id:str]       -- flags SESSION, TASK
//!           (timestamp:str | ms:zigzag(delta))   -- flag STAMP_WRITTEN (else rfc3339_unix_ms(ms))
//!           [version:varint]                     -- flag VERSION_WRITTEN (else 1)
//!           input
//! input   = 0 len:varint bytes                   -- as written
//!         | 1 at_ms:zigzag(delta) len:varint call counters scope:dig
//!         | 2 len:varint before len:varint after -- before, the task's payload, after
//! counters = artifact_bytes artifacts bytes checkpoints host_calls:varint revoked:u8
//! ```
//!
//! Deltas are from the previous record of the block (the first from 0);
//! `str` and `dig` are indices into the tables. Input kind 2 is an
//! admission's decision input whose `submit` is the task's payload as
//! `tasks` keeps it ([`crate::submission`]): the reader puts the payload
//! back from the receipt's task, and the whole must hash to the receipt's
//! `input_hash`. A block that does not
//! decode (a damaged store) is an error, never a panic, and nothing read
//! from it is trusted for its size.

use anyhow::{Context as _, Result, bail};
use hcp_contracts::RiskLevel;
use hcp_contracts::timestamp::rfc3339_unix_ms;
use hcp_policy::pep::Counters;
use hcp_receipts::receipt::{MAX_PARENTS, RECEIPT_VERSION};
use hcp_receipts::{Digest, Head, KeyId, Receipt, Signature, Verdict};
use std::collections::HashMap;

/// Most receipts in one block: a reader of one receipt decodes at most
/// this many.
pub(crate) const MAX_RECORDS: usize = 1024;

/// A block is closed once its receipts take this many bytes: a gate's
/// receipt records the task's whole submission (up to 1 MiB), so that a
/// batch of many of them makes several blocks of about 1 MiB each, none
/// near SQLite's limit on a value (about 1 GB), and a reader of one
/// receipt decodes at most about 2 MiB.
pub(crate) const MAX_BLOCK_BYTES: usize = 1 << 20;

/// The first byte of `data`: this layout.
const FORMAT: u8 = 1;

const DENY: u64 = 1;
const SESSION: u64 = 1 << 1;
const TASK: u64 = 1 << 2;
const SIGNED: u64 = 1 << 3;
const PREV: u64 = 1 << 4;
const PREV_WRITTEN: u64 = 1 << 5;
const ID_WRITTEN: u64 = 1 << 6;
const STAMP_WRITTEN: u64 = 1 << 7;
const VERSION_WRITTEN: u64 = 1 << 8;
const KNOWN_FLAGS: u64 = (1 << 9) - 1;

const INPUT_RAW: u8 = 0;
const INPUT_HOST_CALL: u8 = 1;
const INPUT_SUBMISSION: u8 = 2;

const PARENT_WRITTEN: u8 = 0;
const PARENT_IS_PREV: u8 = 1;

/// A receipt's decision input as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// Its canonical bytes.
    Raw(Vec<u8>),
    /// A host call's input, from its parts: what
    /// [`hcp_policy::pep::input::call_input`] renders.
    HostCall {
        at_ms: u64,
        call: Vec<u8>,
        counters: Counters,
        scope: Digest,
    },
    /// An admission's canonical input whose bytes `at..at + len` are its
    /// task's payload as `tasks` keeps it ([`crate::submission`]): stored
    /// as the bytes around them. Read back as [`Input::Raw`].
    Spliced {
        bytes: Vec<u8>,
        at: usize,
        len: usize,
    },
}

impl Input {
    /// The canonical bytes (what the receipt's `input_hash` covers).
    pub(crate) fn bytes(&self) -> Vec<u8> {
        match self {
            Input::Raw(bytes) | Input::Spliced { bytes, .. } => bytes.clone(),
            Input::HostCall {
                at_ms,
                call,
                counters,
                scope,
            } => hcp_policy::pep::input::call_input(*at_ms, call, counters, scope),
        }
    }

    /// The canonical bytes, without a copy of a raw input.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        match self {
            Input::Raw(bytes) | Input::Spliced { bytes, .. } => bytes,
            other => other.bytes(),
        }
    }
}

/// What a host call's receipt needs of the call: its `args_hash`, its
/// decision input (as stored) and the input's hash.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) args_hash: Digest,
    pub(crate) input: Input,
    pub(crate) input_hash: Digest,
    /// The receipt's start, hashed ahead ([`Head`]; checked against the
    /// whole form in debug builds).
    pub(crate) head: Head,
}

thread_local! {
    /// A deciding thread's buffer for the decision inputs it hashes.
    static RENDERED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`Prepared`] for a decided call: whole, its input is stored as its
/// parts; bounded (a large call), its input as written, and its
/// `args_hash` the whole call's. A whole call's canonical form is written
/// into `buffer` (emptied first: a spent message's, used again). The
/// receipt's start is hashed ahead for the writer of `host_id`'s log,
/// which signs as `signing` says ([`Head`]).
///
/// # Errors
///
/// The call has no canonical form.
pub(crate) fn prepare(
    d: &hcp_sandbox::pep::DecidedCall<'_>,
    buffer: Vec<u8>,
    host_id: &str,
    signing: &hcp_receipts::SigningPolicy,
    withhold: &hcp_store::withhold::Withhold,
) -> Result<Prepared, String> {
    let (args_hash, input, input_hash) = match withhold.call(&d.call) {
        Some(withheld) => withheld_input(d, &withheld)?,
        None => hashed(d, buffer)?,
    };
    let head = RENDERED.with_borrow_mut(|rendered| {
        Head::new(
            &args_hash,
            d.call.op.name(),
            &d.scope.facts().capability,
            host_id,
            &input_hash,
            signing.must_sign(d.verdict, d.risk),
            rendered,
        )
    });
    Ok(Prepared {
        args_hash,
        input,
        input_hash,
        head,
    })
}

/// [`hashed`] for a call whose arguments hold a credential: recorded as
/// `withheld` (its flagged strings replaced by their keyed digests, see
/// `hcp_store::withhold`) with the facts of the whole call a bounded call
/// records (the bytes it charges and the threat signals its decision
/// found), so that replay decides from those and not from text it does not
/// have. Its `args_hash` is the SHA-256 of the withheld form: a hash of the
/// clear text would confirm a guessed secret.
fn withheld_input(
    d: &hcp_sandbox::pep::DecidedCall<'_>,
    withheld: &hcp_policy::pep::Call<'_>,
) -> Result<(Digest, Input, Digest), String> {
    let scope = d.scope.facts_hash();
    let bytes = withheld.canonical_bytes()?;
    let args_hash = Digest::of(&bytes);
    let full = match &d.full {
        Some(full) => hcp_policy::pep::FullArgs {
            args_hash,
            ..full.clone()
        },
        None => {
            // The decision is pure: the same call, counters and time give
            // the signals the governor's decision found.
            let signals = hcp_policy::pep::decide(&d.scope, &d.counters, &d.call, d.at_ms).signals;
            hcp_policy::pep::FullArgs {
                args_hash,
                bytes: d.call.bytes(),
                signals: signals.detectors().map(|s| s.name().to_owned()).collect(),
                size: d.call.canonical_bytes()?.len() as u64,
            }
        }
    };
    let input =
        hcp_policy::pep::input::bounded_call_input(d.at_ms, &bytes, &d.counters, &full, &scope);
    let input_hash = Digest::of(&input);
    Ok((args_hash, Input::Raw(input), input_hash))
}

/// A decided call's `args_hash`, its decision input as stored, and the
/// input's hash ([`prepare`]).
fn hashed(
    d: &hcp_sandbox::pep::DecidedCall<'_>,
    buffer: Vec<u8>,
) -> Result<(Digest, Input, Digest), String> {
    let scope = d.scope.facts_hash();
    match &d.full {
        None => {
            let mut call = buffer;
            call.clear();
            d.call.write_canonical(&mut call)?;
            let args_hash = Digest::of(&call);
            // Rendered to be hashed, and not kept: the writer keeps the
            // parts it is made of, and renders it again for an export.
            let input_hash = RENDERED.with_borrow_mut(|rendered| {
                rendered.clear();
                hcp_policy::pep::input::call_input_into(
                    rendered,
                    d.at_ms,
                    &call,
                    &d.counters,
                    &scope,
                );
                Digest::of(rendered)
            });
            let input = Input::HostCall {
                at_ms: d.at_ms,
                call,
                counters: d.counters,
                scope,
            };
            Ok((args_hash, input, input_hash))
        }
        Some(full) => {
            let (args_hash, input) = hcp_policy::pep::input::receipt_input(
                d.at_ms,
                &d.call,
                Some(full),
                &d.counters,
                &scope,
            )?;
            let input_hash = Digest::of(&input);
            Ok((args_hash, Input::Raw(input), input_hash))
        }
    }
}

impl Prepared {
    /// The buffer of a whole call's canonical form, taken to be used
    /// again (empty for any other input).
    pub(crate) fn take_buffer(&mut self) -> Vec<u8> {
        match &mut self.input {
            Input::HostCall { call, .. } => std::mem::take(call),
            Input::Raw(_) | Input::Spliced { .. } => Vec::new(),
        }
    }
}

/// One receipt as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    /// Its hash, as stored.
    pub(crate) hash: Digest,
    pub(crate) receipt: Receipt,
    pub(crate) input: Input,
}

/// A block ready to be inserted.
#[derive(Debug)]
pub(crate) struct Block {
    pub(crate) first_seq: u64,
    pub(crate) count: u64,
    pub(crate) hashes: Vec<u8>,
    pub(crate) data: Vec<u8>,
}

/// The string fields of a record, each with the index it used last: most
/// receipts of a block name the same host, capability, session, ... as the
/// one before.
#[derive(Debug, Clone, Copy)]
enum Field {
    Call,
    Capability,
    Host,
    Key,
    Reason,
    Id,
    Session,
    Task,
    Stamp,
}

const FIELDS: usize = 9;

/// Gathers consecutive receipts into a [`Block`].
#[derive(Debug, Default)]
pub(crate) struct BlockWriter {
    first_seq: u64,
    count: u64,
    hashes: Vec<u8>,
    records: Vec<u8>,
    strings: HashMap<Box<str>, u32, Quick>,
    /// Where each string's bytes are in `string_bytes`, by index.
    string_at: Vec<(usize, usize)>,
    string_bytes: Vec<u8>,
    /// The index each field used last.
    recent: [Option<u32>; FIELDS],
    digests: HashMap<[u8; 32], u32, Quick>,
    digest_bytes: Vec<u8>,
    /// The previous record's hash, lamport and milliseconds.
    last_hash: Option<Digest>,
    last_lamport: u64,
    last_ms: u64,
    /// The last timestamp rendered from milliseconds.
    stamp: Option<(u64, String)>,
}

impl BlockWriter {
    /// An empty writer.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Receipts gathered so far.
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }

    /// Whether it holds [`MAX_RECORDS`] receipts, or [`MAX_BLOCK_BYTES`]
    /// of them.
    pub(crate) fn is_full(&self) -> bool {
        self.len() >= MAX_RECORDS
            || self.records.len() + self.string_bytes.len() + self.digest_bytes.len()
                >= MAX_BLOCK_BYTES
    }

    /// Adds the next receipt of the log. `at_ms`: the milliseconds its
    /// timestamp was rendered from, when known (it is checked, not
    /// trusted).
    ///
    /// # Errors
    ///
    /// The receipt does not follow the block's last one (`seq`), or the
    /// block is full.
    pub(crate) fn push(
        &mut self,
        hash: Digest,
        r: &Receipt,
        input: &Input,
        at_ms: Option<u64>,
    ) -> Result<()> {
        if self.count == 0 {
            self.first_seq = r.seq;
        } else if Some(r.seq) != self.first_seq.checked_add(self.count) {
            bail!(
                "receipt block: receipt {} does not follow {}",
                r.seq,
                self.first_seq + self.count - 1
            );
        }
        if self.is_full() {
            bail!("receipt block: full");
        }
        let mut flags = 0;
        if r.verdict == Verdict::Deny {
            flags |= DENY;
        }
        if r.session_id.is_some() {
            flags |= SESSION;
        }
        if r.task_id.is_some() {
            flags |= TASK;
        }
        let signed = match (&r.key_id, &r.signature) {
            (Some(k), Some(s)) => Some((k, s)),
            (None, None) => None,
            _ => bail!(
                "receipt block: {} has a key id or a signature without the other",
                r.receipt_id
            ),
        };
        if signed.is_some() {
            flags |= SIGNED;
        }
        if let Some(prev) = r.prev_hash {
            flags |= PREV;
            if self.count == 0 || Some(prev) != self.last_hash {
                flags |= PREV_WRITTEN;
            }
        }
        if !hcp_receipts::ids::is_receipt_id(&r.receipt_id, &r.host_id, r.seq) {
            flags |= ID_WRITTEN;
        }
        let ms = at_ms.filter(|ms| self.renders(*ms, &r.timestamp));
        if ms.is_none() {
            flags |= STAMP_WRITTEN;
        }
        if r.version != RECEIPT_VERSION {
            flags |= VERSION_WRITTEN;
        }

        let mut out = std::mem::take(&mut self.records);
        varint(&mut out, flags);
        out.push(risk_byte(r.risk));
        zigzag(&mut out, r.lamport.wrapping_sub(self.last_lamport));
        out.extend_from_slice(&r.args_hash.0);
        out.extend_from_slice(&r.input_hash.0);
        self.string(&mut out, Field::Call, &r.call)?;
        self.string(&mut out, Field::Capability, &r.capability)?;
        self.string(&mut out, Field::Host, &r.host_id)?;
        if let Some((key, signature)) = signed {
            self.string(&mut out, Field::Key, key.as_str())?;
            out.extend_from_slice(&signature.0);
        }
        varint(&mut out, r.parents.len() as u64);
        for p in &r.parents {
            if Some(*p) == r.prev_hash {
                out.push(PARENT_IS_PREV);
            } else {
                out.push(PARENT_WRITTEN);
                out.extend_from_slice(&p.0);
            }
        }
        self.digest(&mut out, &r.policy_hash)?;
        if flags & PREV_WRITTEN != 0
            && let Some(prev) = r.prev_hash
        {
            out.extend_from_slice(&prev.0);
        }
        self.string(&mut out, Field::Reason, &r.reason_code)?;
        if flags & ID_WRITTEN != 0 {
            self.string(&mut out, Field::Id, &r.receipt_id)?;
        }
        if let Some(s) = &r.session_id {
            self.string(&mut out, Field::Session, s)?;
        }
        if let Some(t) = &r.task_id {
            self.string(&mut out, Field::Task, t)?;
        }
        match ms {
            Some(ms) => {
                zigzag(&mut out, ms.wrapping_sub(self.last_ms));
                self.last_ms = ms;
            }
            None => self.string(&mut out, Field::Stamp, &r.timestamp)?,
        }
        if flags & VERSION_WRITTEN != 0 {
            varint(&mut out, u64::from(r.version));
        }
        match input {
            Input::Raw(bytes) => {
                out.push(INPUT_RAW);
                varint(&mut out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
            Input::HostCall {
                at_ms,
                call,
                counters,
                scope,
            } => {
                out.push(INPUT_HOST_CALL);
                zigzag(&mut out, at_ms.wrapping_sub(self.last_ms));
                varint(&mut out, call.len() as u64);
                out.extend_from_slice(call);
                varint(&mut out, counters.artifact_bytes);
                varint(&mut out, counters.artifacts);
                varint(&mut out, counters.bytes);
                varint(&mut out, counters.checkpoints);
                varint(&mut out, counters.host_calls);
                out.push(u8::from(counters.revoked));
                self.digest(&mut out, scope)?;
            }
            Input::Spliced { bytes, at, len } => {
                let (before, rest) = bytes
                    .split_at_checked(*at)
                    .context("receipt block: a spliced input out of range")?;
                let after = rest
                    .get(*len..)
                    .context("receipt block: a spliced input out of range")?;
                if r.task_id.is_none() {
                    bail!("receipt block: a spliced input of a receipt of no task");
                }
                out.push(INPUT_SUBMISSION);
                varint(&mut out, before.len() as u64);
                out.extend_from_slice(before);
                varint(&mut out, after.len() as u64);
                out.extend_from_slice(after);
            }
        }
        self.records = out;
        self.hashes.extend_from_slice(&hash.0);
        self.last_hash = Some(hash);
        self.last_lamport = r.lamport;
        self.count += 1;
        Ok(())
    }

    /// Whether `stamp` is what `ms` renders to.
    fn renders(&mut self, ms: u64, stamp: &str) -> bool {
        match &self.stamp {
            Some((at, text)) if *at == ms => text == stamp,
            _ => {
                let text = rfc3339_unix_ms(ms);
                let same = text == stamp;
                self.stamp = Some((ms, text));
                same
            }
        }
    }

    fn string(&mut self, out: &mut Vec<u8>, field: Field, s: &str) -> Result<()> {
        let recent = self.recent[field as usize].filter(|i| {
            let (at, len) = self.string_at[*i as usize];
            &self.string_bytes[at..at + len] == s.as_bytes()
        });
        let i = match recent {
            Some(i) => i,
            None => {
                let i = match self.strings.get(s) {
                    Some(i) => *i,
                    None => {
                        let i =
                            u32::try_from(self.strings.len()).context("receipt block: strings")?;
                        varint(&mut self.string_bytes, s.len() as u64);
                        self.string_at.push((self.string_bytes.len(), s.len()));
                        self.string_bytes.extend_from_slice(s.as_bytes());
                        self.strings.insert(s.into(), i);
                        i
                    }
                };
                self.recent[field as usize] = Some(i);
                i
            }
        };
        varint(out, u64::from(i));
        Ok(())
    }

    fn digest(&mut self, out: &mut Vec<u8>, d: &Digest) -> Result<()> {
        let i = match self.digests.get(&d.0) {
            Some(i) => *i,
            None => {
                let i = u32::try_from(self.digests.len()).context("receipt block: digests")?;
                self.digest_bytes.extend_from_slice(&d.0);
                self.digests.insert(d.0, i);
                i
            }
        };
        varint(out, u64::from(i));
        Ok(())
    }

    /// The block of the receipts pushed since the last take (none when
    /// empty); the writer is empty again.
    pub(crate) fn take(&mut self) -> Option<Block> {
        if self.count == 0 {
            return None;
        }
        let mut data = Vec::with_capacity(
            1 + 10 + self.string_bytes.len() + 10 + self.digest_bytes.len() + self.records.len(),
        );
        data.push(FORMAT);
        varint(&mut data, self.strings.len() as u64);
        data.extend_from_slice(&self.string_bytes);
        varint(&mut data, self.digests.len() as u64);
        data.extend_from_slice(&self.digest_bytes);
        data.extend_from_slice(&self.records);
        let block = Block {
            first_seq: self.first_seq,
            count: self.count,
            hashes: std::mem::take(&mut self.hashes),
            data,
        };
        let stamp = self.stamp.take();
        *self = Self {
            stamp,
            ..Self::default()
        };
        Some(block)
    }
}

/// A quick hash for the block's tables (FxHash's step): their keys are the
/// host's own strings and digests, looked up once per field a receipt
/// does not share with the one before it; nothing an attacker chooses is
/// hashed here in bulk (a block holds at most [`MAX_RECORDS`] receipts).
#[derive(Debug, Default, Clone, Copy)]
struct Quick;

impl std::hash::BuildHasher for Quick {
    type Hasher = QuickHasher;
    fn build_hasher(&self) -> QuickHasher {
        QuickHasher(0)
    }
}

#[derive(Debug)]
struct QuickHasher(u64);

impl std::hash::Hasher for QuickHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0xf135_7aea_2e62_a9c5;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let word = u64::from_le_bytes(c.try_into().unwrap_or_default());
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
        }
        for b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(K);
        }
    }
}

/// A task's payload as `tasks` keeps it, in canonical form, by task id
/// ([`crate::submission::payload`]): what an input of kind 2 is put back
/// together with.
pub(crate) type Submissions<'a> = dyn FnMut(&str) -> Result<Option<Vec<u8>>> + 'a;

/// The receipts of a stored block, in order, inputs of kind 2 put back
/// together with `submissions`.
///
/// # Errors
///
/// The block does not decode (the store is damaged), or an input of kind
/// 2 does not come back whole (its task's row is gone or not the one it
/// was written with).
pub(crate) fn decode_with(
    first_seq: u64,
    count: u64,
    hashes: &[u8],
    data: &[u8],
    submissions: &mut Submissions<'_>,
) -> Result<Vec<Stored>> {
    decode_inner(first_seq, count, hashes, data, submissions)
        .with_context(|| format!("the receipt block from seq {first_seq} does not read back"))
}

/// [`decode_with`] for a block written without inputs of kind 2.
#[cfg(test)]
pub(crate) fn decode(
    first_seq: u64,
    count: u64,
    hashes: &[u8],
    data: &[u8],
) -> Result<Vec<Stored>> {
    decode_with(first_seq, count, hashes, data, &mut |_| Ok(None))
}

fn decode_inner(
    first_seq: u64,
    count: u64,
    hashes: &[u8],
    data: &[u8],
    submissions: &mut Submissions<'_>,
) -> Result<Vec<Stored>> {
    let n = usize::try_from(count)?;
    if n == 0 || n > MAX_RECORDS {
        bail!("it counts {count} receipts");
    }
    if hashes.len() != n * 32 {
        bail!("{} bytes of hashes for {n} receipts", hashes.len());
    }
    let mut r = Reader { data, at: 0 };
    if r.byte()? != FORMAT {
        bail!("an unknown layout");
    }
    let strings = {
        let k = r.count()?;
        let mut strings = Vec::with_capacity(k);
        for _ in 0..k {
            let len = r.count()?;
            let bytes = r.take(len)?;
            strings.push(std::str::from_utf8(bytes).context("a string that is not UTF-8")?);
        }
        strings
    };
    let digests = {
        let k = r.count()?;
        let mut digests = Vec::with_capacity(k);
        for _ in 0..k {
            digests.push(Digest(r.array()?));
        }
        digests
    };
    let string = |r: &mut Reader<'_>| -> Result<String> {
        let i = r.count()?;
        Ok((*strings.get(i).context("a string index out of range")?).to_owned())
    };
    let digest = |r: &mut Reader<'_>| -> Result<Digest> {
        let i = r.count()?;
        digests
            .get(i)
            .copied()
            .context("a digest index out of range")
    };
    let mut out: Vec<Stored> = Vec::with_capacity(n);
    let (mut lamport, mut ms) = (0u64, 0u64);
    for (i, hash) in hashes.chunks_exact(32).enumerate() {
        let hash = Digest(hash.try_into()?);
        let seq = first_seq
            .checked_add(i as u64)
            .context("seq out of range")?;
        let flags = r.varint()?;
        if flags & !KNOWN_FLAGS != 0 {
            bail!("receipt {seq}: unknown flags {flags:#x}");
        }
        let risk = risk_of(r.byte()?).with_context(|| format!("receipt {seq}: risk"))?;
        lamport = lamport.wrapping_add(r.zigzag()?);
        let args_hash = Digest(r.array()?);
        let input_hash = Digest(r.array()?);
        let call = string(&mut r)?;
        let capability = string(&mut r)?;
        let host_id = string(&mut r)?;
        let (key_id, signature) = if flags & SIGNED != 0 {
            let key: KeyId = string(&mut r)?
                .parse()
                .map_err(|e: String| anyhow::anyhow!("receipt {seq}: {e}"))?;
            (Some(key), Some(Signature(r.array()?)))
        } else {
            (None, None)
        };
        let parents_len = r.count()?;
        if parents_len > MAX_PARENTS {
            bail!("receipt {seq}: {parents_len} parents");
        }
        let mut parent_kinds = Vec::with_capacity(parents_len);
        for _ in 0..parents_len {
            parent_kinds.push(match r.byte()? {
                PARENT_WRITTEN => Some(Digest(r.array()?)),
                PARENT_IS_PREV => None,
                other => bail!("receipt {seq}: a parent of kind {other}"),
            });
        }
        let policy_hash = digest(&mut r)?;
        let prev_hash =
            match (flags & PREV != 0, flags & PREV_WRITTEN != 0) {
                (false, false) => None,
                (true, true) => Some(Digest(r.array()?)),
                (true, false) => Some(out.last().map(|s| s.hash).with_context(|| {
                    format!("receipt {seq}: no previous receipt for prev_hash")
                })?),
                (false, true) => bail!("receipt {seq}: a prev_hash written but absent"),
            };
        let mut parents = Vec::with_capacity(parents_len);
        for kind in parent_kinds {
            parents.push(match kind {
                Some(d) => d,
                None => prev_hash.with_context(|| {
                    format!("receipt {seq}: a parent names a missing prev_hash")
                })?,
            });
        }
        let reason_code = string(&mut r)?;
        let receipt_id = if flags & ID_WRITTEN != 0 {
            string(&mut r)?
        } else {
            format!("{host_id}:{seq}")
        };
        let session_id = (flags & SESSION != 0).then(|| string(&mut r)).transpose()?;
        let task_id = (flags & TASK != 0).then(|| string(&mut r)).transpose()?;
        let timestamp = if flags & STAMP_WRITTEN != 0 {
            string(&mut r)?
        } else {
            ms = ms.wrapping_add(r.zigzag()?);
            rfc3339_unix_ms(ms)
        };
        let version = if flags & VERSION_WRITTEN != 0 {
            u32::try_from(r.varint()?).with_context(|| format!("receipt {seq}: version"))?
        } else {
            RECEIPT_VERSION
        };
        let input = match r.byte()? {
            INPUT_RAW => {
                let len = r.count()?;
                Input::Raw(r.take(len)?.to_vec())
            }
            INPUT_HOST_CALL => {
                let at_ms = ms.wrapping_add(r.zigzag()?);
                let len = r.count()?;
                let call = r.take(len)?.to_vec();
                let counters = Counters {
                    artifact_bytes: r.varint()?,
                    artifacts: r.varint()?,
                    bytes: r.varint()?,
                    checkpoints: r.varint()?,
                    host_calls: r.varint()?,
                    revoked: match r.byte()? {
                        0 => false,
                        1 => true,
                        other => bail!("receipt {seq}: revoked {other}"),
                    },
                };
                let scope = digest(&mut r)?;
                Input::HostCall {
                    at_ms,
                    call,
                    counters,
                    scope,
                }
            }
            INPUT_SUBMISSION => {
                let len = r.count()?;
                let before = r.take(len)?;
                let len = r.count()?;
                let after = r.take(len)?;
                let task = task_id
                    .as_deref()
                    .with_context(|| format!("receipt {seq}: a spliced input of no task"))?;
                let payload = submissions(task)?.with_context(|| {
                    format!("receipt {seq}: its decision input names the submission of task {task}, which the store does not hold")
                })?;
                let mut bytes = Vec::with_capacity(before.len() + payload.len() + after.len());
                bytes.extend_from_slice(before);
                bytes.extend_from_slice(&payload);
                bytes.extend_from_slice(after);
                if Digest::of(&bytes) != input_hash {
                    bail!(
                        "receipt {seq}: its decision input, with the submission of task {task} as stored, is not the one its input_hash names"
                    );
                }
                Input::Raw(bytes)
            }
            other => bail!("receipt {seq}: an input of kind {other}"),
        };
        out.push(Stored {
            hash,
            receipt: Receipt {
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
                verdict: if flags & DENY != 0 {
                    Verdict::Deny
                } else {
                    Verdict::Allow
                },
                version,
            },
            input,
        });
    }
    if r.at != data.len() {
        bail!("{} bytes after its last receipt", data.len() - r.at);
    }
    Ok(out)
}

fn risk_byte(risk: RiskLevel) -> u8 {
    match risk {
        RiskLevel::R1 => 1,
        RiskLevel::R2 => 2,
        RiskLevel::R3 => 3,
        RiskLevel::R4 => 4,
        RiskLevel::R5 => 5,
    }
}

fn risk_of(b: u8) -> Result<RiskLevel> {
    Ok(match b {
        1 => RiskLevel::R1,
        2 => RiskLevel::R2,
        3 => RiskLevel::R3,
        4 => RiskLevel::R4,
        5 => RiskLevel::R5,
        other => bail!("an unknown risk level {other}"),
    })
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A difference (wrapping) as a varint: small either way.
fn zigzag(out: &mut Vec<u8>, delta: u64) {
    let d = delta as i64;
    varint(out, ((d << 1) ^ (d >> 63)) as u64);
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.data.len())
            .context("it ends early")?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into()?)
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                bail!("a varint over 64 bits");
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        bail!("a varint over 64 bits")
    }

    fn zigzag(&mut self) -> Result<u64> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64 ^ -((v & 1) as i64)) as u64)
    }

    /// A length, a count or an index: at most the data's length (every
    /// item counted takes at least a byte of it), so that nothing is
    /// allocated for a count the block cannot hold.
    fn count(&mut self) -> Result<usize> {
        let v = self.varint()?;
        usize::try_from(v)
            .ok()
            .filter(|v| *v <= self.data.len())
            .with_context(|| format!("a count of {v} in a block of {} bytes", self.data.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn digest(n: u8) -> Digest {
        Digest::of(&[n])
    }

    fn receipt(seq: u64, prev: Option<Digest>) -> Receipt {
        Receipt {
            args_hash: digest(1),
            call: "log.write".into(),
            capability: "probe@0.1.0".into(),
            host_id: "host-a".into(),
            input_hash: digest(2),
            key_id: None,
            lamport: 10 + seq,
            parents: prev.into_iter().collect(),
            policy_hash: digest(3),
            prev_hash: prev,
            reason_code: "ALLOW".into(),
            receipt_id: format!("host-a:{seq}"),
            risk: RiskLevel::R1,
            seq,
            session_id: Some("s-1".into()),
            signature: None,
            task_id: Some("t-1".into()),
            timestamp: rfc3339_unix_ms(1_764_612_345_678 + seq),
            verdict: Verdict::Allow,
            version: RECEIPT_VERSION,
        }
    }

    fn host_call(at_ms: u64) -> Input {
        Input::HostCall {
            at_ms,
            call: br#"{"args":{"fields":[],"level":"debug","message":"x"},"op":"log.write","target":"log"}"#.to_vec(),
            counters: Counters {
                host_calls: 7,
                bytes: 12,
                ..Counters::default()
            },
            scope: digest(9),
        }
    }

    fn round_trip(items: &[(Digest, Receipt, Input, Option<u64>)]) -> Vec<Stored> {
        let mut w = BlockWriter::new();
        for (h, r, i, ms) in items {
            w.push(*h, r, i, *ms).expect("push");
        }
        let b = w.take().expect("a block");
        assert!(w.take().is_none(), "the writer is empty after a take");
        decode(b.first_seq, b.count, &b.hashes, &b.data).expect("decode")
    }

    #[test]
    fn a_block_reads_back_the_receipts_and_inputs_it_was_given() {
        let mut items = Vec::new();
        let mut prev = Some(digest(40));
        for seq in 5..9 {
            let r = receipt(seq, prev);
            let h = r.hash().expect("hash");
            items.push((
                h,
                r,
                host_call(1_764_612_345_678 + seq),
                Some(1_764_612_345_678 + seq),
            ));
            prev = Some(h);
        }
        let back = round_trip(&items);
        assert_eq!(back.len(), 4);
        for ((h, r, i, _), s) in items.iter().zip(&back) {
            assert_eq!(&s.receipt, r);
            assert_eq!(&s.input, i);
            assert_eq!(s.hash, *h);
            assert_eq!(s.receipt.canonical_bytes(), r.canonical_bytes());
        }
    }

    #[test]
    fn a_host_calls_receipt_takes_a_fifth_of_its_json() {
        let mut w = BlockWriter::new();
        let mut json = 0;
        let mut prev = Some(digest(40));
        for seq in 0..100 {
            let r = receipt(seq, prev);
            let h = r.hash().expect("hash");
            let input = host_call(1_764_612_345_678 + seq);
            json += r.canonical_bytes().expect("bytes").len() + input.bytes().len() + 32;
            w.push(h, &r, &input, Some(1_764_612_345_678 + seq))
                .expect("push");
            prev = Some(h);
        }
        let b = w.take().expect("block");
        let stored = b.data.len() + b.hashes.len();
        assert!(
            stored * 5 < json,
            "{stored} bytes stored for {json} bytes of JSON"
        );
    }

    #[test]
    fn large_receipts_fill_a_block_by_their_bytes() {
        // A gate's receipt records a whole submission, up to 1 MiB.
        let big = Input::Raw(vec![b'x'; 300 * 1024]);
        let mut w = BlockWriter::new();
        let mut pushed = 0;
        while !w.is_full() {
            w.push(digest(0), &receipt(pushed, None), &big, None)
                .expect("push");
            pushed += 1;
        }
        assert_eq!(pushed, 4, "a block closes past 1 MiB of receipts");
        let b = w.take().expect("block");
        assert!(b.data.len() < 2 * MAX_BLOCK_BYTES, "{}", b.data.len());
        assert_eq!(
            decode(b.first_seq, b.count, &b.hashes, &b.data)
                .expect("decode")
                .len(),
            4
        );
        // One receipt larger than a block is a block of its own.
        let huge = Input::Raw(vec![b'x'; 3 * MAX_BLOCK_BYTES / 2]);
        w.push(digest(0), &receipt(9, None), &huge, None)
            .expect("push");
        assert!(w.is_full());
        assert_eq!(w.take().expect("block").count, 1);
    }

    #[test]
    fn a_receipt_that_does_not_follow_is_refused() {
        let mut w = BlockWriter::new();
        let r = receipt(3, None);
        w.push(digest(0), &r, &Input::Raw(b"{}".to_vec()), None)
            .expect("push");
        let e = w
            .push(
                digest(0),
                &receipt(5, None),
                &Input::Raw(b"{}".to_vec()),
                None,
            )
            .expect_err("a gap");
        assert!(e.to_string().contains("does not follow"), "{e}");
    }

    #[test]
    fn a_damaged_block_is_an_error_not_a_panic() {
        let mut w = BlockWriter::new();
        let mut prev = None;
        for seq in 0..3 {
            let r = receipt(seq, prev);
            let h = r.hash().expect("hash");
            w.push(h, &r, &host_call(5), Some(1_764_612_345_678 + seq))
                .expect("push");
            prev = Some(h);
        }
        let b = w.take().expect("block");
        assert!(decode(b.first_seq, b.count, &b.hashes, &b.data).is_ok());
        // Every cut and every single byte changed: an error or a block that
        // decodes, never a panic.
        for cut in 0..b.data.len() {
            assert!(decode(b.first_seq, b.count, &b.hashes, &b.data[..cut]).is_err());
        }
        for at in 0..b.data.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut data = b.data.clone();
                data[at] ^= flip;
                let _ = decode(b.first_seq, b.count, &b.hashes, &data);
            }
        }
        assert!(decode(b.first_seq, b.count + 1, &b.hashes, &b.data).is_err());
        assert!(decode(b.first_seq, 0, &[], &b.data).is_err());
        assert!(decode(b.first_seq, 5000, &vec![0; 5000 * 32], &b.data).is_err());
        let mut trailing = b.data.clone();
        trailing.push(0);
        assert!(decode(b.first_seq, b.count, &b.hashes, &trailing).is_err());
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9.@:-]{1,24}",
            any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
            Just("\u{2028}\u{0007}é😀".to_owned()),
        ]
    }

    fn dig() -> impl Strategy<Value = Digest> {
        any::<[u8; 32]>().prop_map(Digest)
    }

    prop_compose! {
        fn arb_receipt()(
            call in text(), capability in text(), host_id in "[a-z0-9-]{1,16}",
            args_hash in dig(), input_hash in dig(), policy_hash in dig(),
            signed in any::<Option<([u8; 64], u8)>>(),
            lamport in any::<u64>(),
            parents in proptest::collection::vec(prop_oneof![dig().prop_map(Some), Just(None)], 0..4),
            prev in proptest::option::of(dig()),
            reason_code in text(), odd_id in proptest::option::of(text()),
            risk in 1u8..=5, session_id in proptest::option::of(text()),
            task_id in proptest::option::of(text()),
            stamp in prop_oneof![
                (0u64..4_000_000_000_000).prop_map(|ms| (Some(ms), rfc3339_unix_ms(ms))),
                text().prop_map(|t| (None, t)),
                (0u64..4_000_000_000_000).prop_map(|ms| (Some(ms), rfc3339_unix_ms(ms + 1))),
            ],
            deny in any::<bool>(), version in prop_oneof![Just(1u32), any::<u32>()],
        ) -> (Receipt, Option<u64>) {
            let parents = parents.into_iter().map(|p| p.or(prev).unwrap_or(policy_hash)).collect();
            (Receipt {
                args_hash, call, capability,
                host_id: host_id.clone(),
                input_hash,
                key_id: signed.map(|(_, k)| format!("{k:016x}").parse().expect("key id")),
                lamport, parents, policy_hash, prev_hash: prev, reason_code,
                receipt_id: odd_id.unwrap_or_default(),
                risk: risk_of(risk).expect("risk"),
                seq: 0, session_id,
                signature: signed.map(|(s, _)| Signature(s)),
                task_id,
                timestamp: stamp.1,
                verdict: if deny { Verdict::Deny } else { Verdict::Allow },
                version,
            }, stamp.0)
        }
    }

    fn arb_input() -> impl Strategy<Value = Input> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Input::Raw),
            (
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 0..200),
                any::<[u64; 5]>(),
                any::<bool>(),
                dig()
            )
                .prop_map(|(at_ms, call, c, revoked, scope)| Input::HostCall {
                    at_ms,
                    call,
                    counters: Counters {
                        artifact_bytes: c[0],
                        artifacts: c[1],
                        bytes: c[2],
                        checkpoints: c[3],
                        host_calls: c[4],
                        revoked,
                    },
                    scope,
                }),
        ]
    }

    proptest! {
        #[test]
        fn any_run_of_receipts_reads_back_byte_for_byte(
            first in 0u64..(1 << 53),
            items in proptest::collection::vec((arb_receipt(), arb_input(), dig(), any::<bool>()), 1..40),
        ) {
            let mut w = BlockWriter::new();
            let mut expected = Vec::new();
            let mut last: Option<Digest> = None;
            for (i, ((mut r, ms), input, hash, chained)) in items.into_iter().enumerate() {
                r.seq = first + i as u64;
                if r.receipt_id.is_empty() {
                    r.receipt_id = format!("{}:{}", r.host_id, r.seq);
                }
                if chained && last.is_some() {
                    r.prev_hash = last;
                }
                w.push(hash, &r, &input, ms).expect("push");
                last = Some(hash);
                expected.push((hash, r, input));
            }
            let b = w.take().expect("block");
            let back = decode(b.first_seq, b.count, &b.hashes, &b.data).expect("decode");
            prop_assert_eq!(back.len(), expected.len());
            for (s, (hash, r, input)) in back.iter().zip(&expected) {
                prop_assert_eq!(&s.receipt, r);
                prop_assert_eq!(&s.input, input);
                prop_assert_eq!(s.hash, *hash);
                prop_assert_eq!(s.receipt.canonical_bytes(), r.canonical_bytes());
                prop_assert_eq!(s.input.bytes(), input.bytes());
            }
        }
    }
}
