//! Encryption at rest of T3 and T4 artifacts (HCP L3: "Encryption in transit
//! and at rest"): ChaCha20-Poly1305 with a per-host data key.
//!
//! A sealed blob is `HCPSEAL1` ‖ a random 96-bit nonce ‖ the ciphertext and
//! its tag. The associated data is the artifact's `sha256:` checksum of the
//! plaintext, so a sealed blob cannot be swapped for another artifact's.
//!
//! # Ambient authority
//!
//! Reads and creates `keys/data.key` under the data directory (mode 0600).

use anyhow::{Context as _, Result};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use std::path::Path;

const MAGIC: &[u8; 8] = b"HCPSEAL1";

/// Whether `bytes` are a sealed blob (they start with the magic).
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The host's data key.
pub struct DataKey(ChaCha20Poly1305);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(..)")
    }
}

impl DataKey {
    /// Loads `keys/data.key`, creating it (32 random bytes, mode 0600) on
    /// first use.
    ///
    /// # Errors
    ///
    /// The key cannot be read or created, or is malformed or too open.
    pub fn load_or_create(data_dir: &Path) -> Result<Self> {
        let key = crate::keyfile::load_or_create(data_dir, "data.key")?;
        Ok(Self(ChaCha20Poly1305::new(Key::from_slice(&key))))
    }

    /// Seals `plaintext`, bound to `checksum`.
    ///
    /// # Errors
    ///
    /// The random source or the cipher failed.
    pub fn seal(&self, plaintext: &[u8], checksum: &str) -> Result<Vec<u8>> {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).map_err(|e| anyhow::anyhow!("random source: {e}"))?;
        let ciphertext = self
            .0
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: checksum.as_bytes(),
                },
            )
            .map_err(|_| anyhow::anyhow!("encryption failed"))?;
        let mut out = Vec::with_capacity(MAGIC.len() + nonce.len() + ciphertext.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        Ok(out)
    }

    /// Opens a sealed blob bound to `checksum`.
    ///
    /// # Errors
    ///
    /// Not a sealed blob, or it was altered or sealed for another checksum.
    pub fn open(&self, sealed: &[u8], checksum: &str) -> Result<Vec<u8>> {
        let body = sealed
            .strip_prefix(MAGIC.as_slice())
            .filter(|b| b.len() >= 12 + 16)
            .context("not a sealed artifact")?;
        let (nonce, ciphertext) = body.split_at(12);
        self.0
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: checksum.as_bytes(),
                },
            )
            .map_err(|_| {
                anyhow::anyhow!("sealed artifact does not open: altered, or not this artifact's")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_and_refuse_tampering() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = DataKey::load_or_create(dir.path()).expect("key");
        let sealed = key.seal(b"secret spectrum", "sha256:aa").expect("seal");
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(
            key.open(&sealed, "sha256:aa").expect("open"),
            b"secret spectrum"
        );
        assert!(key.open(&sealed, "sha256:bb").is_err());
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(key.open(&flipped, "sha256:aa").is_err());
        // The same key next time.
        let again = DataKey::load_or_create(dir.path()).expect("key");
        assert_eq!(
            again.open(&sealed, "sha256:aa").expect("open"),
            b"secret spectrum"
        );
    }
}
