//! What one caller may submit (`budgets.json` `submissions`), counted in
//! the one submission path ([`super::Host::submit_task_replying`]) for
//! every transport, before anything of the submission is recorded.
//!
//! Two limits, per authenticated caller:
//!
//! - a rate: a token bucket of `burst` submissions refilled at
//!   `per_second` ([`Bucket`]), in this process's memory (a restart refills
//!   it);
//! - the bytes of its messages the store recorded in the last 24 hours
//!   ([`DayBytes`]), read back from the store the first time this process
//!   sees the caller, so that a restart does not reset them.
//!
//! Every submission counts, whatever its answer: a refused one costs the
//! host its parse, its record and its receipt as much as an accepted one.
//! A submission over either limit is refused `rate_limited` with when to
//! try again, and nothing of it is recorded.

use crate::store::Store;
use anyhow::Result;
use hcp_policy::files::SubmissionLimits;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Minutes in the window of [`DayBytes`].
const DAY_MINUTES: i64 = 24 * 60;

/// A token bucket: `burst` tokens at most, refilled at `per_second`.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket of `limits`, at `now`.
    pub(crate) fn full(limits: &SubmissionLimits, now: Instant) -> Self {
        Self {
            tokens: f64::from(limits.burst.max(1)),
            at: now,
        }
    }

    /// Takes a token at `now`, under `limits` (those in force now: a
    /// reload applies from the next submission); otherwise how long until
    /// one is there.
    pub(crate) fn take(&mut self, limits: &SubmissionLimits, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(limits.per_second.max(1));
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(f64::from(limits.burst.max(1)));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::try_from_secs_f64((1.0 - self.tokens) / rate)
                .unwrap_or(Duration::from_secs(1)))
        }
    }
}

/// Bytes recorded per minute over the last 24 hours (minutes since the
/// Unix epoch, oldest first), and their sum.
#[derive(Debug, Clone, Default)]
pub(crate) struct DayBytes {
    minutes: VecDeque<(i64, u64)>,
    total: u64,
}

/// Why a submission may not be recorded now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Over {
    /// The rate: a token is there after this long.
    Rate(Duration),
    /// The day's bytes: `used` of `quota` are taken, and this submission's
    /// `size` fits after this long (a whole day when it never fits).
    Bytes {
        used: u64,
        quota: u64,
        size: u64,
        after: Duration,
    },
}

impl Over {
    /// How long the caller should wait before it submits again.
    pub(crate) fn retry_after(&self) -> Duration {
        match self {
            Self::Rate(d) | Self::Bytes { after: d, .. } => *d,
        }
    }
}

impl DayBytes {
    /// Forgets what was recorded 24 hours or more before `minute`.
    fn expire(&mut self, minute: i64) {
        while let Some(&(m, bytes)) = self.minutes.front() {
            if m > minute - DAY_MINUTES {
                break;
            }
            self.total = self.total.saturating_sub(bytes);
            self.minutes.pop_front();
        }
    }

    /// Counts `bytes` at `minute` (not before the last minute counted).
    pub(crate) fn add(&mut self, minute: i64, bytes: u64) {
        self.expire(minute);
        match self.minutes.back_mut() {
            Some((m, b)) if *m >= minute => *b = b.saturating_add(bytes),
            _ => self.minutes.push_back((minute, bytes)),
        }
        self.total = self.total.saturating_add(bytes);
    }

    /// Takes back `bytes` counted by [`DayBytes::add`] (a submission that
    /// recorded nothing after all: a duplicate).
    pub(crate) fn remove(&mut self, bytes: u64) {
        let mut left = bytes;
        for (_, b) in self.minutes.iter_mut().rev() {
            let taken = left.min(*b);
            *b -= taken;
            left -= taken;
            if left == 0 {
                break;
            }
        }
        self.total = self.total.saturating_sub(bytes - left);
    }

    /// Whether `size` more bytes fit under `quota` at `minute`; if not,
    /// how many are used and how long until they fit.
    pub(crate) fn check(&mut self, minute: i64, size: u64, quota: u64) -> Result<(), Over> {
        self.expire(minute);
        if self.total.saturating_add(size) <= quota {
            return Ok(());
        }
        let over = |after: Duration| Over::Bytes {
            used: self.total,
            quota,
            size,
            after,
        };
        if size > quota {
            return Err(over(Duration::from_secs(86_400)));
        }
        // The oldest minutes leave the window first: wait for enough.
        let mut left = self.total;
        for &(m, bytes) in &self.minutes {
            left = left.saturating_sub(bytes);
            if left.saturating_add(size) <= quota {
                let minutes = u64::try_from(m + DAY_MINUTES - minute).unwrap_or(1).max(1);
                return Err(over(Duration::from_secs(minutes * 60)));
            }
        }
        Err(over(Duration::from_secs(86_400)))
    }
}

/// One caller's counts.
#[derive(Debug)]
struct Meter {
    bucket: Bucket,
    bytes: DayBytes,
}

/// Every caller's counts in this process.
#[derive(Debug, Default)]
pub(crate) struct Meters {
    callers: Mutex<HashMap<String, Meter>>,
}

/// Minutes since the Unix epoch at `t`.
fn minute_of(t: time::OffsetDateTime) -> i64 {
    t.unix_timestamp().div_euclid(60)
}

impl Meters {
    /// Takes one submission of `size` bytes from `caller` under `limits`:
    /// a token, and `size` bytes of its day (reserved: give them back with
    /// [`Meters::unrecorded`] when nothing was recorded); or why not.
    ///
    /// # Errors
    ///
    /// The store cannot say what the caller's last day recorded (read on
    /// the first submission this process sees from it).
    pub(crate) fn take(
        &self,
        store: &Store,
        caller: &str,
        limits: &SubmissionLimits,
        size: u64,
    ) -> Result<Result<(), Over>> {
        let (now, wall) = (Instant::now(), time::OffsetDateTime::now_utc());
        let minute = minute_of(wall);
        let mut callers = self.callers.lock().unwrap_or_else(|e| e.into_inner());
        if !callers.contains_key(caller) {
            let mut bytes = DayBytes::default();
            let since = wall - time::Duration::days(1);
            for (at, n) in
                store.recorded_bytes_since(caller, &hcp_contracts::message::rfc3339(since))?
            {
                // A time the store wrote and this host cannot read counts now.
                bytes.add(at.map_or(minute, minute_of), n);
            }
            callers.insert(
                caller.to_owned(),
                Meter {
                    bucket: Bucket::full(limits, now),
                    bytes,
                },
            );
        }
        let Some(meter) = callers.get_mut(caller) else {
            anyhow::bail!("no meter for {caller}");
        };
        if let Err(after) = meter.bucket.take(limits, now) {
            return Ok(Err(Over::Rate(after)));
        }
        if let Err(over) = meter.bytes.check(minute, size, limits.stored_bytes_per_day) {
            return Ok(Err(over));
        }
        meter.bytes.add(minute, size);
        Ok(Ok(()))
    }

    /// Gives back the `size` bytes [`Meters::take`] reserved for a
    /// submission that recorded nothing (a duplicate).
    pub(crate) fn unrecorded(&self, caller: &str, size: u64) {
        let mut callers = self.callers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(meter) = callers.get_mut(caller) {
            meter.bytes.remove(size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: SubmissionLimits = SubmissionLimits {
        per_second: 2,
        burst: 3,
        stored_bytes_per_day: 1000,
    };

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::full(&LIMITS, t0);
        for _ in 0..3 {
            assert_eq!(b.take(&LIMITS, t0), Ok(()));
        }
        // Empty: the next token comes after half a second at 2 a second.
        assert_eq!(b.take(&LIMITS, t0), Err(Duration::from_millis(500)));
        let later = t0 + Duration::from_millis(250);
        let wait = b.take(&LIMITS, later).expect_err("still empty");
        assert!(
            wait > Duration::from_millis(249) && wait < Duration::from_millis(251),
            "{wait:?}"
        );
        assert_eq!(b.take(&LIMITS, t0 + Duration::from_millis(500)), Ok(()));
        // Refilled, never above the burst.
        let much_later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(b.take(&LIMITS, much_later), Ok(()));
        }
        assert!(b.take(&LIMITS, much_later).is_err());
    }

    #[test]
    fn a_smaller_burst_after_a_reload_applies_at_once() {
        let t0 = Instant::now();
        let mut b = Bucket::full(&LIMITS, t0);
        let one = SubmissionLimits { burst: 1, ..LIMITS };
        assert_eq!(b.take(&one, t0), Ok(()));
        assert!(b.take(&one, t0).is_err());
    }

    #[test]
    fn a_days_bytes_leave_the_window_after_24_hours() {
        let mut d = DayBytes::default();
        d.add(100, 600);
        d.add(160, 300);
        assert_eq!(d.check(200, 100, 1000), Ok(()));
        // 900 used: 200 more fit once minute 100's bytes leave, at
        // 100 + 1440 (1340 minutes after 200).
        assert_eq!(
            d.check(200, 200, 1000),
            Err(Over::Bytes {
                used: 900,
                quota: 1000,
                size: 200,
                after: Duration::from_secs(1340 * 60)
            })
        );
        assert_eq!(d.check(100 + DAY_MINUTES, 200, 1000), Ok(()));
        assert_eq!(d.total, 300);
        // A submission larger than the quota never fits.
        assert!(matches!(
            d.check(2000, 1001, 1000),
            Err(Over::Bytes { after, .. }) if after == Duration::from_secs(86_400)
        ));
    }

    #[test]
    fn bytes_given_back_are_not_counted() {
        let mut d = DayBytes::default();
        d.add(1, 400);
        d.add(2, 500);
        d.remove(500);
        assert_eq!(d.total, 400);
        assert_eq!(d.check(3, 600, 1000), Ok(()));
    }
}
