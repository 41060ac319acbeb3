//! The DynamoDB and Scheduler calls each operation makes, counted exactly.
//!
//! The host is built as the Lambda functions build it (`Host::new` over
//! `DynamoStore` and `EventBridgeScheduler`), its clients pointed at a counting
//! proxy in front of moto ([`executor_tests::counting`]); requests go through
//! `Host::handle`, alarms through the alarm function's handler. Each test
//! asserts the exact operations of one step; docs/storage.md ("Calls per
//! operation") shows the same table.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::{Clock, ManualClock, Timeouts, Timestamp};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::{EventBridgeScheduler, SchedulerTarget};
use executor_service::{Host, HostConfig};
use executor_store::DynamoStore;
use executor_tests::counting::{Call, CountingProxy, operations, units};
use executor_tests::faults::Upstream;
use http::{Request, Response};
use serde_json::{Value, json};

/// Lists (runs at once), then adds an entry (needs approval).
const WRITE: &str = r#"const seen = await tools.ledger.entries.listEntries({});
const added = await tools.ledger.entries.addEntry({ body: { note: "counted" } });
return { listed: seen.ok, added: added.ok };"#;

/// Tests in this file share moto; each has a table and a schedule group of its own.
struct Rig {
    proxy: CountingProxy,
    host: Host,
    store: Arc<DynamoStore>,
    clock: Arc<ManualClock>,
    token: String,
    _upstream: Upstream,
    _dir: tempfile::TempDir,
}

/// A JSON-RPC answer: the HTTP status, the session header, the tool's structured result.
struct Answer {
    status: u16,
    session: Option<String>,
    value: Value,
}

impl Rig {
    async fn start() -> Self {
        let proxy = CountingProxy::start().await;
        let clock = Arc::new(ManualClock::starting_now());
        let name = format!("executor-calls-{}-{}", std::process::id(), executor_tests::next_id());
        let store = DynamoStore::new(proxy.dynamodb_client(), name.clone()).with_clock(clock.clone());
        store.create_table().await.expect("create the table in moto_server");
        proxy.scheduler_client().create_schedule_group().name(&name).send().await.expect("a schedule group");
        let target = SchedulerTarget {
            group: name,
            target_arn: "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm".into(),
            role_arn: "arn:aws:iam::123456789012:role/executor-scheduler".into(),
        };
        let scheduler = Arc::new(EventBridgeScheduler::new(proxy.scheduler_client(), target));

        let upstream = Upstream::start().await;
        let dir = tempfile::tempdir().unwrap();
        let config = CatalogConfig::load(&upstream.write_config(dir.path(), Duration::from_secs(10))).unwrap();
        let catalog = Arc::new(Catalog::connect(&config).await.unwrap());
        let namespaces: Vec<String> = catalog.namespaces().into_iter().map(|n| n.namespace).collect();
        let token = executor_cli::keys::create(&store, "alice").await.unwrap();
        let config = HostConfig {
            // As the functions are configured: API Gateway routes by host.
            allowed_hosts: None,
            public_url: Some("http://127.0.0.1".into()),
            // Long enough for the alarm tests to find paused work still waiting.
            timeouts: Timeouts { approval_window: Duration::from_secs(2 * 3600), ..Timeouts::default() },
            clock: clock.clone(),
            ..HostConfig::default()
        };
        let store = Arc::new(store);
        let host = Host::new(store.clone(), catalog, &namespaces, Sandbox::new(Limits::default()), scheduler, config);
        proxy.take();
        Self { proxy, host, store, clock, token, _upstream: upstream, _dir: dir }
    }

    /// The calls since the last look: `{operation: count}` and (write units, read units).
    fn calls(&self) -> (BTreeMap<String, usize>, (u64, u64)) {
        let calls = self.proxy.take();
        (operations(&calls), units(&calls))
    }

    async fn send(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.host.handle(request).await
    }

    /// A JSON-RPC POST to `/mcp`, in `mode`, in `session` if given.
    async fn rpc(&self, session: Option<&str>, mode: &str, body: Value) -> Answer {
        let mut request = Request::post(format!("/mcp?elicitation_mode={mode}"))
            .header("host", "127.0.0.1")
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        let response = self.send(request.body(Bytes::from(body.to_string())).unwrap()).await;
        let status = response.status().as_u16();
        let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
        let body: Value = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        let value = body["result"].get("structuredContent").cloned().unwrap_or_else(|| body.clone());
        Answer { status, session, value }
    }

    async fn initialize(&self) -> String {
        let answer = self
            .rpc(
                None,
                "model",
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "counts", "version": "1"}}}),
            )
            .await;
        assert_eq!(answer.status, 200, "{}", answer.value);
        answer.session.expect("a session id")
    }

    async fn call(&self, session: Option<&str>, mode: &str, tool: &str, arguments: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        let answer = self.rpc(session, mode, body).await;
        assert_eq!(answer.status, 200, "{}", answer.value);
        answer.value
    }

    async fn execute(&self, session: Option<&str>, code: &str) -> Value {
        self.call(session, "model", "execute", json!({ "code": code })).await
    }

    /// The alarm function, handed the payload Scheduler delivers for the alarm armed at `generation`.
    async fn fire(&self, session: &str, generation: Timestamp) -> executor_core::AlarmDecision {
        let now = self.clock.now();
        let payload =
            json!({"sessionId": session, "scheduledFor": now.to_rfc3339(), "generation": generation.as_millis()});
        executor_alarm_function::handle(&self.host.alarms(), payload, now).await.expect("the alarm is handled")
    }
}

fn expect(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(op, n)| ((*op).to_owned(), *n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_checks() {
    let rig = Rig::start().await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let answer = rig.rpc(None, "model", list.clone()).await;
    assert_eq!(answer.status, 200);
    // A key's use is recorded when it is read (one conditional update; `keys list` shows it).
    assert_eq!(rig.calls(), (expect(&[("GetItem", 1), ("UpdateItem", 1)]), (1, 1)), "a valid key: one read, its use");
    assert_eq!(rig.rpc(None, "model", list.clone()).await.status, 200);
    assert_eq!(rig.calls(), (expect(&[]), (0, 0)), "the same key again: verified, no read");

    let request = || {
        Request::post("/mcp")
            .header("host", "127.0.0.1")
            .header("authorization", "Bearer not-a-key")
            .header("content-type", "application/json")
            .body(Bytes::from(list.to_string()))
            .unwrap()
    };
    assert_eq!(rig.send(request()).await.status(), 401);
    assert_eq!(rig.calls(), (expect(&[("GetItem", 1)]), (0, 1)), "an unknown key: one read");
    assert_eq!(rig.send(request()).await.status(), 401);
    assert_eq!(rig.calls(), (expect(&[("GetItem", 1)]), (0, 1)), "an unknown key is never remembered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_key_stops_within_the_verification_ttl_or_at_once_when_the_host_hears_of_it() {
    let rig = Rig::start().await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    assert_eq!(rig.rpc(None, "model", list.clone()).await.status, 200);
    // Revoked in the table, as `executor keys revoke --store dynamodb` does from another machine.
    let hash = executor_core::TokenHash::of_token(&rig.token);
    executor_store::KeyStore::revoke_key(&*rig.store, &hash).await.unwrap();
    rig.clock.advance(executor_service::KEY_CACHE_TTL - Duration::from_millis(1));
    assert_eq!(rig.rpc(None, "model", list.clone()).await.status, 200, "still verified, within the TTL");
    rig.clock.advance(Duration::from_millis(1));
    assert_eq!(rig.rpc(None, "model", list.clone()).await.status, 401, "read again at the TTL: revoked");

    // A host told of a revocation (the admin socket of `executor serve` does) reads the key again at once.
    let other = executor_cli::keys::create(&*rig.store, "bob").await.unwrap();
    let as_bob = |body: &Value| {
        Request::post("/mcp")
            .header("host", "127.0.0.1")
            .header("authorization", format!("Bearer {other}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Bytes::from(body.to_string()))
            .unwrap()
    };
    assert_eq!(rig.send(as_bob(&list)).await.status(), 200);
    executor_store::KeyStore::revoke_key(&*rig.store, &executor_core::TokenHash::of_token(&other)).await.unwrap();
    rig.host.forget_keys();
    assert_eq!(rig.send(as_bob(&list)).await.status(), 401, "forgotten: read again, and revoked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_and_execute_on_a_live_session() {
    let rig = Rig::start().await;
    let session = rig.initialize().await;
    let initialize = expect(&[("CreateSchedule", 1), ("GetItem", 1), ("PutItem", 1), ("UpdateItem", 1)]);
    assert_eq!(rig.calls(), (initialize, (2, 1)), "initialize (the key read and its use recorded)");

    assert_eq!(rig.execute(Some(&session), "return 1 + 2").await["result"], 3);
    // The execution ended within its answer: only its history is written (its record and entries).
    let history = expect(&[("GetItem", 1), ("TransactWriteItems", 1)]);
    assert_eq!(rig.calls(), (history, (4, 1)), "execute: the session (the key is verified); its history");

    // Past the activity interval the session's activity is written, once.
    rig.clock.advance(Duration::from_secs(31));
    assert_eq!(rig.execute(Some(&session), "return 1 + 2").await["result"], 3);
    let activity = expect(&[("GetItem", 1), ("PutItem", 1), ("TransactWriteItems", 1)]);
    assert_eq!(rig.calls(), (activity, (5, 1)), "execute with an activity write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_execute() {
    let rig = Rig::start().await;
    assert_eq!(rig.execute(None, "return 1 + 2").await["result"], 3);
    let key = expect(&[("GetItem", 1), ("TransactWriteItems", 1), ("UpdateItem", 1)]);
    assert_eq!(rig.calls(), (key, (5, 1)), "execute without a session: the key (read, its use recorded); its history");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_model_resume() {
    let rig = Rig::start().await;
    let session = rig.initialize().await;
    rig.proxy.take();

    let paused = rig.execute(Some(&session), WRITE).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let calls = rig.proxy.take();
    assert_eq!(
        operations(&calls),
        expect(&[("GetItem", 1), ("TransactWriteItems", 1)]),
        "pause: the session, one transaction (the grants are not read: the transaction checks them)"
    );
    let pause = calls.iter().find(|c| c.operation == "TransactWriteItems").unwrap();
    assert_eq!(
        actions(pause),
        [("put", "EXEC"), ("check", "GRANT"), ("put", "PAUSED"), ("put", "EXEC"), ("put", "PART")],
        "the execution, no grant for the call it waits on, its paused marker, its history: {pause:?}"
    );
    assert_eq!(pause.writes[1].sk, "GRANT#ledger.entries.addEntry", "the grant given on /mcp");
    assert_eq!(units(&calls), (14, 1), "units (write, read)");

    let id = paused["executionId"].as_str().unwrap();
    let resumed = rig.call(Some(&session), "model", "resume", json!({"executionId": id, "action": "accept"})).await;
    assert_eq!(resumed["status"], "completed", "{resumed}");
    let calls = rig.proxy.take();
    assert_eq!(
        operations(&calls),
        expect(&[("GetItem", 2), ("TransactWriteItems", 2)]),
        "resume: the session, the execution; the claim and the settle"
    );
    assert_eq!(units(&calls), (18, 2), "units (write, read)");
    let (claim, settle) = transactions(&calls);
    let history = [("put", "EXEC"), ("put", "PART")];
    assert_eq!(actions(claim), [[("put", "EXEC"), ("delete", "PAUSED")].as_slice(), &history].concat(), "the claim");
    assert_eq!(
        actions(settle),
        [[("put", "EXEC")].as_slice(), &history].concat(),
        "the settle: the execution, its history"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_approval() {
    let rig = Rig::start().await;
    let paused = rig.call(None, "browser", "execute", json!({ "code": WRITE })).await;
    assert_eq!(paused["status"], "user_approval_required", "{paused}");
    assert_eq!(
        rig.calls(),
        (expect(&[("GetItem", 1), ("TransactWriteItems", 1), ("UpdateItem", 1)]), (13, 1)),
        "a stateless browser-mode pause (and the key's use recorded), its grant checked in its transaction"
    );

    let url = paused["approvalUrl"].as_str().unwrap().strip_prefix("http://127.0.0.1").unwrap().to_owned();
    let page = rig.send(Request::get(&url).header("host", "127.0.0.1").body(Bytes::new()).unwrap()).await;
    assert_eq!(page.status(), 200);
    assert_eq!(rig.calls(), (expect(&[("GetItem", 1)]), (0, 1)), "the approval page reads the execution");

    let cookie = page.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let html = String::from_utf8(page.body().to_vec()).unwrap();
    let form = format!("token={}&csrf={}&decision=accept", hidden(&html, "token"), hidden(&html, "csrf"));
    let action = url.split('?').next().unwrap();
    let decided = rig
        .send(
            Request::post(action)
                .header("host", "127.0.0.1")
                .header("content-type", "application/x-www-form-urlencoded")
                .header("cookie", cookie)
                .body(Bytes::from(form))
                .unwrap(),
        )
        .await;
    assert_eq!(decided.status(), 200, "{}", String::from_utf8_lossy(decided.body()));
    assert_eq!(
        rig.calls(),
        (expect(&[("GetItem", 1), ("TransactWriteItems", 2)]), (16, 1)),
        "the approval: the execution; the claim and the settle"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarms_reschedule_extend_and_destroy() {
    use executor_core::AlarmDecision;
    let rig = Rig::start().await;
    let timeout = Timeouts::default().session_timeout;
    let started = rig.clock.now();
    let session = rig.initialize().await;
    let first = started.plus(timeout);

    // Active 10 minutes in: the first alarm reschedules to last activity + timeout.
    rig.clock.advance(Duration::from_secs(600));
    rig.execute(Some(&session), WRITE).await;
    rig.proxy.take();
    rig.clock.set(first);
    let decision = rig.fire(&session, first).await;
    let second = started.plus(Duration::from_secs(600)).plus(timeout);
    assert_eq!(decision, AlarmDecision::Reschedule { at: second });
    assert_eq!(
        rig.calls(),
        (expect(&[("CreateSchedule", 1), ("GetItem", 1), ("PutItem", 1)]), (1, 1)),
        "reschedule: the session alone decides it"
    );

    // Idle past the timeout with paused work: the lease is extended.
    rig.clock.set(second);
    let decision = rig.fire(&session, second).await;
    let AlarmDecision::ExtendPausedLease { at: third } = decision else { panic!("{decision:?}") };
    assert_eq!(
        rig.calls(),
        (expect(&[("CreateSchedule", 1), ("GetItem", 1), ("Query", 1), ("PutItem", 1)]), (1, 2)),
        "extend the paused lease"
    );

    // Idle past the cap: destroyed, its pending alarm deleted.
    rig.clock.set(third);
    assert_eq!(rig.fire(&session, third).await, AlarmDecision::Destroy);
    assert_eq!(
        rig.calls(),
        (expect(&[("DeleteSchedule", 1), ("GetItem", 1), ("Query", 1), ("PutItem", 1)]), (1, 2)),
        "destroy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_a_one_megabyte_journal_writes_no_chunk() {
    let rig = Rig::start().await;
    // The first call's megabyte argument stays in the journal.
    let code = r#"const note = "x".repeat(1000000);
const first = await tools.ledger.entries.addEntry({ body: { note } });
const second = await tools.ledger.entries.addEntry({ body: { n: 2 } });
const third = await tools.ledger.entries.addEntry({ body: { n: 3 } });
return [first.ok, second.ok, third.ok];"#;
    let paused = rig.execute(None, code).await;
    let id = paused["executionId"].as_str().unwrap().to_owned();
    let accept = json!({"executionId": id, "action": "accept"});
    let again = rig.call(None, "model", "resume", accept.clone()).await;
    assert_eq!(again["status"], "waiting_for_interaction", "{again}");
    rig.proxy.take();

    // Claimed, the second call made, paused at the third.
    let again = rig.call(None, "model", "resume", accept.clone()).await;
    assert_eq!(again["status"], "waiting_for_interaction", "{again}");
    let calls = rig.proxy.take();
    assert_eq!(
        operations(&calls),
        expect(&[("GetItem", 1), ("TransactGetItems", 1), ("TransactWriteItems", 2)]),
        "the execution item (it says: chunked), the execution and its chunks; the claim; \
         the pause (the third call needs approval: its grant is checked there)"
    );
    assert_eq!(units(&calls), (606, 495), "units (write, read)");
    let read = calls.iter().find(|c| c.operation == "TransactGetItems").unwrap();
    assert!(read.read_units >= 2 * 1_000_000 / 4096, "a megabyte read in a transaction: {read:?}");
    let (claim, pause) = transactions(&calls);
    // The execution item without its steps is about 1.2 KB: 2 units, twice in a transaction.
    let history = [("put", "EXEC"), ("put", "PART")];
    assert_eq!(actions(claim), [[("put", "EXEC")].as_slice(), &history].concat(), "the claim writes no chunk");
    assert_eq!(claim.write_units, 4 + 4, "the execution item, and its history: {claim:?}");
    // The steps stream is three chunks; only its last, partly filled, grew.
    let pause_writes = [[("put", "EXEC"), ("check", "GRANT"), ("put", "CHUNK")].as_slice(), &history].concat();
    assert_eq!(actions(pause), pause_writes, "the pause writes the chunk that changed");
    assert_eq!(pause.writes[2].sk, "CHUNK#0003", "{pause:?}");

    let done = rig.call(None, "model", "resume", accept).await;
    assert_eq!(done["status"], "completed", "{done}");
    let calls = rig.proxy.take();
    let (claim, settle) = transactions(&calls);
    assert_eq!(actions(claim), [[("put", "EXEC")].as_slice(), &history].concat());
    assert_eq!(actions(settle), [[("put", "EXEC")].as_slice(), &history].concat(), "a settle adds no chunk");
}

/// A grant this host has not seen made (another process stored it: the
/// approval function, `executor serve` before a restart) is found by the
/// write of the pause it would have let run: that transaction is refused, the
/// grants are read, and the code goes on from its journal, the granted call
/// made once. The host then knows the owner holds grants: the next run reads
/// them before it pauses, as every run did before. Revoked, the grants read
/// say so and the run pauses; the owner is no longer known to hold any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_made_elsewhere_is_found_by_the_pause_it_would_let_run() {
    use executor_core::{Grant, GrantId, GrantedBy, Principal};
    use executor_store::GrantStore;
    let rig = Rig::start().await;
    let session = rig.initialize().await;
    let alice = Principal::parse("alice").unwrap();
    let id = GrantId::parse("g1").unwrap();
    let hour = Duration::from_secs(3600);
    let grant =
        Grant::new(id.clone(), alice.clone(), "ledger.entries.addEntry", GrantedBy::OwnerApi, rig.clock.now(), hour);
    rig.store.create_grant(&grant).await.unwrap();
    rig.proxy.take();
    let order = |calls: &[Call]| calls.iter().map(|c| c.operation.clone()).collect::<Vec<_>>();

    let ran = rig.execute(Some(&session), WRITE).await;
    assert_eq!(ran["result"], json!({"listed": true, "added": true}), "{ran}");
    let calls = rig.proxy.take();
    assert_eq!(
        order(&calls),
        ["GetItem", "TransactWriteItems", "Query", "TransactWriteItems"],
        "the session; the pause, refused by the grant; the grants; the history of the run that went on"
    );
    assert_eq!(actions(&calls[1])[..2], [("put", "EXEC"), ("check", "GRANT")]);
    assert_eq!(units(&calls), (18, 2), "units (write, read)");
    assert_eq!(rig._upstream.posts().len(), 1, "the granted call, made once");

    let ran = rig.execute(Some(&session), WRITE).await;
    assert_eq!(ran["result"]["added"], true, "{ran}");
    let calls = rig.proxy.take();
    assert_eq!(order(&calls), ["GetItem", "Query", "TransactWriteItems"], "the session; the grants; the history");
    assert_eq!(units(&calls), (4, 2), "units (write, read)");

    rig.store.revoke_grant(executor_store::Access::Owner(&alice), &id).await.unwrap();
    rig.proxy.take();
    let paused = rig.execute(Some(&session), WRITE).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let calls = rig.proxy.take();
    assert_eq!(order(&calls), ["GetItem", "Query", "TransactWriteItems"], "the session; the grants: none; the pause");
    assert_eq!(actions(&calls[2])[..2], [("put", "EXEC"), ("put", "PAUSED")], "read: not checked again");
    let paused = rig.execute(Some(&session), WRITE).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(order(&rig.proxy.take()), ["GetItem", "TransactWriteItems"], "two calls again");
}

/// The two transactions of a resume: the claim, then the settle.
fn transactions(calls: &[Call]) -> (&Call, &Call) {
    let mut transactions = calls.iter().filter(|c| c.operation == "TransactWriteItems");
    let claim = transactions.next().expect("a claim");
    let settle = transactions.next().expect("a settle");
    assert!(transactions.next().is_none());
    (claim, settle)
}

/// What a write call does, item by item: (action, sort key up to its `#`).
fn actions(call: &Call) -> Vec<(&str, &str)> {
    call.writes.iter().map(|w| (w.action, w.sk.split('#').next().unwrap())).collect()
}

/// The value of the form's hidden `name` field.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no {name} field in {html}")) + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}
