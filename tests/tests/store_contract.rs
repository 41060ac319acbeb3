//! One contract for every storage adapter: each test below runs against the
//! embedded store and against DynamoDB (moto_server), as `embedded::<name>` and
//! `dynamodb::<name>`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use executor_core::{
    AllowedBy, ApiKey, ApprovalAction, CONSOLE_LINK_TTL, CONSOLE_LOGIN_TTL, CallOutcome, Called, Channel, ClientInfo,
    ConsoleGrant, ConsoleSecret, ConsoleSecretKind, DEFAULT_CONSOLE_SESSION, DecidedBy, Decider, ElicitationMode,
    Event, Execution, ExecutionEvent, ExecutionId, ExecutionRecord, ExecutionState, ExecutionStatus, Grant, GrantId,
    GrantedBy, Happened, HistoryAppend, HistoryEntry, Journal, JournalStep, LinkStatus, ManualClock, OAuthClient,
    OAuthState, PendingCall, Principal, QuotaLimit, Session, SessionId, SessionStatus, SourceConnection, StepOutcome,
    Timestamp, TokenHash, execution_events, session_destroyed,
};
use executor_store::{
    Access, AuditLine, Emitted, HourlyTake, MAX_CURSOR_BYTES, MAX_SNAPSHOT_BYTES, Page, QuotaOutcome, QuotaTake,
    SlotTake, Store, StoreError, Ungranted,
};
use serde_json::json;

executor_tests::on_both_stores!(
    session_create_is_conditional,
    sessions_are_invisible_to_other_owners,
    session_update_is_conditional_on_version,
    expired_records_read_as_absent,
    execution_create_is_conditional_and_owned,
    execution_transitions_are_conditional_on_version,
    paused_index_follows_execution_state,
    claim_race_has_exactly_one_winner,
    identical_claims_are_still_two_writes,
    large_journal_round_trips_in_chunks,
    oversized_snapshot_is_refused_and_loses_nothing,
    api_keys_are_found_by_hash_only,
    api_keys_are_listed_and_revoked,
    key_uses_are_recorded_at_most_once_per_resolution,
    hourly_quota_race_lets_exactly_the_limit_through,
    slots_are_taken_released_and_expire,
    a_refused_take_counts_nothing,
    grants_are_one_per_owner_and_tool,
    grants_are_revoked_by_id_and_owner,
    expired_grants_read_as_absent,
    events_are_stored_with_the_change_they_describe,
    a_refused_write_stores_no_event,
    session_writes_store_their_events,
    pending_events_are_oldest_first_and_limited,
    expired_events_read_as_absent,
    connections_are_one_per_owner_and_source,
    connection_writes_are_conditional_on_version,
    connection_refresh_race_has_exactly_one_winner,
    oauth_states_are_one_per_execution_and_taken_once,
    a_state_taken_by_racing_callbacks_has_exactly_one_winner,
    oauth_client_registrations_are_conditional,
    concurrent_registrations_have_exactly_one_winner,
    expired_oauth_clients_read_as_absent,
    history_is_written_with_its_change_and_not_by_a_refused_write,
    a_write_refused_for_size_stores_no_history,
    executions_are_listed_newest_first_per_owner_and_paged,
    every_owners_executions_are_listed_for_the_service,
    history_is_read_in_order_and_by_its_owner_only,
    history_of_an_unstored_execution_is_listed_and_read,
    a_queued_history_is_read_at_once_and_a_refused_one_changes_nothing,
    expired_history_reads_as_absent,
    export_returns_every_owners_entries_and_pages_without_loss,
    a_large_history_round_trips_in_split_items,
    all_grants_lists_every_owners_live_grants,
    a_pause_that_checks_grants_is_refused_by_a_live_one_and_stores_nothing,
    racing_creates_with_one_idempotency_key_have_exactly_one_winner,
    console_secrets_are_taken_once_and_only_as_their_kind,
    racing_takes_of_a_console_link_have_exactly_one_winner,
    revoking_console_sessions_signs_out_only_that_owner,
);

/// Like `on_both_stores!`, for tests that move time: each store judges
/// expiry by a manual clock the test holds (`clocked::embedded::<name>`,
/// `clocked::dynamodb::<name>`).
macro_rules! on_both_stores_with_clock {
    ($($test:ident),* $(,)?) => {
        mod clocked {
            mod embedded {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                    async fn $test() {
                        let clock = std::sync::Arc::new(executor_core::ManualClock::starting_now());
                        let (store, _dir) = executor_tests::embedded_store();
                        super::super::$test(std::sync::Arc::new(store.with_clock(clock.clone())), clock).await;
                    }
                )*
            }
            mod dynamodb {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                    async fn $test() {
                        let clock = std::sync::Arc::new(executor_core::ManualClock::starting_now());
                        let (store, _client) = executor_tests::dynamo_store().await;
                        super::super::$test(std::sync::Arc::new(store.with_clock(clock.clone())), clock).await;
                    }
                )*
            }
        }
    };
}

on_both_stores_with_clock!(
    history_outlives_its_execution_until_its_own_expiry,
    an_idempotency_key_is_taken_for_its_window_only,
    expired_console_secrets_read_as_absent,
);

fn now() -> Timestamp {
    SystemTime::now().into()
}

fn hours(h: u64) -> Duration {
    Duration::from_secs(h * 3600)
}

fn alice() -> Principal {
    Principal::parse("alice").unwrap()
}

fn bob() -> Principal {
    Principal::parse("bob").unwrap()
}

fn sid(s: &str) -> SessionId {
    SessionId::parse(s).unwrap()
}

fn eid(s: &str) -> ExecutionId {
    ExecutionId::parse(s).unwrap()
}

fn session(id: &str, owner: Principal) -> Session {
    let client =
        ClientInfo { name: "claude-code".into(), version: "2.1".into(), capabilities: json!({"elicitation": {}}) };
    Session::new(sid(id), owner, now(), "2025-06-18", client, ElicitationMode::Browser, now().plus(hours(24)))
}

/// A running execution of `owner`, optionally in a session.
fn running(id: &str, owner: Principal, session: Option<&str>) -> Execution {
    Execution::start(
        eid(id),
        owner,
        session.map(sid),
        ElicitationMode::Model,
        "const r = await tools.gh.issues.create({title: 'x'}); return r;",
        Journal::new(now(), 42),
        now().plus(hours(24)),
    )
}

/// The owner deciding through the JSON API with their key.
fn by_api() -> Decider {
    Decider { channel: Channel::OwnerApi, by: DecidedBy::key(&alice(), &TokenHash::of_token("exk_alice")) }
}

fn pause(execution: &mut Execution, deadline: Timestamp) {
    let mut journal = execution.journal.clone();
    let step = u32::try_from(journal.steps.len() + journal.pending.len()).unwrap();
    journal.add_pending(PendingCall::new(step, "gh.issues.create", json!({"title": "x"}), "Create an issue?"));
    execution.apply(ExecutionEvent::Pause { journal, deadline }, now()).unwrap();
}

fn paused(id: &str, owner: Principal, session: Option<&str>) -> Execution {
    let mut e = running(id, owner, session);
    pause(&mut e, now().plus(Duration::from_secs(600)));
    e
}

/// A journal whose JSON is about `bytes` long.
fn journal_of_size(bytes: usize) -> Journal {
    let mut journal = Journal::new(now(), 7);
    let per_step = 10_000;
    for step in 0..(bytes / per_step) as u32 {
        // Varied content, so no layer can shrink it by accident.
        let data: String =
            (0..per_step).map(|i| char::from(b'a' + ((i * 7 + step as usize * 13) % 26) as u8)).collect();
        journal.record(JournalStep {
            step,
            path: "files.read".into(),
            args_hash: executor_core::ArgsHash::of(&json!({"n": step})),
            outcome: StepOutcome::Ok { data: json!(data) },
            completed_at: now(),
        });
    }
    journal
}

fn assert_not_found<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(matches!(result, Err(StoreError::NotFound { .. })), "expected NotFound, got {result:?}");
}

async fn session_create_is_conditional<S: Store + 'static>(store: Arc<S>) {
    let s = session("s1", alice());
    store.create_session(&s).await.unwrap();
    let again = store.create_session(&session("s1", bob())).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists { what: "session" })), "{again:?}");
    // The first one is untouched.
    assert_eq!(store.get_session(Access::Owner(&alice()), &sid("s1")).await.unwrap(), s);
    assert_not_found(store.get_session(Access::Owner(&alice()), &sid("nope")).await);
}

async fn sessions_are_invisible_to_other_owners<S: Store + 'static>(store: Arc<S>) {
    let s = session("s1", alice());
    store.create_session(&s).await.unwrap();
    let as_bob = store.get_session(Access::Owner(&bob()), &sid("s1")).await;
    // Exactly the answer for a session that does not exist: no hint it is there.
    assert_eq!(
        as_bob.unwrap_err().to_string(),
        store.get_session(Access::Owner(&bob()), &sid("missing")).await.unwrap_err().to_string()
    );
    assert_eq!(store.get_session(Access::Internal, &sid("s1")).await.unwrap(), s);
}

async fn session_update_is_conditional_on_version<S: Store + 'static>(store: Arc<S>) {
    let mut s = session("s1", alice());
    store.create_session(&s).await.unwrap();
    let mut stale = s.clone();

    s.last_activity_at = s.last_activity_at.plus(Duration::from_secs(40));
    store.update_session(&mut s).await.unwrap();
    assert_eq!(s.version, 1);

    stale.destroy().unwrap();
    let lost = store.update_session(&mut stale).await;
    assert!(matches!(lost, Err(StoreError::Conflict { what: "session" })), "{lost:?}");
    assert_eq!(stale.version, 0, "a failed write leaves the caller's version alone");

    let stored = store.get_session(Access::Owner(&alice()), &sid("s1")).await.unwrap();
    assert_eq!(stored, s);
    assert_eq!(stored.status, SessionStatus::Active);

    s.destroy().unwrap();
    store.update_session(&mut s).await.unwrap();
    let stored = store.get_session(Access::Internal, &sid("s1")).await.unwrap();
    assert_eq!((stored.status, stored.version), (SessionStatus::Destroyed, 2));

    let mut ghost = session("ghost", alice());
    assert_not_found(store.update_session(&mut ghost).await);
}

async fn expired_records_read_as_absent<S: Store + 'static>(store: Arc<S>) {
    let mut old = session("s1", alice());
    old.expires_at = Timestamp::from_millis(now().as_millis() - 5_000);
    store.create_session(&old).await.unwrap();
    assert_not_found(store.get_session(Access::Internal, &sid("s1")).await);
    assert_not_found(store.update_session(&mut old.clone()).await);
    // An expired record does not block its id: the TTL may not have deleted it yet.
    let fresh = session("s1", bob());
    store.create_session(&fresh).await.unwrap();
    assert_eq!(store.get_session(Access::Owner(&bob()), &sid("s1")).await.unwrap(), fresh);

    let long_ago = Timestamp::from_millis(now().as_millis() - 5_000);
    let mut e =
        Execution::start(eid("e1"), alice(), None, ElicitationMode::Model, "1", Journal::new(now(), 1), long_ago);
    store.create_execution(&e).await.unwrap();
    assert_not_found(store.get_execution(Access::Owner(&alice()), &eid("e1")).await);
    assert_not_found(store.update_execution(&mut e).await);
}

async fn execution_create_is_conditional_and_owned<S: Store + 'static>(store: Arc<S>) {
    let e = paused("e1", alice(), Some("s1"));
    store.create_execution(&e).await.unwrap();
    let again = store.create_execution(&running("e1", bob(), None)).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists { what: "execution" })), "{again:?}");
    assert_eq!(store.get_execution(Access::Owner(&alice()), &eid("e1")).await.unwrap(), e);
    assert_eq!(store.get_execution(Access::Internal, &eid("e1")).await.unwrap(), e);
    assert_not_found(store.get_execution(Access::Owner(&bob()), &eid("e1")).await);
    assert_not_found(store.get_execution(Access::Owner(&alice()), &eid("e2")).await);
}

async fn execution_transitions_are_conditional_on_version<S: Store + 'static>(store: Arc<S>) {
    let alice = alice();
    let mut e = running("e1", alice.clone(), Some("s1"));
    store.create_execution(&e).await.unwrap();

    pause(&mut e, now().plus(Duration::from_secs(600)));
    e.mode = ElicitationMode::Browser;
    e.links.open(TokenHash::of_token("link"));
    store.update_execution(&mut e).await.unwrap();
    let mut stale = e.clone();
    let stored = store.get_execution(Access::Owner(&alice), &eid("e1")).await.unwrap();
    assert_eq!(stored.links.status(&TokenHash::of_token("link")), LinkStatus::Open);

    let link = Some(TokenHash::of_token("link"));
    e.apply(ExecutionEvent::Claim { action: ApprovalAction::Accept, link, claim: "c".into(), by: by_api() }, now())
        .unwrap();
    store.update_execution(&mut e).await.unwrap();
    e.apply(ExecutionEvent::Complete { result: json!({"id": 7}) }, now()).unwrap();
    e.logs = vec!["created".into()];
    store.update_execution(&mut e).await.unwrap();
    assert_eq!(e.version, 3);

    // A second resumer that read the paused version loses, whatever it tries.
    stale.apply(ExecutionEvent::Expire, now()).unwrap();
    let lost = store.update_execution(&mut stale).await;
    assert!(matches!(lost, Err(StoreError::Conflict { what: "execution" })), "{lost:?}");

    let stored = store.get_execution(Access::Owner(&alice), &eid("e1")).await.unwrap();
    assert_eq!(stored, e);
    assert_eq!(*stored.state(), ExecutionState::Completed { result: json!({"id": 7}) });
}

async fn paused_index_follows_execution_state<S: Store + 'static>(store: Arc<S>) {
    let (alice, bob) = (alice(), bob());
    let mut a = paused("a", alice.clone(), Some("s1"));
    let b = paused("b", alice.clone(), Some("s1"));
    let elsewhere = paused("c", alice.clone(), Some("s2"));
    let stateless = paused("d", alice.clone(), None);
    let mut overdue = running("late", alice.clone(), Some("s1"));
    pause(&mut overdue, Timestamp::from_millis(now().as_millis() - 1_000));
    for e in [&a, &b, &elsewhere, &stateless, &overdue] {
        store.create_execution(e).await.unwrap();
    }

    let mut ids = store.paused_executions(Access::Internal, &sid("s1")).await.unwrap();
    ids.sort();
    assert_eq!(ids, [eid("a"), eid("b")], "paused past the approval window does not count");
    assert_eq!(store.paused_executions(Access::Owner(&alice), &sid("s1")).await.unwrap().len(), 2);
    assert!(store.paused_executions(Access::Owner(&bob), &sid("s1")).await.unwrap().is_empty());
    assert!(store.paused_executions(Access::Internal, &sid("none")).await.unwrap().is_empty());

    a.apply(
        ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None, claim: "c".into(), by: by_api() },
        now(),
    )
    .unwrap();
    store.update_execution(&mut a).await.unwrap();
    assert_eq!(store.paused_executions(Access::Internal, &sid("s1")).await.unwrap(), [eid("b")]);

    // Paused again at the next approval: back in the index.
    pause(&mut a, now().plus(Duration::from_secs(600)));
    store.update_execution(&mut a).await.unwrap();
    assert_eq!(store.paused_executions(Access::Internal, &sid("s1")).await.unwrap().len(), 2);
    assert_eq!(store.get_execution(Access::Internal, &eid("a")).await.unwrap().journal.pending.len(), 2);

    a.apply(ExecutionEvent::Expire, now()).unwrap();
    store.update_execution(&mut a).await.unwrap();
    assert_eq!(store.paused_executions(Access::Internal, &sid("s1")).await.unwrap(), [eid("b")]);
}

async fn claim_race_has_exactly_one_winner<S: Store + 'static>(store: Arc<S>) {
    const CLAIMERS: usize = 32;
    store.create_execution(&paused("race", alice(), Some("s1"))).await.unwrap();
    let start = Arc::new(tokio::sync::Barrier::new(CLAIMERS));
    let claims = (0..CLAIMERS).map(|i| {
        let (store, start) = (store.clone(), start.clone());
        tokio::spawn(async move {
            let owner = alice();
            let mut e = store.get_execution(Access::Owner(&owner), &eid("race")).await.unwrap();
            let action = if i % 2 == 0 { ApprovalAction::Accept } else { ApprovalAction::Decline };
            e.apply(ExecutionEvent::Claim { action, link: None, claim: "c".into(), by: by_api() }, now()).unwrap();
            start.wait().await;
            store.update_execution(&mut e).await.map(|()| action)
        })
    });
    let mut winners = Vec::new();
    for claim in claims.collect::<Vec<_>>() {
        match claim.await.unwrap() {
            Ok(action) => winners.push(action),
            Err(StoreError::Conflict { .. }) => {}
            Err(other) => panic!("a losing claim must get Conflict, got {other}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one of {CLAIMERS} claims wins");
    let stored = store.get_execution(Access::Internal, &eid("race")).await.unwrap();
    assert_eq!(*stored.state(), ExecutionState::Resuming { action: winners[0] });
    assert_eq!(stored.version, 1);
    assert!(store.paused_executions(Access::Internal, &sid("s1")).await.unwrap().is_empty());
}

/// Two claimers whose writes carry the same content (same action, same
/// instant, no link) are still two writes: the second must not mistake the
/// first one's item for its own write whose answer was lost.
async fn identical_claims_are_still_two_writes<S: Store + 'static>(store: Arc<S>) {
    store.create_execution(&paused("twin", alice(), Some("s1"))).await.unwrap();
    let at = now();
    let mut first = store.get_execution(Access::Owner(&alice()), &eid("twin")).await.unwrap();
    let mut second = first.clone();
    for claim in [&mut first, &mut second] {
        claim
            .apply(
                ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None, claim: "c".into(), by: by_api() },
                at,
            )
            .unwrap();
    }
    assert_eq!(first, second, "the two claims under test are identical");
    store.update_execution(&mut first).await.unwrap();
    let lost = store.update_execution(&mut second).await;
    assert!(matches!(lost, Err(StoreError::Conflict { .. })), "the second identical claim got {lost:?}");
}

async fn large_journal_round_trips_in_chunks<S: Store + 'static>(store: Arc<S>) {
    let mut e = running("big", alice(), Some("s1"));
    e.journal = journal_of_size(1_500_000);
    pause(&mut e, now().plus(Duration::from_secs(600)));
    let size = serde_json::to_vec(&e).unwrap().len();
    assert!(size > 1_500_000, "the snapshot under test is {size} bytes");
    store.create_execution(&e).await.unwrap();
    assert_eq!(store.get_execution(Access::Owner(&alice()), &eid("big")).await.unwrap(), e);

    e.apply(
        ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None, claim: "c".into(), by: by_api() },
        now(),
    )
    .unwrap();
    store.update_execution(&mut e).await.unwrap();
    assert_eq!(store.get_execution(Access::Owner(&alice()), &eid("big")).await.unwrap(), e);

    // Shrinking leaves no trace of the old chunks in what is read.
    e.journal = journal_of_size(20_000);
    e.apply(ExecutionEvent::Complete { result: json!("done") }, now()).unwrap();
    store.update_execution(&mut e).await.unwrap();
    assert_eq!(store.get_execution(Access::Owner(&alice()), &eid("big")).await.unwrap(), e);
}

async fn oversized_snapshot_is_refused_and_loses_nothing<S: Store + 'static>(store: Arc<S>) {
    let mut huge = running("huge", alice(), Some("s1"));
    huge.journal = journal_of_size(MAX_SNAPSHOT_BYTES + 100_000);
    let refused = store.create_execution(&huge).await;
    match refused {
        Err(StoreError::TooLarge { size, limit, .. }) => assert!(size > limit && limit == MAX_SNAPSHOT_BYTES),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_not_found(store.get_execution(Access::Internal, &eid("huge")).await);

    let mut e = paused("e1", alice(), Some("s1"));
    store.create_execution(&e).await.unwrap();
    let before = e.clone();
    e.journal = journal_of_size(MAX_SNAPSHOT_BYTES + 100_000);
    let refused = store.update_execution(&mut e).await;
    assert!(matches!(refused, Err(StoreError::TooLarge { .. })), "{refused:?}");
    assert!(refused.unwrap_err().to_string().contains("return less data"));
    assert_eq!(store.get_execution(Access::Internal, &eid("e1")).await.unwrap(), before);
    assert_eq!(store.paused_executions(Access::Internal, &sid("s1")).await.unwrap(), [eid("e1")]);
}

async fn api_keys_are_found_by_hash_only<S: Store + 'static>(store: Arc<S>) {
    let token = "exk_0123456789abcdef";
    let key = ApiKey { hash: TokenHash::of_token(token), owner: alice(), created_at: now(), toolkit: None };
    store.create_key(&key).await.unwrap();
    assert_eq!(store.find_key(&TokenHash::of_token(token)).await.unwrap(), key);
    let dup = store.create_key(&ApiKey { owner: bob(), ..key.clone() }).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists { what: "API key" })), "{dup:?}");
    assert_eq!(store.find_key(&key.hash).await.unwrap().owner, alice());
    assert_not_found(store.find_key(&TokenHash::of_token("exk_wrong")).await);
}

async fn api_keys_are_listed_and_revoked<S: Store + 'static>(store: Arc<S>) {
    assert!(store.list_keys().await.unwrap().is_empty());
    let keys: Vec<ApiKey> = ["exk_a", "exk_b", "exk_c"]
        .iter()
        .map(|t| ApiKey { hash: TokenHash::of_token(t), owner: alice(), created_at: now(), toolkit: None })
        .collect();
    for key in &keys {
        store.create_key(key).await.unwrap();
    }
    let mut listed: Vec<String> = store.list_keys().await.unwrap().iter().map(|k| k.hash.as_str().to_owned()).collect();
    listed.sort();
    let mut expected: Vec<String> = keys.iter().map(|k| k.hash.as_str().to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected);

    store.revoke_key(&keys[1].hash).await.unwrap();
    assert_not_found(store.find_key(&keys[1].hash).await);
    assert_not_found(store.revoke_key(&keys[1].hash).await);
    assert_eq!(store.list_keys().await.unwrap().len(), 2);
    assert_eq!(store.find_key(&keys[0].hash).await.unwrap(), keys[0]);
}

async fn key_uses_are_recorded_at_most_once_per_resolution<S: Store + 'static>(store: Arc<S>) {
    use executor_store::KEY_USE_RESOLUTION;
    let key =
        |token: &str| ApiKey { hash: TokenHash::of_token(token), owner: alice(), created_at: now(), toolkit: None };
    let (used, idle) = (key("exk_used"), key("exk_idle"));
    store.create_key(&used).await.unwrap();
    store.create_key(&idle).await.unwrap();
    let last_used = |hash: TokenHash| {
        let store = store.clone();
        async move {
            let uses = store.list_key_uses().await.unwrap();
            uses.into_iter().find(|u| u.key.hash == hash).map(|u| (u.key, u.last_used))
        }
    };
    assert_eq!(last_used(used.hash.clone()).await, Some((used.clone(), None)), "never used yet");

    let first = now();
    store.record_key_use(&used.hash, first).await.unwrap();
    assert_eq!(last_used(used.hash.clone()).await, Some((used.clone(), Some(first))));
    assert_eq!(last_used(idle.hash.clone()).await, Some((idle.clone(), None)), "only that key");
    assert_eq!(store.find_key(&used.hash).await.unwrap(), used, "the key itself is unchanged");
    assert_eq!(store.list_keys().await.unwrap().len(), 2);

    // Within the resolution nothing is written; the recorded time never goes back.
    store.record_key_use(&used.hash, first.plus(KEY_USE_RESOLUTION / 2)).await.unwrap();
    store.record_key_use(&used.hash, Timestamp::from_millis(first.as_millis() - 3_600_000)).await.unwrap();
    assert_eq!(last_used(used.hash.clone()).await.unwrap().1, Some(first));
    let later = first.plus(KEY_USE_RESOLUTION);
    store.record_key_use(&used.hash, later).await.unwrap();
    assert_eq!(last_used(used.hash.clone()).await.unwrap().1, Some(later));

    // Racing recorders of one use (instances verifying the same key): it is recorded.
    let racing = later.plus(hours(1));
    let recorders: Vec<_> = (0..8)
        .map(|_| {
            let (store, hash) = (store.clone(), used.hash.clone());
            tokio::spawn(async move { store.record_key_use(&hash, racing).await })
        })
        .collect();
    for recorder in recorders {
        recorder.await.unwrap().unwrap();
    }
    assert_eq!(last_used(used.hash.clone()).await.unwrap().1, Some(racing));

    // A key revoked meanwhile, or one that never was, is not brought into being.
    store.revoke_key(&used.hash).await.unwrap();
    store.record_key_use(&used.hash, racing.plus(hours(1))).await.unwrap();
    store.record_key_use(&TokenHash::of_token("exk_never"), now()).await.unwrap();
    assert_not_found(store.find_key(&used.hash).await);
    assert_not_found(store.find_key(&TokenHash::of_token("exk_never")).await);
    let left: Vec<ApiKey> = store.list_key_uses().await.unwrap().into_iter().map(|u| u.key).collect();
    assert_eq!(left, [idle]);
}

/// A take of one of the hour's executions (window at `window` ms) and, with
/// `slot`, a running slot for `execution` leased until `until`.
fn take(owner: Principal, window: u64, limit: u32, slot: Option<(&str, u32, Timestamp)>) -> QuotaTake {
    QuotaTake {
        owner,
        now: now(),
        hourly: Some(HourlyTake { window: Timestamp::from_millis(window), limit }),
        slot: slot.map(|(id, limit, until)| SlotTake { execution: eid(id), limit, lease_until: until }),
    }
}

/// N racing takes against a limit of L: exactly L fit; another owner and
/// another hour have their own counts.
async fn hourly_quota_race_lets_exactly_the_limit_through<S: Store + 'static>(store: Arc<S>) {
    const RACERS: usize = 12;
    const LIMIT: u32 = 5;
    let hour = now().as_millis() / 3_600_000 * 3_600_000;
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let racers = (0..RACERS).map(|_| {
        let (store, start) = (store.clone(), start.clone());
        tokio::spawn(async move {
            start.wait().await;
            store.take_quota(&take(alice(), hour, LIMIT, None)).await.unwrap()
        })
    });
    let mut taken = 0;
    for racer in racers.collect::<Vec<_>>() {
        match racer.await.unwrap() {
            QuotaOutcome::Taken => taken += 1,
            QuotaOutcome::Refused(limit) => assert_eq!(limit, QuotaLimit::ExecutionsPerHour),
        }
    }
    assert_eq!(taken, LIMIT, "exactly the limit of {RACERS} racing takes fit");
    let again = store.take_quota(&take(alice(), hour, LIMIT, None)).await.unwrap();
    assert_eq!(again, QuotaOutcome::Refused(QuotaLimit::ExecutionsPerHour));
    assert_eq!(store.take_quota(&take(bob(), hour, LIMIT, None)).await.unwrap(), QuotaOutcome::Taken);
    let next_hour = store.take_quota(&take(alice(), hour + 3_600_000, LIMIT, None)).await.unwrap();
    assert_eq!(next_hour, QuotaOutcome::Taken, "a new hour counts from zero");
}

/// Slots: two of two taken, the third refused; a release frees one; a lease
/// that ran out (its holder vanished) frees its slot for the next take.
async fn slots_are_taken_released_and_expire<S: Store + 'static>(store: Arc<S>) {
    let hour = now().as_millis() / 3_600_000 * 3_600_000;
    let later = now().plus(hours(1));
    let slot = |id: &'static str, until: Timestamp| take(alice(), hour, 100, Some((id, 2, until)));
    assert_eq!(store.take_quota(&slot("e1", later)).await.unwrap(), QuotaOutcome::Taken);
    assert_eq!(store.take_quota(&slot("e2", later)).await.unwrap(), QuotaOutcome::Taken);
    let full = store.take_quota(&slot("e3", later)).await.unwrap();
    assert_eq!(full, QuotaOutcome::Refused(QuotaLimit::ConcurrentExecutions));
    store.release_slot(&alice(), &eid("e1")).await.unwrap();
    assert_eq!(store.take_quota(&slot("e3", later)).await.unwrap(), QuotaOutcome::Taken);
    // Releasing again is a no-op.
    store.release_slot(&alice(), &eid("e1")).await.unwrap();

    // e2 and e3 hold both slots; e2's holder vanished and its lease runs out.
    store.release_slot(&alice(), &eid("e2")).await.unwrap();
    let past = Timestamp::from_millis(now().as_millis() - 1000);
    assert_eq!(store.take_quota(&slot("stale", past)).await.unwrap(), QuotaOutcome::Taken);
    let fresh = store.take_quota(&slot("e4", later)).await.unwrap();
    assert_eq!(fresh, QuotaOutcome::Taken, "the lease that ran out no longer holds a slot");
    let full = store.take_quota(&slot("e5", later)).await.unwrap();
    assert_eq!(full, QuotaOutcome::Refused(QuotaLimit::ConcurrentExecutions));
}

/// A take refused by one limit counts nothing against the other.
async fn a_refused_take_counts_nothing<S: Store + 'static>(store: Arc<S>) {
    let hour = now().as_millis() / 3_600_000 * 3_600_000;
    let later = now().plus(hours(1));
    let both = |id: &'static str| take(alice(), hour, 2, Some((id, 1, later)));
    assert_eq!(store.take_quota(&both("e1")).await.unwrap(), QuotaOutcome::Taken);
    let full = store.take_quota(&both("e2")).await.unwrap();
    assert_eq!(full, QuotaOutcome::Refused(QuotaLimit::ConcurrentExecutions));
    store.release_slot(&alice(), &eid("e1")).await.unwrap();
    // Had the refused take counted its hour, this would be the third of two.
    assert_eq!(store.take_quota(&both("e3")).await.unwrap(), QuotaOutcome::Taken);
    store.release_slot(&alice(), &eid("e3")).await.unwrap();
    let over = store.take_quota(&both("e4")).await.unwrap();
    assert_eq!(over, QuotaOutcome::Refused(QuotaLimit::ExecutionsPerHour));
    assert_eq!(store.take_quota(&take(alice(), hour, 3, None)).await.unwrap(), QuotaOutcome::Taken);
}

fn grant(id: &str, owner: Principal, tool: &str) -> Grant {
    Grant::new(GrantId::parse(id).unwrap(), owner, tool, GrantedBy::ApprovalPage, now(), hours(24))
}

fn sorted(mut grants: Vec<Grant>) -> Vec<Grant> {
    grants.sort_by(|a, b| a.id.cmp(&b.id));
    grants
}

async fn grants_are_one_per_owner_and_tool<S: Store + 'static>(store: Arc<S>) {
    let g1 = grant("g1", alice(), "gh.issues.create");
    store.create_grant(&g1).await.unwrap();
    // A second grant of the same tool for the same owner is refused; the first stands.
    let again = store.create_grant(&grant("g2", alice(), "gh.issues.create")).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists { what: "grant" })), "{again:?}");
    let g3 = grant("g3", alice(), "gh.issues.delete");
    let g4 = grant("g4", bob(), "gh.issues.create");
    store.create_grant(&g3).await.unwrap();
    store.create_grant(&g4).await.unwrap();
    assert_eq!(sorted(store.list_grants(&alice()).await.unwrap()), vec![g1, g3]);
    assert_eq!(store.list_grants(&bob()).await.unwrap(), vec![g4]);
    assert_eq!(store.list_grants(&Principal::parse("carol").unwrap()).await.unwrap(), vec![]);
}

async fn grants_are_revoked_by_id_and_owner<S: Store + 'static>(store: Arc<S>) {
    let (g1, g2) = (grant("g1", alice(), "gh.issues.create"), grant("g2", bob(), "gh.issues.create"));
    store.create_grant(&g1).await.unwrap();
    store.create_grant(&g2).await.unwrap();
    // Another owner's grant is not found, exactly like a missing one; nothing is deleted.
    assert_not_found(store.revoke_grant(Access::Owner(&bob()), &g1.id).await);
    assert_not_found(store.revoke_grant(Access::Owner(&bob()), &GrantId::parse("nope").unwrap()).await);
    assert_eq!(store.list_grants(&alice()).await.unwrap(), vec![g1.clone()]);

    assert_eq!(store.revoke_grant(Access::Owner(&alice()), &g1.id).await.unwrap(), g1);
    assert_eq!(store.list_grants(&alice()).await.unwrap(), vec![]);
    assert_not_found(store.revoke_grant(Access::Owner(&alice()), &g1.id).await);

    // The service (the admin command) finds a grant by id alone.
    assert_eq!(store.revoke_grant(Access::Internal, &g2.id).await.unwrap(), g2);
    assert_eq!(store.list_grants(&bob()).await.unwrap(), vec![]);
    assert_not_found(store.revoke_grant(Access::Internal, &g2.id).await);

    // The tool may be granted again once revoked, under a new id; the old id revokes nothing.
    let g3 = grant("g3", alice(), "gh.issues.create");
    store.create_grant(&g3).await.unwrap();
    assert_not_found(store.revoke_grant(Access::Owner(&alice()), &g1.id).await);
    assert_eq!(store.list_grants(&alice()).await.unwrap(), vec![g3]);
}

async fn expired_grants_read_as_absent<S: Store + 'static>(store: Arc<S>) {
    let mut old = grant("g1", alice(), "gh.issues.create");
    old.expires_at = Timestamp::from_millis(now().as_millis() - 5_000);
    store.create_grant(&old).await.unwrap();
    assert_eq!(store.list_grants(&alice()).await.unwrap(), vec![]);
    assert_not_found(store.revoke_grant(Access::Owner(&alice()), &old.id).await);
    assert_not_found(store.revoke_grant(Access::Internal, &old.id).await);
    // An expired grant does not block a new one for the same tool.
    let fresh = grant("g2", alice(), "gh.issues.create");
    store.create_grant(&fresh).await.unwrap();
    assert_eq!(store.list_grants(&alice()).await.unwrap(), vec![fresh]);
}

/// A pause stored without its owner's grants read (`Emitted::ungranted`) is
/// written only if no live grant lets a call it waits on run: on `/mcp` one
/// given there, on a toolkit one given there or on `/mcp`. Refused, it
/// writes nothing (execution, paused marker, history), on a create as on an update.
async fn a_pause_that_checks_grants_is_refused_by_a_live_one_and_stores_nothing<S: Store + 'static>(store: Arc<S>) {
    let (owner, tk) = (alice(), executor_core::ToolkitName::parse("tk").unwrap());
    let tools = vec!["gh.issues.create".to_owned()];
    let pause_of = |id: &str| {
        let e = paused(id, alice(), Some("s1"));
        let history = appended(&e, 0, vec![called(1, now())]);
        (e, history)
    };
    let create = async |id: &str, toolkit: Option<&executor_core::ToolkitName>| {
        let (e, history) = pause_of(id);
        let ungranted = Some(Ungranted { owner: &owner, toolkit, tools: &tools });
        let emitted = Emitted { history: Some(&history), ungranted, ..Emitted::default() };
        store.create_execution_emitting(&e, emitted).await
    };
    // Grants that do not apply: another owner's, another tool's, an expired one, another toolkit's.
    let mut old = grant("g0", alice(), "gh.issues.create");
    old.expires_at = Timestamp::from_millis(now().as_millis() - 5_000);
    let other_toolkit = executor_core::ToolkitName::parse("other").unwrap();
    for g in [
        grant("g1", bob(), "gh.issues.create"),
        grant("g2", alice(), "gh.issues.delete"),
        old,
        grant("g3", alice(), "gh.issues.create").in_toolkit(Some(other_toolkit)),
    ] {
        store.create_grant(&g).await.unwrap();
    }
    create("e1", None).await.unwrap();
    create("e2", Some(&tk)).await.unwrap();

    // One given on the toolkit refuses a pause there, not on `/mcp`.
    store.create_grant(&grant("g4", alice(), "gh.issues.create").in_toolkit(Some(tk.clone()))).await.unwrap();
    let refused = create("e3", Some(&tk)).await;
    assert!(refused.as_ref().is_err_and(StoreError::is_grant_held), "{refused:?}");
    create("e4", None).await.unwrap();
    // One given on `/mcp` refuses it everywhere.
    let g5 = grant("g5", alice(), "gh.issues.create");
    store.create_grant(&g5).await.unwrap();
    for toolkit in [None, Some(&tk)] {
        let refused = create("e5", toolkit).await;
        assert!(refused.as_ref().is_err_and(StoreError::is_grant_held), "{toolkit:?}: {refused:?}");
    }
    for id in ["e3", "e5"] {
        assert_not_found(store.get_execution(Access::Internal, &eid(id)).await);
        assert_not_found(store.execution_history(Access::Internal, &eid(id)).await);
    }
    let mut listed = store.paused_executions(Access::Internal, &sid("s1")).await.unwrap();
    listed.sort();
    assert_eq!(listed, vec![eid("e1"), eid("e2"), eid("e4")], "no paused marker of a refused pause");

    // An update (a resumed run pausing again) alike: refused, the stored version stands; once revoked, stored.
    let mut e = running("e6", alice(), Some("s1"));
    store.create_execution(&e).await.unwrap();
    pause(&mut e, now().plus(Duration::from_secs(600)));
    let mut attempt = e.clone();
    let emitted =
        Emitted { ungranted: Some(Ungranted { owner: &owner, toolkit: None, tools: &tools }), ..Emitted::default() };
    let refused = store.update_execution_emitting(&mut attempt, emitted).await;
    assert!(refused.as_ref().is_err_and(StoreError::is_grant_held), "{refused:?}");
    let stored = store.get_execution(Access::Internal, &e.id).await.unwrap();
    assert_eq!((stored.version, stored.status()), (0, ExecutionStatus::Running));
    store.revoke_grant(Access::Owner(&alice()), &g5.id).await.unwrap();
    store.update_execution_emitting(&mut e, emitted).await.unwrap();
    assert_eq!(store.get_execution(Access::Internal, &e.id).await.unwrap().status(), ExecutionStatus::Paused);
}

/// The events of writing `execution` (from `before`) as its next version.
fn events_of(before: Option<ExecutionStatus>, execution: &Execution, at: Timestamp) -> Vec<Event> {
    let version = if before.is_some() { execution.version + 1 } else { execution.version };
    execution_events(before, execution, version, Some("https://x.example/approvals/e1?token=t"), None, at)
}

fn ids(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

async fn events_are_stored_with_the_change_they_describe<S: Store + 'static>(store: Arc<S>) {
    assert_eq!(store.pending_events(10).await.unwrap(), vec![]);
    let at = now();
    let mut e = paused("e1", alice(), Some("s1"));
    let paused_events = events_of(None, &e, at);
    store.create_execution_emitting(&e, Emitted::events(&paused_events)).await.unwrap();
    assert_eq!(store.pending_events(10).await.unwrap(), paused_events, "stored as given, approval link included");

    // Decided in the same millisecond: still after the pause.
    let mut stale = e.clone();
    e.apply(ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None, claim: "c".into(), by: by_api() }, at)
        .unwrap();
    let decided = events_of(Some(ExecutionStatus::Paused), &e, at);
    store.update_execution_emitting(&mut e, Emitted::events(&decided)).await.unwrap();
    let pending = store.pending_events(10).await.unwrap();
    assert_eq!(ids(&pending), ids(&[paused_events.clone(), decided.clone()].concat()));

    // A lost race writes neither the change nor its events.
    stale.apply(ExecutionEvent::Expire, at).unwrap();
    let expired = events_of(Some(ExecutionStatus::Paused), &stale, at);
    let lost = store.update_execution_emitting(&mut stale, Emitted::events(&expired)).await;
    assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
    assert_eq!(store.pending_events(10).await.unwrap(), pending);

    // Delivered events are deleted; deleting one twice (two deliverers) is fine.
    store.delete_event(&paused_events[0]).await.unwrap();
    store.delete_event(&paused_events[0]).await.unwrap();
    assert_eq!(store.pending_events(10).await.unwrap(), decided);
    store.delete_event(&decided[0]).await.unwrap();
    assert_eq!(store.pending_events(10).await.unwrap(), vec![]);
}

async fn a_refused_write_stores_no_event<S: Store + 'static>(store: Arc<S>) {
    let e = paused("e1", alice(), None);
    store.create_execution(&e).await.unwrap();
    let again = paused("e1", bob(), None);
    let refused = store.create_execution_emitting(&again, Emitted::events(&events_of(None, &again, now()))).await;
    assert!(matches!(refused, Err(StoreError::AlreadyExists { .. })), "{refused:?}");

    let mut big = running("e2", alice(), None);
    big.journal = journal_of_size(MAX_SNAPSHOT_BYTES + 100_000);
    pause(&mut big, now().plus(Duration::from_secs(600)));
    let refused = store.create_execution_emitting(&big, Emitted::events(&events_of(None, &big, now()))).await;
    assert!(matches!(refused, Err(StoreError::TooLarge { .. })), "{refused:?}");

    let mut gone = paused("ghost", alice(), None);
    let ghost_events = events_of(Some(ExecutionStatus::Running), &gone, now());
    assert_not_found(store.update_execution_emitting(&mut gone, Emitted::events(&ghost_events)).await);
    assert_eq!(store.pending_events(10).await.unwrap(), vec![]);
}

async fn session_writes_store_their_events<S: Store + 'static>(store: Arc<S>) {
    let mut s = session("s1", alice());
    store.create_session(&s).await.unwrap();
    let mut stale = s.clone();
    s.destroy().unwrap();
    let destroyed = vec![session_destroyed(&s, s.version + 1, now())];
    store.update_session_emitting(&mut s, &destroyed).await.unwrap();
    assert_eq!(store.get_session(Access::Internal, &sid("s1")).await.unwrap().status, SessionStatus::Destroyed);
    assert_eq!(store.pending_events(10).await.unwrap(), destroyed);

    stale.destroy().unwrap();
    let again = vec![session_destroyed(&stale, stale.version + 1, now().plus(Duration::from_millis(1)))];
    let lost = store.update_session_emitting(&mut stale, &again).await;
    assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
    assert_eq!(store.pending_events(10).await.unwrap(), destroyed, "a lost race stores no event");
}

async fn pending_events_are_oldest_first_and_limited<S: Store + 'static>(store: Arc<S>) {
    let start = now();
    let mut written = Vec::new();
    // Created newest first: the order read is the events' time, not the writes'.
    for (n, id) in ["e3", "e2", "e1"].iter().enumerate() {
        let e = paused(id, alice(), None);
        let events = events_of(None, &e, start.plus(Duration::from_millis(10 * (3 - n as u64))));
        store.create_execution_emitting(&e, Emitted::events(&events)).await.unwrap();
        written.extend(events);
    }
    written.reverse();
    assert_eq!(store.pending_events(10).await.unwrap(), written);
    assert_eq!(store.pending_events(2).await.unwrap(), written[..2]);
}

async fn expired_events_read_as_absent<S: Store + 'static>(store: Arc<S>) {
    let e = paused("e1", alice(), None);
    let mut events = events_of(None, &e, now());
    events[0].deliver_until = Timestamp::from_millis(now().as_millis() - 5_000);
    let live = paused("e2", alice(), None);
    let live_events = events_of(None, &live, now());
    store.create_execution_emitting(&e, Emitted::events(&events)).await.unwrap();
    store.create_execution_emitting(&live, Emitted::events(&live_events)).await.unwrap();
    assert_eq!(store.pending_events(10).await.unwrap(), live_events, "an event past its use is not delivered");
    assert_eq!(store.pending_events(1).await.unwrap(), live_events, "and does not hide the live ones");
}

fn connection(owner: Principal, source: &str, sealed: &str) -> SourceConnection {
    SourceConnection {
        owner,
        source: source.into(),
        connected_at: now(),
        scopes: vec!["read".into()],
        access_expires_at: Some(now().plus(hours(1))),
        refreshing_until: None,
        sealed: sealed.into(),
        expires_at: now().plus(hours(24)),
        version: 0,
    }
}

fn oauth_client(source: &str, client_id: &str, scopes: &[&str]) -> OAuthClient {
    OAuthClient {
        source: source.into(),
        issuer: "https://as.example".into(),
        client_id: client_id.into(),
        client_secret: None,
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        registered_at: now(),
        expires_at: now().plus(hours(24)),
        version: 0,
    }
}

async fn connections_are_one_per_owner_and_source<S: Store + 'static>(store: Arc<S>) {
    let mut a = connection(alice(), "crm", "sealed-a");
    store.save_connection(&mut a, None).await.unwrap();
    assert_eq!(a.version, 1);
    // A second "first" connection is refused; the first stands.
    let again = store.save_connection(&mut connection(alice(), "crm", "other"), None).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists { what: "connection" })), "{again:?}");
    let mut b = connection(alice(), "wiki", "sealed-b");
    let mut c = connection(bob(), "crm", "sealed-c");
    store.save_connection(&mut b, None).await.unwrap();
    store.save_connection(&mut c, None).await.unwrap();
    assert_eq!(store.get_connection(&alice(), "crm").await.unwrap(), a);
    assert_eq!(store.get_connection(&bob(), "crm").await.unwrap(), c);
    let mut listed = store.list_connections(&alice()).await.unwrap();
    listed.sort_by(|x, y| x.source.cmp(&y.source));
    assert_eq!(listed, vec![a.clone(), b]);
    // Deleting is per owner and source.
    store.delete_connection(&alice(), "crm", None).await.unwrap();
    assert_not_found(store.get_connection(&alice(), "crm").await);
    assert_not_found(store.delete_connection(&alice(), "crm", None).await);
    assert_eq!(store.get_connection(&bob(), "crm").await.unwrap(), c);
    // An expired connection reads as absent and may be made again.
    let mut old = connection(alice(), "old", "x");
    old.expires_at = Timestamp::from_millis(now().as_millis() - 5_000);
    store.save_connection(&mut old, None).await.unwrap();
    assert_not_found(store.get_connection(&alice(), "old").await);
    store.save_connection(&mut connection(alice(), "old", "y"), None).await.unwrap();
}

async fn connection_writes_are_conditional_on_version<S: Store + 'static>(store: Arc<S>) {
    let mut first = connection(alice(), "crm", "v1");
    store.save_connection(&mut first, None).await.unwrap();
    let mut refreshed = SourceConnection { sealed: "v2".into(), ..first.clone() };
    store.save_connection(&mut refreshed, Some(1)).await.unwrap();
    assert_eq!(refreshed.version, 2);
    // A writer that read version 1 loses, and changes nothing.
    let stale = store.save_connection(&mut SourceConnection { sealed: "late".into(), ..first.clone() }, Some(1)).await;
    assert!(matches!(stale, Err(StoreError::Conflict { .. })), "{stale:?}");
    assert_eq!(store.get_connection(&alice(), "crm").await.unwrap().sealed, "v2");
    // A conditional delete of a version that is gone deletes nothing.
    let stale = store.delete_connection(&alice(), "crm", Some(1)).await;
    assert!(matches!(stale, Err(StoreError::Conflict { .. })), "{stale:?}");
    store.delete_connection(&alice(), "crm", Some(2)).await.unwrap();
    assert_not_found(store.get_connection(&alice(), "crm").await);
    let gone = store.save_connection(&mut refreshed, Some(2)).await;
    assert!(matches!(gone, Err(StoreError::NotFound { .. })), "{gone:?}");
}

async fn connection_refresh_race_has_exactly_one_winner<S: Store + 'static>(store: Arc<S>) {
    let mut first = connection(alice(), "crm", "v1");
    store.save_connection(&mut first, None).await.unwrap();
    let racers = (0..8).map(|i| {
        let store = store.clone();
        let mut claim = SourceConnection { refreshing_until: Some(now().plus(hours(1))), ..first.clone() };
        claim.sealed = format!("racer-{i}");
        tokio::spawn(async move { store.save_connection(&mut claim, Some(1)).await })
    });
    let results = futures_util::future::join_all(racers).await;
    let won = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
    assert_eq!(won, 1, "{results:?}");
    let lost = results.iter().filter(|r| matches!(r, Ok(Err(StoreError::Conflict { .. })))).count();
    assert_eq!(lost, 7, "every other racer is told it lost: {results:?}");
    assert_eq!(store.get_connection(&alice(), "crm").await.unwrap().version, 2);
}

fn oauth_state(execution: &str, state: &str) -> OAuthState {
    OAuthState {
        hash: TokenHash::of_token(state),
        owner: alice(),
        source: "crm".into(),
        execution_id: eid(execution),
        step: 3,
        link: TokenHash::of_token("link"),
        sealed_verifier: "sealed".into(),
        expires_at: now().plus(hours(1)),
    }
}

async fn oauth_states_are_one_per_execution_and_taken_once<S: Store + 'static>(store: Arc<S>) {
    let (first, second) = (oauth_state("e1", "state-1"), oauth_state("e1", "state-2"));
    let e1 = eid("e1");
    store.put_oauth_state(&first).await.unwrap();
    assert_not_found(store.take_oauth_state(&e1, &TokenHash::of_token("never")).await);
    assert_not_found(store.take_oauth_state(&eid("e2"), &first.hash).await);
    // A newer state replaces it: the older one is never taken.
    store.put_oauth_state(&second).await.unwrap();
    assert_not_found(store.take_oauth_state(&e1, &first.hash).await);
    assert_eq!(store.take_oauth_state(&e1, &second.hash).await.unwrap(), second);
    assert_not_found(store.take_oauth_state(&e1, &second.hash).await);
    // While taken, no state replaces it, and a release of another changes nothing.
    let third = oauth_state("e1", "state-3");
    let held = store.put_oauth_state(&third).await;
    assert!(matches!(held, Err(StoreError::Conflict { what: "OAuth state" })), "{held:?}");
    store.release_oauth_state(&e1, &first.hash).await.unwrap();
    let held = store.put_oauth_state(&third).await;
    assert!(matches!(held, Err(StoreError::Conflict { .. })), "{held:?}");
    store.release_oauth_state(&e1, &second.hash).await.unwrap();
    assert_not_found(store.take_oauth_state(&e1, &second.hash).await);
    store.put_oauth_state(&third).await.unwrap();
    // Another execution's state is its own.
    let other = oauth_state("e2", "state-4");
    store.put_oauth_state(&other).await.unwrap();
    assert_eq!(store.take_oauth_state(&e1, &third.hash).await.unwrap(), third);
    assert_eq!(store.take_oauth_state(&eid("e2"), &other.hash).await.unwrap(), other);
    // Released twice: a no-op the second time.
    store.release_oauth_state(&e1, &third.hash).await.unwrap();
    store.release_oauth_state(&e1, &third.hash).await.unwrap();
    // An expired state is never taken, and is replaced like an untaken one.
    let expired =
        OAuthState { expires_at: Timestamp::from_millis(now().as_millis() - 5_000), ..oauth_state("e3", "state-5") };
    store.put_oauth_state(&expired).await.unwrap();
    assert_not_found(store.take_oauth_state(&eid("e3"), &expired.hash).await);
    store.put_oauth_state(&oauth_state("e3", "state-6")).await.unwrap();
}

async fn a_state_taken_by_racing_callbacks_has_exactly_one_winner<S: Store + 'static>(store: Arc<S>) {
    let state = oauth_state("e1", "state-1");
    store.put_oauth_state(&state).await.unwrap();
    let racers = (0..8).map(|_| {
        let (store, hash) = (store.clone(), state.hash.clone());
        tokio::spawn(async move { store.take_oauth_state(&eid("e1"), &hash).await })
    });
    let results: Vec<_> = futures_util::future::join_all(racers).await.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
    for result in &results {
        assert!(matches!(result, Ok(_) | Err(StoreError::NotFound { .. })), "{result:?}");
    }
}

async fn oauth_client_registrations_are_conditional<S: Store + 'static>(store: Arc<S>) {
    assert_not_found(store.get_oauth_client("docs").await);
    let mut first = oauth_client("docs", "c1", &["read"]);
    store.put_oauth_client(&mut first).await.unwrap();
    assert_eq!(first.version, 1);
    assert_eq!(store.get_oauth_client("docs").await.unwrap(), first);
    // Another instance registering from scratch finds it taken, and the first stands.
    let taken = store.put_oauth_client(&mut oauth_client("docs", "c2", &["read"])).await;
    assert!(matches!(taken, Err(StoreError::AlreadyExists { what: "OAuth client registration" })), "{taken:?}");
    assert_eq!(store.get_oauth_client("docs").await.unwrap().client_id, "c1");
    // A scope change replaces the version it read; a writer still holding that version loses.
    let mut wider =
        OAuthClient { client_id: "c3".into(), scopes: vec!["read".into(), "write".into()], ..first.clone() };
    store.put_oauth_client(&mut wider).await.unwrap();
    assert_eq!(wider.version, 2);
    let mut stale = OAuthClient { client_id: "c4".into(), ..first.clone() };
    let lost = store.put_oauth_client(&mut stale).await;
    assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
    assert_eq!(stale.version, 1, "a refused write leaves the version as it was");
    assert_eq!(store.get_oauth_client("docs").await.unwrap(), wider);
    // One registration per source.
    assert_not_found(store.get_oauth_client("wiki").await);
    let mut other = oauth_client("wiki", "w1", &[]);
    store.put_oauth_client(&mut other).await.unwrap();
    assert_eq!(store.get_oauth_client("wiki").await.unwrap(), other);
    assert_eq!(store.get_oauth_client("docs").await.unwrap(), wider);
}

async fn concurrent_registrations_have_exactly_one_winner<S: Store + 'static>(store: Arc<S>) {
    let writers = (0..8).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut client = oauth_client("docs", &format!("c{i}"), &["read"]);
            store.put_oauth_client(&mut client).await.map(|()| client)
        })
    });
    let results: Vec<_> = futures_util::future::join_all(writers).await.into_iter().map(|r| r.unwrap()).collect();
    let winners: Vec<&OAuthClient> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for result in &results {
        assert!(matches!(result, Ok(_) | Err(StoreError::AlreadyExists { .. })), "{result:?}");
    }
    assert_eq!(store.get_oauth_client("docs").await.unwrap(), *winners[0]);
}

async fn expired_oauth_clients_read_as_absent<S: Store + 'static>(store: Arc<S>) {
    let mut old = oauth_client("docs", "c1", &["read"]);
    old.expires_at = Timestamp::from_millis(now().as_millis() - 5_000);
    store.put_oauth_client(&mut old).await.unwrap();
    assert_not_found(store.get_oauth_client("docs").await);
    // Nor can it be replaced by version: it is gone; a new registration takes its place.
    let replaced = store.put_oauth_client(&mut OAuthClient { client_id: "c2".into(), ..old.clone() }).await;
    assert_not_found(replaced);
    let mut fresh = oauth_client("docs", "c3", &["read"]);
    store.put_oauth_client(&mut fresh).await.unwrap();
    assert_eq!(store.get_oauth_client("docs").await.unwrap(), fresh);
}

/// The `n`th call of a run, at `at`.
fn called(n: u32, at: Timestamp) -> HistoryEntry {
    let call = Called {
        step: n,
        tool: "gh.issues.create".into(),
        kind: None,
        outcome: CallOutcome::Ok,
        http_status: Some(201),
        error_code: None,
        duration_ms: 12,
        allowed_by: Some(AllowedBy::Policy),
        policy_id: Some("writes-ok".into()),
        grant_id: None,
    };
    HistoryEntry { at, what: Happened::Called(call) }
}

fn settled(status: ExecutionStatus, at: Timestamp) -> HistoryEntry {
    HistoryEntry { at, what: Happened::Settled { status, error_code: None } }
}

/// What writing `execution` (as the version it will be stored at) adds to its history.
fn appended(execution: &Execution, part: u64, entries: Vec<HistoryEntry>) -> HistoryAppend {
    HistoryAppend { record: ExecutionRecord::of(execution), part, entries, keep_until: now().plus(hours(24 * 30)) }
}

/// A record of an execution that is not stored, created at `created`.
fn record(id: &str, owner: Principal, created: Timestamp) -> ExecutionRecord {
    ExecutionRecord {
        id: eid(id),
        owner,
        status: ExecutionStatus::Completed,
        created_at: created,
        updated_at: created.plus(Duration::from_millis(5)),
        toolkit: None,
        pending: None,
    }
}

fn standalone(record: ExecutionRecord, part: u64, entries: Vec<HistoryEntry>) -> HistoryAppend {
    HistoryAppend { record, part, entries, keep_until: now().plus(hours(24 * 30)) }
}

fn with_history(append: &HistoryAppend) -> Emitted<'_> {
    Emitted { history: Some(append), ..Emitted::default() }
}

fn assert_bad_cursor<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::NotFound { what: "cursor" })),
        "expected a refused cursor, got {result:?}"
    );
}

/// Every page of a listing, `limit` at a time, until `next` is `None`.
async fn all_pages<S: Store>(
    store: &S,
    access: Access<'_>,
    since: Option<Timestamp>,
    limit: usize,
) -> Vec<Vec<String>> {
    let (mut pages, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let page = store.list_executions(access, since, limit, cursor.as_deref()).await.unwrap();
        assert!(page.items.len() <= limit, "a page holds at most the limit");
        pages.push(page.items.iter().map(|r| r.id.to_string()).collect());
        match page.next {
            Some(next) => cursor = Some(next),
            None => return pages,
        }
    }
}

async fn history_is_written_with_its_change_and_not_by_a_refused_write<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let mut e = running("e1", alice(), Some("s1"));
    let created = appended(&e, 0, vec![called(0, t0)]);
    store.create_execution_emitting(&e, with_history(&created)).await.unwrap();
    let (stored, entries) = store.execution_history(Access::Owner(&alice()), &eid("e1")).await.unwrap();
    assert_eq!((stored, entries), (ExecutionRecord::of(&e), vec![called(0, t0)]));

    let mut stale = e.clone();
    pause(&mut e, now().plus(Duration::from_secs(600)));
    let paused_part = appended(&e, 1, vec![called(1, t0.plus(Duration::from_millis(1)))]);
    store.update_execution_emitting(&mut e, with_history(&paused_part)).await.unwrap();
    let (stored, entries) = store.execution_history(Access::Internal, &eid("e1")).await.unwrap();
    assert_eq!((stored.status, entries.len()), (ExecutionStatus::Paused, 2));

    // A lost race (the same part number, as the loser computes it) writes neither.
    stale.apply(ExecutionEvent::Complete { result: json!(1) }, now()).unwrap();
    let late = appended(&stale, 1, vec![settled(ExecutionStatus::Completed, now())]);
    let lost = store.update_execution_emitting(&mut stale, with_history(&late)).await;
    assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
    // A create over a live execution, and an update of one that is gone, write none either.
    let again = running("e1", bob(), None);
    let refused =
        store.create_execution_emitting(&again, with_history(&appended(&again, 0, vec![called(9, t0)]))).await;
    assert!(matches!(refused, Err(StoreError::AlreadyExists { .. })), "{refused:?}");
    let mut ghost = running("ghost", alice(), None);
    let ghost_part = appended(&ghost, 1, vec![called(0, t0)]);
    assert_not_found(store.update_execution_emitting(&mut ghost, with_history(&ghost_part)).await);

    let (stored, entries) = store.execution_history(Access::Owner(&alice()), &eid("e1")).await.unwrap();
    assert_eq!(stored, ExecutionRecord::of(&e), "the record is the winner's");
    assert_eq!(entries, [created.entries.clone(), paused_part.entries.clone()].concat(), "the entries did not change");
    let listed = store.list_executions(Access::Owner(&alice()), None, 10, None).await.unwrap();
    assert_eq!(listed, Page { items: vec![ExecutionRecord::of(&e)], next: None });
    assert_eq!(store.list_executions(Access::Owner(&bob()), None, 10, None).await.unwrap().items, vec![]);
    assert_not_found(store.execution_history(Access::Internal, &eid("ghost")).await);
    // Events and history together, in one write.
    e.apply(
        ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None, claim: "c".into(), by: by_api() },
        now(),
    )
    .unwrap();
    let events = events_of(Some(ExecutionStatus::Paused), &e, now());
    let claimed = appended(&e, 2, vec![called(2, now())]);
    store
        .update_execution_emitting(&mut e, Emitted { events: &events, history: Some(&claimed), ..Emitted::default() })
        .await
        .unwrap();
    assert_eq!(store.pending_events(10).await.unwrap(), events);
    assert_eq!(store.execution_history(Access::Internal, &eid("e1")).await.unwrap().1.len(), 3);
}

async fn a_write_refused_for_size_stores_no_history<S: Store + 'static>(store: Arc<S>) {
    let mut huge = running("huge", alice(), None);
    huge.journal = journal_of_size(MAX_SNAPSHOT_BYTES + 100_000);
    let part = appended(&huge, 0, vec![called(0, now())]);
    let refused = store.create_execution_emitting(&huge, with_history(&part)).await;
    assert!(matches!(refused, Err(StoreError::TooLarge { .. })), "{refused:?}");
    assert_not_found(store.execution_history(Access::Internal, &eid("huge")).await);
    assert_eq!(store.list_executions(Access::Internal, None, 10, None).await.unwrap().items, vec![]);

    let mut e = paused("e1", alice(), None);
    let first = appended(&e, 0, vec![called(0, now())]);
    store.create_execution_emitting(&e, with_history(&first)).await.unwrap();
    e.journal = journal_of_size(MAX_SNAPSHOT_BYTES + 100_000);
    let grown = appended(&e, 1, vec![called(1, now())]);
    let refused = store.update_execution_emitting(&mut e, with_history(&grown)).await;
    assert!(matches!(refused, Err(StoreError::TooLarge { .. })), "{refused:?}");
    let (stored, entries) = store.execution_history(Access::Internal, &eid("e1")).await.unwrap();
    assert_eq!((stored, entries), (first.record.clone(), first.entries.clone()));
    assert_eq!(store.export_history(None, 10, None).await.unwrap().items.len(), 1);
}

async fn executions_are_listed_newest_first_per_owner_and_paged<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let at = |i: u64| t0.plus(Duration::from_secs(i));
    // Stored oldest last: the order listed is creation time, not the writes'.
    for i in (0..5).rev() {
        let append = standalone(record(&format!("a{i}"), alice(), at(i)), 1, vec![called(0, at(i))]);
        store.append_history(&append).await.unwrap();
    }
    for i in 0..2 {
        store.append_history(&standalone(record(&format!("b{i}"), bob(), at(i)), 1, vec![])).await.unwrap();
    }
    let newest_first = ["a4", "a3", "a2", "a1", "a0"];
    let page = store.list_executions(Access::Owner(&alice()), None, 10, None).await.unwrap();
    assert_eq!(page.items.iter().map(|r| r.id.to_string()).collect::<Vec<_>>(), newest_first);
    assert_eq!((page.items[0].clone(), page.next), (record("a4", alice(), at(4)), None));
    let bobs = store.list_executions(Access::Owner(&bob()), None, 10, None).await.unwrap();
    assert_eq!(bobs.items.iter().map(|r| r.id.to_string()).collect::<Vec<_>>(), ["b1", "b0"]);
    let carol = Principal::parse("carol").unwrap();
    assert_eq!(store.list_executions(Access::Owner(&carol), None, 10, None).await.unwrap().items, vec![]);

    // Two at a time: each exactly once, then no next page.
    let pages = all_pages(&*store, Access::Owner(&alice()), None, 2).await;
    assert_eq!(pages, [vec!["a4", "a3"], vec!["a2", "a1"], vec!["a0"]]);
    // Created at or after `since` (inclusive), paged too.
    let recent = store.list_executions(Access::Owner(&alice()), Some(at(2)), 10, None).await.unwrap();
    assert_eq!(recent.items.iter().map(|r| r.id.to_string()).collect::<Vec<_>>(), ["a4", "a3", "a2"]);
    assert_eq!(all_pages(&*store, Access::Owner(&alice()), Some(at(1)), 2).await, [["a4", "a3"], ["a2", "a1"]]);
    let page = store.list_executions(Access::Owner(&alice()), None, 2, None).await.unwrap();
    let later = store.list_executions(Access::Owner(&alice()), Some(at(4)), 2, page.next.as_deref()).await.unwrap();
    assert_eq!(later, Page { items: vec![], next: None }, "nothing after the cursor is that recent");

    // A cursor the store did not give is refused.
    let long = format!("EXEC#{}#{}", "0".repeat(13), "x".repeat(MAX_CURSOR_BYTES));
    for bad in
        ["garbage", "EXEC#12#a1", "EXEC#000000000000a#a1", "PART#0000000001.000", "EXEC#0000000000001#", long.as_str()]
    {
        assert_bad_cursor(store.list_executions(Access::Owner(&alice()), None, 2, Some(bad)).await);
        assert_bad_cursor(store.list_executions(Access::Internal, None, 2, Some(bad)).await);
    }
}

async fn every_owners_executions_are_listed_for_the_service<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let at = |i: u64| t0.plus(Duration::from_secs(i));
    let owners = [alice(), bob(), Principal::parse("carol").unwrap()];
    for i in 0..7u64 {
        let owner = owners[i as usize % 3].clone();
        store.append_history(&standalone(record(&format!("e{i}"), owner, at(i)), 0, vec![])).await.unwrap();
    }
    let everyone = store.list_executions(Access::Internal, None, 10, None).await.unwrap();
    let ids: Vec<String> = everyone.items.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(ids, ["e6", "e5", "e4", "e3", "e2", "e1", "e0"], "newest first, whoever owns them");
    assert_eq!(everyone.next, None);
    let pages = all_pages(&*store, Access::Internal, None, 3).await;
    assert_eq!(pages, [vec!["e6", "e5", "e4"], vec!["e3", "e2", "e1"], vec!["e0"]]);
    assert_eq!(all_pages(&*store, Access::Internal, Some(at(3)), 3).await, [vec!["e6", "e5", "e4"], vec!["e3"]]);
}

async fn history_is_read_in_order_and_by_its_owner_only<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let at = |ms: u64| t0.plus(Duration::from_millis(ms));
    let mut e = running("e1", alice(), None);
    let mut written = vec![called(0, at(0))];
    store.create_execution_emitting(&e, with_history(&appended(&e, 0, written.clone()))).await.unwrap();
    // Twelve writes: parts 9, 10, 11 sort by number, not as text.
    for version in 1..=12u64 {
        if version == 12 {
            e.apply(ExecutionEvent::Complete { result: json!("done") }, now()).unwrap();
        }
        let entries = vec![called(version as u32, at(version)), called(100 + version as u32, at(version))];
        let part = HistoryAppend {
            record: ExecutionRecord { updated_at: at(version), ..ExecutionRecord::of(&e) },
            ..appended(&e, version, entries.clone())
        };
        store.update_execution_emitting(&mut e, with_history(&part)).await.unwrap();
        written.extend(entries);
    }
    let (stored, entries) = store.execution_history(Access::Owner(&alice()), &eid("e1")).await.unwrap();
    assert_eq!(entries, written, "every write's entries, in the order written");
    assert_eq!((stored.status, stored.updated_at), (ExecutionStatus::Completed, at(12)), "the latest write's record");
    let as_bob = store.execution_history(Access::Owner(&bob()), &eid("e1")).await;
    assert!(matches!(as_bob, Err(StoreError::NotFound { what: "execution history" })), "{as_bob:?}");
    assert_eq!(
        as_bob.unwrap_err().to_string(),
        store.execution_history(Access::Owner(&bob()), &eid("nope")).await.unwrap_err().to_string(),
        "another owner's history reads exactly like a missing one"
    );
    assert_eq!(store.execution_history(Access::Internal, &eid("e1")).await.unwrap().1.len(), written.len());
}

async fn history_of_an_unstored_execution_is_listed_and_read<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let answered =
        standalone(record("quick", alice(), t0), 1, vec![called(0, t0), settled(ExecutionStatus::Completed, t0)]);
    store.append_history(&answered).await.unwrap();
    assert_not_found(store.get_execution(Access::Internal, &eid("quick")).await);
    let listed = store.list_executions(Access::Owner(&alice()), None, 10, None).await.unwrap();
    assert_eq!(listed.items, vec![answered.record.clone()]);
    let read = store.execution_history(Access::Owner(&alice()), &eid("quick")).await.unwrap();
    assert_eq!(read, (answered.record.clone(), answered.entries.clone()));
    // The same part again does not overwrite what is stored.
    let again = standalone(record("quick", alice(), t0), 1, vec![called(7, t0)]);
    let refused = store.append_history(&again).await;
    assert!(matches!(refused, Err(StoreError::AlreadyExists { .. })), "{refused:?}");
    assert_eq!(store.execution_history(Access::Internal, &eid("quick")).await.unwrap().1, answered.entries);
}

/// `queue_history` may write later (the embedded store batches), but every
/// read through the store sees what was queued before it; a queued part that
/// is already stored (or too large to store) is refused now or left out
/// later, and never overwrites.
async fn a_queued_history_is_read_at_once_and_a_refused_one_changes_nothing<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let at = |ms: u64| t0.plus(Duration::from_millis(ms));
    let first = standalone(record("q0", alice(), at(0)), 0, vec![called(0, at(0))]);
    store.queue_history(first.clone()).await.unwrap();
    let again = standalone(record("q0", alice(), at(0)), 0, vec![called(9, at(0))]);
    let queued: Vec<HistoryAppend> = (1..=40)
        .map(|i| standalone(record(&format!("q{i}"), alice(), at(i)), 0, vec![called(i as u32, at(i))]))
        .collect();
    let racing: Vec<_> = queued
        .iter()
        .map(|append| {
            let (store, append) = (store.clone(), append.clone());
            tokio::spawn(async move { store.queue_history(append).await })
        })
        .collect();
    let refused = store.queue_history(again).await;
    assert!(matches!(refused, Ok(()) | Err(StoreError::AlreadyExists { .. })), "{refused:?}");
    // Too large to store (one entry over an item's size): refused now or
    // left out later, alone.
    let mut oversized = called(0, at(50));
    if let Happened::Called(call) = &mut oversized.what {
        call.policy_id = Some("p".repeat(400_000));
    }
    let huge = standalone(record("qhuge", alice(), at(50)), 0, vec![oversized]);
    let refused = store.queue_history(huge).await;
    assert!(matches!(refused, Ok(()) | Err(StoreError::TooLarge { .. })), "{refused:?}");
    for queued in racing {
        queued.await.unwrap().unwrap();
    }
    let read = store.execution_history(Access::Owner(&alice()), &eid("q0")).await.unwrap();
    assert_eq!(read, (first.record.clone(), first.entries.clone()), "the refused part changed nothing");
    assert_not_found(store.execution_history(Access::Internal, &eid("qhuge")).await);
    for append in &queued {
        let read = store.execution_history(Access::Owner(&alice()), &append.record.id).await.unwrap();
        assert_eq!(read, (append.record.clone(), append.entries.clone()));
    }
    let listed = all_pages(&*store, Access::Owner(&alice()), None, 100).await.concat();
    assert_eq!(listed.len(), 41, "{listed:?}");
    assert_eq!(store.export_history(None, 100, None).await.unwrap().items.len(), 41);
}

async fn expired_history_reads_as_absent<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let past = Timestamp::from_millis(t0.as_millis() - 5_000);
    let mut old = standalone(record("old", alice(), past), 0, vec![called(0, past)]);
    old.keep_until = past;
    store.append_history(&old).await.unwrap();
    let live = standalone(record("live", alice(), t0), 0, vec![called(0, t0)]);
    store.append_history(&live).await.unwrap();
    assert_not_found(store.execution_history(Access::Internal, &eid("old")).await);
    assert_eq!(store.list_executions(Access::Owner(&alice()), None, 10, None).await.unwrap().items, vec![live.record]);
    assert_eq!(store.list_executions(Access::Internal, None, 1, None).await.unwrap().next, None);
    let exported = store.export_history(None, 10, None).await.unwrap();
    assert_eq!(exported.items.iter().map(|l| l.execution.to_string()).collect::<Vec<_>>(), ["live"]);
    // An expired part does not block its number.
    store.append_history(&standalone(record("old", alice(), past), 0, vec![called(1, t0)])).await.unwrap();
    assert_eq!(store.execution_history(Access::Internal, &eid("old")).await.unwrap().1, vec![called(1, t0)]);
}

fn line(execution: &str, owner: Principal, entry: HistoryEntry) -> AuditLine {
    AuditLine { execution: eid(execution), owner, entry }
}

fn sorted_lines(mut lines: Vec<AuditLine>) -> Vec<AuditLine> {
    lines.sort_by_key(|l| (l.entry.at, l.execution.to_string()));
    lines
}

async fn export_returns_every_owners_entries_and_pages_without_loss<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let at = |ms: u64| t0.plus(Duration::from_millis(ms));
    let mut expected = Vec::new();
    let mut e1 = running("e1", alice(), None);
    store.create_execution_emitting(&e1, with_history(&appended(&e1, 0, vec![called(0, at(0))]))).await.unwrap();
    let second = appended(&e1, 1, vec![called(1, at(10)), called(2, at(20))]);
    store.update_execution_emitting(&mut e1, with_history(&second)).await.unwrap();
    expected.extend([called(0, at(0)), called(1, at(10)), called(2, at(20))].map(|e| line("e1", alice(), e)));
    store.append_history(&standalone(record("e2", alice(), at(5)), 1, vec![called(0, at(5))])).await.unwrap();
    expected.push(line("e2", alice(), called(0, at(5))));
    let bobs = vec![called(0, at(15)), settled(ExecutionStatus::Failed, at(25))];
    store.append_history(&standalone(record("e3", bob(), at(15)), 1, bobs.clone())).await.unwrap();
    expected.extend(bobs.into_iter().map(|e| line("e3", bob(), e)));
    // Not history: nothing of it is exported.
    store.create_execution(&running("plain", alice(), Some("s1"))).await.unwrap();
    store.create_grant(&grant("g1", alice(), "gh.issues.create")).await.unwrap();

    let all = store.export_history(None, 100, None).await.unwrap();
    assert_eq!(all.next, None);
    let e1_lines: Vec<_> = all.items.iter().filter(|l| l.execution == eid("e1")).cloned().collect();
    assert_eq!(e1_lines, expected[..3], "in order within an execution");
    assert_eq!(sorted_lines(all.items), sorted_lines(expected.clone()));
    let recent = store.export_history(Some(at(15)), 100, None).await.unwrap();
    let want: Vec<AuditLine> = expected.iter().filter(|l| l.entry.at >= at(15)).cloned().collect();
    assert_eq!(sorted_lines(recent.items), sorted_lines(want));

    // One history item a page (four of them): nothing lost, nothing twice.
    let (mut paged, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let page = store.export_history(None, 1, cursor.as_deref()).await.unwrap();
        pages += 1;
        paged.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 4, "one page per history item, the last saying so");
    assert_eq!(sorted_lines(paged), sorted_lines(expected));
    let long = format!("AUDIT#e1\nPART#0000000001.000{}", "0".repeat(MAX_CURSOR_BYTES));
    for bad in [
        "garbage",
        "EXEC#0000000000001#e1",
        "AUDIT#e1\nEXEC",
        "AUDIT#e1\nPART#1.000",
        "AUDITS#e1\nPART#0000000001.000",
        long.as_str(),
    ] {
        assert_bad_cursor(store.export_history(None, 2, Some(bad)).await);
    }
}

async fn a_large_history_round_trips_in_split_items<S: Store + 'static>(store: Arc<S>) {
    let t0 = now();
    let entries: Vec<HistoryEntry> = (0..2_500u32)
        .map(|n| {
            let mut entry = called(n, t0.plus(Duration::from_millis(u64::from(n))));
            if let Happened::Called(call) = &mut entry.what {
                // Varied, so nothing can shrink it by accident.
                call.tool = format!("crm.records.update{}", "x".repeat(n as usize % 97 + 60));
            }
            entry
        })
        .collect();
    let size = serde_json::to_vec(&entries).unwrap().len();
    assert!(size > 600_000, "the entries under test are {size} bytes");
    let e = running("e1", alice(), None);
    let big = appended(&e, 0, entries.clone());
    store.create_execution_emitting(&e, with_history(&big)).await.unwrap();
    let standalone_big = standalone(record("quick", bob(), t0), 1, entries.clone());
    store.append_history(&standalone_big).await.unwrap();
    for (owner, id, record) in [(alice(), "e1", big.record.clone()), (bob(), "quick", standalone_big.record.clone())] {
        let read = store.execution_history(Access::Owner(&owner), &eid(id)).await.unwrap();
        assert!(read == (record, entries.clone()), "{id}: the history read back is the one written");
    }
    let mut exported = 0;
    let mut cursor = None::<String>;
    loop {
        let page = store.export_history(None, 2, cursor.as_deref()).await.unwrap();
        exported += page.items.len();
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(exported, 2 * entries.len());
}

async fn all_grants_lists_every_owners_live_grants<S: Store + 'static>(store: Arc<S>) {
    assert_eq!(store.all_grants().await.unwrap(), vec![]);
    let carol = Principal::parse("carol").unwrap();
    let live = [
        grant("g1", alice(), "gh.issues.create"),
        grant("g2", alice(), "gh.issues.delete"),
        grant("g3", bob(), "gh.issues.create"),
    ];
    for g in &live {
        store.create_grant(g).await.unwrap();
    }
    let mut old = grant("g4", carol.clone(), "gh.issues.create");
    old.expires_at = Timestamp::from_millis(now().as_millis() - 5_000);
    store.create_grant(&old).await.unwrap();
    // Other records are not grants.
    store.create_execution(&running("e1", carol, None)).await.unwrap();
    store.append_history(&standalone(record("e2", alice(), now()), 0, vec![])).await.unwrap();
    assert_eq!(sorted(store.all_grants().await.unwrap()), live.to_vec());
    store.revoke_grant(Access::Internal, &live[2].id).await.unwrap();
    assert_eq!(sorted(store.all_grants().await.unwrap()), live[..2].to_vec());
}

/// The history is kept by its own expiry: readable after the execution's
/// item expired, gone once its `keep_until` passed.
async fn history_outlives_its_execution_until_its_own_expiry<S: Store + 'static>(
    store: Arc<S>,
    clock: Arc<ManualClock>,
) {
    use executor_core::Clock;
    let start = clock.now();
    let mut e = Execution::start(
        eid("e1"),
        alice(),
        None,
        ElicitationMode::Model,
        "return 1",
        Journal::new(start, 1),
        start.plus(hours(1)),
    );
    let keep = |append: HistoryAppend| HistoryAppend { keep_until: start.plus(hours(24 * 7)), ..append };
    store.create_execution_emitting(&e, with_history(&keep(appended(&e, 0, vec![called(0, start)])))).await.unwrap();
    e.apply(ExecutionEvent::Complete { result: json!(1) }, start).unwrap();
    let done = keep(appended(&e, 1, vec![settled(ExecutionStatus::Completed, start)]));
    store.update_execution_emitting(&mut e, with_history(&done)).await.unwrap();

    // A settled execution is kept a day (`RETENTION`), its history a week.
    assert!(e.expires_at() < done.keep_until, "the history outlives the execution under test");
    clock.advance(e.expires_at().since(start) + hours(1));
    assert_not_found(store.get_execution(Access::Internal, &eid("e1")).await);
    let (stored, entries) = store.execution_history(Access::Owner(&alice()), &eid("e1")).await.unwrap();
    assert_eq!((stored.status, entries.len()), (ExecutionStatus::Completed, 2), "the history outlives the execution");
    assert_eq!(store.list_executions(Access::Owner(&alice()), None, 10, None).await.unwrap().items, vec![done.record]);
    assert_eq!(store.export_history(None, 10, None).await.unwrap().items.len(), 2);

    clock.advance(hours(24 * 7));
    assert_not_found(store.execution_history(Access::Owner(&alice()), &eid("e1")).await);
    assert_eq!(store.list_executions(Access::Owner(&alice()), None, 10, None).await.unwrap().items, vec![]);
    assert_eq!(store.list_executions(Access::Internal, None, 10, None).await.unwrap().items, vec![]);
    assert_eq!(store.export_history(None, 10, None).await.unwrap(), Page { items: vec![], next: None });
}

/// The receipt of `key` for execution `id` of `owner` with `code`, at `at`.
fn receipt(owner: &Principal, key: &str, id: &str, code: &str, at: Timestamp) -> executor_core::Receipt {
    executor_core::Receipt::new(owner, &executor_core::IdempotencyKey::parse(key).unwrap(), &eid(id), code, at)
}

fn with_receipt(receipt: &executor_core::Receipt) -> Emitted<'_> {
    Emitted { receipt: Some(receipt), ..Emitted::default() }
}

async fn racing_creates_with_one_idempotency_key_have_exactly_one_winner<S: Store + 'static>(store: Arc<S>) {
    const RACERS: usize = 12;
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let racers = (0..RACERS).map(|i| {
        let (store, start) = (store.clone(), start.clone());
        tokio::spawn(async move {
            let id = format!("once{i}");
            let e = running(&id, alice(), None);
            let taken = receipt(&alice(), "retry-1", &id, &e.code, now());
            start.wait().await;
            store.create_execution_emitting(&e, with_receipt(&taken)).await.map(|()| id)
        })
    });
    let mut winners = Vec::new();
    for racer in racers.collect::<Vec<_>>() {
        match racer.await.unwrap() {
            Ok(id) => winners.push(id),
            Err(StoreError::AlreadyExists { what: "idempotency key" }) => {}
            Err(other) => panic!("a losing create must get AlreadyExists for the key, got {other}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one of {RACERS} creates takes the key");
    let hash = executor_core::IdempotencyKey::parse("retry-1").unwrap().hash();
    let found = store.find_receipt(&alice(), &hash).await.unwrap();
    assert_eq!(found.execution_id, eid(&winners[0]));
    for i in (0..RACERS).filter(|i| format!("once{i}") != winners[0]) {
        assert_not_found(store.get_execution(Access::Internal, &eid(&format!("once{i}"))).await);
    }
    // Keys are the owner's own: bob's same key is another key.
    assert_not_found(store.find_receipt(&bob(), &hash).await);
    let bobs = running("bobs", bob(), None);
    store
        .create_execution_emitting(&bobs, with_receipt(&receipt(&bob(), "retry-1", "bobs", "x", now())))
        .await
        .unwrap();
}

async fn an_idempotency_key_is_taken_for_its_window_only<S: Store + 'static>(store: Arc<S>, clock: Arc<ManualClock>) {
    use executor_core::Clock;
    let at = clock.now();
    let first = running("first", alice(), None);
    store.create_execution_emitting(&first, with_receipt(&receipt(&alice(), "k", "first", "c", at))).await.unwrap();
    let hash = executor_core::IdempotencyKey::parse("k").unwrap().hash();
    clock.advance(executor_core::IDEMPOTENCY_WINDOW - Duration::from_secs(1));
    assert_eq!(store.find_receipt(&alice(), &hash).await.unwrap().execution_id, eid("first"));
    let second = running("second", alice(), None);
    let refused =
        store.create_execution_emitting(&second, with_receipt(&receipt(&alice(), "k", "second", "c", at))).await;
    assert!(matches!(refused, Err(StoreError::AlreadyExists { what: "idempotency key" })), "{refused:?}");
    clock.advance(Duration::from_secs(2));
    assert_not_found(store.find_receipt(&alice(), &hash).await);
    let later = receipt(&alice(), "k", "second", "c", clock.now());
    store.create_execution_emitting(&second, with_receipt(&later)).await.unwrap();
    assert_eq!(store.find_receipt(&alice(), &hash).await.unwrap().execution_id, eid("second"));
}

fn link(token: &str, owner: Principal) -> ConsoleSecret {
    ConsoleSecret::new(token, ConsoleGrant::Link { owner }, now(), CONSOLE_LINK_TTL)
}

fn console_session(token: &str, principal: Principal) -> ConsoleSecret {
    let subject = principal.as_str().to_owned();
    ConsoleSecret::new(token, ConsoleGrant::Session { principal, subject }, now(), DEFAULT_CONSOLE_SESSION)
}

async fn console_secrets_are_taken_once_and_only_as_their_kind<S: Store + 'static>(store: Arc<S>) {
    use ConsoleSecretKind::{Link, Login, Session};
    let first = link("link-1", alice());
    store.put_console_secret(&first).await.unwrap();
    // A link's token presented as a session cookie, or as an OIDC state, finds nothing, and leaves it.
    assert_not_found(store.get_console_secret(Session, &first.hash).await);
    assert_not_found(store.take_console_secret(Session, &first.hash).await);
    assert_not_found(store.take_console_secret(Login, &first.hash).await);
    assert_not_found(store.take_console_secret(Link, &TokenHash::of_token("link-2")).await);
    assert_eq!(store.get_console_secret(Link, &first.hash).await.unwrap(), first, "a get does not spend it");
    assert_eq!(store.take_console_secret(Link, &first.hash).await.unwrap(), first);
    assert_not_found(store.take_console_secret(Link, &first.hash).await);
    assert_not_found(store.get_console_secret(Link, &first.hash).await);

    // Nothing is stored over a live secret, whatever the kind: the first stays as it was.
    let login = ConsoleSecret::new(
        "state-1",
        ConsoleGrant::Login { verifier: "pkce-verifier".into(), nonce: "nonce-1".into() },
        now(),
        CONSOLE_LOGIN_TTL,
    );
    store.put_console_secret(&login).await.unwrap();
    let over =
        ConsoleSecret { grant: ConsoleGrant::Session { principal: bob(), subject: "bob".into() }, ..login.clone() };
    let refused = store.put_console_secret(&over).await;
    assert!(matches!(refused, Err(StoreError::AlreadyExists { what: "console secret" })), "{refused:?}");
    assert_not_found(store.get_console_secret(Session, &login.hash).await);
    assert_eq!(store.take_console_secret(Login, &login.hash).await.unwrap(), login);

    // A session is read, not spent, until signed out; signing out twice is fine.
    let signed_in = console_session("cookie-1", alice());
    store.put_console_secret(&signed_in).await.unwrap();
    for _ in 0..2 {
        assert_eq!(store.get_console_secret(Session, &signed_in.hash).await.unwrap(), signed_in);
    }
    store.delete_console_secret(&signed_in.hash).await.unwrap();
    assert_not_found(store.get_console_secret(Session, &signed_in.hash).await);
    store.delete_console_secret(&signed_in.hash).await.unwrap();
    store.delete_console_secret(&TokenHash::of_token("never-stored")).await.unwrap();
    // Its hash is free again once signed out.
    store.put_console_secret(&signed_in).await.unwrap();
}

async fn racing_takes_of_a_console_link_have_exactly_one_winner<S: Store + 'static>(store: Arc<S>) {
    const RACERS: usize = 12;
    let secret = link("link-1", alice());
    store.put_console_secret(&secret).await.unwrap();
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let racers = (0..RACERS).map(|_| {
        let (store, start, hash) = (store.clone(), start.clone(), secret.hash.clone());
        tokio::spawn(async move {
            start.wait().await;
            store.take_console_secret(ConsoleSecretKind::Link, &hash).await
        })
    });
    let results: Vec<_> = futures_util::future::join_all(racers).await.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
    for result in &results {
        assert!(matches!(result, Ok(taken) if *taken == secret) || matches!(result, Err(StoreError::NotFound { .. })));
    }
    assert_not_found(store.get_console_secret(ConsoleSecretKind::Link, &secret.hash).await);
}

async fn revoking_console_sessions_signs_out_only_that_owner<S: Store + 'static>(store: Arc<S>) {
    use ConsoleSecretKind::{Link, Login, Session};
    let alices: Vec<_> = (0..3).map(|i| console_session(&format!("alice-{i}"), alice())).collect();
    let bobs = console_session("bob-0", bob());
    let alices_link = link("alice-link", alice());
    let login = ConsoleSecret::new(
        "state-1",
        ConsoleGrant::Login { verifier: "v".into(), nonce: "n".into() },
        now(),
        CONSOLE_LOGIN_TTL,
    );
    // Expired already: removed with the others, not counted (it signed no one in).
    let past = Timestamp::from_millis(now().as_millis() - 5_000);
    let expired = ConsoleSecret { expires_at: past, ..console_session("alice-old", alice()) };
    for secret in alices.iter().chain([&bobs, &alices_link, &login, &expired]) {
        store.put_console_secret(secret).await.unwrap();
    }
    assert_eq!(store.revoke_console_sessions(&alice()).await.unwrap(), 3);
    for session in &alices {
        assert_not_found(store.get_console_secret(Session, &session.hash).await);
    }
    assert_eq!(store.get_console_secret(Session, &bobs.hash).await.unwrap(), bobs);
    assert_eq!(store.get_console_secret(Link, &alices_link.hash).await.unwrap(), alices_link);
    assert_eq!(store.get_console_secret(Login, &login.hash).await.unwrap(), login);
    assert_eq!(store.revoke_console_sessions(&alice()).await.unwrap(), 0, "nothing left to revoke");
    assert_eq!(store.revoke_console_sessions(&Principal::parse("carol").unwrap()).await.unwrap(), 0);
    assert_eq!(store.revoke_console_sessions(&bob()).await.unwrap(), 1);
    assert_not_found(store.get_console_secret(Session, &bobs.hash).await);
}

async fn expired_console_secrets_read_as_absent<S: Store + 'static>(store: Arc<S>, clock: Arc<ManualClock>) {
    use ConsoleSecretKind::{Link, Session};
    use executor_core::Clock;
    let at = clock.now();
    let secret = ConsoleSecret::new("link-1", ConsoleGrant::Link { owner: alice() }, at, CONSOLE_LINK_TTL);
    let session = ConsoleSecret::new(
        "cookie-1",
        ConsoleGrant::Session { principal: alice(), subject: "alice".into() },
        at,
        CONSOLE_LINK_TTL,
    );
    store.put_console_secret(&secret).await.unwrap();
    store.put_console_secret(&session).await.unwrap();
    clock.set(Timestamp::from_millis(secret.expires_at.as_millis() - 1));
    assert_eq!(store.get_console_secret(Link, &secret.hash).await.unwrap(), secret, "live until its last millisecond");
    // To the millisecond, though DynamoDB's TTL attribute is in seconds.
    clock.set(secret.expires_at);
    assert_not_found(store.get_console_secret(Link, &secret.hash).await);
    assert_not_found(store.take_console_secret(Link, &secret.hash).await);
    assert_not_found(store.get_console_secret(Session, &session.hash).await);
    clock.advance(hours(1));
    assert_not_found(store.take_console_secret(Link, &secret.hash).await);
    assert_not_found(store.take_console_secret(Session, &session.hash).await);
    // An expired secret (still stored: neither TTL nor a purge came by) is absent to a put too.
    let again = ConsoleSecret { expires_at: clock.now().plus(hours(1)), ..session.clone() };
    store.put_console_secret(&again).await.unwrap();
    assert_eq!(store.get_console_secret(Session, &again.hash).await.unwrap(), again);
}
