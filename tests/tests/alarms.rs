//! The alarm handler against both stores, fed the payloads EventBridge
//! Scheduler delivers: every row of the decision table, its effects, and the
//! stale-alarm race.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use executor_core::{
    AlarmDecision, ClientInfo, ElicitationMode, Execution, ExecutionEvent, ExecutionId, ExecutionState, Journal,
    PendingCall, Principal, Session, SessionId, SessionStatus, Timeouts, Timestamp,
};
use executor_scheduler::{AlarmScheduler, InProcessScheduler};
use executor_service::{Alarms, Events};
use executor_store::{Access, Store, StoreError};
use serde_json::json;

executor_tests::on_both_stores!(
    missing_or_destroyed_sessions_are_ignored,
    recent_activity_reschedules,
    paused_work_extends_the_lease_up_to_the_cap,
    idle_sessions_are_destroyed_and_their_paused_work_lives_on,
    a_stale_alarm_does_not_destroy_a_session_that_became_active,
    a_redelivered_alarm_arms_the_next_generation_once,
    a_destroy_stores_session_destroyed_with_it,
);

const MIN: u64 = 60_000;

/// What the alarm function does with a Scheduler payload for `session`.
async fn fire(
    alarms: &Alarms,
    session: &SessionId,
    now: Timestamp,
) -> Result<AlarmDecision, executor_alarm_function::AlarmError> {
    fire_generation(alarms, session, None, now).await
}

/// The alarm of generation `armed_for` (as EventBridge delivers it) firing at `now`.
async fn fire_generation(
    alarms: &Alarms,
    session: &SessionId,
    armed_for: Option<Timestamp>,
    now: Timestamp,
) -> Result<AlarmDecision, executor_alarm_function::AlarmError> {
    let mut payload = json!({ "sessionId": session.as_str(), "scheduledFor": now.to_rfc3339() });
    if let Some(at) = armed_for {
        payload["generation"] = json!(at.as_millis());
    }
    executor_alarm_function::handle(alarms, payload, now).await
}

fn now() -> Timestamp {
    SystemTime::now().into()
}

fn alarms<S: Store + 'static>(store: &Arc<S>) -> (Alarms, Arc<InProcessScheduler>) {
    let scheduler = Arc::new(InProcessScheduler::new());
    let timeouts = Timeouts { session_timeout: Duration::from_millis(5 * MIN), ..Timeouts::default() };
    (Alarms::new(store.clone(), store.clone(), scheduler.clone(), timeouts), scheduler)
}

/// A session last active `idle_ms` before `at`.
async fn session<S: Store + 'static>(store: &Arc<S>, id: &str, at: Timestamp, idle_ms: u64) -> Session {
    let mut session = Session::new(
        SessionId::parse(id).unwrap(),
        Principal::parse("alice").unwrap(),
        Timestamp::from_millis(at.as_millis() - idle_ms - MIN),
        "2025-06-18",
        ClientInfo::default(),
        ElicitationMode::Model,
        at.plus(Duration::from_secs(86_400)),
    );
    session.last_activity_at = Timestamp::from_millis(at.as_millis() - idle_ms);
    store.create_session(&session).await.unwrap();
    session
}

async fn paused_in<S: Store + 'static>(store: &Arc<S>, id: &str, session: &Session) -> ExecutionId {
    let mut execution = Execution::start(
        ExecutionId::parse(id).unwrap(),
        session.owner.clone(),
        Some(session.id.clone()),
        ElicitationMode::Model,
        "await tools.w.x({})",
        Journal::new(now(), 1),
        now().plus(Duration::from_secs(86_400)),
    );
    let mut journal = execution.journal.clone();
    journal.add_pending(PendingCall::new(0, "w.x", json!({}), "?"));
    execution.apply(ExecutionEvent::Pause { journal, deadline: now().plus(Duration::from_secs(600)) }, now()).unwrap();
    store.create_execution(&execution).await.unwrap();
    execution.id
}

async fn missing_or_destroyed_sessions_are_ignored<S: Store + 'static>(store: Arc<S>) {
    let (alarms, scheduler) = alarms(&store);
    let ghost = SessionId::parse("ghost").unwrap();
    assert_eq!(fire(&alarms, &ghost, now()).await.unwrap(), AlarmDecision::Ignore);
    let mut gone = session(&store, "gone", now(), 20 * MIN).await;
    gone.destroy().unwrap();
    store.update_session(&mut gone).await.unwrap();
    assert_eq!(fire(&alarms, &gone.id, now()).await.unwrap(), AlarmDecision::Ignore);
    assert_eq!(scheduler.armed_at(&gone.id), None);
}

async fn recent_activity_reschedules<S: Store + 'static>(store: Arc<S>) {
    let (alarms, scheduler) = alarms(&store);
    let at = now();
    let s = session(&store, "busy", at, 2 * MIN).await;
    let expected = s.last_activity_at.plus(Duration::from_millis(5 * MIN));
    assert_eq!(fire(&alarms, &s.id, at).await.unwrap(), AlarmDecision::Reschedule { at: expected });
    assert_eq!(scheduler.armed_at(&s.id), Some(expected));
    assert_eq!(store.get_session(Access::Internal, &s.id).await.unwrap().alarm_at, Some(expected));
}

async fn paused_work_extends_the_lease_up_to_the_cap<S: Store + 'static>(store: Arc<S>) {
    let (alarms, scheduler) = alarms(&store);
    let at = now();
    let s = session(&store, "waiting", at, 12 * MIN).await;
    paused_in(&store, "p1", &s).await;
    let expected = at.plus(Duration::from_millis(3 * MIN));
    assert_eq!(fire(&alarms, &s.id, at).await.unwrap(), AlarmDecision::ExtendPausedLease { at: expected });
    assert_eq!(scheduler.armed_at(&s.id), Some(expected));
    let stored = store.get_session(Access::Internal, &s.id).await.unwrap();
    assert_eq!((stored.status, stored.alarm_at), (SessionStatus::Active, Some(expected)));
}

async fn idle_sessions_are_destroyed_and_their_paused_work_lives_on<S: Store + 'static>(store: Arc<S>) {
    let (alarms, scheduler) = alarms(&store);
    let at = now();
    let idle = session(&store, "idle", at, 6 * MIN).await;
    assert_eq!(fire(&alarms, &idle.id, at).await.unwrap(), AlarmDecision::Destroy);
    assert_eq!(store.get_session(Access::Internal, &idle.id).await.unwrap().status, SessionStatus::Destroyed);

    let capped = session(&store, "capped", at, 16 * MIN).await;
    let paused = paused_in(&store, "p2", &capped).await;
    scheduler.schedule(&capped.id, at.plus(Duration::from_secs(3600))).await.unwrap();
    let mut armed = store.get_session(Access::Internal, &capped.id).await.unwrap();
    armed.alarm_at = Some(at.plus(Duration::from_secs(3600)));
    store.update_session(&mut armed).await.unwrap();
    assert_eq!(fire(&alarms, &capped.id, at).await.unwrap(), AlarmDecision::Destroy, "past the cap, paused or not");
    assert_eq!(store.get_session(Access::Internal, &capped.id).await.unwrap().status, SessionStatus::Destroyed);
    // The pause belongs to its owner: still paused, still resumable, until its own deadline.
    let execution = store.get_execution(Access::Owner(&capped.owner), &paused).await.unwrap();
    assert!(matches!(execution.state(), ExecutionState::Paused { .. }), "{:?}", execution.state());
    assert_eq!(scheduler.armed_at(&capped.id), None, "the pending alarm is disarmed");
}

async fn a_stale_alarm_does_not_destroy_a_session_that_became_active<S: Store + 'static>(store: Arc<S>) {
    let (alarms, _scheduler) = alarms(&store);
    let at = now();
    let s = session(&store, "revived", at, 6 * MIN).await;
    // The alarm read the idle session; then activity landed before its write.
    let mut stale = store.get_session(Access::Internal, &s.id).await.unwrap();
    let mut revived = stale.clone();
    revived.last_activity_at = at;
    store.update_session(&mut revived).await.unwrap();
    let lost = alarms.destroy(&mut stale).await;
    assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
    assert_eq!(store.get_session(Access::Internal, &s.id).await.unwrap().status, SessionStatus::Active);
    // Firing decides again from what is stored now.
    let decision = fire(&alarms, &s.id, at).await.unwrap();
    assert_eq!(decision, AlarmDecision::Reschedule { at: at.plus(Duration::from_millis(5 * MIN)) });
    assert_eq!(store.get_session(Access::Internal, &s.id).await.unwrap().status, SessionStatus::Active);
}

async fn a_redelivered_alarm_arms_the_next_generation_once<S: Store + 'static>(store: Arc<S>) {
    let (alarms, scheduler) = alarms(&store);
    let at = now();
    let s = session(&store, "redelivered", at, 2 * MIN).await;
    let fired = at;
    let next = s.last_activity_at.plus(Duration::from_millis(5 * MIN));
    assert_eq!(fire_generation(&alarms, &s.id, Some(fired), at).await.unwrap(), AlarmDecision::Reschedule { at: next });
    // The process died after its write and before arming (or its answer was
    // lost): the same alarm is delivered again, later.
    scheduler.cancel(&s.id, next).await.unwrap();
    assert_eq!(scheduler.armed_at(&s.id), None);
    let later = at.plus(Duration::from_secs(30));
    let again = fire_generation(&alarms, &s.id, Some(fired), later).await.unwrap();
    assert_eq!(again, AlarmDecision::Ignore, "decided already: no second chain of alarms");
    assert_eq!(scheduler.armed_at(&s.id), Some(next), "the decided generation is armed");
    let stored = store.get_session(Access::Internal, &s.id).await.unwrap();
    assert_eq!((stored.alarm_at, stored.version), (Some(next), s.version + 1), "one write in all");
}

async fn a_destroy_stores_session_destroyed_with_it<S: Store + 'static>(store: Arc<S>) {
    // A receiver that never answers: whatever the alarm stored stays in the outbox.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/events", silent.local_addr().unwrap());
    let sink = Arc::new(executor_events::Webhook::new(url).unwrap());
    let events = Events::new(store.clone(), sink, Arc::new(executor_core::SystemClock), None);
    let (alarms, _scheduler) = alarms(&store);
    let alarms = alarms.with_events(Some(events));
    let at = now();
    let active = session(&store, "active", at, MIN).await;
    assert!(matches!(fire(&alarms, &active.id, at).await.unwrap(), AlarmDecision::Reschedule { .. }));
    assert_eq!(store.pending_events(10).await.unwrap(), vec![], "a reschedule is no lifecycle event");

    let idle = session(&store, "idle", at, 6 * MIN).await;
    assert_eq!(fire(&alarms, &idle.id, at).await.unwrap(), AlarmDecision::Destroy);
    let pending = store.pending_events(10).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].detail_type.as_str(), "Session Destroyed");
    assert_eq!(pending[0].detail, json!({ "sessionId": "idle", "owner": "alice", "status": "destroyed" }));
}
