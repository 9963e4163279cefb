//! Checks of the identifiers that appear in receipts and in pack file names.

/// Largest integer a receipt or checkpoint may carry (2^53 − 1): RFC 8785
/// writes numbers as IEEE 754 doubles, so larger integers have no exact
/// canonical form.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// An identifier or timestamp that breaks its rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// A host id outside its rule ([`check_host_id`]).
    #[error("host id {id:?} must be 1 to 64 characters from [A-Za-z0-9._-], not . or ..")]
    HostId {
        /// The id.
        id: String,
    },
    /// A free-form identifier outside its rule ([`check_text`]).
    #[error("{field} {value:?} must be 1 to 256 characters without control characters")]
    Text {
        /// Which field.
        field: String,
        /// Its value.
        value: String,
    },
    /// A timestamp that is not RFC 3339.
    #[error("timestamp {value:?} is not RFC 3339: {reason}")]
    Timestamp {
        /// The timestamp.
        value: String,
        /// What the parser said.
        reason: String,
    },
}

/// Checks a host id: 1 to 64 characters from `[A-Za-z0-9._-]`, not `.` or
/// `..`. Host ids name files inside evidence packs.
///
/// # Errors
///
/// What is wrong with `id`.
pub fn check_host_id(id: &str) -> Result<(), IdError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(IdError::HostId { id: id.to_owned() })
    }
}

/// Appends `n` in decimal to `out`, as serde_json (itoa) writes an
/// integer: for canonical forms written by hand.
pub fn push_decimal(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(decimal(n, &mut [0u8; 20]));
}

/// `n` in decimal (no leading zeros), written into `buf`: as serde_json
/// (itoa) writes an integer, and as a receipt id names its `seq`.
pub(crate) fn decimal(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    let mut n = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// Whether `id` is the receipt id a log gives its `seq`th receipt,
/// `<host_id>:<seq>` (the number in decimal, no leading zeros), compared
/// without allocating.
#[must_use]
pub fn is_receipt_id(id: &str, host_id: &str, seq: u64) -> bool {
    let mut buf = [0u8; 20];
    let digits = decimal(seq, &mut buf);
    id.strip_prefix(host_id)
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|rest| rest.as_bytes() == digits)
}

/// Checks a free-form identifier (session, task, capability, call): 1 to 256
/// printable characters, no control characters.
///
/// # Errors
///
/// What is wrong with `value`.
pub fn check_text(field: &str, value: &str) -> Result<(), IdError> {
    // Control characters in ASCII are 0x00-0x1f and 0x7f (and 0x80-0x9f beyond).
    let control = if value.is_ascii() {
        value.bytes().any(|b| b < 0x20 || b == 0x7f)
    } else {
        value.chars().any(char::is_control)
    };
    if value.is_empty() || value.len() > 256 || control {
        Err(IdError::Text {
            field: field.to_owned(),
            value: value.to_owned(),
        })
    } else {
        Ok(())
    }
}

/// Checks an RFC 3339 timestamp.
///
/// # Errors
///
/// A timestamp that does not parse as RFC 3339.
pub fn check_timestamp(value: &str) -> Result<(), IdError> {
    time::OffsetDateTime::parse(value, &time::format_description::well_known::Rfc3339)
        .map(|_| ())
        .map_err(|e| IdError::Timestamp {
            value: value.to_owned(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipt_ids_are_compared_without_allocating() {
        assert!(is_receipt_id("h:0", "h", 0));
        assert!(is_receipt_id("h-1:18446744073709551615", "h-1", u64::MAX));
        assert!(!is_receipt_id("h:07", "h", 7));
        assert!(!is_receipt_id("h:7 ", "h", 7));
        assert!(!is_receipt_id("h7", "h", 7));
        assert!(!is_receipt_id("hh:7", "h", 7));
    }

    #[test]
    fn decimals_are_written_as_serde_json_writes_integers() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, MAX_SAFE_INTEGER, u64::MAX] {
            let mut out = b"=".to_vec();
            push_decimal(&mut out, n);
            let json = serde_json::to_string(&n).expect("json");
            assert_eq!(out, format!("={json}").into_bytes(), "{n}");
        }
    }
}
