//! RFC 8785 (JCS) canonical JSON and SHA-256 over it.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// The canonical (RFC 8785) bytes of `value`.
///
/// # Errors
///
/// Values JSON cannot represent canonically (non-finite numbers).
pub fn canonical_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    serde_json_canonicalizer::to_vec(value).map_err(|e| format!("canonical JSON: {e}"))
}

/// SHA-256 of the canonical bytes of `value`.
///
/// # Errors
///
/// As [`canonical_bytes`].
pub fn sha256<T: Serialize>(value: &T) -> Result<[u8; 32], String> {
    Ok(Sha256::digest(canonical_bytes(value)?).into())
}

/// `sha256:<hex>` of the canonical bytes of `value`.
///
/// # Errors
///
/// As [`canonical_bytes`].
pub fn sha256_tagged<T: Serialize>(value: &T) -> Result<String, String> {
    Ok(format!("sha256:{}", hex::encode(sha256(value)?)))
}

/// `sha256:<hex>` of raw bytes.
pub fn sha256_bytes_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_and_normalizes_numbers() {
        let v = json!({"b": 1.0, "a": [true, null, "\u{20ac}"], "c": 1e21});
        let bytes = canonical_bytes(&v).expect("canonical");
        assert_eq!(
            String::from_utf8(bytes).expect("utf8"),
            r#"{"a":[true,null,"€"],"b":1,"c":1e+21}"#
        );
    }
}
