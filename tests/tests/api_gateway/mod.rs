//! A local stand-in for API Gateway (HTTP API, payload 2.0) in front of the
//! Lambda functions' handler: real HTTP on 127.0.0.1 in, an API Gateway event
//! to `executor_lambda_shell::handle`, its answer back out. Routes as the CDK
//! stack does: `/approvals/...`, `/api/...` and `/oauth/...` to the approval function, the
//! rest to the MCP function, each its own host (its own "Lambda instance").

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use base64::Engine;
use executor_lambda_shell::Routes;
use executor_service::Host;
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// The two HTTP functions behind one API.
pub struct Functions {
    pub mcp: Host,
    pub approval: Host,
}

/// Serve `functions` on a free loopback port until `shutdown`; returns the base URL.
pub async fn start(
    functions: Functions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(invoke).with_state(Arc::new(functions));
    let done = tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(shutdown).await.unwrap();
    });
    (base, done)
}

async fn invoke(State(functions): State<Arc<Functions>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let (routes, host) = if ["/approvals/", "/api/", "/oauth/"].iter().any(|p| path.starts_with(p)) {
        (Routes::Approvals, &functions.approval)
    } else {
        (Routes::Mcp, &functions.mcp)
    };
    let event = event(&parts, &body);
    let request = lambda_http::request::from_str(&event.to_string()).expect("a valid API Gateway v2 event");
    let response = executor_lambda_shell::handle(host, routes, request).await;
    let (parts, body) = response.into_parts();
    let body = match body {
        lambda_http::Body::Empty => Body::empty(),
        lambda_http::Body::Text(text) => Body::from(text),
        lambda_http::Body::Binary(bytes) => Body::from(bytes),
        other => panic!("the function answered an unexpected body {other:?}"),
    };
    Response::from_parts(parts, body)
}

/// The event API Gateway sends: headers lower-cased and joined with commas,
/// cookies apart, a text body as is and anything else in base64.
fn event(parts: &http::request::Parts, body: &[u8]) -> Value {
    let mut headers = serde_json::Map::new();
    let mut cookies = Vec::new();
    for (name, value) in &parts.headers {
        let value = value.to_str().unwrap_or_default().to_owned();
        if name == http::header::COOKIE {
            cookies.extend(value.split(';').map(|c| json!(c.trim())));
            continue;
        }
        match headers.get_mut(name.as_str()) {
            Some(Value::String(existing)) => *existing = format!("{existing},{value}"),
            _ => {
                headers.insert(name.as_str().to_owned(), json!(value));
            }
        }
    }
    let host = parts.headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("127.0.0.1");
    headers.insert("x-forwarded-proto".into(), json!("http"));
    let (body, encoded) = match std::str::from_utf8(body) {
        _ if body.is_empty() => (Value::Null, false),
        Ok(text) => (json!(text), false),
        Err(_) => (json!(base64::engine::general_purpose::STANDARD.encode(body)), true),
    };
    let path = parts.uri.path();
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": parts.uri.query().unwrap_or_default(),
        "cookies": cookies,
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012", "apiId": "local", "domainName": host, "domainPrefix": "local",
            "http": { "method": parts.method.as_str(), "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "test" },
            "requestId": "local", "routeKey": "$default", "stage": "$default",
            "time": "29/Nov/2026:19:46:21 +0000", "timeEpoch": 1_795_895_181_000u64
        },
        "body": body,
        "isBase64Encoded": encoded
    })
}
