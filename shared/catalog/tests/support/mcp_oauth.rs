//! An OAuth-protected MCP server and its authorization server, on one
//! loopback port: the `docs` MCP server at `/mcp` answers 401 with
//! `resource_metadata` to any request without a token issued for it, the
//! protected resource metadata (RFC 9728) names the authorization server
//! `<base>/as`, whose metadata (RFC 8414, or OpenID discovery only), dynamic
//! registration (RFC 7591), authorization and token endpoints are here too.
//! The authorization endpoint checks the client (a registered one, or a
//! Client ID Metadata Document it fetches from the client id URL), PKCE and
//! the RFC 8707 `resource`; its consent form's "Allow" (a POST) sends a code
//! back to the redirect URI. Each consent is a new account; the token
//! endpoint issues that account's tokens for the resource asked for, and the
//! MCP server takes only tokens issued for itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use executor_catalog::{Catalog, CatalogConfig, McpAuth, NamespaceInfo, OAuthBacking, TokenKey, Vault};
use executor_core::{ClientSite, ManualClock};
use executor_store::EmbeddedStore;

use super::{Docs, Recorded, serve};

/// What the servers offer; tests change it between catalog connections.
#[derive(Debug, Clone)]
pub struct Settings {
    pub client_id_metadata_documents: bool,
    pub registration: bool,
    pub pkce_methods: Vec<String>,
    pub scopes: Vec<String>,
    /// The `resource` the metadata names; `None`: the MCP server's own URL.
    pub resource: Option<String>,
    /// Only `/.well-known/openid-configuration` (no RFC 8414 metadata).
    pub openid_only: bool,
    /// Registered clients get this secret (a server that insists on confidential clients).
    pub client_secret: Option<String>,
    /// The `scope` of the 401's challenge, when it names one.
    pub challenge_scope: Option<String>,
    /// The challenge names no `resource_metadata` (clients then try the well-known URL).
    pub unnamed_metadata: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            client_id_metadata_documents: false,
            registration: true,
            pkce_methods: vec!["S256".into()],
            scopes: vec!["docs:read".into()],
            resource: None,
            openid_only: false,
            client_secret: None,
            challenge_scope: None,
            unnamed_metadata: false,
        }
    }
}

#[derive(Clone, Default)]
pub struct Fixture {
    base: Arc<OnceLock<String>>,
    pub settings: Arc<Mutex<Settings>>,
    /// The body of every registration request.
    pub registrations: Arc<Mutex<Vec<Value>>>,
    /// Registered clients: id -> redirect URIs.
    clients: Arc<Mutex<HashMap<String, Vec<String>>>>,
    /// Client ID Metadata Documents fetched.
    pub documents_fetched: Arc<AtomicUsize>,
    /// Access tokens the MCP server accepts, and the resource each was issued for.
    pub tokens: Arc<Mutex<HashMap<String, String>>>,
    pub recorded: Arc<Recorded>,
    /// Codes waiting for their exchange.
    codes: Arc<Mutex<HashMap<String, Code>>>,
    /// Refresh tokens, and the account and resource they are for.
    refresh_tokens: Arc<Mutex<HashMap<String, (usize, String)>>>,
    /// Consents given: each is a new account.
    consents: Arc<AtomicUsize>,
    /// Every token request's form fields.
    pub token_requests: Arc<Mutex<Vec<HashMap<String, String>>>>,
    /// Every token text issued (access and refresh): never to be stored or logged in clear.
    pub issued: Arc<Mutex<Vec<String>>>,
}

/// An authorization waiting for its code's exchange.
struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: String,
    account: usize,
}

impl Fixture {
    pub fn base(&self) -> &str {
        self.base.get().expect("started")
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base())
    }

    pub fn issuer(&self) -> String {
        format!("{}/as", self.base())
    }

    pub fn set(&self, change: impl FnOnce(&mut Settings)) {
        change(&mut self.settings.lock().unwrap());
    }

    /// The provider revokes every token (the owners removed the app's access).
    pub fn revoke_all(&self) {
        self.tokens.lock().unwrap().clear();
        self.refresh_tokens.lock().unwrap().clear();
    }

    pub fn registrations(&self) -> Vec<Value> {
        self.registrations.lock().unwrap().clone()
    }

    fn settings(&self) -> Settings {
        self.settings.lock().unwrap().clone()
    }

    fn resource_metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.base())
    }
}

pub async fn start() -> Fixture {
    let fixture = Fixture::default();
    let handler = Docs { recorded: fixture.recorded.clone() };
    let mcp = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let protected = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(fixture.clone(), require_token));
    let router = Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(resource_metadata))
        .route("/.well-known/oauth-authorization-server/as", get(rfc8414_metadata))
        .route("/.well-known/openid-configuration/as", get(openid_metadata))
        .route("/as/register", post(register))
        .route("/as/authorize", get(authorize).post(allow))
        .route("/as/token", post(token))
        .with_state(fixture.clone())
        .merge(protected);
    let base = serve(router).await;
    fixture.base.set(base).unwrap();
    fixture
}

/// A token issued for this server, else 401 naming the metadata.
async fn require_token(State(f): State<Fixture>, request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let issued_for = token.and_then(|t| f.tokens.lock().unwrap().get(&t).cloned());
    if issued_for.as_deref() == Some(f.mcp_url().as_str()) {
        return next.run(request).await;
    }
    let mut challenge = match f.settings().unnamed_metadata {
        true => r#"Bearer realm="docs""#.to_owned(),
        false => format!(r#"Bearer realm="docs", resource_metadata="{}""#, f.resource_metadata_url()),
    };
    if let Some(scope) = f.settings().challenge_scope {
        challenge.push_str(&format!(r#", scope="{scope}""#));
    }
    (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)], "a token for this server is required").into_response()
}

async fn resource_metadata(State(f): State<Fixture>) -> Json<Value> {
    let settings = f.settings();
    Json(json!({
        "resource": settings.resource.unwrap_or_else(|| f.mcp_url()),
        "authorization_servers": [f.issuer()],
        "scopes_supported": settings.scopes,
        "bearer_methods_supported": ["header"],
    }))
}

fn server_metadata(f: &Fixture) -> Value {
    let settings = f.settings();
    let issuer = f.issuer();
    let mut metadata = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": settings.pkce_methods,
        "client_id_metadata_document_supported": settings.client_id_metadata_documents,
    });
    if settings.registration {
        metadata["registration_endpoint"] = json!(format!("{issuer}/register"));
    }
    metadata
}

async fn rfc8414_metadata(State(f): State<Fixture>) -> Response {
    match f.settings().openid_only {
        true => (StatusCode::NOT_FOUND, "no such metadata").into_response(),
        false => Json(server_metadata(&f)).into_response(),
    }
}

async fn openid_metadata(State(f): State<Fixture>) -> Json<Value> {
    Json(server_metadata(&f))
}

async fn register(State(f): State<Fixture>, Json(body): Json<Value>) -> Response {
    f.registrations.lock().unwrap().push(body.clone());
    let redirect_uris: Vec<String> =
        body["redirect_uris"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect();
    if redirect_uris.is_empty() {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_redirect_uri"}))).into_response();
    }
    let mut clients = f.clients.lock().unwrap();
    let client_id = format!("dcr-client-{}", clients.len() + 1);
    clients.insert(client_id.clone(), redirect_uris.clone());
    let mut answer = json!({"client_id": client_id, "redirect_uris": redirect_uris, "scope": body["scope"],
        "token_endpoint_auth_method": "none"});
    if let Some(secret) = f.settings().client_secret {
        answer["client_secret"] = json!(secret);
        answer["token_endpoint_auth_method"] = json!("client_secret_basic");
    }
    (StatusCode::CREATED, Json(answer)).into_response()
}

/// Checks the authorization request as a careful server does, then shows
/// its consent page, a form that posts the same request back.
async fn authorize(State(f): State<Fixture>, Query(query): Query<HashMap<String, String>>) -> Response {
    if let Err(refused) = check(&f, &query).await {
        return refused;
    }
    let client_id = query.get("client_id").cloned().unwrap_or_default();
    Html(format!("<form method=post><p>Allow {client_id} to read the docs?</p><button>Allow</button></form>"))
        .into_response()
}

/// "Allow": a code for a new account, sent back to the redirect URI.
async fn allow(State(f): State<Fixture>, Query(query): Query<HashMap<String, String>>) -> Response {
    if let Err(refused) = check(&f, &query).await {
        return refused;
    }
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let account = f.consents.fetch_add(1, Ordering::SeqCst) + 1;
    let code = format!("mcp-code-{account}");
    let grant = Code {
        client_id: field("client_id"),
        redirect_uri: field("redirect_uri"),
        challenge: field("code_challenge"),
        resource: field("resource"),
        account,
    };
    f.codes.lock().unwrap().insert(code.clone(), grant);
    let mut target = url::Url::parse(&field("redirect_uri")).unwrap();
    target.query_pairs_mut().append_pair("code", &code).append_pair("state", &field("state"));
    Redirect::to(target.as_str()).into_response()
}

/// The client, PKCE and resource of an authorization request.
async fn check(f: &Fixture, query: &HashMap<String, String>) -> Result<(), Response> {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let client_id = field("client_id");
    let redirect_uris = if client_id.starts_with("http://") || client_id.starts_with("https://") {
        if !f.settings().client_id_metadata_documents {
            return Err(refuse("client id metadata documents are not accepted here"));
        }
        f.documents_fetched.fetch_add(1, Ordering::SeqCst);
        let document: Value =
            match executor_http_client::builder().build().expect("a client").get(&client_id).send().await {
                Ok(response) if response.status().is_success() => {
                    serde_json::from_slice(&response.bytes().await.unwrap_or_default()).unwrap_or(Value::Null)
                }
                _ => return Err(refuse("the client metadata document cannot be fetched")),
            };
        if document["client_id"] != json!(client_id) {
            return Err(refuse("the client metadata document names another client_id"));
        }
        document["redirect_uris"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    } else {
        match f.clients.lock().unwrap().get(&client_id) {
            Some(uris) => uris.clone(),
            None => return Err(refuse("unknown client")),
        }
    };
    if !redirect_uris.contains(&field("redirect_uri")) {
        return Err(refuse("the redirect_uri is not registered for this client"));
    }
    if field("code_challenge_method") != "S256" || field("code_challenge").is_empty() {
        return Err(refuse("PKCE with S256 is required"));
    }
    if field("resource") != f.mcp_url() {
        return Err(refuse("the resource is not served here"));
    }
    Ok(())
}

/// The authorization code and refresh token grants, for the resource each names.
async fn token(State(f): State<Fixture>, headers: HeaderMap, body: String) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    f.token_requests.lock().unwrap().push(form.clone());
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    // A confidential client authenticates with basic auth, a public one names itself.
    let basic = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Basic "));
    let client_id = match (f.settings().client_secret, basic) {
        (Some(secret), Some(basic)) => {
            let decoded = base64::engine::general_purpose::STANDARD.decode(basic).unwrap_or_default();
            let decoded = String::from_utf8_lossy(&decoded).into_owned();
            match decoded.split_once(':') {
                Some((id, given)) if given == secret => id.to_owned(),
                _ => return token_error(StatusCode::UNAUTHORIZED, "invalid_client"),
            }
        }
        (Some(_), None) => return token_error(StatusCode::UNAUTHORIZED, "invalid_client"),
        (None, _) => field("client_id"),
    };
    if field("resource") != f.mcp_url() {
        return token_error(StatusCode::BAD_REQUEST, "invalid_target");
    }
    let account = match field("grant_type").as_str() {
        "authorization_code" => {
            let Some(code) = f.codes.lock().unwrap().remove(&field("code")) else {
                return token_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(field("code_verifier").as_bytes()));
            if code.client_id != client_id
                || code.redirect_uri != field("redirect_uri")
                || code.challenge != challenge
                || code.resource != field("resource")
            {
                return token_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            code.account
        }
        "refresh_token" => match f.refresh_tokens.lock().unwrap().remove(&field("refresh_token")) {
            Some((account, resource)) if resource == field("resource") => account,
            _ => return token_error(StatusCode::BAD_REQUEST, "invalid_grant"),
        },
        _ => return token_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    };
    let n = f.issued.lock().unwrap().len();
    let (access, refresh) = (format!("mcp-at-{account}-{n}-e4a9c2"), format!("mcp-rt-{account}-{n}-7b3d5f"));
    f.tokens.lock().unwrap().insert(access.clone(), field("resource"));
    f.refresh_tokens.lock().unwrap().insert(refresh.clone(), (account, field("resource")));
    f.issued.lock().unwrap().extend([access.clone(), refresh.clone()]);
    let scope = f.settings().scopes.join(" ");
    Json(json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh,
        "scope": scope}))
    .into_response()
}

fn token_error(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({"error": error}))).into_response()
}

fn refuse(reason: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_request", "error_description": reason}))).into_response()
}

/// The fixture's MCP server as the source `docs`, with `auth` (a TOML line, or nothing).
pub fn config(fixture: &Fixture, auth: &str) -> CatalogConfig {
    let toml = format!(
        r#"
        [outbound]
        allow_loopback = true

        [[sources]]
        namespace = "docs"
        kind = "mcp"
        url = "{}"
        {auth}
        "#,
        fixture.mcp_url()
    );
    CatalogConfig::from_toml_str(&toml, std::path::Path::new("executor.toml")).unwrap()
}

/// What every instance of the deployment keeps: registrations and owners' tokens in `store`.
pub fn backing(store: &Arc<EmbeddedStore>, site: Option<&str>) -> OAuthBacking {
    let mcp_auth = McpAuth { registrations: store.clone(), site: site.map(ClientSite::new) };
    let vault = Vault { store: store.clone(), key: TokenKey::from_bytes(&[5u8; 32]).unwrap() };
    OAuthBacking { vault: Some(vault), mcp: Some(mcp_auth) }
}

/// One instance of the deployment: a catalog over the fixture, registering through `store`.
pub async fn instance(fixture: &Fixture, store: &Arc<EmbeddedStore>, site: Option<&str>) -> NamespaceInfo {
    let clock = Arc::new(ManualClock::starting_now());
    let catalog = Catalog::connect_with(&config(fixture, ""), clock, backing(store, site)).await.unwrap();
    catalog.namespaces().remove(0)
}

/// Why the source has no tools: it is unavailable, or (its client
/// registered) waits for an owner to connect.
pub fn reason(namespace: &NamespaceInfo) -> &str {
    assert_eq!(namespace.tools, 0, "{namespace:?}");
    namespace.error.as_deref().or(namespace.needs_connection.as_deref()).expect("a reason")
}

/// A public URL for the redirect URI (dynamic registration never calls it).
pub const SITE: &str = "https://executor.example.test/team";
