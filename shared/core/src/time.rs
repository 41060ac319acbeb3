//! Wall-clock instants as whole milliseconds since the Unix epoch.
//!
//! Milliseconds rather than `SystemTime` because every instant here is stored,
//! compared across machines and pinned for replay: it must serialise exactly.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis)
    }

    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Whole seconds, rounded up: DynamoDB TTL attributes are epoch seconds and an
    /// item must never be deleted before its time.
    pub const fn as_secs_ceil(self) -> u64 {
        self.0.div_ceil(1000)
    }

    /// `self + d`, saturating at the far future instead of overflowing.
    pub fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(duration_millis(d)))
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-29T19:46:21.000Z`.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0 / 1000;
        let (days, rem) = (secs / 86_400, secs % 86_400);
        let (year, month, day) = civil_from_days(days);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
            self.0 % 1000
        )
    }

    /// Time elapsed from `earlier` to `self`; zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

/// The conversion only; reading the clock is the caller's business.
impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        Self(t.duration_since(UNIX_EPOCH).map_or(0, duration_millis))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_764_445_581_123, "2025-11-29T19:46:21.123Z"),
            (4_107_542_399_999, "2100-02-28T23:59:59.999Z"),
            (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
        ];
        for (millis, text) in cases {
            assert_eq!(Timestamp::from_millis(millis).to_rfc3339(), text, "{millis}");
        }
    }

    #[test]
    fn arithmetic_saturates_and_rounds_up() {
        let cases = [
            // (millis, secs_ceil)
            (0, 0),
            (1, 1),
            (999, 1),
            (1000, 1),
            (1001, 2),
        ];
        for (millis, secs) in cases {
            assert_eq!(Timestamp::from_millis(millis).as_secs_ceil(), secs, "{millis}ms");
        }
        let t = Timestamp::from_millis(u64::MAX - 1);
        assert_eq!(t.plus(Duration::from_secs(5)).as_millis(), u64::MAX);
        let a = Timestamp::from_millis(1_000);
        let b = Timestamp::from_millis(4_000);
        assert_eq!(b.since(a), Duration::from_secs(3));
        assert_eq!(a.since(b), Duration::ZERO);
        assert_eq!(Timestamp::from(UNIX_EPOCH + Duration::from_millis(1_234)).as_millis(), 1_234);
        assert_eq!(Timestamp::from(UNIX_EPOCH - Duration::from_secs(1)).as_millis(), 0);
    }
}
