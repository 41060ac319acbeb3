//! What reaches the Lambda functions' handler (`executor_lambda_shell::handle`,
//! given the raw JSON the Lambda runtime hands it), as an attacker would send
//! it through API Gateway. DynamoDB via moto_server, a real upstream.
//!
//! - A continuation is its own event, never an HTTP request: no path,
//!   encoding, method, body or header sent to the approval function claims or
//!   runs another owner's handed-on execution, and every such request gets
//!   the same answer whether the execution exists or not. The continuation
//!   event itself still continues the run.
//! - The origin (`Host`, `X-Forwarded-Proto`) is API Gateway's, not the
//!   client's: odd, missing or hostile values never make a server error, and
//!   links and metadata name the API's own domain over HTTPS. `executor
//!   serve`, which has only the client's headers, ignores values it cannot use.

mod api_gateway;

use std::sync::Arc;
use std::time::Duration;

use api_gateway::Ledger;
use async_trait::async_trait;
use base64::Engine;
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::ExecutionId;
use executor_lambda_shell::{EventError, Routes, continuation_event};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::InProcessScheduler;
use executor_service::{ContinuationError, Continuations, Host, HostConfig};
use executor_store::{Access, ExecutionStore};
use executor_tests::lambda::http_event;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const DOMAIN: &str = "abc123.execute-api.eu-west-1.amazonaws.com";

/// One read held a second, then another: past a short response budget the
/// MCP function stops the run between the two and hands it on.
const TWO_READS: &str = "const a = await tools.ledger.entries.listEntries({ n: 1, holdMs: 1000 });
const b = await tools.ledger.entries.listEntries({ n: 2 });
return [a.ok, b.ok];";

/// A catalog without sources.
async fn no_sources() -> Arc<Catalog> {
    let config = CatalogConfig::from_toml_str("", std::path::Path::new("executor.toml")).unwrap();
    Arc::new(Catalog::connect(&config).await.unwrap())
}

/// The MCP function's continuations, never delivered: each handed-on id is
/// reported, and the run waits in the store for whoever continues it.
#[derive(Debug)]
struct Undelivered(mpsc::UnboundedSender<ExecutionId>);

#[async_trait]
impl Continuations for Undelivered {
    async fn start(&self, id: &ExecutionId) -> Result<(), ContinuationError> {
        let _ = self.0.send(id.clone());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_continues_a_handed_on_execution_or_tells_whether_one_exists() {
    let ledger = Ledger::start().await;
    let (upstream, store, alice) = (&ledger.upstream, &ledger.store, &ledger.alice);
    let bob = executor_cli::keys::create(&**store, "bob").await.unwrap();
    let (handed_on, mut handed) = mpsc::unbounded_channel();
    let base = HostConfig { allowed_hosts: None, response_budget: Duration::from_millis(300), ..HostConfig::default() };
    let function = |config| ledger.function(Arc::new(InProcessScheduler::new()), config);
    let mcp = function(HostConfig { continuations: Some(Arc::new(Undelivered(handed_on))), ..base.clone() });
    let approval = function(base);

    // Alice's run, handed on by the MCP function and not yet continued.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": TWO_READS},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let auth = format!("Bearer {alice}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "execute"),
    ];
    let started = http_event(Some(DOMAIN), "POST", "/mcp", "", &headers, Some((call.to_string(), false)));
    let started = executor_lambda_shell::handle(&mcp, Routes::Mcp, started).await.unwrap();
    let started: Value = serde_json::from_str(started["body"].as_str().unwrap()).unwrap();
    assert_eq!(started["result"]["structuredContent"]["status"], "running", "{started}");
    let id = tokio::time::timeout(Duration::from_secs(30), handed.recv()).await.unwrap().expect("a handed-on run");
    let stored = store.get_execution(Access::Internal, &id).await.unwrap();
    assert_eq!((stored.state(), stored.claim()), (&executor_core::ExecutionState::Running, None));
    assert_eq!(upstream.reads().len(), 1, "the first read, before the hand-off");
    // A well-formed id that names nothing.
    let missing = ExecutionId::parse("0".repeat(id.as_str().len())).unwrap();

    let paths = [
        "/internal/continuations/{id}",
        "/internal/continuations/{id}/",
        "//internal/continuations/{id}",
        "/api/%2e%2e/internal/continuations/{id}",
        "/api/%2E%2E/internal/continuations/{id}",
        "/api/../internal/continuations/{id}",
        "/api/%252e%252e/internal/continuations/{id}",
        "/api/%2e%2e%2finternal%2fcontinuations%2f{id}",
        "/api/executions/{id}/../../../internal/continuations/{id}",
        "/approvals/..%2finternal/continuations/{id}",
        "/approvals/../internal/continuations/{id}",
        "/approvals/%2e%2e/internal/continuations/{id}",
        "/oauth/..%2f..%2finternal/continuations/{id}",
    ];
    let bob_auth = format!("Bearer {bob}");
    for path in paths {
        for method in ["POST", "GET", "PUT"] {
            for variant in 0..5 {
                let answer = |target: &ExecutionId| {
                    let path = path.replace("{id}", target.as_str());
                    let smuggled = continuation_event(target).to_string();
                    let (headers, body): (Vec<(&str, &str)>, _) = match variant {
                        0 => (vec![], None),
                        1 => (vec![("content-type", "application/json")], Some(("{}".to_owned(), false))),
                        // The continuation event itself, as a body and as a header.
                        2 => (vec![("content-type", "application/json")], Some((smuggled.clone(), false))),
                        3 => {
                            let encoded = base64::engine::general_purpose::STANDARD.encode(&smuggled);
                            (vec![("x-forwarded-proto", "1"), ("host", "internal")], Some((encoded, true)))
                        }
                        _ => (vec![("authorization", bob_auth.as_str())], None),
                    };
                    let mut headers = headers;
                    if variant == 2 {
                        headers.push(("executorcontinuation", smuggled.as_str()));
                    }
                    http_event(Some(DOMAIN), method, &path, "", &headers, body)
                };
                let (for_id, for_missing) = (answer(&id), answer(&missing));
                let seen = executor_lambda_shell::handle(&approval, Routes::Approvals, for_id).await.unwrap();
                let unseen = executor_lambda_shell::handle(&approval, Routes::Approvals, for_missing).await.unwrap();
                let case = format!("{method} {path} (variant {variant})");
                let status = seen["statusCode"].as_u64().unwrap();
                assert!((400..500).contains(&status), "{case}: {seen}");
                let body = |answer: &Value, target: &ExecutionId| {
                    answer["body"].as_str().unwrap().replace(target.as_str(), "<id>")
                };
                assert_eq!(seen["statusCode"], unseen["statusCode"], "{case}: an oracle");
                assert_eq!(body(&seen, &id), body(&unseen, &missing), "{case}: an oracle");
            }
        }
    }
    assert_eq!(store.get_execution(Access::Internal, &id).await.unwrap(), stored, "nothing claimed it");
    assert_eq!(upstream.reads().len(), 1, "nothing ran it");

    // Only the continuation event continues it, and only on the approval function.
    let misdirected = executor_lambda_shell::handle(&mcp, Routes::Mcp, continuation_event(&id)).await;
    assert!(matches!(misdirected, Err(EventError::NotHere)), "{misdirected:?}");
    let continued = executor_lambda_shell::handle(&approval, Routes::Approvals, continuation_event(&id)).await;
    assert_eq!(continued.unwrap(), json!({"executionId": id, "status": "completed"}));
    assert_eq!(upstream.reads().len(), 2, "the second read, once");
    let again = executor_lambda_shell::handle(&approval, Routes::Approvals, continuation_event(&id)).await.unwrap();
    assert_eq!(again["error"]["code"], "execution_already_settled", "a second delivery runs nothing: {again}");
    let none = executor_lambda_shell::handle(&approval, Routes::Approvals, continuation_event(&missing)).await.unwrap();
    assert_eq!(none["error"]["code"], "execution_not_found", "{none}");
    let malformed = json!({"executorContinuation": {"executionId": "../x"}});
    let malformed = executor_lambda_shell::handle(&approval, Routes::Approvals, malformed).await;
    assert!(matches!(malformed, Err(EventError::Continuation(_))), "{malformed:?}");
    assert_eq!(upstream.reads().len(), 2);
}

/// `X-Forwarded-Proto` values a client may send.
const PROTOS: [&str; 9] = ["1", "a b", "http\u{0}", "https,http", "HTTP", "", "javascript", "http\r\nx-a: b", "ftp"];

/// `Host` values a client may send.
const HOSTS: [&str; 9] = [
    "",
    "a b",
    "evil.example:8443",
    "bücher.example",
    "[::1]:443",
    "user@evil.example",
    "%00",
    "example.com:99999",
    "evil.example/path?q",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_origin_headers_never_make_a_server_error_nor_the_links() {
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store);
    let tools = no_sources().await;
    let function = || {
        let config = HostConfig { allowed_hosts: None, ..HostConfig::default() };
        let scheduler = Arc::new(InProcessScheduler::new());
        Host::new(store.clone(), tools.clone(), &[], Sandbox::new(Limits::default()), scheduler, config)
    };
    let (mcp, approval) = (function(), function());
    let long = "h".repeat(9000);
    let mut cases: Vec<Vec<(&str, &str)>> = vec![vec![]];
    cases.extend(PROTOS.iter().chain([&long.as_str()]).map(|p| vec![("x-forwarded-proto", *p)]));
    cases.extend(HOSTS.iter().chain([&long.as_str()]).map(|h| vec![("host", *h)]));
    cases.extend(PROTOS.iter().zip(HOSTS.iter()).map(|(p, h)| vec![("x-forwarded-proto", *p), ("host", *h)]));
    let requests = [
        ("POST", "/mcp", Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)),
        ("GET", "/healthz", None),
        ("GET", "/approvals/x", None),
        ("GET", "/api/executions/x", None),
        ("GET", "/.well-known/oauth-protected-resource", None),
    ];
    let domains = [Some(DOMAIN), None, Some("bücher.example"), Some("a b")];
    for domain in domains {
        for headers in &cases {
            for (method, path, body) in requests {
                for (routes, host) in [(Routes::Mcp, &mcp), (Routes::Approvals, &approval)] {
                    let case = format!("{routes:?} {method} {path} at {domain:?} with {headers:?}");
                    let body = body.map(|b| (b.to_owned(), false));
                    let request = http_event(domain, method, path, "", headers, body);
                    let answer = executor_lambda_shell::handle(host, routes, request).await.expect(&case);
                    let status = answer["statusCode"].as_u64().unwrap();
                    assert!((200..500).contains(&status), "{case}: {answer}");
                    if domain != Some(DOMAIN) {
                        continue;
                    }
                    // Wherever the host names itself, it is the API's domain over HTTPS.
                    let origin = format!("https://{DOMAIN}/");
                    if let Some(challenge) = answer["headers"]["www-authenticate"].as_str() {
                        assert!(challenge.contains(&format!("resource_metadata=\"{origin}")), "{case}: {challenge}");
                    }
                    if path.starts_with("/.well-known") && routes == Routes::Mcp {
                        let metadata: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
                        assert_eq!(metadata["resource"], format!("{origin}mcp"), "{case}");
                    }
                }
            }
        }
    }
}

/// `executor serve` sees only the client's headers: a `Host` that is no
/// authority, or a scheme other than HTTP(S), is not put into its metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_serve_ignores_origin_headers_it_cannot_use() {
    let (store, _dir) = executor_tests::embedded_store();
    let config = HostConfig { allowed_hosts: None, ..HostConfig::default() };
    let host = executor_cli::serve::host(Arc::new(store), no_sources().await, &[], config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(executor_cli::serve::serve(listener, host, async move {
        let _ = stopped.await;
    }));
    let cases = [
        ("1", "a b", "http://localhost"),
        ("a b", "user@evil.example", "http://localhost"),
        ("javascript", "team-box:8787", "http://team-box:8787"),
        ("https,http", "team-box:8787", "https://team-box:8787"),
        (" HTTPS ", "bücher.example", "https://localhost"),
        ("ftp", "", "http://localhost"),
    ];
    for (proto, host, origin) in cases {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nhost: {host}\r\nx-forwarded-proto: {proto}\r\n\
             connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{proto:?} {host:?}: {answer}");
        let metadata: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(metadata["resource"], format!("{origin}/mcp"), "{proto:?} {host:?}");
    }
    stop.send(()).unwrap();
    done.await.unwrap().unwrap();
}
