//! The one clock. Everything that reads the time (stores checking expiry, the
//! host marking activity, approvals, alarms, the sandbox pinning completion
//! times) is handed a `Clock`, so tests move time instead of sleeping.
//!
//! Reading the system time is not I/O in the sense that matters here (it
//! cannot fail or block), so the system clock lives beside the trait.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::Timestamp;

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Timestamp;
}

/// The machine's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        SystemTime::now().into()
    }
}

/// A clock that moves only when told to: for tests of expiry and leases.
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self(AtomicU64::new(start.as_millis()))
    }

    /// Starting at the system's current time (so TTLs written through it stay plausible).
    pub fn starting_now() -> Self {
        Self::new(SystemClock.now())
    }

    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(u64::try_from(by.as_millis()).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    pub fn set(&self, to: Timestamp) {
        self.0.store(to.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        assert_eq!(clock.now(), Timestamp::from_millis(1_000));
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(clock.now(), Timestamp::from_millis(2_500));
        clock.set(Timestamp::from_millis(10));
        assert_eq!(clock.now(), Timestamp::from_millis(10));
    }
}
