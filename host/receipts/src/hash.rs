//! SHA-256 digests and their text form `sha256:<64 lowercase hex digits>`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::str::FromStr;

/// A SHA-256 digest. Its text form (and its JSON form) is `sha256:<hex>`,
/// lowercase, as `hcp_contracts::jcs::sha256_tagged` writes it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Digest(pub [u8; 32]);

/// The prefix of a digest's text form.
pub const PREFIX: &str = "sha256:";

impl Digest {
    /// SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// SHA-256 of the RFC 8785 canonical form of `value`
    /// (`hcp_contracts::jcs::sha256`).
    ///
    /// # Errors
    ///
    /// Values that have no canonical JSON form (non-finite numbers).
    pub fn of_canonical<T: Serialize>(value: &T) -> Result<Self, String> {
        hcp_contracts::jcs::sha256(value).map(Self)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Appends the text form (`sha256:<hex>`, unquoted) to `out`.
    pub fn push_text(&self, out: &mut Vec<u8>) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 71];
        buf[..7].copy_from_slice(PREFIX.as_bytes());
        for (b, pair) in self.0.iter().zip(buf[7..].chunks_exact_mut(2)) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 0x0f)];
        }
        out.extend_from_slice(&buf);
    }

    /// Lowercase hex without the `sha256:` prefix.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex digits (no prefix).
    ///
    /// # Errors
    ///
    /// Anything but exactly 64 lowercase hex digits.
    pub fn from_hex(text: &str) -> Result<Self, String> {
        let bytes = text.as_bytes();
        let mut out = [0u8; 32];
        let ok = bytes.len() == 64
            && out.iter_mut().zip(bytes.chunks_exact(2)).all(|(o, pair)| {
                let (hi, lo) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
                *o = (hi << 4) | (lo & 0x0f);
                (hi | lo) < 0x10
            });
        if ok {
            Ok(Self(out))
        } else {
            Err(format!("{text:?} is not 64 lowercase hex digits"))
        }
    }
}

/// Value of each lowercase hex digit; 0xff for every other byte.
const HEX: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // On the stack: a host call's decision input names its scope so.
        let mut buf = [0u8; 71];
        buf[..7].copy_from_slice(PREFIX.as_bytes());
        hex::encode_to_slice(self.0, &mut buf[7..]).map_err(|_| fmt::Error)?;
        f.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("{s:?} does not start with {PREFIX:?}"))?;
        Self::from_hex(hex)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 71];
        buf[..7].copy_from_slice(PREFIX.as_bytes());
        // Cannot fail: the output buffer is exactly twice the input.
        hex::encode_to_slice(self.0, &mut buf[7..]).map_err(serde::ser::Error::custom)?;
        let text = std::str::from_utf8(&buf).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(text)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Digest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a digest \"sha256:<64 hex digits>\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Digest, E> {
                v.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_is_strict() {
        let d = Digest::of(b"abc");
        let text = d.to_string();
        assert_eq!(
            text,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(text.parse::<Digest>(), Ok(d));
        assert_eq!(
            serde_json::to_string(&d).expect("json"),
            format!("\"{text}\"")
        );
        let mut pushed = b"x".to_vec();
        d.push_text(&mut pushed);
        assert_eq!(pushed, format!("x{text}").into_bytes());
        assert!(text.to_uppercase().parse::<Digest>().is_err());
        assert!(text[7..].parse::<Digest>().is_err());
        assert!(format!("{text}0").parse::<Digest>().is_err());
        assert_eq!(
            Digest::of_canonical(&serde_json::json!({"b": 1, "a": 2})).expect("jcs"),
            Digest::of(br#"{"a":2,"b":1}"#)
        );
    }
}
