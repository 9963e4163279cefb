//! ISO 8601 durations (`PT72H`, `PT2M15S`), as HCP messages carry them.

use std::fmt;
use std::time::Duration;

/// A fixed-length ISO 8601 duration.
///
/// Years and months are refused: they have no fixed length, and a deadline
/// must. Weeks, days, hours, minutes and (fractional) seconds are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IsoDuration(Duration);

impl IsoDuration {
    /// Parses `text`, e.g. `PT10M`.
    ///
    /// # Errors
    ///
    /// Text that is not an ISO 8601 duration, carries years or months, or
    /// overflows.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not an ISO 8601 duration (e.g. PT10M, PT72H, P2D)");
        let (rest, parsed) =
            iso8601::parsers::parse_duration(text.as_bytes()).map_err(|_| bad())?;
        if !rest.is_empty() {
            return Err(bad());
        }
        let secs: u64 = match parsed {
            iso8601::Duration::Weeks(w) => u64::from(w) * 7 * 86_400,
            iso8601::Duration::YMDHMS {
                year,
                month,
                day,
                hour,
                minute,
                second,
                millisecond,
            } => {
                if year != 0 || month != 0 {
                    return Err(format!(
                        "{text:?}: years and months have no fixed length; use days (e.g. P30D)"
                    ));
                }
                let secs = u64::from(day) * 86_400
                    + u64::from(hour) * 3_600
                    + u64::from(minute) * 60
                    + u64::from(second);
                return Ok(Self(
                    Duration::from_secs(secs) + Duration::from_millis(u64::from(millisecond)),
                ));
            }
        };
        Ok(Self(Duration::from_secs(secs)))
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }

    /// Wraps a duration (for formatting measured durations).
    pub fn from_duration(d: Duration) -> Self {
        Self(d)
    }
}

/// Formats as `PT<h>H<m>M<s>S`, omitting zero parts; seconds keep up to
/// millisecond precision (`PT0.25S`); zero is `PT0S`.
impl fmt::Display for IsoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total_ms = self.0.as_millis();
        let hours = total_ms / 3_600_000;
        let minutes = (total_ms / 60_000) % 60;
        let ms = total_ms % 60_000;
        f.write_str("PT")?;
        if hours > 0 {
            write!(f, "{hours}H")?;
        }
        if minutes > 0 {
            write!(f, "{minutes}M")?;
        }
        if ms > 0 || (hours == 0 && minutes == 0) {
            let (s, frac) = (ms / 1000, ms % 1000);
            if frac == 0 {
                write!(f, "{s}S")?;
            } else {
                let frac = format!("{frac:03}");
                write!(f, "{s}.{}S", frac.trim_end_matches('0'))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_seeds_durations() {
        assert_eq!(
            IsoDuration::parse("PT72H").map(|d| d.get().as_secs()),
            Ok(72 * 3600)
        );
        assert_eq!(
            IsoDuration::parse("PT10M").map(|d| d.get().as_secs()),
            Ok(600)
        );
        assert_eq!(
            IsoDuration::parse("PT4H").map(|d| d.get().as_secs()),
            Ok(4 * 3600)
        );
        assert_eq!(
            IsoDuration::parse("P2D").map(|d| d.get().as_secs()),
            Ok(2 * 86_400)
        );
        assert_eq!(
            IsoDuration::parse("P1W").map(|d| d.get().as_secs()),
            Ok(7 * 86_400)
        );
    }

    #[test]
    fn refuses_garbage_trailing_text_and_calendar_units() {
        for bad in ["", "P", "10M", "PT10Mxyz", "PT-5S", "P1Y", "P1M", "hello"] {
            assert!(IsoDuration::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn formats_like_the_seed() {
        let f = |s: u64| IsoDuration::from_duration(Duration::from_secs(s)).to_string();
        assert_eq!(f(2 * 3600 + 15 * 60), "PT2H15M");
        assert_eq!(f(135), "PT2M15S");
        assert_eq!(f(0), "PT0S");
        assert_eq!(
            IsoDuration::from_duration(Duration::from_millis(250)).to_string(),
            "PT0.25S"
        );
        assert_eq!(f(72 * 3600), "PT72H");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Anything parses or is refused without panicking; what the host
        /// prints parses back to the same duration.
        #[test]
        fn format_round_trips(ms in 0u64..10_000_000_000) {
            let d = IsoDuration::from_duration(Duration::from_millis(ms));
            prop_assert_eq!(IsoDuration::parse(&d.to_string()), Ok(d));
        }

        #[test]
        fn parsing_never_panics(s in "\\PC{0,40}") {
            let _ = IsoDuration::parse(&s);
        }
    }
}
