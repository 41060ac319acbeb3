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

fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

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
