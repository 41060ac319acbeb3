//! The MCP function's handler fed API Gateway v2 events, with DynamoDB
//! (moto_server) as the store: what one Lambda starts, another continues.

#[path = "../../../shared/sandbox/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use executor_lambda_shell::Routes;
use executor_sandbox::{Limits, Sandbox};
use executor_service::{Host, HostConfig};
use executor_store::KeyStore;
use executor_tests::lambda::http_event;
use serde_json::{Value, json};
use support::TestTools;

const DOMAIN: &str = "abc123.execute-api.eu-west-1.amazonaws.com";

/// An HTTP API (payload 2.0) event for `POST /mcp` (or another method) with a JSON body.
fn event(method: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Value {
    let mut all = headers.to_vec();
    all.push(("content-type", "application/json"));
    all.push(("accept", "application/json, text/event-stream"));
    event_at(method, "/mcp", "", &all, body.map(Value::to_string))
}

/// An HTTP API (payload 2.0) event as API Gateway sends it to a function:
/// its own `Host` and scheme in place of any the client sent.
fn event_at(method: &str, path: &str, query: &str, headers: &[(&str, &str)], body: Option<String>) -> Value {
    let mut all = headers.to_vec();
    all.extend([("host", DOMAIN), ("x-forwarded-proto", "https")]);
    http_event(Some(DOMAIN), method, path, query, &all, body.map(|body| (body, false)))
}

/// One invocation of a function's handler: its answer, as API Gateway reads it.
async fn invoke(host: &Host, routes: Routes, event: Value) -> Value {
    executor_lambda_shell::handle(host, routes, event).await.expect("an API Gateway event is answered")
}

fn status(answer: &Value) -> u64 {
    answer["statusCode"].as_u64().expect("a status code")
}

fn text(answer: &Value) -> String {
    assert_eq!(answer["isBase64Encoded"], false, "expected a text body: {answer}");
    answer["body"].as_str().expect("a body").to_owned()
}

fn body(answer: &Value) -> Value {
    serde_json::from_str(&text(answer)).unwrap()
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

    let unauthenticated = invoke(&one, Routes::Mcp, event("POST", &[], Some(&json!({})))).await;
    assert_eq!(status(&unauthenticated), 401);
    let challenge = unauthenticated["headers"]["www-authenticate"].as_str().unwrap();
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"https://{DOMAIN}/.well-known/oauth-protected-resource/mcp\"")
    );

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lambda", "version": "1"}}});
    let started = invoke(&one, Routes::Mcp, event("POST", &[("authorization", &auth)], Some(&initialize))).await;
    assert_eq!(status(&started), 200, "{started}");
    let session = started["headers"]["mcp-session-id"].as_str().unwrap().to_owned();

    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let execute = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "const r = await tools.w.send({n: 1}); return r.data.args"}}});
    let paused = body(&invoke(&two, Routes::Mcp, event("POST", &headers, Some(&execute))).await);
    let structured = &paused["result"]["structuredContent"];
    assert_eq!(structured["status"], "waiting_for_interaction", "{paused}");

    let resume = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "resume", "arguments": {"executionId": structured["executionId"], "action": "accept"}}});
    let done = body(&invoke(&one, Routes::Mcp, event("POST", &headers, Some(&resume))).await);
    assert_eq!(done["result"]["structuredContent"]["result"], json!({"n": 1}), "{done}");
    assert_eq!(tools.calls().len(), 1);

    let deleted = invoke(&two, Routes::Mcp, event("DELETE", &headers, None)).await;
    assert_eq!(status(&deleted), 204);
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    let gone = invoke(&one, Routes::Mcp, event("POST", &headers, Some(&list))).await;
    assert_eq!(status(&gone), 404);
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
    let paused = body(&invoke(&mcp, Routes::Mcp, call("execute", execute)).await);
    let structured = &paused["result"]["structuredContent"];
    assert_eq!(structured["status"], "user_approval_required", "{paused}");
    let link = structured["approvalUrl"].as_str().unwrap();
    let (path, query) = link.strip_prefix(&format!("https://{DOMAIN}")).unwrap().split_once('?').unwrap();

    let misrouted = invoke(&mcp, Routes::Mcp, event_at("GET", path, query, &[], None)).await;
    assert_eq!(status(&misrouted), 404, "the MCP function does not serve approvals");
    let page = invoke(&approval, Routes::Approvals, event_at("GET", path, query, &[], None)).await;
    assert_eq!(status(&page), 200);
    let cookie = page["cookies"][0].as_str().unwrap().to_owned();
    assert!(cookie.contains("; Secure"), "HTTPS behind API Gateway: {cookie}");
    let html = text(&page);
    let field = |name: &str| {
        let marker = format!("name=\"{name}\" value=\"");
        html.split(&marker).nth(1).unwrap().split('"').next().unwrap().to_owned()
    };
    let form = format!("token={}&csrf={}&decision=accept", field("token"), field("csrf"));
    let cookie = cookie.split(';').next().unwrap();
    let form_headers = [("content-type", "application/x-www-form-urlencoded"), ("cookie", cookie)];
    let decided = invoke(&approval, Routes::Approvals, event_at("POST", path, "", &form_headers, Some(form))).await;
    assert_eq!(status(&decided), 200, "{}", text(&decided));
    assert!(text(&decided).contains("Approved"));

    let id = structured["executionId"].clone();
    let done = body(&invoke(&mcp, Routes::Mcp, call("resume", json!({"executionId": id}))).await);
    assert_eq!(done["result"]["structuredContent"]["result"], json!({"n": 1}), "{done}");
    assert_eq!(tools.calls().len(), 1);
}
