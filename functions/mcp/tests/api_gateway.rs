//! The MCP function's handler fed API Gateway v2 events, with DynamoDB
//! (moto_server) as the store: what one Lambda starts, another continues.

#[path = "../../../shared/sandbox/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use executor_lambda_shell::Routes;
use executor_sandbox::{Limits, Sandbox};
use executor_service::{Host, HostConfig};
use executor_store::KeyStore;
use serde_json::{Value, json};
use support::TestTools;

const DOMAIN: &str = "abc123.execute-api.eu-west-1.amazonaws.com";

/// An HTTP API (payload 2.0) event for `POST /mcp` (or another method) with a JSON body.
fn event(method: &str, headers: &[(&str, &str)], body: Option<&Value>) -> lambda_http::Request {
    let mut all = headers.to_vec();
    all.push(("content-type", "application/json"));
    all.push(("accept", "application/json, text/event-stream"));
    event_at(method, "/mcp", "", &all, body.map(Value::to_string))
}

/// An HTTP API (payload 2.0) event as API Gateway sends it to a function.
fn event_at(
    method: &str,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> lambda_http::Request {
    let mut all: serde_json::Map<String, Value> = headers.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    all.insert("host".into(), json!(DOMAIN));
    all.insert("x-forwarded-proto".into(), json!("https"));
    let event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": all,
        "requestContext": {
            "accountId": "123456789012", "apiId": "abc123", "domainName": DOMAIN, "domainPrefix": "abc123",
            "http": { "method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9", "userAgent": "test" },
            "requestId": "req", "routeKey": "$default", "stage": "$default",
            "time": "29/Nov/2026:19:46:21 +0000", "timeEpoch": 1_795_895_181_000u64
        },
        "body": body,
        "isBase64Encoded": false
    });
    lambda_http::request::from_str(&event.to_string()).expect("a valid API Gateway v2 event")
}

fn text(response: &lambda_http::Response<lambda_http::Body>) -> String {
    match response.body() {
        lambda_http::Body::Text(text) => text.clone(),
        other => panic!("expected a text body, got {other:?}"),
    }
}

fn body(response: &lambda_http::Response<lambda_http::Body>) -> Value {
    match response.body() {
        lambda_http::Body::Text(text) => serde_json::from_str(text).unwrap(),
        other => panic!("expected a JSON text body, got {other:?}"),
    }
}

/// A fresh "Lambda instance": its own host over the shared table.
fn instance<S: executor_store::Store + 'static>(store: &Arc<S>, tools: &Arc<TestTools>) -> Host {
    let config = HostConfig { allowed_hosts: None, ..HostConfig::default() };
    let scheduler = Arc::new(executor_scheduler::InProcessScheduler::new());
    Host::new(store.clone(), tools.clone(), &["w".into()], Sandbox::new(Limits::default()), scheduler, config)
}

/// A fresh table (moto) holding alice's API key `token`.
async fn table_with_key(token: &str) -> Arc<executor_store::DynamoStore> {
    let (store, _client) = executor_tests::dynamo_store().await;
    let key = executor_core::ApiKey {
        hash: executor_core::TokenHash::of_token(token),
        owner: executor_core::Principal::parse("alice").unwrap(),
        created_at: std::time::SystemTime::now().into(),
        toolkit: None,
    };
    store.create_key(&key).await.unwrap();
    Arc::new(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_and_a_paused_execution_move_between_instances() {
    let token = "exk_lambda_test_token";
    let store = table_with_key(token).await;
    let tools = TestTools::new();
    let (one, two) = (instance(&store, &tools), instance(&store, &tools));
    let auth = format!("Bearer {token}");

    let unauthenticated = executor_lambda_shell::handle(&one, Routes::Mcp, event("POST", &[], Some(&json!({})))).await;
    assert_eq!(unauthenticated.status(), 401);
    let challenge = unauthenticated.headers()["www-authenticate"].to_str().unwrap();
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"https://{DOMAIN}/.well-known/oauth-protected-resource/mcp\"")
    );

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lambda", "version": "1"}}});
    let started =
        executor_lambda_shell::handle(&one, Routes::Mcp, event("POST", &[("authorization", &auth)], Some(&initialize)))
            .await;
    assert_eq!(started.status(), 200, "{:?}", started.body());
    let session = started.headers()["mcp-session-id"].to_str().unwrap().to_owned();

    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let execute = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "const r = await tools.w.send({n: 1}); return r.data.args"}}});
    let paused = body(&executor_lambda_shell::handle(&two, Routes::Mcp, event("POST", &headers, Some(&execute))).await);
    let structured = &paused["result"]["structuredContent"];
    assert_eq!(structured["status"], "waiting_for_interaction", "{paused}");

    let resume = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "resume", "arguments": {"executionId": structured["executionId"], "action": "accept"}}});
    let done = body(&executor_lambda_shell::handle(&one, Routes::Mcp, event("POST", &headers, Some(&resume))).await);
    assert_eq!(done["result"]["structuredContent"]["result"], json!({"n": 1}), "{done}");
    assert_eq!(tools.calls().len(), 1);

    let deleted = executor_lambda_shell::handle(&two, Routes::Mcp, event("DELETE", &headers, None)).await;
    assert_eq!(deleted.status(), 204);
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    let gone = executor_lambda_shell::handle(&one, Routes::Mcp, event("POST", &headers, Some(&list))).await;
    assert_eq!(gone.status(), 404);
    assert_eq!(body(&gone)["error"]["message"], "Session not found");
}

/// Browser mode across the two functions: the MCP function pauses and hands out
/// a link; the approval function shows and decides it; the MCP function's
/// `resume` returns the outcome. Each only answers its own routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_approval_crosses_from_the_mcp_function_to_the_approval_function() {
    let token = "exk_lambda_browser_token";
    let store = table_with_key(token).await;
    let tools = TestTools::new();
    let (mcp, approval) = (instance(&store, &tools), instance(&store, &tools));
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let call = |name: &str, arguments: Value| {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments,
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
        let mut headers = headers.to_vec();
        headers.push(("mcp-method", "tools/call"));
        headers.push(("mcp-name", if name == "execute" { "execute" } else { "resume" }));
        event_at("POST", "/mcp", "elicitation_mode=browser", &headers, Some(request.to_string()))
    };
    let execute = json!({"code": "const r = await tools.w.send({n: 1}); return r.data.args"});
    let paused = body(&executor_lambda_shell::handle(&mcp, Routes::Mcp, call("execute", execute)).await);
    let structured = &paused["result"]["structuredContent"];
    assert_eq!(structured["status"], "user_approval_required", "{paused}");
    let link = structured["approvalUrl"].as_str().unwrap();
    let (path, query) = link.strip_prefix(&format!("https://{DOMAIN}")).unwrap().split_once('?').unwrap();

    let misrouted = executor_lambda_shell::handle(&mcp, Routes::Mcp, event_at("GET", path, query, &[], None)).await;
    assert_eq!(misrouted.status(), 404, "the MCP function does not serve approvals");
    let page =
        executor_lambda_shell::handle(&approval, Routes::Approvals, event_at("GET", path, query, &[], None)).await;
    assert_eq!(page.status(), 200);
    let cookie = page.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("; Secure"), "HTTPS behind API Gateway: {cookie}");
    let html = text(&page);
    let field = |name: &str| {
        let marker = format!("name=\"{name}\" value=\"");
        html.split(&marker).nth(1).unwrap().split('"').next().unwrap().to_owned()
    };
    let form = format!("token={}&csrf={}&decision=accept", field("token"), field("csrf"));
    let cookie = cookie.split(';').next().unwrap();
    let form_headers = [("content-type", "application/x-www-form-urlencoded"), ("cookie", cookie)];
    let decided = executor_lambda_shell::handle(
        &approval,
        Routes::Approvals,
        event_at("POST", path, "", &form_headers, Some(form)),
    )
    .await;
    assert_eq!(decided.status(), 200, "{}", text(&decided));
    assert!(text(&decided).contains("Approved"));

    let id = structured["executionId"].clone();
    let done =
        body(&executor_lambda_shell::handle(&mcp, Routes::Mcp, call("resume", json!({"executionId": id}))).await);
    assert_eq!(done["result"]["structuredContent"]["result"], json!({"n": 1}), "{done}");
    assert_eq!(tools.calls().len(), 1);
}
