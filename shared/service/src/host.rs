//! The MCP function's HTTP surface, framework-neutral
//! (`http::Request<Bytes>` -> `http::Response<Bytes>`), used by `executor serve`
//! and the Lambda shell alike.
//!
//! Sessions are a layer of our own in front of rmcp's *stateless* Streamable
//! HTTP service, rather than rmcp's session mode with its `SessionStore`: rmcp's
//! session mode keeps a live worker per session in memory, answers with SSE
//! bodies and opens never-ending GET streams (which hang a buffered Lambda).
//! Stateless, any instance answers any request; our layer creates the session
//! record on `initialize` (conditional put), checks it on every later request
//! (exists, active, same owner, else 404) and marks activity, coalesced.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use executor_core::{
    ClientInfo, Clock, ElicitationMode, Principal, Session, SessionId, SystemClock, Timeouts, TokenHash,
};
use executor_sandbox::{Sandbox, Tools};
use executor_store::{Access, AlarmScheduler, KeyStore, SessionStore, Store, StoreError};
use executor_telemetry::Metric;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tracing::{Instrument, Span};

use crate::approvals::ApprovalRoutes;
use crate::mcp::{Caller, McpServer};
use crate::native::{NativeApprovals, RequestStateKey};
use crate::oidc::{Oidc, OidcConfig};
use crate::{Alarms, Executions, spans};

const SESSION_HEADER: &str = "mcp-session-id";
/// Sessions of this protocol version and later have none (served statelessly).
const STATELESS_VERSION: &str = "2026-07-28";

/// How the host is set up; the defaults suit `executor serve` on loopback.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub timeouts: Timeouts,
    /// Base of links handed to clients; derived from the request's host when unset.
    pub public_url: Option<String>,
    /// Hosts accepted in the `Host` header (DNS-rebinding protection); `None`
    /// accepts any (behind API Gateway, which already routes by host).
    pub allowed_hosts: Option<Vec<String>>,
    pub max_body_bytes: usize,
    /// Activity is written at most this often per session.
    pub activity_interval: Duration,
    /// How long a session record is kept (TTL) after its last write.
    pub session_retention: Duration,
    pub default_mode: ElicitationMode,
    /// Accept OIDC JWTs as well as API keys.
    pub oidc: Option<OidcConfig>,
    /// How long a browser-mode `resume` waits for the human's decision.
    pub approval_wait: Duration,
    /// Seals native-mode request states; without it, native requests are
    /// served in model mode. Every instance must share it.
    pub request_state_key: Option<RequestStateKey>,
    /// The one clock of the host: sessions, executions and approvals read it.
    pub clock: Arc<dyn Clock>,
    /// Sandbox runs at once in this process (`EXECUTOR_MAX_CONCURRENT_EXECUTIONS`);
    /// more wait a second, then get `busy`. Bounds memory: each run may use
    /// the sandbox's heap limit.
    pub max_concurrent_executions: usize,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            timeouts: Timeouts::default(),
            public_url: None,
            allowed_hosts: Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]),
            max_body_bytes: 1 << 20,
            activity_interval: Duration::from_secs(30),
            session_retention: Duration::from_secs(24 * 3600),
            default_mode: ElicitationMode::Model,
            oidc: None,
            approval_wait: Duration::from_secs(20),
            request_state_key: None,
            clock: Arc::new(SystemClock),
            max_concurrent_executions: crate::executions::DEFAULT_MAX_CONCURRENT,
        }
    }
}

/// A setting from the environment (or its command-line twin) that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be {expected}, not {value:?}")]
pub struct ConfigError {
    pub name: &'static str,
    pub expected: &'static str,
    pub value: String,
}

const PUBLIC_URL_EXPECTED: &str =
    "an http:// or https:// URL with a host: the address clients reach this server at, e.g. http://host:8787";

impl HostConfig {
    /// The defaults, with `EXECUTOR_SESSION_TIMEOUT_MS`, `EXECUTOR_PAUSED_LEASE_MS`,
    /// `EXECUTOR_APPROVAL_WINDOW_MS`, `EXECUTOR_APPROVAL_WAIT_MS`, `EXECUTOR_ELICITATION_MODE`,
    /// `EXECUTOR_REQUEST_STATE_KEY`, `EXECUTOR_PUBLIC_URL` and the `EXECUTOR_OIDC_*` settings
    /// applied from `lookup`
    /// (`|name| std::env::var(name).ok()` in the hosts).
    pub fn with_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let millis = |name: &'static str, current: Duration| -> Result<Duration, ConfigError> {
            match lookup(name) {
                None => Ok(current),
                Some(value) => match value.trim().parse::<u64>() {
                    Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
                    _ => Err(ConfigError { name, expected: "a whole number of milliseconds greater than zero", value }),
                },
            }
        };
        let t = &mut self.timeouts;
        t.session_timeout = millis("EXECUTOR_SESSION_TIMEOUT_MS", t.session_timeout)?;
        t.paused_lease = millis("EXECUTOR_PAUSED_LEASE_MS", t.paused_lease)?;
        t.approval_window = millis("EXECUTOR_APPROVAL_WINDOW_MS", t.approval_window)?;
        self.approval_wait = millis("EXECUTOR_APPROVAL_WAIT_MS", self.approval_wait)?;
        if let Some(value) = lookup("EXECUTOR_MAX_CONCURRENT_EXECUTIONS") {
            self.max_concurrent_executions = match value.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    let expected = "a whole number greater than zero";
                    return Err(ConfigError { name: "EXECUTOR_MAX_CONCURRENT_EXECUTIONS", expected, value });
                }
            };
        }
        if let Some(key) = lookup("EXECUTOR_REQUEST_STATE_KEY").filter(|k| !k.is_empty()) {
            let short = || ConfigError {
                name: "EXECUTOR_REQUEST_STATE_KEY",
                expected: "at least 32 bytes, the same on every instance",
                value: "(hidden)".into(),
            };
            self.request_state_key = Some(RequestStateKey::new(key.into_bytes()).ok_or_else(short)?);
        }
        if let Some(mode) = lookup("EXECUTOR_ELICITATION_MODE").filter(|m| !m.trim().is_empty()) {
            self.default_mode = parse_mode(mode.trim()).map_err(|_| ConfigError {
                name: "EXECUTOR_ELICITATION_MODE",
                expected: "model, browser or native",
                value: mode,
            })?;
        }
        if let Some(url) = lookup("EXECUTOR_PUBLIC_URL").filter(|u| !u.trim().is_empty()) {
            self = self.with_public_url(&url)?;
        }
        if let Some(issuer) = lookup("EXECUTOR_OIDC_ISSUER").filter(|u| !u.trim().is_empty()) {
            let audience = lookup("EXECUTOR_OIDC_AUDIENCE").filter(|a| !a.trim().is_empty()).ok_or(ConfigError {
                name: "EXECUTOR_OIDC_AUDIENCE",
                expected: "set with EXECUTOR_OIDC_ISSUER (the audience the tokens are for)",
                value: String::new(),
            })?;
            self.oidc = Some(OidcConfig {
                issuer,
                audience,
                jwks_url: lookup("EXECUTOR_OIDC_JWKS_URL").filter(|u| !u.trim().is_empty()),
                owner_claim: lookup("EXECUTOR_OIDC_OWNER_CLAIM").unwrap_or_else(|| "sub".into()),
                share_key_owners: match lookup("EXECUTOR_OIDC_SHARE_KEY_OWNERS").as_deref().map(str::trim) {
                    None | Some("" | "false" | "0") => false,
                    Some("true" | "1") => true,
                    Some(other) => {
                        let (name, expected) = ("EXECUTOR_OIDC_SHARE_KEY_OWNERS", "true or false");
                        return Err(ConfigError { name, expected, value: other.to_owned() });
                    }
                },
            });
        }
        Ok(self)
    }

    /// Serve at `url`, the address clients use (`EXECUTOR_PUBLIC_URL`): links
    /// are based on it, and its host joins the hosts accepted in the `Host`
    /// header, so a server on `0.0.0.0` answers other machines by that name.
    pub fn with_public_url(mut self, url: &str) -> Result<Self, ConfigError> {
        let url = url.trim();
        let invalid = || ConfigError { name: "EXECUTOR_PUBLIC_URL", expected: PUBLIC_URL_EXPECTED, value: url.into() };
        let uri: http::Uri = url.parse().map_err(|_| invalid())?;
        let authority = match (uri.scheme_str(), uri.authority()) {
            (Some("http" | "https"), Some(authority)) if !authority.host().is_empty() => authority,
            _ => return Err(invalid()),
        };
        // Credentials in a URL handed to every client would leak them.
        if authority.as_str().contains('@') || uri.query().is_some() {
            return Err(invalid());
        }
        if let Some(hosts) = &mut self.allowed_hosts {
            // With its port when it names one: rmcp then matches host and port.
            hosts.push(authority.as_str().to_owned());
        }
        self.public_url = Some(url.trim_end_matches('/').to_owned());
        Ok(self)
    }
}

#[derive(Clone)]
pub struct Host {
    sessions: Arc<dyn SessionStore>,
    keys: Arc<dyn KeyStore>,
    alarms: Arc<Alarms>,
    approvals: Arc<ApprovalRoutes>,
    oidc: Option<Arc<Oidc>>,
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    config: HostConfig,
    native_available: bool,
}

impl Host {
    pub fn new<S: Store + 'static>(
        store: Arc<S>,
        tools: Arc<dyn Tools>,
        namespaces: &[String],
        sandbox: Sandbox,
        scheduler: Arc<dyn AlarmScheduler>,
        config: HostConfig,
    ) -> Self {
        let clock = config.clock.clone();
        let executions = Arc::new(
            Executions::new(store.clone(), sandbox, config.timeouts, clock)
                .with_approval_wait(config.approval_wait)
                .with_max_concurrent(config.max_concurrent_executions),
        );
        let approvals = Arc::new(ApprovalRoutes::new(executions.clone(), tools.clone()));
        let alarms = Arc::new(Alarms::new(store.clone(), store.clone(), scheduler, config.timeouts));
        let native = config.request_state_key.as_ref().map(|key| {
            // A state outlives its pause by no more than the approval window.
            Arc::new(NativeApprovals::new(key, config.timeouts.approval_window))
        });
        let native_available = native.is_some();
        let server = McpServer::new(executions, tools, namespaces, native);
        let mut rmcp_config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_sse_retry(None)
            .with_max_request_body_bytes(config.max_body_bytes);
        rmcp_config = match &config.allowed_hosts {
            Some(hosts) => rmcp_config.with_allowed_hosts(hosts.clone()),
            None => rmcp_config.disable_allowed_hosts(),
        };
        let mcp = StreamableHttpService::new(move || Ok(server.clone()), Default::default(), rmcp_config);
        let oidc = config.oidc.clone().map(|c| Arc::new(Oidc::new(c)));
        Self { sessions: store.clone(), keys: store, alarms, approvals, oidc, mcp, config, native_available }
    }

    /// The alarm handler: what a fired alarm (in-process timer or the alarm
    /// function) calls.
    pub fn alarms(&self) -> Arc<Alarms> {
        self.alarms.clone()
    }

    pub fn max_body_bytes(&self) -> usize {
        self.config.max_body_bytes
    }

    /// The answer to a body the transport stopped reading at the limit.
    pub fn body_too_large(&self) -> Response<Bytes> {
        let message = format!("the request is over the {}-byte limit", self.config.max_body_bytes);
        with_cors(rpc_error(StatusCode::PAYLOAD_TOO_LARGE, -32600, &message))
    }

    /// Every route, as `executor serve` mounts them on one port.
    pub async fn handle(&self, request: Request<Bytes>) -> Response<Bytes> {
        let path = request.uri().path();
        if path.starts_with("/approvals/") || path.starts_with("/api/") {
            self.handle_approvals(request).await
        } else {
            self.handle_mcp(request).await
        }
    }

    /// The MCP function's routes: `/mcp`, `/.well-known/...`, `/healthz`,
    /// each request in an `mcp.request` span.
    pub async fn handle_mcp(&self, request: Request<Bytes>) -> Response<Bytes> {
        let span = spans::mcp_request(&request);
        let started = Instant::now();
        let response = self.route_mcp(request).instrument(span.clone()).await;
        spans::finish(&span, response.status(), started);
        response
    }

    async fn route_mcp(&self, request: Request<Bytes>) -> Response<Bytes> {
        let path = request.uri().path().trim_end_matches('/');
        match (request.method(), path) {
            (&Method::GET, "/healthz") => text(StatusCode::OK, "ok"),
            (&Method::GET, "/.well-known/oauth-protected-resource" | "/.well-known/oauth-protected-resource/mcp") => {
                let base = self.base_url(request.headers());
                let mut metadata = json!({
                    "resource": format!("{base}/mcp"),
                    "bearer_methods_supported": ["header"],
                    "resource_name": "Executor",
                });
                if let Some(oidc) = &self.oidc {
                    metadata["authorization_servers"] = json!([oidc.issuer()]);
                }
                with_cors(json_response(StatusCode::OK, &metadata))
            }
            (_, "/mcp") => with_cors(self.mcp(request).await),
            _ => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    /// The approval function's routes: `/approvals/{id}` (link token) and
    /// `/api/executions/...` (bearer token of the owner), each request in an
    /// `approval.request` span.
    pub async fn handle_approvals(&self, request: Request<Bytes>) -> Response<Bytes> {
        let span = spans::approval_request(&request);
        let started = Instant::now();
        let response = self.route_approvals(request).instrument(span.clone()).await;
        spans::finish(&span, response.status(), started);
        response
    }

    async fn route_approvals(&self, request: Request<Bytes>) -> Response<Bytes> {
        let path = request.uri().path();
        if path.starts_with("/approvals/") {
            let secure = self.base_url(request.headers()).starts_with("https://");
            return self.approvals.page(&request, secure).await;
        }
        if path.starts_with("/api/executions/") {
            let owner = match self.authenticate(request.headers(), crate::approvals::api_error).await {
                Ok(owner) => owner,
                Err(response) => return response,
            };
            let base_url = self.base_url(request.headers());
            return self.approvals.api(&request, &owner, &base_url).await;
        }
        if request.method() == Method::GET && path == "/healthz" {
            return text(StatusCode::OK, "ok");
        }
        text(StatusCode::NOT_FOUND, "not found")
    }

    async fn mcp(&self, request: Request<Bytes>) -> Response<Bytes> {
        if request.method() == Method::OPTIONS {
            return preflight();
        }
        let owner = match self.authenticate(request.headers(), rpc_refusal).await {
            Ok(owner) => owner,
            Err(response) => return response,
        };
        match *request.method() {
            Method::POST => self.post(request, owner).await,
            Method::DELETE => self.delete(request.headers(), &owner).await,
            _ => {
                let mut response =
                    rpc_error(StatusCode::METHOD_NOT_ALLOWED, -32000, "use POST; this server opens no streams");
                response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, DELETE, OPTIONS"));
                response
            }
        }
    }

    /// The caller of a bearer API key, or the 401 challenge; `refuse` answers
    /// in the surface's own shape (JSON-RPC for `/mcp`, the API's for `/api`).
    async fn authenticate(
        &self,
        headers: &HeaderMap,
        refuse: fn(StatusCode, &str) -> Response<Bytes>,
    ) -> Result<Principal, Response<Bytes>> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim);
        let challenge = |message: &str| {
            let mut response = refuse(StatusCode::UNAUTHORIZED, message);
            let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", self.base_url(headers));
            if let Ok(value) = HeaderValue::from_str(&format!("Bearer resource_metadata=\"{metadata}\"")) {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
            }
            response
        };
        // Only the conformance build: its suite cannot send a token (see `conformance::anonymous_owner`).
        #[cfg(feature = "conformance")]
        if token.is_none_or(str::is_empty) {
            return Ok(crate::conformance::anonymous_owner());
        }
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(challenge(
                "Unauthorized: send `Authorization: Bearer <API key>` (create one with `executor keys create`)",
            ));
        };
        if let Some(oidc) = self.oidc.as_ref().filter(|_| Oidc::looks_like_jwt(token)) {
            let owner = oidc.principal(token).await.map_err(|e| challenge(&format!("Unauthorized: {e}")))?;
            spans::record_owner(&owner);
            return Ok(owner);
        }
        match self.keys.find_key(&TokenHash::of_token(token)).await {
            Ok(key) => {
                spans::record_owner(&key.owner);
                Ok(key.owner)
            }
            Err(StoreError::NotFound { .. }) => Err(challenge("Unauthorized: the API key is not valid")),
            Err(e) => Err(refuse(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())),
        }
    }

    async fn post(&self, request: Request<Bytes>, owner: Principal) -> Response<Bytes> {
        let (mut parts, body) = request.into_parts();
        if body.len() > self.config.max_body_bytes {
            let message =
                format!("the request is {} bytes, over the {}-byte limit", body.len(), self.config.max_body_bytes);
            return rpc_error(StatusCode::PAYLOAD_TOO_LARGE, -32600, &message);
        }
        let message: Value = match serde_json::from_slice(&body) {
            Ok(message) => message,
            Err(e) => return rpc_error(StatusCode::BAD_REQUEST, -32700, &format!("Parse error: {e}")),
        };
        let mode = match elicitation_mode(parts.uri.query(), self.config.default_mode) {
            Ok(mode) => mode,
            Err(message) => return rpc_error(StatusCode::BAD_REQUEST, -32602, &message),
        };
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        record_request(&message, &parts.headers);
        let session = match parts.headers.get(SESSION_HEADER) {
            Some(_) if initialize => None,
            Some(value) => match self.check_session(value, &owner).await {
                Ok(session) => {
                    spans::record("mcp.session.id", session.as_str());
                    Some(session)
                }
                Err(response) => return response,
            },
            None => None,
        };
        let base_url = self.base_url(&parts.headers);
        let mode = self.effective_mode(mode, &parts.headers, &message);
        spans::record("executor.elicitation_mode", mode.as_str());
        parts.extensions.insert(Caller { owner: owner.clone(), session, mode, base_url, span: Span::current() });
        let response = self.forward(Request::from_parts(parts, body)).await;
        if !initialize || response.status() != StatusCode::OK {
            return response;
        }
        self.start_session(response, &message, owner, mode).await
    }

    async fn forward(&self, request: Request<Bytes>) -> Response<Bytes> {
        let response = self.mcp.handle(request.map(Full::new)).await;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        Response::from_parts(parts, body)
    }

    /// After a successful `initialize` of a version with sessions: store the
    /// session (conditional put) and hand its id to the client.
    async fn start_session(
        &self,
        mut response: Response<Bytes>,
        request: &Value,
        owner: Principal,
        mode: ElicitationMode,
    ) -> Response<Bytes> {
        let answered: Value = serde_json::from_slice(response.body()).unwrap_or_default();
        let Some(version) = answered["result"]["protocolVersion"].as_str() else { return response };
        if version >= STATELESS_VERSION {
            return response;
        }
        let params = &request["params"];
        let client = ClientInfo {
            name: params["clientInfo"]["name"].as_str().unwrap_or_default().to_owned(),
            version: params["clientInfo"]["version"].as_str().unwrap_or_default().to_owned(),
            capabilities: params["capabilities"].clone(),
        };
        let id = match crate::ids::session_id() {
            Ok(id) => id,
            Err(e) => return rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &format!("no randomness: {e}")),
        };
        let now = self.config.clock.now();
        let mut session = Session::new(id, owner, now, version, client, mode, now.plus(self.config.session_retention));
        let alarm = self.alarms.first_alarm(&mut session);
        if let Err(e) = self.sessions.create_session(&session).await {
            return rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &format!("could not start a session: {e}"));
        }
        spans::record("mcp.session.id", session.id.as_str());
        executor_telemetry::count(Metric::SessionsCreated);
        tracing::info!(mcp.protocol.version = version, "session created");
        if let Err(e) = self.alarms.arm(&session.id, alarm).await {
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32603,
                &format!("could not arm the session's alarm: {e}"),
            );
        }
        if let Ok(value) = HeaderValue::from_str(session.id.as_str()) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        response
    }

    /// The caller's live session, its activity marked (at most once per
    /// `activity_interval`), or 404 "Session not found".
    async fn check_session(&self, value: &HeaderValue, owner: &Principal) -> Result<SessionId, Response<Bytes>> {
        let not_found = || rpc_error(StatusCode::NOT_FOUND, -32001, "Session not found");
        let id = value.to_str().ok().and_then(|v| SessionId::parse(v).ok()).ok_or_else(not_found)?;
        let session = match self.sessions.get_session(Access::Owner(owner), &id).await {
            Ok(session) if session.is_active() => session,
            Ok(_) | Err(StoreError::NotFound { .. }) => return Err(not_found()),
            Err(e) => return Err(rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &e.to_string())),
        };
        self.mark_activity(session).await;
        Ok(id)
    }

    /// Record that the session was used now (coalesced: at most once per
    /// `activity_interval`). Losing the race to a request marking the same
    /// activity is fine; losing it to the alarm's write (which bumps the
    /// version) is not, so the write is tried again on the fresh record. A
    /// store failure does not fail the request: it is logged and counted,
    /// since the alarm may then see the session idle for longer than it was.
    async fn mark_activity(&self, mut session: Session) {
        for _ in 0..2 {
            let now = self.config.clock.now();
            if now.since(session.last_activity_at) < self.config.activity_interval {
                return;
            }
            session.last_activity_at = now;
            session.expires_at = now.plus(self.config.session_retention);
            match self.sessions.update_session(&mut session).await {
                Ok(()) => return,
                Err(StoreError::Conflict { .. }) => {
                    match self.sessions.get_session(Access::Internal, &session.id).await {
                        Ok(fresh) if fresh.is_active() => session = fresh,
                        _ => return,
                    }
                }
                Err(StoreError::NotFound { .. }) => return,
                Err(error) => {
                    executor_telemetry::count(Metric::ActivityWriteFailures);
                    tracing::warn!(mcp.session.id = session.id.as_str(), %error, "could not record the session's activity");
                    return;
                }
            }
        }
    }

    /// `DELETE /mcp`: end the caller's session.
    async fn delete(&self, headers: &HeaderMap, owner: &Principal) -> Response<Bytes> {
        let Some(value) = headers.get(SESSION_HEADER) else {
            return rpc_error(StatusCode::BAD_REQUEST, -32600, "DELETE needs the Mcp-Session-Id header");
        };
        let id = match self.check_session(value, owner).await {
            Ok(id) => id,
            Err(response) => return response,
        };
        for _ in 0..3 {
            let mut session = match self.sessions.get_session(Access::Owner(owner), &id).await {
                Ok(session) if session.is_active() => session,
                _ => return rpc_error(StatusCode::NOT_FOUND, -32001, "Session not found"),
            };
            match self.alarms.destroy(&mut session).await {
                Ok(()) => return empty(StatusCode::NO_CONTENT),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &e.to_string()),
            }
        }
        rpc_error(StatusCode::CONFLICT, -32000, "the session is busy; try again")
    }

    /// Native mode needs a request-state key and a 2026-07-28 client
    /// (input-required results) that declares it can answer an elicitation;
    /// otherwise its requests are served in model mode.
    fn effective_mode(&self, mode: ElicitationMode, headers: &HeaderMap, message: &Value) -> ElicitationMode {
        let version = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let native = self.native_available && version >= STATELESS_VERSION && answers_elicitation(message);
        match mode {
            ElicitationMode::Native if !native => ElicitationMode::Model,
            mode => mode,
        }
    }

    fn base_url(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.config.public_url {
            return url.trim_end_matches('/').to_owned();
        }
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
        let scheme = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).unwrap_or("http");
        format!("{scheme}://{host}")
    }
}

/// Whether a 2026-07-28 request's client capabilities (in `_meta`, SEP-2575)
/// include elicitation: a client without it could never answer the approval.
fn answers_elicitation(message: &Value) -> bool {
    message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].get("elicitation").is_some()
}

/// What the request span may say about a JSON-RPC message: its method, the
/// tool it calls, the protocol version (the header, or what `initialize` asks for).
fn record_request(message: &Value, headers: &HeaderMap) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    span.record("mcp.method.name", method);
    if method == "tools/call"
        && let Some(tool) = message["params"]["name"].as_str()
    {
        span.record("gen_ai.tool.name", tool);
    }
    let version = match method {
        "initialize" => message["params"]["protocolVersion"].as_str(),
        _ => headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()),
    };
    if let Some(version) = version {
        span.record("mcp.protocol.version", version);
    }
}

/// `?elicitation_mode=model|browser|native`.
fn elicitation_mode(query: Option<&str>, default: ElicitationMode) -> Result<ElicitationMode, String> {
    let value = query.into_iter().flat_map(|q| q.split('&')).find_map(|pair| pair.strip_prefix("elicitation_mode="));
    value.map_or(Ok(default), parse_mode)
}

fn parse_mode(value: &str) -> Result<ElicitationMode, String> {
    match value {
        "model" => Ok(ElicitationMode::Model),
        "browser" => Ok(ElicitationMode::Browser),
        "native" => Ok(ElicitationMode::Native),
        other => Err(format!("elicitation_mode must be model, browser or native, not {other:?}")),
    }
}

/// A request `/mcp` did not let in: 401, or 503 when the keys cannot be read.
fn rpc_refusal(status: StatusCode, message: &str) -> Response<Bytes> {
    rpc_error(status, if status == StatusCode::UNAUTHORIZED { -32001 } else { -32603 }, message)
}

fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response<Bytes> {
    json_response(status, &json!({ "jsonrpc": "2.0", "error": { "code": code, "message": message }, "id": null }))
}

fn json_response(status: StatusCode, body: &Value) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text(status: StatusCode, body: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(body.as_bytes()));
    *response.status_mut() = status;
    response
}

fn empty(status: StatusCode) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = status;
    response
}

fn preflight() -> Response<Bytes> {
    let mut response = empty(StatusCode::NO_CONTENT);
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST, DELETE, OPTIONS"));
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, accept, mcp-session-id, mcp-protocol-version, mcp-method, mcp-name, last-event-id"),
    );
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    response
}

/// Bearer tokens, not cookies, carry authority here, so any origin may call.
fn with_cors(mut response: Response<Bytes>) -> Response<Bytes> {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("Mcp-Session-Id, WWW-Authenticate"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
        };
        let config = HostConfig::default()
            .with_env(env(&[
                ("EXECUTOR_SESSION_TIMEOUT_MS", "60000"),
                ("EXECUTOR_APPROVAL_WINDOW_MS", " 1500 "),
                ("EXECUTOR_PUBLIC_URL", "https://exec.example.com"),
                ("EXECUTOR_ELICITATION_MODE", "browser"),
                ("EXECUTOR_APPROVAL_WAIT_MS", "5000"),
                ("EXECUTOR_REQUEST_STATE_KEY", "0123456789abcdef0123456789abcdef"),
            ]))
            .unwrap();
        assert_eq!(config.default_mode, ElicitationMode::Browser);
        assert_eq!(config.approval_wait, Duration::from_secs(5));
        assert!(config.request_state_key.is_some());
        assert_eq!(config.timeouts.session_timeout, Duration::from_secs(60));
        assert_eq!(config.timeouts.paused_lease, Timeouts::default().paused_lease);
        assert_eq!(config.timeouts.approval_window, Duration::from_millis(1500));
        assert_eq!(config.public_url.as_deref(), Some("https://exec.example.com"));
        assert_eq!(config.oidc, None);
        let with_oidc = HostConfig::default()
            .with_env(env(&[("EXECUTOR_OIDC_ISSUER", "https://idp.example"), ("EXECUTOR_OIDC_AUDIENCE", "executor")]))
            .unwrap();
        let oidc = with_oidc.oidc.unwrap();
        assert_eq!(
            (oidc.issuer.as_str(), oidc.audience.as_str(), oidc.owner_claim.as_str()),
            ("https://idp.example", "executor", "sub")
        );
        let missing = HostConfig::default().with_env(env(&[("EXECUTOR_OIDC_ISSUER", "https://idp.example")]));
        assert_eq!(missing.unwrap_err().name, "EXECUTOR_OIDC_AUDIENCE");
        let short = HostConfig::default().with_env(env(&[("EXECUTOR_REQUEST_STATE_KEY", "too short")]));
        assert_eq!(short.unwrap_err().name, "EXECUTOR_REQUEST_STATE_KEY");
        let mode = HostConfig::default().with_env(env(&[("EXECUTOR_ELICITATION_MODE", "pigeon")]));
        assert_eq!(
            mode.unwrap_err().to_string(),
            "EXECUTOR_ELICITATION_MODE must be model, browser or native, not \"pigeon\""
        );
        for bad in ["0", "-5", "5m", ""] {
            let pairs: &'static [(&'static str, &'static str)] =
                Box::leak(Box::new([("EXECUTOR_PAUSED_LEASE_MS", bad)]));
            let error = HostConfig::default().with_env(env(pairs)).unwrap_err();
            assert_eq!(error.name, "EXECUTOR_PAUSED_LEASE_MS", "{bad:?}");
        }
    }

    #[test]
    fn the_public_url_is_checked_and_its_host_allowed() {
        let config = HostConfig::default().with_public_url("http://team-box:8787/").unwrap();
        assert_eq!(config.public_url.as_deref(), Some("http://team-box:8787"));
        assert_eq!(config.allowed_hosts.unwrap(), ["localhost", "127.0.0.1", "::1", "team-box:8787"]);
        let behind_a_proxy = HostConfig::default().with_public_url("https://exec.example.com/team").unwrap();
        assert_eq!(behind_a_proxy.allowed_hosts.unwrap().last().unwrap(), "exec.example.com");
        let any_host = HostConfig { allowed_hosts: None, ..HostConfig::default() };
        assert_eq!(any_host.with_public_url("https://exec.example.com").unwrap().allowed_hosts, None);
        for bad in ["notaurl", "ftp://host", "host:8787", "http://", "http://user:pw@host", "/mcp", "http://h?x=1"] {
            let error = HostConfig::default().with_env(|n| (n == "EXECUTOR_PUBLIC_URL").then(|| bad.to_owned()));
            let message = error.unwrap_err().to_string();
            assert!(
                message.starts_with("EXECUTOR_PUBLIC_URL must be an http:// or https:// URL with a host"),
                "{bad}: {message}"
            );
            assert!(message.ends_with(&format!("not {bad:?}")), "{message}");
        }
    }

    #[test]
    fn elicitation_modes() {
        let cases = [
            (None, Ok(ElicitationMode::Model)),
            (Some("a=1"), Ok(ElicitationMode::Model)),
            (Some("elicitation_mode=browser"), Ok(ElicitationMode::Browser)),
            (Some("x=y&elicitation_mode=native"), Ok(ElicitationMode::Native)),
            (Some("elicitation_mode=model"), Ok(ElicitationMode::Model)),
        ];
        for (query, expected) in cases {
            assert_eq!(elicitation_mode(query, ElicitationMode::Model), expected, "{query:?}");
        }
        assert!(elicitation_mode(Some("elicitation_mode=carrier-pigeon"), ElicitationMode::Model).is_err());
    }
}
