//! The example Cedar policies end to end, against both deployments:
//! `executor serve` (embedded store, one port for both surfaces) and the
//! Lambda functions' handler behind the local stand-in for API Gateway
//! (DynamoDB and EventBridge Scheduler via moto_server). The rmcp client over
//! real HTTP on 127.0.0.1; the source is GitHub's published OpenAPI document
//! (`executor_tests::api_documents::GITHUB`) with its `base_url` on a local
//! upstream started here that records every request it gets; `[policy] cedar`
//! is `examples/policies/github.cedar` and the toolkit `sandbox` has
//! `examples/policies/sandbox-toolkit.cedar`, both copied as they are. Time is
//! a manual clock. Approvals are the model's `resume`.
//!
//! Each of the five rules of `github.cedar` is shown by what the code sees,
//! what the upstream gets (exactly: one approval, at most one request), and
//! the ids the approval message and the history name.

mod api_gateway;

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::ManualClock;
use executor_service::{HostConfig, ToolkitEndpoint};
use executor_store::EmbeddedStore;
use executor_tests::api_documents::GITHUB;
use executor_tests::{Deployment, on_both_deployments};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const GITHUB_CEDAR: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/policies/github.cedar"));
const SANDBOX_CEDAR: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/policies/sandbox-toolkit.cedar"));

/// The longest a test waits for one answer of the host.
const SETTLE: Duration = Duration::from_secs(120);
const MIN: Duration = Duration::from_secs(60);

on_both_deployments!(
    comments_and_labels_run_and_closing_an_issue_asks,
    a_tmp_branch_goes_unattended_and_another_branch_asks,
    main_is_never_deleted_and_nothing_reaches_the_upstream,
    the_fourth_write_of_an_execution_asks,
    the_write_count_holds_across_approval_and_replay,
    the_sandbox_toolkit_touches_only_acme_sandbox,
);

// ---------------------------------------------------------------- the tools

/// The tool paths of the four operations the policies name, as the catalog
/// names them: `github.<first tag>.<operationId, sanitised>`, the tag read
/// from the document (and each checked to be in the catalog at start).
struct Paths {
    comment: String,
    labels: String,
    update: String,
    delete_ref: String,
}

fn paths() -> &'static Paths {
    static PATHS: OnceLock<Paths> = OnceLock::new();
    PATHS.get_or_init(|| {
        let document = GITHUB.fetch().unwrap_or_else(|e| panic!("GitHub's OpenAPI document is needed: {e}"));
        let document: Value = serde_json::from_str(&std::fs::read_to_string(document).unwrap()).unwrap();
        let path = |id: &str| tool_path(&document, id);
        let paths = Paths {
            comment: path("issues/create-comment"),
            labels: path("issues/add-labels"),
            update: path("issues/update"),
            delete_ref: path("git/delete-ref"),
        };
        println!("tool paths: {} {} {} {}", paths.comment, paths.labels, paths.update, paths.delete_ref);
        paths
    })
}

/// The path of the operation `id` in `document`.
fn tool_path(document: &Value, id: &str) -> String {
    let operations =
        document["paths"].as_object().unwrap().values().flat_map(|item| item.as_object().unwrap().values());
    let operation = operations
        .filter(|op| op["operationId"] == id)
        .collect::<Vec<_>>()
        .pop()
        .unwrap_or_else(|| panic!("GitHub's document has no operation {id}"));
    let tag = operation["tags"][0].as_str().unwrap_or_else(|| panic!("{id} has no tag"));
    let sanitise = |text: &str| text.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    format!("github.{}.{}", sanitise(tag), sanitise(id))
}

/// A call of issue comment `n` on `owner`'s repository `app`, as JS.
fn comment(owner: &str, n: u32) -> String {
    format!("tools.{}({{owner: '{owner}', repo: 'app', issue_number: 1, body: {{body: 'note {n}'}}}})", paths().comment)
}

/// Closing issue 1 of `acme/app`, as JS.
fn close() -> String {
    format!("tools.{}({{owner: 'acme', repo: 'app', issue_number: 1, body: {{state: 'closed'}}}})", paths().update)
}

/// Deleting the ref `reference` of `acme/app`, as JS.
fn delete_ref(reference: &str) -> String {
    format!("tools.{}({{owner: 'acme', repo: 'app', ref: '{reference}'}})", paths().delete_ref)
}

// ---------------------------------------------------------------- scenarios

/// Rule 1: `issue-comments-and-labels-run` and `closing-an-issue-asks`.
async fn comments_and_labels_run_and_closing_an_issue_asks(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("/mcp").await;
    let labels =
        format!("tools.{}({{owner: 'acme', repo: 'app', issue_number: 1, body: {{labels: ['bug']}}}})", paths().labels);
    let code = format!(
        "const c = await {}; const l = await {labels}; return [c.ok, c.http.status, l.ok];",
        comment("acme", 1)
    );
    let done = execute(&client, &code).await;
    assert_eq!((&done["status"], &done["result"]), (&json!("completed"), &json!([true, 201, true])), "{done}");
    let seen = rig.upstream.seen();
    let got: Vec<(&str, &str)> = seen.iter().map(|r| (r.method.as_str(), r.path.as_str())).collect();
    assert_eq!(
        got,
        [("POST", "/repos/acme/app/issues/1/comments"), ("POST", "/repos/acme/app/issues/1/labels")],
        "both ran unattended, in order: {seen:?}"
    );
    assert_eq!(seen[0].body, json!({"body": "note 1"}));
    assert_eq!(seen[1].body, json!({"labels": ["bug"]}));

    // Closing asks; nothing is sent before the decision, one request after.
    let paused = execute(&client, &format!("const u = await {}; return u.ok;", close())).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["tool"], paths().update.as_str(), "{paused}");
    assert_eq!(paused["interaction"]["args"]["body"], json!({"state": "closed"}), "{paused}");
    let message = paused["interaction"]["message"].as_str().unwrap();
    assert!(message.contains("`closing-an-issue-asks`"), "the message names the policy: {message}");
    assert_eq!(rig.upstream.seen().len(), 2, "nothing closed before the decision: {:?}", rig.upstream.seen());
    let id = paused["executionId"].as_str().unwrap();
    let pending = rig.get(&format!("/api/executions/{id}")).await;
    let pending_message = pending["interaction"]["message"].as_str().unwrap_or_default();
    assert!(pending_message.contains("`closing-an-issue-asks`"), "the pending interaction: {pending}");
    rig.clock.advance(MIN);
    let done = resume(&client, id).await;
    assert_eq!((&done["status"], &done["result"]), (&json!("completed"), &json!(true)), "{done}");
    let patches = rig.upstream.to("PATCH");
    assert_eq!(patches.len(), 1, "one approval, one request: {patches:?}");
    assert_eq!((patches[0].path.as_str(), &patches[0].body), ("/repos/acme/app/issues/1", &json!({"state": "closed"})));
    let history = rig.history(id).await;
    assert_eq!(history_entry(&history, "paused", &paths().update)["reason"], "closing-an-issue-asks", "{history:#}");
    assert_eq!(rig.upstream.seen().len(), 3, "{:?}", rig.upstream.seen());
    client.cancel().await.unwrap();
}

/// Rule 2: `tmp-branches-go-unattended`; any other branch asks (nothing lets it run).
async fn a_tmp_branch_goes_unattended_and_another_branch_asks(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("/mcp").await;
    let code = format!("const d = await {}; return d;", delete_ref("heads/tmp/x"));
    let done = execute(&client, &code).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["ok"], true, "deleting heads/tmp/x runs unattended: {done}");
    let deletes = rig.upstream.to("DELETE");
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert!(deletes[0].path.starts_with("/repos/acme/app/git/refs/"), "{deletes:?}");

    let code = format!("const d = await {}; return d.ok;", delete_ref("heads/feature"));
    let paused = execute(&client, &code).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "deleting heads/feature asks: {paused}");
    assert_eq!(paused["interaction"]["tool"], paths().delete_ref.as_str(), "{paused}");
    assert_eq!(rig.upstream.to("DELETE").len(), 1, "nothing deleted before the decision");
    let done = resume(&client, paused["executionId"].as_str().unwrap()).await;
    assert_eq!((&done["status"], &done["result"]), (&json!("completed"), &json!(true)), "{done}");
    assert_eq!(rig.upstream.to("DELETE").len(), 2, "one approval, one request: {:?}", rig.upstream.seen());
    client.cancel().await.unwrap();
}

/// Rule 3: `never-delete-main`, refused before anything is sent; the history names it.
async fn main_is_never_deleted_and_nothing_reaches_the_upstream(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("/mcp").await;
    let code = format!("const d = await {}; return d;", delete_ref("heads/main"));
    let done = execute(&client, &code).await;
    assert_eq!(done["status"], "completed", "{done}");
    let refused = &done["result"];
    assert_eq!((&refused["ok"], &refused["error"]["code"]), (&json!(false), &json!("blocked")), "{done}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`never-delete-main`"), "the refusal names the policy: {done}");
    assert!(rig.upstream.seen().is_empty(), "nothing reached the upstream: {:?}", rig.upstream.seen());

    let listed = rig.get("/api/executions?limit=1").await;
    let id = listed["executions"][0]["id"].as_str().unwrap_or_else(|| panic!("{listed}"));
    let history = rig.history(id).await;
    let called = history_entry(&history, "called", &paths().delete_ref);
    assert_eq!(
        (&called["outcome"], &called["policyId"], &called["errorCode"]),
        (&json!("blocked"), &json!("never-delete-main"), &json!("blocked")),
        "{history:#}"
    );
    client.cancel().await.unwrap();
}

/// Rule 4: `at-most-three-unattended-writes`: three comments run, the fourth asks.
async fn the_fourth_write_of_an_execution_asks(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("/mcp").await;
    let code = format!(
        "const ok = []; for (const n of [1, 2, 3, 4]) {{ ok.push((await {}).ok); }} return ok;",
        comment("acme", 0).replace("'note 0'", "'note ' + n")
    );
    let paused = execute(&client, &code).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["args"]["body"], json!({"body": "note 4"}), "the fourth asks: {paused}");
    let message = paused["interaction"]["message"].as_str().unwrap();
    assert!(message.contains("`at-most-three-unattended-writes`"), "{message}");
    assert_eq!(rig.comments(), ["note 1", "note 2", "note 3"], "three ran unattended");
    let done = resume(&client, paused["executionId"].as_str().unwrap()).await;
    assert_eq!((&done["status"], &done["result"]), (&json!("completed"), &json!([true, true, true, true])), "{done}");
    assert_eq!(rig.comments(), ["note 1", "note 2", "note 3", "note 4"], "the replay sent only the fourth");
    assert_eq!(rig.upstream.seen().len(), 4);
    client.cancel().await.unwrap();
}

/// Rule 4 across a pause: the close asks (write 1, step 0); once approved and
/// replayed, comments 1 and 2 (writes 2 and 3) run and comment 3 is the
/// fourth write: 3 writes were issued before it, so it asks. The replays
/// send nothing again.
async fn the_write_count_holds_across_approval_and_replay(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let client = rig.client("/mcp").await;
    let code = format!(
        "const u = await {}; const ok = [u.ok]; for (const n of [1, 2, 3]) {{ ok.push((await {}).ok); }} return ok;",
        close(),
        comment("acme", 0).replace("'note 0'", "'note ' + n")
    );
    let paused = execute(&client, &code).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["tool"], paths().update.as_str(), "{paused}");
    assert!(paused["interaction"]["message"].as_str().unwrap().contains("`closing-an-issue-asks`"), "{paused}");
    assert!(rig.upstream.seen().is_empty(), "{:?}", rig.upstream.seen());
    let id = paused["executionId"].as_str().unwrap();

    let again = resume(&client, id).await;
    assert_eq!(again["status"], "waiting_for_interaction", "the third comment is the fourth write: {again}");
    assert_eq!(again["interaction"]["tool"], paths().comment.as_str(), "{again}");
    assert_eq!(again["interaction"]["args"]["body"], json!({"body": "note 3"}), "{again}");
    assert_eq!(again["pauseId"], "3", "step 3 (close, note 1, note 2 before it): {again}");
    let message = again["interaction"]["message"].as_str().unwrap();
    assert!(message.contains("`at-most-three-unattended-writes`"), "{message}");
    assert_eq!(rig.upstream.to("PATCH").len(), 1, "the approved close, once: {:?}", rig.upstream.seen());
    assert_eq!(rig.comments(), ["note 1", "note 2"]);

    let done = resume(&client, id).await;
    assert_eq!((&done["status"], &done["result"]), (&json!("completed"), &json!([true, true, true, true])), "{done}");
    assert_eq!(rig.upstream.to("PATCH").len(), 1, "the close is replayed from the journal, not re-sent");
    assert_eq!(rig.comments(), ["note 1", "note 2", "note 3"], "one approval, one request");
    assert_eq!(rig.upstream.seen().len(), 4);
    let history = rig.history(id).await;
    let reasons: Vec<&Value> = entries(&history).filter(|e| e["type"] == "paused").map(|e| &e["reason"]).collect();
    assert_eq!(reasons, [&json!("closing-an-issue-asks"), &json!("at-most-three-unattended-writes")], "{history:#}");
    client.cancel().await.unwrap();
}

/// Rule 5: the toolkit's `only-acme-sandbox` tightens what `/mcp` lets run.
async fn the_sandbox_toolkit_touches_only_acme_sandbox(deployment: Deployment) {
    let rig = Rig::start(deployment).await;
    let sandbox = rig.client("/mcp/toolkits/sandbox").await;
    let code = format!(
        "const a = await {}; const s = await {}; return [a, s.ok];",
        comment("acme", 1),
        comment("acme-sandbox", 2)
    );
    let done = execute(&sandbox, &code).await;
    assert_eq!(done["status"], "completed", "{done}");
    let refused = &done["result"][0];
    assert_eq!((&refused["ok"], &refused["error"]["code"]), (&json!(false), &json!("blocked")), "{done}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("toolkit `sandbox`") && message.contains("`only-acme-sandbox`"), "{done}");
    assert_eq!(done["result"][1], true, "{done}");
    let seen = rig.upstream.seen();
    assert_eq!(seen.len(), 1, "only acme-sandbox was reached: {seen:?}");
    assert_eq!((seen[0].method.as_str(), seen[0].path.as_str()), ("POST", "/repos/acme-sandbox/app/issues/1/comments"));
    let listed = rig.get("/api/executions?limit=1").await;
    let history = rig.history(listed["executions"][0]["id"].as_str().unwrap()).await;
    let blocked = entries(&history).find(|e| e["type"] == "called" && e["outcome"] == "blocked").cloned();
    assert_eq!(blocked.map(|e| e["policyId"].clone()), Some(json!("only-acme-sandbox")), "{history:#}");

    // Outside the toolkit the same comment on `acme` runs.
    let everything = rig.client("/mcp").await;
    let done = execute(&everything, &format!("return (await {}).ok;", comment("acme", 3))).await;
    assert_eq!((&done["status"], &done["result"]), (&json!("completed"), &json!(true)), "{done}");
    assert_eq!(rig.upstream.seen().len(), 2);
    for client in [sandbox, everything] {
        client.cancel().await.unwrap();
    }
}

// ---------------------------------------------------------------- the rig

/// A host of either deployment over the GitHub source, with alice's key and a manual clock.
struct Rig {
    base: String,
    alice: String,
    clock: Arc<ManualClock>,
    upstream: Upstream,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start(deployment: Deployment) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let upstream = Upstream::start().await;
        let (catalog, toolkits) = catalog(dir.path(), &upstream).await;
        let clock = Arc::new(ManualClock::starting_now());
        let mut config = HostConfig {
            clock: clock.clone(),
            request_state_key: executor_service::RequestStateKey::new(vec![7u8; 32]),
            ..HostConfig::default()
        };
        for view in Catalog::toolkit_views(&catalog, &toolkits) {
            let (name, namespaces) = (view.name().clone(), view.namespaces().to_vec());
            config.toolkits.push(ToolkitEndpoint { name, namespaces, tools: Arc::new(view) });
        }
        let (base, alice) = match deployment {
            Deployment::Local => start_local(dir.path(), catalog, &clock, config).await,
            Deployment::Lambda => start_lambda(catalog, &clock, config).await,
        };
        let http = executor_http_client::builder().no_proxy().timeout(SETTLE).build().unwrap();
        Self { base, alice, clock, upstream, http, _dir: dir }
    }

    /// An MCP client of the endpoint at `path` in model mode (decisions by `resume`).
    async fn client(&self, path: &str) -> Client {
        let url = format!("{}{path}?elicitation_mode=model", self.base);
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(self.alice.clone());
        let transport = StreamableHttpClientTransport::with_client(self.http.clone(), config);
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("cedar", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_06_18);
        info.serve(transport).await.expect("the client connects")
    }

    /// `GET path` with alice's key: the JSON it answered, which must be 200.
    async fn get(&self, path: &str) -> Value {
        let response = self.http.get(format!("{}{path}", self.base)).bearer_auth(&self.alice).send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Alice's history of `id`.
    async fn history(&self, id: &str) -> Value {
        let history = self.get(&format!("/api/executions/{id}/history")).await;
        assert_eq!(history["executionId"], id, "{history}");
        history
    }

    /// The texts of the comments the upstream got, in order.
    fn comments(&self) -> Vec<String> {
        let posted = self.upstream.to("POST").into_iter().filter(|r| r.path.ends_with("/comments"));
        posted.map(|r| r.body["body"].as_str().unwrap_or_default().to_owned()).collect()
    }
}

/// `executor serve`'s host: the embedded store, both surfaces on one port.
async fn start_local(
    dir: &Path,
    catalog: Arc<Catalog>,
    clock: &Arc<ManualClock>,
    config: HostConfig,
) -> (String, String) {
    let store = Arc::new(EmbeddedStore::open(&dir.join("data")).unwrap().with_clock(clock.clone()));
    let alice = keys::create(&*store, "alice").await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = HostConfig { local_url: Some(serve::local_url(addr)), ..config };
    let host = serve::host(store, catalog, &["github".to_owned()], config).await.unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    (format!("http://{addr}"), alice)
}

/// The MCP and approval functions behind the API Gateway stand-in, on a DynamoDB table of their own.
async fn start_lambda(catalog: Arc<Catalog>, clock: &Arc<ManualClock>, config: HostConfig) -> (String, String) {
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store.with_clock(clock.clone()));
    let alice = keys::create(&*store, "alice").await.unwrap();
    let (base, _hosts) =
        api_gateway::start_deployment(store, catalog, &["github".to_owned()], clock.clone(), config).await;
    (base, alice)
}

/// The catalog of GitHub's document on the upstream, from a sources file
/// naming the example policies (copied beside it), and its toolkits.
async fn catalog(dir: &Path, upstream: &Upstream) -> (Arc<Catalog>, Vec<executor_core::Toolkit>) {
    let document = GITHUB.fetch().unwrap_or_else(|e| panic!("GitHub's OpenAPI document is needed: {e}"));
    std::fs::write(dir.join("github.cedar"), GITHUB_CEDAR).unwrap();
    std::fs::write(dir.join("sandbox.cedar"), SANDBOX_CEDAR).unwrap();
    let config = format!(
        "[outbound]\nallow_loopback = true\n\n[policy]\ncedar = \"github.cedar\"\n\n\
         [[sources]]\nnamespace = \"github\"\nkind = \"openapi\"\nspec = {spec:?}\nbase_url = \"{base}\"\n\n\
         [[toolkits]]\nname = \"sandbox\"\ntools = [\"github.*\"]\ncedar = \"sandbox.cedar\"\n",
        spec = document.display().to_string(),
        base = upstream.base,
    );
    std::fs::write(dir.join("executor.toml"), config).unwrap();
    let sources = CatalogConfig::load(&dir.join("executor.toml")).expect("the sources file loads");
    let catalog = Catalog::connect(&sources).await.expect("the catalog connects, its Cedar policies valid");
    let known: Vec<&str> = catalog.paths().collect();
    let wanted = paths();
    for path in [&wanted.comment, &wanted.labels, &wanted.update, &wanted.delete_ref] {
        assert!(known.contains(&path.as_str()), "the catalog has no {path}");
    }
    (Arc::new(catalog), sources.toolkits)
}

type Client = RunningService<RoleClient, InitializeRequestParams>;

/// `execute` of `code`: its structured content.
async fn execute(client: &Client, code: &str) -> Value {
    call(client, "execute", json!({"code": code})).await
}

/// The model accepts the pause of `id`: `resume`'s structured content.
async fn resume(client: &Client, id: &str) -> Value {
    call(client, "resume", json!({"executionId": id, "action": "accept"})).await
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> Value {
    let arguments = arguments.as_object().unwrap().clone();
    let params = CallToolRequestParams::new(tool).with_arguments(arguments);
    let result = tokio::time::timeout(SETTLE, client.call_tool(params)).await.expect("the host answers in time");
    result.unwrap().structured_content.expect("structured content")
}

fn entries(history: &Value) -> impl Iterator<Item = &Value> {
    history["entries"].as_array().expect("entries").iter()
}

/// The one entry of type `kind` about `tool` in `history`.
fn history_entry<'a>(history: &'a Value, kind: &str, tool: &str) -> &'a Value {
    let found: Vec<&Value> = entries(history).filter(|e| e["type"] == kind && e["tool"] == tool).collect();
    assert_eq!(found.len(), 1, "one {kind} entry of {tool}: {history:#}");
    found[0]
}

// ---------------------------------------------------------------- the upstream

/// A request the upstream got.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    /// As sent, percent-encoding and all.
    path: String,
    body: Value,
}

/// GitHub's API on loopback: records every request, answers JSON.
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

    fn to(&self, method: &str) -> Vec<Received> {
        self.seen().into_iter().filter(|r| r.method == method).collect()
    }
}

/// As GitHub answers: 201 for a comment, 200 with the labels or the issue, 204 for a deleted ref.
async fn answer(
    State(seen): State<Arc<Mutex<Vec<Received>>>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> (StatusCode, axum::Json<Value>) {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let received = Received { method: method.to_string(), path: uri.path().to_owned(), body };
    let mut seen = seen.lock().unwrap();
    let id = seen.len() + 1;
    let answer = match (received.method.as_str(), received.path.ends_with("/comments")) {
        ("POST", true) => (StatusCode::CREATED, json!({"id": id, "body": received.body["body"]})),
        ("POST", false) => (StatusCode::OK, json!([{"id": id, "name": "bug"}])),
        ("PATCH", _) => (StatusCode::OK, json!({"id": id, "state": received.body["state"]})),
        ("DELETE", _) => (StatusCode::NO_CONTENT, Value::Null),
        _ => (StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
    };
    seen.push(received);
    (answer.0, axum::Json(answer.1))
}
