//! Per-owner OAuth on the Lambda path: the MCP and approval functions'
//! handler behind the local stand-in for API Gateway, each function with a
//! catalog of its own (its own token locks: separate instances), one DynamoDB
//! table on moto_server, the authorization server and OAuth-protected service
//! of the catalog's tests. A call pauses with `connect` on the MCP function;
//! the connect link, the consent and the callback go through the approval
//! function, which runs the call once; the model's resume reads the outcome.

mod api_gateway;
#[path = "../../shared/catalog/tests/support/mod.rs"]
mod catalog_support;

use std::sync::Arc;

use catalog_support::authcode::{AuthServer, allow_by_http, config, start};
use executor_catalog::{Catalog, OAuthBacking, TokenKey, Vault};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::InProcessScheduler;
use executor_service::{Host, HostConfig};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_pause_and_callback_across_the_two_functions_on_dynamodb() {
    let (server, base_url) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let sources = config(&base_url, dir.path());
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store);
    let token = executor_cli::keys::create(&*store, "alice").await.unwrap();
    // As each function builds it: a catalog per instance, the token key from the same secret.
    let key = TokenKey::derive("a-generated-secret-of-64-characters-0123456789abcdefghijklmnopqr").unwrap();
    let function = async || {
        let vault = Vault { store: store.clone(), key: key.clone() };
        let catalog = Catalog::connect_with(
            &sources,
            Arc::new(executor_core::SystemClock),
            OAuthBacking { vault: Some(vault), mcp: None },
        )
        .await
        .unwrap();
        let config = HostConfig { allowed_hosts: None, connections: catalog.connections(), ..HostConfig::default() };
        let sandbox = Sandbox::new(Limits::default());
        Host::new(
            store.clone(),
            Arc::new(catalog),
            &["crm".to_owned()],
            sandbox,
            Arc::new(InProcessScheduler::new()),
            config,
        )
    };
    let functions = api_gateway::Functions { mcp: function().await, approval: function().await };
    let (url, _done) = api_gateway::start(functions, std::future::pending()).await;

    let transport =
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp?elicitation_mode=model")).auth_header(token);
    let http = executor_http_client::builder().build().unwrap();
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("agent", "1"));
    let client = info.serve(StreamableHttpClientTransport::with_client(http, transport)).await.unwrap();
    let call = async |name: &'static str, args: Value| {
        let params = CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone());
        client.call_tool(params).await.unwrap().structured_content.unwrap()
    };
    let paused = call("execute", json!({ "code": "const r = await tools.crm.contacts.list({}); return r.data" })).await;
    assert_eq!(paused["interaction"]["kind"], "connect", "{paused}");
    let connect = paused["interaction"]["connectUrl"].as_str().unwrap().to_owned();
    assert!(connect.starts_with(&format!("{url}/oauth/connect/")), "{connect}");

    // The browser: the connect link (approval function) redirects to the consent page; "Allow" sends it to the callback.
    let (redirect_uri, page) = allow_by_http(&connect).await;
    assert!(redirect_uri.starts_with(&format!("{url}/oauth/callback")), "{redirect_uri}");
    assert!(page.contains("Connected to crm."), "{page}");
    assert_eq!(AuthServer::count(&server.crm_calls), 1, "the approval function ran the call once");

    let resumed = call(
        "resume",
        json!({ "executionId": paused["executionId"], "pauseId": paused["pauseId"], "action": "accept" }),
    )
    .await;
    assert_eq!(resumed["status"], "completed", "{resumed}");
    assert_eq!(resumed["result"], json!([{"name": "Ada"}]));
    // Connected now: the MCP function's own catalog reads the tokens the approval function stored.
    let direct = call("execute", json!({ "code": "const r = await tools.crm.contacts.list({}); return r.data" })).await;
    assert_eq!(direct["status"], "completed", "{direct}");
    assert_eq!(AuthServer::count(&server.crm_calls), 2);
}
