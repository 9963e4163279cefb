//! `context.json`: contextual rules of the assessment. Unattended hours
//! raise the risk level; busy equipment refuses or queues a task.

use crate::ids::{CapabilityName, ResourceType, RuleId};
use hcp_contracts::RiskLevel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Windows of local time when nobody watches the lab.
    #[serde(default)]
    pub unattended_hours: Vec<UnattendedRule>,
    /// What to do when a resource a capability declares is in use, by
    /// resource type.
    #[serde(default)]
    pub resources: BTreeMap<ResourceType, ResourceRule>,
    /// For busy resources not listed in `resources`.
    pub default_when_busy: BusyAction,
}

/// A window of unattended hours. `from` is inclusive, `to` exclusive; a
/// window whose `to` is earlier than its `from` runs past midnight, and
/// `days` then names the day it starts on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnattendedRule {
    /// Recorded when the rule fires.
    pub id: RuleId,
    /// Offset of the local time from UTC, always explicit: `+01:00`.
    pub utc_offset: UtcOffsetText,
    /// Start, `HH:MM` local time.
    pub from: LocalTime,
    /// End, `HH:MM` local time (`24:00` is midnight at the end of the day).
    pub to: LocalTime,
    /// Days the window starts on (default: every day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<Vec<Weekday>>,
    /// Capabilities the rule applies to (default: every capability).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<CapabilityName>>,
    /// The level a task is raised to inside the window.
    pub raises_to: RiskLevel,
}

/// What a busy resource means for a new task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceRule {
    /// Refuse or queue.
    pub when_busy: BusyAction,
}

/// Refuse (`resource_unavailable`) or admit and let the host queue the task
/// until the resource is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusyAction {
    /// `task_rejected` with `resource_unavailable`.
    Reject,
    /// Admitted; the host waits for the resource before running it.
    Queue,
}

/// A day of the week.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weekday {
    /// Monday.
    Mon,
    /// Tuesday.
    Tue,
    /// Wednesday.
    Wed,
    /// Thursday.
    Thu,
    /// Friday.
    Fri,
    /// Saturday.
    Sat,
    /// Sunday.
    Sun,
}

impl From<time::Weekday> for Weekday {
    fn from(day: time::Weekday) -> Self {
        match day {
            time::Weekday::Monday => Self::Mon,
            time::Weekday::Tuesday => Self::Tue,
            time::Weekday::Wednesday => Self::Wed,
            time::Weekday::Thursday => Self::Thu,
            time::Weekday::Friday => Self::Fri,
            time::Weekday::Saturday => Self::Sat,
            time::Weekday::Sunday => Self::Sun,
        }
    }
}

/// A local time of day, `HH:MM`, `00:00` to `24:00`; held as minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LocalTime(u16);

impl LocalTime {
    /// Minutes since midnight, 0–1440.
    pub fn minutes(self) -> u16 {
        self.0
    }
}

impl TryFrom<String> for LocalTime {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        let bad = || format!("{value:?} is not a time of day: write HH:MM, 00:00 to 24:00");
        let b = value.as_bytes();
        if b.len() != 5
            || b[2] != b':'
            || !b
                .iter()
                .enumerate()
                .all(|(i, c)| i == 2 || c.is_ascii_digit())
        {
            return Err(bad());
        }
        let h = u16::from(b[0] - b'0') * 10 + u16::from(b[1] - b'0');
        let m = u16::from(b[3] - b'0') * 10 + u16::from(b[4] - b'0');
        if m > 59 || h > 24 || (h == 24 && m != 0) {
            return Err(bad());
        }
        Ok(Self(h * 60 + m))
    }
}

impl From<LocalTime> for String {
    fn from(t: LocalTime) -> String {
        t.to_string()
    }
}

impl fmt::Display for LocalTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.0 / 60, self.0 % 60)
    }
}

/// An offset from UTC written `+HH:MM` or `-HH:MM` (never implied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UtcOffsetText(time::UtcOffset);

impl UtcOffsetText {
    /// The offset.
    pub fn get(self) -> time::UtcOffset {
        self.0
    }
}

impl TryFrom<String> for UtcOffsetText {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        let bad = || format!("{value:?} is not a UTC offset: write +HH:MM or -HH:MM");
        let b = value.as_bytes();
        let shaped = b.len() == 6
            && matches!(b[0], b'+' | b'-')
            && b[3] == b':'
            && [1, 2, 4, 5].iter().all(|i| b[*i].is_ascii_digit());
        if !shaped {
            return Err(bad());
        }
        let h = i8::try_from((b[1] - b'0') * 10 + (b[2] - b'0')).map_err(|_| bad())?;
        let m = i8::try_from((b[4] - b'0') * 10 + (b[5] - b'0')).map_err(|_| bad())?;
        if h > 14 || m > 59 {
            return Err(bad());
        }
        let sign = if b[0] == b'-' { -1 } else { 1 };
        time::UtcOffset::from_hms(sign * h, sign * m, 0)
            .map(Self)
            .map_err(|_| bad())
    }
}

impl From<UtcOffsetText> for String {
    fn from(o: UtcOffsetText) -> String {
        o.to_string()
    }
}

impl fmt::Display for UtcOffsetText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (h, m, _) = self.0.as_hms();
        let sign = if self.0.is_negative() { '-' } else { '+' };
        write!(f, "{sign}{:02}:{:02}", h.unsigned_abs(), m.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_offsets_parse() {
        assert_eq!(
            LocalTime::try_from("22:30".to_owned()).map(|t| t.minutes()),
            Ok(1350)
        );
        assert_eq!(
            LocalTime::try_from("24:00".to_owned()).map(|t| t.minutes()),
            Ok(1440)
        );
        for bad in ["24:01", "7:00", "07:60", "0700", "ab:cd"] {
            assert!(LocalTime::try_from(bad.to_owned()).is_err(), "{bad}");
        }
        let o = UtcOffsetText::try_from("-05:30".to_owned()).expect("offset");
        assert_eq!(o.to_string(), "-05:30");
        assert_eq!(o.get().whole_minutes(), -330);
        assert_eq!(
            UtcOffsetText::try_from("01:00".to_owned()).expect_err("no sign"),
            "\"01:00\" is not a UTC offset: write +HH:MM or -HH:MM"
        );
        assert!(UtcOffsetText::try_from("Z".to_owned()).is_err());
        assert!(UtcOffsetText::try_from("+15:00".to_owned()).is_err());
    }
}
