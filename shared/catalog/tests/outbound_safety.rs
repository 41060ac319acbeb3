//! What a call may make the catalog send, checked against upstreams that
//! record every request exactly as it arrived: argument values cannot move a
//! request to another path, inject query parameters or headers; writes never
//! follow redirects; reads follow them only within the same origin.

mod support;

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Json, Response};
use executor_catalog::{Catalog, CatalogConfig};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, Tools};
use percent_encoding::percent_decode_str;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use support::recording::{Recording, Seen, start_recording, start_replying};

const SPEC: &str = r##"
openapi: 3.0.3
info: {title: files, version: "1"}
paths:
  /files/{name}/meta:
    parameters: [{name: name, in: path, required: true, schema: {type: string}}]
    get: {operationId: readMeta, tags: [files], responses: {"200": {description: ok}}}
    post:
      operationId: writeMeta
      tags: [files]
      requestBody: {content: {application/json: {schema: {type: object}}}}
      responses: {"200": {description: ok}}
  /search:
    get:
      operationId: search
      tags: [files]
      parameters:
        - {name: q, in: query, schema: {type: string}}
        - {name: X-Tag, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
  /things/{status}:
    parameters: [{name: status, in: path, required: true, schema: {type: integer}}]
    post: {operationId: create, tags: [things], requestBody: {content: {application/json: {schema: {}}}}, responses: {"201": {description: ok}}}
    put: {operationId: replace, tags: [things], requestBody: {content: {application/json: {schema: {}}}}, responses: {"200": {description: ok}}}
    patch: {operationId: update, tags: [things], requestBody: {content: {application/json: {schema: {}}}}, responses: {"200": {description: ok}}}
    delete: {operationId: remove, tags: [things], responses: {"204": {description: ok}}}
  /framed:
    get:
      operationId: framed
      tags: [files]
      parameters:
        - {name: Host, in: header, schema: {type: string}}
        - {name: Content-Length, in: header, schema: {type: string}}
        - {name: Transfer-Encoding, in: header, schema: {type: string}}
        - {name: X-Api-Key, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
  /old: {get: {operationId: old, tags: [moved], responses: {"200": {description: ok}}}}
  /loop: {get: {operationId: loop, tags: [moved], responses: {"200": {description: ok}}}}
  /away: {get: {operationId: away, tags: [moved], responses: {"200": {description: ok}}}}
"##;

/// `/api/things/<status>` answers that status (a redirect to `/api/landed`);
/// `/api/old` redirects to `/api/new`, `/api/loop` to itself, `/api/away` to
/// another origin (`localhost` for `127.0.0.1`); anything else says what it got.
fn upstream(seen: &Seen) -> Response {
    let moved = |status: u16, location: String| {
        (StatusCode::from_u16(status).unwrap(), [(LOCATION, location)], "moved").into_response()
    };
    if let Some(status) = seen.path.strip_prefix("/api/things/") {
        return moved(status.parse().unwrap(), "/api/landed?from=things".into());
    }
    match seen.path.as_str() {
        "/api/old" => moved(307, "/api/new".into()),
        "/api/loop" => moved(302, "/api/loop".into()),
        "/api/away" => {
            let port = seen.header("host").unwrap().rsplit(':').next().unwrap().to_owned();
            moved(307, format!("http://localhost:{port}/api/new"))
        }
        "/mcp-moved" => moved(307, "/mcp".into()),
        _ => Json(json!({"path": seen.path, "query": seen.query})).into_response(),
    }
}

struct Setup {
    recording: Recording,
    catalog: Catalog,
    _dir: tempfile::TempDir,
}

async fn setup(extra: &str) -> Setup {
    let recording = start_replying(upstream);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("files.yaml"), SPEC).unwrap();
    let config = format!(
        "[outbound]\nallow_loopback = true\ntimeout_ms = 10000\n\n\
         [[sources]]\nnamespace = \"files\"\nkind = \"openapi\"\nspec = \"files.yaml\"\nbase_url = \"{}/api\"\n{extra}",
        recording.base
    );
    let file = dir.path().join("executor.toml");
    std::fs::write(&file, config).unwrap();
    let catalog = Catalog::connect(&CatalogConfig::load(&file).unwrap()).await.unwrap();
    Setup { recording, catalog, _dir: dir }
}

fn ctx(step: u32) -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), step)
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_path_values_are_refused_before_anything_is_sent() {
    let s = setup("").await;
    let long_climb = "../".repeat(2000);
    let refused: Vec<Value> = [
        "",
        ".",
        "..",
        "../x",
        "x/../..",
        "../../admin",
        "a/b",
        "/",
        "a\\b",
        "\\",
        "%2e%2e",
        "%2E%2e/",
        "%2e",
        ".%2E",
        "%2f",
        "a%2Fb",
        "%5C",
        "%252e%252e",
        "%25%32%65%25%32%65",
        "%c0%ae%c0%ae",
        "\u{0}",
        "a\u{0}",
        "\r\n",
        "x\r\nGET /admin HTTP/1.1",
        "\t",
        "\u{7f}",
        "．．",
        "．",
        "‥",
        "a／b",
        "a＼b",
        "..;",
        "..;jsessionid=x",
        long_climb.as_str(),
    ]
    .into_iter()
    .map(Value::from)
    .chain([json!({"a": "/"}), json!(["../x"])])
    .collect();
    for (i, value) in refused.iter().enumerate() {
        for tool in ["files.files.readMeta", "files.files.writeMeta"] {
            let error = s.catalog.call(tool, json!({"name": value}), &ctx(i as u32)).await.unwrap_err();
            assert_eq!(error.code, "invalid_arguments", "{value:?}: {}", error.message);
            assert!(error.message.contains("argument `name` (path parameter)"), "{}", error.message);
        }
    }
    assert_eq!(s.recording.paths(), Vec::<String>::new(), "nothing was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn ordinary_path_values_arrive_intact_at_the_intended_path() {
    let s = setup("").await;
    let long = "a".repeat(10_000);
    let cases: Vec<(Value, &str)> = vec![
        (json!("a b"), "a%20b"),
        (json!(" "), "%20"),
        (json!("ü"), "%C3%BC"),
        (json!("日本語"), "%E6%97%A5%E6%9C%AC%E8%AA%9E"),
        (json!("e\u{301}"), "e%CC%81"),
        (json!("a.b"), "a.b"),
        (json!("..a"), "..a"),
        (json!("..."), "..."),
        (json!("%"), "%25"),
        (json!("100%"), "100%25"),
        (json!("%zz"), "%25zz"),
        (json!("a+b"), "a%2Bb"),
        (json!("~-_."), "~-_."),
        (json!("O'Brien"), "O%27Brien"),
        (json!("?x=1"), "%3Fx%3D1"),
        (json!("#frag"), "%23frag"),
        (json!("a;b"), "a%3Bb"),
        (json!("a&b=c"), "a%26b%3Dc"),
        (json!(42), "42"),
        (json!(true), "true"),
        (json!(long), long.as_str()),
    ];
    let mut step = 0;
    for (value, encoded) in &cases {
        for tool in ["files.files.readMeta", "files.files.writeMeta"] {
            step += 1;
            let before = s.recording.seen().len();
            let answer = s.catalog.call(tool, json!({"name": value}), &ctx(step)).await.unwrap();
            let seen = s.recording.seen();
            assert_eq!(seen.len(), before + 1, "{value}: one request");
            let expected = format!("/api/files/{encoded}/meta");
            assert_eq!(seen[before].path, expected, "{value}");
            assert_eq!(answer["path"], expected.as_str());
            let segment = seen[before].path.split('/').nth(3).unwrap().to_owned();
            let decoded = percent_decode_str(&segment).decode_utf8().unwrap();
            let original = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
            assert_eq!(decoded, original, "{value} arrives intact");
        }
    }
    // A value of a type the parameter does not declare is refused, not sent as its JSON text.
    let sent = s.recording.seen().len();
    let array = s.catalog.call("files.files.readMeta", json!({"name": ["..", "x"]}), &ctx(step + 1)).await;
    let array = array.unwrap_err();
    assert!(array.message.contains("argument `name` (path parameter) must be a string"), "{}", array.message);
    assert_eq!(s.recording.seen().len(), sent, "nothing was sent");
    // Every request went to the operation's path and nowhere else.
    for path in s.recording.paths() {
        let segments: Vec<&str> = path.split('/').collect();
        assert_eq!((segments.len(), segments[1], segments[2], segments[4]), (5, "api", "files", "meta"), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn query_and_header_values_cannot_inject() {
    let s = setup("").await;
    let queries = ["a&b=c", "x#y", "x y+z", "%", "%26", "\r\n", "ü", "=", "&", "?q=2", "a\u{0}b"];
    for (i, q) in queries.iter().enumerate() {
        let before = s.recording.seen().len();
        s.catalog.call("files.files.search", json!({"q": q}), &ctx(i as u32)).await.unwrap();
        let seen = &s.recording.seen()[before];
        assert_eq!(seen.path, "/api/search");
        let query = seen.query.as_deref().unwrap();
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
        assert_eq!(pairs, [("q".to_owned(), q.to_string())], "{q:?} arrives as one parameter: {query}");
    }

    let refused = ["a\r\nX-Injected: 1", "\n", "\r", "a\u{0}", "ü", "\u{7f}", "a\u{1b}b"];
    let before = s.recording.seen().len();
    for (i, tag) in refused.iter().enumerate() {
        let error =
            s.catalog.call("files.files.search", json!({"X-Tag": tag}), &ctx(100 + i as u32)).await.unwrap_err();
        assert_eq!(error.code, "invalid_arguments", "{tag:?}");
        assert!(error.message.contains("`X-Tag` (header parameter)"), "{}", error.message);
    }
    assert_eq!(s.recording.seen().len(), before, "nothing was sent");

    let kept = ["a b", "x\ty", "!#$%&'*+-.^_`|~", "\"quoted\"", "v=1; w=2"];
    for (i, tag) in kept.iter().enumerate() {
        let before = s.recording.seen().len();
        s.catalog.call("files.files.search", json!({"X-Tag": tag}), &ctx(200 + i as u32)).await.unwrap();
        let seen = &s.recording.seen()[before];
        assert_eq!(seen.header("x-tag").as_deref(), Some(*tag));
        assert_eq!(seen.header("x-injected"), None);
    }
}

/// A document may declare headers that frame or route the request, or carry
/// the source's own credential: a call can set none of them.
#[tokio::test(flavor = "multi_thread")]
async fn headers_the_gateway_owns_cannot_be_set_by_a_call() {
    support::set_secrets();
    let s = setup(&format!(
        "auth = {{ type = \"api_key\", name = \"X-Api-Key\", in = \"header\", value = \"env:{}\" }}",
        support::TOKEN_VAR
    ))
    .await;
    for header in ["Host", "Content-Length", "Transfer-Encoding"] {
        let error = s.catalog.call("files.files.framed", json!({header: "1"}), &ctx(1)).await.unwrap_err();
        assert_eq!(error.code, "invalid_arguments", "{header}: {}", error.message);
    }
    // The credential's header is declared too: the caller's value never goes out beside the source's.
    let before = s.recording.seen().len();
    s.catalog.call("files.files.framed", json!({"X-Api-Key": "the caller's"}), &ctx(2)).await.unwrap();
    let seen = &s.recording.seen()[before];
    let keys: Vec<String> = seen
        .headers
        .iter()
        .filter(|(name, _)| name == "x-api-key")
        .map(|(_, value)| String::from_utf8_lossy(value).into_owned())
        .collect();
    assert_eq!(keys, [support::TOKEN], "only the source's credential");
    assert_ne!(seen.header("host").as_deref(), Some("1"));
}

/// Echoes its arguments.
#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(json!({"type": "object"}).as_object().unwrap().clone());
        Ok(ListToolsResult::with_all_items(vec![Tool::new("echo", "Echoes its arguments", schema)]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        Ok(CallToolResult::success(vec![ContentBlock::text(args.to_string())]).into())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_arguments_travel_only_as_json() {
    let service = StreamableHttpService::new(
        || Ok(Echo),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let mcp = start_recording(Router::new().nest_service("/mcp", service));
    let s = setup(&format!("\n[[sources]]\nnamespace = \"echo\"\nkind = \"mcp\"\nurl = \"{}/mcp\"\n", mcp.base)).await;
    let args = json!({
        "path": "../../admin", "encoded": "%2e%2e/%2f", "crlf": "a\r\nX-Injected: 1",
        "query": "?x=1&y=2#f", "nul": "a\u{0}b", "dots": "．．",
    });
    let echoed = s.catalog.call("echo.echo", args.clone(), &ctx(0)).await.unwrap();
    assert_eq!(echoed, args, "arrived intact");
    let seen = mcp.seen();
    let call = seen.iter().find(|r| r.body.windows(10).any(|w| w == b"tools/call")).expect("the call was sent");
    let body: Value = serde_json::from_slice(&call.body).unwrap();
    assert_eq!(body["params"]["arguments"], args);
    for request in &seen {
        assert_eq!((request.method.as_str(), request.path.as_str(), &request.query), ("POST", "/mcp", &None));
        assert_eq!(request.header("x-injected"), None);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_never_follow_redirects() {
    let s = setup("").await;
    let mut step = 0;
    for status in [301, 302, 303, 307, 308] {
        for (tool, method) in [("create", "POST"), ("replace", "PUT"), ("update", "PATCH"), ("remove", "DELETE")] {
            step += 1;
            let before = s.recording.seen().len();
            let mut args = json!({"status": status});
            if method != "DELETE" {
                args["body"] = json!({"n": step});
            }
            let error = s.catalog.call(&format!("files.things.{tool}"), args, &ctx(step)).await.unwrap_err();
            assert_eq!(error.code, format!("http_{status}"), "{method} {status}");
            assert!(error.message.contains("not re-sent"), "{}", error.message);
            assert!(error.message.contains("Location: /api/landed?from=things"), "{}", error.message);
            let seen = s.recording.seen();
            assert_eq!(seen.len(), before + 1, "{method} answered {status}: exactly one request");
            assert_eq!(
                (seen[before].method.as_str(), seen[before].path.as_str()),
                (method, &*format!("/api/things/{status}"))
            );
            assert_eq!(seen[before].header("idempotency-key"), Some(format!("exec-1:{step}")));
        }
    }
    assert!(!s.recording.paths().iter().any(|p| p.starts_with("/api/landed")), "no write reached the target");
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_follow_same_origin_redirects_within_the_limit() {
    let s = setup("").await;
    let landed = s.catalog.call("files.moved.old", json!({}), &ctx(0)).await.unwrap();
    assert_eq!(landed["path"], "/api/new");
    assert_eq!(s.recording.paths(), ["/api/old", "/api/new"]);

    let looped = s.catalog.call("files.moved.loop", json!({}), &ctx(1)).await.unwrap_err();
    assert_eq!(looped.code, "http_302");
    assert!(looped.message.contains("more than 5, are not followed; Location: /api/loop"), "{}", looped.message);
    assert_eq!(s.recording.paths()[2..], ["/api/loop"; 6], "the first request and 5 redirects");

    let away = s.catalog.call("files.moved.away", json!({}), &ctx(2)).await.unwrap_err();
    assert_eq!(away.code, "http_307");
    assert!(away.message.contains("redirects to another origin"), "{}", away.message);
    assert_eq!(s.recording.paths()[8..], ["/api/away"], "another origin is not followed");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_upstream_that_redirects_is_not_followed() {
    let moved = start_replying(upstream);
    let s =
        setup(&format!("\n[[sources]]\nnamespace = \"moved\"\nkind = \"mcp\"\nurl = \"{}/mcp-moved\"\n", moved.base))
            .await;
    let error = s.catalog.namespaces()[1].error.clone().unwrap();
    assert!(error.contains("HTTP 307: a redirect, not followed (Location: /mcp)"), "{error}");
    assert_eq!(moved.paths(), ["/mcp-moved"], "one request, not re-sent");
}
