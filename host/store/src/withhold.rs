//! What the host withholds from what rests on disk and travels in evidence
//! packs: text the credential detector flags
//! ([`hcp_contracts::credential`], the one detector of the HID path) in a
//! task's messages and in host-call arguments, and the values of granted
//! environment variables in a task's outputs.
//!
//! A withheld text is replaced by its keyed digest,
//! `[withheld: hmac-sha256:<64 hex>]`: the HMAC-SHA256 of the text under
//! the host's digest key (`keys/hid-digest.key`, the key of the HID session
//! log's `payload_hmac_sha256`). Whoever holds the key can confirm a guessed
//! text; whoever holds only a pack or the database cannot.
//!
//! Where each rule applies:
//!
//! - **receipts** (their arguments' hash and decision inputs, hence
//!   `inputs/*.jsonl` of packs): an admission's `task_submit` payload
//!   ([`Withhold::payload`]; values a risk rule of the policy reads are kept,
//!   since replay decides again from them), a host call's arguments
//!   ([`Withhold::call`]; recorded like a bounded call, with the bytes and
//!   threat signals of the whole call, so that replay decides from those);
//! - **evidence packs**: a task's messages (`messages/<task>/*.json`) are
//!   exported with flagged strings withheld ([`Withhold::json`]);
//! - **the database**: a task's `task_submit` and its final answer are
//!   sealed with the data key (`crate::seal`) when they hold a flagged
//!   string or the task is T3/T4 (`tasks.rs`);
//! - **the caller's answer**: the value of an environment variable the
//!   capability was granted is the operator's secret, not the caller's: it
//!   is withheld from the outputs before anything is answered or stored
//!   ([`Withhold::granted_env`]). Other flagged outputs are the caller's
//!   own answer: the caller gets them, the database keeps them sealed, packs
//!   withheld.
//!
//! # Ambient authority
//!
//! Reads (creating on first use) `keys/hid-digest.key` under the data
//! directory; [`Withhold::granted_env`] reads the host's environment.

use hcp_contracts::credential;
use hcp_policy::pep::Call;
use hmac::{Hmac, Mac as _};
use serde_json::Value;
use sha2::Sha256;
use std::path::Path;

/// Values of granted environment variables shorter than this are not
/// looked for in outputs (`1`, `on`, `C` would withhold half of any text),
/// nor flagged inputs in the messages that quote them.
pub const MIN_ENV_VALUE_CHARS: usize = 6;

/// The key of the session log's keyed digest of a withheld credential
/// text (`payload_hmac_sha256`): `data_dir/keys/hid-digest.key`, 32 random
/// bytes created with mode 0600 on first use. Whoever holds it can confirm
/// a guessed text against the log; whoever holds only the log cannot. The
/// log's chain does not depend on it.
///
/// # Errors
///
/// The key cannot be read or created, is malformed, or is readable by
/// others.
pub fn digest_key(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    Ok(crate::keyfile::load_or_create(data_dir, "hid-digest.key")?.to_vec())
}

/// The keyed digests of withheld text.
pub struct Withhold {
    key: Vec<u8>,
}

impl std::fmt::Debug for Withhold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Withhold(..)")
    }
}

impl Withhold {
    /// The host's digest key, `data_dir/keys/hid-digest.key`.
    ///
    /// # Errors
    ///
    /// As [`digest_key`].
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            key: digest_key(data_dir)?,
        })
    }

    /// `[withheld: hmac-sha256:<hex>]` of `text`.
    pub fn digest(&self, text: &str) -> String {
        // HMAC takes a key of any length: `new_from_slice` cannot fail.
        match <Hmac<Sha256>>::new_from_slice(&self.key) {
            Ok(mut mac) => {
                mac.update(text.as_bytes());
                format!(
                    "[withheld: hmac-sha256:{}]",
                    hex::encode(mac.finalize().into_bytes())
                )
            }
            Err(_) => "[withheld]".to_owned(),
        }
    }

    /// `value` with every flagged string withheld, or `None` when none is.
    pub fn json(&self, value: &Value) -> Option<Value> {
        credential::redact_json(value, &|_| false, &mut |s| self.digest(s))
    }

    /// A `task_submit` payload as an admission receipt records it: flagged
    /// strings of `inputs`, `intent` and `context` withheld, except inputs
    /// at a JSON pointer in `read` (or under one): the inputs the policy's
    /// risk rules read, which replay compares again. The rest of the
    /// payload (capability, version, caller, constraints, expected output)
    /// is what the gate decides on, and is kept. `None` when nothing is
    /// withheld.
    pub fn payload(&self, payload: &Value, read: &[String]) -> Option<Value> {
        let keep = |pointer: &str| match pointer.strip_prefix("/inputs") {
            Some(p) => read.iter().any(|r| {
                p == r
                    || p.strip_prefix(r.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }),
            None => !(pointer.starts_with("/intent") || pointer.starts_with("/context")),
        };
        credential::redact_json(payload, &keep, &mut |s| self.digest(s))
    }

    /// `text` with every flagged string of `value` in it withheld (a
    /// refusal's message that quotes an input); strings shorter than
    /// [`MIN_ENV_VALUE_CHARS`] are left (replacing `x` everywhere would
    /// withhold the message, not the secret).
    pub fn quoted(&self, value: &Value, text: &str) -> String {
        let mut flagged = Vec::new();
        credential::redact_json(value, &|_| false, &mut |s| {
            if s.chars().count() >= MIN_ENV_VALUE_CHARS {
                flagged.push(s.to_owned());
            }
            String::new()
        });
        let mut text = Value::String(text.to_owned());
        self.values(&flagged, &mut text);
        match text {
            Value::String(s) => s,
            _ => String::new(),
        }
    }

    /// A host call as its receipt records it, when it holds a flagged
    /// string: every flagged string of its arguments withheld, but what the
    /// decision reads of them (the target, names, types, levels, methods,
    /// addresses) kept. An `hid.propose` payload (JSON text) is withheld
    /// whole when any of its strings is flagged, as the HID session log
    /// withholds the text. `None` when nothing is flagged.
    pub fn call(&self, call: &Call<'_>) -> Option<Call<'static>> {
        if !call_flagged(call) {
            return None;
        }
        let mut value = serde_json::to_value(call).ok()?;
        let args = value.get_mut("args")?;
        let mut withheld = false;
        // A field of JSON text (an `hid.propose` payload) is withheld whole
        // when any of its strings is flagged.
        if let Some((field, text)) = call.args.json_text() {
            let inner = serde_json::from_str::<Value>(text).ok();
            if credential::flagged(None, text) || inner.is_some_and(|v| self.json(&v).is_some()) {
                args[field] = Value::String(self.digest(text));
                withheld = true;
            }
        }
        // What `hcp_policy::pep` reads of the arguments to decide: each
        // interface's arguments name theirs.
        let keep = |p: &str| call.args.kept(p);
        if let Some(redacted) = credential::redact_json(args, &keep, &mut |s| self.digest(s)) {
            *args = redacted;
            withheld = true;
        }
        if !withheld {
            return None;
        }
        Call::from_value(&value).ok()
    }

    /// Withholds, in every string of `outputs`, the host's value of each
    /// environment variable in `names` (those the capability was granted)
    /// that has at least [`MIN_ENV_VALUE_CHARS`] characters. Returns
    /// whether any was found.
    pub fn granted_env(&self, names: &[String], outputs: &mut Value) -> bool {
        let values: Vec<String> = names
            .iter()
            .filter_map(|n| std::env::var(n).ok())
            .filter(|v| v.chars().count() >= MIN_ENV_VALUE_CHARS)
            .collect();
        self.values(&values, outputs)
    }

    /// Withholds every occurrence of each of `values` in the strings of
    /// `value` (keys included); whether any was found.
    pub fn values(&self, values: &[String], value: &mut Value) -> bool {
        if values.is_empty() {
            return false;
        }
        let replace = |s: &str| -> Option<String> {
            let mut out: Option<String> = None;
            for v in values {
                let current = out.as_deref().unwrap_or(s);
                if current.contains(v.as_str()) {
                    out = Some(current.replace(v.as_str(), &self.digest(v)));
                }
            }
            out
        };
        fn walk(v: &mut Value, replace: &dyn Fn(&str) -> Option<String>, depth: usize) -> bool {
            if depth > 256 {
                return false;
            }
            match v {
                Value::String(s) => match replace(s) {
                    Some(r) => {
                        *s = r;
                        true
                    }
                    None => false,
                },
                Value::Array(items) => items
                    .iter_mut()
                    .fold(false, |found, i| walk(i, replace, depth + 1) | found),
                Value::Object(map) => {
                    let keyed = map.keys().any(|k| replace(k).is_some());
                    if keyed {
                        let old = std::mem::take(map);
                        for (k, mut item) in old {
                            walk(&mut item, replace, depth + 1);
                            map.insert(replace(&k).unwrap_or(k), item);
                        }
                        return true;
                    }
                    map.values_mut()
                        .fold(false, |found, i| walk(i, replace, depth + 1) | found)
                }
                _ => false,
            }
        }
        walk(value, &replace, 0)
    }
}

/// Whether any free text of `call`'s arguments may be withheld: checked
/// on the call as it is, without rendering it (every host call passes
/// here). Errs on the side of looking closer ([`Withhold::call`] decides);
/// each interface's arguments say which of their text is free.
fn call_flagged(call: &Call<'_>) -> bool {
    call.args.flagged()
}

/// Whether `value` holds a string the credential detector flags.
pub fn holds_credential(value: &Value) -> bool {
    credential::json_flagged(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_policy::pep::Args;
    use serde_json::json;

    fn withhold() -> (tempfile::TempDir, Withhold) {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = Withhold::load_or_create(dir.path()).expect("key");
        (dir, w)
    }

    #[test]
    fn a_digest_is_keyed_and_stable() {
        let (dir, w) = withhold();
        let d = w.digest("hunter2");
        assert!(d.starts_with("[withheld: hmac-sha256:"), "{d}");
        assert!(!d.contains("hunter2"));
        assert_eq!(d, w.digest("hunter2"));
        assert_eq!(
            d,
            Withhold::load_or_create(dir.path())
                .expect("key")
                .digest("hunter2")
        );
        let (_other, w2) = withhold();
        assert_ne!(d, w2.digest("hunter2"), "another host's key");
    }

    #[test]
    fn a_payload_keeps_what_a_risk_rule_reads() {
        let (_dir, w) = withhold();
        let payload = json!({
            "intent": "log in with password=hunter2",
            "inputs": {"password": "hunter2", "mode": "secret=s3", "n": 1},
        });
        let out = w.payload(&payload, &["/mode".into()]).expect("withheld");
        let text = out.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(out["inputs"]["mode"], "secret=s3");
        assert_eq!(out["inputs"]["n"], 1);
        assert!(w.payload(&json!({"inputs": {"n": 1}}), &[]).is_none());
        // A refusal that quotes an input quotes its digest instead.
        let said = w.quoted(&payload, "\"hunter2\" is not of type \"integer\"");
        assert!(
            !said.contains("hunter2") && said.contains("[withheld: "),
            "{said}"
        );
    }

    /// What a receipt keeps of a call of every kind of arguments with a
    /// credential in each of its strings, held against a golden file
    /// (`tests/fixtures/withhold_calls.golden`; `BLESS=1` rewrites it),
    /// digests aside: each interface's arguments say which text is free
    /// and which the decision reads, and moving that into their modules
    /// must not change what is withheld.
    #[test]
    fn every_kind_of_arguments_is_withheld_as_before() {
        use hcp_policy::pep::{FsAccess, InstrumentArgs, Op};
        let (_dir, w) = withhold();
        let secret = "password=hunter2";
        let fields = vec![
            ("user".to_owned(), "token: abc123".to_owned()),
            ("password".to_owned(), "hunter2".to_owned()),
            (secret.to_owned(), "plain".to_owned()),
        ];
        let payload = format!(r#"{{"text":"{secret}"}}"#);
        let arguments = format!(r#"{{"note":"{secret}","target":700}}"#);
        let to = format!("/data/out/{secret}");
        let calls = vec![
            Call::log(secret, secret, &fields),
            Call::log("info", "plain", &fields[..1]),
            Call::artifact(secret, secret, 1),
            Call::checkpoint_save(secret, 1),
            Call::checkpoint_load(secret),
            Call::instrument_command(
                secret,
                InstrumentArgs {
                    action: secret.into(),
                    arguments: arguments.as_str().into(),
                    breach: Some(secret.into()),
                    plan: None,
                    plan_error: Some(secret.into()),
                },
            ),
            Call::fs(Op::FsRename, to.clone(), FsAccess::Write, Some(to.clone())),
            Call::fs_write(to.clone(), 1),
            Call::connect("127.0.0.1:1".into(), Some(secret)),
            Call::lookup(secret, vec![secret.into()]),
            Call::http(format!("{secret}:443"), secret, secret, secret)
                .resolved(vec![secret.into()]),
            Call::hid_propose(secret, &payload, secret, secret),
            Call::hid_propose("TYPE_TEXT", r#"{"text":"ls"}"#, "p-1", secret),
            Call::bare(Op::HidWait, secret),
            Call::config(secret, vec![secret.into()], vec![secret.into()]),
            Call::kv(Op::KvSet, secret, secret, 1, 1, 1),
        ];
        let digest = regex_lite_digest;
        let mut out = String::new();
        for call in &calls {
            let kept = match w.call(call) {
                None => "kept whole".to_owned(),
                Some(c) => String::from_utf8(c.canonical_bytes().expect("bytes")).expect("utf-8"),
            };
            out.push_str(&format!("{}: {}\n", call.op, digest(&kept)));
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/withhold_calls.golden");
        if std::env::var_os("BLESS").is_some() {
            std::fs::create_dir_all(path.parent().expect("dir")).expect("dir");
            std::fs::write(&path, &out).expect("bless");
            return;
        }
        let golden = std::fs::read_to_string(&path).expect("golden (BLESS=1 writes it)");
        assert_eq!(golden, out);
    }

    /// `text` with every digest's 64 hex digits replaced by `…`.
    fn regex_lite_digest(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(i) = rest.find("hmac-sha256:") {
            let (head, tail) = rest.split_at(i + "hmac-sha256:".len());
            out.push_str(head);
            out.push('…');
            rest = tail.get(64..).unwrap_or("");
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn a_call_keeps_what_its_decision_reads() {
        let (_dir, w) = withhold();
        let payload = r#"{"text":"password=hunter2"}"#;
        let call = Call::hid_propose("TYPE_TEXT", payload, "p-1", "log in");
        let out = w.call(&call).expect("withheld");
        let Args::Hid(a) = &out.args else {
            panic!("{out:?}")
        };
        assert_eq!((&*a.action_type, &*a.proposal), ("TYPE_TEXT", "p-1"));
        assert!(a.payload.starts_with("[withheld: hmac-sha256:"));
        // The text alone is flagged by the detector inside the payload.
        let plain = Call::hid_propose("TYPE_TEXT", r#"{"text":"ls -la"}"#, "p-2", "list");
        assert!(w.call(&plain).is_none());
        let fields = vec![("user".to_owned(), "token: abc123".to_owned())];
        let log = Call::log("info", "logging in", &fields);
        let out = w.call(&log).expect("withheld");
        let text = String::from_utf8(out.canonical_bytes().expect("bytes")).expect("utf-8");
        assert!(
            !text.contains("abc123") && text.contains("\"info\""),
            "{text}"
        );
    }

    #[test]
    fn granted_values_are_withheld_wherever_they_appear() {
        let (_dir, w) = withhold();
        let mut outputs = json!({"echo": "key is s3cr3t-value!", "s3cr3t-value": [1], "n": 2});
        assert!(w.values(&["s3cr3t-value".into()], &mut outputs));
        assert!(!outputs.to_string().contains("s3cr3t-value"), "{outputs}");
        assert_eq!(outputs["n"], 2);
        let mut plain = json!({"echo": "nothing"});
        assert!(!w.values(&["s3cr3t-value".into()], &mut plain));
    }
}
