//! Run, pause, persist; later claim, replay and settle, through the real store
//! ports: each test runs on the embedded store and on DynamoDB (moto_server).

#[path = "../../sandbox/tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use executor_core::SystemClock;
use executor_core::{
    ApprovalAction, Channel, ElicitationMode, ExecutionEvent, ExecutionFailure, ExecutionId, ExecutionState, Principal,
    SessionId, Timeouts, Timestamp,
};
use executor_sandbox::{Limits, Sandbox};
use executor_service::{ExecutionResult, Executions, ResumeError};
use executor_store::{Access, Store};
use serde_json::json;
use support::TestTools;

executor_tests::on_both_stores!(
    completed_code_stores_nothing,
    a_pause_is_persisted_and_resumed_in_another_process,
    racing_resumes_have_one_winner_and_one_upstream_call,
    other_owners_and_unknown_ids_are_not_found,
    an_approval_past_its_window_expires,
    a_decline_settles_as_declined,
    a_second_approval_pauses_again,
    a_stranded_continuation_is_reported_interrupted_and_never_rerun,
    twenty_racing_executes_with_one_key_run_the_code_once,
    a_grant_found_by_the_pause_lets_its_call_run_and_stores_nothing,
    a_resumed_run_finds_a_grant_in_its_next_pause,
    a_pause_over_more_tools_than_its_write_checks_reads_the_grants,
);

const WRITE: &str =
    "const r = await tools.gh.list({}); const w = await tools.w.create({title: 'x'}); return [r.ok, w.data.args]";

fn alice() -> Principal {
    Principal::parse("alice").unwrap()
}

/// Real time: the store compares expiry with the system clock.
fn executions<S: Store + 'static>(store: &Arc<S>, timeouts: Timeouts) -> Executions {
    let clock = Arc::new(SystemClock);
    Executions::new(store.clone(), Sandbox::with_clock(Limits::default(), clock.clone()), timeouts, clock)
}

fn generous() -> Timeouts {
    Timeouts::default()
}

async fn pause<S: Store + 'static>(store: &Arc<S>, code: &str) -> ExecutionId {
    let tools = TestTools::new();
    let result = executions(store, generous())
        .execute(&alice(), Some(&SessionId::parse("s1").unwrap()), ElicitationMode::Model, code.into(), tools.clone())
        .await
        .unwrap();
    match result {
        ExecutionResult::Paused { execution_id, pending, .. } => {
            assert_eq!(pending[0].path, "w.create");
            execution_id
        }
        other => panic!("expected a pause, got {other:?}"),
    }
}

async fn completed_code_stores_nothing<S: Store + 'static>(store: Arc<S>) {
    let tools = TestTools::new();
    let result = executions(&store, generous())
        .execute(&alice(), None, ElicitationMode::Model, "return 7".into(), tools.clone())
        .await
        .unwrap();
    let ExecutionResult::Completed { execution_id, result, .. } = result else { panic!("{result:?}") };
    assert_eq!(result, json!(7));
    assert!(store.get_execution(Access::Internal, &execution_id).await.is_err());
}

async fn a_pause_is_persisted_and_resumed_in_another_process<S: Store + 'static>(store: Arc<S>) {
    let id = pause(&store, WRITE).await;
    let stored = store.get_execution(Access::Owner(&alice()), &id).await.unwrap();
    assert!(matches!(stored.state(), ExecutionState::Paused { .. }));
    assert_eq!(stored.journal.pending.len(), 1);
    assert_eq!(
        store.paused_executions(Access::Internal, &SessionId::parse("s1").unwrap()).await.unwrap(),
        std::slice::from_ref(&id)
    );

    // Another "process": new tools, new orchestrator; only the store is shared.
    let tools = TestTools::new();
    let result = executions(&store, generous())
        .resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone())
        .await
        .unwrap();
    let ExecutionResult::Completed { result, .. } = result else { panic!("{result:?}") };
    assert_eq!(result, json!([true, {"title": "x"}]));
    assert_eq!(tools.calls(), [("w.create".to_owned(), json!({"title": "x"}))]);
    let stored = store.get_execution(Access::Internal, &id).await.unwrap();
    assert_eq!(*stored.state(), ExecutionState::Completed { result: json!([true, {"title": "x"}]) });
    assert!(store.paused_executions(Access::Internal, &SessionId::parse("s1").unwrap()).await.unwrap().is_empty());

    let again =
        executions(&store, generous()).resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone()).await;
    assert_eq!(again.unwrap_err().code(), "execution_already_settled");
    assert_eq!(tools.calls().len(), 1, "a retried resume calls nothing");
}

async fn racing_resumes_have_one_winner_and_one_upstream_call<S: Store + 'static>(store: Arc<S>) {
    let id = pause(&store, WRITE).await;
    let tools = TestTools::new();
    let racers = (0..8).map(|_| {
        let (store, tools, id) = (store.clone(), tools.clone(), id.clone());
        tokio::spawn(async move {
            executions(&store, generous())
                .resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone())
                .await
        })
    });
    let mut winners = 0;
    for racer in racers.collect::<Vec<_>>() {
        match racer.await.unwrap() {
            Ok(ExecutionResult::Completed { .. }) => winners += 1,
            Err(ResumeError::AlreadySettled(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners, 1);
    assert_eq!(tools.calls(), [("w.create".to_owned(), json!({"title": "x"}))], "one decision, one upstream call");
}

async fn other_owners_and_unknown_ids_are_not_found<S: Store + 'static>(store: Arc<S>) {
    let id = pause(&store, WRITE).await;
    let tools = TestTools::new();
    let orchestrator = executions(&store, generous());
    let bob = Principal::parse("bob").unwrap();
    let foreign = orchestrator.resume(&bob, &id, Some(ApprovalAction::Accept), None, tools.clone()).await.unwrap_err();
    assert_eq!(foreign.code(), "execution_not_found");
    let unknown = ExecutionId::parse("nope").unwrap();
    let missing =
        orchestrator.resume(&alice(), &unknown, Some(ApprovalAction::Accept), None, tools.clone()).await.unwrap_err();
    assert_eq!(missing.code(), "execution_not_found");
    assert_eq!(foreign.to_string().replace(id.as_str(), "ID"), missing.to_string().replace("nope", "ID"));
    assert!(tools.calls().is_empty());
}

async fn an_approval_past_its_window_expires<S: Store + 'static>(store: Arc<S>) {
    let tools = TestTools::new();
    // A window of zero: over as soon as the pause is written.
    let closed = Timeouts { approval_window: Duration::ZERO, ..Timeouts::default() };
    let result = executions(&store, closed)
        .execute(&alice(), None, ElicitationMode::Model, WRITE.into(), tools.clone())
        .await
        .unwrap();
    let ExecutionResult::Paused { execution_id: id, .. } = result else { panic!("{result:?}") };
    let expired =
        executions(&store, closed).resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone()).await;
    assert_eq!(expired.unwrap_err().code(), "execution_expired");
    assert_eq!(*store.get_execution(Access::Internal, &id).await.unwrap().state(), ExecutionState::Expired);
    let again =
        executions(&store, closed).resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone()).await;
    assert_eq!(again.unwrap_err().code(), "execution_expired");
    assert_eq!(tools.calls().len(), 1, "only the read before the pause ran");
}

async fn a_decline_settles_as_declined<S: Store + 'static>(store: Arc<S>) {
    let id = pause(&store, WRITE).await;
    let tools = TestTools::new();
    let result = executions(&store, generous())
        .resume(&alice(), &id, Some(ApprovalAction::Decline), None, tools.clone())
        .await
        .unwrap();
    let ExecutionResult::Failed { error, .. } = result else { panic!("{result:?}") };
    assert_eq!(error.code, "approval_declined");
    assert_eq!(*store.get_execution(Access::Internal, &id).await.unwrap().state(), ExecutionState::Declined { error });
    assert!(tools.calls().is_empty());
}

async fn a_second_approval_pauses_again<S: Store + 'static>(store: Arc<S>) {
    let code = "const a = await tools.w.create({n: 1}); const b = await tools.w.create({n: 2}); return [a.ok, b.ok]";
    let id = pause(&store, code).await;
    let tools = TestTools::new();
    let orchestrator = executions(&store, generous());
    let second = orchestrator.resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone()).await.unwrap();
    let ExecutionResult::Paused { pending, .. } = second else { panic!("{second:?}") };
    assert_eq!(pending[0].args, json!({"n": 2}));
    let done = orchestrator.resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone()).await.unwrap();
    assert!(matches!(done, ExecutionResult::Completed { .. }), "{done:?}");
    assert_eq!(tools.calls().len(), 2);
}

/// Executions that apply the owner's grants, in a process that has seen
/// none of them made (another process stored them).
fn granting<S: Store + 'static>(store: &Arc<S>) -> Executions {
    let grants = executor_service::Grants::new(store.clone(), Arc::new(SystemClock), Duration::from_secs(3600));
    executions(store, generous()).with_grants(Arc::new(grants))
}

/// "Always allow" `tool` for alice, as another process stored it.
async fn grant<S: Store + 'static>(store: &Arc<S>, id: &str, tool: &str) {
    use executor_core::{Clock, Grant, GrantId, GrantedBy};
    let now = SystemClock.now();
    let grant =
        Grant::new(GrantId::parse(id).unwrap(), alice(), tool, GrantedBy::OwnerApi, now, Duration::from_secs(60));
    store.create_grant(&grant).await.unwrap();
}

/// The grants were not read (this process never saw alice hold one): the
/// pause finds the grant in its own write, which stores nothing; the code
/// goes on from its journal (the read so far replayed, not made again) and
/// the granted call is made once.
async fn a_grant_found_by_the_pause_lets_its_call_run_and_stores_nothing<S: Store + 'static>(store: Arc<S>) {
    grant(&store, "g1", "w.create").await;
    let tools = TestTools::new();
    let session = SessionId::parse("s1").unwrap();
    let result = granting(&store)
        .execute(&alice(), Some(&session), ElicitationMode::Model, WRITE.into(), tools.clone())
        .await
        .unwrap();
    let ExecutionResult::Completed { execution_id, result, .. } = result else { panic!("{result:?}") };
    assert_eq!(result, json!([true, {"title": "x"}]));
    let called: Vec<String> = tools.calls().into_iter().map(|(path, _)| path).collect();
    assert_eq!(called, ["gh.list", "w.create"], "each call made once");
    assert!(store.get_execution(Access::Internal, &execution_id).await.is_err(), "the refused pause stored nothing");
    assert!(store.paused_executions(Access::Internal, &session).await.unwrap().is_empty());
}

/// The same on a resumed run: its next pause (an update) is refused by the
/// grant, and the run goes on to its end, still holding its claim.
async fn a_resumed_run_finds_a_grant_in_its_next_pause<S: Store + 'static>(store: Arc<S>) {
    let code = "const a = await tools.w.create({n: 1}); const b = await tools.w.update({n: 2}); return [a.ok, b.ok]";
    let id = pause(&store, code).await;
    grant(&store, "g1", "w.update").await;
    let tools = TestTools::new();
    let done = granting(&store).resume(&alice(), &id, Some(ApprovalAction::Accept), None, tools.clone()).await;
    let ExecutionResult::Completed { result, .. } = done.unwrap() else { panic!("expected completed") };
    assert_eq!(result, json!([true, true]));
    let called: Vec<String> = tools.calls().into_iter().map(|(path, _)| path).collect();
    assert_eq!(called, ["w.create", "w.update"], "the approved call once, the granted one once");
    let stored = store.get_execution(Access::Internal, &id).await.unwrap();
    assert!(matches!(stored.state(), ExecutionState::Completed { .. }), "{:?}", stored.state());
}

/// A pause waiting on more tools than its write may check is not tried: the
/// run goes again with the grants read, and its pause is stored as they
/// decide, every call made once.
async fn a_pause_over_more_tools_than_its_write_checks_reads_the_grants<S: Store + 'static>(store: Arc<S>) {
    let many = executor_store::MAX_UNGRANTED_TOOLS + 1;
    let calls: Vec<String> = (0..many).map(|i| format!("tools.w.t{i}({{}})")).collect();
    let code = format!("const r = await tools.gh.list({{}}); await Promise.all([{}]); return r.ok", calls.join(", "));
    grant(&store, "g1", "w.t3").await;
    let tools = TestTools::new();
    let result = granting(&store).execute(&alice(), None, ElicitationMode::Model, code, tools.clone()).await.unwrap();
    let ExecutionResult::Paused { execution_id, pending, .. } = result else { panic!("{result:?}") };
    assert_eq!(pending.len(), many - 1, "all but the granted one wait: {pending:?}");
    assert!(pending.iter().all(|call| call.path != "w.t3"));
    let called: Vec<String> = tools.calls().into_iter().map(|(path, _)| path).collect();
    assert_eq!(called, ["gh.list", "w.t3"], "each call made once");
    let stored = store.get_execution(Access::Internal, &execution_id).await.unwrap();
    assert_eq!(stored.journal.pending.len(), many - 1);
}

/// A resumer that claimed a pause and then vanished (a Lambda timed out or was
/// recycled mid-run), simulated by storing the claim it would have written.
async fn claim_then_vanish<S: Store + 'static>(store: &Arc<S>, id: &ExecutionId, at: Timestamp) {
    let mut execution = store.get_execution(Access::Internal, id).await.unwrap();
    execution
        .apply(
            ExecutionEvent::Claim {
                action: ApprovalAction::Accept,
                link: None,
                claim: "c".into(),
                by: executor_core::Decider::model(Channel::OwnerApi),
            },
            at,
        )
        .unwrap();
    store.update_execution(&mut execution).await.unwrap();
}

async fn a_stranded_continuation_is_reported_interrupted_and_never_rerun<S: Store + 'static>(store: Arc<S>) {
    let now = Timestamp::from(std::time::SystemTime::now());
    let tools = TestTools::new();

    // Claimed a moment ago: it may still be running, so it is reported as running.
    let fresh = pause(&store, WRITE).await;
    claim_then_vanish(&store, &fresh, now).await;
    let running = executions(&store, generous()).view(&alice(), &fresh).await.unwrap();
    assert!(matches!(running, ExecutionResult::Running { .. }), "{running:?}");

    // Claimed, and no heartbeat since, for longer than HEARTBEAT_STALE (30 s): nothing runs it.
    let stranded = pause(&store, WRITE).await;
    claim_then_vanish(&store, &stranded, Timestamp::from_millis(now.as_millis() - 120_000)).await;
    let failed = executions(&store, generous()).view(&alice(), &stranded).await.unwrap();
    let ExecutionResult::Failed { error, .. } = failed else { panic!("{failed:?}") };
    assert_eq!(error, ExecutionFailure::interrupted());
    let stored = store.get_execution(Access::Internal, &stranded).await.unwrap();
    assert_eq!(*stored.state(), ExecutionState::Failed { error: ExecutionFailure::interrupted() }, "and stored so");

    // Resuming it again is refused, and the approved call is not made a second time.
    let again = executions(&store, generous())
        .resume(&alice(), &stranded, Some(ApprovalAction::Accept), None, tools.clone())
        .await;
    assert_eq!(again.unwrap_err().code(), "execution_already_settled");
    assert!(tools.calls().is_empty(), "{:?}", tools.calls());
}

async fn twenty_racing_executes_with_one_key_run_the_code_once<S: Store + 'static>(store: Arc<S>) {
    const RACERS: usize = 20;
    let tools = TestTools::new();
    let executions = Arc::new(executions(&store, generous()).with_max_concurrent(2 * RACERS));
    let key = executor_core::IdempotencyKey::parse("retry-7f3a").unwrap();
    let code = "const r = await tools.gh.list({n: 1}); return r.ok;";
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let racers = (0..RACERS).map(|_| {
        let (executions, tools, key, start) = (executions.clone(), tools.clone(), key.clone(), start.clone());
        tokio::spawn(async move {
            start.wait().await;
            executions.execute_once((&alice(), None), ElicitationMode::Model, code.into(), &key, tools).await
        })
    });
    let mut ids = std::collections::HashSet::new();
    for racer in racers.collect::<Vec<_>>() {
        let result = racer.await.unwrap().unwrap();
        assert!(matches!(result, ExecutionResult::Completed { .. } | ExecutionResult::Running { .. }), "{result:?}");
        ids.insert(result.execution_id().clone());
    }
    assert_eq!(ids.len(), 1, "every repeat answers the one execution: {ids:?}");
    let id = ids.into_iter().next().unwrap();
    // The one run settles; then a repeat answers its outcome, and nothing ran twice.
    let mut settled = None;
    for _ in 0..200 {
        match executions.execute_once((&alice(), None), ElicitationMode::Model, code.into(), &key, tools.clone()).await
        {
            Ok(ExecutionResult::Completed { execution_id, result, .. }) => {
                settled = Some((execution_id, result));
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    assert_eq!(settled, Some((id, json!(true))), "a repeat answers the first run's outcome");
    let made = tools.calls().iter().filter(|(path, ..)| path == "gh.list").count();
    assert_eq!(made, 1, "twenty executes with one key make the call once");
    let other =
        executions.execute_once((&alice(), None), ElicitationMode::Model, "return 2".into(), &key, tools.clone()).await;
    assert!(matches!(other, Err(executor_service::OnceError::KeyReused)), "another code with the key is refused");
    // Bob's key of the same name is his own.
    let bob = Principal::parse("bob").unwrap();
    let bobs = executions.execute_once((&bob, None), ElicitationMode::Model, "return 3".into(), &key, tools).await;
    assert!(matches!(bobs, Ok(ExecutionResult::Completed { .. })), "{bobs:?}");
}
