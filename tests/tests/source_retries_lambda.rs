//! A source that could not be connected when a Lambda instance started
//! heals on that warm instance, without a restart: through the functions'
//! handler (`executor_lambda_shell::handle`, given API Gateway events as the
//! runtime hands them), `GET /readyz` names it, the code's call is answered
//! `source_unavailable`, and once the spec host is up and the retry is due
//! (a `ManualClock` moved, nothing sleeps for the backoff) the next call
//! connects the source and runs, and `/readyz` answers 200. A Lambda
//! function has no background time: until a use, the retry waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::{Clock, ManualClock};
use executor_lambda_shell::Routes;
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::InProcessScheduler;
use executor_service::{Host, HostConfig};
use executor_tests::lambda::http_event;
use serde_json::{Value, json};

const DOMAIN: &str = "abc123.execute-api.eu-west-1.amazonaws.com";

const SPEC: &str = r#"{
  "openapi": "3.1.0",
  "info": {"title": "shop", "version": "1"},
  "paths": {"/items": {"get": {"tags": ["items"], "operationId": "listItems", "summary": "List items",
    "responses": {"200": {"description": "ok"}}}}}
}"#;

/// The shop: its document at `/openapi.json` once `up` (503 before), its items at `/items`.
async fn shop(up: Arc<AtomicBool>) -> String {
    let spec = move || {
        let up = up.clone();
        async move {
            match up.load(Ordering::SeqCst) {
                true => ([("content-type", "application/json")], SPEC).into_response(),
                false => (StatusCode::SERVICE_UNAVAILABLE, "deploying").into_response(),
            }
        }
    };
    let app = axum::Router::new()
        .route("/openapi.json", axum::routing::get(spec))
        .route("/items", axum::routing::get(|| async { axum::Json(json!([{"name": "lamp"}])) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// An invocation of the MCP function; its status and body.
async fn invoke(host: &Host, method: &str, path: &str, headers: &[(&str, &str)], body: Option<Value>) -> (u64, String) {
    let event = http_event(Some(DOMAIN), method, path, "", headers, body.map(|b| (b.to_string(), false)));
    let answer = executor_lambda_shell::handle(host, Routes::Mcp, event).await.unwrap();
    (answer["statusCode"].as_u64().unwrap(), answer["body"].as_str().unwrap().to_owned())
}

/// `GET /readyz`: its status and JSON body.
async fn readyz(host: &Host) -> (u64, Value) {
    let (status, body) = invoke(host, "GET", "/readyz", &[], None).await;
    (status, serde_json::from_str(&body).unwrap())
}

/// `execute` of `code` by the owner of `key`: its structured result.
async fn execute(host: &Host, key: &str, code: &str) -> Value {
    let auth = format!("Bearer {key}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "execute"),
    ];
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": code},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let (status, body) = invoke(host, "POST", "/mcp", &headers, Some(call)).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["result"]["structuredContent"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_instance_connects_a_source_on_its_first_use_after_the_retry_is_due() {
    let up = Arc::new(AtomicBool::new(false));
    let base = shop(up.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("executor.toml");
    let sources = format!(
        "[outbound]\nallow_loopback = true\n\n[[sources]]\nnamespace = \"shop\"\nkind = \"openapi\"\n\
         spec = \"{base}/openapi.json\"\nbase_url = \"{base}\"\n"
    );
    std::fs::write(&file, sources).unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let started = clock.now();
    let catalog =
        Arc::new(Catalog::connect_with_clock(&CatalogConfig::load(&file).unwrap(), clock.clone()).await.unwrap());
    let (store, _data) = executor_tests::embedded_store();
    let store = Arc::new(store);
    let key = executor_cli::keys::create(&*store, "alice").await.unwrap();
    let labels: Vec<String> = catalog.namespaces().iter().map(|n| catalog.label(&n.namespace)).collect();
    let config = HostConfig { allowed_hosts: None, clock: clock.clone(), ..HostConfig::default() };
    let sandbox = Sandbox::new(Limits { wall_clock: config.max_execution, ..Limits::default() });
    let host = Host::new(store, catalog, &labels, sandbox, Arc::new(InProcessScheduler::new()), config);

    let (status, ready) = readyz(&host).await;
    assert_eq!((status, &ready["status"]), (503, &json!("degraded")), "{ready}");
    let shop_state = &ready["sources"]["shop"];
    assert_eq!(shop_state["state"], "unavailable");
    assert!(shop_state["reason"].as_str().unwrap().contains("HTTP 503: deploying"), "{ready}");
    assert_eq!(shop_state["since"], started.to_rfc3339());
    assert_eq!(shop_state["nextRetryAt"], started.plus(Duration::from_secs(2)).to_rfc3339());
    assert_eq!(invoke(&host, "GET", "/healthz", &[], None).await, (200, "ok".to_owned()), "live all along");

    let code = "const r = await tools.shop.items.listItems({}); return r.ok ? r.data : r.error.code;";
    let before = execute(&host, &key, code).await;
    assert_eq!((&before["status"], &before["result"]), (&json!("completed"), &json!("source_unavailable")), "{before}");

    // Up, and the retry due: nothing runs between invocations, so `/readyz` still says so...
    up.store(true, Ordering::SeqCst);
    clock.advance(Duration::from_secs(2));
    assert_eq!(readyz(&host).await.0, 503);
    // ...until the first use, which connects it and runs.
    let after = execute(&host, &key, code).await;
    assert_eq!((&after["status"], &after["result"]), (&json!("completed"), &json!([{"name": "lamp"}])), "{after}");
    assert_eq!(readyz(&host).await, (200, json!({"status": "ready", "sources": {"shop": {"state": "connected"}}})));
}
