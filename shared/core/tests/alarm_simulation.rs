//! The alarm policy over a simulated day: 100,000 sessions with realistic
//! activity, each driven through the pure `decide_session_alarm` exactly as
//! the alarm handler drives it (coalesced activity writes, one schedule per
//! alarm generation, paused work counted only when the decision needs it).
//! It counts, per session, what EventBridge Scheduler and DynamoDB are asked
//! to do, and the busiest second of schedule creations and invocations over
//! the day, for docs/cost.md. Nothing here is timed: the clock is simulated.
//!
//! Run with `cargo test -p executor-core --test alarm_simulation -- --nocapture`
//! to see the table.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use executor_core::{
    AlarmDecision, ClientInfo, ElicitationMode, Principal, Session, SessionId, Timeouts, Timestamp,
    decide_session_alarm, needs_paused_count,
};

const SESSIONS: usize = 100_000;
const SEC: u64 = 1_000;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;
/// `HostConfig::activity_interval`: activity is written at most this often.
const ACTIVITY_INTERVAL: u64 = 30 * SEC;

/// A small deterministic generator (xorshift64*), so every run counts the same.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[low, high)`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low).max(1)
    }

    /// Exponential with this mean (inter-arrival gaps of a person or an agent).
    fn exponential(&mut self, mean: u64) -> u64 {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (-(1.0 - unit).ln() * mean as f64) as u64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.between(0, 100) < percent
    }
}

/// How a client uses its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Profile {
    /// An agent's task: a few calls over a few minutes; half close the session.
    Task,
    /// A chat: calls minutes apart for up to two hours, sometimes a long pause.
    Chat,
    /// An editor open all day: bursts, idle gaps, lunch.
    Editor,
    /// Code that pauses for a person, who decides on the approval page after
    /// 1-20 minutes (past the 10-minute window: never), sometimes to pause again.
    Approval,
}

impl Profile {
    fn pick(rng: &mut Rng) -> Self {
        match rng.between(0, 100) {
            0..50 => Profile::Task,
            50..80 => Profile::Chat,
            80..90 => Profile::Editor,
            _ => Profile::Approval,
        }
    }
}

/// What a client does, at offsets from the session's start.
struct Plan {
    requests: Vec<u64>,
    /// (when the code pauses, when a person decides: `None` never).
    pauses: Vec<(u64, Option<u64>)>,
    /// `DELETE /mcp` at this offset.
    delete_at: Option<u64>,
}

fn plan(profile: Profile, rng: &mut Rng) -> Plan {
    let mut requests = Vec::new();
    let mut pauses = Vec::new();
    let mut delete_at = None;
    let mut at = 0;
    match profile {
        Profile::Task => {
            for _ in 0..rng.between(1, 6) {
                at += rng.exponential(30 * SEC);
                requests.push(at);
            }
            if rng.chance(50) {
                delete_at = Some(at + SEC);
            }
        }
        Profile::Chat => {
            let end = rng.between(10 * MIN, 2 * HOUR);
            while at < end {
                at += if rng.chance(5) { rng.between(20 * MIN, 40 * MIN) } else { rng.exponential(2 * MIN) };
                requests.push(at);
            }
        }
        Profile::Editor => {
            let end = rng.between(2 * HOUR, 8 * HOUR);
            while at < end {
                at += match rng.between(0, 100) {
                    0..3 => rng.between(20 * MIN, 45 * MIN),
                    3..30 => rng.between(2 * MIN, 15 * MIN),
                    _ => rng.exponential(20 * SEC),
                };
                requests.push(at);
            }
        }
        Profile::Approval => {
            at += rng.exponential(20 * SEC);
            requests.push(at);
            at += rng.exponential(20 * SEC);
            requests.push(at);
            // Decided on the approval page (no session activity); four in ten
            // continuations pause again at the next write, up to three times.
            let mut paused = at;
            for _ in 0..3 {
                let decided = paused + rng.between(MIN, 20 * MIN);
                if decided >= paused + 10 * MIN {
                    pauses.push((paused, None));
                    break;
                }
                pauses.push((paused, Some(decided)));
                if !rng.chance(40) {
                    break;
                }
                paused = decided;
            }
        }
    }
    // Some chats and editors also wait on a person now and then.
    if matches!(profile, Profile::Chat | Profile::Editor) && rng.chance(20) {
        let when = requests[rng.between(0, requests.len() as u64) as usize];
        let decided = if rng.chance(70) { Some(when + rng.between(MIN, 15 * MIN)) } else { None };
        pauses.push((when, decided));
    }
    Plan { requests, pauses, delete_at }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Request,
    Delete,
    /// The alarm of this generation fires.
    Alarm(u64),
}

/// What one session cost, counted.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    creates: u64,
    invocations: u64,
    deletes: u64,
    activity_writes: u64,
    alarm_reads: u64,
    alarm_queries: u64,
    alarm_writes: u64,
    reschedules: u64,
    extends: u64,
    destroyed_by_alarm: bool,
}

/// One session through its day: requests, pauses, alarms, as the host and
/// the alarm handler treat them. Schedule creations and invocations are
/// recorded at their second of the day.
fn run(start: u64, plan: &Plan, timeouts: &Timeouts, creates_at: &mut Vec<u64>, fires_at: &mut Vec<u64>) -> Counts {
    let mut counts = Counts::default();
    let t = |offset: u64| Timestamp::from_millis(start + offset);
    let mut session = Session::new(
        SessionId::parse("s").unwrap(),
        Principal::parse("p").unwrap(),
        t(0),
        "2025-06-18",
        ClientInfo::default(),
        ElicitationMode::Model,
        t(24 * HOUR),
    );
    let first = t(0).plus(timeouts.session_timeout);
    session.alarm_at = Some(first);
    counts.creates += 1;
    creates_at.push(start / SEC);

    let mut events = BinaryHeap::new();
    for &at in &plan.requests {
        events.push(Reverse((t(at), Event::Request)));
    }
    if let Some(at) = plan.delete_at {
        events.push(Reverse((t(at), Event::Delete)));
    }
    events.push(Reverse((first, Event::Alarm(first.as_millis()))));
    // A pause counts until it is decided or its approval window closes.
    let pauses: Vec<(Timestamp, Timestamp)> = plan
        .pauses
        .iter()
        .map(|&(at, decided)| {
            let deadline = t(at).plus(timeouts.approval_window);
            (t(at), decided.map_or(deadline, |d| t(d).min(deadline)))
        })
        .collect();
    let paused_at = |now: Timestamp| pauses.iter().filter(|(from, until)| *from <= now && now < *until).count();

    while let Some(Reverse((now, event))) = events.pop() {
        match event {
            Event::Request if session.is_active() => {
                if now.since(session.last_activity_at) >= Duration::from_millis(ACTIVITY_INTERVAL) {
                    session.last_activity_at = now;
                    counts.activity_writes += 1;
                }
            }
            // The client got 404 and stops (many never initialise again).
            Event::Request => {}
            Event::Delete if session.is_active() => {
                // `DELETE /mcp`: destroyed at once, its pending alarm deleted before it fires.
                session.destroy().unwrap();
                counts.deletes += 1;
                events.retain(|Reverse((_, e))| !matches!(e, Event::Alarm(_)));
            }
            Event::Delete => {}
            Event::Alarm(generation) => {
                counts.invocations += 1;
                fires_at.push(now.as_millis() / SEC);
                counts.alarm_reads += 1;
                assert!(session.alarm_at.is_none_or(|at| at.as_millis() == generation), "one chain of alarms");
                let paused = if needs_paused_count(now, Some(&session), timeouts) {
                    counts.alarm_queries += 1;
                    paused_at(now)
                } else {
                    0
                };
                match decide_session_alarm(now, Some(&session), paused, timeouts) {
                    AlarmDecision::Ignore => {}
                    decision @ (AlarmDecision::Reschedule { at } | AlarmDecision::ExtendPausedLease { at }) => {
                        assert!(at > now, "the next alarm is later");
                        if matches!(decision, AlarmDecision::Reschedule { .. }) {
                            counts.reschedules += 1;
                        } else {
                            counts.extends += 1;
                        }
                        session.alarm_at = Some(at);
                        counts.alarm_writes += 1;
                        counts.creates += 1;
                        creates_at.push(now.as_millis() / SEC);
                        events.push(Reverse((at, Event::Alarm(at.as_millis()))));
                    }
                    AlarmDecision::Destroy => {
                        let idle = now.since(session.last_activity_at);
                        assert!(idle >= timeouts.session_timeout && idle <= timeouts.paused_cap(), "{idle:?}");
                        session.destroy().unwrap();
                        session.alarm_at = None;
                        counts.alarm_writes += 1;
                        // The adapter deletes the generation it armed: the one firing now.
                        counts.deletes += 1;
                        counts.destroyed_by_alarm = true;
                    }
                }
            }
        }
    }
    assert!(!session.is_active(), "every session ends");
    counts
}

/// The most events in any one second.
fn peak_per_second(seconds: &[u64]) -> usize {
    let mut per_second: BTreeMap<u64, usize> = BTreeMap::new();
    for &s in seconds {
        *per_second.entry(s).or_default() += 1;
    }
    per_second.values().copied().max().unwrap_or(0)
}

#[test]
fn a_day_of_100k_sessions() {
    println!("Defaults (session timeout 30 min, paused lease 10 min, approval window 10 min):");
    simulate(&Timeouts::default());
    // The reference's timeout: alarms fire six times as often, and a pause can outlive it.
    println!("\nSession timeout 5 min:");
    simulate(&Timeouts { session_timeout: Duration::from_secs(5 * 60), ..Timeouts::default() });
}

fn simulate(timeouts: &Timeouts) {
    let mut rng = Rng(0x5EED_CAFE);
    let day_start = 1_800_000_000_000;
    let mut totals: BTreeMap<Profile, (usize, Counts)> = BTreeMap::new();
    let (mut creates_at, mut fires_at) = (Vec::new(), Vec::new());
    for _ in 0..SESSIONS {
        let profile = Profile::pick(&mut rng);
        // Two thirds of sessions start in an eight-hour working day, the rest at any hour.
        let start = if rng.chance(67) { rng.between(9 * HOUR, 17 * HOUR) } else { rng.between(0, 24 * HOUR) };
        let plan = plan(profile, &mut rng);
        let counts = run(day_start + start, &plan, timeouts, &mut creates_at, &mut fires_at);
        // Every schedule created either fires once or is deleted before it fires (`DELETE /mcp`).
        let deleted_unfired = u64::from(plan.delete_at.is_some() && !counts.destroyed_by_alarm);
        assert_eq!(counts.creates, counts.invocations + deleted_unfired, "{profile:?}: {counts:?}");
        assert_eq!(counts.reschedules + counts.extends + 1, counts.creates, "{profile:?}: {counts:?}");
        let entry = totals.entry(profile).or_default();
        entry.0 += 1;
        let t = &mut entry.1;
        t.creates += counts.creates;
        t.invocations += counts.invocations;
        t.deletes += counts.deletes;
        t.activity_writes += counts.activity_writes;
        t.alarm_reads += counts.alarm_reads;
        t.alarm_queries += counts.alarm_queries;
        t.alarm_writes += counts.alarm_writes;
        t.reschedules += counts.reschedules;
        t.extends += counts.extends;
    }

    println!(
        "| profile | sessions | CreateSchedule | invocations | DeleteSchedule | reschedules | lease extensions | activity writes | alarm reads | paused queries | alarm writes |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut all = Counts::default();
    for (profile, (n, c)) in &totals {
        let per = |x: u64| x as f64 / *n as f64;
        println!(
            "| {profile:?} | {n} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            per(c.creates),
            per(c.invocations),
            per(c.deletes),
            per(c.reschedules),
            per(c.extends),
            per(c.activity_writes),
            per(c.alarm_reads),
            per(c.alarm_queries),
            per(c.alarm_writes)
        );
        all.creates += c.creates;
        all.invocations += c.invocations;
        all.deletes += c.deletes;
        all.activity_writes += c.activity_writes;
        all.alarm_reads += c.alarm_reads;
        all.alarm_queries += c.alarm_queries;
        all.alarm_writes += c.alarm_writes;
    }
    let per = |x: u64| x as f64 / SESSIONS as f64;
    println!(
        "| all | {SESSIONS} | {:.3} | {:.3} | {:.3} | | | {:.3} | {:.3} | {:.3} | {:.3} |",
        per(all.creates),
        per(all.invocations),
        per(all.deletes),
        per(all.activity_writes),
        per(all.alarm_reads),
        per(all.alarm_queries),
        per(all.alarm_writes)
    );
    let (peak_creates, peak_fires) = (peak_per_second(&creates_at), peak_per_second(&fires_at));
    println!("busiest second of the day: {peak_creates} CreateSchedule, {peak_fires} invocations");
    println!("totals: {} CreateSchedule, {} invocations", all.creates, all.invocations);

    // Alarms stay a small multiple of sessions: about one per timeout of a session's life, plus its end.
    assert!(per(all.creates) < 40.0, "{all:?}");
    assert!(peak_creates > 0 && peak_fires > 0);
}
