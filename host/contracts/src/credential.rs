//! Does a text look like a secret? The one credential detector of the
//! host: behind an HID proposal's `credential_warning`, and behind what the
//! host withholds from its receipts, its evidence packs and its database
//! (task inputs, host-call arguments, task outputs; see [`flagged`] and
//! [`redact_json`]).
//!
//! A warning, not a refusal: the operator sees it, must acknowledge it to
//! approve, and the session log keeps only the text's length and a keyed
//! digest. The heuristics, each tested both ways (`tests` below):
//!
//! 1. **A secret assigned to a name**: one of [`SECRET_NAMES`] (any case,
//!    ignoring `_`, `-` and `.`, e.g. `PASSWORD`, `api_key`, `client-secret`)
//!    followed by optional spaces, `=` or `:`, optional spaces or quotes, and
//!    a value (`password=hunter2`, `"token": "abc"`). The name alone
//!    ("the password policy") is not a secret.
//! 2. **An authorization header value**: `Bearer` or `Basic` followed by a
//!    token of at least 16 characters.
//! 3. **AWS-style access key ids**: `AKIA`, `ASIA`, `AGPA`, `AIDA`, `AROA`,
//!    `ANPA`, `ANVA` or `AIPA` followed by 16 upper-case letters or digits.
//! 4. **Well-known token prefixes**: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
//!    `github_pat_`, `glpat-`, `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`,
//!    `sk_live_`, `rk_live_`, `sk-` (at least 20 characters in all), and JWTs
//!    (`eyJ…`, three dot-separated base64url parts).
//! 5. **PEM armour**: `-----BEGIN ` (private keys, certificates, any PEM
//!    block).
//! 6. **Long high-entropy strings**: a whitespace-delimited word of at least
//!    20 characters, all from the base64/base64url/hex alphabets, mixing
//!    letters and digits, with a Shannon entropy of at least 3.5 bits per
//!    character (hex words of 32 or more characters: 3.0). English words,
//!    paths and URLs (which carry `.` or `:`) and UUIDs (entropy about 3.3)
//!    do not match.

/// Names whose value is a secret (compared in lower case, without `_`, `-`,
/// `.`).
pub const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "secret",
    "clientsecret",
    "token",
    "accesstoken",
    "refreshtoken",
    "authtoken",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "awssecretaccesskey",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "pin",
];

const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxr-",
    "xoxs-",
    "sk_live_",
    "rk_live_",
    "sk-",
];

const AWS_PREFIXES: &[&str] = &[
    "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
];

/// Why a text looks like a secret, for the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `name=value` with a secret's name.
    NamedSecret,
    /// `Bearer …` / `Basic …`.
    AuthorizationHeader,
    /// An AWS access key id.
    AwsKeyId,
    /// A well-known token prefix or a JWT.
    KnownToken,
    /// PEM armour.
    PemBlock,
    /// A long high-entropy word.
    HighEntropy,
}

/// Whether a JSON member named `key` holding `value` is to be withheld:
/// `value` looks like a secret ([`looks_like_secret`]), or `key` is a
/// secret's name (`{"password": "hunter2"}`: the value alone says nothing)
/// and `value` is not empty.
pub fn flagged(key: Option<&str>, value: &str) -> bool {
    (!value.is_empty() && key.is_some_and(is_secret_name)) || looks_like_secret(value).is_some()
}

/// Whether `name` names a secret (`password`, `DB_PASSWORD`,
/// `aws.secret-access-key`, `githubToken`), by the rule of heuristic 1.
pub fn is_secret_name(name: &str) -> bool {
    name.len() <= 128 && secret_name(&name.to_ascii_lowercase())
}

/// `value` with every string [`flagged`] replaced by what `withhold`
/// makes of it, and whether any was; `None` when nothing is flagged (no
/// copy is made). A string's key is the name of the member holding it (the
/// nearest one, for a string in an array). Strings at a JSON pointer
/// `keep` accepts are kept as they are (what a decision read), and so are
/// object keys.
pub fn redact_json(
    value: &serde_json::Value,
    keep: &dyn Fn(&str) -> bool,
    withhold: &mut dyn FnMut(&str) -> String,
) -> Option<serde_json::Value> {
    if !any_flagged(value, None, 0) {
        return None;
    }
    let mut out = value.clone();
    let mut pointer = String::new();
    redact_in(&mut out, None, &mut pointer, keep, withhold, 0);
    Some(out)
}

/// Whether any string of `value` is [`flagged`] (as [`redact_json`] finds
/// them), without a copy.
pub fn json_flagged(value: &serde_json::Value) -> bool {
    any_flagged(value, None, 0)
}

/// How deep [`redact_json`] looks (serde_json reads no deeper than 128).
const MAX_DEPTH: usize = 256;

fn any_flagged(value: &serde_json::Value, key: Option<&str>, depth: usize) -> bool {
    use serde_json::Value;
    if depth > MAX_DEPTH {
        return false;
    }
    match value {
        Value::String(s) => flagged(key, s),
        Value::Array(items) => items.iter().any(|v| any_flagged(v, key, depth + 1)),
        Value::Object(map) => map.iter().any(|(k, v)| any_flagged(v, Some(k), depth + 1)),
        _ => false,
    }
}

fn redact_in(
    value: &mut serde_json::Value,
    key: Option<&str>,
    pointer: &mut String,
    keep: &dyn Fn(&str) -> bool,
    withhold: &mut dyn FnMut(&str) -> String,
    depth: usize,
) {
    use serde_json::Value;
    if depth > MAX_DEPTH {
        return;
    }
    let len = pointer.len();
    match value {
        Value::String(s) if flagged(key, s) && !keep(pointer) => *s = withhold(s),
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                pointer.push('/');
                pointer.push_str(&i.to_string());
                redact_in(item, key, pointer, keep, withhold, depth + 1);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                pointer.push('/');
                pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                redact_in(item, Some(k), pointer, keep, withhold, depth + 1);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// The first heuristic `text` matches, if any.
pub fn looks_like_secret(text: &str) -> Option<Signal> {
    if text.contains("-----BEGIN ") {
        return Some(Signal::PemBlock);
    }
    if named_secret(text) {
        return Some(Signal::NamedSecret);
    }
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | ',' | ';'))
        .filter(|w| !w.is_empty())
        .collect();
    for pair in words.windows(2) {
        if let [scheme, token] = pair
            && (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("basic"))
            && token.len() >= 16
        {
            return Some(Signal::AuthorizationHeader);
        }
    }
    for word in &words {
        if aws_key_id(word) {
            return Some(Signal::AwsKeyId);
        }
        if known_token(word) {
            return Some(Signal::KnownToken);
        }
        if high_entropy(word) {
            return Some(Signal::HighEntropy);
        }
    }
    None
}

/// `name [=:] value` with a secret's name right before the separator.
fn named_secret(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c != '=' && c != ':' {
            continue;
        }
        // The value: after optional spaces and quotes, at least one
        // character that is not a separator.
        let value = chars[i + 1..]
            .iter()
            .skip_while(|c| matches!(c, ' ' | '\t' | '"' | '\''))
            .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | ';'))
            .count();
        if value == 0 {
            continue;
        }
        // The name: the word before the separator (spaces and a closing
        // quote allowed in between), without `_`, `-`, `.`.
        let mut j = i;
        while j > 0 && matches!(chars[j - 1], ' ' | '\t' | '"' | '\'') {
            j -= 1;
        }
        let end = j;
        while j > 0
            && (chars[j - 1].is_ascii_alphanumeric() || matches!(chars[j - 1], '_' | '-' | '.'))
        {
            j -= 1;
        }
        let name: String = chars[j..end]
            .iter()
            .collect::<String>()
            .to_ascii_lowercase();
        if secret_name(&name) {
            return true;
        }
    }
    false
}

/// `name` (lower case) is a secret's name: its last segments (split on
/// `_`, `-`, `.`) joined spell one of [`SECRET_NAMES`] (`db_password`,
/// `aws.secret-access-key`), or it ends with one of six letters or more
/// (`dbpassword`, `githubtoken`; not `compass`).
fn secret_name(name: &str) -> bool {
    let segments: Vec<&str> = name.split(['_', '-', '.']).collect();
    (1..=segments.len()).any(|k| {
        let joined = segments[segments.len() - k..].concat();
        SECRET_NAMES.contains(&joined.as_str())
    }) || {
        let joined = segments.concat();
        SECRET_NAMES
            .iter()
            .any(|s| s.len() >= 6 && joined.ends_with(s))
    }
}

fn aws_key_id(word: &str) -> bool {
    // Anywhere in the word: `AWS_ACCESS_KEY_ID=AKIA…` splits into one word.
    let bytes = word.as_bytes();
    AWS_PREFIXES.iter().any(|p| {
        word.match_indices(p).any(|(at, _)| {
            let rest = &bytes[at + 4..];
            rest.len() >= 16
                && rest[..16]
                    .iter()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        })
    })
}

fn known_token(word: &str) -> bool {
    if word.len() >= 20 && TOKEN_PREFIXES.iter().any(|p| word.starts_with(p)) {
        return true;
    }
    // A JWT: eyJ<header>.eyJ<claims>.<signature>.
    let parts: Vec<&str> = word.split('.').collect();
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts[1].starts_with("eyJ")
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
        })
}

fn high_entropy(word: &str) -> bool {
    if word.len() < 20
        || !word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
    {
        return false;
    }
    let has_digit = word.bytes().any(|b| b.is_ascii_digit());
    let has_letter = word.bytes().any(|b| b.is_ascii_alphabetic());
    if !has_digit || !has_letter {
        return false;
    }
    let hex = word.bytes().all(|b| b.is_ascii_hexdigit());
    let threshold = if hex && word.len() >= 32 { 3.0 } else { 3.5 };
    entropy(word) >= threshold
}

/// Shannon entropy of `word`'s bytes, in bits per byte.
fn entropy(word: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in word.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = f64::from(u32::try_from(word.len()).unwrap_or(u32::MAX));
    counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = f64::from(n) / len;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_flagged() {
        for (text, signal) in [
            ("password=hunter2", Signal::NamedSecret),
            ("PASSWORD: s3cr3t!", Signal::NamedSecret),
            ("export DB_PASSWORD='correct horse'", Signal::NamedSecret),
            (r#"{"api_key": "abc123"}"#, Signal::NamedSecret),
            ("client-secret = x", Signal::NamedSecret),
            ("mysql -u root --password=toor", Signal::NamedSecret),
            (
                "Authorization: Bearer abcdef0123456789abcdef",
                Signal::NamedSecret,
            ),
            (
                "curl -H Bearer abcdef0123456789abcdef",
                Signal::AuthorizationHeader,
            ),
            ("AKIAIOSFODNN7EXAMPLE", Signal::AwsKeyId),
            ("id AKIAIOSFODNN7EXAMPLE here", Signal::AwsKeyId),
            (
                "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
                Signal::KnownToken,
            ),
            ("xoxb-2637-8472946-AbCdEfGh", Signal::KnownToken),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                Signal::KnownToken,
            ),
            ("-----BEGIN RSA PRIVATE KEY-----", Signal::PemBlock),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", Signal::PemBlock),
            ("Zx8Qp2LmN4vR7tY1wK9sB3dF6hJ0gC5e", Signal::HighEntropy),
            (
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                Signal::HighEntropy,
            ),
            (
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                Signal::HighEntropy,
            ),
        ] {
            assert_eq!(looks_like_secret(text), Some(signal), "{text:?}");
        }
    }

    #[test]
    fn flagged_members_are_withheld_and_kept_pointers_are_not() {
        let inputs = serde_json::json!({
            "note": "connect with password=hunter2",
            "password": "hunter2",
            "user": "lab",
            "list": ["plain", "token: abc123"],
            "nested": {"db_password": "x", "kept": "secret=y"},
        });
        let mut seen = Vec::new();
        let out = redact_json(&inputs, &|p| p == "/nested/kept", &mut |s| {
            seen.push(s.to_owned());
            "W".to_owned()
        })
        .expect("flagged");
        assert_eq!(
            out,
            serde_json::json!({
                "note": "W", "password": "W", "user": "lab",
                "list": ["plain", "W"],
                "nested": {"db_password": "W", "kept": "secret=y"},
            })
        );
        assert_eq!(seen.len(), 4, "{seen:?}");
        let plain = serde_json::json!({"user": "lab", "n": 3, "password": ""});
        assert_eq!(redact_json(&plain, &|_| false, &mut |_| "W".into()), None);
    }

    #[test]
    fn ordinary_text_is_not_flagged() {
        for text in [
            "hello world",
            "ls -la /home/lab",
            "The password policy requires 12 characters",
            "Enter your password:",
            "token count: ",
            "internationalization",
            "https://example.com/docs/getting-started/index.html",
            "550e8400-e29b-41d4-a716-446655440000",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
            "sk-short",
            "Bearer token",
            "compass=north",
            "cd /var/lib/postgresql/data && ls",
            "SELECT * FROM users WHERE id = 42;",
        ] {
            assert_eq!(looks_like_secret(text), None, "{text:?}");
        }
    }
}
