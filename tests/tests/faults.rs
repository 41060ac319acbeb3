//! Fault injection: every operation, with a fault at every one of its store
//! and scheduler calls (and at its upstream requests), on both stores.
//!
//! A paused execution is durable data and one approval causes at most one
//! upstream call: for each operation and each [`Fault`], the suite injects the
//! fault at call N = 1, 2, ... until the operation completes without reaching
//! call N. After each fault it recovers as a real system does (the client
//! retries the same request, a crashed host is restarted over the same store,
//! the alarm fires again) and checks:
//!
//! - no pause the client was told about is lost before its deadline: it is
//!   still resumable by its owner, or was settled by a decision really made;
//! - no approved write reaches the upstream twice (every `Idempotency-Key` is
//!   seen once), and every write is a call that a decider was shown and accepted;
//! - every execution ends terminal or resumable: read by a process whose clock
//!   is past the heartbeat's staleness limit, a continuation that a fault
//!   stranded reads as `interrupted`, never as still running;
//! - every answer is a clear error (a code and a message) or a connection that
//!   died with its host, never a hang or a panic;
//! - the history agrees with the store ([`assert_history_agrees`]): no change
//!   is stored without its history entries, nor an entry without its change,
//!   and every call a decision let run is in the history exactly when it
//!   reached the upstream (or its outcome was never stored).
//!
//! The hosts are built as the two deployments build them: `executor serve`
//! (`executor_cli::serve::host`) on the embedded store, and the Lambda
//! functions (`Host::new` with EventBridge Scheduler) on DynamoDB (moto). Each
//! host runs on a runtime of its own, so a crash drops everything it was doing.
//! Clients speak JSON-RPC over plain HTTP to control each retry (the MCP
//! conformance of the same routes is tested in `mcp_host.rs`). Each test prints
//! its rows of the summary table that docs/reliability.md reproduces.
//!
//! The ignored tests pin known issues the suite found; each fails today.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::{
    AlarmDecision, AllowedBy, CallOutcome, Called, Clock, ElicitationMode, Execution, ExecutionId, ExecutionRecord,
    ExecutionState, ExecutionStatus, Happened, HistoryEntry, ManualClock, Principal, SessionId, SessionStatus,
    StepOutcome, SystemClock, Timeouts, Timestamp, TokenHash,
};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::{AlarmScheduler, EventBridgeScheduler, InProcessScheduler, SchedulerTarget};
use executor_service::{Alarms, ExecutionResult, Executions, Host, HostConfig, ResumeError};
use executor_store::{Access, DynamoStore, EmbeddedStore, HistoryStore, KeyStore, SessionStore, Store, StoreError};
use executor_tests::faults::{Fault, Faults, Faulty, Fired, Trigger, Upstream, UpstreamFault};
use serde_json::{Value, json};

/// Reads the list (runs), then adds an entry (needs approval).
const WRITE: &str = r#"const seen = await tools.ledger.entries.listEntries({});
const added = await tools.ledger.entries.addEntry({ body: { note: "fault run" } });
return { listed: seen.ok, added: added.ok ? added.data.id : added.error.code };"#;

/// Two writes: the resume of the first pauses again at the second.
const TWO_WRITES: &str = r#"const first = await tools.ledger.entries.addEntry({ body: { n: 1 } });
const second = await tools.ledger.entries.addEntry({ body: { n: 2 } });
return [first.ok, second.ok];"#;

/// Only a read: it completes within its answer, so it is never stored and
/// only its history is written.
const READ: &str = r#"const seen = await tools.ledger.entries.listEntries({});
return { listed: seen.ok };"#;

/// Upper bound on N; every operation here makes far fewer calls.
const MAX_CALLS: usize = 40;
/// How many times two deciders race for one pause.
const RACES: usize = 5;
/// A client gives up on an answer after this long: reaching it is a hang.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// The catalog's deadline for upstream calls ([`UpstreamFault::Late`] outlasts it).
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_with_a_fault_at_every_step() {
    suite(embedded_rig).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_with_a_fault_at_every_step() {
    suite(|| async { Rig::start(Arc::new(Dynamo::new().await)).await }).await;
}

/// DELETE /mcp ends a session; a pause its owner was told about must stay
/// resumable until its deadline (from another session or none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_outlives_the_deletion_of_its_session() {
    let mut rig = embedded_rig().await;
    let (client, id, _) = rig.told_pause(WRITE).await;
    assert_eq!(client.delete().await, 204);
    let outcome = rig.settle_told_pause(&id, false).await;
    assert_eq!(outcome, "still paused, resumed later: completed");
    rig.assert_histories("a pause outlives the deletion of its session").await;
}

/// The write that settles an approved call fails once (nothing stored): the
/// call was made and its outcome is known, so it should be stored (the write
/// is conditional on the version read, so trying it again is safe) rather than
/// left for the run limit to report as `interrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_settle_write_keeps_the_outcome_of_the_approved_call() {
    let mut rig = embedded_rig().await;
    let (client, id, told) = rig.told_pause(WRITE).await;
    rig.faults.arm(Trigger::CallOf("update_execution", 2), Fault::Error);
    let answer = rig.resumed(&client, &id, &told).await;
    assert_eq!(rig.faults.fired().map(|f| f.operation), Some("update_execution"));
    assert_eq!(answer.status(), Some("completed"), "{answer:?}");
    assert_eq!(rig.settle_told_pause(&id, true).await, "completed");
    assert_eq!(rig.upstream.posts().iter().filter(|p| key_of(p) == Some(id.as_str())).count(), 1);
    rig.assert_histories("a failed settle write").await;
}

/// The claim is stored but its acknowledgement is lost: nobody runs the
/// approved call, and the owner is told it "was already resumed", then later
/// that it was interrupted with its call "unknown". The resumer that wrote the
/// claim should recognise it (e.g. a claim id stored in `Resuming`, checked by
/// reading the execution again after an unacknowledged write) and go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_acknowledgement_is_lost_still_runs_the_approved_call_once() {
    let mut rig = embedded_rig().await;
    let (client, id, told) = rig.told_pause(WRITE).await;
    rig.faults.arm(Trigger::CallOf("update_execution", 1), Fault::LostAck);
    let answer = rig.resumed(&client, &id, &told).await;
    assert_eq!(rig.faults.fired().map(|f| f.operation), Some("update_execution"));
    assert_eq!(answer.status(), Some("completed"), "{answer:?}");
    assert_eq!(rig.upstream.posts().iter().filter(|p| key_of(p) == Some(id.as_str())).count(), 1);
    rig.assert_histories("a claim whose acknowledgement is lost").await;
}

/// The answer to an accept is lost after the code went on and paused at its
/// next write. The client, not knowing, sends the same accept again: it must
/// not approve the next call, which nobody was shown (one approval, one call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_accept_never_approves_a_pause_nobody_saw() {
    let mut rig = embedded_rig().await;
    let (client, id, told) = rig.told_pause(TWO_WRITES).await;
    // The claim is write 1; the next pause is write 2, stored but unacknowledged.
    rig.faults.arm(Trigger::CallOf("update_execution", 2), Fault::LostAck);
    let retried = rig.resumed(&client, &id, &told).await;
    assert_eq!(rig.faults.fired().map(|f| f.operation), Some("update_execution"));
    rig.assert_upstream_writes();
    assert_eq!(retried.status(), Some("waiting_for_interaction"), "the next pause is shown: {retried:?}");
    rig.assert_histories("a retried accept").await;
}

/// The write that settles an approved call fails after the call was made: the
/// page must not tell the person that nothing was decided (they would approve
/// again elsewhere, or redo the change by hand).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_page_never_says_nothing_was_decided_after_the_call() {
    let mut rig = embedded_rig().await;
    let (id, form) = rig.approval_form().await;
    rig.faults.arm(Trigger::CallOf("update_execution", 2), Fault::Error);
    let page = form.submit().await;
    rig.faults.disarm();
    assert_eq!(rig.upstream.posts().iter().filter(|p| key_of(p) == Some(id.as_str())).count(), 1, "the call was made");
    let Page::Shown { status, html, .. } = page else { panic!("{page:?}") };
    assert!(!html.contains("Nothing was decided"), "page {status} denies the decision that was made: {html}");
    rig.assert_histories("a failed settle write behind the approval page").await;
}

/// Code that completes within its answer is never stored: only its history
/// is written. When that write fails (refused, timed out) the completed
/// result is still the answer (the calls were made; an error would invite
/// running the code again) and the product counts `HistoryNotWritten`; no
/// history exists then. A write whose answer was lost, or a crash after it,
/// leaves the whole history; a crash before it leaves none.
#[test]
fn a_completed_answer_stands_when_its_history_is_not_written() {
    // The run is a task of its own: every thread of the runtime counts.
    let unwritten = MetricCount::new("HistoryNotWritten");
    let dispatch = tracing::Dispatch::new(unwritten.clone());
    let on_workers = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&on_workers)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || runtime.block_on(history_not_written(unwritten)));
}

async fn history_not_written(unwritten: MetricCount) {
    let mut rig = embedded_rig().await;
    for fault in Fault::ALL {
        let what = format!("history write with {}", fault.name());
        let store = rig.deployment.open();
        let (before, counted) = (history_ids(&store).await, unwritten.seen());
        let executions = Executions::new(
            Arc::new(rig.faults.wrap(rig.deployment.open())),
            Sandbox::new(Limits::default()),
            Timeouts::default(),
            Arc::new(SystemClock),
        );
        let catalog = rig.catalog.clone();
        // Another test's thread may have registered the metric's callsite
        // while this test's subscriber was being set up: ask it again.
        tracing::callsite::rebuild_interest_cache();
        rig.faults.arm(Trigger::CallOf("append_history", 1), fault);
        let run = async move { executions.execute(&alice(), None, ElicitationMode::Model, READ.into(), catalog).await };
        let answer = rig.task(run).await;
        rig.faults.disarm();
        assert_eq!(rig.faults.fired(), Some(Fired { fault, operation: "append_history" }), "{what}");
        let recorded: Vec<String> = history_ids(&store).await.difference(&before).cloned().collect();
        match (fault, answer) {
            (
                Fault::Error | Fault::Timeout | Fault::LostAck,
                Some(Ok(ExecutionResult::Completed { execution_id, result, .. })),
            ) => {
                assert_eq!(result, json!({ "listed": true }), "{what}: the answer is the completed result");
                let written = fault == Fault::LostAck;
                let agreed = assert_history_agrees(&store, &rig.upstream, &execution_id, 0, &what).await;
                let expected = if written { Agreed::Unstored } else { Agreed::Absent };
                assert_eq!(agreed, expected, "{what}: the history of {execution_id} exists only if it was written");
                assert_eq!(recorded.len(), usize::from(written), "{what}: records {recorded:?}");
                // A lost answer reads as a failure: counted too, though the history was written.
                let counted = unwritten.seen() - counted;
                assert_eq!(counted, 1, "{what}: HistoryNotWritten counted {counted} times");
            }
            (Fault::CrashBefore, None) => assert!(recorded.is_empty(), "{what}: nothing was written: {recorded:?}"),
            (Fault::CrashAfter, None) => assert_eq!(recorded.len(), 1, "{what}: the write landed: {recorded:?}"),
            (fault, answer) => panic!("{what}: {} ended as {answer:?}", fault.name()),
        }
        for id in &recorded {
            assert_read_recorded(&store, &rig.upstream, &ExecutionId::parse(id).unwrap(), &what).await;
        }
        rig.assert_histories(&what).await;
    }
}

/// Two deciders accept the same pause at once: the model through `resume`,
/// the owner through `POST /api/executions/{id}/resume`. One claim wins; the
/// other is told it was already decided, or follows the winner's run. The
/// history holds only the winner's decision (a lost race writes nothing) and
/// the one call it made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_decisions_leave_only_the_winners_decision() {
    let mut rig = embedded_rig().await;
    let mut winners = BTreeSet::new();
    for race in 0..RACES {
        let (client, id, told) = rig.told_pause(WRITE).await;
        rig.approve(&id, &told.interaction_args());
        let decision = json!({ "executionId": id, "action": "accept", "pauseId": told.pause_id() });
        let (model, owner) = tokio::join!(client.call("resume", decision), client.decide(&id, "accept"));
        model.assert_clear(false, "the model's decision");
        owner.assert_clear(false, "the owner's decision");
        let execution = ExecutionId::parse(&id).unwrap();
        let store = rig.deployment.open();
        let (_, entries) = store.execution_history(Access::Internal, &execution).await.unwrap();
        let channels: Vec<&str> = entries
            .iter()
            .filter_map(|e| match &e.what {
                Happened::Decided { channel, .. } => Some(channel.as_str()),
                _ => None,
            })
            .collect();
        let [winner] = channels[..] else {
            panic!("race {race}: only the winner's decision is in the history: {channels:?}: {entries:#?}")
        };
        // The loser is told it was decided already, or follows the winner's run.
        let (won, lost) = match winner {
            "model" => (&model, &owner),
            "api" => (&owner, &model),
            other => panic!("race {race}: decided through {other}"),
        };
        assert!(won.is_ok(), "race {race}: the winner ({winner}) is answered: {won:?}");
        assert!(lost.status() != Some("waiting_for_interaction"), "race {race}: the loser claimed nothing: {lost:?}");
        winners.insert(winner.to_owned());
        assert_eq!(rig.settle_told_pause(&id, true).await, "completed", "race {race}");
        rig.assert_upstream_writes();
        rig.assert_histories(&format!("race {race}")).await;
    }
    println!("racing decisions won by: {winners:?}");
}

async fn embedded_rig() -> Rig<Embedded> {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    Rig::start(Arc::new(Embedded { store, _dir: dir })).await
}

// ---------------------------------------------------------------------------
// The two deployments.

/// Where a deployment keeps its data and how it builds a host process.
#[async_trait]
trait Deployment: Send + Sync + 'static {
    type Store: Store + Clone + 'static;

    fn name(&self) -> &'static str;

    /// A handle on the durable store, as a new process opens it (its own clients).
    fn open(&self) -> Self::Store;

    /// The alarm scheduler of a new process.
    fn scheduler(&self) -> Scheduler;

    /// The host a new process serves, over `store` (faulty, armed by the test).
    async fn host(
        &self,
        store: Arc<Faulty<Self::Store>>,
        faults: &Faults,
        catalog: Arc<Catalog>,
        namespaces: &[String],
        config: HostConfig,
    ) -> Host;
}

/// `executor serve`: the embedded store and in-process alarms.
struct Embedded {
    store: EmbeddedStore,
    _dir: tempfile::TempDir,
}

#[async_trait]
impl Deployment for Embedded {
    type Store = EmbeddedStore;

    fn name(&self) -> &'static str {
        "embedded"
    }

    fn open(&self) -> EmbeddedStore {
        // One redb file; a handle is only a way in (the file holds the data).
        self.store.clone()
    }

    fn scheduler(&self) -> Scheduler {
        Scheduler::InProcess(InProcessScheduler::new())
    }

    async fn host(
        &self,
        store: Arc<Faulty<EmbeddedStore>>,
        _faults: &Faults,
        catalog: Arc<Catalog>,
        namespaces: &[String],
        config: HostConfig,
    ) -> Host {
        // Exactly what `executor serve` runs: alarms re-armed from the store.
        executor_cli::serve::host(store, catalog, namespaces, config).await.expect("the host starts")
    }
}

/// The Lambda functions: DynamoDB and EventBridge Scheduler (both on moto).
struct Dynamo {
    table: String,
    target: SchedulerTarget,
}

impl Dynamo {
    async fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("executor-faults-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let store = DynamoStore::new(executor_tests::dynamodb_client_in("us-east-1"), name.clone());
        store.create_table().await.expect("create the table in moto_server");
        let (table, group) = (name.clone(), name);
        executor_tests::scheduler_client().create_schedule_group().name(&group).send().await.unwrap();
        let target = SchedulerTarget {
            group,
            target_arn: "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm".into(),
            role_arn: "arn:aws:iam::123456789012:role/executor-scheduler".into(),
        };
        Self { table, target }
    }
}

#[async_trait]
impl Deployment for Dynamo {
    type Store = DynamoStore;

    fn name(&self) -> &'static str {
        "dynamodb"
    }

    fn open(&self) -> DynamoStore {
        DynamoStore::new(executor_tests::dynamodb_client_in("us-east-1"), self.table.clone())
    }

    fn scheduler(&self) -> Scheduler {
        let scheduler = EventBridgeScheduler::new(executor_tests::scheduler_client(), self.target.clone());
        Scheduler::EventBridge(scheduler, self.target.group.clone())
    }

    async fn host(
        &self,
        store: Arc<Faulty<DynamoStore>>,
        faults: &Faults,
        catalog: Arc<Catalog>,
        namespaces: &[String],
        config: HostConfig,
    ) -> Host {
        // As the functions are configured: API Gateway routes by host.
        let config = HostConfig { allowed_hosts: None, ..config };
        let scheduler = Arc::new(faults.wrap(self.scheduler()));
        Host::new(store, catalog, namespaces, Sandbox::new(Limits::default()), scheduler, config)
    }
}

/// Either real scheduler, behind one type so that [`Faulty`] can wrap it.
#[derive(Clone)]
enum Scheduler {
    InProcess(InProcessScheduler),
    /// With its schedule group.
    EventBridge(EventBridgeScheduler, String),
}

#[async_trait]
impl AlarmScheduler for Scheduler {
    async fn schedule(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        match self {
            Scheduler::InProcess(s) => s.schedule(session, at).await,
            Scheduler::EventBridge(s, _) => s.schedule(session, at).await,
        }
    }

    async fn cancel(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        match self {
            Scheduler::InProcess(s) => s.cancel(session, at).await,
            Scheduler::EventBridge(s, _) => s.cancel(session, at).await,
        }
    }
}

impl Scheduler {
    /// Whether an alarm of `session` is armed for `at`.
    async fn armed_for(&self, session: &SessionId, at: Timestamp) -> bool {
        match self {
            Scheduler::InProcess(s) => s.armed_at(session) == Some(at),
            Scheduler::EventBridge(_, group) => {
                // Every schedule of the session (named after it), by expression.
                let client = executor_tests::scheduler_client();
                let prefix = format!("executor-session-{session}");
                let listed = client.list_schedules().group_name(group).name_prefix(prefix).send().await.unwrap();
                let expected = EventBridgeScheduler::expression(at);
                for summary in listed.schedules() {
                    let name = summary.name().unwrap_or_default();
                    let found = client.get_schedule().name(name).group_name(group).send().await.unwrap();
                    if found.schedule_expression() == Some(expected.as_str()) {
                        return true;
                    }
                }
                false
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Host processes: a runtime each, so that a crash stops everything at once.

struct Process {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Process {
    /// Serve a new host on `addr` (a crashed host's address is taken over).
    fn start<D: Deployment>(
        deployment: Arc<D>,
        faults: Faults,
        config: CatalogConfig,
        addr: SocketAddr,
        host_config: HostConfig,
    ) -> (Self, SocketAddr) {
        let (ready, bound) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            let (listener, host) = runtime.block_on(async {
                let listener = bind(addr).await;
                let catalog = Arc::new(Catalog::connect(&config).await.expect("the catalog connects"));
                let namespaces: Vec<String> = catalog.namespaces().into_iter().map(|n| n.namespace).collect();
                let store = Arc::new(faults.wrap(deployment.open()));
                let host = deployment.host(store, &faults, catalog, &namespaces, host_config).await;
                (listener, host)
            });
            ready.send(listener.local_addr().unwrap()).unwrap();
            runtime.spawn(executor_cli::serve::serve(listener, host, std::future::pending()));
            let _ = stopped.recv();
            // Every task, connection and timer of this host goes with its runtime.
            runtime.shutdown_timeout(Duration::from_secs(10));
        });
        let addr = bound.recv().expect("the host process starts");
        (Self { stop: Some(stop), thread: Some(thread) }, addr)
    }

    fn crash(mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Bind `addr`, waiting (bounded) for a crashed host's socket to close.
async fn bind(addr: SocketAddr) -> tokio::net::TcpListener {
    for _ in 0..100 {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => return listener,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("{addr} stayed taken after the host that used it stopped");
}

// ---------------------------------------------------------------------------
// Clients.

/// What a JSON-RPC request got back.
#[derive(Debug, Clone)]
enum Answer {
    /// A result: a tool's `structuredContent` (or `initialize`'s result) and `isError`.
    Done { value: Value, is_error: bool },
    /// An HTTP error answer, with its JSON-RPC error message.
    Refused { status: u16, message: String },
    /// No answer: the connection died (its host crashed).
    Lost(String),
}

impl Answer {
    fn is_ok(&self) -> bool {
        matches!(self, Answer::Done { is_error: false, .. })
    }

    fn execution_id(&self) -> Option<&str> {
        match self {
            Answer::Done { value, .. } => value["executionId"].as_str(),
            _ => None,
        }
    }

    /// The arguments of the call a paused answer asks about (`Null` otherwise).
    fn interaction_args(&self) -> Value {
        match self {
            Answer::Done { value, .. } => value["interaction"]["args"].clone(),
            _ => Value::Null,
        }
    }

    /// The `pauseId` a paused answer carries, for the decision to name.
    fn pause_id(&self) -> Value {
        match self {
            Answer::Done { value, .. } => value["pauseId"].clone(),
            _ => Value::Null,
        }
    }

    fn status(&self) -> Option<&str> {
        match self {
            Answer::Done { value, .. } => value["status"].as_str(),
            _ => None,
        }
    }

    /// For the summary: the status, the error code, the HTTP status, or "connection lost".
    fn label(&self) -> String {
        match self {
            Answer::Done { value, is_error: false } => value["status"].as_str().unwrap_or("ok").to_owned(),
            Answer::Done { value, is_error: true } => value["error"]["code"].as_str().unwrap_or("error").to_owned(),
            Answer::Refused { status, .. } => format!("http {status}"),
            Answer::Lost(_) => "connection lost".into(),
        }
    }

    /// An error says what went wrong (a code and a message); only a crash may leave no answer.
    fn assert_clear(&self, crashed: bool, what: &str) {
        match self {
            Answer::Done { is_error: false, .. } => {}
            Answer::Done { value, is_error: true } => {
                let code = value["error"]["code"].as_str().unwrap_or_default();
                let message = value["error"]["message"].as_str().unwrap_or_default();
                assert!(!code.is_empty() && !message.is_empty(), "{what}: an error without code or message: {value}");
            }
            Answer::Refused { status, message } => {
                assert!(*status >= 400 && !message.is_empty(), "{what}: HTTP {status} without a message")
            }
            Answer::Lost(error) => assert!(crashed, "{what}: no answer although the host did not crash: {error}"),
        }
    }
}

/// A JSON-RPC client over plain HTTP, with its session.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Option<String>,
}

impl Client {
    fn post(&self, body: Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request
    }

    async fn send(&self, body: Value) -> (Answer, Option<String>) {
        let response = match self.post(body).send().await {
            Ok(response) => response,
            Err(e) => return (Answer::Lost(e.to_string()), None),
        };
        let status = response.status().as_u16();
        let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let text = match response.text().await {
            Ok(text) => text,
            Err(e) => return (Answer::Lost(e.to_string()), None),
        };
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if let Some(message) = body["error"]["message"].as_str() {
            return (Answer::Refused { status, message: message.to_owned() }, None);
        }
        assert_eq!(status, 200, "a JSON-RPC answer without an error: {text}");
        let result = &body["result"];
        let answer = match result.get("structuredContent") {
            Some(value) => Answer::Done { value: value.clone(), is_error: result["isError"] == true },
            None => Answer::Done { value: result.clone(), is_error: false },
        };
        (answer, session)
    }

    /// `initialize`; on success the client uses the new session.
    async fn initialize(&mut self) -> Answer {
        self.session = None;
        let (answer, session) = self
            .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "faults", "version": "1"}}}))
            .await;
        if answer.is_ok() {
            self.session = Some(session.expect("a session id with a successful initialize"));
        }
        answer
    }

    async fn call(&self, tool: &str, arguments: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        self.send(body).await.0
    }

    /// `GET /api/executions/{id}`: where an execution stands, as its owner reads it.
    async fn view(&self, id: &str) -> Answer {
        let base = self.url.split("/mcp").next().unwrap();
        let sent = self
            .http
            .get(format!("{base}/api/executions/{id}"))
            .header("authorization", format!("Bearer {}", self.token))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => return Answer::Lost(e.to_string()),
        };
        let status = response.status().as_u16();
        match response.json::<Value>().await {
            Ok(value) => Answer::Done { is_error: status != 200, value },
            Err(e) => Answer::Lost(e.to_string()),
        }
    }

    /// `POST /api/executions/{id}/resume` `{action}`: the owner decides through the JSON API.
    async fn decide(&self, id: &str, action: &str) -> Answer {
        let base = self.url.split("/mcp").next().unwrap();
        let sent = self
            .http
            .post(format!("{base}/api/executions/{id}/resume"))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(json!({ "action": action }).to_string())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => return Answer::Lost(e.to_string()),
        };
        let status = response.status().as_u16();
        match response.json::<Value>().await {
            Ok(value) => Answer::Done { is_error: status != 200 || value["status"] == "error", value },
            Err(e) => Answer::Lost(e.to_string()),
        }
    }

    async fn list_tools(&self) -> Answer {
        self.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})).await.0
    }

    async fn delete(&self) -> u16 {
        let mut request = self.http.delete(&self.url).header("authorization", format!("Bearer {}", self.token));
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request.send().await.map(|r| r.status().as_u16()).unwrap_or(0)
    }
}

/// What a browser got for an approval page.
#[derive(Debug, Clone)]
enum Page {
    Shown { status: u16, cookie: Option<String>, html: String },
    Lost(String),
}

impl Page {
    fn label(&self) -> String {
        match self {
            Page::Shown { status, html, .. } => format!("page {status} {}", heading(html)),
            Page::Lost(_) => "connection lost".into(),
        }
    }

    fn assert_clear(&self, crashed: bool, what: &str) {
        match self {
            Page::Shown { status, html, .. } => assert!(
                [200, 404, 409, 410, 503].contains(status) && !heading(html).is_empty(),
                "{what}: page {status} says nothing clear: {html}"
            ),
            Page::Lost(error) => assert!(crashed, "{what}: no page although the host did not crash: {error}"),
        }
    }
}

fn heading(html: &str) -> &str {
    html.split("<h1>").nth(1).and_then(|rest| rest.split("</h1>").next()).unwrap_or_default()
}

/// The value of the form's hidden `name` field.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no {name} field in {html}")) + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

/// A clock past the heartbeat's staleness limit, so that a stranded
/// continuation reads as what it will be: interrupted.
fn after_run_limit() -> Arc<ManualClock> {
    let clock = ManualClock::starting_now();
    clock.advance(executor_core::HEARTBEAT_STALE + Duration::from_secs(1));
    Arc::new(clock)
}

/// A clock `ago` in the past: work created by it looks that old.
fn ago(ago: Duration) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_millis(now().as_millis() - ago.as_millis() as u64)))
}

fn now() -> Timestamp {
    SystemClock.now()
}

fn alice() -> Principal {
    Principal::parse("alice").unwrap()
}

// ---------------------------------------------------------------------------
// The rig: one deployment, its upstream, the host process, what was decided.

struct Rig<D: Deployment> {
    deployment: Arc<D>,
    faults: Faults,
    upstream: Upstream,
    config: CatalogConfig,
    /// The catalog the test itself uses (for work it sets up directly).
    catalog: Arc<Catalog>,
    host_config: HostConfig,
    process: Option<Process>,
    addr: SocketAddr,
    token: String,
    http: reqwest::Client,
    /// The calls a decider was shown and accepted, as (executionId, the POST
    /// body): the only writes allowed to reach the upstream.
    approved: HashSet<(String, String)>,
    /// The executions the client was told of (a pause it may decide): each must have its history.
    told: BTreeSet<String>,
    /// Executions whose history was found to agree when they could no longer
    /// change (settled, or never stored): not read again.
    agreed: HashSet<String>,
    _dir: tempfile::TempDir,
}

impl<D: Deployment> Rig<D> {
    async fn start(deployment: Arc<D>) -> Self {
        let upstream = Upstream::start().await;
        let dir = tempfile::tempdir().unwrap();
        let config = CatalogConfig::load(&upstream.write_config(dir.path(), UPSTREAM_TIMEOUT)).unwrap();
        let catalog = Arc::new(Catalog::connect(&config).await.unwrap());
        let token = executor_cli::keys::create(&deployment.open(), "alice").await.unwrap();
        let host_config = HostConfig {
            // Every request marks activity: one more write for the faults to hit.
            activity_interval: Duration::ZERO,
            approval_wait: Duration::from_secs(1),
            ..HostConfig::default()
        };
        let faults = Faults::new();
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let (process, addr) =
            Process::start(deployment.clone(), faults.clone(), config.clone(), any_port, host_config.clone());
        let http = executor_http_client::builder().timeout(CLIENT_TIMEOUT).build().unwrap();
        Self {
            deployment,
            faults,
            upstream,
            config,
            catalog,
            host_config,
            process: Some(process),
            addr,
            token,
            http,
            approved: HashSet::new(),
            told: BTreeSet::new(),
            agreed: HashSet::new(),
            _dir: dir,
        }
    }

    /// Stop the host process and start a new one on the same address and store.
    fn restart(&mut self) {
        if let Some(process) = self.process.take() {
            tokio::task::block_in_place(|| process.crash());
        }
        let (process, addr) = tokio::task::block_in_place(|| {
            Process::start(
                self.deployment.clone(),
                self.faults.clone(),
                self.config.clone(),
                self.addr,
                self.host_config.clone(),
            )
        });
        assert_eq!(addr, self.addr);
        self.process = Some(process);
    }

    fn client(&self, mode: ElicitationMode) -> Client {
        Client {
            http: self.http.clone(),
            url: format!("http://{}/mcp?elicitation_mode={}", self.addr, mode.as_str()),
            token: self.token.clone(),
            session: None,
        }
    }

    /// Await a request to the host; if a fault crashes the host meanwhile,
    /// restart it (the request then ends with its connection).
    async fn through_crashes<T>(&mut self, request: impl Future<Output = T>) -> (T, bool) {
        let mut request = std::pin::pin!(request);
        let faults = self.faults.clone();
        tokio::select! {
            answer = &mut request => (answer, false),
            () = faults.crashed() => {
                self.restart();
                (request.await, true)
            }
        }
    }

    /// Run `work` (the work of a process other than the host) on a task of its
    /// own; a crash fault aborts it, as the death of its process would.
    async fn task<T: Send + 'static>(&self, work: impl Future<Output = T> + Send + 'static) -> Option<T> {
        let mut task = tokio::spawn(work);
        tokio::select! {
            done = &mut task => Some(done.expect("the task does not panic")),
            () = self.faults.crashed() => {
                task.abort();
                None
            }
        }
    }

    /// Services reading the store with a clock past every run limit.
    fn later(&self) -> Executions {
        let store = Arc::new(self.deployment.open());
        Executions::new(store, Sandbox::new(Limits::default()), Timeouts::default(), after_run_limit())
    }

    /// Where a pause the client was told about stands, after recovery: resumed
    /// now if it still waits (it must work), settled only if a decision was sent.
    /// Panics if it is lost. The outcome, for the summary.
    async fn settle_told_pause(&mut self, id: &str, decided: bool) -> String {
        let execution = ExecutionId::parse(id).unwrap();
        let view = self.later().view(&alice(), &execution).await;
        let calls = |rig: &Self| rig.upstream.posts().iter().filter(|p| key_of(p) == Some(id)).count();
        match view {
            Ok(ExecutionResult::Paused { pending, .. }) => {
                // The owner reads the pending call, then accepts it, and each next one shown.
                for call in &pending {
                    self.approve(id, &call.args);
                }
                let client = self.client(ElicitationMode::Model);
                let mut answer = client.call("resume", json!({ "executionId": id, "action": "accept" })).await;
                let mut steps = 1;
                while answer.status() == Some("waiting_for_interaction") && steps < 5 {
                    let Answer::Done { value, .. } = &answer else { unreachable!() };
                    self.approve(id, &value["interaction"]["args"]);
                    answer = client.call("resume", json!({ "executionId": id, "action": "accept" })).await;
                    steps += 1;
                }
                assert!(answer.is_ok(), "a pause that waited is resumable by its owner: {answer:?}");
                format!("still paused, resumed later: {}", answer.label())
            }
            Ok(ExecutionResult::Completed { .. }) if decided => "completed".into(),
            Ok(ExecutionResult::Failed { error, .. }) if decided => match error.code.as_str() {
                "interrupted" if calls(self) > 0 => "interrupted after its call".into(),
                "interrupted" => "interrupted before its call".into(),
                code => format!("failed: {code}"),
            },
            Err(ResumeError::Expired(_) | ResumeError::NotFound(_)) => {
                panic!("LOST: pause {id} was told to the client and is gone before its deadline: {view:?}")
            }
            other => panic!("pause {id} (decided: {decided}) ended as {other:?}"),
        }
    }

    /// A decider was shown the call with `args` of execution `id` and accepted it.
    fn approve(&mut self, id: &str, args: &Value) {
        self.approved.insert((id.to_owned(), args["body"].to_string()));
    }

    /// A session and a pause of `code` in model mode, told to the client:
    /// (client, executionId, the paused answer).
    async fn told_pause(&mut self, code: &str) -> (Client, String, Answer) {
        let mut client = self.client(ElicitationMode::Model);
        assert!(client.initialize().await.is_ok());
        let paused = client.call("execute", json!({ "code": code })).await;
        assert_eq!(paused.status(), Some("waiting_for_interaction"), "{paused:?}");
        let id = paused.execution_id().unwrap().to_owned();
        self.told.insert(id.clone());
        (client, id, paused)
    }

    /// A browser-mode pause and its approval page, opened: (executionId, the
    /// page's form set to approve). The approval counts as given.
    async fn approval_form(&mut self) -> (String, Form) {
        let mut client = self.client(ElicitationMode::Browser);
        assert!(client.initialize().await.is_ok());
        let paused = client.call("execute", json!({ "code": WRITE })).await;
        assert_eq!(paused.status(), Some("user_approval_required"), "{paused:?}");
        let Answer::Done { value, .. } = &paused else { unreachable!() };
        let (id, url) = (value["executionId"].as_str().unwrap().to_owned(), value["approvalUrl"].as_str().unwrap());
        self.told.insert(id.clone());
        let page = open(&self.http, url).await;
        let Page::Shown { status: 200, cookie: Some(cookie), html } = page else { panic!("the page opens: {page:?}") };
        let body = format!("token={}&csrf={}&decision=accept", hidden(&html, "token"), hidden(&html, "csrf"));
        let action = url.split('?').next().unwrap().to_owned();
        // The page shows the call of WRITE, and the person approves it.
        self.approve(&id, &json!({ "body": { "note": "fault run" } }));
        (id, Form { http: self.http.clone(), action, cookie, body })
    }

    /// `resume` with accept of the `told` pause, once more if the first answer
    /// was a storage error.
    async fn resumed(&mut self, client: &Client, id: &str, told: &Answer) -> Answer {
        self.approve(id, &told.interaction_args());
        let pause = told.pause_id();
        let decision = json!({ "executionId": id, "action": "accept", "pauseId": pause });
        let first = client.call("resume", decision.clone()).await;
        self.faults.disarm();
        match first.label().as_str() {
            "store_error" => client.call("resume", decision).await,
            _ => first,
        }
    }

    /// No idempotency key twice, and no write that no decider was shown and accepted.
    fn assert_upstream_writes(&self) {
        let posts = self.upstream.posts();
        let mut seen = HashSet::new();
        for post in &posts {
            let key = post.idempotency_key.clone().expect("every write carries an Idempotency-Key");
            assert!(seen.insert(key.clone()), "DOUBLE: {key} reached the upstream twice: {posts:#?}");
            let call = (key_of(post).unwrap().to_owned(), post.body.to_string());
            assert!(self.approved.contains(&call), "UNAPPROVED: {call:?} reached the upstream; nobody accepted it");
        }
    }
}

/// The execution an upstream write came from (`<executionId>:<step>`).
fn key_of(post: &executor_tests::faults::Applied) -> Option<&str> {
    post.idempotency_key.as_deref().and_then(|k| k.split(':').next())
}

/// The step of its execution an upstream write was made at.
fn step_of(post: &executor_tests::faults::Applied) -> Option<u32> {
    post.idempotency_key.as_deref().and_then(|k| k.split(':').nth(1)).and_then(|step| step.parse().ok())
}

// ---------------------------------------------------------------------------
// The audit trail: no change without its history entries, no entry without its change.

impl<D: Deployment> Rig<D> {
    /// Every execution the store holds, whose history it holds, that the
    /// client was told of or whose call reached the upstream agrees with its
    /// history ([`assert_history_agrees`]), as the store stands now. One that
    /// can no longer change (settled, or never stored) is read once.
    async fn assert_histories(&mut self, what: &str) {
        let store = self.deployment.open();
        let mut ids = history_ids(&store).await;
        ids.extend(self.told.iter().cloned());
        ids.extend(self.upstream.posts().iter().filter_map(|post| key_of(post).map(str::to_owned)));
        ids.retain(|id| !self.agreed.contains(id));
        for id in ids {
            let execution = ExecutionId::parse(id.as_str()).unwrap();
            // No scenario here asks a running execution to stop: every decision is a claim.
            let agreed = assert_history_agrees(&store, &self.upstream, &execution, 0, what).await;
            match agreed {
                Agreed::Absent => {
                    panic!("{what}: LOST: {id} was told to the client, and is neither stored nor recorded")
                }
                Agreed::Stored(status) if !status.is_terminal() => {}
                Agreed::Stored(_) | Agreed::Unstored => {
                    self.agreed.insert(id);
                }
            }
        }
    }
}

/// What [`assert_history_agrees`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agreed {
    /// Neither stored nor recorded.
    Absent,
    /// Stored, with this status, and its history agrees.
    Stored(ExecutionStatus),
    /// Only its history is stored (it ended within its answer, or its
    /// approval window closed and the store may forget it), and it is whole.
    Unstored,
}

/// Every execution id with a history record, of every owner.
async fn history_ids<S: HistoryStore>(store: &S) -> BTreeSet<String> {
    let (mut ids, mut cursor) = (BTreeSet::new(), None);
    loop {
        let page = store.list_executions(Access::Internal, None, 100, cursor.as_deref()).await.unwrap();
        ids.extend(page.items.iter().map(|record| record.id.to_string()));
        match page.next {
            Some(next) => cursor = Some(next),
            None => return ids,
        }
    }
}

/// The history of execution `id` agrees with the store and the upstream: a
/// crash or failure between any two writes never leaves a change without its
/// history entries, nor an entry without its change.
///
/// - A stored execution has a history whose record has its status; one
///   `decided` entry per claim it counts (`resumes`), plus `cancels` asked of
///   it running; pauses and decisions alternate, the pause it waits on last.
/// - `created` is first and appears once; a settled execution has exactly one
///   `settled` entry, the last, with its status.
/// - Every `called` entry a decision let run follows that decision and is one
///   upstream write (at most one, and exactly one when it succeeded); every
///   upstream write is in the history, unless its outcome was never stored.
/// - One never stored has no pause nor decision, and is settled (or its
///   approval window closed).
async fn assert_history_agrees<S: Store>(
    store: &S,
    upstream: &Upstream,
    id: &ExecutionId,
    cancels: u32,
    what: &str,
) -> Agreed {
    let what = format!("{what}: execution {id}");
    let (stored, history) = read_consistently(store, id, &what).await;
    // Read after the history: a call the history names was made before it was read.
    let posts: Vec<_> = upstream.posts().into_iter().filter(|post| key_of(post) == Some(id.as_str())).collect();
    let Some((record, entries)) = history else {
        let status = stored.as_ref().map(Execution::status);
        assert!(status.is_none(), "{what}: CHANGE WITHOUT HISTORY: it is stored as {status:?} and has no history");
        assert!(posts.is_empty(), "{what}: CALL WITHOUT HISTORY: {} writes reached the upstream", posts.len());
        return Agreed::Absent;
    };
    let shown: Vec<String> = entries.iter().map(|entry| entry.to_json().to_string()).collect();
    let what = format!("{what} (history: {shown:#?})");
    assert_eq!(&record.id, id, "{what}: the record of another execution");
    assert_bookends(&record, &entries, &what);
    let agreed = match &stored {
        Some(execution) => {
            assert_stored_agrees(execution, &record, &entries, cancels, &what);
            Agreed::Stored(execution.status())
        }
        None => {
            assert_unstored_agrees(&record, &entries, &what);
            Agreed::Unstored
        }
    };
    assert_calls_agree(stored.as_ref(), &entries, &posts, &what);
    agreed
}

/// The stored execution (if any) and its history (if any) as of one moment:
/// read again while a write landed in between (a continuation still running).
async fn read_consistently<S: Store>(
    store: &S,
    id: &ExecutionId,
    what: &str,
) -> (Option<Execution>, Option<(ExecutionRecord, Vec<HistoryEntry>)>) {
    let stored = async || match store.get_execution(Access::Internal, id).await {
        Ok(execution) => Some(execution),
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => panic!("{what}: read the execution: {e}"),
    };
    for _ in 0..100 {
        let before = stored().await;
        let history = match store.execution_history(Access::Internal, id).await {
            Ok(history) => Some(history),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => panic!("{what}: read the history: {e}"),
        };
        let after = stored().await;
        if before.as_ref().map(|e| e.version) == after.as_ref().map(|e| e.version) {
            return (after, history);
        }
        tokio::task::yield_now().await;
    }
    panic!("{what}: it kept changing while its history was read");
}

/// `created` first and once; at most one `settled`, last, with the record's
/// status, exactly when that status is terminal.
fn assert_bookends(record: &ExecutionRecord, entries: &[HistoryEntry], what: &str) {
    let at = |wanted: fn(&Happened) -> bool| -> Vec<usize> {
        entries.iter().enumerate().filter(|(_, entry)| wanted(&entry.what)).map(|(at, _)| at).collect()
    };
    let created = at(|happened| matches!(happened, Happened::Created { .. }));
    assert_eq!(created, [0], "{what}: CREATED: `created` must be the first entry, once");
    let settled = at(|happened| matches!(happened, Happened::Settled { .. }));
    match settled[..] {
        [] => {
            assert!(!record.status.is_terminal(), "{what}: SETTLE WITHOUT HISTORY: {:?}, never settled", record.status)
        }
        [at] => {
            assert_eq!(at, entries.len() - 1, "{what}: SETTLED NOT LAST: entries after `settled`");
            let Happened::Settled { status, .. } = entries[at].what else { unreachable!() };
            assert_eq!(status, record.status, "{what}: the record and its `settled` entry disagree");
        }
        _ => panic!("{what}: SETTLED TWICE: `settled` at {settled:?}"),
    }
}

/// A pause (its entries, one per pending call of one write), or a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    Pause,
    Decision,
}

/// The pauses and decisions of a history, in order.
fn turns(entries: &[HistoryEntry]) -> Vec<Turn> {
    let mut turns = Vec::new();
    for entry in entries {
        let turn = match entry.what {
            Happened::Paused { .. } => Turn::Pause,
            Happened::Decided { .. } => Turn::Decision,
            _ => continue,
        };
        if turn == Turn::Decision || turns.last() != Some(&Turn::Pause) {
            turns.push(turn);
        }
    }
    turns
}

/// The steps the `paused` entries name (a step is asked about once).
fn paused_steps(entries: &[HistoryEntry], what: &str) -> Vec<(u32, String)> {
    let steps: Vec<(u32, String)> = entries
        .iter()
        .filter_map(|entry| match &entry.what {
            Happened::Paused { step, tool, .. } => Some((*step, tool.clone())),
            _ => None,
        })
        .collect();
    let distinct: BTreeSet<u32> = steps.iter().map(|(step, _)| *step).collect();
    assert_eq!(distinct.len(), steps.len(), "{what}: PAUSED TWICE: a step is asked about twice: {steps:?}");
    steps
}

/// A stored execution and its history: the record has its status, every
/// claim it counts has its `decided` entry (a lost race wrote none), and every
/// pause it stored its `paused` entries, the one it waits on last.
fn assert_stored_agrees(
    execution: &Execution,
    record: &ExecutionRecord,
    entries: &[HistoryEntry],
    cancels: u32,
    what: &str,
) {
    let status = execution.status();
    assert_eq!(
        record.status, status,
        "{what}: RECORD DISAGREES: the record says {:?}, the store {status:?}",
        record.status
    );
    let resumes = execution.resumes();
    let decided = entries.iter().filter(|entry| matches!(entry.what, Happened::Decided { .. })).count();
    assert_eq!(
        decided,
        (resumes + cancels) as usize,
        "{what}: DECISIONS DISAGREE: {resumes} claims stored and {cancels} cancellations, {decided} `decided` entries"
    );
    let turns = turns(entries);
    if cancels == 0 {
        let alternate = turns.iter().enumerate().all(|(at, turn)| *turn == [Turn::Pause, Turn::Decision][at % 2]);
        assert!(alternate, "{what}: each decision decides the pause before it: {turns:?}");
    }
    let pauses = turns.iter().filter(|turn| **turn == Turn::Pause).count() as u32;
    let steps = paused_steps(entries, what);
    match status {
        ExecutionStatus::Paused => {
            assert_eq!(pauses, resumes + 1, "{what}: PAUSE WITHOUT HISTORY: {resumes} claims, {pauses} pauses");
            let pending: Vec<(u32, String)> =
                execution.journal.pending.iter().map(|call| (call.step, call.path.clone())).collect();
            let last = &steps[steps.len() - pending.len().min(steps.len())..];
            assert_eq!(last, pending, "{what}: PAUSE WITHOUT HISTORY: the pending calls are the last `paused` entries");
        }
        // An expiry ends a pause, or a run nobody ran any more.
        ExecutionStatus::Expired => {
            assert!(pauses == resumes || pauses == resumes + 1, "{what}: {resumes} claims, {pauses} pauses")
        }
        _ => assert_eq!(pauses, resumes, "{what}: PAUSE WITHOUT HISTORY: {resumes} claims of {pauses} pauses"),
    }
    if let Some(Happened::Settled { error_code, .. }) = entries.last().map(|entry| &entry.what) {
        let code = match execution.state() {
            ExecutionState::Failed { error } | ExecutionState::Declined { error } => Some(&error.code),
            _ => None,
        };
        assert_eq!(error_code.as_ref(), code, "{what}: the `settled` entry's error code");
    }
}

/// An execution that is not stored: it ended within its answer (no pause, no
/// decision, settled), or its approval window closed and the store may have
/// forgotten it (its history then ends with that pause).
fn assert_unstored_agrees(record: &ExecutionRecord, entries: &[HistoryEntry], what: &str) {
    if record.status.is_terminal() {
        let asked = turns(entries);
        assert!(asked.is_empty(), "{what}: ENTRY WITHOUT ITS CHANGE: never stored, yet paused or decided: {asked:?}");
    } else {
        let status = record.status_at(now());
        assert_eq!(
            status,
            ExecutionStatus::Expired,
            "{what}: ENTRY WITHOUT ITS CHANGE: the history says {:?} and nothing is stored",
            record.status
        );
        assert_eq!(turns(entries).last(), Some(&Turn::Pause), "{what}: gone while its pause waited");
    }
}

/// The calls of a history and the upstream's writes agree: a step is called
/// once; a call a decision let run follows that decision and is one upstream
/// write (the history never claims a write that did not happen); and every
/// upstream write, and every call the journal holds as completed, is in the
/// history, unless its outcome was never stored (interrupted, or still running).
fn assert_calls_agree(
    stored: Option<&Execution>,
    entries: &[HistoryEntry],
    posts: &[executor_tests::faults::Applied],
    what: &str,
) {
    let called: Vec<(usize, &Called)> = entries
        .iter()
        .enumerate()
        .filter_map(|(at, entry)| match &entry.what {
            Happened::Called(call) => Some((at, call)),
            _ => None,
        })
        .collect();
    let steps: BTreeSet<u32> = called.iter().map(|(_, call)| call.step).collect();
    assert_eq!(steps.len(), called.len(), "{what}: CALLED TWICE: a step has two `called` entries");
    let posted = |step: u32| posts.iter().filter(|post| step_of(post) == Some(step)).count();
    for (at, call) in called.iter().filter(|(_, call)| call.allowed_by == Some(AllowedBy::Decision)) {
        assert_approved(entries, *at, call.step, what);
        let made = posted(call.step);
        match call.outcome {
            CallOutcome::Ok => {
                assert_eq!(
                    made, 1,
                    "{what}: CALL THAT DID NOT HAPPEN: step {} succeeded, {made} upstream writes",
                    call.step
                )
            }
            _ => assert!(made <= 1, "{what}: step {} failed after {made} upstream writes", call.step),
        }
    }
    let journaled: BTreeSet<u32> = stored
        .map(|execution| execution.journal.steps.iter())
        .into_iter()
        .flatten()
        .filter(|step| !matches!(step.outcome, StepOutcome::Declined { .. }))
        .map(|step| step.step)
        .collect();
    let missing: Vec<&u32> = journaled.difference(&steps).collect();
    assert!(missing.is_empty(), "{what}: CALL MISSING: the journal holds steps {missing:?} and the history does not");
    let unknown = stored.is_some_and(|execution| match execution.state() {
        ExecutionState::Failed { error } => error.code == "interrupted",
        _ => execution.is_running(),
    });
    for post in posts {
        let step = step_of(post).expect("an Idempotency-Key `<executionId>:<step>`");
        let unstored = unknown && !journaled.contains(&step);
        assert!(
            steps.contains(&step) || unstored,
            "{what}: CALL MISSING: the write at step {step} reached the upstream"
        );
    }
}

/// The call at `at` (step `step`) ran on a decision: its pause came before,
/// then an accept, then the call.
fn assert_approved(entries: &[HistoryEntry], at: usize, step: u32, what: &str) {
    let paused =
        entries[..at].iter().rposition(|entry| matches!(entry.what, Happened::Paused { step: s, .. } if s == step));
    let Some(paused) = paused else {
        panic!("{what}: UNAPPROVED CALL: step {step} ran on a decision and never paused")
    };
    let accepted = entries[paused..at]
        .iter()
        .any(|entry| matches!(entry.what, Happened::Decided { decision: executor_core::ApprovalAction::Accept, .. }));
    assert!(accepted, "{what}: UNAPPROVED CALL: step {step} ran on a decision that did not accept it");
}

/// The history of a run of [`READ`], never stored: created, its read, settled.
async fn assert_read_recorded<S: Store>(store: &S, upstream: &Upstream, id: &ExecutionId, what: &str) {
    let agreed = assert_history_agrees(store, upstream, id, 0, what).await;
    assert_eq!(agreed, Agreed::Unstored, "{what}: {id} ended within its answer");
    let (record, entries) = store.execution_history(Access::Internal, id).await.unwrap();
    let happened: Vec<&Happened> = entries.iter().map(|entry| &entry.what).collect();
    let read = |what: &Happened| matches!(what, Happened::Called(call) if call.step == 0 && call.tool.ends_with("listEntries"));
    assert!(
        matches!(happened[..], [Happened::Created { .. }, called, Happened::Settled { .. }] if read(called)),
        "{what}: {id}: created, its read, settled: {happened:#?}"
    );
    assert_eq!(record.status, ExecutionStatus::Completed, "{what}: {id} completed");
}

/// Counts the metric events ([`executor_telemetry::METRICS_TARGET`]) named
/// `metric` that the future it is given to emits.
#[derive(Clone)]
struct MetricCount {
    metric: &'static str,
    seen: Arc<AtomicUsize>,
}

impl MetricCount {
    fn new(metric: &'static str) -> Self {
        Self { metric, seen: Arc::default() }
    }

    fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }
}

impl tracing::Subscriber for MetricCount {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target() == executor_telemetry::METRICS_TARGET
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        struct Named(Option<String>);
        impl tracing::field::Visit for Named {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "metric" {
                    self.0 = Some(value.to_owned());
                }
            }
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
        }
        let mut named = Named(None);
        event.record(&mut named);
        if named.0.as_deref() == Some(self.metric) {
            self.seen.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

// ---------------------------------------------------------------------------
// The operations.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Operation {
    Initialize,
    Execute,
    ExecuteRead,
    Resume,
    ResumeToNextPause,
    ApprovalPage,
    KeyCreation,
    AlarmReschedule,
    AlarmExtend,
    AlarmDestroy,
}

impl Operation {
    const ALL: [Operation; 10] = [
        Operation::Initialize,
        Operation::Execute,
        Operation::ExecuteRead,
        Operation::Resume,
        Operation::ResumeToNextPause,
        Operation::ApprovalPage,
        Operation::KeyCreation,
        Operation::AlarmReschedule,
        Operation::AlarmExtend,
        Operation::AlarmDestroy,
    ];

    fn name(self) -> &'static str {
        match self {
            Operation::Initialize => "initialize (session creation)",
            Operation::Execute => "execute → pause",
            Operation::ExecuteRead => "execute → completed in its answer",
            Operation::Resume => "resume → claim → call → settle",
            Operation::ResumeToNextPause => "resume → next pause",
            Operation::ApprovalPage => "approval page POST (browser)",
            Operation::KeyCreation => "key creation",
            Operation::AlarmReschedule => "alarm: reschedule",
            Operation::AlarmExtend => "alarm: extend paused lease",
            Operation::AlarmDestroy => "alarm: destroy",
        }
    }

    /// Whether the operation makes upstream requests (whose faults are injected too).
    fn calls_upstream(self) -> bool {
        matches!(
            self,
            Operation::Execute
                | Operation::ExecuteRead
                | Operation::Resume
                | Operation::ResumeToNextPause
                | Operation::ApprovalPage
        )
    }
}

#[derive(Debug, Clone, Copy)]
enum Injection {
    Store(Fault, usize),
    Upstream(UpstreamFault, usize),
}

impl Injection {
    fn arm<D: Deployment>(self, rig: &Rig<D>) {
        match self {
            Injection::Store(fault, n) => rig.faults.arm(Trigger::Call(n), fault),
            Injection::Upstream(fault, n) => rig.upstream.fail_request(n, fault),
        }
    }

    fn disarm<D: Deployment>(self, rig: &Rig<D>) -> bool {
        rig.faults.disarm();
        rig.upstream.disarm();
        match self {
            Injection::Store(..) => rig.faults.fired().is_some(),
            Injection::Upstream(..) => rig.upstream.fired().is_some(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Injection::Store(fault, _) => fault.name(),
            Injection::Upstream(fault, _) => fault.name(),
        }
    }
}

/// One run's record: the first answer, and where things stood after recovery.
struct Run {
    fired: bool,
    first: String,
    outcome: String,
}

/// Run `operation` once with `injection` armed, recover, check.
async fn run<D: Deployment>(rig: &mut Rig<D>, operation: Operation, injection: Injection) -> Run {
    let what =
        format!("{} on {} with {} at {:?}", operation.name(), rig.deployment.name(), injection.name(), injection);
    let run = match operation {
        Operation::Initialize => initialize(rig, injection, &what).await,
        Operation::Execute => execute(rig, injection, &what).await,
        Operation::ExecuteRead => execute_read(rig, injection, &what).await,
        Operation::Resume => resume(rig, injection, &what, WRITE, false).await,
        Operation::ResumeToNextPause => resume(rig, injection, &what, TWO_WRITES, true).await,
        Operation::ApprovalPage => approval_page(rig, injection, &what).await,
        Operation::KeyCreation => key_creation(rig, injection).await,
        Operation::AlarmReschedule => alarm(rig, injection, Duration::from_secs(2 * 60), None).await,
        Operation::AlarmExtend => alarm(rig, injection, Duration::from_secs(6 * 60), Some(6)).await,
        Operation::AlarmDestroy => alarm(rig, injection, Duration::from_secs(16 * 60), Some(16)).await,
    };
    rig.assert_upstream_writes();
    rig.assert_histories(&what).await;
    run
}

async fn initialize<D: Deployment>(rig: &mut Rig<D>, injection: Injection, what: &str) -> Run {
    let mut client = rig.client(ElicitationMode::Model);
    injection.arm(rig);
    let (first, crashed) = rig.through_crashes(client.initialize()).await;
    let fired = injection.disarm(rig);
    first.assert_clear(crashed, what);
    if !first.is_ok() {
        let retried = client.initialize().await;
        assert!(retried.is_ok(), "{what}: the retry starts a session: {retried:?}");
    }
    assert!(client.list_tools().await.is_ok(), "{what}: the session works");
    let id = SessionId::parse(client.session.clone().unwrap()).unwrap();
    let session = rig.deployment.open().get_session(Access::Owner(&alice()), &id).await.unwrap();
    let alarm = session.alarm_at.expect("an active session has an alarm");
    // The alarm is armed: a schedule on AWS; locally, re-armed from the store at every start.
    match rig.deployment.scheduler() {
        scheduler @ Scheduler::EventBridge(..) => {
            assert!(scheduler.armed_for(&id, alarm).await, "{what}: the alarm is scheduled")
        }
        Scheduler::InProcess(_) => {
            let armed = rig.deployment.open().armed_sessions().await.unwrap();
            assert!(armed.contains(&(id, alarm)), "{what}: a restart re-arms the alarm");
        }
    }
    Run { fired, first: first.label(), outcome: "session works, alarm armed".into() }
}

async fn execute<D: Deployment>(rig: &mut Rig<D>, injection: Injection, what: &str) -> Run {
    let mut client = rig.client(ElicitationMode::Model);
    assert!(client.initialize().await.is_ok());
    injection.arm(rig);
    let (first, crashed) = rig.through_crashes(client.call("execute", json!({ "code": WRITE }))).await;
    let fired = injection.disarm(rig);
    first.assert_clear(crashed, what);
    let told = match first.status() {
        Some("waiting_for_interaction") => first.clone(),
        _ => client.call("execute", json!({ "code": WRITE })).await,
    };
    assert_eq!(told.status(), Some("waiting_for_interaction"), "{what}: the retry pauses: {told:?}");
    rig.told.extend([&first, &told].into_iter().filter_map(|answer| answer.execution_id().map(str::to_owned)));
    let outcome = rig.settle_told_pause(told.execution_id().unwrap(), false).await;
    Run { fired, first: first.label(), outcome }
}

/// Code that only reads completes within its answer: it is never stored, and
/// only its history is written (after the answer is decided, before it is
/// sent). A history write that fails (refused, timed out) leaves the answer
/// the completed result, with no history; any other fault lets the client try
/// again, and each run whose history write landed has its whole history.
async fn execute_read<D: Deployment>(rig: &mut Rig<D>, injection: Injection, what: &str) -> Run {
    let mut client = rig.client(ElicitationMode::Model);
    assert!(client.initialize().await.is_ok());
    let store = rig.deployment.open();
    let before = history_ids(&store).await;
    injection.arm(rig);
    let (first, crashed) = rig.through_crashes(client.call("execute", json!({ "code": READ }))).await;
    let fired = injection.disarm(rig);
    first.assert_clear(crashed, what);
    let unwritten = matches!(injection, Injection::Store(Fault::Error | Fault::Timeout, _))
        && rig.faults.fired().is_some_and(|fired| fired.operation == "append_history");
    let recorded = |after: BTreeSet<String>| after.difference(&before).cloned().collect::<Vec<_>>();
    let after_first = recorded(history_ids(&store).await);
    let completed = |answer: &Answer| {
        let Answer::Done { value, is_error: false } = answer else { return false };
        value["status"] == "completed" && value["result"]["listed"].is_boolean()
    };
    let recorded = if completed(&first) {
        assert_eq!(after_first.len(), usize::from(!unwritten), "{what}: its history alone is written: {after_first:?}");
        after_first
    } else {
        assert!(!unwritten, "{what}: HISTORY FAILED THE ANSWER: a failed history write made the answer {first:?}");
        assert!(after_first.len() <= 1, "{what}: one run, at most one history: {after_first:?}");
        let retried = client.call("execute", json!({ "code": READ })).await;
        assert!(completed(&retried), "{what}: the retry completes: {retried:?}");
        let after_retry = recorded(history_ids(&store).await);
        assert_eq!(after_retry.len(), after_first.len() + 1, "{what}: the retry's history: {after_retry:?}");
        after_retry
    };
    for id in &recorded {
        assert_read_recorded(&store, &rig.upstream, &ExecutionId::parse(id).unwrap(), what).await;
    }
    let outcome = match unwritten {
        true => "completed, history not written",
        false => "completed, history written",
    };
    Run { fired, first: first.label(), outcome: outcome.into() }
}

/// Accept a pause (naming it by its `pauseId`); a client without a clear
/// outcome tries again. With `careful`, it first reads where the execution
/// stands (the owner's API) as well; without, the retry is blind, which the
/// `pauseId` makes safe (see `a_retried_accept_never_approves_a_pause_nobody_saw`).
async fn resume<D: Deployment>(rig: &mut Rig<D>, injection: Injection, what: &str, code: &str, careful: bool) -> Run {
    let (client, id, paused) = rig.told_pause(code).await;
    rig.approve(&id, &paused.interaction_args());
    let decision = json!({ "executionId": id, "action": "accept", "pauseId": paused.pause_id() });
    injection.arm(rig);
    let (first, crashed) = rig.through_crashes(client.call("resume", decision.clone())).await;
    let fired = injection.disarm(rig);
    first.assert_clear(crashed, what);
    // "Already settled" is a clear outcome; a storage error or no answer is not.
    let last = match first.label().as_str() {
        "store_error" | "connection lost" | "http 503" => {
            let view = if careful { Some(client.view(&id).await) } else { None };
            let retried = match view {
                Some(view) if view.interaction_args() != paused.interaction_args() => view,
                _ => client.call("resume", decision).await,
            };
            retried.assert_clear(false, what);
            retried
        }
        _ => first.clone(),
    };
    let outcome = rig.settle_told_pause(&id, true).await;
    let outcome = match last.status() {
        // The next pause was told to the client: `settle_told_pause` resumed it.
        Some("waiting_for_interaction") => outcome.replace("still paused", "next pause told"),
        _ => outcome,
    };
    Run { fired, first: first.label(), outcome }
}

async fn approval_page<D: Deployment>(rig: &mut Rig<D>, injection: Injection, what: &str) -> Run {
    let (id, form) = rig.approval_form().await;
    injection.arm(rig);
    let (first, crashed) = rig.through_crashes(form.submit()).await;
    let fired = injection.disarm(rig);
    first.assert_clear(crashed, what);
    // The person tries again when the page did not say what happened.
    if !matches!(&first, Page::Shown { status: 200, .. }) {
        form.submit().await.assert_clear(false, what);
    }
    let outcome = rig.settle_told_pause(&id, true).await;
    Run { fired, first: first.label(), outcome }
}

/// The approval page's form, as the browser that opened the link holds it.
struct Form {
    http: reqwest::Client,
    action: String,
    cookie: String,
    body: String,
}

impl Form {
    /// Approve: POST the form with its CSRF cookie.
    async fn submit(&self) -> Page {
        let sent = self
            .http
            .post(&self.action)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", &self.cookie)
            .body(self.body.clone())
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                match response.text().await {
                    Ok(html) => Page::Shown { status, cookie: None, html },
                    Err(e) => Page::Lost(e.to_string()),
                }
            }
            Err(e) => Page::Lost(e.to_string()),
        }
    }
}

async fn open(http: &reqwest::Client, url: &str) -> Page {
    match http.get(url).send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let cookie = response
                .headers()
                .get("set-cookie")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .map(str::to_owned);
            match response.text().await {
                Ok(html) => Page::Shown { status, cookie, html },
                Err(e) => Page::Lost(e.to_string()),
            }
        }
        Err(e) => Page::Lost(e.to_string()),
    }
}

/// `executor keys create --owner carol`, then again if it did not print a token.
async fn key_creation<D: Deployment>(rig: &mut Rig<D>, injection: Injection) -> Run {
    let store = Arc::new(rig.faults.wrap(rig.deployment.open()));
    injection.arm(rig);
    let first = rig.task(async move { executor_cli::keys::create(&*store, "carol").await }).await;
    let fired = injection.disarm(rig);
    let label = match &first {
        Some(Ok(_)) => "token printed".to_owned(),
        Some(Err(error)) => {
            assert!(error.to_string().contains("storage backend failed"), "{error}");
            "store error".to_owned()
        }
        None => "process died".to_owned(),
    };
    let token = match first {
        Some(Ok(token)) => token,
        _ => executor_cli::keys::create(&rig.deployment.open(), "carol").await.unwrap(),
    };
    let found = rig.deployment.open().find_key(&TokenHash::of_token(&token)).await.unwrap();
    assert_eq!(found.owner, Principal::parse("carol").unwrap(), "the printed token works");
    Run { fired, first: label, outcome: "the printed token works".into() }
}

/// A session idle for `idle` when its alarm fires; with `paused_minutes_ago`,
/// it has a pause made then (its window of 10 min open or over by now).
async fn alarm<D: Deployment>(
    rig: &mut Rig<D>,
    injection: Injection,
    idle: Duration,
    paused_minutes_ago: Option<u64>,
) -> Run {
    let mut client = rig.client(ElicitationMode::Model);
    assert!(client.initialize().await.is_ok());
    let session_id = SessionId::parse(client.session.clone().unwrap()).unwrap();
    let store = Arc::new(rig.deployment.open());
    // Five minutes idle ends a session here, so the lease rows are quick to reach.
    let timeouts = Timeouts { session_timeout: Duration::from_secs(5 * 60), ..Timeouts::default() };
    let paused = match paused_minutes_ago {
        Some(minutes) => {
            let clock = ago(Duration::from_secs(minutes * 60));
            let sandbox = Sandbox::with_clock(Limits::default(), clock.clone());
            let executions = Executions::new(store.clone(), sandbox, timeouts, clock);
            let mode = ElicitationMode::Model;
            let result =
                executions.execute(&alice(), Some(&session_id), mode, WRITE.into(), rig.catalog.clone()).await.unwrap();
            let ExecutionResult::Paused { execution_id, expires_at, .. } = result else { panic!("{result:?}") };
            rig.told.insert(execution_id.to_string());
            Some((execution_id, expires_at))
        }
        None => None,
    };
    let mut session = store.get_session(Access::Internal, &session_id).await.unwrap();
    session.last_activity_at = Timestamp::from_millis(now().as_millis() - idle.as_millis() as u64);
    store.update_session(&mut session).await.unwrap();
    // The generation that fires: what the session's record says is armed.
    let generation = session.alarm_at;

    let at = now();
    let alarms = |store: Arc<dyn Store>, scheduler: Arc<dyn AlarmScheduler>| {
        Alarms::new(store.clone(), store, scheduler, timeouts)
    };
    let scheduler = rig.deployment.scheduler();
    let faulty = alarms(Arc::new(rig.faults.wrap(rig.deployment.open())), Arc::new(rig.faults.wrap(scheduler.clone())));
    injection.arm(rig);
    let id = session_id.clone();
    let first = rig.task(async move { faulty.fire(&id, generation, at).await }).await;
    let fired = injection.disarm(rig);
    let label = match &first {
        Some(Ok(decision)) => decision_name(decision).to_owned(),
        Some(Err(error)) => {
            assert!(matches!(error, StoreError::Backend { .. }), "{error}");
            "store error".to_owned()
        }
        None => "process died".to_owned(),
    };
    // The next firing: EventBridge retries a failed invocation; a restarted
    // `executor serve` re-arms from the store. Its process is a new one.
    let (decision, scheduler) = match first {
        Some(Ok(decision)) => (decision, scheduler),
        _ => {
            let scheduler = rig.deployment.scheduler();
            let unfaulted = alarms(Arc::new(rig.deployment.open()), Arc::new(scheduler.clone()));
            (unfaulted.fire(&session_id, generation, at).await.unwrap(), scheduler)
        }
    };
    let stored = store.get_session(Access::Internal, &session_id).await.unwrap();
    // A redelivery after the first firing stored its decision only arms that
    // decision (and says Ignore): the outcome is the first firing's.
    let decision = match (decision, stored.alarm_at) {
        (AlarmDecision::Ignore, Some(next)) if stored.is_active() && Some(next) > generation => match paused {
            Some(_) => AlarmDecision::ExtendPausedLease { at: next },
            None => AlarmDecision::Reschedule { at: next },
        },
        (decision, _) => decision,
    };
    let outcome = match (paused_minutes_ago, decision) {
        (None, AlarmDecision::Reschedule { at: next }) | (Some(_), AlarmDecision::ExtendPausedLease { at: next }) => {
            assert_eq!((stored.status, stored.alarm_at), (SessionStatus::Active, Some(next)));
            assert!(scheduler.armed_for(&session_id, next).await, "the next alarm is armed");
            match paused {
                Some((id, _)) => {
                    rig.settle_told_pause(id.as_str(), false).await;
                    "lease extended, pause resumable".to_owned()
                }
                None => "rescheduled".to_owned(),
            }
        }
        (Some(_), AlarmDecision::Destroy | AlarmDecision::Ignore) => {
            // Its schedule went with the firing (one-time, deleted after completion).
            assert_eq!((stored.status, stored.alarm_at), (SessionStatus::Destroyed, None), "{decision:?}");
            let (id, deadline) = paused.unwrap();
            assert!(deadline <= at, "only a pause past its deadline may go with its session");
            let view = rig.later().view(&alice(), &id).await;
            assert!(matches!(view, Err(ResumeError::Expired(_))), "{view:?}");
            "destroyed, expired pause gone".to_owned()
        }
        (paused, decision) => panic!("alarm with paused work {paused:?} decided {decision:?}"),
    };
    Run { fired, first: label, outcome }
}

fn decision_name(decision: &AlarmDecision) -> &'static str {
    match decision {
        AlarmDecision::Ignore => "ignore",
        AlarmDecision::Reschedule { .. } => "reschedule",
        AlarmDecision::ExtendPausedLease { .. } => "extend",
        AlarmDecision::Destroy => "destroy",
    }
}

// ---------------------------------------------------------------------------
// The suite and its summary.

#[derive(Default)]
struct Row {
    injected: usize,
    first: BTreeMap<String, usize>,
    outcome: BTreeMap<String, usize>,
}

/// Every operation on a rig of its own (a fresh store: moto copies a whole
/// table for each transaction, so small tables keep it quick).
async fn suite<D: Deployment, F: Future<Output = Rig<D>>>(rig: impl Fn() -> F) {
    let mut table: BTreeMap<(Operation, String), Row> = BTreeMap::new();
    let mut store = "";
    for operation in Operation::ALL {
        let mut rig = rig().await;
        store = rig.deployment.name();
        let mut injections: Vec<Box<dyn Fn(usize) -> Injection>> =
            Fault::ALL.into_iter().map(|f| Box::new(move |n| Injection::Store(f, n)) as Box<_>).collect();
        if operation.calls_upstream() {
            injections
                .extend(UpstreamFault::ALL.into_iter().map(|f| Box::new(move |n| Injection::Upstream(f, n)) as Box<_>));
        }
        for injection in injections {
            for n in 1..=MAX_CALLS {
                let injection = injection(n);
                let run = run(&mut rig, operation, injection).await;
                let row = table.entry((operation, injection.name().to_owned())).or_default();
                if !run.fired {
                    break;
                }
                row.injected += 1;
                *row.first.entry(run.first).or_default() += 1;
                *row.outcome.entry(run.outcome).or_default() += 1;
                assert!(n < MAX_CALLS, "{} never completed", operation.name());
            }
        }
    }
    let mut summary = String::from("| operation | store | fault | injected | first answer | after recovery |\n");
    summary.push_str("|---|---|---|---|---|---|\n");
    let counts = |map: &BTreeMap<String, usize>| {
        map.iter().map(|(what, n)| format!("{what} ×{n}")).collect::<Vec<_>>().join(", ")
    };
    for ((operation, fault), row) in &table {
        summary.push_str(&format!(
            "| {} | {store} | {fault} | {} | {} | {} |\n",
            operation.name(),
            row.injected,
            counts(&row.first),
            counts(&row.outcome)
        ));
    }
    println!("{summary}");
}
