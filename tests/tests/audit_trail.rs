//! The audit trail end to end, against both deployments: `executor serve`
//! (embedded store, one port for both surfaces) and the Lambda functions'
//! handler behind the local stand-in for API Gateway (DynamoDB and
//! EventBridge Scheduler via moto_server). The rmcp client over real HTTP on
//! 127.0.0.1, a real OpenAPI upstream started here (every request it gets is
//! recorded), a catalog configured from a sources file whose policy rules
//! name the ids the history shows, and a webhook receiver for the lifecycle
//! events. Time is a manual clock: it moves only when a test moves it.
//!
//! Each decision channel (the model's `resume`, the approval page, the JSON
//! API, the person's own client, and a grant they left behind) is named in
//! `GET /api/executions/{id}/history` and in the `Execution Decided` event;
//! `GET /api/executions` lists an owner's executions, newest first, in pages,
//! and nobody else's.

mod api_gateway;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::{ManualClock, Timestamp};
use executor_service::{Host, HostConfig};
use executor_store::EmbeddedStore;
use executor_tests::{Deployment, on_both_deployments};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ElicitationAction, Implementation, InitializeRequestParams,
    ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

/// The upstream: a list (a read the built-in rule runs), notes (writes a
/// `run` rule lets through), a delete a `block` rule refuses, payments
/// (writes an `approve` rule asks about), and entries (writes the built-in
/// rule asks about).
const SPEC: &str = r#"
openapi: 3.1.0
info: {title: ledger, version: "1"}
paths:
  /entries:
    get:
      tags: [entries]
      operationId: listEntries
      responses: {"200": {description: ok}}
    post:
      tags: [entries]
      operationId: addEntry
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses: {"201": {description: created}}
  /entries/{id}:
    delete:
      tags: [entries]
      operationId: deleteEntry
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses: {"204": {description: deleted}}
  /notes:
    post:
      tags: [notes]
      operationId: addNote
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses: {"201": {description: created}}
  /payments:
    post:
      tags: [payments]
      operationId: createPayment
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses: {"201": {description: created}}
"#;

const RUN_RULE: &str = "source:ledger:rule:ledger.notes.*";
const BLOCK_RULE: &str = "source:ledger:rule:ledger.entries.deleteEntry";
const APPROVE_RULE: &str = "source:ledger:rule:ledger.payments.*";

/// A payment's token: the upstream gets it, the history never shows it.
const SECRET: &str = "tok-SECRET-4242";

/// A read, a write a rule runs, a blocked call, then a payment that waits for a decision.
const AUDITED: &str = "const seen = await tools.ledger.entries.listEntries({});
const note = await tools.ledger.notes.addNote({ body: { text: 'audit' } });
const refused = await tools.ledger.entries.deleteEntry({ id: '7' });
const paid = await tools.ledger.payments.createPayment({ body: { amount: 5, token: 'tok-SECRET-4242' } });
return [seen.ok, note.ok, refused.ok, refused.error.code, paid.ok];";

/// A payment alone.
const PAY: &str =
    "const paid = await tools.ledger.payments.createPayment({ body: { amount: 9, token: 'tok-SECRET-4242' } });
return paid.ok;";

/// A write the built-in rule asks about.
const ENTRY: &str = "const added = await tools.ledger.entries.addEntry({ body: { text: 'later' } });\nreturn added.ok;";

/// A write a rule runs: completes within its answer.
const NOTE: &str = "const note = await tools.ledger.notes.addNote({ body: { text: 'quick' } });\nreturn note.ok;";

const MIN: Duration = Duration::from_secs(60);
const SECOND: Duration = Duration::from_secs(1);
/// The longest a test waits for a background effect (an event's delivery).
const SETTLE: Duration = Duration::from_secs(30);

on_both_deployments!(
    a_decision_by_the_model_is_in_the_history_and_the_event,
    a_decision_on_the_approval_page_names_its_link,
    a_decision_through_the_json_api_names_the_key,
    a_grant_lets_a_later_call_run_and_both_histories_say_so,
    the_listing_pages_through_one_owners_executions_only,
);

// ---------------------------------------------------------------- scenarios

async fn a_decision_by_the_model_is_in_the_history_and_the_event(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("model").await;
    let paused = rig.pause_audited(&client, "waiting_for_interaction").await;
    let id = paused["executionId"].as_str().unwrap();
    let done = call(&client, "resume", json!({"executionId": id, "action": "accept"})).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], json!([true, true, false, "blocked", true]), "{done}");
    rig.check_audited(id, "model", "model").await;
    client.cancel().await.unwrap();
}

async fn a_decision_on_the_approval_page_names_its_link(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("browser").await;
    let paused = rig.pause_audited(&client, "user_approval_required").await;
    let id = paused["executionId"].as_str().unwrap();
    let link = paused["approvalUrl"].as_str().expect("browser mode opens a link");
    let page = rig.accept_on_page(id, link).await;
    assert!(page.contains("Approved"), "{page}");
    let link_token = link.split("token=").nth(1).unwrap();
    rig.check_audited(id, "browser", &format!("link:alice/{}", key_id(link_token))).await;
    client.cancel().await.unwrap();
}

async fn a_decision_through_the_json_api_names_the_key(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("model").await;
    let paused = rig.pause_audited(&client, "waiting_for_interaction").await;
    let id = paused["executionId"].as_str().unwrap();
    // Another owner cannot decide it, and leaves nothing in its history.
    let (status, refused) =
        rig.post(&rig.bob, &format!("/api/executions/{id}/resume"), json!({"action": "accept"})).await;
    assert_eq!(status, 404, "{refused}");
    let (status, done) =
        rig.post(&rig.alice, &format!("/api/executions/{id}/resume"), json!({"action": "accept"})).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed", "{done}");
    rig.check_audited(id, "api", &format!("key:alice/{}", key_id(&rig.alice))).await;
    client.cancel().await.unwrap();
}

/// The person answers in their own client with "always allow": the history
/// names their client and key; a later execution's payment runs without
/// asking, and its history names the grant `GET /api/grants` lists.
async fn a_grant_lets_a_later_call_run_and_both_histories_say_so(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let (native, asked) = rig.approver(Some(json!({"remember": "always"}))).await;
    let done = native.call_tool(execute(PAY)).await.unwrap().structured_content.expect("structured content");
    assert_eq!(done["result"], true, "{done}");
    assert_eq!(asked.lock().unwrap().len(), 1, "the person was asked once");
    let asked_id = rig.upstream.executions_of("POST", "/payments")[0].clone();
    let key = format!("key:alice/{}", key_id(&rig.alice));
    let history = rig.history(&asked_id).await;
    assert_eq!(types(&history), ["created", "paused", "decided", "called", "settled"], "{history:#}");
    let entries = history["entries"].as_array().unwrap();
    assert_eq!(entries[1]["reason"], APPROVE_RULE, "{history:#}");
    assert_eq!(
        (&entries[2]["decision"], &entries[2]["channel"], &entries[2]["decidedBy"]),
        (&json!("accept"), &json!("native"), &json!(key)),
        "{history:#}"
    );
    assert_eq!(entries[3]["allowedBy"], "decision", "{history:#}");
    let event = rig.decided_event(&asked_id).await;
    assert_eq!((&event["detail"]["channel"], &event["detail"]["decidedBy"]), (&json!("native"), &json!(key)));

    let (status, grants) = rig.get(&rig.alice, "/api/grants").await;
    assert_eq!(status, 200, "{grants}");
    let listed = grants["grants"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{grants}");
    assert_eq!(listed[0]["tool"], "ledger.payments.createPayment", "{grants}");
    let grant_id = listed[0]["id"].as_str().unwrap();

    // Later, in another session and mode: nobody is asked, and the history says why.
    rig.clock.advance(MIN);
    let model = rig.client("model").await;
    let later = call(&model, "execute", json!({"code": PAY})).await;
    assert_eq!((&later["status"], &later["result"]), (&json!("completed"), &json!(true)), "{later}");
    assert_eq!(asked.lock().unwrap().len(), 1, "not asked again");
    let paid = rig.upstream.executions_of("POST", "/payments");
    assert_eq!(paid.len(), 2, "one request per run");
    let history = rig.history(&paid[1]).await;
    assert_eq!(types(&history), ["created", "called", "settled"], "{history:#}");
    let called = &history["entries"][1];
    assert_eq!(
        call_summary(called),
        json!({"tool": "ledger.payments.createPayment", "kind": "write", "outcome": "ok",
            "allowedBy": "grant", "policyId": null, "grantId": grant_id, "errorCode": null}),
        "{history:#}"
    );
    assert_eq!(history["entries"][2]["status"], "completed", "{history:#}");
    model.cancel().await.unwrap();
    native.cancel().await.unwrap();
}

/// Two paused, one completed after its pause, one completed within its
/// answer: the listing shows each as it stands, newest first; filtered,
/// since a time, page by page; another owner sees none of them.
async fn the_listing_pages_through_one_owners_executions_only(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let made = rig.four_executions().await;
    let ids: Vec<&str> = made.iter().map(|(id, _)| id.as_str()).collect();
    let (quick, completed, second, first) = (ids[0], ids[1], ids[2], ids[3]);

    let paused = rig.list(&rig.alice, "?status=paused").await;
    assert_eq!(ids_of(&paused), [second, first], "exactly the pending ones: {paused:#}");
    for (listed, (_, answer)) in paused["executions"].as_array().unwrap().iter().zip(&made[2..]) {
        assert_eq!(listed["status"], "paused", "{listed}");
        assert_eq!(listed["pending"]["expiresAt"], answer["expiresAt"], "{listed}");
        assert!(listed["pending"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{listed}");
    }
    assert_eq!(paused["executions"][0]["pending"]["tool"], "ledger.payments.createPayment");
    assert_eq!(paused["executions"][1]["pending"]["tool"], "ledger.entries.addEntry");

    let all = rig.list(&rig.alice, "").await;
    assert_eq!(ids_of(&all), ids, "newest first: {all:#}");
    let statuses: Vec<&str> =
        all["executions"].as_array().unwrap().iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["completed", "completed", "paused", "paused"], "{all:#}");
    assert_eq!(all["nextCursor"], Value::Null, "{all:#}");
    for listed in all["executions"].as_array().unwrap() {
        let pending = listed.get("pending").is_some_and(|p| !p.is_null());
        assert_eq!(pending, listed["status"] == "paused", "only a pause lists what it waits for: {listed}");
    }
    let done = rig.list(&rig.alice, "?status=completed").await;
    assert_eq!(ids_of(&done), [quick, completed], "{done:#}");
    let since = all["executions"][1]["createdAt"].as_str().unwrap();
    let recent = rig.list(&rig.alice, &format!("?since={}", encode(since))).await;
    assert_eq!(ids_of(&recent), [quick, completed], "created at or after {since}: {recent:#}");

    assert_eq!(rig.walk(&rig.alice, "").await, ids, "one page at a time, each once");
    assert_eq!(rig.walk(&rig.alice, "status=paused&").await, [second, first]);

    // The history of the built-in rule's pause, and of the one that never paused.
    let history = rig.history(first).await;
    assert_eq!(types(&history), ["created", "paused"], "{history:#}");
    assert_eq!(history["entries"][1]["reason"], "default", "{history:#}");
    let history = rig.history(quick).await;
    assert_eq!(types(&history), ["created", "called", "settled"], "{history:#}");
    assert_eq!(history["status"], "completed", "{history:#}");
    assert_eq!(history["entries"][1]["allowedBy"], "policy", "{history:#}");
    assert_eq!(history["entries"][1]["policyId"], RUN_RULE, "{history:#}");

    // Bob sees none of them, and none of their histories.
    for query in ["", "?status=paused", "?status=completed"] {
        let listed = rig.list(&rig.bob, query).await;
        assert_eq!(listed["executions"], json!([]), "bob{query}: {listed}");
        assert_eq!(listed["nextCursor"], Value::Null, "bob{query}: {listed}");
    }
    for id in &ids {
        let (status, body) = rig.get(&rig.bob, &format!("/api/executions/{id}/history")).await;
        assert_eq!(status, 404, "bob reads {id}'s history: {body}");
        assert_eq!(body["error"]["code"], "execution_not_found", "{body}");
    }
}

// ---------------------------------------------------------------- the checks

impl Rig {
    /// Run [`AUDITED`] up to its pause (answered `status`); nothing paid yet.
    /// The clock then moves a minute: the decision comes later.
    async fn pause_audited(&self, client: &Client, status: &str) -> Value {
        let paused = call(client, "execute", json!({"code": AUDITED})).await;
        assert_eq!(paused["status"], status, "{paused}");
        if status == "waiting_for_interaction" {
            assert_eq!(paused["interaction"]["tool"], "ledger.payments.createPayment", "{paused}");
        }
        assert!(self.upstream.to("POST", "/payments").is_empty(), "nothing paid before the decision");
        self.clock.advance(MIN);
        paused
    }

    /// After [`AUDITED`]'s pause was accepted through `channel` by `decided_by`:
    /// what the upstream got, the history, and the `Execution Decided` event.
    async fn check_audited(&self, id: &str, channel: &str, decided_by: &str) {
        assert_eq!(self.upstream.to("GET", "/entries").len(), 1, "the read ran once");
        assert_eq!(self.upstream.to("POST", "/notes").len(), 1, "the note ran once");
        let deletes = self.upstream.seen().into_iter().filter(|r| r.method == "DELETE").count();
        assert_eq!(deletes, 0, "the blocked call reached nobody");
        let paid = self.upstream.to("POST", "/payments");
        assert_eq!(paid.len(), 1, "one approval, one request: {paid:?}");
        assert_eq!(paid[0].body, json!({"amount": 5, "token": SECRET}), "the upstream gets the real arguments");
        assert_eq!(paid[0].execution(), id);

        let history = self.history(id).await;
        check_audited_history(&history, channel, decided_by);
        let event = self.decided_event(id).await;
        let detail = &event["detail"];
        assert_eq!((&detail["channel"], &detail["decidedBy"]), (&json!(channel), &json!(decided_by)), "{event:#}");
        assert_eq!(detail["decision"], "accept", "{event:#}");
        assert_eq!(detail["owner"], "alice", "{event:#}");
        assert!(!event.to_string().contains(SECRET), "{event:#}");
    }

    /// Paused by the built-in rule, paused by a rule, completed after its
    /// pause, completed within its answer: (id, answer), newest first.
    async fn four_executions(&self) -> Vec<(String, Value)> {
        let client = self.client("model").await;
        let first = call(&client, "execute", json!({"code": ENTRY})).await;
        assert_eq!(first["status"], "waiting_for_interaction", "{first}");
        self.clock.advance(SECOND);
        let second = call(&client, "execute", json!({"code": PAY})).await;
        assert_eq!(second["status"], "waiting_for_interaction", "{second}");
        self.clock.advance(SECOND);
        let third = call(&client, "execute", json!({"code": PAY})).await;
        self.clock.advance(SECOND);
        let done = call(&client, "resume", json!({"executionId": third["executionId"], "action": "accept"})).await;
        assert_eq!(done["status"], "completed", "{done}");
        self.clock.advance(SECOND);
        let quick = call(&client, "execute", json!({"code": NOTE})).await;
        assert_eq!(quick["status"], "completed", "{quick}");
        let quick_id = self.upstream.executions_of("POST", "/notes")[0].clone();
        client.cancel().await.unwrap();
        let id = |answer: &Value| answer["executionId"].as_str().unwrap().to_owned();
        vec![(quick_id, quick), (id(&third), third), (id(&second), second), (id(&first), first)]
    }

    /// Every id `GET /api/executions?{filter}limit=1` lists, following `nextCursor`.
    async fn walk(&self, token: &str, filter: &str) -> Vec<String> {
        let (mut ids, mut cursor) = (Vec::new(), None::<String>);
        for _ in 0..10 {
            let after = cursor.as_deref().map(|c| format!("&cursor={}", encode(c))).unwrap_or_default();
            let page = self.list(token, &format!("?{filter}limit=1{after}")).await;
            let listed = ids_of(&page);
            assert!(listed.len() <= 1, "{page}");
            ids.extend(listed.into_iter().map(str::to_owned));
            match page["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return ids,
            }
        }
        panic!("the pages never ended: {ids:?}");
    }
}

/// [`AUDITED`]'s history: created, the three calls before the pause, the
/// pause, the decision, the approved call, settled; in order, and in time.
fn check_audited_history(history: &Value, channel: &str, decided_by: &str) {
    assert_eq!(history["status"], "completed", "{history:#}");
    let expected = ["created", "called", "called", "called", "paused", "decided", "called", "settled"];
    assert_eq!(types(history), expected, "{history:#}");
    let entries = history["entries"].as_array().unwrap();
    assert_eq!(
        (&entries[0]["codeSha256"], &entries[0]["codeBytes"], &entries[0]["via"]),
        (&json!(sha256_hex(AUDITED)), &json!(AUDITED.len()), &json!("mcp")),
        "{history:#}"
    );
    let call = |tool: &str, kind: &str, outcome: &str, allowed: Option<&str>, policy: Option<&str>| {
        let error = (outcome == "blocked").then_some("blocked");
        json!({"tool": tool, "kind": kind, "outcome": outcome, "allowedBy": allowed, "policyId": policy,
            "grantId": null, "errorCode": error})
    };
    let policy = Some("policy");
    assert_eq!(call_summary(&entries[1]), call("ledger.entries.listEntries", "read", "ok", policy, Some("default")));
    assert_eq!(call_summary(&entries[2]), call("ledger.notes.addNote", "write", "ok", policy, Some(RUN_RULE)));
    let blocked = call("ledger.entries.deleteEntry", "write", "blocked", None, Some(BLOCK_RULE));
    assert_eq!(call_summary(&entries[3]), blocked, "{history:#}");
    let paused = &entries[4];
    assert_eq!((&paused["tool"], &paused["reason"]), (&json!("ledger.payments.createPayment"), &json!(APPROVE_RULE)));
    let args: Value = serde_json::from_str(paused["args"].as_str().unwrap()).expect("the arguments, as JSON");
    assert_eq!(args, json!({"body": {"amount": 5, "token": "[redacted]"}}), "{history:#}");
    assert!(!history.to_string().contains(SECRET), "the history shows the token: {history:#}");
    let decided = &entries[5];
    assert_eq!(
        (&decided["decision"], &decided["channel"], &decided["decidedBy"]),
        (&json!("accept"), &json!(channel), &json!(decided_by)),
        "{history:#}"
    );
    let approved = call("ledger.payments.createPayment", "write", "ok", Some("decision"), None);
    assert_eq!(call_summary(&entries[6]), approved, "{history:#}");
    assert_eq!(entries[6]["step"], paused["step"], "the approved call is the paused one: {history:#}");
    let steps: Vec<u64> = entries[1..4].iter().map(|e| e["step"].as_u64().unwrap()).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]) && steps[2] < paused["step"].as_u64().unwrap(), "{history:#}");
    assert_eq!((&entries[7]["status"], entries[7].get("errorCode")), (&json!("completed"), None), "{history:#}");
    // In time: the decision came the minute after the pause the test waited.
    let at: Vec<Timestamp> =
        entries.iter().map(|e| Timestamp::parse_rfc3339(e["at"].as_str().unwrap()).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{history:#}");
    assert_eq!(at[5].as_millis() - at[4].as_millis(), MIN.as_millis() as u64, "{history:#}");
}

/// What a `called` entry says, every field that names what let it run.
fn call_summary(entry: &Value) -> Value {
    assert_eq!(entry["type"], "called", "{entry}");
    let field = |name: &str| entry.get(name).cloned().unwrap_or(Value::Null);
    json!({"tool": field("tool"), "kind": field("kind"), "outcome": field("outcome"), "allowedBy": field("allowedBy"),
        "policyId": field("policyId"), "grantId": field("grantId"), "errorCode": field("errorCode")})
}

fn types(history: &Value) -> Vec<&str> {
    history["entries"].as_array().expect("entries").iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn ids_of(listing: &Value) -> Vec<&str> {
    listing["executions"].as_array().expect("executions").iter().map(|e| e["id"].as_str().unwrap()).collect()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().fold(String::new(), |mut hex, byte| {
        let _ = write!(hex, "{byte:02x}");
        hex
    })
}

/// The id the history names a key (or link) token by: the first 12 hex
/// digits of its SHA-256.
fn key_id(token: &str) -> String {
    sha256_hex(token)[..12].to_owned()
}

fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

// ---------------------------------------------------------------- the rig

/// A host of either deployment over the upstream, with alice's and bob's
/// keys, a manual clock and the webhook receiver.
struct Rig {
    base: String,
    alice: String,
    bob: String,
    clock: Arc<ManualClock>,
    upstream: Upstream,
    events: Arc<Mutex<Vec<Value>>>,
    /// Every host serving the deployment, for settling event deliveries.
    hosts: Vec<Host>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// What starting a deployment gives: its base URL, alice's and bob's keys, its hosts.
type Started = (String, String, String, Vec<Host>);

impl Rig {
    async fn start(deployment: Deployment) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let upstream = Upstream::start().await;
        let (hook, events) = receiver().await;
        let catalog = catalog(dir.path(), &upstream).await;
        let clock = Arc::new(ManualClock::starting_now());
        let config = HostConfig {
            clock: clock.clone(),
            request_state_key: executor_service::RequestStateKey::new(vec![7u8; 32]),
            ..HostConfig::default()
        };
        let (base, alice, bob, hosts) = match deployment {
            Deployment::Local => start_local(dir.path(), catalog, &clock, config, &hook).await,
            Deployment::Lambda => start_lambda(catalog, &clock, config, &hook).await,
        };
        let http = executor_http_client::builder().no_proxy().timeout(SETTLE).build().unwrap();
        Self { base, alice, bob, clock, upstream, events, hosts, http, _dir: dir }
    }

    /// An MCP client in `mode` (`model`, `browser`).
    async fn client(&self, mode: &str) -> Client {
        let url = format!("{}/mcp?elicitation_mode={mode}", self.base);
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(self.alice.clone());
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("audit", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_06_18);
        info.serve(transport).await.expect("the client connects")
    }

    /// Alice's own client (native mode, 2026-07-28) whose user accepts every
    /// approval, filling the form with `content`; and what it was asked.
    async fn approver(&self, content: Option<Value>) -> (RunningService<RoleClient, Approver>, Asked) {
        let approver = Approver { content, asked: Arc::default() };
        let asked = approver.asked.clone();
        let url = format!("{}/mcp?elicitation_mode=native", self.base);
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(self.alice.clone());
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        let lifecycle =
            rmcp::service::ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        let client = rmcp::service::ClientServiceExt::serve_with_lifecycle(approver, transport, lifecycle)
            .await
            .expect("the native client connects");
        (client, asked)
    }

    async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let response = self.http.get(format!("{}{path}", self.base)).bearer_auth(token).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, token: &str, path: &str, body: Value) -> (u16, Value) {
        let request = self.http.post(format!("{}{path}", self.base)).bearer_auth(token).json(&body);
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Alice's history of `id`.
    async fn history(&self, id: &str) -> Value {
        let (status, history) = self.get(&self.alice, &format!("/api/executions/{id}/history")).await;
        assert_eq!(status, 200, "{history}");
        assert_eq!(history["executionId"], id, "{history}");
        history
    }

    /// `GET /api/executions{query}` as `token`'s owner.
    async fn list(&self, token: &str, query: &str) -> Value {
        let (status, listing) = self.get(token, &format!("/api/executions{query}")).await;
        assert_eq!(status, 200, "{query}: {listing}");
        listing
    }

    /// Open the approval `link` as a browser does, and press Approve: the page's text.
    async fn accept_on_page(&self, id: &str, link: &str) -> String {
        let page = self.http.get(link).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let cookie = page.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
        let csrf = cookie.strip_prefix("executor_csrf=").expect("the CSRF cookie").to_owned();
        let token = link.split("token=").nth(1).expect("the link token");
        let decided = self
            .http
            .post(format!("{}/approvals/{id}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", &cookie)
            .body(format!("token={}&decision=accept&csrf={}", encode(token), encode(&csrf)))
            .send()
            .await
            .unwrap();
        assert_eq!(decided.status(), 200);
        decided.text().await.unwrap()
    }

    /// The `Execution Decided` event of `id`, once the webhook has it.
    async fn decided_event(&self, id: &str) -> Value {
        let wanted = |e: &&Value| e["detail-type"] == "Execution Decided" && e["detail"]["executionId"] == id;
        let waited = tokio::time::timeout(SETTLE, async {
            loop {
                for host in &self.hosts {
                    host.settle_events(SECOND).await;
                }
                let found = self.events.lock().unwrap().iter().find(wanted).cloned();
                match found {
                    Some(event) => return event,
                    None => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        });
        match waited.await {
            Ok(event) => event,
            Err(_) => panic!("no Execution Decided for {id} reached the webhook: {:#?}", self.events.lock().unwrap()),
        }
    }
}

/// `executor serve`: the embedded store, events to the webhook as
/// `EXECUTOR_EVENT_WEBHOOK` sends them, both surfaces on one port.
async fn start_local(
    dir: &Path,
    catalog: Arc<Catalog>,
    clock: &Arc<ManualClock>,
    config: HostConfig,
    hook: &str,
) -> Started {
    let store = Arc::new(EmbeddedStore::open(&dir.join("data")).unwrap().with_clock(clock.clone()));
    let alice = keys::create(&*store, "alice").await.unwrap();
    let bob = keys::create(&*store, "bob").await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = config.with_env(|name| (name == "EXECUTOR_EVENT_WEBHOOK").then(|| hook.to_owned())).unwrap();
    config.local_url = Some(serve::local_url(addr));
    let config = config.connect_events().await.unwrap();
    let host = serve::host(store, catalog, &["ledger".to_owned()], config).await.unwrap();
    tokio::spawn(serve::serve(listener, host.clone(), std::future::pending()));
    (format!("http://{addr}"), alice, bob, vec![host])
}

/// The MCP and approval functions behind the API Gateway stand-in, on a
/// DynamoDB table of their own, with the webhook as their event sink.
async fn start_lambda(catalog: Arc<Catalog>, clock: &Arc<ManualClock>, config: HostConfig, hook: &str) -> Started {
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store.with_clock(clock.clone()));
    let alice = keys::create(&*store, "alice").await.unwrap();
    let bob = keys::create(&*store, "bob").await.unwrap();
    let sink = Arc::new(executor_events::Webhook::new(hook.to_owned()).unwrap());
    let config = HostConfig { event_sink: Some(sink), ..config };
    let (base, hosts) =
        api_gateway::start_deployment(store, catalog, &["ledger".to_owned()], clock.clone(), config).await;
    (base, alice, bob, hosts)
}

/// The catalog of the upstream, from a sources file with the policy rules.
async fn catalog(dir: &Path, upstream: &Upstream) -> Arc<Catalog> {
    std::fs::write(dir.join("ledger.yaml"), SPEC).unwrap();
    let config = format!(
        "[outbound]\nallow_loopback = true\n\n[[sources]]\nnamespace = \"ledger\"\nkind = \"openapi\"\n\
         spec = \"ledger.yaml\"\nbase_url = \"{}\"\n\n[sources.policy]\nrules = [\n\
         {{ pattern = \"ledger.notes.*\", action = \"run\" }},\n\
         {{ pattern = \"ledger.entries.deleteEntry\", action = \"block\" }},\n\
         {{ pattern = \"ledger.payments.*\", action = \"approve\" }},\n]\n",
        upstream.base
    );
    std::fs::write(dir.join("executor.toml"), config).unwrap();
    let sources = CatalogConfig::load(&dir.join("executor.toml")).expect("the sources file loads");
    Arc::new(Catalog::connect(&sources).await.expect("the catalog connects"))
}

type Client = RunningService<RoleClient, InitializeRequestParams>;

fn execute(code: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("execute").with_arguments(json!({"code": code}).as_object().unwrap().clone())
}

/// Call `tool` with `arguments`: its structured content.
async fn call(client: &Client, tool: &'static str, arguments: Value) -> Value {
    let arguments = arguments.as_object().unwrap().clone();
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.unwrap();
    result.structured_content.expect("structured content")
}

type Asked = Arc<Mutex<Vec<String>>>;

/// A 2026-07-28 client with an elicitation UI whose user accepts.
#[derive(Clone)]
struct Approver {
    /// The form the user fills in, e.g. `{"remember": "always"}`.
    content: Option<Value>,
    asked: Asked,
}

impl rmcp::ClientHandler for Approver {
    fn get_info(&self) -> InitializeRequestParams {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        InitializeRequestParams::new(capabilities, Implementation::new("native", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        let result = rmcp::model::ElicitResult::new(ElicitationAction::Accept);
        Ok(match &self.content {
            Some(content) => result.with_content(content.clone()),
            None => result,
        })
    }
}

// ---------------------------------------------------------------- the upstream and the receiver

/// A request the upstream got.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    /// `Idempotency-Key`: `<execution id>:<step>` on writes.
    key: Option<String>,
    body: Value,
}

impl Received {
    /// The execution that made it, as its idempotency key says.
    fn execution(&self) -> String {
        let key = self.key.as_deref().expect("a write carries an idempotency key");
        key.split(':').next().unwrap().to_owned()
    }
}

/// The OpenAPI service of [`SPEC`] on loopback: records every request.
struct Upstream {
    base: String,
    seen: Arc<Mutex<Vec<Received>>>,
}

impl Upstream {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Received>>> = Arc::default();
        let app = axum::Router::new().fallback(answer).with_state(seen.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base, seen }
    }

    fn seen(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    fn to(&self, method: &str, path: &str) -> Vec<Received> {
        self.seen().into_iter().filter(|r| r.method == method && r.path == path).collect()
    }

    /// The executions whose writes `method path` got, in order.
    fn executions_of(&self, method: &str, path: &str) -> Vec<String> {
        self.to(method, path).iter().map(Received::execution).collect()
    }
}

async fn answer(
    State(seen): State<Arc<Mutex<Vec<Received>>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, axum::Json<Value>) {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let received = Received { method: method.to_string(), path: uri.path().to_owned(), key, body };
    let mut seen = seen.lock().unwrap();
    let answer = match (received.method.as_str(), received.path.as_str()) {
        ("GET", "/entries") => (StatusCode::OK, json!({"entries": []})),
        ("POST", "/entries" | "/notes" | "/payments") => (StatusCode::CREATED, json!({"id": seen.len() + 1})),
        _ => (StatusCode::NOT_FOUND, json!({"message": "no such route"})),
    };
    seen.push(received);
    (answer.0, axum::Json(answer.1))
}

/// A webhook receiver on loopback: its URL, and every event it accepted.
async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks/executor", listener.local_addr().unwrap());
    let events: Arc<Mutex<Vec<Value>>> = Arc::default();
    let app = axum::Router::new().route("/hooks/executor", axum::routing::post(accept)).with_state(events.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, events)
}

async fn accept(State(events): State<Arc<Mutex<Vec<Value>>>>, axum::Json(event): axum::Json<Value>) -> StatusCode {
    events.lock().unwrap().push(event);
    StatusCode::NO_CONTENT
}
