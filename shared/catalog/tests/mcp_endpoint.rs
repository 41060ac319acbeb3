//! Through the MCP endpoint: an rmcp client talks to `executor serve`'s host on
//! loopback, whose catalog reaches real upstreams. Reads run to completion; a
//! POST pauses, and once accepted the upstream sees exactly one POST.

mod support;

use std::sync::Arc;

use executor_cli::{keys, serve};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use support::{Recorded, world};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_code_reads_and_an_approved_post_reaches_the_upstream_once() {
    let w = world("").await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let token = keys::create(&*store, "alice").await.unwrap();
    let namespaces: Vec<String> = w.catalog.namespaces().into_iter().map(|n| n.namespace).collect();
    let host = serve::host(store, w.catalog.clone(), &namespaces, HostConfig::default()).await.unwrap();
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
    let tools = client.list_tools(None).await.unwrap().tools;
    assert!(tools[0].description.as_deref().unwrap().contains("Connected namespaces: shop, docs"));

    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            let params = CallToolRequestParams::new(name).with_arguments(arguments.as_object().unwrap().clone());
            client.call_tool(params).await.unwrap().structured_content.unwrap()
        }
    };
    let read = r#"
        const found = await tools.search({ query: "list items", namespace: "shop" });
        const types = await tools.describe.tool({ path: found.items[0].path });
        const listed = await tools.shop.items.listItems({});
        return { path: found.items[0].path, typed: types.includes("type Input"), names: listed.data.map(i => i.name) };
    "#;
    let done = call("execute", json!({ "code": read })).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], json!({"path": "shop.items.listItems", "typed": true, "names": ["lamp", "desk"]}));

    let write =
        r#"const created = await tools.shop.items.createItem({ body: { name: "chair" } }); return created.data"#;
    let paused = call("execute", json!({ "code": write })).await;
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    assert_eq!(paused["interaction"]["tool"], "shop.items.createItem");
    assert_eq!(Recorded::count(&w.shop.recorded.posts), 0, "nothing is written before the approval");
    let accepted = call("resume", json!({ "executionId": paused["executionId"], "action": "accept" })).await;
    assert_eq!(accepted["result"], json!({"id": 3, "name": "chair"}), "{accepted}");
    let again = call("resume", json!({ "executionId": paused["executionId"], "action": "accept" })).await;
    assert_eq!(again["error"]["code"], "execution_already_settled");
    assert_eq!(Recorded::count(&w.shop.recorded.posts), 1, "one approval, one upstream POST");
    client.cancel().await.unwrap();
}
