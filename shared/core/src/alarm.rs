//! What a session's alarm does when it fires (the timeline and the writes are
//! in docs/lifecycle.md).
//!
//! A pure function of the clock, the session and its paused work, so the whole
//! policy is one table test. Loading and acting happen in the service layer.

use std::time::Duration;

use crate::{Session, Timestamp};

/// The timing knobs (`EXECUTOR_SESSION_TIMEOUT_MS`, `EXECUTOR_PAUSED_LEASE_MS`,
/// `EXECUTOR_APPROVAL_WINDOW_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Idle time after which a session without paused work ends.
    pub session_timeout: Duration,
    /// Extra idle time granted to a session that has paused work.
    pub paused_lease: Duration,
    /// How long a paused call waits for a decision.
    pub approval_window: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            // An idle session costs nothing, and many clients do not
            // re-initialise after a 404: half an hour before it ends.
            session_timeout: Duration::from_secs(30 * 60),
            paused_lease: Duration::from_secs(10 * 60),
            approval_window: Duration::from_secs(10 * 60),
        }
    }
}

impl Timeouts {
    /// The most idle time any session may reach: session timeout plus paused lease
    /// (40 min by default). Not a separate knob, so a lease can never be zero.
    pub fn paused_cap(&self) -> Duration {
        self.session_timeout.saturating_add(self.paused_lease)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmDecision {
    /// Nothing to do: the session is gone or already destroyed.
    Ignore,
    /// The session was active recently: fire again when it would become idle.
    Reschedule { at: Timestamp },
    /// Idle, but paused work waits for a human: keep it for a bounded lease.
    ExtendPausedLease { at: Timestamp },
    /// Idle past every allowance: destroy the session. Its paused work lives on
    /// (it belongs to the owner) until its own approval window closes.
    Destroy,
}

/// Whether [`decide_session_alarm`] needs the paused count to decide: only for a
/// live session idle past its timeout. The alarm counts paused work (a query)
/// only then, so a reschedule reads the session alone.
pub fn needs_paused_count(now: Timestamp, session: Option<&Session>, timeouts: &Timeouts) -> bool {
    session.is_some_and(|s| s.is_active() && now.since(s.last_activity_at) >= timeouts.session_timeout)
}

/// The alarm's decision table (as docs/lifecycle.md shows it), checked in order.
pub fn decide_session_alarm(
    now: Timestamp,
    session: Option<&Session>,
    paused_count: usize,
    timeouts: &Timeouts,
) -> AlarmDecision {
    let Some(session) = session.filter(|s| s.is_active()) else {
        return AlarmDecision::Ignore;
    };
    let idle = now.since(session.last_activity_at);
    if idle < timeouts.session_timeout {
        return AlarmDecision::Reschedule { at: session.last_activity_at.plus(timeouts.session_timeout) };
    }
    let cap = timeouts.paused_cap();
    if paused_count > 0 && idle < cap {
        // idle < cap, so the lease is at least 1 ms.
        let lease = timeouts.paused_lease.min(cap - idle);
        return AlarmDecision::ExtendPausedLease { at: now.plus(lease) };
    }
    AlarmDecision::Destroy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientInfo, ElicitationMode, Principal, SessionId, SessionStatus};

    const MIN: u64 = 60_000;
    const LAST: u64 = 1_000_000_000;

    fn session(status: SessionStatus) -> Session {
        let mut s = Session::new(
            SessionId::parse("s1").unwrap(),
            Principal::parse("alice").unwrap(),
            Timestamp::from_millis(LAST - 60 * MIN),
            "2025-06-18",
            ClientInfo::default(),
            ElicitationMode::Model,
            Timestamp::from_millis(LAST + 24 * 60 * MIN),
        );
        s.last_activity_at = Timestamp::from_millis(LAST);
        s.status = status;
        s
    }

    #[test]
    fn decision_table() {
        use AlarmDecision::*;
        use SessionStatus::{Active, Destroyed};
        let at = |ms: u64| Timestamp::from_millis(ms);
        let t = Timeouts { session_timeout: Duration::from_millis(5 * MIN), ..Timeouts::default() }; // cap 15 min

        // (what, idle ms at firing, session status or missing, paused, expected)
        let cases: Vec<(&str, u64, Option<SessionStatus>, usize, AlarmDecision)> = vec![
            ("missing session", 0, None, 3, Ignore),
            ("destroyed session", 20 * MIN, Some(Destroyed), 3, Ignore),
            ("destroyed, recently active", 0, Some(Destroyed), 0, Ignore),
            ("active just now", 0, Some(Active), 0, Reschedule { at: at(LAST + 5 * MIN) }),
            ("idle within timeout, no paused", 4 * MIN, Some(Active), 0, Reschedule { at: at(LAST + 5 * MIN) }),
            ("idle within timeout wins over paused", 4 * MIN, Some(Active), 2, Reschedule { at: at(LAST + 5 * MIN) }),
            ("last ms before timeout", 5 * MIN - 1, Some(Active), 0, Reschedule { at: at(LAST + 5 * MIN) }),
            ("exactly at timeout, no paused", 5 * MIN, Some(Active), 0, Destroy),
            (
                "exactly at timeout, paused: full lease",
                5 * MIN,
                Some(Active),
                1,
                ExtendPausedLease { at: at(LAST + 15 * MIN) },
            ),
            (
                "lease is cut to the cap",
                12 * MIN,
                Some(Active),
                1,
                ExtendPausedLease { at: at(LAST + 12 * MIN + 3 * MIN) },
            ),
            (
                "one ms before the cap: lease of one ms, never zero",
                15 * MIN - 1,
                Some(Active),
                4,
                ExtendPausedLease { at: at(LAST + 15 * MIN) },
            ),
            ("exactly at the cap, paused", 15 * MIN, Some(Active), 1, Destroy),
            ("past the cap, paused", 40 * MIN, Some(Active), 9, Destroy),
            ("idle, nothing paused", 7 * MIN, Some(Active), 0, Destroy),
        ];
        for (what, idle, status, paused, expected) in cases {
            let s = status.map(session);
            let now = at(LAST + idle);
            let got = decide_session_alarm(now, s.as_ref(), paused, &t);
            assert_eq!(got, expected, "{what}");
            // Where the alarm skips counting paused work, the count cannot change the decision.
            if !needs_paused_count(now, s.as_ref(), &t) {
                for other in [0, 7] {
                    assert_eq!(decide_session_alarm(now, s.as_ref(), other, &t), expected, "{what}, {other} paused");
                }
            }
            if let ExtendPausedLease { at } = got {
                assert!(at > now, "{what}: a lease must be longer than zero");
                assert!(at.since(at_last()) <= t.paused_cap(), "{what}: a lease never passes the cap");
            }
        }
    }

    fn at_last() -> Timestamp {
        Timestamp::from_millis(LAST)
    }

    #[test]
    fn activity_in_the_future_counts_as_not_idle() {
        // Clocks of different instances disagree a little; a last activity slightly
        // ahead of `now` must not look like a long idle time.
        let s = session(SessionStatus::Active);
        let now = Timestamp::from_millis(LAST - 500);
        assert_eq!(
            decide_session_alarm(now, Some(&s), 0, &Timeouts::default()),
            AlarmDecision::Reschedule { at: Timestamp::from_millis(LAST + 30 * MIN) }
        );
    }

    #[test]
    fn defaults_idle_half_an_hour_and_cap_at_forty_minutes() {
        let t = Timeouts::default();
        assert_eq!(t.session_timeout, Duration::from_secs(30 * 60));
        assert_eq!(t.paused_lease, Duration::from_secs(10 * 60));
        assert_eq!(t.paused_cap(), Duration::from_secs(40 * 60));
        assert_eq!(t.approval_window, Duration::from_secs(10 * 60));
    }

    #[test]
    fn custom_timeouts_move_the_boundaries() {
        let t = Timeouts {
            session_timeout: Duration::from_millis(100),
            paused_lease: Duration::from_millis(50),
            approval_window: Duration::from_millis(10),
        };
        let s = session(SessionStatus::Active);
        let at = |idle: u64| Timestamp::from_millis(LAST + idle);
        assert_eq!(decide_session_alarm(at(99), Some(&s), 1, &t), AlarmDecision::Reschedule { at: at(100) });
        assert_eq!(decide_session_alarm(at(100), Some(&s), 1, &t), AlarmDecision::ExtendPausedLease { at: at(150) });
        assert_eq!(decide_session_alarm(at(120), Some(&s), 1, &t), AlarmDecision::ExtendPausedLease { at: at(150) });
        assert_eq!(decide_session_alarm(at(150), Some(&s), 1, &t), AlarmDecision::Destroy);
    }
}
