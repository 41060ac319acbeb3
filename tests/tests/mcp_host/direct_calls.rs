//! The common `tools/call` (a client before 2026-07-28, plain headers) is
//! answered without rmcp's service; the same call with an `Mcp-Name` header,
//! which that revision ignores, goes through rmcp (the edge's table test
//! pins which requests go where). Both must answer alike, byte for byte
//! apart from the ids each run gets.

use executor_tests::raw_mcp;
use serde_json::{Value, json};

use super::{Deployment, Place, Running, WRITE};

/// The answer's status, content type and body, with what differs from run
/// to run (the execution id, a pause's expiry) replaced wherever it appears.
type Answer = (u16, String, Value);

async fn answer(host: &Running, through_rmcp: bool, session: Option<&str>, body: &Value) -> Answer {
    let http = executor_http_client::builder().build().unwrap();
    let mut request = raw_mcp::post_in(&http, &host.url, &host.token, session, body);
    if through_rmcp {
        request = request.header("mcp-name", body["params"]["name"].as_str().unwrap_or("x"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    let text = response.text().await.unwrap();
    let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let structured = &parsed["result"]["structuredContent"];
    let mut text = text.clone();
    for (key, placeholder) in [("executionId", "<execution>"), ("expiresAt", "<expiry>")] {
        if let Some(value) = structured.get(key).and_then(Value::as_str).filter(|v| !v.is_empty()) {
            text = text.replace(value, placeholder);
        }
    }
    (status, content_type, serde_json::from_str(&text).unwrap())
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

pub(super) async fn rmcp_and_the_direct_path_answer_tool_calls_alike(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let host = Running::start(&place, None).await;
    let session = raw_mcp_session(&host).await;
    let calls = [
        call("execute", json!({"code": "console.log('hi'); return 1 + 2"})),
        call("execute", json!({"code": "throw new Error('boom')"})),
        call("execute", json!({"code": "return await tools.r.echo({a: 1})"})),
        call("execute", json!({"code": "return [await tools.x.drop({}), await tools.fail.it({})]"})),
        call("execute", json!({"code": "while (true) {} // never returns", "idempotencyKey": 5})),
        call("execute", json!({})),
        call("execute", json!({"code": WRITE})),
        call("resume", json!({"executionId": "e-not-yours", "action": "accept"})),
        call("resume", json!({"executionId": "not an id"})),
        call("nope", json!({})),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "execute"}}),
    ];
    for body in &calls {
        for session in [None, Some(session.as_str())] {
            let direct = answer(&host, false, session, body).await;
            let rmcp = answer(&host, true, session, body).await;
            assert_eq!(direct, rmcp, "{body} in session {session:?}");
            assert_eq!((direct.0, direct.1.as_str()), (200, "application/json"), "{body}: {direct:?}");
        }
    }
    // Each call ran once per answer; each pause made waits, its call not made.
    let made: Vec<String> = host.tools.calls().into_iter().map(|(path, _)| path).collect();
    assert_eq!(made, ["r.echo", "r.echo", "r.echo", "r.echo", "fail.it", "fail.it", "fail.it", "fail.it"]);
    host.stop().await;
}

async fn raw_mcp_session(host: &Running) -> String {
    let http = executor_http_client::builder().build().unwrap();
    let response = raw_mcp::post(&http, &host.url, &host.token, &raw_mcp::initialize("direct")).send().await.unwrap();
    response.headers()["mcp-session-id"].to_str().unwrap().to_owned()
}
