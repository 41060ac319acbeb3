//! Fault injection around real parts.
//!
//! - [`Faulty`] wraps a real store (`EmbeddedStore`, `DynamoStore`) or alarm
//!   scheduler and implements the same ports; a shared [`Faults`] plan makes
//!   one chosen call fail: refused, timed out, applied but unacknowledged, or
//!   the caller "crashing" before or after it (a future that never completes,
//!   which the test aborts).
//! - [`Upstream`] is a real HTTP service on loopback, described by
//!   [`LEDGER_SPEC`], that records every request it applied (method, path,
//!   `Idempotency-Key`, body) and can be told to fail its Nth request: answer
//!   503, reset the connection before or after applying it, or hold it until
//!   the caller gives up. A POST whose JSON body has `holdMs` (a GET: whose
//!   query has `holdMs`) is held that long (or until the caller goes away), so
//!   a test can crash a host while the call is in flight, or make slow reads.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use executor_core::{
    ApiKey, ConsoleSecret, ConsoleSecretKind, Event, Execution, ExecutionId, ExecutionRecord, Grant, GrantId,
    HistoryAppend, HistoryEntry, OAuthClient, OAuthState, Principal, Session, SessionId, SourceConnection, Timestamp,
    TokenHash,
};
use executor_scheduler::AlarmScheduler;
use executor_store::{
    Access, AuditLine, ConnectionStore, ConsoleStore, Emitted, ExecutionStore, GrantStore, HistoryStore, KeyStore,
    OAuthClientStore, OutboxStore, Page, QuotaOutcome, QuotaStore, QuotaTake, SessionStore, StoreError,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What happens to the chosen call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// Refused at once (a throttle, a 5xx): nothing is applied.
    Error,
    /// No answer within the deadline ([`TIMEOUT`]), then an error: nothing is applied.
    Timeout,
    /// Applied, then the answer is lost: the caller gets an error for a write that happened.
    LostAck,
    /// The caller stops just before the call (its process died): nothing more happens.
    CrashBefore,
    /// The call is applied and the caller stops before seeing the answer.
    CrashAfter,
}

impl Fault {
    pub const ALL: [Fault; 5] = [Fault::Error, Fault::Timeout, Fault::LostAck, Fault::CrashBefore, Fault::CrashAfter];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Error => "error",
            Fault::Timeout => "timeout",
            Fault::LostAck => "lost ack",
            Fault::CrashBefore => "crash before",
            Fault::CrashAfter => "crash after",
        }
    }
}

/// How long a [`Fault::Timeout`] holds the caller before failing.
pub const TIMEOUT: Duration = Duration::from_millis(50);

/// Which call the fault hits, counted from [`Faults::arm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The Nth port call of any kind (from 1).
    Call(usize),
    /// The Nth call of the named operation (e.g. `"update_execution"`).
    CallOf(&'static str, usize),
}

/// The call a fault hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub fault: Fault,
    pub operation: &'static str,
}

#[derive(Default)]
struct Plan {
    armed: Option<(Trigger, Fault)>,
    calls: Vec<&'static str>,
    fired: Option<Fired>,
}

/// One fault plan shared by every wrapper of a host (its store and its
/// scheduler), so that "call N" counts all their calls in order.
#[derive(Clone)]
pub struct Faults {
    plan: Arc<Mutex<Plan>>,
    crashed: watch::Sender<bool>,
}

impl Default for Faults {
    fn default() -> Self {
        Self::new()
    }
}

impl Faults {
    pub fn new() -> Self {
        Self { plan: Arc::default(), crashed: watch::Sender::new(false) }
    }

    /// Wrap `inner` so that its calls follow this plan.
    pub fn wrap<T>(&self, inner: T) -> Faulty<T> {
        Faulty { inner, faults: self.clone() }
    }

    /// Fail the call `trigger` names with `fault`, once; counting starts now.
    pub fn arm(&self, trigger: Trigger, fault: Fault) {
        *self.plan.lock().unwrap() = Plan { armed: Some((trigger, fault)), ..Plan::default() };
        self.crashed.send_replace(false);
    }

    /// Let every call through again; what fired stays readable.
    pub fn disarm(&self) {
        self.plan.lock().unwrap().armed = None;
    }

    /// How many calls of `operation` were made since [`Faults::arm`] (or the start).
    pub fn calls_of(&self, operation: &str) -> usize {
        self.plan.lock().unwrap().calls.iter().filter(|call| **call == operation).count()
    }

    /// The fault that hit, if the plan's call was reached.
    pub fn fired(&self) -> Option<Fired> {
        self.plan.lock().unwrap().fired.clone()
    }

    /// Completes once a crash fault has stopped its caller.
    pub async fn crashed(&self) {
        let mut crashed = self.crashed.subscribe();
        let _ = crashed.wait_for(|crashed| *crashed).await;
    }

    /// Count a call and say which fault, if any, it gets.
    fn next(&self, operation: &'static str) -> Option<Fault> {
        let mut plan = self.plan.lock().unwrap();
        plan.calls.push(operation);
        let call = plan.calls.len();
        let of_operation = plan.calls.iter().filter(|c| **c == operation).count();
        let (trigger, fault) = plan.armed?;
        let hit = match trigger {
            Trigger::Call(n) => n == call,
            Trigger::CallOf(name, n) => name == operation && n == of_operation,
        };
        if !hit {
            return None;
        }
        plan.armed = None;
        plan.fired = Some(Fired { fault, operation });
        Some(fault)
    }

    /// Run `call` (one port call named `operation`) under the plan.
    async fn run<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let injected = |detail: &str| StoreError::Backend { operation: phrase(operation), detail: detail.to_owned() };
        match self.next(operation) {
            None => call.await,
            Some(Fault::Error) => Err(injected("injected fault: the backend refused the call")),
            Some(Fault::Timeout) => {
                tokio::time::sleep(TIMEOUT).await;
                Err(injected("injected fault: no answer before the deadline (timed out)"))
            }
            Some(Fault::LostAck) => {
                let _applied = call.await;
                Err(injected("injected fault: the connection was lost before the answer arrived"))
            }
            Some(Fault::CrashBefore) => self.stop().await,
            Some(Fault::CrashAfter) => {
                let _applied = call.await;
                self.stop().await
            }
        }
    }

    /// The caller's process dies here: say so, and never return.
    async fn stop<T>(&self) -> T {
        self.crashed.send_replace(true);
        std::future::pending().await
    }
}

/// How a store error names each operation ("storage backend failed to ...").
fn phrase(operation: &'static str) -> &'static str {
    match operation {
        "create_session" => "create a session",
        "get_session" => "read a session",
        "update_session" => "update a session",
        "armed_sessions" => "list armed sessions",
        "create_execution" => "store an execution",
        "get_execution" => "read an execution",
        "update_execution" => "update an execution",
        "paused_executions" => "list paused executions",
        "append_history" => "store an execution's history",
        "list_executions" => "list executions",
        "execution_history" => "read an execution's history",
        "export_history" => "export the history",
        "all_grants" => "list every grant",
        "create_key" => "store an API key",
        "find_key" => "look up an API key",
        "list_keys" => "list API keys",
        "revoke_key" => "revoke an API key",
        "take_quota" => "take a quota",
        "release_slot" => "release a quota slot",
        "pending_events" => "list undelivered events",
        "delete_event" => "delete a delivered event",
        "put_console_secret" => "store a console secret",
        "take_console_secret" => "take a console secret",
        "get_console_secret" => "read a console secret",
        "delete_console_secret" => "delete a console secret",
        "revoke_console_sessions" => "revoke console sessions",
        "schedule" => "schedule a session alarm",
        "cancel" => "cancel a session alarm",
        other => other,
    }
}

/// A store or scheduler whose calls follow a [`Faults`] plan.
pub struct Faulty<T> {
    inner: T,
    faults: Faults,
}

#[async_trait]
impl<T: SessionStore> SessionStore for Faulty<T> {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        self.faults.run("create_session", self.inner.create_session(session)).await
    }

    async fn get_session(&self, access: Access<'_>, id: &SessionId) -> Result<Session, StoreError> {
        self.faults.run("get_session", self.inner.get_session(access, id)).await
    }

    async fn update_session_emitting(&self, session: &mut Session, events: &[Event]) -> Result<(), StoreError> {
        // The write goes through a copy: a caller whose acknowledgement was lost
        // must not see the version bump a successful write makes.
        let mut written = session.clone();
        self.faults.run("update_session", self.inner.update_session_emitting(&mut written, events)).await?;
        session.version = written.version;
        Ok(())
    }

    async fn armed_sessions(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        self.faults.run("armed_sessions", self.inner.armed_sessions()).await
    }
}

#[async_trait]
impl<T: ExecutionStore> ExecutionStore for Faulty<T> {
    async fn create_execution_emitting(&self, execution: &Execution, emitted: Emitted<'_>) -> Result<(), StoreError> {
        self.faults.run("create_execution", self.inner.create_execution_emitting(execution, emitted)).await
    }

    async fn get_execution(&self, access: Access<'_>, id: &ExecutionId) -> Result<Execution, StoreError> {
        self.faults.run("get_execution", self.inner.get_execution(access, id)).await
    }

    async fn update_execution_emitting(
        &self,
        execution: &mut Execution,
        emitted: Emitted<'_>,
    ) -> Result<(), StoreError> {
        let mut written = execution.clone();
        self.faults.run("update_execution", self.inner.update_execution_emitting(&mut written, emitted)).await?;
        execution.version = written.version;
        Ok(())
    }

    async fn find_receipt(&self, owner: &Principal, key_hash: &str) -> Result<executor_core::Receipt, StoreError> {
        self.faults.run("find_receipt", self.inner.find_receipt(owner, key_hash)).await
    }

    async fn paused_executions(&self, access: Access<'_>, session: &SessionId) -> Result<Vec<ExecutionId>, StoreError> {
        self.faults.run("paused_executions", self.inner.paused_executions(access, session)).await
    }
}

#[async_trait]
impl<T: HistoryStore> HistoryStore for Faulty<T> {
    async fn append_history(&self, append: &HistoryAppend) -> Result<(), StoreError> {
        self.faults.run("append_history", self.inner.append_history(append)).await
    }

    async fn queue_history(&self, append: HistoryAppend) -> Result<(), StoreError> {
        self.faults.run("append_history", self.inner.queue_history(append)).await
    }

    async fn list_executions(
        &self,
        access: Access<'_>,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<ExecutionRecord>, StoreError> {
        self.faults.run("list_executions", self.inner.list_executions(access, since, limit, cursor)).await
    }

    async fn execution_history(
        &self,
        access: Access<'_>,
        id: &ExecutionId,
    ) -> Result<(ExecutionRecord, Vec<HistoryEntry>), StoreError> {
        self.faults.run("execution_history", self.inner.execution_history(access, id)).await
    }

    async fn export_history(
        &self,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<AuditLine>, StoreError> {
        self.faults.run("export_history", self.inner.export_history(since, limit, cursor)).await
    }
}

#[async_trait]
impl<T: KeyStore> KeyStore for Faulty<T> {
    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        self.faults.run("create_key", self.inner.create_key(key)).await
    }

    async fn find_key(&self, hash: &TokenHash) -> Result<ApiKey, StoreError> {
        self.faults.run("find_key", self.inner.find_key(hash)).await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        self.faults.run("list_keys", self.inner.list_keys()).await
    }

    async fn revoke_key(&self, hash: &TokenHash) -> Result<(), StoreError> {
        self.faults.run("revoke_key", self.inner.revoke_key(hash)).await
    }
}

#[async_trait]
impl<T: QuotaStore> QuotaStore for Faulty<T> {
    async fn take_quota(&self, take: &QuotaTake) -> Result<QuotaOutcome, StoreError> {
        self.faults.run("take_quota", self.inner.take_quota(take)).await
    }

    async fn release_slot(&self, owner: &Principal, execution: &ExecutionId) -> Result<(), StoreError> {
        self.faults.run("release_slot", self.inner.release_slot(owner, execution)).await
    }
}

#[async_trait]
impl<T: GrantStore> GrantStore for Faulty<T> {
    async fn create_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        self.faults.run("create_grant", self.inner.create_grant(grant)).await
    }

    async fn list_grants(&self, owner: &Principal) -> Result<Vec<Grant>, StoreError> {
        self.faults.run("list_grants", self.inner.list_grants(owner)).await
    }

    async fn all_grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.faults.run("all_grants", self.inner.all_grants()).await
    }

    async fn revoke_grant(&self, access: Access<'_>, id: &GrantId) -> Result<Grant, StoreError> {
        self.faults.run("revoke_grant", self.inner.revoke_grant(access, id)).await
    }
}

#[async_trait]
impl<T: ConnectionStore> ConnectionStore for Faulty<T> {
    async fn get_connection(&self, owner: &Principal, source: &str) -> Result<SourceConnection, StoreError> {
        self.faults.run("get_connection", self.inner.get_connection(owner, source)).await
    }

    async fn list_connections(&self, owner: &Principal) -> Result<Vec<SourceConnection>, StoreError> {
        self.faults.run("list_connections", self.inner.list_connections(owner)).await
    }

    async fn save_connection(
        &self,
        connection: &mut SourceConnection,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        self.faults.run("save_connection", self.inner.save_connection(connection, expected)).await
    }

    async fn delete_connection(
        &self,
        owner: &Principal,
        source: &str,
        expected: Option<u64>,
    ) -> Result<(), StoreError> {
        self.faults.run("delete_connection", self.inner.delete_connection(owner, source, expected)).await
    }

    async fn put_oauth_state(&self, state: &OAuthState) -> Result<(), StoreError> {
        self.faults.run("put_oauth_state", self.inner.put_oauth_state(state)).await
    }

    async fn take_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<OAuthState, StoreError> {
        self.faults.run("take_oauth_state", self.inner.take_oauth_state(execution, hash)).await
    }

    async fn release_oauth_state(&self, execution: &ExecutionId, hash: &TokenHash) -> Result<(), StoreError> {
        self.faults.run("release_oauth_state", self.inner.release_oauth_state(execution, hash)).await
    }
}

#[async_trait]
impl<T: OAuthClientStore> OAuthClientStore for Faulty<T> {
    async fn get_oauth_client(&self, source: &str) -> Result<OAuthClient, StoreError> {
        self.faults.run("get_oauth_client", self.inner.get_oauth_client(source)).await
    }

    async fn put_oauth_client(&self, client: &mut OAuthClient) -> Result<(), StoreError> {
        self.faults.run("put_oauth_client", self.inner.put_oauth_client(client)).await
    }
}

#[async_trait]
impl<T: ConsoleStore> ConsoleStore for Faulty<T> {
    async fn put_console_secret(&self, secret: &ConsoleSecret) -> Result<(), StoreError> {
        self.faults.run("put_console_secret", self.inner.put_console_secret(secret)).await
    }

    async fn take_console_secret(
        &self,
        kind: ConsoleSecretKind,
        hash: &TokenHash,
    ) -> Result<ConsoleSecret, StoreError> {
        self.faults.run("take_console_secret", self.inner.take_console_secret(kind, hash)).await
    }

    async fn get_console_secret(&self, kind: ConsoleSecretKind, hash: &TokenHash) -> Result<ConsoleSecret, StoreError> {
        self.faults.run("get_console_secret", self.inner.get_console_secret(kind, hash)).await
    }

    async fn delete_console_secret(&self, hash: &TokenHash) -> Result<(), StoreError> {
        self.faults.run("delete_console_secret", self.inner.delete_console_secret(hash)).await
    }

    async fn revoke_console_sessions(&self, owner: &Principal) -> Result<usize, StoreError> {
        self.faults.run("revoke_console_sessions", self.inner.revoke_console_sessions(owner)).await
    }
}

#[async_trait]
impl<T: OutboxStore> OutboxStore for Faulty<T> {
    async fn pending_events(&self, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.faults.run("pending_events", self.inner.pending_events(limit)).await
    }

    async fn delete_event(&self, event: &Event) -> Result<(), StoreError> {
        self.faults.run("delete_event", self.inner.delete_event(event)).await
    }
}

#[async_trait]
impl<T: AlarmScheduler> AlarmScheduler for Faulty<T> {
    async fn schedule(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        self.faults.run("schedule", self.inner.schedule(session, at)).await
    }

    async fn cancel(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        self.faults.run("cancel", self.inner.cancel(session, at)).await
    }
}

/// An OpenAPI service with one list (`GET /entries`, a read that runs) and one
/// write (`POST /entries`, which needs approval): `tools.ledger.entries.listEntries({ n?, holdMs? })`
/// and `tools.ledger.entries.addEntry({ body })`. `n` only labels a read, so a
/// test can count how often each read reached the upstream.
pub const LEDGER_SPEC: &str = r#"
openapi: 3.1.0
info: {title: ledger, version: "1"}
paths:
  /entries:
    get:
      tags: [entries]
      operationId: listEntries
      summary: List the entries
      parameters:
        - {name: n, in: query, schema: {type: integer}}
        - {name: holdMs, in: query, schema: {type: integer}}
      responses: {"200": {description: ok}}
    post:
      tags: [entries]
      operationId: addEntry
      summary: Add an entry
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses: {"201": {description: created}}
"#;

/// How the upstream fails the request it was told to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UpstreamFault {
    /// `503 Service Unavailable`; nothing applied.
    Unavailable,
    /// The connection is reset before the request is applied.
    Reset,
    /// Applied, then the connection is reset: the caller never hears it worked.
    LostAnswer,
    /// Applied, then held until the caller gives up (its timeout).
    Late,
}

impl UpstreamFault {
    pub const ALL: [UpstreamFault; 4] =
        [UpstreamFault::Unavailable, UpstreamFault::Reset, UpstreamFault::LostAnswer, UpstreamFault::Late];

    pub fn name(self) -> &'static str {
        match self {
            UpstreamFault::Unavailable => "upstream 503",
            UpstreamFault::Reset => "upstream reset",
            UpstreamFault::LostAnswer => "upstream lost answer",
            UpstreamFault::Late => "upstream too slow",
        }
    }
}

/// A request the upstream applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub method: String,
    pub path: String,
    /// The query string, without `?` (empty when there is none).
    pub query: String,
    pub idempotency_key: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Ledger {
    applied: Mutex<Vec<Applied>>,
    plan: Mutex<Option<(usize, UpstreamFault)>>,
    fired: Mutex<Option<UpstreamFault>>,
    seen: AtomicUsize,
}

pub struct Upstream {
    pub addr: SocketAddr,
    ledger: Arc<Ledger>,
    in_flight: watch::Sender<usize>,
}

/// At most this long is a POST held for `holdMs` or [`UpstreamFault::Late`].
const MAX_HOLD: Duration = Duration::from_secs(60);

impl Upstream {
    /// Listen on a free loopback port, serving on the current runtime.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free loopback port");
        let addr = listener.local_addr().expect("the upstream's address");
        let ledger = Arc::new(Ledger::default());
        let in_flight = watch::Sender::new(0);
        let (state, watcher) = (ledger.clone(), in_flight.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_connection(stream, state.clone(), watcher.clone()));
            }
        });
        Self { addr, ledger, in_flight }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Fail the `n`th request from now (from 1) with `fault`, once.
    pub fn fail_request(&self, n: usize, fault: UpstreamFault) {
        self.ledger.seen.store(0, Ordering::SeqCst);
        *self.ledger.fired.lock().unwrap() = None;
        *self.ledger.plan.lock().unwrap() = Some((n, fault));
    }

    pub fn disarm(&self) {
        *self.ledger.plan.lock().unwrap() = None;
    }

    /// The fault that hit, if the planned request came.
    pub fn fired(&self) -> Option<UpstreamFault> {
        *self.ledger.fired.lock().unwrap()
    }

    /// The POSTs applied so far, in order.
    pub fn posts(&self) -> Vec<Applied> {
        self.ledger.applied.lock().unwrap().iter().filter(|a| a.method == "POST").cloned().collect()
    }

    /// The GETs applied so far, in order.
    pub fn reads(&self) -> Vec<Applied> {
        self.ledger.applied.lock().unwrap().iter().filter(|a| a.method == "GET").cloned().collect()
    }

    /// How many requests are being answered right now.
    pub fn in_flight(&self) -> usize {
        *self.in_flight.borrow()
    }

    /// Completes when some request is in flight.
    pub async fn wait_in_flight(&self) {
        let mut watcher = self.in_flight.subscribe();
        let _ = watcher.wait_for(|n| *n > 0).await;
    }

    /// Write the spec and an `executor.toml` with this service as source
    /// `ledger` (loopback allowed, calls cut at `timeout`) into `dir`; the
    /// config's path.
    pub fn write_config(&self, dir: &Path, timeout: Duration) -> PathBuf {
        std::fs::write(dir.join("ledger.yaml"), LEDGER_SPEC).expect("write the spec");
        let config = format!(
            "[outbound]\nallow_loopback = true\ntimeout_ms = {}\n\n[[sources]]\nnamespace = \"ledger\"\n\
             kind = \"openapi\"\nspec = \"ledger.yaml\"\nbase_url = \"{}\"\n",
            timeout.as_millis(),
            self.base_url()
        );
        let path = dir.join("executor.toml");
        std::fs::write(&path, config).expect("write the config");
        path
    }
}

/// One request per connection (answered with `connection: close`).
async fn serve_connection(mut stream: TcpStream, ledger: Arc<Ledger>, in_flight: watch::Sender<usize>) {
    let Some(request) = read_request(&mut stream).await else { return };
    let n = ledger.seen.fetch_add(1, Ordering::SeqCst) + 1;
    let fault = {
        let mut plan = ledger.plan.lock().unwrap();
        match *plan {
            Some((at, fault)) if at == n => {
                *plan = None;
                *ledger.fired.lock().unwrap() = Some(fault);
                Some(fault)
            }
            _ => None,
        }
    };
    match fault {
        Some(UpstreamFault::Unavailable) => {
            respond(&mut stream, 503, &json!({"message": "injected fault: unavailable"})).await;
            return;
        }
        // Dropping the stream without an answer closes the connection.
        Some(UpstreamFault::Reset) => return,
        _ => {}
    }
    in_flight.send_modify(|n| *n += 1);
    let answer = apply(&ledger, &request);
    let hold = match fault {
        Some(UpstreamFault::Late) => Some(MAX_HOLD),
        _ => request.body["holdMs"]
            .as_u64()
            .or_else(|| query_value(&request.query, "holdMs").and_then(|ms| ms.parse().ok()))
            .map(|ms| Duration::from_millis(ms).min(MAX_HOLD)),
    };
    let caller_stayed = match hold {
        Some(hold) => until_caller_leaves(&mut stream, hold).await,
        None => true,
    };
    if caller_stayed && fault != Some(UpstreamFault::LostAnswer) {
        respond(&mut stream, answer.0, &answer.1).await;
    }
    in_flight.send_modify(|n| *n -= 1);
}

/// Record the request and say what it answers.
fn apply(ledger: &Ledger, request: &Applied) -> (u16, Value) {
    let mut applied = ledger.applied.lock().unwrap();
    applied.push(request.clone());
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/entries") => (200, json!({"entries": applied.iter().filter(|a| a.method == "POST").count()})),
        ("POST", "/entries") => {
            (201, json!({"id": applied.len(), "key": request.idempotency_key, "entry": request.body}))
        }
        _ => (404, json!({"message": format!("no route {} {}", request.method, request.path)})),
    }
}

/// Wait `hold`, or less if the caller closes the connection; whether it stayed.
async fn until_caller_leaves(stream: &mut TcpStream, hold: Duration) -> bool {
    let mut byte = [0u8; 1];
    tokio::select! {
        _ = tokio::time::sleep(hold) => true,
        _ = stream.read(&mut byte) => false,
    }
}

/// One HTTP/1.1 request with a `content-length` body (what the catalog's client sends).
async fn read_request(stream: &mut TcpStream) -> Option<Applied> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut request_line = lines.next()?.split(' ');
    let (method, target) = (request_line.next()?.to_owned(), request_line.next()?.to_owned());
    let header = |name: &str| {
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
        })
    };
    let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while buffer.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or(Value::Null);
    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    let (path, query) = (path.to_owned(), query.to_owned());
    Some(Applied { method, path, query, idempotency_key: header("idempotency-key"), body })
}

/// The value of `name` in a query string (the test's values need no decoding).
pub fn query_value<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

async fn respond(stream: &mut TcpStream, status: u16, body: &Value) {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        if status < 400 { "OK" } else { "Error" },
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}
