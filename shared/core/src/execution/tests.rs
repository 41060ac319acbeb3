use serde_json::json;

use super::*;
use crate::{LinkStatus, PendingCall, TokenHash};

const ALL: [ExecutionStatus; 7] = ExecutionStatus::ALL;

fn failure() -> ExecutionFailure {
    ExecutionFailure { code: "c".into(), message: "m".into(), retry_after_ms: None }
}

fn claim(action: ApprovalAction, link: Option<TokenHash>) -> ExecutionEvent {
    ExecutionEvent::Claim { action, link, claim: "c1".into(), by: Decider::model(Channel::Model) }
}

const LEASE: Duration = Duration::from_secs(60);

fn events() -> [ExecutionEvent; 12] {
    let mut journal = Journal::new(Timestamp::from_millis(0), 1);
    journal.add_pending(PendingCall::new(0, "a.write", json!({}), "?"));
    [
        ExecutionEvent::Pause { journal, deadline: Timestamp::from_millis(10_000) },
        claim(ApprovalAction::Accept, None),
        ExecutionEvent::Complete { result: json!(1) },
        ExecutionEvent::Fail { error: failure() },
        ExecutionEvent::Decline { error: failure() },
        ExecutionEvent::Expire,
        ExecutionEvent::Interrupt,
        ExecutionEvent::Yield { journal: Journal::new(Timestamp::from_millis(0), 1), lease: LEASE },
        ExecutionEvent::HandOn { claim: "c0".into(), lease: LEASE },
        ExecutionEvent::Continue { claim: "c2".into() },
        ExecutionEvent::Heartbeat,
        ExecutionEvent::RequestCancel { by: Decider::model(Channel::Task) },
    ]
}

/// Every (status, event) pair, written out: a new transition must be added here on purpose.
#[test]
fn transition_table() {
    use ExecutionStatus::*;
    // Columns: pause, claim, complete, fail, decline, expire, interrupt, yield,
    // hand_on, continue, heartbeat, request_cancel.
    let table: [(ExecutionStatus, [Option<ExecutionStatus>; 12]); 7] = [
        (
            Running,
            [
                Some(Paused),
                None,
                Some(Completed),
                Some(Failed),
                Some(Declined),
                Some(Expired),
                Some(Failed),
                Some(Running),
                Some(Running),
                Some(Running),
                Some(Running),
                Some(Running),
            ],
        ),
        (Paused, [None, Some(Resuming), None, None, None, Some(Expired), None, None, None, None, None, None]),
        (
            Resuming,
            [
                Some(Paused),
                None,
                Some(Completed),
                Some(Failed),
                Some(Declined),
                Some(Expired),
                Some(Failed),
                Some(Running),
                None,
                None,
                Some(Resuming),
                Some(Resuming),
            ],
        ),
        (Completed, [None; 12]),
        (Failed, [None; 12]),
        (Declined, [None; 12]),
        (Expired, [None; 12]),
    ];
    assert_eq!(table.map(|(s, _)| s), ALL);
    for (from, row) in table {
        for (event, expected) in events().iter().zip(row) {
            assert_eq!(next_status(from, event), expected, "{from:?} + {}", event.name());
        }
        assert_eq!(from.is_terminal(), row.iter().all(Option::is_none), "{from:?}");
    }
}

fn execution_in(status: ExecutionStatus) -> Execution {
    let mut e = Execution::start(
        ExecutionId::parse("e1").unwrap(),
        Principal::parse("alice").unwrap(),
        None,
        ElicitationMode::Model,
        "return 1",
        Journal::new(Timestamp::from_millis(0), 1),
        Timestamp::from_millis(1_000_000),
    );
    e.state = match status {
        ExecutionStatus::Running => ExecutionState::Running,
        ExecutionStatus::Paused => ExecutionState::Paused { deadline: Timestamp::from_millis(10_000) },
        ExecutionStatus::Resuming => ExecutionState::Resuming { action: ApprovalAction::Accept },
        ExecutionStatus::Completed => ExecutionState::Completed { result: json!(null) },
        ExecutionStatus::Failed => ExecutionState::Failed { error: failure() },
        ExecutionStatus::Declined => ExecutionState::Declined { error: failure() },
        ExecutionStatus::Expired => ExecutionState::Expired,
    };
    e
}

#[test]
fn only_a_run_whose_heartbeat_is_stale_is_stranded() {
    let claimed = Timestamp::from_millis(100_000);
    let cases = [
        // (status, last heartbeat, now, stranded)
        (ExecutionStatus::Resuming, None, 100_000, false),
        (ExecutionStatus::Resuming, None, 129_999, false),
        (ExecutionStatus::Resuming, None, 130_000, true),
        (ExecutionStatus::Resuming, Some(150_000), 179_999, false),
        (ExecutionStatus::Resuming, Some(150_000), 180_000, true),
        (ExecutionStatus::Running, Some(400_000), 429_999, false),
        (ExecutionStatus::Running, Some(400_000), 430_000, true),
        // A heartbeat older than the latest write does not count against it.
        (ExecutionStatus::Running, Some(50_000), 129_999, false),
        (ExecutionStatus::Paused, None, 900_000, false),
        (ExecutionStatus::Completed, Some(100_000), 900_000, false),
    ];
    for (status, beat, now, stranded) in cases {
        let mut e = execution_in(status);
        e.updated_at = claimed;
        e.heartbeat_at = beat.map(Timestamp::from_millis);
        assert_eq!(e.is_stranded(Timestamp::from_millis(now)), stranded, "{status:?} beat {beat:?} at {now}");
    }
    for status in [ExecutionStatus::Resuming, ExecutionStatus::Running] {
        let mut e = execution_in(status);
        e.apply(ExecutionEvent::Interrupt, Timestamp::from_millis(185_000)).unwrap();
        assert_eq!(e.state, ExecutionState::Failed { error: ExecutionFailure::interrupted() });
    }
}

#[test]
fn apply_follows_the_table_and_leaves_rejected_executions_untouched() {
    let now = Timestamp::from_millis(5_000);
    for from in ALL {
        for event in events() {
            let mut e = execution_in(from);
            let before = e.clone();
            let expected = next_status(from, &event);
            match (e.apply(event.clone(), now), expected) {
                (Ok(applied), Some(to)) => {
                    assert_eq!(e.status(), to);
                    assert_eq!((applied.from, applied.to, applied.at), (from, to, now));
                    let moved_on = e.updated_at == now;
                    assert_eq!(moved_on, event.moves_on(), "{from:?} + {}", event.name());
                }
                (Err(TransitionError::Illegal { .. }), None) => assert_eq!(e, before),
                (got, want) => panic!("{from:?} + {}: got {got:?}, table says {want:?}", event.name()),
            }
        }
    }
}

#[test]
fn claim_guards() {
    let cases = [
        // (now, expect expired)
        (9_999, false),
        (10_000, true),
        (20_000, true),
    ];
    for (now, expired) in cases {
        let mut e = execution_in(ExecutionStatus::Paused);
        let result = e.apply(claim(ApprovalAction::Decline, None), Timestamp::from_millis(now));
        if expired {
            assert!(matches!(result, Err(TransitionError::ApprovalExpired { .. })), "{now}");
            assert_eq!(e.status(), ExecutionStatus::Paused);
        } else {
            assert!(result.is_ok(), "{now}");
            assert_eq!(e.state, ExecutionState::Resuming { action: ApprovalAction::Decline });
        }
    }
}

#[test]
fn links_are_spent_by_a_claim_and_reset_by_the_next_pause() {
    let (link, other) = (TokenHash::of_token("link"), TokenHash::of_token("other"));
    let mut e = execution_in(ExecutionStatus::Paused);
    e.links.open(link.clone());
    e.links.open(other.clone());
    e.apply(claim(ApprovalAction::Accept, Some(link.clone())), Timestamp::from_millis(1)).unwrap();
    assert_eq!((e.links.status(&link), e.links.status(&other)), (LinkStatus::Spent, LinkStatus::Unknown));
    let pause = events()[0].clone();
    e.apply(pause, Timestamp::from_millis(2)).unwrap();
    e.links.open(other.clone());
    assert_eq!((e.links.status(&link), e.links.status(&other)), (LinkStatus::Spent, LinkStatus::Open));
}

#[test]
fn pause_requires_a_pending_call() {
    let mut e = execution_in(ExecutionStatus::Running);
    let journal = Journal::new(Timestamp::from_millis(0), 1);
    let result =
        e.apply(ExecutionEvent::Pause { journal, deadline: Timestamp::from_millis(1) }, Timestamp::from_millis(0));
    assert!(matches!(result, Err(TransitionError::NothingPending { .. })));
    assert_eq!(e.status(), ExecutionStatus::Running);
}

#[test]
fn state_serialises_with_a_status_tag() {
    let state = ExecutionState::Paused { deadline: Timestamp::from_millis(5) };
    assert_eq!(serde_json::to_value(&state).unwrap(), json!({"status": "paused", "deadline": 5}));
}

/// What each event does to the fields only `apply` may change, from a
/// running or paused execution at 5 s: (event, from, claim, heartbeat,
/// cancel requested, resumes, expires at).
#[test]
fn events_change_the_guarded_fields() {
    let now = Timestamp::from_millis(5_000);
    let kept = Timestamp::from_millis(1_000_000);
    let after = |d: Duration| now.plus(d).plus(RETENTION);
    let paused_until = Timestamp::from_millis(10_000).plus(RETENTION);
    type Row = (ExecutionEvent, ExecutionStatus, Option<&'static str>, Option<Timestamp>, bool, u32, Timestamp);
    let rows: Vec<Row> = vec![
        (events()[8].clone(), ExecutionStatus::Running, Some("c0"), Some(now), false, 0, after(LEASE)),
        (events()[9].clone(), ExecutionStatus::Running, Some("c2"), Some(now), false, 0, kept),
        (events()[1].clone(), ExecutionStatus::Paused, Some("c1"), Some(now), false, 1, kept),
        (events()[10].clone(), ExecutionStatus::Running, None, Some(now), false, 0, kept),
        (events()[11].clone(), ExecutionStatus::Running, None, None, true, 0, kept),
        (events()[7].clone(), ExecutionStatus::Running, None, Some(now), false, 0, after(LEASE)),
        (events()[0].clone(), ExecutionStatus::Running, None, None, false, 0, paused_until),
        (events()[2].clone(), ExecutionStatus::Running, None, None, false, 0, after(Duration::ZERO)),
        (events()[6].clone(), ExecutionStatus::Running, None, None, false, 0, after(Duration::ZERO)),
        (events()[5].clone(), ExecutionStatus::Paused, None, None, false, 0, kept),
    ];
    for (event, from, claim, beat, cancel, resumes, expires) in rows {
        let mut e = execution_in(from);
        let name = event.name();
        e.apply(event, now).unwrap();
        assert_eq!(
            (e.claim(), e.heartbeat_at(), e.cancel_requested(), e.resumes(), e.expires_at()),
            (claim, beat, cancel, resumes, expires),
            "{name} from {from:?}"
        );
    }
}

#[test]
fn a_run_is_taken_once_and_handed_on_without_a_runner() {
    let mut e = execution_in(ExecutionStatus::Running);
    e.apply(ExecutionEvent::HandOn { claim: "a".into(), lease: LEASE }, Timestamp::from_millis(1)).unwrap();
    let taken = e.apply(ExecutionEvent::Continue { claim: "b".into() }, Timestamp::from_millis(2));
    assert!(matches!(taken, Err(TransitionError::AlreadyClaimed { .. })));
    assert_eq!(e.claim(), Some("a"));
    let journal = Journal::new(Timestamp::from_millis(0), 1);
    e.apply(ExecutionEvent::Yield { journal, lease: LEASE }, Timestamp::from_millis(3)).unwrap();
    assert_eq!(e.claim(), None);
    e.apply(ExecutionEvent::Continue { claim: "b".into() }, Timestamp::from_millis(4)).unwrap();
    assert_eq!(e.claim(), Some("b"));
}

#[test]
fn each_event_names_who_made_it_happen() {
    let cases = [
        (claim(ApprovalAction::Accept, None), Actor::Decider(Decider::model(Channel::Model))),
        (
            ExecutionEvent::RequestCancel { by: Decider::model(Channel::Task) },
            Actor::Decider(Decider::model(Channel::Task)),
        ),
        (ExecutionEvent::Expire, Actor::Clock),
        (ExecutionEvent::Interrupt, Actor::Clock),
        (ExecutionEvent::Heartbeat, Actor::Runner),
        (ExecutionEvent::Complete { result: json!(1) }, Actor::Runner),
    ];
    for (event, by) in cases {
        assert_eq!(event.actor(), by, "{}", event.name());
    }
}
