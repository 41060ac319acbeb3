//! MCP Apps through an OAuth-protected MCP server (`support/mcp_oauth.rs`:
//! each owner connects; its `docs` server lists the UI resource
//! `ui://docs/viewer.html`), on `executor serve`'s host over real HTTP with
//! rmcp's client: a UI resource of a per-owner server is listed and read
//! only for an owner who connected it, with that owner's own token, and
//! another owner is told to connect.

mod support;

use std::sync::Arc;

use executor_catalog::Catalog;
use executor_cli::{keys, serve};
use executor_core::ManualClock;
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};
use support::mcp_oauth::{Fixture, backing, config, start};
use support::{DOCS_VIEW, McpClient, call_tool, mcp_client};

const SEARCH: &str = r#"const r = await tools.docs.search_docs({query: "start"}); return r.data"#;

async fn host(fixture: &Fixture, store: &Arc<EmbeddedStore>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let clock = Arc::new(ManualClock::starting_now());
    let catalog =
        Catalog::connect_with(&config(fixture, ""), clock.clone(), backing(store, Some(&base))).await.unwrap();
    let config = HostConfig {
        clock,
        connections: catalog.connections(),
        public_url: Some(base.clone()),
        ..HostConfig::default()
    };
    let host = serve::host(store.clone(), Arc::new(catalog), &["docs".to_owned()], config).await.unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    base
}

/// Connect `client`'s owner to `docs`: a call pauses with `connect`, and the
/// consent is given by plain HTTP (the callback makes the call).
async fn connect(client: &McpClient) {
    let paused = call_tool(client, "execute", json!({ "code": SEARCH })).await;
    assert_eq!(paused["interaction"]["kind"], "connect", "{paused}");
    let url = paused["interaction"]["connectUrl"].as_str().unwrap();
    let http = executor_http_client::builder().redirect(reqwest::redirect::Policy::limited(5)).build().unwrap();
    let consent = http.get(url).send().await.unwrap();
    let authorize = consent.url().clone();
    let done = http.post(authorize).send().await.unwrap();
    assert!(done.text().await.unwrap().contains("Connected to docs."));
}

async fn uris(client: &McpClient) -> Vec<String> {
    let listed = client.list_resources(None).await.expect("resources/list answers");
    listed.resources.iter().map(|r| r.uri.clone()).collect()
}

async fn read(client: &McpClient) -> Result<Vec<ResourceContents>, String> {
    let read = client.read_resource(ReadResourceRequestParams::new(DOCS_VIEW)).await;
    read.map(|r| r.contents).map_err(|e| e.to_string())
}

fn declares_apps(client: &McpClient) -> bool {
    let capabilities = &client.peer_info().unwrap().capabilities;
    capabilities.extensions.as_ref().is_some_and(|e| e.contains_key("io.modelcontextprotocol/ui"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_owner_servers_ui_resources_are_read_with_each_owners_token() {
    let fixture = start().await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let alice = keys::create(&*store, "alice").await.unwrap();
    let bob = keys::create(&*store, "bob").await.unwrap();
    let base = host(&fixture, &store).await;

    // Before anyone connected, nothing is known of the server's resources: nothing is declared, and
    // `resources/*` are answered as by a server without them (rmcp: no such method).
    let agent = mcp_client(&base, &alice, "model").await;
    assert!(!declares_apps(&agent), "no UI resource known yet");
    assert!(agent.list_resources(None).await.is_err());
    assert!(read(&agent).await.is_err());
    assert!(fixture.recorded.ui_reads.lock().unwrap().is_empty());

    // Connected (its tools and resources listed with her token), alice lists the server's ui://
    // resource (not its file:// one) and reads it with her token.
    connect(&agent).await;
    assert_eq!(uris(&agent).await, [DOCS_VIEW]);
    let contents = read(&agent).await.expect("alice reads the view");
    let [ResourceContents::TextResourceContents { text, meta, .. }] = contents.as_slice() else {
        panic!("one text content: {contents:?}")
    };
    assert!(text.contains("docs viewer"), "{text}");
    assert_eq!(serde_json::to_value(meta).unwrap(), json!({"ui": {"prefersBorder": false}}));
    let alices = fixture.recorded.bearers.lock().unwrap()[0].clone();
    assert_eq!(*fixture.recorded.ui_reads.lock().unwrap(), [alices.as_str()], "read with alice's token");

    // Now known to this instance, the extension is declared to new connections.
    let later = mcp_client(&base, &alice, "model").await;
    assert!(declares_apps(&later));

    // Bob has not connected: the resource is not his to list, and a read tells him to connect.
    let bob_agent = mcp_client(&base, &bob, "model").await;
    assert_eq!(uris(&bob_agent).await, Vec::<String>::new());
    let refused = read(&bob_agent).await.expect_err("bob has no connection");
    assert!(refused.contains("you have not connected it"), "{refused}");
    assert!(refused.contains("tools.docs.<tool>()"), "{refused}");
    assert_eq!(fixture.recorded.ui_reads.lock().unwrap().len(), 1, "nothing read for bob");

    // Once bob connects, his read carries his own token.
    connect(&bob_agent).await;
    assert!(read(&bob_agent).await.is_ok());
    let reads: Vec<String> = fixture.recorded.ui_reads.lock().unwrap().clone();
    assert_eq!(reads.len(), 2);
    assert_ne!(reads[1], alices, "bob's read carried his own token");
    let bobs: Vec<Value> = fixture.recorded.bearers.lock().unwrap().iter().map(|b| json!(b)).collect();
    assert!(bobs.contains(&json!(reads[1])), "the token bob's calls carry: {bobs:?}");
}
