//! GraphQL sources against a real GraphQL engine on loopback (graphql-core,
//! see `support/graphql.rs`): the schema by introspection with the source's
//! auth or from a file, query tools that run, errors that carry the
//! service's message, and a mutation that waits for approval through the MCP
//! endpoint and then runs once.

mod support;

use std::sync::Arc;

use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, Policy, Tools};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use support::graphql::GraphqlServer;
use support::{TOKEN, TOKEN_VAR, set_secrets};

fn ctx(step: u32) -> CallContext {
    CallContext { execution_id: ExecutionId::parse("exec-1").unwrap(), step, owner: None }
}

/// A catalog with one GraphQL source `tracker`; `extra` adds lines to its table.
async fn tracker(server: &GraphqlServer, extra: &str) -> (Arc<Catalog>, tempfile::TempDir) {
    set_secrets();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
        [outbound]
        allow_loopback = true

        [[sources]]
        namespace = "tracker"
        kind = "graphql"
        url = "{url}"
        auth = {{ type = "bearer", token = "env:{TOKEN_VAR}" }}
        {extra}
        "#,
        url = server.url(),
    );
    let file = dir.path().join("executor.toml");
    std::fs::write(&file, config).unwrap();
    let catalog = Catalog::connect(&CatalogConfig::load(&file).unwrap()).await.unwrap();
    (Arc::new(catalog), dir)
}

async fn mutations(server: &GraphqlServer) -> u64 {
    server.get("/stats", TOKEN).await["mutations"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn query_tools_run_with_the_default_or_a_chosen_selection() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) = tracker(&server, "").await;
    let namespace = &catalog.namespaces()[0];
    assert_eq!(
        (namespace.kind, namespace.tools, &namespace.error),
        ("graphql", 4, &None),
        "introspected with the token"
    );

    let found = catalog.search(json!("one issue by id")).await.unwrap();
    assert_eq!(
        found["items"][0],
        json!({"path": "tracker.query.issue", "description": "One issue by id", "namespace": "tracker"})
    );
    let types = catalog.describe(json!("tracker.query.issue")).await.unwrap();
    let types = types.as_str().unwrap();
    assert!(types.contains("GraphQL query issue: Issue"), "{types}");
    assert!(types.contains("type Input = { id: string; /** The GraphQL selection set to return instead of the default `{ id title state }`"), "{types}");
    assert!(types.contains("type Output = Issue;") && types.contains(r#"type State = "OPEN" | "CLOSED";"#), "{types}");

    let issue = catalog.call("tracker.query.issue", json!({"id": "1"}), &ctx(0)).await.unwrap();
    assert_eq!(issue, json!({"id": "1", "title": "Lamp flickers", "state": "OPEN"}));
    let chosen =
        catalog.call("tracker.query.issue", json!({"id": "1", "select": "title author { login }"}), &ctx(1)).await;
    assert_eq!(chosen.unwrap(), json!({"title": "Lamp flickers", "author": {"login": "ada"}}));
    let closed = catalog.call("tracker.query.issues", json!({"state": "CLOSED"}), &ctx(2)).await.unwrap();
    assert_eq!(closed, json!([]));
    assert_eq!(catalog.policy("tracker.query.issues", &json!({})), Policy::Run, "queries are reads");

    // The service's own messages: a resolver's error, and a document it refuses.
    let broken = catalog.call("tracker.query.broken", json!({}), &ctx(3)).await.unwrap_err();
    assert_eq!((broken.code.as_str(), broken.message.as_str()), ("graphql_error", "the tracker is read-only today"));
    let unknown = catalog.call("tracker.query.issue", json!({"id": "1", "select": "{ id colour }"}), &ctx(4)).await;
    let unknown = unknown.unwrap_err();
    assert_eq!(unknown.code, "graphql_error");
    assert!(unknown.message.contains("Cannot query field 'colour' on type 'Issue'"), "{}", unknown.message);
    // Refused before sending: a second operation smuggled into `select`, a missing argument.
    let smuggled = json!({"id": "1", "select": "{ id } } mutation { createIssue(title: \"x\") { id } "});
    let refused = catalog.call("tracker.query.issue", smuggled, &ctx(5)).await.unwrap_err();
    assert_eq!(refused.code, "invalid_arguments");
    assert!(refused.message.contains("one selection set"), "{}", refused.message);
    let missing = catalog.call("tracker.query.issue", json!({}), &ctx(6)).await.unwrap_err();
    assert_eq!(missing.message, "missing required argument `id`; this tool takes: id, select?");
    assert_eq!(mutations(&server).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_schema_can_come_from_a_file() {
    let server = GraphqlServer::start(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let schema = server.get("/schema.json", TOKEN).await;
    std::fs::write(dir.path().join("tracker.json"), schema.to_string()).unwrap();
    let (catalog, _config_dir) =
        tracker(&server, &format!("schema = {:?}", dir.path().join("tracker.json").display().to_string())).await;
    let namespace = &catalog.namespaces()[0];
    assert_eq!((namespace.tools, &namespace.error), (4, &None));
    let issues = catalog.call("tracker.query.issues", json!({}), &ctx(0)).await.unwrap();
    assert_eq!(issues[0]["title"], "Lamp flickers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutation_waits_for_approval_then_runs_once_through_the_mcp_endpoint() {
    let server = GraphqlServer::start(TOKEN);
    let (catalog, _dir) = tracker(&server, "").await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let token = keys::create(&*store, "alice").await.unwrap();
    let host = serve::host(store, catalog.clone(), &["tracker".to_owned()], HostConfig::default()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));

    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("agent", "1"))
        .with_protocol_version(ProtocolVersion::V_2025_06_18);
    let client = info
        .serve(StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config))
        .await
        .unwrap();
    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            let params = CallToolRequestParams::new(name).with_arguments(arguments.as_object().unwrap().clone());
            client.call_tool(params).await.unwrap().structured_content.unwrap()
        }
    };
    let code = r#"
        const before = await tools.tracker.query.issues({});
        const created = await tools.tracker.mutation.createIssue({ title: "Chair wobbles" });
        return { before: before.data.length, created: created.data };
    "#;
    let paused = call("execute", json!({ "code": code })).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["tool"], "tracker.mutation.createIssue");
    let message = paused["interaction"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("tools.tracker.mutation.createIssue (GraphQL mutation `createIssue`) needs approval"),
        "{message}"
    );
    assert!(message.contains(&format!("Effect: GraphQL mutation `createIssue` at {}", server.url())), "{message}");
    assert_eq!(mutations(&server).await, 0, "nothing is written before the approval");

    let accepted = call("resume", json!({ "executionId": paused["executionId"], "action": "accept" })).await;
    assert_eq!(accepted["status"], "completed", "{accepted}");
    assert_eq!(
        accepted["result"],
        json!({"before": 1, "created": {"id": "2", "title": "Chair wobbles", "state": "OPEN"}})
    );
    let again = call("resume", json!({ "executionId": paused["executionId"], "action": "accept" })).await;
    assert_eq!(again["error"]["code"], "execution_already_settled");
    assert_eq!(mutations(&server).await, 1, "one approval, one mutation");
    client.cancel().await.unwrap();
}
