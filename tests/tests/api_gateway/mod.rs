//! A local stand-in for API Gateway (HTTP API, payload 2.0) in front of the
//! Lambda functions' handler: real HTTP on 127.0.0.1 in, an API Gateway event
//! to `executor_lambda_shell::handle` (the raw JSON the Lambda runtime hands
//! it), its JSON answer back out as API Gateway turns it into HTTP. Routes as the CDK
//! stack does: `/approvals/...`, `/console/...`, `/api/...` and `/oauth/...` to the approval function, the
//! rest to the MCP function, each its own host (its own "Lambda instance").
//! [`Ledger`] is what the two functions share in the tests of handed-on runs.

#![allow(dead_code)] // each test binary uses part of it

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use base64::Engine;
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::Clock;
use executor_lambda_shell::Routes;
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::{AlarmScheduler, EventBridgeScheduler, SchedulerTarget};
use executor_service::{Host, HostConfig};
use executor_store::{DynamoStore, Store};
use executor_tests::faults::Upstream;
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
    let console = path == "/console" || path.starts_with("/console/");
    let (routes, host) = if console || ["/approvals/", "/api/", "/oauth/"].iter().any(|p| path.starts_with(p)) {
        (Routes::Approvals, &functions.approval)
    } else {
        (Routes::Mcp, &functions.mcp)
    };
    let event = event(&parts, &body);
    let answer = executor_lambda_shell::handle(host, routes, event).await.expect("an API Gateway event is answered");
    response(&answer)
}

/// One deployment's MCP and approval functions over `store` (each its own
/// host, as two Lambda instances are), with a schedule group of their own,
/// configured as the functions are (API Gateway routes by host), behind the
/// stand-in: its base URL and both hosts.
pub async fn start_deployment<S: Store + 'static>(
    store: Arc<S>,
    catalog: Arc<Catalog>,
    namespaces: &[String],
    clock: Arc<dyn Clock>,
    config: HostConfig,
) -> (String, Vec<Host>) {
    let group = format!("executor-test-{}-{}", std::process::id(), executor_tests::next_id());
    executor_tests::scheduler_client().create_schedule_group().name(&group).send().await.unwrap();
    let target = SchedulerTarget {
        group,
        target_arn: "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm".into(),
        role_arn: "arn:aws:iam::123456789012:role/executor-scheduler".into(),
    };
    let scheduler = Arc::new(EventBridgeScheduler::new(executor_tests::scheduler_client(), target));
    let config = HostConfig { allowed_hosts: None, ..config };
    let function = || {
        let sandbox = Sandbox::with_clock(Limits::default(), clock.clone());
        Host::new(store.clone(), catalog.clone(), namespaces, sandbox, scheduler.clone(), config.clone())
    };
    let (mcp, approval) = (function(), function());
    let hosts = vec![mcp.clone(), approval.clone()];
    let (base, _done) = start(Functions { mcp, approval }, std::future::pending()).await;
    (base, hosts)
}

/// The HTTP response API Gateway makes of a function's answer: each of
/// `cookies` a `Set-Cookie`, a base64 body decoded.
fn response(answer: &Value) -> Response {
    let text = answer["body"].as_str().unwrap_or_default();
    let body = match answer["isBase64Encoded"].as_bool() {
        Some(true) => base64::engine::general_purpose::STANDARD.decode(text).expect("a base64 body"),
        _ => text.as_bytes().to_vec(),
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = http::StatusCode::from_u16(answer["statusCode"].as_u64().unwrap() as u16).unwrap();
    let headers = answer["headers"].as_object().into_iter().flatten();
    let cookies = answer["cookies"].as_array().into_iter().flatten().map(|c| ("set-cookie", c));
    for (name, value) in headers.map(|(n, v)| (n.as_str(), v)).chain(cookies) {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        response.headers_mut().append(name, http::HeaderValue::from_str(value.as_str().unwrap()).unwrap());
    }
    response
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

/// The ledger upstream and a catalog of it, and a table of their own (moto)
/// holding alice's key: what both functions share on AWS.
pub struct Ledger {
    pub upstream: Upstream,
    pub catalog: Arc<Catalog>,
    pub store: Arc<DynamoStore>,
    pub alice: String,
    _dir: tempfile::TempDir,
}

impl Ledger {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let upstream = Upstream::start().await;
        let sources = CatalogConfig::load(&upstream.write_config(dir.path(), Duration::from_secs(30))).unwrap();
        let catalog = Arc::new(Catalog::connect(&sources).await.expect("the catalog connects"));
        let (store, _client) = executor_tests::dynamo_store().await;
        let store = Arc::new(store);
        let alice = executor_cli::keys::create(&*store, "alice").await.unwrap();
        Self { upstream, catalog, store, alice, _dir: dir }
    }

    /// One function over it (its own "Lambda instance"), whose runs stop at
    /// the configured execution limit.
    pub fn function(&self, scheduler: Arc<dyn AlarmScheduler>, config: HostConfig) -> Host {
        let sandbox = Sandbox::new(Limits { wall_clock: config.max_execution, ..Limits::default() });
        Host::new(self.store.clone(), self.catalog.clone(), &["ledger".to_owned()], sandbox, scheduler, config)
    }
}
