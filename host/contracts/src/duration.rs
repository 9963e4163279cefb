//! ISO 8601 durations (`PT72H`, `PT2M15S`, `PT1.5S`), as HCP messages carry
//! them.

use std::fmt;
use std::time::Duration;

/// A fixed-length ISO 8601 duration.
///
/// Years and months are refused: they have no fixed length, and a deadline
/// must. Weeks, days, hours, minutes and seconds are accepted; the last
/// component may carry a decimal fraction (`PT1.5S`, `PT0,25S`, `PT1.5H`) of
/// up to nine digits. Designators are upper case, as ISO 8601 writes them:
/// `pt10s` is refused with a message that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IsoDuration(Duration);

/// Why a text is not a duration the host accepts.
enum Fault {
    Syntax,
    Calendar,
    TooPrecise,
    TooLong,
}

const NANOS: u128 = 1_000_000_000;

/// The designators of the date part and of the time part, in the order
/// ISO 8601 writes them, with their length in seconds (0: no fixed length).
const DATE_UNITS: &[(char, u128)] = &[('Y', 0), ('M', 0), ('W', 7 * 86_400), ('D', 86_400)];
const TIME_UNITS: &[(char, u128)] = &[('H', 3_600), ('M', 60), ('S', 1)];

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The duration `text` denotes, in nanoseconds.
fn nanos(text: &str) -> Result<u128, Fault> {
    let rest = text.strip_prefix('P').ok_or(Fault::Syntax)?;
    let (date, time) = match rest.split_once('T') {
        Some((_, "")) => return Err(Fault::Syntax),
        Some((d, t)) => (d, t),
        None => (rest, ""),
    };
    let mut total: u128 = 0;
    let mut components = 0;
    let mut fraction_seen = false;
    for (mut s, units) in [(date, DATE_UNITS), (time, TIME_UNITS)] {
        let mut next = 0;
        while !s.is_empty() {
            // Only the last component may carry a fraction.
            if fraction_seen {
                return Err(Fault::Syntax);
            }
            let end = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
                .ok_or(Fault::Syntax)?;
            let (number, tail) = s.split_at(end);
            let designator = tail.chars().next().ok_or(Fault::Syntax)?;
            s = &tail[designator.len_utf8()..];
            let at = units[next..]
                .iter()
                .position(|(d, _)| *d == designator)
                .ok_or(Fault::Syntax)?
                + next;
            next = at + 1;
            let (whole, fraction) = match number.split_once(['.', ',']) {
                Some((w, f)) if digits(f) => {
                    fraction_seen = true;
                    (w, f)
                }
                Some(_) => return Err(Fault::Syntax),
                None => (number, ""),
            };
            if !digits(whole) {
                return Err(Fault::Syntax);
            }
            if fraction.len() > 9 {
                return Err(Fault::TooPrecise);
            }
            let whole: u128 = whole.parse().map_err(|_| Fault::TooLong)?;
            let fraction: u128 = if fraction.is_empty() {
                0
            } else {
                format!("{fraction:0<9}")
                    .parse()
                    .map_err(|_| Fault::Syntax)?
            };
            let value = whole
                .checked_mul(NANOS)
                .and_then(|w| w.checked_add(fraction))
                .ok_or(Fault::TooLong)?;
            let unit = units[at].1;
            if unit == 0 && value != 0 {
                return Err(Fault::Calendar);
            }
            total = value
                .checked_mul(unit)
                .and_then(|v| total.checked_add(v))
                .ok_or(Fault::TooLong)?;
            components += 1;
        }
    }
    if components == 0 {
        return Err(Fault::Syntax);
    }
    Ok(total)
}

impl IsoDuration {
    /// Parses `text`, e.g. `PT10M`.
    ///
    /// # Errors
    ///
    /// Text that is not an ISO 8601 duration (lower-case designators
    /// included), carries years or months, a fraction finer than a
    /// nanosecond, or does not fit.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fault = match nanos(text) {
            Ok(n) => {
                let secs = u64::try_from(n / NANOS)
                    .map_err(|_| format!("{text:?} is too long a duration"))?;
                let sub = u32::try_from(n % NANOS).unwrap_or(0);
                return Ok(Self(Duration::new(secs, sub)));
            }
            Err(f) => f,
        };
        Err(match fault {
            Fault::Syntax => {
                let upper = text.to_ascii_uppercase();
                if upper != text && nanos(&upper).is_ok() {
                    format!(
                        "{text:?} is not an ISO 8601 duration: its designators are upper case ({upper})"
                    )
                } else {
                    format!("{text:?} is not an ISO 8601 duration (e.g. PT10M, PT72H, P2D, PT1.5S)")
                }
            }
            Fault::Calendar => {
                format!("{text:?}: years and months have no fixed length; use days (e.g. P30D)")
            }
            Fault::TooPrecise => {
                format!("{text:?}: a fraction has at most nine digits (nanoseconds)")
            }
            Fault::TooLong => format!("{text:?} is too long a duration"),
        })
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

    #[test]
    fn keeps_fractions_of_a_second_past_the_first_second() {
        let ms = |t: &str| IsoDuration::parse(t).map(|d| d.get().as_millis());
        assert_eq!(ms("PT1.5S"), Ok(1500));
        assert_eq!(ms("PT0,25S"), Ok(250));
        assert_eq!(ms("PT2M0.5S"), Ok(120_500));
        assert_eq!(ms("PT1.5H"), Ok(5_400_000));
        assert_eq!(ms("P1DT0.001S"), Ok(86_400_001));
        assert_eq!(
            IsoDuration::parse("PT1.5S").map(|d| d.to_string()),
            Ok("PT1.5S".to_owned())
        );
        assert_eq!(
            IsoDuration::parse("PT0.000000001S").map(|d| d.get().as_nanos()),
            Ok(1)
        );
    }

    #[test]
    fn says_why_a_duration_is_refused() {
        assert_eq!(
            IsoDuration::parse("pt10s"),
            Err(
                "\"pt10s\" is not an ISO 8601 duration: its designators are upper case (PT10S)"
                    .to_owned()
            )
        );
        assert_eq!(
            IsoDuration::parse("PT1.5M2S"),
            Err(
                "\"PT1.5M2S\" is not an ISO 8601 duration (e.g. PT10M, PT72H, P2D, PT1.5S)"
                    .to_owned()
            )
        );
        assert_eq!(
            IsoDuration::parse("PT0.0000000001S"),
            Err("\"PT0.0000000001S\": a fraction has at most nine digits (nanoseconds)".to_owned())
        );
        assert_eq!(
            IsoDuration::parse("PT99999999999999999999999999999999999999S"),
            Err("\"PT99999999999999999999999999999999999999S\" is too long a duration".to_owned())
        );
        for bad in [
            "PT", "PT.5S", "PT1.S", "PT1M1M", "PT1S1M", "P1H", "PT1D", "P1DT",
        ] {
            assert!(IsoDuration::parse(bad).is_err(), "{bad} was accepted");
        }
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
