//! Every call is checked before anyone is asked: a call whose arguments do
//! not fit its tool fails at once with `invalid_arguments`, read or write,
//! whatever the policy or a grant would say, for every kind of source. It
//! never pauses, and nothing reaches the upstream. Each case is run as an
//! agent would, through `executor serve`'s MCP endpoint, against the real
//! upstreams of `support/` (the OpenAPI shop, a recording HTTP upstream, the
//! MCP docs server, graphql-core, an OAuth-protected MCP server); beside each
//! invalid call the valid one still pauses, so each check can fail.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::ManualClock;
use executor_sandbox::Tools;
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use serde_json::{Value, json};
use support::graphql::{GraphqlServer, tracker};
use support::recording::{Recording, start_replying};
use support::{
    McpClient, Recorded, TOKEN, call_tool, connect, docs_source, mcp_client, set_secrets, shop_source, start_docs,
    start_shop,
};

/// A file service with a string path parameter, so path safety (not the type) is what refuses.
const FILES_SPEC: &str = r#"
openapi: 3.1.0
info: {title: files, version: "1"}
paths:
  /files/{name}:
    delete:
      operationId: deleteFile
      parameters: [{name: name, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: gone}}
"#;

/// An `executor serve` host over `catalog`, and a model-mode client of alice's.
struct Local {
    base: String,
    alice: String,
    client: McpClient,
    _data: tempfile::TempDir,
}

impl Local {
    async fn start(catalog: Arc<Catalog>, config: HostConfig) -> Self {
        let data = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
        let alice = keys::create(&*store, "alice").await.unwrap();
        let namespaces: Vec<String> = catalog.namespaces().into_iter().map(|n| n.namespace).collect();
        let host = serve::host(store, catalog, &namespaces, config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve::serve(listener, host, std::future::pending()));
        let client = mcp_client(&base, &alice, "model").await;
        Self { base, alice, client, _data: data }
    }

    async fn execute(&self, code: &str) -> Value {
        call_tool(&self.client, "execute", json!({ "code": code })).await
    }

    /// `return await <call>`: the call's result, which must come at once (the run completed).
    async fn at_once(&self, call: &str) -> Value {
        let answer = self.execute(&format!("return await {call}")).await;
        assert_eq!(answer["status"], "completed", "{call} did not fail at once: {answer}");
        answer["result"].clone()
    }

    /// A call that must fail at once with `invalid_arguments` whose message contains `expected`.
    async fn invalid(&self, call: &str, expected: &str) {
        let result = self.at_once(call).await;
        assert_eq!(result["ok"], false, "{call}: {result}");
        assert_eq!(result["error"]["code"], "invalid_arguments", "{call}: {result}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{call}: {message}");
    }

    /// A call that must pause for approval (the control: the check lets valid calls through).
    async fn pauses(&self, call: &str) -> Value {
        let answer = self.execute(&format!("return await {call}")).await;
        assert_eq!(answer["status"], "waiting_for_interaction", "{call}: {answer}");
        assert_eq!(answer["interaction"]["kind"], "approval", "{call}: {answer}");
        answer
    }
}

fn count(counter: &std::sync::atomic::AtomicUsize) -> usize {
    Recorded::count(counter)
}

/// The shop (OpenAPI), a files service on a recording upstream (OpenAPI) and the docs server (MCP).
async fn http_and_mcp() -> (Arc<Catalog>, support::Shop, Recording, support::DocsServer, tempfile::TempDir) {
    set_secrets();
    let shop = start_shop("http://127.0.0.1:9/").await;
    let files = start_replying(|_| StatusCode::NO_CONTENT.into_response());
    let docs = start_docs().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shop.yaml"), support::SHOP_SPEC).unwrap();
    std::fs::write(dir.path().join("files.yaml"), FILES_SPEC).unwrap();
    let config = format!(
        r#"
        [outbound]
        allow_loopback = true
        {shop}
        [[sources]]
        namespace = "files"
        kind = "openapi"
        spec = "files.yaml"
        base_url = "{files}"
        {docs}
        "#,
        shop = shop_source(&shop.base_url, ""),
        files = files.base,
        docs = docs_source(&docs.url),
    );
    let catalog = connect(dir.path(), &config).await;
    (catalog, shop, files, docs, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_openapi_calls_fail_before_the_approval_and_send_nothing() {
    let (catalog, shop, files, _docs, _dir) = http_and_mcp().await;
    let local = Local::start(catalog, HostConfig::default()).await;
    let recorded = &shop.recorded;

    // The writes people learnt to click through: refused before the pause, not after the Accept.
    local.invalid("tools.shop.items.deleteItem({})", "missing required argument `id` (path parameter)").await;
    local.invalid("tools.shop.items.createItem({extra: 1})", "unknown argument `extra`; this tool takes: body").await;
    local.invalid("tools.shop.items.createItem({})", "missing required argument `body`").await;
    local.invalid(r#"tools.shop.items.deleteItem({id: "seven"})"#, "must be an integer").await;
    local.invalid("tools.shop.items.deleteItem({id: [1]})", "must be an integer").await;
    // A read too, without a request.
    local.invalid(r#"tools.shop.items.getItem({id: "one"})"#, "must be an integer").await;
    // Path parameters that would leave their segment.
    for name in ["../x", "/", "%2F", "a/b", ".."] {
        local.invalid(&format!("tools.files.files.deleteFile({{name: {name:?}}})"), "(path parameter)").await;
    }
    let seen = (count(&recorded.gets), count(&recorded.posts), count(&recorded.deletes), files.seen().len());
    assert_eq!(seen, (0, 0, 0, 0), "no request reached an upstream");

    // The same tools with valid arguments ask as before; a number as text is the same request.
    local.pauses(r#"tools.shop.items.deleteItem({id: "1"})"#).await;
    local.pauses(r#"tools.files.files.deleteFile({name: "report.txt"})"#).await;
    let item = local.at_once(r#"tools.shop.items.getItem({id: "1"})"#).await;
    assert_eq!(item["data"], json!({"id": 1, "name": "lamp"}), "{item}");
    assert_eq!((count(&recorded.gets), count(&recorded.deletes), files.seen().len()), (1, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_skips_the_question_but_never_the_check() {
    let (catalog, shop, _files, _docs, _dir) = http_and_mcp().await;
    let local = Local::start(catalog, HostConfig::default()).await;
    let paused = local.pauses(r#"tools.shop.items.createItem({body: {name: "chair"}})"#).await;
    // "Always allow" through the owner's API.
    let http = executor_http_client::builder().build().unwrap();
    let resume = format!("{}/api/executions/{}/resume", local.base, paused["executionId"].as_str().unwrap());
    let body = json!({"action": "accept", "remember": "always"}).to_string();
    let request = http.post(resume).bearer_auth(&local.alice).header("content-type", "application/json").body(body);
    let answer: Value = serde_json::from_str(&request.send().await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    let granted = local.at_once(r#"tools.shop.items.createItem({body: {name: "desk"}})"#).await;
    assert_eq!(granted["ok"], true, "granted: runs unasked: {granted}");
    assert_eq!(count(&shop.recorded.posts), 2);

    local.invalid("tools.shop.items.createItem({extra: 1})", "unknown argument `extra`").await;
    assert_eq!(count(&shop.recorded.posts), 2, "the grant did not send the invalid call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_mcp_calls_fail_before_the_approval_and_are_never_sent() {
    let (catalog, _shop, _files, docs, _dir) = http_and_mcp().await;
    let local = Local::start(catalog, HostConfig::default()).await;
    // `delete_doc` is destructive (needs approval); its schema requires a string `id`.
    local.invalid("tools.docs.delete_doc({})", "missing required argument `id`; this tool takes: id").await;
    local.invalid("tools.docs.delete_doc({id: 5})", "argument `id` must be a string, got a number").await;
    local.invalid("tools.docs.delete_doc([1])", "arguments must be an object").await;
    local.invalid("tools.docs.search_docs({})", "missing required argument `query`").await;
    assert_eq!(count(&docs.recorded.calls), 0, "no tools/call reached the server");

    local.pauses(r#"tools.docs.delete_doc({id: "a"})"#).await;
    assert_eq!(count(&docs.recorded.calls), 0);
}

/// The validation in one batch: the invalid call fails, the valid write beside it waits, and after
/// the accept the failure replays as journaled while only the valid call is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_one_batch_the_invalid_call_fails_and_the_valid_write_still_waits() {
    let (catalog, shop, _files, _docs, _dir) = http_and_mcp().await;
    let local = Local::start(catalog, HostConfig::default()).await;
    let code = r#"
        const [bad, good] = await Promise.all([
            tools.shop.items.deleteItem({}),
            tools.shop.items.createItem({body: {name: "chair"}}),
        ]);
        return {bad: bad.error.code, good: good.data};
    "#;
    let paused = local.execute(code).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["tool"], "shop.items.createItem", "only the valid write waits: {paused}");
    let resume = json!({"executionId": paused["executionId"], "action": "accept"});
    let done = call_tool(&local.client, "resume", resume).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], json!({"bad": "invalid_arguments", "good": {"id": 3, "name": "chair"}}));
    assert_eq!((count(&shop.recorded.posts), count(&shop.recorded.deletes)), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_graphql_mutation_fails_before_the_approval() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) = tracker(&server, "").await;
    let local = Local::start(catalog, HostConfig::default()).await;

    local.invalid("tools.tracker.mutation.createIssue({})", "missing required argument `title`").await;
    local
        .invalid(r#"tools.tracker.mutation.createIssue({title: "x", state: "OPEN"})"#, "unknown argument `state`")
        .await;
    let smuggled = r#"tools.tracker.mutation.createIssue({title: "x", select: "{ id } } mutation { deleteAll }"})"#;
    let refused = local.at_once(smuggled).await;
    assert_eq!(refused["error"]["code"], "invalid_arguments", "{refused}");
    assert_eq!(server.mutations().await, 0);

    local.pauses(r#"tools.tracker.mutation.createIssue({title: "Chair wobbles"})"#).await;
    assert_eq!(server.mutations().await, 0);
}

/// An OAuth-protected MCP server lists its tools only to a connected owner:
/// a call made before any is listed waits for the connection, and is checked
/// as soon as the connection lists them; once listed, a call is checked before
/// its policy like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_protected_mcp_servers_listed_tools_are_checked_before_the_approval() {
    use support::mcp_oauth::{backing, config, start};
    let fixture = start().await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let alice = keys::create(&*store, "alice").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let clock = Arc::new(ManualClock::starting_now());
    let catalog =
        Catalog::connect_with(&config(&fixture, ""), clock.clone(), backing(&store, Some(&base))).await.unwrap();
    let host_config = HostConfig {
        clock,
        connections: catalog.connections(),
        public_url: Some(base.clone()),
        ..HostConfig::default()
    };
    let host = serve::host(store.clone(), Arc::new(catalog), &["docs".to_owned()], host_config).await.unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    let agent = mcp_client(&base, &alice, "model").await;
    let calls = || fixture.recorded.calls.load(Ordering::SeqCst);

    // Before the tools are known the call cannot be checked: it waits for the connection.
    let paused = call_tool(&agent, "execute", json!({"code": "return await tools.docs.delete_doc({})"})).await;
    assert_eq!(paused["interaction"]["kind"], "connect", "{paused}");
    // Connecting lists them: the waiting call is checked then, and fails instead of asking for approval.
    let http = executor_http_client::builder().redirect(reqwest::redirect::Policy::limited(5)).build().unwrap();
    let consent = http.get(paused["interaction"]["connectUrl"].as_str().unwrap()).send().await.unwrap();
    let done = http.post(consent.url().clone()).send().await.unwrap().text().await.unwrap();
    assert!(done.contains("Connected to docs."), "{done}");
    // The model's accept of the same pause returns that outcome.
    let resume = json!({"executionId": paused["executionId"], "pauseId": paused["pauseId"], "action": "accept"});
    let resumed = call_tool(&agent, "resume", resume).await;
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(resumed["result"]["error"]["code"], "invalid_arguments", "{resumed}");
    assert!(resumed["result"]["error"]["message"].as_str().unwrap().contains("missing required argument `id`"));

    // Listed: an invalid call fails at once; a valid one asks.
    let at_once = call_tool(&agent, "execute", json!({"code": "return await tools.docs.delete_doc({id: 1})"})).await;
    assert_eq!(at_once["status"], "completed", "{at_once}");
    assert_eq!(at_once["result"]["error"]["code"], "invalid_arguments", "{at_once}");
    let valid = call_tool(&agent, "execute", json!({"code": r#"return await tools.docs.delete_doc({id: "a"})"#})).await;
    assert_eq!(valid["status"], "waiting_for_interaction", "{valid}");
    assert_eq!(valid["interaction"]["kind"], "approval", "{valid}");
    assert_eq!(calls(), 0, "no tools/call reached the server");
}

/// The views forward the check: a toolkit's for its own tools (any other is
/// unknown to it, and passes to be answered so), the catalog's for each kind.
#[tokio::test(flavor = "multi_thread")]
async fn the_catalog_and_a_toolkits_view_check_alike() {
    let (catalog, _shop, _files, _docs, _dir) = http_and_mcp().await;
    let toolkits = r#"
        [[toolkits]]
        name = "reader"
        tools = ["shop.items.*"]
    "#;
    let toolkits = CatalogConfig::from_toml_str(toolkits, std::path::Path::new("executor.toml")).unwrap().toolkits;
    let reader = Catalog::toolkit_views(&catalog, &toolkits).pop().unwrap();
    let missing = "missing required argument `id` (path parameter); see tools.describe.tool for the input type";
    for view in [&*catalog as &dyn Tools, &reader] {
        assert_eq!(view.validate("shop.items.deleteItem", &json!({})), Err(missing.to_owned()));
        assert_eq!(view.validate("shop.items.deleteItem", &json!({"id": 1})), Ok(()));
        assert_eq!(view.validate("shop.items.nothing", &json!({"x": 1})), Ok(()), "unknown: the call says so");
    }
    assert!(catalog.validate("docs.delete_doc", &json!({})).is_err());
    assert_eq!(reader.validate("docs.delete_doc", &json!({})), Ok(()), "outside the toolkit: unknown to it");
}
