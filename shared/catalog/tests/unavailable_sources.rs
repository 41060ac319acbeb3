//! Sources that cannot be reached, authenticated or parsed are named, with
//! the reason, wherever tools are looked for: in every `tools.search`
//! result, in `execute`'s description, in calls. Never as "0 tools".

mod support;

use std::sync::Arc;

use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::ExecutionId;
use executor_core::{ToolPattern, Toolkit, ToolkitName};
use executor_sandbox::{CallContext, Tools};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use support::graphql::GraphqlServer;
use support::{SHOP_SPEC, TOKEN_VAR, set_secrets, start_shop};

/// A loopback port nothing listens on.
async fn closed_port() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_sources_are_named_with_the_reason_in_search_describe_and_calls() {
    set_secrets();
    let shop = start_shop("http://localhost/").await;
    // It accepts another token than the one the source sends.
    let tracker = GraphqlServer::start("some-other-token");
    let closed = closed_port().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shop.yaml"), SHOP_SPEC).unwrap();
    std::fs::write(dir.path().join("broken.yaml"), "openapi: [3.1\n").unwrap();
    std::fs::write(dir.path().join("tracker.json"), "{\"data\": {}}").unwrap();
    let config = format!(
        r#"
        [outbound]
        allow_loopback = true

        [[sources]]
        namespace = "shop"
        kind = "openapi"
        spec = "shop.yaml"
        base_url = "{shop}"

        [[sources]]
        namespace = "offline"
        kind = "openapi"
        spec = "{closed}/openapi.yaml"
        base_url = "{closed}"

        [[sources]]
        namespace = "tracker"
        kind = "graphql"
        url = "{tracker}"
        auth = {{ type = "bearer", token = "env:{TOKEN_VAR}" }}

        [[sources]]
        namespace = "broken"
        kind = "openapi"
        spec = "broken.yaml"
        base_url = "{shop}"

        [[sources]]
        namespace = "schemaless"
        kind = "graphql"
        url = "{tracker}"
        schema = "tracker.json"
        "#,
        shop = shop.base_url,
        tracker = tracker.url(),
    );
    let file = dir.path().join("executor.toml");
    std::fs::write(&file, config).unwrap();
    let catalog = Arc::new(Catalog::connect(&CatalogConfig::load(&file).unwrap()).await.unwrap());

    let reasons = [
        ("offline", "openapi", "source `offline` (spec) failed: the request failed: error sending request"),
        (
            "tracker",
            "graphql",
            "source `tracker` (introspection) failed: introspection answered HTTP 401: {\"errors\": [{\"message\": \"a valid bearer token is required\"}]}",
        ),
        ("broken", "openapi", "source `broken` (spec) failed: the document is neither JSON nor YAML"),
        (
            "schemaless",
            "graphql",
            "source `schemaless` (schema) failed: the schema is not an introspection result (JSON with `__schema`, or `data.__schema`): no `__schema`",
        ),
    ];
    let found = catalog.search(json!({"query": "items"})).await.unwrap();
    assert!(found["total"].as_u64().unwrap() > 0, "the healthy source's tools are found: {found}");
    let unavailable = found["unavailable"].as_array().unwrap();
    assert_eq!(unavailable.len(), reasons.len(), "{found}");
    for (entry, (namespace, kind, reason)) in unavailable.iter().zip(reasons) {
        assert_eq!((entry["namespace"].as_str(), entry["kind"].as_str()), (Some(namespace), Some(kind)));
        let text = entry["reason"].as_str().unwrap();
        assert!(text.starts_with(reason), "{namespace}: {text}");
        assert!(!text.contains(support::TOKEN), "{text}");
    }
    // Filtered to one namespace: only its own state.
    let shop_only = catalog.search(json!({"query": "items", "namespace": "shop"})).await.unwrap();
    assert_eq!(shop_only.get("unavailable"), None, "{shop_only}");
    let search = catalog.search(json!({"query": "", "namespace": "tracker"})).await.unwrap_err();
    assert_eq!(search.code, "source_unavailable");
    assert!(search.message.contains("a valid bearer token is required"), "{}", search.message);
    let ctx = CallContext::new(ExecutionId::parse("exec-1").unwrap(), 0);
    let call = catalog.call("broken.items.listItems", json!({}), &ctx).await.unwrap_err();
    assert_eq!(call.code, "source_unavailable");
    assert!(
        call.message.starts_with("namespace `broken` is unavailable: source `broken` (spec) failed"),
        "{}",
        call.message
    );

    // A toolkit sees only the unavailable sources it could hold tools of.
    let toolkit = Toolkit {
        name: ToolkitName::parse("kit").unwrap(),
        tools: vec![ToolPattern::parse("shop.*").unwrap(), ToolPattern::parse("broken.*").unwrap()],
        policy: Default::default(),
    };
    let view = Catalog::toolkit_views(&catalog, &[toolkit]).remove(0);
    let through_view = view.search(json!({"query": "items"})).await.unwrap();
    let names: Vec<&str> =
        through_view["unavailable"].as_array().unwrap().iter().map(|u| u["namespace"].as_str().unwrap()).collect();
    assert_eq!(names, ["broken"], "{through_view}");

    // `execute`'s description, as an MCP client lists it.
    let labels: Vec<String> = catalog.namespaces().iter().map(|n| catalog.label(&n.namespace)).collect();
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let key = keys::create(&*store, "alice").await.unwrap();
    let host = serve::host(store, catalog.clone(), &labels, HostConfig::default()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("agent", "1"))
        .with_protocol_version(ProtocolVersion::V_2025_06_18);
    let client = info
        .serve(StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config))
        .await
        .unwrap();
    let tools = client.list_tools(None).await.unwrap().tools;
    let description = tools[0].description.as_deref().unwrap();
    assert!(
        description.contains("Connected namespaces: shop, offline (unavailable: source `offline` (spec) failed: "),
        "{description}"
    );
    for (namespace, _, reason) in reasons {
        let shown = format!("{namespace} (unavailable: {}", &reason[..reason.len().min(120)]);
        assert!(description.contains(&shown), "{shown} in {description}");
    }
    client.cancel().await.unwrap();
}
