//! Ed25519 keys of hosts (and publishers): generation, key files, key ids,
//! signing, and strict verification with a precise reason for each refusal.
//!
//! # File formats
//!
//! - **Private key**: PKCS#8 PEM (RFC 8410 `OneAsymmetricKey` with the public
//!   key included, `-----BEGIN PRIVATE KEY-----`), the form `openssl genpkey
//!   -algorithm ed25519` writes and reads. The file is created with mode 0600
//!   and never overwritten; [`HostKey::load`] refuses a file that group or
//!   others can read.
//! - **Public key** (text, fits a command line): `ed25519:<64 hex digits>` of
//!   the 32-byte key; a `.pub` file holds that line.
//! - **Key id**: the first 16 hex digits of SHA-256 over the 32 public key
//!   bytes.
//!
//! # Ambient authority
//!
//! [`HostKey::save`], [`HostKey::load`] and [`PublicKey::load`] open the path
//! they are given; nothing else here touches the file system.

use crate::hash::Digest;
use curve25519_dalek::edwards::CompressedEdwardsY;
use curve25519_dalek::scalar::Scalar;
use ed25519_dalek::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Prefix of a public key's text form.
pub const PUBLIC_KEY_PREFIX: &str = "ed25519:";

/// Largest key file read (a PEM Ed25519 key is about 170 bytes).
const MAX_KEY_FILE: u64 = 64 * 1024;

/// Errors of key generation and key files.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The operating system's random source failed.
    #[error("generating a key: the system random source failed: {0}")]
    Random(String),
    /// Reading or writing a key file failed.
    #[error("key file {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A private key file group or others may read.
    #[error(
        "private key file {path} has mode {mode:04o}: group or others may read it; \
         run `chmod 600 {path}`"
    )]
    TooOpen {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A key file that does not hold a key of the expected form.
    #[error("key file {path}: {reason}")]
    Malformed {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A key id: the first 16 hex digits of SHA-256 over the public key bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(String);

impl KeyId {
    /// The key id of a 32-byte public key.
    pub fn of(public_key: &[u8; 32]) -> Self {
        Self(Digest::of(public_key).to_hex()[..16].to_owned())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id written `text`, which the caller has checked is 16 lowercase
    /// hex digits (as [`KeyId::from_str`] does).
    pub(crate) fn from_checked(text: &str) -> Self {
        Self(text.to_owned())
    }
}

impl FromStr for KeyId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() == 16
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!("{s:?} is not a key id (16 lowercase hex digits)"))
        }
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({})", self.0)
    }
}

/// An Ed25519 signature (64 bytes: R then S). JSON form: 128 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature(pub [u8; 64]);

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({})", hex::encode(self.0))
    }
}

impl FromStr for Signature {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 64];
        if s.len() != 128 || s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(format!(
                "{s:?} is not a signature (128 lowercase hex digits)"
            ));
        }
        hex::decode_to_slice(s, &mut out)
            .map_err(|e| format!("{s:?} is not a signature (128 lowercase hex digits): {e}"))?;
        Ok(Self(out))
    }
}

/// Serde as a string through `Display`/`FromStr`.
macro_rules! serde_as_text {
    ($ty:ty, $show:expr, $what:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let show: fn(&$ty) -> String = $show;
                serializer.serialize_str(&show(self))
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(Visitor)
            }
        }
    };
}

serde_as_text!(Signature, |s| hex::encode(s.0), "128 hex digits");
serde_as_text!(KeyId, |k| k.0.clone(), "a key id");
serde_as_text!(PublicKey, |k| k.to_string(), "\"ed25519:<64 hex digits>\"");

/// An Ed25519 public key with its key id.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
    id: KeyId,
}

impl PublicKey {
    /// The public key of 32 raw bytes.
    ///
    /// # Errors
    ///
    /// Bytes that are not the encoding of a curve point.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, String> {
        let key = VerifyingKey::from_bytes(bytes)
            .map_err(|_| format!("{} is not an Ed25519 public key", hex::encode(bytes)))?;
        Ok(Self {
            key,
            id: KeyId::of(bytes),
        })
    }

    /// This key under another key id: what a SHA-256 prefix collision
    /// would give, for tests of what must refuse it.
    #[cfg(test)]
    pub(crate) fn with_id(&self, id: &KeyId) -> Self {
        Self {
            key: self.key,
            id: id.clone(),
        }
    }

    /// The 32 raw bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The key id.
    pub fn key_id(&self) -> &KeyId {
        &self.id
    }

    /// Reads a public key file (one line, `ed25519:<hex>`).
    ///
    /// # Errors
    ///
    /// The file cannot be read or does not hold a public key.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let text = read_small(path)?;
        text.trim().parse().map_err(|reason| KeyError::Malformed {
            path: path.to_owned(),
            reason,
        })
    }

    /// Verifies `signature` over `message` with ed25519-dalek's
    /// `verify_strict`: S must be reduced modulo L, neither the key nor R may
    /// have small order, and R must be the canonical encoding of the
    /// recomputed point. A refused signature is then classified so that the
    /// refusal says which of these failed.
    ///
    /// # Errors
    ///
    /// The reason the signature is refused.
    pub fn verify_strict(
        &self,
        message: &[u8],
        signature: &Signature,
    ) -> Result<(), SignatureFailure> {
        let sig = ed25519_dalek::Signature::from_bytes(&signature.0);
        if self.key.verify_strict(message, &sig).is_ok() {
            return Ok(());
        }
        // Refused: say why, most specific reason first.
        let mut r = [0u8; 32];
        let mut s = [0u8; 32];
        r.copy_from_slice(&signature.0[..32]);
        s.copy_from_slice(&signature.0[32..]);
        if Option::<Scalar>::from(Scalar::from_canonical_bytes(s)).is_none() {
            return Err(SignatureFailure::NonCanonicalS);
        }
        if self.key.is_weak() {
            return Err(SignatureFailure::SmallOrderKey(self.id.clone()));
        }
        match CompressedEdwardsY(r).decompress() {
            None => Err(SignatureFailure::InvalidR),
            Some(point) if point.is_small_order() => Err(SignatureFailure::SmallOrderR),
            Some(_) => Err(SignatureFailure::Mismatch(self.id.clone())),
        }
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_KEY_PREFIX}{}", hex::encode(self.key.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({} {})", self.id, self)
    }
}

impl FromStr for PublicKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s.strip_prefix(PUBLIC_KEY_PREFIX).ok_or_else(|| {
            format!("{s:?} is not a public key (\"{PUBLIC_KEY_PREFIX}<64 hex digits>\")")
        })?;
        let mut bytes = [0u8; 32];
        if hex.len() != 64 || hex.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(format!(
                "{s:?} is not a public key (\"{PUBLIC_KEY_PREFIX}<64 hex digits>\")"
            ));
        }
        hex::decode_to_slice(hex, &mut bytes)
            .map_err(|e| format!("{s:?} is not a public key: {e}"))?;
        Self::from_bytes(&bytes)
    }
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureFailure {
    /// S ≥ L: a malleated copy of some signature (S + L verifies under lax checks).
    #[error("S is not reduced modulo L (non-canonical, malleable signature)")]
    NonCanonicalS,
    /// The public key has small order: it "verifies" signatures on any message.
    #[error("public key {0} has small order (a weak key verifies anything)")]
    SmallOrderKey(KeyId),
    /// R does not decode to a curve point.
    #[error("R is not the encoding of a curve point")]
    InvalidR,
    /// R has small order.
    #[error("R has small order")]
    SmallOrderR,
    /// The verification equation does not hold (another key, or other bytes).
    #[error(
        "signature does not verify under key {0}: signed by another key, or the signed content changed"
    )]
    Mismatch(KeyId),
    /// The key id names no key available to the verifier.
    #[error("key {0} is not in the pack")]
    UnknownKey(KeyId),
    /// The key is in the pack but not one of the signer's keys.
    #[error("key {key} does not belong to host {host}")]
    ForeignKey {
        /// The key that signed.
        key: KeyId,
        /// The host that should have signed.
        host: String,
    },
    /// A record that must be signed is not.
    #[error("missing signature")]
    Missing,
}

/// An Ed25519 signing key (a host's or a publisher's). `Debug` shows only the
/// key id; the private key is never printed.
pub struct HostKey {
    signing: SigningKey,
    public: PublicKey,
}

impl fmt::Debug for HostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostKey")
            .field("key_id", &self.public.id)
            .finish_non_exhaustive()
    }
}

impl HostKey {
    /// A new key from the operating system's random source.
    ///
    /// # Errors
    ///
    /// The random source failed.
    pub fn generate() -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        let key = Self::from_seed(&seed);
        seed.fill(0);
        Ok(key)
    }

    /// The key of a 32-byte RFC 8032 secret (seed). Deterministic; for tests
    /// and for keys kept in another store.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let signing = SigningKey::from_bytes(seed);
        let bytes = signing.verifying_key().to_bytes();
        let public = PublicKey {
            key: signing.verifying_key(),
            id: KeyId::of(&bytes),
        };
        Self { signing, public }
    }

    /// The public half.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The key id.
    pub fn key_id(&self) -> &KeyId {
        &self.public.id
    }

    /// Signs `message` (Ed25519, RFC 8032; deterministic).
    pub fn sign(&self, message: &[u8]) -> Signature {
        Signature(self.signing.sign(message).to_bytes())
    }

    /// The private key as PKCS#8 DER (RFC 8410), for signers that take that
    /// form (the session-token signer). Secret: never log or store it.
    ///
    /// # Errors
    ///
    /// Encoding failed (not expected for a valid key).
    pub fn pkcs8_der(&self) -> Result<Vec<u8>, KeyError> {
        use ed25519_dalek::pkcs8::EncodePrivateKey as _;
        self.signing
            .to_pkcs8_der()
            .map(|doc| doc.as_bytes().to_vec())
            .map_err(|e| KeyError::Malformed {
                path: std::path::PathBuf::new(),
                reason: format!("encoding PKCS#8: {e}"),
            })
    }

    /// Writes the private key to a new file with mode 0600 (PKCS#8 PEM).
    ///
    /// # Errors
    ///
    /// The file exists already, or cannot be created or written.
    pub fn save(&self, path: &Path) -> Result<(), KeyError> {
        let io = |source| KeyError::Io {
            path: path.to_owned(),
            source,
        };
        let pem = self
            .signing
            .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .map_err(|e| KeyError::Malformed {
                path: path.to_owned(),
                reason: format!("encoding PKCS#8: {e}"),
            })?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path).map_err(io)?;
        file.write_all(pem.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)
    }

    /// Reads a private key file written by [`HostKey::save`] (or any PKCS#8
    /// PEM Ed25519 key), refusing one that group or others can read.
    ///
    /// # Errors
    ///
    /// The file cannot be read, is readable by group or others, or is not a
    /// PKCS#8 Ed25519 key (whose embedded public key, if any, matches).
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let meta = std::fs::metadata(path).map_err(|source| KeyError::Io {
            path: path.to_owned(),
            source,
        })?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                return Err(KeyError::TooOpen {
                    path: path.to_owned(),
                    mode,
                });
            }
        }
        if !meta.is_file() {
            return Err(KeyError::Malformed {
                path: path.to_owned(),
                reason: "not a regular file".into(),
            });
        }
        let pem = read_small(path)?;
        let signing = SigningKey::from_pkcs8_pem(&pem).map_err(|e| KeyError::Malformed {
            path: path.to_owned(),
            reason: format!("not a PKCS#8 PEM Ed25519 private key: {e}"),
        })?;
        let bytes = signing.verifying_key().to_bytes();
        let public = PublicKey {
            key: signing.verifying_key(),
            id: KeyId::of(&bytes),
        };
        Ok(Self { signing, public })
    }
}

fn read_small(path: &Path) -> Result<String, KeyError> {
    use std::io::Read as _;
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_KEY_FILE)
        .read_to_string(&mut text)
        .map_err(io)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_round_trip_with_mode_0600() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("host.key");
        let key = HostKey::generate().expect("generate");
        key.save(&path).expect("save");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{text}");
        let loaded = HostKey::load(&path).expect("load");
        assert_eq!(loaded.public(), key.public());
        assert_eq!(loaded.sign(b"m"), key.sign(b"m"));
        // Never overwritten.
        let err = key.save(&path).expect_err("exists");
        assert!(err.to_string().contains("host.key"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_private_key_others_can_read() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("host.key");
        HostKey::from_seed(&[7; 32]).save(&path).expect("save");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let err = HostKey::load(&path).expect_err("too open");
        assert_eq!(
            err.to_string(),
            format!(
                "private key file {0} has mode 0640: group or others may read it; run `chmod 600 {0}`",
                path.display()
            )
        );
    }

    #[test]
    fn debug_never_shows_the_private_key() {
        let seed = [0x42u8; 32];
        let key = HostKey::from_seed(&seed);
        let shown = format!("{key:?} {key:#?}");
        assert!(shown.contains(key.key_id().as_str()), "{shown}");
        assert!(!shown.contains(&hex::encode(seed)), "{shown}");
        assert!(!shown.contains("42, 42"), "{shown}");
    }

    #[test]
    fn public_key_text_form_and_key_id() {
        let key = HostKey::from_seed(&[1; 32]);
        let text = key.public().to_string();
        assert!(
            text.starts_with("ed25519:") && text.len() == 8 + 64,
            "{text}"
        );
        let parsed: PublicKey = text.parse().expect("parse");
        assert_eq!(&parsed, key.public());
        assert_eq!(
            parsed.key_id().as_str(),
            &Digest::of(&parsed.to_bytes()).to_hex()[..16]
        );
        assert!("ed25519:zz".parse::<PublicKey>().is_err());
        assert!(text.to_uppercase().parse::<PublicKey>().is_err());
    }

    #[test]
    fn signatures_verify_and_other_keys_are_refused() {
        let a = HostKey::from_seed(&[1; 32]);
        let b = HostKey::from_seed(&[2; 32]);
        let sig = a.sign(b"message");
        assert_eq!(a.public().verify_strict(b"message", &sig), Ok(()));
        assert_eq!(
            b.public().verify_strict(b"message", &sig),
            Err(SignatureFailure::Mismatch(b.key_id().clone()))
        );
        assert_eq!(
            a.public().verify_strict(b"massage", &sig),
            Err(SignatureFailure::Mismatch(a.key_id().clone()))
        );
    }
}
