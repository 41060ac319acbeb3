//! Owners connecting to an OAuth-protected MCP server, end to end on
//! `executor serve`'s host over real HTTP, against the fixture of
//! `support/mcp_oauth.rs` (its authorization server issues tokens for the
//! resource asked for, and the MCP server takes only those): the connect
//! pause before any tool is known, the consent by plain HTTP, the callback
//! that lists the tools with the owner's token and makes the call once, each
//! owner with their own token, approvals for the listed tools, a token the
//! server stops taking, and no secret in the store, the logs or the answers.
//!
//! The log of every thread goes to one capture (the process's subscriber).

#[path = "support/capture.rs"]
mod capture;
mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use capture::Capture;
use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::{ExecutionId, ManualClock};
use executor_sandbox::{CallContext, Tools};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use serde_json::{Value, json};
use support::mcp_oauth::{Fixture, SITE, backing, config, start};
use support::{McpClient, call_tool, mcp_client};
use tracing_subscriber::layer::SubscriberExt;

const SEARCH: &str = r#"const r = await tools.docs.search_docs({query: "start"}); return r.data"#;
const CLIENT_SECRET: &str = "dcr-secret-mcp-31f7a0";

type Client = McpClient;

/// One `executor serve` host over `store`, at its own address (its public
/// URL, where the authorization server sends owners back), and its clock.
async fn host(fixture: &Fixture, store: &Arc<EmbeddedStore>) -> (String, Arc<ManualClock>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let clock = Arc::new(ManualClock::starting_now());
    let catalog =
        Catalog::connect_with(&config(fixture, ""), clock.clone(), backing(store, Some(&base))).await.unwrap();
    let namespace = catalog.namespaces().remove(0);
    assert_eq!((namespace.tools, &namespace.error), (0, &None), "{namespace:?}");
    assert!(namespace.needs_connection.is_some(), "no tools yet, and why: {namespace:?}");
    assert!(catalog.label("docs").contains("its tools are listed once you connect"), "{}", catalog.label("docs"));
    let config = HostConfig {
        clock: clock.clone(),
        connections: catalog.connections(),
        public_url: Some(base.clone()),
        ..HostConfig::default()
    };
    let host = serve::host(store.clone(), Arc::new(catalog), &["docs".to_owned()], config).await.unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    (base, clock)
}

async fn client(base: &str, token: &str) -> Client {
    mcp_client(base, token, "model").await
}

async fn execute(client: &Client, code: &str) -> Value {
    call_tool(client, "execute", json!({ "code": code })).await
}

/// `execute` of `code` that waits for a connection to `docs`: (executionId, pauseId, connectUrl).
async fn connect_pause(client: &Client, code: &str) -> (String, String, String) {
    let paused = execute(client, code).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["kind"], "connect", "{paused}");
    let text = |k: &str| paused[k].as_str().unwrap().to_owned();
    (text("executionId"), text("pauseId"), paused["interaction"]["connectUrl"].as_str().unwrap().to_owned())
}

/// Follow a connect link as a browser without JavaScript would: the
/// redirect to the consent page, its form's "Allow" (posted back to the
/// same address), the redirect to the callback. The final page.
async fn connect_by_http(url: &str) -> String {
    let http = executor_http_client::builder().redirect(reqwest::redirect::Policy::limited(5)).build().unwrap();
    let consent = http.get(url).send().await.unwrap();
    let authorize = consent.url().clone();
    let html = consent.text().await.unwrap();
    assert!(html.contains("to read the docs?"), "{html}");
    let done = http.post(authorize).send().await.unwrap();
    assert_eq!(done.status(), 200);
    done.text().await.unwrap()
}

/// Every span and log line of this test binary, from any thread.
fn captured() -> &'static Capture {
    static CAPTURE: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone())).unwrap();
        capture
    })
}

fn calls(fixture: &Fixture) -> usize {
    fixture.recorded.calls.load(Ordering::SeqCst)
}

fn bearers(fixture: &Fixture) -> Vec<String> {
    fixture.recorded.bearers.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_connect_to_an_oauth_protected_mcp_server_and_each_call_carries_its_owners_token() {
    let capture = captured();
    let fixture = start().await;
    // A confidential client: the registration's secret must stay out of everything too.
    fixture.set(|s| s.client_secret = Some(CLIENT_SECRET.into()));
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let alice = keys::create(&*store, "alice").await.unwrap();
    let bob = keys::create(&*store, "bob").await.unwrap();
    let (base, _) = host(&fixture, &store).await;
    let agent = client(&base, &alice).await;

    // Before any owner connected, a search names the server and what to do, never "0 tools".
    let search = execute(&agent, r#"return await tools.search({query: "docs"})"#).await;
    assert_eq!(search["result"]["total"], 0, "{search}");
    assert_eq!(search["result"]["needsConnection"][0]["namespace"], "docs", "{search}");
    assert!(search["result"]["needsConnection"][0]["reason"].as_str().unwrap().contains("connect"), "{search}");

    // A call pauses with `connect`; nothing reaches the server.
    let (id, pause, url) = connect_pause(&agent, SEARCH).await;
    assert!(url.starts_with(&format!("{base}/oauth/connect/{id}?token=")), "{url}");
    assert_eq!((calls(&fixture), fixture.recorded.lists.load(Ordering::SeqCst)), (0, 0));

    let page = connect_by_http(&url).await;
    assert!(page.contains("Connected to docs."), "{page}");
    assert!(page.contains("The call was made and the code finished."), "{page}");
    assert_eq!(calls(&fixture), 1, "the callback ran the call once");
    assert_eq!(fixture.recorded.lists.load(Ordering::SeqCst), 1, "the tools were listed once, with alice's token");
    let alices = bearers(&fixture)[0].clone();
    let alices_token = alices.strip_prefix("Bearer ").unwrap().to_owned();
    assert_eq!(fixture.tokens.lock().unwrap().get(&alices_token), Some(&fixture.mcp_url()), "issued for this server");
    // RFC 8707: the resource goes with the code exchange (the authorization endpoint refuses a request without it).
    let requests = fixture.token_requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["grant_type"], "authorization_code");
    assert_eq!(requests[0]["resource"], fixture.mcp_url());

    // The model's accept of the same pause returns that outcome; nothing runs again.
    let resumed = call_tool(&agent, "resume", json!({ "executionId": id, "pauseId": pause, "action": "accept" })).await;
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(resumed["result"], json!({"hits": [{"title": "Getting started", "query": "start"}]}));
    assert_eq!(calls(&fixture), 1);

    // Connected: alice's next run calls straight through, and her searches find the tools.
    let direct = execute(&agent, SEARCH).await;
    assert_eq!(direct["status"], "completed", "{direct}");
    assert_eq!(bearers(&fixture), [alices.clone(), alices.clone()]);
    let found = execute(&agent, r#"return await tools.search({query: "documentation"})"#).await;
    let paths: Vec<&str> =
        found["result"]["items"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"docs.search_docs") && paths.contains(&"docs.delete_doc"), "{found}");
    assert!(found["result"].get("needsConnection").is_none(), "{found}");

    // The listed tools follow the normal rules: a destructive one asks for approval.
    let delete = execute(&agent, r#"return await tools.docs.delete_doc({id: "a"})"#).await;
    assert_eq!(delete["status"], "waiting_for_interaction", "{delete}");
    assert_ne!(delete["interaction"]["kind"], "connect", "{delete}");
    assert!(delete["interaction"]["message"].as_str().unwrap().contains("needs approval"), "{delete}");
    assert_eq!(calls(&fixture), 2);
    // A tool the server does not have is unknown, not a reason to connect.
    let typo = execute(&agent, "return await tools.docs.serch_docs({})").await;
    assert_eq!(typo["result"]["error"]["code"], "unknown_tool", "{typo}");

    // Bob has no connection of his own: he is asked separately, and his calls carry his token.
    let bob_agent = client(&base, &bob).await;
    let (_, _, bob_url) = connect_pause(&bob_agent, SEARCH).await;
    assert_ne!(bob_url, url);
    assert_eq!(calls(&fixture), 2);
    assert!(connect_by_http(&bob_url).await.contains("Connected to docs."));
    assert_eq!(calls(&fixture), 3);
    let bobs = bearers(&fixture)[2].clone();
    assert_ne!(bobs, alices, "bob's call carried his own token");
    assert_eq!(fixture.recorded.lists.load(Ordering::SeqCst), 1, "listed once per instance");

    let texts = [search.to_string(), resumed.to_string(), direct.to_string(), found.to_string(), page];
    let issued = fixture.issued.lock().unwrap().clone();
    assert_eq!(issued.len(), 4, "an access and a refresh token for each owner");
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(data.path()).unwrap() {
        stored.extend(std::fs::read(entry.unwrap().path()).unwrap_or_default());
    }
    let stored = String::from_utf8_lossy(&stored);
    assert!(stored.contains("dcr-client-1"), "the store was read");
    let log = capture.0.lock().unwrap().clone();
    assert!(log.contains("OAuth connection stored"), "the log was captured: {log}");
    for secret in issued.iter().map(String::as_str).chain([CLIENT_SECRET]) {
        assert!(!stored.contains(secret), "{secret} is in a stored item in clear");
        assert!(!log.contains(secret), "{secret} is in the log");
        for text in &texts {
            assert!(!text.contains(secret), "{secret} is in an answer: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_for_the_resource_and_one_the_server_stops_taking_asks_to_connect_again() {
    let fixture = start().await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let alice = keys::create(&*store, "alice").await.unwrap();
    let (base, clock) = host(&fixture, &store).await;
    let agent = client(&base, &alice).await;
    let (_, _, url) = connect_pause(&agent, SEARCH).await;
    assert!(connect_by_http(&url).await.contains("Connected to docs."));
    assert_eq!(calls(&fixture), 1);

    // The access token expired: refreshed (RFC 8707 `resource` again), and the call carries the new one.
    clock.advance(std::time::Duration::from_secs(3601));
    let refreshed = execute(&agent, SEARCH).await;
    assert_eq!(refreshed["status"], "completed", "{refreshed}");
    let requests = fixture.token_requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        (requests[1]["grant_type"].as_str(), requests[1]["resource"].clone()),
        ("refresh_token", fixture.mcp_url())
    );
    let seen = bearers(&fixture);
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0], seen[1], "a new token, in a new session");

    // The provider revoked the app: the server answers 401, the connection goes.
    fixture.revoke_all();
    let failed = execute(&agent, r#"return await tools.docs.search_docs({query: "x"})"#).await;
    assert_eq!(failed["result"]["ok"], false, "{failed}");
    assert_eq!(failed["result"]["error"]["code"], "auth_error", "{failed}");
    assert!(failed["result"]["error"]["message"].as_str().unwrap().contains("asked to connect"), "{failed}");
    let (_, _, again) = connect_pause(&agent, SEARCH).await;
    assert!(connect_by_http(&again).await.contains("Connected to docs."));
    assert_eq!(calls(&fixture), 3, "the refused call was never made; the one after connecting was");
}

#[tokio::test]
async fn before_its_tools_are_listed_any_path_in_the_namespace_may_be_one_and_toolkit_patterns_still_apply() {
    let fixture = start().await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let clock = Arc::new(ManualClock::starting_now());
    let catalog =
        Arc::new(Catalog::connect_with(&config(&fixture, ""), clock, backing(&store, Some(SITE))).await.unwrap());
    let toolkits = r#"
        [[toolkits]]
        name = "reader"
        tools = ["docs.search_*"]
    "#;
    let toolkits = CatalogConfig::from_toml_str(toolkits, std::path::Path::new("executor.toml")).unwrap().toolkits;
    let reader = Catalog::toolkit_views(&catalog, &toolkits).pop().unwrap();

    assert!(catalog.offers("docs.search_docs") && catalog.offers("docs.anything"));
    assert!(!catalog.offers("docs") && !catalog.offers("docs.") && !catalog.offers("other.tool"));
    assert!(reader.offers("docs.search_docs"));
    assert!(!reader.offers("docs.delete_doc"), "a path the toolkit hides is not a reason to connect");
    let found = reader.search(json!({"query": ""})).await.unwrap();
    assert_eq!(found["needsConnection"][0]["namespace"], "docs", "{found}");
    let described = catalog.describe(json!({"path": "docs.search_docs"})).await.unwrap_err();
    assert_eq!(described.code, "connection_required", "{described:?}");
    let ctx = CallContext::new(ExecutionId::parse("exec-1").unwrap(), 0);
    let called = catalog.call("docs.search_docs", json!({}), &ctx).await.unwrap_err();
    assert_eq!(called.code, "auth_error", "{called:?}");
    assert_eq!((calls(&fixture), fixture.recorded.lists.load(Ordering::SeqCst)), (0, 0));
}
