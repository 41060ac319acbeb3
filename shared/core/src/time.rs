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

    /// An RFC 3339 time, as people type it and [`Timestamp::to_rfc3339`]
    /// writes it: `2026-12-01T10:00:00Z`, `2026-12-01T10:00:00.123Z`,
    /// `2026-12-01T12:00:00+02:00`. Fractional seconds are kept to the
    /// millisecond (finer digits are dropped, as a `Timestamp` has none). A
    /// time before 1970 and a leap second (`:60`) are refused: a `Timestamp`
    /// cannot name them.
    pub fn parse_rfc3339(text: &str) -> Result<Timestamp, String> {
        let bad = |why: &str| format!("{text:?} is not an RFC 3339 time like 2026-12-01T10:00:00Z: {why}");
        let b = text.as_bytes();
        let number = |range: std::ops::Range<usize>| -> Option<u32> {
            let digits = b.get(range)?;
            digits.iter().all(u8::is_ascii_digit).then(|| digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
        };
        let at = |i: usize, expected: &[u8]| b.get(i).is_some_and(|c| expected.contains(c));
        let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
            return Err(bad("the date must be YYYY-MM-DD"));
        };
        if !at(4, b"-") || !at(7, b"-") {
            return Err(bad("the date must be YYYY-MM-DD"));
        }
        if !at(10, b"Tt") {
            return Err(bad("a `T` and the time of day must follow the date"));
        }
        let (Some(hour), Some(minute), Some(second)) = (number(11..13), number(14..16), number(17..19)) else {
            return Err(bad("the time of day must be HH:MM:SS"));
        };
        if !at(13, b":") || !at(16, b":") {
            return Err(bad("the time of day must be HH:MM:SS"));
        }
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return Err(bad("there is no such day"));
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(bad("there is no such time of day (a leap second cannot be given)"));
        }
        // Fractional seconds: one digit or more, the first three kept.
        let mut i = 19;
        let mut millis = 0;
        if at(i, b".") {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return Err(bad("a `.` must be followed by digits"));
            }
            millis = (0..3).fold(0, |n, k| n * 10 + if k < digits { u64::from(b[i + 1 + k] - b'0') } else { 0 });
            i += 1 + digits;
        }
        let offset_secs: i64 = match b.get(i) {
            Some(b'Z' | b'z') if b.len() == i + 1 => 0,
            Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && at(i + 3, b":") => {
                let (Some(h), Some(m)) = (number(i + 1..i + 3), number(i + 4..i + 6)) else {
                    return Err(bad("the offset must be Z or +HH:MM or -HH:MM"));
                };
                if h > 23 || m > 59 {
                    return Err(bad("the offset must be Z or +HH:MM or -HH:MM"));
                }
                let secs = i64::from(h * 3600 + m * 60);
                if *sign == b'+' { secs } else { -secs }
            }
            None => return Err(bad("it needs a time zone: Z for UTC, or an offset like +02:00")),
            _ => return Err(bad("the offset must be Z or +HH:MM or -HH:MM, and nothing may follow it")),
        };
        let secs =
            days_from_civil(year, month, day) * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_secs;
        match u64::try_from(secs) {
            Ok(secs) => Ok(Self(secs * 1000 + millis)),
            Err(_) => Err(bad("it is before 1970-01-01T00:00:00Z")),
        }
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

/// (year, month, day), proleptic Gregorian, to days since 1970-01-01 (negative
/// before it): the inverse of [`civil_from_days`] (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: u32, month: u32, day: u32) -> i64 {
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
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
    fn parse_rfc3339() {
        let valid = [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-12-01T10:00:00Z", 1_796_119_200_000),
            ("2026-12-01T10:00:00.000Z", 1_796_119_200_000),
            ("2026-12-01t10:00:00.5z", 1_796_119_200_500),
            ("2026-12-01T10:00:00.123456789Z", 1_796_119_200_123),
            ("2026-12-01T12:30:00+02:30", 1_796_119_200_000),
            ("2026-12-01T05:00:00-05:00", 1_796_119_200_000),
            ("2000-02-29T00:00:00.000Z", 951_782_400_000),
            ("2025-11-29T19:46:21.123Z", 1_764_445_581_123),
            ("2100-02-28T23:59:59.999Z", 4_107_542_399_999),
            ("2100-03-01T00:00:00Z", 4_107_542_400_000),
            ("1970-01-01T01:00:00+01:00", 0),
        ];
        for (text, millis) in valid {
            assert_eq!(Timestamp::parse_rfc3339(text), Ok(Timestamp::from_millis(millis)), "{text}");
        }
        // Every instant `to_rfc3339` writes reads back as itself, across leap years and centuries.
        for millis in (0..4_200_000_000_000u64).step_by(86_399_999_977) {
            let t = Timestamp::from_millis(millis);
            assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Ok(t), "{}", t.to_rfc3339());
        }
        let invalid = [
            ("", "the date must be YYYY-MM-DD"),
            ("2026-12-01", "a `T` and the time of day must follow the date"),
            ("2026-12-01 10:00:00Z", "a `T` and the time of day must follow the date"),
            ("2026/12/01T10:00:00Z", "the date must be YYYY-MM-DD"),
            ("26-12-01T10:00:00Z", "the date must be YYYY-MM-DD"),
            ("2026-12-01T10:00Z", "the time of day must be HH:MM:SS"),
            ("2026-12-01T10-00-00Z", "the time of day must be HH:MM:SS"),
            ("2026-12-01T10:00:00", "it needs a time zone"),
            ("2026-12-01T10:00:00.Z", "a `.` must be followed by digits"),
            ("2026-12-01T10:00:00+0200", "the offset must be"),
            ("2026-12-01T10:00:00+24:00", "the offset must be"),
            ("2026-12-01T10:00:00Zjunk", "nothing may follow it"),
            ("2026-12-01T10:00:00 Z", "the offset must be"),
            ("2026-13-01T10:00:00Z", "there is no such day"),
            ("2026-00-01T10:00:00Z", "there is no such day"),
            ("2026-02-29T10:00:00Z", "there is no such day"),
            ("2100-02-29T10:00:00Z", "there is no such day"),
            ("2026-04-31T10:00:00Z", "there is no such day"),
            ("2026-12-00T10:00:00Z", "there is no such day"),
            ("2026-12-01T24:00:00Z", "there is no such time of day"),
            ("2026-12-01T10:60:00Z", "there is no such time of day"),
            ("2016-12-31T23:59:60Z", "a leap second cannot be given"),
            ("1969-12-31T23:59:59Z", "before 1970"),
            ("1970-01-01T00:30:00+01:00", "before 1970"),
            ("+026-12-01T10:00:00Z", "the date must be YYYY-MM-DD"),
            ("２026-12-01T10:00:00Z", "the date must be YYYY-MM-DD"),
            ("30m", "the date must be YYYY-MM-DD"),
        ];
        for (text, why) in invalid {
            let error = Timestamp::parse_rfc3339(text).unwrap_err();
            assert!(error.contains(why) && error.contains("2026-12-01T10:00:00Z"), "{text}: {error}");
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
