//! RFC 3339 timestamps, in the two forms the host writes. Every
//! timestamp the host formats comes from here.
//!
//! - [`rfc3339`] (and [`now_rfc3339`], [`rfc3339_unix_ms`]): UTC with
//!   exactly three fractional digits and `Z` (`2025-01-15T08:30:00.000Z`),
//!   the form seed 001 shows. Messages, the store, receipts and
//!   checkpoints use it. Being of fixed width, two of them sort as text as
//!   they do in time.
//! - [`rfc3339_exact`]: UTC with as many fractional digits as the instant
//!   has (none to nine). Only the policy's decision input uses it: replay
//!   parses its `at` and decides again at that very instant, so it must not
//!   be rounded to the millisecond (a rule's window or an expiry inside that
//!   millisecond would decide otherwise).

use time::{OffsetDateTime, UtcOffset};

/// The current time, as [`rfc3339`].
pub fn now_rfc3339() -> String {
    rfc3339(OffsetDateTime::now_utc())
}

/// `t` as RFC 3339 with milliseconds, UTC (`2025-01-15T08:30:00.000Z`).
/// A year RFC 3339 cannot write (before 0 or after 9999) is written as
/// Unix seconds instead.
pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&format)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

/// A Unix time in milliseconds as [`rfc3339`]; one past year 9999 as the
/// epoch.
pub fn rfc3339_unix_ms(at_ms: u64) -> String {
    let nanos = i128::from(at_ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .map_or_else(|_| rfc3339(OffsetDateTime::UNIX_EPOCH), rfc3339)
}

/// `t` as RFC 3339 in UTC to the nanosecond, trailing zeros of the
/// fraction dropped (`2025-01-15T08:30:00.5Z`, `2025-01-15T08:30:00Z`); an
/// empty string for a year RFC 3339 cannot write. For decision inputs that
/// are replayed (see the module's doc), nowhere else.
pub fn rfc3339_exact(t: OffsetDateTime) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn rfc3339_has_milliseconds_and_z() {
        let t = datetime!(2025-01-15 08:30:00.5 UTC);
        assert_eq!(rfc3339(t), "2025-01-15T08:30:00.500Z");
        assert_eq!(
            rfc3339(datetime!(2025-01-15 10:30:00.123456 +02:00)),
            "2025-01-15T08:30:00.123Z"
        );
    }

    #[test]
    fn unix_milliseconds_are_written_the_same_way() {
        assert_eq!(rfc3339_unix_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_unix_ms(1_500), "1970-01-01T00:00:01.500Z");
        assert_eq!(rfc3339_unix_ms(u64::MAX), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn exact_keeps_every_digit_the_instant_has() {
        assert_eq!(
            rfc3339_exact(datetime!(2025-01-15 08:30:00.000_000_5 UTC)),
            "2025-01-15T08:30:00.0000005Z"
        );
        assert_eq!(
            rfc3339_exact(datetime!(2025-01-15 08:30:00 UTC)),
            "2025-01-15T08:30:00Z"
        );
        let t = datetime!(2025-01-15 08:30:00.123_456_789 UTC);
        let back = OffsetDateTime::parse(
            &rfc3339_exact(t),
            &time::format_description::well_known::Rfc3339,
        );
        assert_eq!(back.ok(), Some(t));
    }

    #[test]
    fn only_the_fixed_form_sorts_as_text_as_in_time() {
        let a = datetime!(2025-01-15 08:30:00 UTC);
        let b = datetime!(2025-01-15 08:30:00.5 UTC);
        assert!(rfc3339(a) < rfc3339(b));
        // Why messages and receipts use the fixed form.
        assert!(rfc3339_exact(a) > rfc3339_exact(b));
    }
}
