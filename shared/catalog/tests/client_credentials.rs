//! `oauth2_client_credentials` against real servers on loopback: an
//! authorization server that issues tokens (and counts every request for
//! one), and an OpenAPI service that accepts only the tokens it issued.
//! Expiry is moved with a manual clock, never waited for.

mod support;

use std::collections::HashSet;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::{keys, serve};
use executor_core::{ExecutionId, ManualClock};
use executor_sandbox::{CallContext, Tools};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use support::serve as listen;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

const CLIENT_ID: &str = "executor ci";
const CLIENT_SECRET: &str = "cs-4e8a/b1+c9=d2";
const SECRET_VAR: &str = "EXECUTOR_CATALOG_TEST_CLIENT_SECRET";
const WRONG_SECRET_VAR: &str = "EXECUTOR_CATALOG_TEST_WRONG_CLIENT_SECRET";
const LIFETIME_SECONDS: u64 = 3600;

fn set_secrets() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set once, under `Once`, before any test of the binary reads the
    // environment, with names only these tests use.
    ONCE.call_once(|| unsafe {
        std::env::set_var(SECRET_VAR, CLIENT_SECRET);
        std::env::set_var(WRONG_SECRET_VAR, "not-the-secret");
    });
}

const VAULT_SPEC: &str = r##"
openapi: 3.1.0
info: {title: vault, version: "1"}
paths:
  /items:
    get: {tags: [items], operationId: listItems, responses: {"200": {description: ok}}}
    post:
      tags: [items]
      operationId: addItem
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses: {"201": {description: added}}
  /whoami:
    get: {tags: [debug], operationId: whoami, summary: Echoes the caller's token, responses: {"200": {description: ok}}}
  /leak:
    get: {tags: [debug], operationId: leak, summary: Refuses and echoes the caller's token, responses: {"403": {description: no}}}
"##;

/// The authorization server and the service it protects, sharing the set of live tokens.
#[derive(Clone, Default)]
struct Fixture {
    token_requests: Arc<AtomicUsize>,
    issued: Arc<Mutex<Vec<String>>>,
    live: Arc<Mutex<HashSet<String>>>,
    /// What each token request asked for: (client id, scope).
    asked: Arc<Mutex<Vec<(String, String)>>>,
    /// The token each accepted service request carried.
    seen: Arc<Mutex<Vec<String>>>,
    added: Arc<AtomicUsize>,
    /// The service refuses every token, new ones too.
    refuse_all: Arc<AtomicBool>,
}

impl Fixture {
    fn issued(&self) -> Vec<String> {
        self.issued.lock().unwrap().clone()
    }

    fn requests(&self) -> usize {
        self.token_requests.load(Ordering::SeqCst)
    }

    /// The service stops accepting `token`, as after a revocation.
    fn revoke(&self, token: &str) {
        self.live.lock().unwrap().remove(token);
    }
}

async fn token(State(f): State<Fixture>, headers: HeaderMap, body: String) -> Response {
    f.token_requests.fetch_add(1, Ordering::SeqCst);
    // Wide enough that callers racing for a new token overlap; never part of an assertion.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_default();
    let basic = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Basic "));
    let decoded = basic.and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    let decoded = decoded.map(|d| String::from_utf8(d).unwrap()).unwrap_or_default();
    let (id, secret) = decoded.split_once(':').unwrap_or_default();
    let decode =
        |text: &str| url::form_urlencoded::parse(format!("x={text}").as_bytes()).next().unwrap().1.into_owned();
    let (id, secret) = (decode(id), decode(secret));
    f.asked.lock().unwrap().push((id.clone(), field("scope")));
    if field("grant_type") != "client_credentials" {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "unsupported_grant_type"}))).into_response();
    }
    if id != CLIENT_ID || secret != CLIENT_SECRET {
        // A careless server that repeats what it was sent.
        let echo = json!({"error": "invalid_client", "error_description": format!("unknown client {id}:{secret}")});
        return (StatusCode::UNAUTHORIZED, Json(echo)).into_response();
    }
    let mut issued = f.issued.lock().unwrap();
    let value = format!("cc-token-{}-5f0e2d9a7b", issued.len() + 1);
    issued.push(value.clone());
    f.live.lock().unwrap().insert(value.clone());
    Json(json!({"access_token": value, "token_type": "Bearer", "expires_in": LIFETIME_SECONDS})).into_response()
}

/// The bearer token of a request the service accepts.
fn accepted(f: &Fixture, headers: &HeaderMap) -> Option<String> {
    let token = headers.get("authorization")?.to_str().ok()?.strip_prefix("Bearer ")?.to_owned();
    if f.refuse_all.load(Ordering::SeqCst) {
        return None;
    }
    f.live.lock().unwrap().contains(&token).then(|| {
        f.seen.lock().unwrap().push(token.clone());
        token
    })
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, "invalid or expired token").into_response()
}

async fn start() -> (Fixture, String) {
    let fixture = Fixture::default();
    let router = Router::new()
        .route("/oauth/token", post(token))
        .route(
            "/api/openapi.yaml",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(_) => VAULT_SPEC.into_response(),
                    None => unauthorized(),
                }
            }),
        )
        .route(
            "/api/items",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(_) => Json(json!([{"name": "key"}])).into_response(),
                    None => unauthorized(),
                }
            })
            .post(|State(f): State<Fixture>, h: HeaderMap, Json(body): Json<Value>| async move {
                match accepted(&f, &h) {
                    Some(_) => {
                        f.added.fetch_add(1, Ordering::SeqCst);
                        (StatusCode::CREATED, Json(body)).into_response()
                    }
                    None => unauthorized(),
                }
            }),
        )
        .route(
            "/api/whoami",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(token) => Json(json!({"token": token})).into_response(),
                    None => unauthorized(),
                }
            }),
        )
        .route(
            "/api/leak",
            get(|State(f): State<Fixture>, h: HeaderMap| async move {
                match accepted(&f, &h) {
                    Some(token) => (StatusCode::FORBIDDEN, format!("token {token} may not read this")).into_response(),
                    None => unauthorized(),
                }
            }),
        )
        .with_state(fixture.clone());
    (fixture, listen(router).await)
}

fn config(base: &str, secret_var: &str, dir: &std::path::Path) -> CatalogConfig {
    let toml = format!(
        r#"
        [outbound]
        allow_loopback = true

        [[sources]]
        namespace = "vault"
        kind = "openapi"
        spec = "{base}/api/openapi.yaml"
        base_url = "{base}/api"
        auth = {{ type = "oauth2_client_credentials", token_url = "{base}/oauth/token", client_id = "{CLIENT_ID}", client_secret = "env:{secret_var}", scopes = ["items:read", "items:write"] }}
        "#
    );
    CatalogConfig::from_toml_str(&toml, &dir.join("executor.toml")).unwrap()
}

fn ctx(step: u32) -> CallContext {
    CallContext { execution_id: ExecutionId::parse("exec-1").unwrap(), step }
}

async fn fifty_reads(catalog: &Catalog) {
    let calls = (0..50).map(|step| async move { catalog.call("vault.items.listItems", json!({}), &ctx(step)).await });
    for result in futures_util::future::join_all(calls).await {
        assert_eq!(result.unwrap(), json!([{"name": "key"}]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_across_an_expiry_and_a_revocation_ask_for_the_fewest_tokens() {
    set_secrets();
    let (fixture, base) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let catalog = Catalog::connect_with_clock(&config(&base, SECRET_VAR, dir.path()), clock.clone()).await.unwrap();
    let namespace = &catalog.namespaces()[0];
    assert_eq!((namespace.tools, &namespace.error), (4, &None), "the spec was fetched with the token");
    assert_eq!(fixture.requests(), 1, "one token, at connect");
    assert_eq!(
        *fixture.asked.lock().unwrap(),
        [(CLIENT_ID.to_owned(), "items:read items:write".to_owned())],
        "the client authenticates with basic auth and asks for its scopes"
    );

    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 1, "the cached token serves every call");

    // Shortly before the expiry, the token is replaced once, whoever asks first.
    clock.advance(Duration::from_secs(LIFETIME_SECONDS - 30));
    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 2);
    let issued = fixture.issued();
    assert!(fixture.seen.lock().unwrap().iter().rev().take(50).all(|t| *t == issued[1]), "the new token was used");

    // Revoked before its expiry: every call gets a 401, one new token is asked for, each call is retried once.
    fixture.revoke(&issued[1]);
    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 3);

    // The lifetime was honoured: an hour later the third token is still used as it is.
    clock.advance(Duration::from_secs(LIFETIME_SECONDS - 120));
    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 3);
    // A service that refuses every token: one new token and one retry per call, then its 401.
    fixture.refuse_all.store(true, Ordering::SeqCst);
    let refused = catalog.call("vault.items.listItems", json!({}), &ctx(0)).await;
    let refused = refused.unwrap_err();
    assert_eq!((refused.code.as_str(), refused.message.as_str()), ("http_401", "HTTP 401: invalid or expired token"));
    assert_eq!(fixture.requests(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_client_credentials_make_the_source_unavailable_with_the_reason() {
    set_secrets();
    let (fixture, base) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::connect(&config(&base, WRONG_SECRET_VAR, dir.path())).await.unwrap();
    let error = catalog.namespaces()[0].error.clone().unwrap();
    assert_eq!(
        error,
        format!(
            "source `vault` (auth) failed: the token endpoint {base}/oauth/token refused the client (HTTP 401): \
             {{\"error\":\"invalid_client\",\"error_description\":\"unknown client executor ci:[redacted]\"}}; check \
             the source's client_id, client_secret and scopes"
        )
    );
    assert_eq!(fixture.requests(), 1);
    let call = catalog.call("vault.items.listItems", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(call.code, "source_unavailable");
    assert!(call.message.contains("refused the client (HTTP 401)"), "{}", call.message);
}

/// Every log line and span field, as text.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut text = self.0.lock().unwrap();
        text.push_str(&format!("span {}", attrs.metadata().name()));
        attrs.record(&mut Fields(&mut text));
        text.push('\n');
    }
    fn on_record(&self, _id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut text = self.0.lock().unwrap();
        text.push_str("record");
        values.record(&mut Fields(&mut text));
        text.push('\n');
    }
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut text = self.0.lock().unwrap();
        text.push_str(&format!("event {} {}", event.metadata().level(), event.metadata().target()));
        event.record(&mut Fields(&mut text));
        text.push('\n');
    }
}

/// Every file under `dir`, as text (the embedded store keeps items as JSON).
fn stored(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    text
}

// On one thread, so the captured log sees the host's tasks too.
#[test]
fn tokens_never_reach_results_errors_logs_or_stored_items() {
    set_secrets();
    let capture = Capture::default();
    let _logs = tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (fixture, texts) = runtime.block_on(async {
        let (fixture, base) = start().await;
        let dir = tempfile::tempdir().unwrap();
        let catalog = Arc::new(Catalog::connect(&config(&base, SECRET_VAR, dir.path())).await.unwrap());
        let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
        let key = keys::create(&*store, "alice").await.unwrap();
        let host = serve::host(store, catalog, &["vault".to_owned()], HostConfig::default()).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(serve::serve(listener, host, std::future::pending()));
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
        let info = InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("agent", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_06_18);
        let client = info
            .serve(StreamableHttpClientTransport::with_client(executor_http_client::builder().build().unwrap(), config))
            .await
            .unwrap();
        let call = |name: &'static str, arguments: Value| {
            let client = &client;
            async move {
                let params = CallToolRequestParams::new(name).with_arguments(arguments.as_object().unwrap().clone());
                serde_json::to_string(&client.call_tool(params).await.unwrap()).unwrap()
            }
        };
        let code = r#"
            const me = await tools.vault.debug.whoami({});
            const leak = await tools.vault.debug.leak({});
            const added = await tools.vault.items.addItem({ body: { name: "spare key" } });
            return { me: me.data, leak: leak.error, added: added.data };
        "#;
        let paused = call("execute", json!({ "code": code })).await;
        assert!(paused.contains("waiting_for_interaction"), "{paused}");
        let id = serde_json::from_str::<Value>(&paused).unwrap()["structuredContent"]["executionId"].clone();
        let done = call("resume", json!({ "executionId": id, "action": "accept" })).await;
        client.cancel().await.unwrap();
        (fixture, vec![("the paused result", paused), ("the completed result", done)])
    });
    let [(_, paused), (_, done)] = &texts[..] else { unreachable!() };
    let done: Value = serde_json::from_str(done).unwrap();
    assert_eq!(
        done["structuredContent"]["result"],
        json!({
            "me": {"token": "[redacted]"},
            "leak": {"code": "http_403", "message": "HTTP 403: token [redacted] may not read this"},
            "added": {"name": "spare key"},
        }),
        "the upstream echoed the token, in a result and in an error"
    );
    assert_eq!(fixture.added.load(Ordering::SeqCst), 1);
    let stored = stored(data.path());
    assert!(stored.contains("token [redacted] may not read this"), "the journal was stored and read here");
    let logs = capture.0.lock().unwrap().clone();
    assert!(logs.contains("span "), "the log was captured:\n{logs}");
    let issued = fixture.issued();
    assert_eq!(issued.len(), 1);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("executor+ci:{}", "cs-4e8a%2Fb1%2Bc9%3Dd2"));
    for secret in issued.iter().map(String::as_str).chain([CLIENT_SECRET, basic.as_str()]) {
        for (what, text) in [("stored items", &stored), ("logs and spans", &logs), ("the paused result", paused)] {
            assert!(!text.contains(secret), "{secret} in {what}");
        }
        assert!(!done.to_string().contains(secret), "{secret} in the completed result");
    }
}
