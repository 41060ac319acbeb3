//! No secret leaves in any text: for every kind of source secret and every
//! way a call or a connection can fail (refused connection, connection
//! dropped mid-response, an upstream echoing the request's URL and headers
//! in an error, a failed spec download, a failing MCP upstream), every tool
//! result, every error message, every unavailable source's reason and every
//! log line and span field captured from the catalog's thread is searched
//! for the secrets in every encoding they may take. The secrets hold
//! `/ + = & space % ü`, so each encoding differs from the raw value.
//!
//! Stored items too: an execution that makes those calls and then pauses is
//! stored (its journal holds every call's outcome), and the store's file is
//! searched the same way.
//!
//! The upstreams run on a runtime of their own: they see the secrets (they
//! must), and their logs are not the catalog's.

#[path = "support/capture.rs"]
mod capture;
mod support;

use capture::Capture;
use std::collections::BTreeMap;
use std::sync::{Arc, Once};

use axum::Router;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Json, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use executor_catalog::{Catalog, CatalogConfig, REDACTED};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, Tools};
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use support::recording::{Recording, Seen, refused_base, start_recording, start_replying, start_truncating};
use tracing_subscriber::layer::SubscriberExt;

const BEARER: &str = "bearer/+= &%ü~T0k";
const BASIC_USER: &str = "ops";
const BASIC_PASSWORD: &str = "basic/+= &%ü~Pw";
const HEADER_KEY: &str = "header/+= &%ü~K3y";
const QUERY_KEY: &str = "query/+= &%ü~K3y";
const COOKIE_KEY: &str = "cookie/+= &%ü~K3y";
/// Written into configured URLs: a spec URL's or MCP URL's userinfo and query.
const URL_USER: &str = "spec-user";
const URL_PASSWORD: &str = "userinfo/+= &%ü~Pw";
const URL_KEY: &str = "urlkey/+= &%ü~K3y";

const VARS: [(&str, &str); 5] = [
    ("EXECUTOR_REDACTION_BEARER", BEARER),
    ("EXECUTOR_REDACTION_BASIC", BASIC_PASSWORD),
    ("EXECUTOR_REDACTION_HEADER", HEADER_KEY),
    ("EXECUTOR_REDACTION_QUERY", QUERY_KEY),
    ("EXECUTOR_REDACTION_COOKIE", COOKIE_KEY),
];

fn set_secrets() {
    static ONCE: Once = Once::new();
    // SAFETY: set once, under `Once`, before the catalog reads the
    // environment, with names only this test binary uses.
    ONCE.call_once(|| unsafe {
        for (name, value) in VARS {
            std::env::set_var(name, value);
        }
    });
}

/// Each kind of source auth, as config.
fn auth(kind: &str) -> String {
    match kind {
        "bearer" => r#"{ type = "bearer", token = "env:EXECUTOR_REDACTION_BEARER" }"#.into(),
        "basic" => {
            format!(r#"{{ type = "basic", username = "{BASIC_USER}", password = "env:EXECUTOR_REDACTION_BASIC" }}"#)
        }
        "header" => {
            r#"{ type = "api_key", name = "X-Api-Key", in = "header", value = "env:EXECUTOR_REDACTION_HEADER" }"#.into()
        }
        "query" => {
            r#"{ type = "api_key", name = "api_key", in = "query", value = "env:EXECUTOR_REDACTION_QUERY" }"#.into()
        }
        "cookie" => {
            r#"{ type = "api_key", name = "session", in = "cookie", value = "env:EXECUTOR_REDACTION_COOKIE" }"#.into()
        }
        _ => unreachable!(),
    }
}

const AUTH_KINDS: [&str; 5] = ["bearer", "basic", "header", "query", "cookie"];

const SPEC: &str = r##"
openapi: 3.0.3
info: {title: echo, version: "1"}
paths:
  /ok: {get: {operationId: ok, tags: [t], responses: {"200": {description: ok}}}}
  /fail: {get: {operationId: fail, tags: [t], responses: {"200": {description: ok}}}}
  /html: {get: {operationId: html, tags: [t], responses: {"200": {description: ok}}}}
  /moved: {post: {operationId: moved, tags: [t], responses: {"200": {description: ok}}}}
"##;
const TOOLS: [&str; 4] = ["ok", "fail", "html", "moved"];

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// A careless upstream: whatever it is asked, it tells what it received.
fn careless(seen: &Seen) -> Response {
    let path = seen.path.as_str();
    if path.ends_with("/api/ok") {
        let headers: BTreeMap<String, String> =
            seen.headers.iter().map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned())).collect();
        return Json(json!({"target": seen.target(), "headers": headers, "echo": seen.echo()})).into_response();
    }
    if path.ends_with("/api/html") {
        let page = format!("<html><body><pre>{}</pre></body></html>", html_escape(&seen.echo()));
        return (StatusCode::NOT_FOUND, page).into_response();
    }
    if path.ends_with("/api/moved") {
        return (StatusCode::TEMPORARY_REDIRECT, [(LOCATION, seen.target())], seen.echo()).into_response();
    }
    (StatusCode::INTERNAL_SERVER_ERROR, seen.echo()).into_response()
}

/// An MCP server whose tools tell what the request carried: `echo` as data,
/// `fail` as the tool's error.
#[derive(Clone)]
struct Telltale;

impl ServerHandler for Telltale {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(json!({"type": "object"}).as_object().unwrap().clone());
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("echo", "Tells what it received", schema.clone()),
            Tool::new("fail", "Fails telling what it received", schema),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>().unwrap();
        let mut told = format!("{}\n", parts.uri);
        for (name, value) in &parts.headers {
            told.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes())));
        }
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::success(vec![ContentBlock::text(json!({"told": told}).to_string())]),
            _ => CallToolResult::error(vec![ContentBlock::text(told)]),
        };
        Ok(result.into())
    }
}

fn telltale() -> Recording {
    let service = StreamableHttpService::new(
        || Ok(Telltale),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    start_recording(Router::new().nest_service("/mcp", service))
}

/// encodeURIComponent leaves `A-Z a-z 0-9 - _ . ! ~ * ' ( )`.
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');
/// A cookie value as the catalog sends it.
const COOKIE: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b',').add(b';').add(b'\\').add(b'%');

/// Every form of `secret` the test looks for, computed here, apart from the catalog.
fn encodings(secret: &str) -> Vec<String> {
    let upper = utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string();
    let mut lower = String::new();
    let mut hex_left = 0_u8;
    for c in upper.chars() {
        lower.push(if hex_left > 0 { c.to_ascii_lowercase() } else { c });
        hex_left = if c == '%' { 2 } else { hex_left.saturating_sub(1) };
    }
    let json = serde_json::to_string(secret).unwrap();
    let ascii_json: String =
        secret.chars().map(|c| if c.is_ascii() { c.to_string() } else { format!("\\u{:04x}", c as u32) }).collect();
    let mut forms = vec![
        secret.to_owned(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
        upper,
        lower,
        utf8_percent_encode(secret, URI_COMPONENT).to_string(),
        utf8_percent_encode(secret, COOKIE).to_string(),
        json.trim_matches('"').to_owned(),
        ascii_json,
    ];
    forms.extend(base64_forms(secret));
    forms
}

fn base64_forms(text: &str) -> Vec<String> {
    [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD].iter().map(|e| e.encode(text)).collect()
}

/// Everything the test must find nowhere.
fn forbidden() -> Vec<(String, String)> {
    let mut forbidden = Vec::new();
    for secret in [BEARER, BASIC_PASSWORD, HEADER_KEY, QUERY_KEY, COOKIE_KEY, URL_PASSWORD, URL_KEY] {
        forbidden.extend(encodings(secret).into_iter().map(|form| (secret.to_owned(), form)));
    }
    for pair in [format!("{BASIC_USER}:{BASIC_PASSWORD}"), format!("{URL_USER}:{URL_PASSWORD}")] {
        forbidden.extend(base64_forms(&pair).into_iter().map(|form| (pair.clone(), form)));
    }
    forbidden
}

fn ctx(step: u32) -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), step)
}

#[test]
fn no_secret_leaves_in_results_errors_or_logs() {
    set_secrets();
    let careless = start_replying(careless);
    let telltale = telltale();
    let truncating = start_truncating();
    let refused = refused_base();
    let capture = Capture::default();
    let _logs = tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let texts = runtime.block_on(gather(&careless, &telltale, &truncating, &refused));

    let logs = capture.0.lock().unwrap().clone();
    assert!(logs.contains("source unavailable"), "the log was captured:\n{logs}");
    let mut leaks = Vec::new();
    for (secret, form) in forbidden() {
        for (what, text) in texts.iter().chain([&("captured logs and spans".to_owned(), logs.clone())]) {
            if text.contains(&form) {
                leaks.push(format!("{secret:?} as {form:?} in {what}: {text}"));
            }
        }
    }
    assert!(leaks.is_empty(), "{} leaks:\n{}", leaks.len(), leaks.join("\n"));

    // The careless upstream's echoes came back, redacted: the texts had the secrets to leak.
    for kind in AUTH_KINDS.iter().chain(&["url"]) {
        let (_, failed) = texts.iter().find(|(what, _)| *what == format!("{kind}_api.t.fail")).unwrap();
        assert!(failed.starts_with("http_500: HTTP 500: GET /") && failed.contains(REDACTED), "{failed}");
        let (_, dropped) = texts.iter().find(|(what, _)| *what == format!("{kind}_cut.t.ok")).unwrap();
        assert!(dropped.starts_with("upstream_error") && dropped.contains("body"), "{dropped}");
        let (_, down) = texts.iter().find(|(what, _)| *what == format!("{kind}_down.t.ok")).unwrap();
        assert!(down.starts_with("upstream_error"), "{down}");
        let (_, told) = texts.iter().find(|(what, _)| *what == format!("{kind}_tools.echo")).unwrap();
        assert!(told.contains(REDACTED), "{told}");
    }

    // The secrets did travel.
    let seen = careless.seen();
    // Each kind: 4 calls, a spec download and an MCP handshake.
    let received = |prefix: &str, what: fn(&Seen) -> Option<String>, expected: String| {
        let got: Vec<Option<String>> = seen.iter().filter(|s| s.path.starts_with(prefix)).map(what).collect();
        assert!(got.len() >= 6 && got.iter().all(|g| g.as_deref() == Some(&*expected)), "{prefix}: {got:?}");
    };
    received("/bearer/", |s| s.header("authorization"), format!("Bearer {BEARER}"));
    let basic = format!("Basic {}", STANDARD.encode(format!("{BASIC_USER}:{BASIC_PASSWORD}")));
    received("/basic/", |s| s.header("authorization"), basic);
    received("/header/", |s| s.header("x-api-key"), HEADER_KEY.into());
    received("/cookie/", |s| s.header("cookie"), format!("session={}", utf8_percent_encode(COOKIE_KEY, COOKIE)));
    let query = url::form_urlencoded::byte_serialize(QUERY_KEY.as_bytes()).collect::<String>();
    received("/query/", |s| s.query.clone(), format!("api_key={query}"));
    let userinfo = format!("Basic {}", STANDARD.encode(format!("{URL_USER}:{URL_PASSWORD}")));
    received("/url/", |s| s.header("authorization"), userinfo);
}

/// Connect a catalog over every kind of secret and failure, make every call,
/// and return every text that came out, named.
async fn gather(careless: &Recording, telltale: &Recording, cut: &str, refused: &str) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("echo.yaml"), SPEC).unwrap();
    let mut config = String::from("[outbound]\nallow_loopback = true\ntimeout_ms = 10000\n");
    let mut source = |namespace: String, body: String, auth: &str| {
        let auth = if auth.is_empty() { String::new() } else { format!("auth = {auth}\n") };
        config.push_str(&format!("\n[[sources]]\nnamespace = \"{namespace}\"\n{body}{auth}"));
        namespace
    };
    let openapi = |spec: &str, base: &str| format!("kind = \"openapi\"\nspec = \"{spec}\"\nbase_url = \"{base}\"\n");
    let mcp = |url: &str| format!("kind = \"mcp\"\nurl = \"{url}\"\n");
    let (base, telltale) = (&careless.base, format!("{}/mcp", telltale.base));

    let mut callable = Vec::new();
    let mut unavailable = Vec::new();
    for kind in AUTH_KINDS {
        let auth = auth(kind);
        callable.push(source(format!("{kind}_api"), openapi("echo.yaml", &format!("{base}/{kind}/api")), &auth));
        callable.push(source(format!("{kind}_down"), openapi("echo.yaml", refused), &auth));
        callable.push(source(format!("{kind}_cut"), openapi("echo.yaml", cut), &auth));
        callable.push(source(format!("{kind}_tools"), mcp(&telltale), &auth));
        let failing = [
            ("spec", openapi(&format!("{base}/{kind}/spec/echo"), base)),
            ("specdrop", openapi(&format!("{cut}/spec"), base)),
            ("specdown", openapi(&format!("{refused}/spec"), base)),
            ("mcp", mcp(&format!("{base}/{kind}/mcp/echo"))),
            ("mcpdrop", mcp(&format!("{cut}/mcp"))),
            ("mcpdown", mcp(&format!("{refused}/mcp"))),
        ];
        for (what, body) in failing {
            unavailable.push(source(format!("{kind}_{what}"), body, &auth));
        }
    }
    // Keys written into the configured URLs themselves.
    let password = utf8_percent_encode(URL_PASSWORD, NON_ALPHANUMERIC);
    let key = url::form_urlencoded::byte_serialize(URL_KEY.as_bytes()).collect::<String>();
    let with_credentials =
        |url: &str| url.replacen("http://", &format!("http://{URL_USER}:{password}@"), 1) + "?key=" + &key;
    callable.push(source("url_api".into(), openapi("echo.yaml", &with_credentials(&format!("{base}/url/api"))), ""));
    callable.push(source("url_down".into(), openapi("echo.yaml", &with_credentials(refused)), ""));
    callable.push(source("url_cut".into(), openapi("echo.yaml", &with_credentials(cut)), ""));
    callable.push(source("url_tools".into(), mcp(&with_credentials(&telltale)), ""));
    let failing = [
        ("spec", openapi(&with_credentials(&format!("{base}/url/spec/echo")), base)),
        ("specdrop", openapi(&with_credentials(&format!("{cut}/spec")), base)),
        ("specdown", openapi(&with_credentials(&format!("{refused}/spec")), base)),
        ("mcp", mcp(&with_credentials(&format!("{base}/url/mcp/echo")))),
        ("mcpdrop", mcp(&with_credentials(&format!("{cut}/mcp")))),
        ("mcpdown", mcp(&with_credentials(&format!("{refused}/mcp")))),
    ];
    for (what, body) in failing {
        unavailable.push(source(format!("url_{what}"), body, ""));
    }

    let file = dir.path().join("executor.toml");
    std::fs::write(&file, &config).unwrap();
    let catalog = Catalog::connect(&CatalogConfig::load(&file).unwrap()).await.unwrap();

    let mut texts = Vec::new();
    let namespaces = catalog.namespaces();
    for info in &namespaces {
        let expected_down = unavailable.contains(&info.namespace);
        assert_eq!(info.error.is_some(), expected_down, "{}: {:?}", info.namespace, info.error);
        texts.push((format!("{} unavailable", info.namespace), info.error.clone().unwrap_or_default()));
    }
    for namespace in &unavailable {
        let search = catalog.search(json!({"query": "x", "namespace": namespace})).await.unwrap_err();
        assert_eq!(search.code, "source_unavailable");
        let call = catalog.call(&format!("{namespace}.t.ok"), json!({}), &ctx(0)).await.unwrap_err();
        texts.push((format!("search in {namespace}"), search.message));
        texts.push((format!("call in {namespace}"), call.message));
    }
    let mut step = 0;
    for namespace in &callable {
        let tools: Vec<String> = if namespace.ends_with("_tools") {
            vec![format!("{namespace}.echo"), format!("{namespace}.fail")]
        } else {
            TOOLS.iter().map(|t| format!("{namespace}.t.{t}")).collect()
        };
        for tool in tools {
            step += 1;
            let text = match catalog.call_with_status(&tool, json!({}), &ctx(step)).await {
                Ok(success) => success.data.to_string(),
                Err(error) => format!("{}: {}", error.code, error.message),
            };
            texts.push((tool, text));
        }
    }
    texts.push(("the stored execution, its history and its export".to_owned(), stored_execution(catalog).await));
    texts
}

/// The embedded store's file after an execution made every read of the
/// callable sources (their outcomes go into its journal) and paused at a write,
/// with the audit export of that store.
async fn stored_execution(catalog: Catalog) -> String {
    use executor_core::{ElicitationMode, Principal, SystemClock, Timeouts};
    use executor_sandbox::{Limits, Sandbox};
    use executor_service::{ExecutionResult, Executions};

    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(executor_store::EmbeddedStore::open(data.path()).unwrap());
    let sandbox = Sandbox::new(Limits::default());
    let executions = Executions::new(store.clone(), sandbox, Timeouts::default(), Arc::new(SystemClock));
    let mut code = String::from("const seen = [];\n");
    for kind in AUTH_KINDS.iter().chain(&["url"]) {
        for source in ["api", "cut", "down"] {
            for tool in ["ok", "fail", "html"] {
                code.push_str(&format!("seen.push(await tools.{kind}_{source}.t.{tool}({{}}));\n"));
            }
        }
    }
    code.push_str("await tools.bearer_api.t.moved({});\nreturn seen;");
    let owner = Principal::key_owner("alice").unwrap();
    let paused = executions.execute(&owner, None, ElicitationMode::Model, code, Arc::new(catalog)).await.unwrap();
    assert!(matches!(paused, ExecutionResult::Paused { .. }), "the execution is stored: {paused:?}");
    // The audit trail's export of the same store: one line per entry.
    let mut export = String::new();
    let page = executor_store::HistoryStore::export_history(&*store, None, 1000, None).await.unwrap();
    for line in page.items {
        export.push_str(&line.entry.to_json().to_string());
        export.push('\n');
    }
    assert!(export.contains("\"type\":\"called\"") && export.contains("\"type\":\"paused\""), "{export}");
    drop((executions, store));
    let bytes = std::fs::read(data.path().join("executor.redb")).unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    assert!(text.contains(REDACTED), "the journal holds the redacted echoes");
    // The history is in the file too (written with the pause), so the scan covers it.
    assert!(text.contains("AUDIT#"), "the history items are stored");
    format!("{text}\n{export}")
}
