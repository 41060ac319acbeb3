//! The host: the services wired together, and the routes of both surfaces,
//! framework-neutral (`http::Request<Bytes>` -> `http::Response<Bytes>`), used
//! by `executor serve` and the Lambda shell alike. The MCP surface is `/mcp`,
//! `/.well-known/...` and `/healthz`; the approval surface is `/approvals/...`
//! and `/api/...`. Who is calling is `auth`'s business, sessions are
//! `sessions`', the tools `mcp`'s, approvals `approvals`'.
//!
//! MCP requests go to rmcp's *stateless* Streamable HTTP service, rather than
//! rmcp's session mode with its `SessionStore`: rmcp's session mode keeps a
//! live worker per session in memory, answers with SSE bodies and opens
//! never-ending GET streams (which hang a buffered Lambda). Stateless, any
//! instance answers any request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use executor_core::{ClientSite, ElicitationMode, ExecutionId, Principal, ToolkitName};
use executor_sandbox::{Sandbox, Tools};
use executor_scheduler::AlarmScheduler;
use executor_store::Store;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tracing::{Instrument, Span};

use crate::approvals::ApprovalRoutes;
use crate::auth::{Authenticator, rpc_refusal, scoped_elsewhere};
use crate::config::{HostConfig, parse_mode};
use crate::connections::{CALLBACK_PATH, CONNECT_PREFIX, ConnectRoutes};
use crate::grants::Grants;
use crate::mcp_tools::{Caller, McpServer};
use crate::native::NativeApprovals;
use crate::oidc::Oidc;
use crate::quotas::QuotaGate;
use crate::responses::{json_response, preflight, rpc_error, text, with_cors};
use crate::sessions::{SESSION_HEADER, STATELESS_VERSION, Sessions};
use crate::toolkits::TOOLKITS_PATH;
use crate::{Alarms, Events, ExecutionResult, Executions, ResumeError, spans};

type McpService = StreamableHttpService<McpServer, LocalSessionManager>;

/// An MCP endpoint: rmcp's service, and the server behind it for the
/// messages answered before rmcp (MCP tasks).
#[derive(Clone)]
struct McpEndpoint {
    server: McpServer,
    http: McpService,
}

/// A toolkit's endpoint: its view of the tools (for its owners' JSON API
/// calls) and its MCP endpoint.
#[derive(Clone)]
struct ToolkitRoute {
    tools: Arc<dyn Tools>,
    mcp: McpEndpoint,
}

#[derive(Clone)]
pub struct Host {
    auth: Arc<Authenticator>,
    sessions: Arc<Sessions>,
    alarms: Arc<Alarms>,
    approvals: Arc<ApprovalRoutes>,
    grants: Arc<Grants>,
    /// The connect flow and `/api/connections`, when a source connects per owner.
    connect: Option<Arc<ConnectRoutes>>,
    mcp: McpEndpoint,
    toolkits: Arc<HashMap<ToolkitName, ToolkitRoute>>,
    config: HostConfig,
    native_available: bool,
    executions: Arc<Executions>,
    tools: Arc<dyn Tools>,
    events: Option<Events>,
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
        let views = config.toolkits.iter().map(|t| (t.name.clone(), t.tools.clone())).collect();
        let grants = Arc::new(Grants::new(store.clone(), clock.clone(), config.grant_ttl));
        let events = config.event_sink.clone().map(|sink| {
            let outbox: Arc<dyn executor_store::OutboxStore> = store.clone();
            Events::new(outbox, sink, clock.clone(), config.event_links())
        });
        let executions = Arc::new(
            Executions::new(store.clone(), sandbox, config.timeouts, clock)
                .with_approval_wait(config.approval_wait)
                .with_max_concurrent(config.max_concurrent_executions)
                .with_response_budget(config.response_budget)
                .with_continuations(config.continuations.clone())
                .with_toolkits(views)
                .with_quotas(QuotaGate::new(store.clone(), config.quotas.clone()))
                .with_grants(grants.clone())
                .with_connections(config.connections.clone())
                .with_events(events.clone()),
        );
        let approvals = Arc::new(ApprovalRoutes::new(executions.clone(), tools.clone()));
        let connect = config
            .connections
            .clone()
            .map(|connections| Arc::new(ConnectRoutes::new(connections, executions.clone(), tools.clone())));
        let alarms =
            Arc::new(Alarms::new(store.clone(), store.clone(), scheduler, config.timeouts).with_events(events.clone()));
        let native = config.request_state_key.as_ref().map(|key| {
            // A state outlives its pause by no more than the approval window.
            Arc::new(NativeApprovals::new(key, config.timeouts.approval_window))
        });
        let native_available = native.is_some();
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
        let endpoint = |server: McpServer| -> McpEndpoint {
            let served = server.clone();
            let http = StreamableHttpService::new(move || Ok(served.clone()), Default::default(), rmcp_config.clone());
            McpEndpoint { server, http }
        };
        let toolkits = config
            .toolkits
            .iter()
            .map(|t| {
                let server = McpServer::new(executions.clone(), t.tools.clone(), &t.namespaces, native.clone());
                (t.name.clone(), ToolkitRoute { tools: t.tools.clone(), mcp: endpoint(server) })
            })
            .collect();
        let mcp = endpoint(McpServer::new(executions.clone(), tools.clone(), namespaces, native));
        let auth =
            Arc::new(Authenticator::new(store.clone(), config.oidc.clone().map(Oidc::new), config.clock.clone()));
        let sessions = Arc::new(Sessions::new(
            store,
            alarms.clone(),
            config.clock.clone(),
            config.activity_interval,
            config.session_retention,
        ));
        Self {
            auth,
            sessions,
            alarms,
            approvals,
            grants,
            connect,
            mcp,
            toolkits: Arc::new(toolkits),
            config,
            native_available,
            executions,
            tools,
            events,
        }
    }

    /// Wait, at most `wait`, for event delivery under way (a host that stops
    /// running once it answers calls this before answering; see docs/events.md).
    pub async fn settle_events(&self, wait: std::time::Duration) {
        if let Some(events) = &self.events {
            events.settle(wait).await;
        }
    }

    /// Every request gives the outbox a chance to retry what is left in it.
    fn sweep_events(&self) {
        if let Some(events) = &self.events {
            events.sweep();
        }
    }

    /// The alarm handler: what a fired alarm (in-process timer or the alarm
    /// function) calls.
    pub fn alarms(&self) -> Arc<Alarms> {
        self.alarms.clone()
    }

    /// Read every API key from the store again from the next request on:
    /// call it when a key was revoked, so it stops working at once rather
    /// than when its verification expires (`auth::KEY_CACHE_TTL`).
    pub fn forget_keys(&self) {
        self.auth.forget_keys();
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
        if path.starts_with("/approvals/") || path.starts_with("/api/") || path.starts_with("/oauth/") {
            self.handle_approvals(request).await
        } else {
            self.handle_mcp(request).await
        }
    }

    /// The MCP function's routes: `/mcp`, `/.well-known/...`, `/healthz`,
    /// each request in an `mcp.request` span.
    pub async fn handle_mcp(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.sweep_events();
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
                if let Some(issuer) = self.auth.issuer() {
                    metadata["authorization_servers"] = json!([issuer]);
                }
                with_cors(json_response(StatusCode::OK, &metadata))
            }
            (_, "/mcp") => with_cors(self.mcp(request, None).await),
            (_, path) if path.starts_with(TOOLKITS_PATH) => {
                let name = &path[TOOLKITS_PATH.len()..];
                match self.toolkits.get_key_value(name) {
                    Some((name, _)) => {
                        let name = name.clone();
                        with_cors(self.mcp(request, Some(&name)).await)
                    }
                    None => with_cors(crate::toolkits::unknown(name)),
                }
            }
            _ => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    /// The approval function's routes: `/approvals/{id}` (link token) and
    /// `/api/executions/...` (bearer token of the owner), each request in an
    /// `approval.request` span.
    pub async fn handle_approvals(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.sweep_events();
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
        if path.starts_with(CONNECT_PREFIX) || path == CALLBACK_PATH {
            let Some(connect) = &self.connect else {
                return text(StatusCode::NOT_FOUND, "no source connects per owner");
            };
            let base_url = self.base_url(request.headers());
            return match path.starts_with(CONNECT_PREFIX) {
                true => connect.connect(&request, &base_url).await,
                false => connect.callback(&request, &base_url).await,
            };
        }
        let grants = path == "/api/grants" || path.starts_with("/api/grants/");
        let connections = path == "/api/connections" || path.starts_with("/api/connections/");
        if connections {
            let base_url = self.base_url(request.headers());
            let auth = self.auth.authenticate_scoped(request.headers(), &base_url, crate::approvals::api_error).await;
            let (owner, scope) = match auth {
                Ok(caller) => caller,
                Err(response) => return response,
            };
            // Connections are the owner's own, not a toolkit's: a scoped key cannot manage them.
            if let Some(name) = scope {
                return crate::approvals::api_error(StatusCode::FORBIDDEN, &scoped_elsewhere(&name));
            }
            return match &self.connect {
                Some(connect) => connect.api(&request, &owner).await,
                None if request.method() == Method::GET => json_response(StatusCode::OK, &json!({"connections": []})),
                None => crate::approvals::api_json(
                    StatusCode::NOT_FOUND,
                    &json!({"error": {"code": "connection_not_found", "message": "no source connects per owner"}}),
                ),
            };
        }
        if path.starts_with("/api/executions/") || grants {
            let base_url = self.base_url(request.headers());
            let auth = self.auth.authenticate_scoped(request.headers(), &base_url, crate::approvals::api_error).await;
            let (owner, scope) = match auth {
                Ok(caller) => caller,
                Err(response) => return response,
            };
            if grants {
                // Grants are the owner's own, not a toolkit's: a scoped key cannot manage them.
                if let Some(name) = scope {
                    return crate::approvals::api_error(StatusCode::FORBIDDEN, &scoped_elsewhere(&name));
                }
                return self.grants.api(&request, &owner).await;
            }
            // A scoped key reaches only its toolkit's executions; one whose
            // toolkit is no longer configured reaches none.
            let scope = match scope {
                None => None,
                Some(name) => match self.toolkits.get(&name) {
                    Some(route) => Some(route.tools.clone()),
                    None => return crate::approvals::api_error(StatusCode::FORBIDDEN, &scoped_elsewhere(&name)),
                },
            };
            return self.approvals.api(&request, &owner, scope, &base_url).await;
        }
        if request.method() == Method::GET && path == "/healthz" {
            return text(StatusCode::OK, "ok");
        }
        if request.method() == Method::GET && path == executor_core::CLIENT_METADATA_PATH {
            return self.client_metadata(request.headers());
        }
        text(StatusCode::NOT_FOUND, "not found")
    }

    /// Continue an execution the MCP function handed on: claim it (one
    /// winner; a second delivery finds it claimed) and run it to its end. On
    /// AWS the approval function's shell calls this for a continuation event,
    /// which no HTTP request can be; nobody reads the outcome but the logs.
    pub async fn continue_execution(&self, id: &ExecutionId) -> Result<ExecutionResult, ResumeError> {
        self.sweep_events();
        let outcome = self.executions.continue_handed_on(id, self.tools.clone()).await;
        match &outcome {
            Ok(result) => {
                tracing::info!(executor.execution.id = id.as_str(), status = result.status(), "continuation ended")
            }
            Err(error) => tracing::warn!(executor.execution.id = id.as_str(), %error, "continuation not run"),
        }
        outcome
    }

    /// `/mcp` (`toolkit` is `None`) or a toolkit's endpoint.
    async fn mcp(&self, request: Request<Bytes>, toolkit: Option<&ToolkitName>) -> Response<Bytes> {
        if request.method() == Method::OPTIONS {
            return preflight();
        }
        let base_url = self.base_url(request.headers());
        let owner = match self.auth.authenticate_scoped(request.headers(), &base_url, rpc_refusal).await {
            Ok((owner, None)) => owner,
            Ok((owner, Some(scope))) if Some(&scope) == toolkit => owner,
            Ok((_, Some(scope))) => return rpc_refusal(StatusCode::FORBIDDEN, &scoped_elsewhere(&scope)),
            Err(response) => return response,
        };
        let endpoint = match toolkit.and_then(|name| self.toolkits.get(name)) {
            Some(route) => &route.mcp,
            None => &self.mcp,
        };
        match *request.method() {
            Method::POST => self.post(request, owner, endpoint, toolkit).await,
            Method::DELETE => self.sessions.end(request.headers(), &owner, toolkit).await,
            _ => {
                let mut response =
                    rpc_error(StatusCode::METHOD_NOT_ALLOWED, -32000, "use POST; this server opens no streams");
                response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, DELETE, OPTIONS"));
                response
            }
        }
    }

    async fn post(
        &self,
        request: Request<Bytes>,
        owner: Principal,
        endpoint: &McpEndpoint,
        toolkit: Option<&ToolkitName>,
    ) -> Response<Bytes> {
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
        if let Some(error) = crate::jsonrpc::invalid_params(&message) {
            return json_response(StatusCode::OK, &error);
        }
        let mode = match elicitation_mode(parts.uri.query(), self.config.default_mode) {
            Ok(mode) => mode,
            Err(message) => return rpc_error(StatusCode::BAD_REQUEST, -32602, &message),
        };
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        record_request(&message, &parts.headers);
        let session = match parts.headers.get(SESSION_HEADER) {
            Some(_) if initialize => None,
            Some(value) => match self.sessions.check(value, &owner, toolkit).await {
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
        let caller = Caller { owner: owner.clone(), session, mode, base_url, span: Span::current() };
        if crate::mcp_tools::is_task_message(&message) {
            return json_response(StatusCode::OK, &endpoint.server.answer_task_message(&caller, &message).await);
        }
        parts.extensions.insert(caller);
        let response = forward(&endpoint.http, Request::from_parts(parts, body)).await;
        let response = match message.get("method").and_then(Value::as_str) {
            Some(method @ ("initialize" | "tools/list")) => with_task_support(method, response),
            _ => response,
        };
        if !initialize || response.status() != StatusCode::OK {
            return response;
        }
        self.sessions.start(response, &message, owner, mode, toolkit).await
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

    /// The Client ID Metadata Document authorization servers read when this
    /// deployment's client id is the document's URL (OAuth-protected MCP sources).
    fn client_metadata(&self, headers: &HeaderMap) -> Response<Bytes> {
        json_response(StatusCode::OK, &ClientSite::new(&self.base_url(headers)).client_metadata())
    }

    fn base_url(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.config.public_url {
            return url.trim_end_matches('/').to_owned();
        }
        // Client headers: a value that is no authority (or carries userinfo)
        // or no known scheme is ignored rather than put into links.
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .filter(|h| !h.contains('@') && h.parse::<http::uri::Authority>().is_ok())
            .unwrap_or("localhost");
        let proto = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).unwrap_or_default();
        // A proxy chain lists the client-facing scheme first.
        let scheme = match proto.split(',').next().map(str::trim) {
            Some(p) if p.eq_ignore_ascii_case("https") => "https",
            _ => "http",
        };
        format!("{scheme}://{host}")
    }
}

/// rmcp's answer to `method`, declaring what [`crate::mcp_tools`] adds: MCP tasks.
fn with_task_support(method: &str, response: Response<Bytes>) -> Response<Bytes> {
    let (parts, body) = response.into_parts();
    let Ok(mut message) = serde_json::from_slice::<Value>(&body) else {
        return Response::from_parts(parts, body);
    };
    crate::mcp_tools::declare_tasks(method, &mut message);
    let mut response = json_response(parts.status, &message);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_LENGTH {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

async fn forward(service: &McpService, request: Request<Bytes>) -> Response<Bytes> {
    let response = service.handle(request.map(Full::new)).await;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    crate::jsonrpc::error_as_json_rpc(Response::from_parts(parts, body))
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

#[cfg(test)]
mod tests {
    use super::*;

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
