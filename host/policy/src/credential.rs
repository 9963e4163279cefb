//! Callers' credentials: high-entropy bearer tokens, stored only as
//! `sha256:<hex>` and compared in constant time.
//!
//! # Creating a credential
//!
//! An operator makes a random token and gives it to the caller, then writes
//! only its hash into `callers.json`:
//!
//! ```sh
//! TOKEN=$(openssl rand -base64 32)          # give this to the caller, once
//! printf %s "$TOKEN" | sha256sum            # store "sha256:<that hex>"
//! ```
//!
//! or calls [`hash_credential`], which also refuses tokens shorter than
//! [`MIN_TOKEN_LEN`] characters. A stolen `callers.json` does not reveal a
//! token: SHA-256 of a 256-bit random token cannot be inverted or guessed.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::fmt;
use subtle::ConstantTimeEq as _;

/// Shortest token [`hash_credential`] accepts (32 characters of base64 are
/// 192 bits of randomness).
pub const MIN_TOKEN_LEN: usize = 32;

/// The SHA-256 of a caller's bearer token, written `sha256:<64 lowercase hex>`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CredentialHash([u8; 32]);

/// Why a credential or a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The stored hash is not `sha256:<64 lowercase hex>`.
    #[error("{0:?} is not a credential hash: write sha256:<64 lowercase hex digits>")]
    Malformed(String),
    /// The token is too short to be a secret.
    #[error(
        "a token of {len} characters is too short: use at least {MIN_TOKEN_LEN} random characters (e.g. openssl rand -base64 32)"
    )]
    TooShort {
        /// Its length.
        len: usize,
    },
}

impl CredentialHash {
    /// Whether `presented` is the token this hash was made from. The
    /// comparison takes the same time wherever the digests differ.
    pub fn verify(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.0).into()
    }

    /// A hash no token has in practice, used to spend the same time on an
    /// unknown caller as on a known one.
    pub(crate) const DUMMY: CredentialHash = CredentialHash([0; 32]);
}

/// The hash to write into `callers.json` for `token`.
///
/// # Errors
///
/// [`CredentialError::TooShort`] for a token shorter than [`MIN_TOKEN_LEN`].
pub fn hash_credential(token: &str) -> Result<CredentialHash, CredentialError> {
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return Err(CredentialError::TooShort { len });
    }
    Ok(CredentialHash(Sha256::digest(token.as_bytes()).into()))
}

impl TryFrom<String> for CredentialHash {
    type Error = CredentialError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        let parsed = value
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .and_then(|h| {
                let mut out = [0u8; 32];
                hex::decode_to_slice(h, &mut out).ok().map(|()| out)
            });
        parsed
            .map(CredentialHash)
            .ok_or(CredentialError::Malformed(value))
    }
}

impl From<CredentialHash> for String {
    fn from(hash: CredentialHash) -> String {
        hash.to_string()
    }
}

impl fmt::Display for CredentialHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for CredentialHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not a secret, but no reason to spread it through logs either.
        write!(f, "CredentialHash(sha256:{}…)", hex::encode(&self.0[..4]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "hcp-test-token-local-01-0123456789abcdef";

    #[test]
    fn hash_verifies_only_its_token() {
        let hash = hash_credential(TOKEN).expect("long enough");
        assert!(hash.verify(TOKEN));
        assert!(!hash.verify("hcp-test-token-local-01-0123456789abcdeF"));
        assert!(!hash.verify(""));
        assert!(!CredentialHash::DUMMY.verify(""));
    }

    #[test]
    fn hash_is_plain_sha256_of_the_token() {
        // printf %s abc | sha256sum
        let hash = CredentialHash(Sha256::digest(b"abc").into());
        assert_eq!(
            hash.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let parsed = CredentialHash::try_from(hash.to_string()).expect("round trip");
        assert_eq!(parsed, hash);
        assert!(parsed.verify("abc"));
    }

    #[test]
    fn short_tokens_and_malformed_hashes_are_refused() {
        assert_eq!(
            hash_credential("password").expect_err("short").to_string(),
            "a token of 8 characters is too short: use at least 32 random characters \
             (e.g. openssl rand -base64 32)"
        );
        for bad in [
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "sha256:ba78",
            "md5:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ] {
            assert!(CredentialHash::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }
}
