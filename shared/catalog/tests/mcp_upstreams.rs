//! The catalog's MCP client against rmcp servers in both transport shapes:
//! sessions with SSE answers (rmcp's default), and stateless JSON answers.
//! Each lists its tools over two pages; the session server also asks the
//! client something back in the middle of a call (a stateless server has no
//! stream to ask on).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
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
}

async fn start(config: StreamableHttpServerConfig) -> Upstream {
    let handler = Paged::default();
    let sessions = Arc::new(LocalSessionManager::default());
    let made = handler.clone();
    let service = StreamableHttpService::new(move || Ok(made.clone()), sessions.clone(), config);
    let base = support::serve(Router::new().nest_service("/mcp", service)).await;
    Upstream { url: format!("{base}/mcp"), handler, sessions }
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
    CallContext { execution_id: ExecutionId::parse("exec-1").unwrap(), step }
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

    // The upstream restarts and forgets its sessions: the client starts a new one.
    upstream.sessions.sessions.write().await.clear();
    let echoed = catalog.call("paged.echo", json!({"n": 2}), &ctx(2)).await.unwrap();
    assert_eq!(echoed, json!({"echo": {"n": 2}}));
    assert_eq!(upstream.handler.initializes.load(Ordering::SeqCst), 2, "one new handshake");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_upstream_answering_in_json() {
    let config = StreamableHttpServerConfig::default().with_legacy_session_mode(false).with_json_response(true);
    let upstream = start(config).await;
    lists_pages_and_calls(&upstream, false).await;
}
