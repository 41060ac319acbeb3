//! Real upstreams on loopback: an HTTP service described by an OpenAPI
//! document (axum) and an MCP server over Streamable HTTP (rmcp). Both count
//! their side effects and record the credentials they receive. `recording`
//! has upstreams that write down every request exactly as it arrived.

#![allow(dead_code)] // each test binary uses part of the support

pub mod authcode;
pub mod graphql;
pub mod mcp_oauth;
pub mod oauth;
pub mod recording;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use executor_catalog::{Catalog, CatalogConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListResourcesResult, ListToolsResult,
    MetaObject, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

pub const TOKEN: &str = "tok-7f3a9c2e-secret";
pub const MCP_KEY: &str = "mcp-key-51b0d8-secret";
pub const TOKEN_VAR: &str = "EXECUTOR_CATALOG_TEST_TOKEN";
pub const MCP_KEY_VAR: &str = "EXECUTOR_CATALOG_TEST_MCP_KEY";

/// The variables are set once; every test calls this before it resolves a
/// name or connects a catalog, and nothing else in these tests writes the
/// environment.
pub fn set_secrets() {
    static ONCE: Once = Once::new();
    // SAFETY: set once, under `Once`, before any test of the binary reads the
    // environment (directly or through libc's resolver), with names only these tests use.
    ONCE.call_once(|| unsafe {
        std::env::set_var(TOKEN_VAR, TOKEN);
        std::env::set_var(MCP_KEY_VAR, MCP_KEY);
    });
}

/// What an upstream saw.
#[derive(Default)]
pub struct Recorded {
    pub gets: AtomicUsize,
    pub posts: AtomicUsize,
    pub deletes: AtomicUsize,
    pub calls: AtomicUsize,
    /// `tools/list` requests answered (MCP).
    pub lists: AtomicUsize,
    pub authorization: Mutex<Vec<String>>,
    /// The `Authorization` header of each `tools/call` (MCP), `none` without one.
    pub bearers: Mutex<Vec<String>>,
    /// The `Authorization` header of each `resources/read` (MCP Apps), `none` without one.
    pub ui_reads: Mutex<Vec<String>>,
    pub queries: Mutex<Vec<String>>,
    pub header_params: Mutex<Vec<String>>,
    pub idempotency_keys: Mutex<Vec<String>>,
    pub bodies: Mutex<Vec<Value>>,
    pub traceparents: Mutex<Vec<String>>,
}

impl Recorded {
    pub fn count(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }

    fn saw(&self, headers: &HeaderMap) {
        if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
            self.authorization.lock().unwrap().push(auth.to_owned());
        }
        if let Some(tag) = headers.get("x-request-tag").and_then(|v| v.to_str().ok()) {
            self.header_params.lock().unwrap().push(tag.to_owned());
        }
        if let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) {
            self.idempotency_keys.lock().unwrap().push(key.to_owned());
        }
        if let Some(traceparent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
            self.traceparents.lock().unwrap().push(traceparent.to_owned());
        }
    }
}

pub const SHOP_SPEC: &str = r##"
openapi: 3.1.0
info: {title: shop, version: "1"}
paths:
  /items:
    get:
      tags: [items]
      operationId: listItems
      summary: List items in the shop
      parameters:
        - {name: q, in: query, description: Text to look for, schema: {type: string}}
        - {name: tag, in: query, schema: {type: array, items: {type: string}}}
        - {name: X-Request-Tag, in: header, schema: {type: string}}
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: array, items: {$ref: "#/components/schemas/Item"}}}}}
    post:
      tags: [items]
      operationId: createItem
      summary: Create an item
      requestBody: {required: true, content: {application/json: {schema: {$ref: "#/components/schemas/NewItem"}}}}
      responses:
        "201": {description: created, content: {application/json: {schema: {$ref: "#/components/schemas/Item"}}}}
  /items/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
    get:
      tags: [items]
      operationId: getItem
      summary: Get one item
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Item"}}}}
    delete:
      tags: [items]
      operationId: deleteItem
      summary: Delete an item
      responses: {"204": {description: gone}}
  /echo-auth:
    get: {tags: [debug], operationId: echoAuth, summary: Fails and echoes the credentials it got, responses: {"401": {description: no}}}
  /big:
    get: {tags: [debug], operationId: big, summary: A body over the size limit, responses: {"200": {description: ok}}}
  /elsewhere:
    get: {tags: [debug], operationId: elsewhere, summary: Redirects to another host, responses: {"302": {description: moved}}}
components:
  schemas:
    Item:
      type: object
      required: [id, name]
      properties:
        id: {type: integer}
        name: {type: string}
        status: {enum: [new, sold]}
        parent: {$ref: "#/components/schemas/Item"}
        tags: {type: [array, "null"], items: {type: string}}
    NewItem: {type: object, required: [name], properties: {name: {type: string}}}
"##;

pub struct Shop {
    pub base_url: String,
    pub recorded: Arc<Recorded>,
}

#[derive(Clone)]
struct ShopState {
    recorded: Arc<Recorded>,
    elsewhere: String,
}

/// The shop service under `/api`; `/elsewhere` redirects to `elsewhere`.
pub async fn start_shop(elsewhere: &str) -> Shop {
    let recorded = Arc::new(Recorded::default());
    let state = ShopState { recorded: recorded.clone(), elsewhere: elsewhere.to_owned() };
    let api = Router::new()
        .route("/items", get(list_items).post(create_item))
        .route("/items/{id}", get(get_item).delete(delete_item))
        .route("/echo-auth", get(echo_auth))
        .route("/big", get(|| async { "x".repeat(64 * 1024) }))
        .route("/elsewhere", get(|State(s): State<ShopState>| async move { Redirect::temporary(&s.elsewhere) }))
        .route("/openapi.yaml", get(spec_behind_auth))
        .with_state(state);
    let base = serve(Router::new().nest("/api", api)).await;
    Shop { base_url: format!("{base}/api"), recorded }
}

pub async fn serve(router: Router) -> String {
    serve_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(), router)
}

/// Serve `router` on `listener`; its base URL.
pub fn serve_on(listener: tokio::net::TcpListener, router: Router) -> String {
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

async fn list_items(
    State(s): State<ShopState>,
    headers: HeaderMap,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Json<Value> {
    s.recorded.gets.fetch_add(1, Ordering::SeqCst);
    s.recorded.saw(&headers);
    s.recorded.queries.lock().unwrap().push(query.unwrap_or_default());
    Json(json!([{"id": 1, "name": "lamp", "status": "new"}, {"id": 2, "name": "desk", "status": "sold"}]))
}

async fn create_item(State(s): State<ShopState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    s.recorded.posts.fetch_add(1, Ordering::SeqCst);
    s.recorded.saw(&headers);
    s.recorded.bodies.lock().unwrap().push(body.clone());
    (StatusCode::CREATED, Json(json!({"id": 3, "name": body["name"]}))).into_response()
}

async fn get_item(State(s): State<ShopState>, headers: HeaderMap, Path(id): Path<u32>) -> Response {
    s.recorded.gets.fetch_add(1, Ordering::SeqCst);
    s.recorded.saw(&headers);
    match id {
        1 => Json(json!({"id": 1, "name": "lamp"})).into_response(),
        _ => (StatusCode::NOT_FOUND, format!("no item {id}")).into_response(),
    }
}

async fn delete_item(State(s): State<ShopState>, headers: HeaderMap, Path(_id): Path<u32>) -> StatusCode {
    s.recorded.deletes.fetch_add(1, Ordering::SeqCst);
    s.recorded.saw(&headers);
    StatusCode::NO_CONTENT
}

/// A careless upstream that puts the caller's credentials in its error.
async fn echo_auth(headers: HeaderMap, Query(_q): Query<Value>) -> Response {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("none");
    (StatusCode::UNAUTHORIZED, format!("bad credentials: {auth}")).into_response()
}

async fn spec_behind_auth(headers: HeaderMap) -> Response {
    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        Some(auth) if auth == format!("Bearer {TOKEN}") => SHOP_SPEC.into_response(),
        _ => (StatusCode::UNAUTHORIZED, "token required").into_response(),
    }
}

/// An MCP server: `search_docs` (read-only), `delete_doc` (destructive, not read-only),
/// `leaky` (an error that echoes the caller's key); and one MCP Apps view,
/// [`DOCS_VIEW`], listed among its resources (no tool links it).
#[derive(Clone)]
pub struct Docs {
    recorded: Arc<Recorded>,
}

/// The docs server's UI resource (MCP Apps).
pub const DOCS_VIEW: &str = "ui://docs/viewer.html";

fn docs_view_meta() -> MetaObject {
    MetaObject(json!({"ui": {"prefersBorder": false}}).as_object().unwrap().clone())
}

impl ServerHandler for Docs {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let view = Resource::new(DOCS_VIEW, "docs_viewer")
            .with_mime_type("text/html;profile=mcp-app")
            .with_meta(docs_view_meta());
        let plain = Resource::new("file:///docs/index.txt", "index").with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![view, plain]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let headers = context.extensions.get::<axum::http::request::Parts>().map(|p| p.headers.clone());
        let bearer = headers.as_ref().and_then(|h| h.get("authorization")).and_then(|v| v.to_str().ok());
        self.recorded.ui_reads.lock().unwrap().push(bearer.unwrap_or("none").to_owned());
        if request.uri != DOCS_VIEW {
            return Err(ErrorData::resource_not_found(format!("no resource {}", request.uri), None));
        }
        let html = ResourceContents::text("<!DOCTYPE html><html><body>docs viewer</body></html>", DOCS_VIEW)
            .with_mime_type("text/html;profile=mcp-app")
            .with_meta(docs_view_meta());
        Ok(ReadResourceResult::new(vec![html]).into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.recorded.lists.fetch_add(1, Ordering::SeqCst);
        let schema = |value: Value| match value {
            Value::Object(map) => Arc::new(map),
            _ => unreachable!(),
        };
        let query =
            schema(json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}));
        let id = schema(json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}));
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("search_docs", "Search the documentation pages", query)
                .annotate(ToolAnnotations::new().read_only(true)),
            Tool::new("delete_doc", "Delete a documentation page", id.clone())
                .annotate(ToolAnnotations::new().destructive(true)),
            Tool::new("leaky", "Fails with the caller's credentials in the message", id),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.recorded.calls.fetch_add(1, Ordering::SeqCst);
        let headers = context.extensions.get::<axum::http::request::Parts>().map(|p| p.headers.clone());
        let key = headers
            .as_ref()
            .and_then(|h| h.get("x-api-key"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        self.recorded.authorization.lock().unwrap().push(key.clone());
        let bearer = headers.as_ref().and_then(|h| h.get("authorization")).and_then(|v| v.to_str().ok());
        self.recorded.bearers.lock().unwrap().push(bearer.unwrap_or("none").to_owned());
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match request.name.as_ref() {
            "search_docs" => CallToolResult::success(vec![ContentBlock::text(
                json!({"hits": [{"title": "Getting started", "query": args["query"]}]}).to_string(),
            )]),
            "delete_doc" => {
                self.recorded.deletes.fetch_add(1, Ordering::SeqCst);
                CallToolResult::success(vec![ContentBlock::text("deleted")])
            }
            _ => CallToolResult::error(vec![ContentBlock::text(format!("denied for key {key}"))]),
        };
        Ok(result.into())
    }
}

pub struct DocsServer {
    pub url: String,
    pub recorded: Arc<Recorded>,
}

pub async fn start_docs() -> DocsServer {
    start_docs_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()).await
}

/// The docs server on `listener` (an address a source was configured with before it listened).
pub async fn start_docs_on(listener: tokio::net::TcpListener) -> DocsServer {
    let recorded = Arc::new(Recorded::default());
    let handler = Docs { recorded: recorded.clone() };
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let base = serve_on(listener, Router::new().nest_service("/mcp", service));
    DocsServer { url: format!("{base}/mcp"), recorded }
}

/// Both upstreams and a catalog over them (loopback allowed, as tests need).
pub struct World {
    pub shop: Shop,
    pub docs: DocsServer,
    pub catalog: Arc<Catalog>,
    pub dir: tempfile::TempDir,
}

pub async fn world(extra_policy: &str) -> World {
    set_secrets();
    let elsewhere = serve(Router::new().route("/", get(|| async { "elsewhere" }))).await;
    let shop = start_shop(&format!("{}/", elsewhere.replace("127.0.0.1", "localhost"))).await;
    let docs = start_docs().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shop.yaml"), SHOP_SPEC).unwrap();
    let config = format!(
        r#"
        [outbound]
        allow_loopback = true
        timeout_ms = 5000
        max_response_bytes = 16384
        {shop}
        {docs}
        "#,
        shop = shop_source(&shop.base_url, extra_policy),
        docs = docs_source(&docs.url),
    );
    let catalog = connect(dir.path(), &config).await;
    World { shop, docs, catalog, dir }
}

/// The shop's `[[sources]]` table: `shop.yaml` at `base_url` with the
/// shop's bearer token, and `extra` lines of the table (a policy).
pub fn shop_source(base_url: &str, extra: &str) -> String {
    format!(
        r#"
        [[sources]]
        namespace = "shop"
        kind = "openapi"
        spec = "shop.yaml"
        base_url = "{base_url}"
        auth = {{ type = "bearer", token = "env:{TOKEN_VAR}" }}
        {extra}
        "#
    )
}

/// The docs server's `[[sources]]` table (MCP at `url`, with its API key).
pub fn docs_source(url: &str) -> String {
    format!(
        r#"
        [[sources]]
        namespace = "docs"
        kind = "mcp"
        url = "{url}"
        auth = {{ type = "api_key", name = "X-Api-Key", in = "header", value = "env:{MCP_KEY_VAR}" }}
        "#
    )
}

/// The catalog of `config`, written to `dir` as `executor.toml` (so its
/// relative paths are `dir`'s).
pub async fn connect(dir: &std::path::Path, config: &str) -> Arc<Catalog> {
    let file = dir.join("executor.toml");
    std::fs::write(&file, config).unwrap();
    Arc::new(Catalog::connect(&CatalogConfig::load(&file).unwrap()).await.unwrap())
}

/// Run `node tests/browser/approve.mjs <url> <screenshot> <button>` with
/// Debian's Chromium: what the script printed, and where the screenshot is.
pub async fn click_in_chromium(url: String, screenshot: &str, button: &str) -> (Value, std::path::PathBuf) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let browser = root.join("tests/browser");
    assert!(
        browser.join("node_modules/playwright-core").exists(),
        "playwright-core is missing: run ./scripts/test, which installs it (npm ci in tests/browser)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "Chromium is missing at {chromium}: run ./scripts/test, which installs Debian's chromium package"
    );
    let shot = root.join("target/browser").join(screenshot);
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&shot);
    let (script, button, path) = (browser.join("approve.mjs"), button.to_owned(), shot.clone());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node").arg(script).arg(url).arg(shot).arg(button).output()
    })
    .await
    .unwrap()
    .expect("node runs (Node.js is needed for the browser test)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    (serde_json::from_str(stdout.trim()).unwrap(), path)
}

/// An MCP client of a host under test.
pub type McpClient = rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::InitializeRequestParams>;

/// An MCP client (rmcp over Streamable HTTP) of the owner of `token`, at
/// `base`'s `/mcp`, in elicitation `mode` (`browser`, `model`).
pub async fn mcp_client(base: &str, token: &str, mode: &str) -> McpClient {
    use rmcp::ServiceExt;
    use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let url = format!("{base}/mcp?elicitation_mode={mode}");
    let transport = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_owned());
    let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("agent", "1"))
        .with_protocol_version(ProtocolVersion::V_2025_06_18);
    info.serve(StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), transport))
        .await
        .unwrap()
}

/// Call the tool `name` with `args`: its structured result.
pub async fn call_tool(client: &McpClient, name: &'static str, args: serde_json::Value) -> serde_json::Value {
    let params = CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone());
    client.call_tool(params).await.unwrap().structured_content.unwrap()
}
