//! The catalog's MCP client against rmcp servers in both transport shapes:
//! sessions with SSE answers (rmcp's default), and stateless JSON answers.
//! Each lists its tools over two pages; the session server also asks the
//! client something back in the middle of a call (a stateless server has no
//! stream to ask on). The upstreams record every request, so the tests count
//! what was sent: a call is never sent twice.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, Tools};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, ServerRequest, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use support::recording::{Recording, Seen, start_recording, start_replying};

/// Tools `echo`, `ask_back` on the first page, `zeta` on the second.
#[derive(Clone, Default)]
struct Paged {
    initializes: Arc<AtomicUsize>,
}

impl ServerHandler for Paged {
    fn get_info(&self) -> ServerConfig {
        self.initializes.fetch_add(1, Ordering::SeqCst);
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(json!({"type": "object"}).as_object().unwrap().clone());
        let tool = |name: &'static str| Tool::new(name, format!("The {name} tool"), schema.clone());
        Ok(match request.and_then(|r| r.cursor) {
            None => {
                let mut page = ListToolsResult::with_all_items(vec![tool("echo"), tool("ask_back")]);
                page.next_cursor = Some("page-2".into());
                page
            }
            Some(cursor) if cursor == "page-2" => ListToolsResult::with_all_items(vec![tool("zeta")]),
            Some(other) => return Err(ErrorData::invalid_params(format!("no page {other}"), None)),
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let text = match request.name.as_ref() {
            "ask_back" => {
                let ping = context.peer.send_request(ServerRequest::PingRequest(Default::default())).await;
                #[allow(deprecated)] // roots are still part of 2025-11-25, which these clients speak
                let roots = context.peer.list_roots().await;
                match (ping, roots) {
                    (Ok(_), Err(e)) => format!("ping answered; roots refused: {e}"),
                    (ping, roots) => format!("unexpected: ping {ping:?}, roots {roots:?}"),
                }
            }
            _ => json!({"echo": args}).to_string(),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

struct Upstream {
    url: String,
    handler: Paged,
    sessions: Arc<LocalSessionManager>,
    recording: Recording,
}

async fn start(config: StreamableHttpServerConfig) -> Upstream {
    let handler = Paged::default();
    let sessions = Arc::new(LocalSessionManager::default());
    let made = handler.clone();
    let service = StreamableHttpService::new(move || Ok(made.clone()), sessions.clone(), config);
    let recording = start_recording(Router::new().nest_service("/mcp", service));
    Upstream { url: format!("{}/mcp", recording.base), handler, sessions, recording }
}

/// The JSON-RPC method a recorded request carried.
fn method(seen: &Seen) -> Option<String> {
    let message: Value = serde_json::from_slice(&seen.body).ok()?;
    message.get("method")?.as_str().map(str::to_owned)
}

/// How many requests with `name` as their method the upstream received.
fn sent(recording: &Recording, name: &str) -> usize {
    recording.seen().iter().filter(|s| method(s).as_deref() == Some(name)).count()
}

async fn catalog(url: &str) -> Catalog {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("executor.toml");
    let config = format!(
        "[outbound]\nallow_loopback = true\ntimeout_ms = 5000\n\n\
         [[sources]]\nnamespace = \"paged\"\nkind = \"mcp\"\nurl = \"{url}\"\n"
    );
    std::fs::write(&file, config).unwrap();
    Catalog::connect(&CatalogConfig::load(&file).unwrap()).await.unwrap()
}

fn ctx(step: u32) -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), step)
}

async fn listed(catalog: &Catalog) -> Vec<String> {
    let found = catalog.search(json!({"query": "", "namespace": "paged"})).await.unwrap();
    found["items"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap().to_owned()).collect()
}

/// `ask_back` only where the server has a stream to ask on (not stateless JSON).
async fn lists_pages_and_calls(upstream: &Upstream, ask_back: bool) -> Catalog {
    let catalog = catalog(&upstream.url).await;
    assert_eq!(listed(&catalog).await, ["paged.ask_back", "paged.echo", "paged.zeta"], "both pages");
    let echoed = catalog.call("paged.echo", json!({"n": 1}), &ctx(0)).await.unwrap();
    assert_eq!(echoed, json!({"echo": {"n": 1}}));
    if ask_back {
        let asked = catalog.call("paged.ask_back", json!({}), &ctx(1)).await.unwrap();
        let asked = asked.as_str().unwrap();
        assert!(asked.starts_with("ping answered; roots refused"), "a client without roots says so: {asked}");
    }
    catalog
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_upstream_answering_in_sse() {
    let upstream = start(StreamableHttpServerConfig::default()).await;
    let catalog = lists_pages_and_calls(&upstream, true).await;
    assert_eq!(upstream.handler.initializes.load(Ordering::SeqCst), 1);

    // The upstream restarts and forgets its sessions. The call that meets the
    // lost session may have run for all the client knows: it fails, sent once.
    upstream.sessions.sessions.write().await.clear();
    let calls = sent(&upstream.recording, "tools/call");
    let lost = catalog.call("paged.echo", json!({"n": 2}), &ctx(2)).await.unwrap_err();
    assert_eq!(lost.code, "upstream_error");
    assert!(lost.message.contains("was not retried"), "{}", lost.message);
    assert_eq!(sent(&upstream.recording, "tools/call"), calls + 1, "exactly one tools/call for the failed call");
    assert_eq!(upstream.handler.initializes.load(Ordering::SeqCst), 1, "no handshake yet");

    // The next call starts a new session first.
    let echoed = catalog.call("paged.echo", json!({"n": 3}), &ctx(3)).await.unwrap();
    assert_eq!(echoed, json!({"echo": {"n": 3}}));
    assert_eq!(upstream.handler.initializes.load(Ordering::SeqCst), 2, "one new handshake");
    assert_eq!(sent(&upstream.recording, "tools/call"), calls + 2);
}

/// A scripted upstream that loses sessions: each `initialize` opens session
/// `s<n>`; `tools/list` in `s1` and every `tools/call` get 404, as from a
/// server that no longer knows the session.
fn forgetful() -> impl Fn(&Seen) -> Response + Clone + Send + Sync + 'static {
    let sessions = Arc::new(AtomicUsize::new(0));
    move |seen: &Seen| {
        let message: Value = serde_json::from_slice(&seen.body).unwrap();
        let id = message["id"].clone();
        let session = seen.header("mcp-session-id");
        match message["method"].as_str().unwrap() {
            "initialize" => {
                let session = format!("s{}", sessions.fetch_add(1, Ordering::SeqCst) + 1);
                let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "forgetful", "version": "1"}});
                ([("mcp-session-id", session)], Json(json!({"jsonrpc": "2.0", "id": id, "result": result})))
                    .into_response()
            }
            "notifications/initialized" => StatusCode::ACCEPTED.into_response(),
            "tools/list" if session.as_deref() != Some("s1") => {
                let tools = json!({"tools": [{"name": "once", "inputSchema": {"type": "object"}}]});
                Json(json!({"jsonrpc": "2.0", "id": id, "result": tools})).into_response()
            }
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_session_repeats_a_read_but_never_a_call() {
    let upstream = start_replying(forgetful());
    let catalog = catalog(&format!("{}/mcp", upstream.base)).await;
    // tools/list met the lost session s1: a read, so it was sent again in s2.
    assert_eq!(listed(&catalog).await, ["paged.once"]);
    assert_eq!((sent(&upstream, "initialize"), sent(&upstream, "tools/list")), (2, 2));

    // tools/call met a lost session: sent once, and the new session waits for the next request.
    let lost = catalog.call("paged.once", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(lost.code, "upstream_error");
    assert!(lost.message.contains("during tools/call (HTTP 404): the request was not retried"), "{}", lost.message);
    assert_eq!((sent(&upstream, "initialize"), sent(&upstream, "tools/call")), (2, 1));

    let again = catalog.call("paged.once", json!({}), &ctx(1)).await.unwrap_err();
    assert!(again.message.contains("not retried"), "{}", again.message);
    assert_eq!((sent(&upstream, "initialize"), sent(&upstream, "tools/call")), (3, 2), "a new session, one more send");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_upstream_answering_in_json() {
    let config = StreamableHttpServerConfig::default().with_legacy_session_mode(false).with_json_response(true);
    let upstream = start(config).await;
    lists_pages_and_calls(&upstream, false).await;
}
