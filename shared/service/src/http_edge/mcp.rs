//! The MCP edge: `/mcp` and each toolkit's endpoint, in front of rmcp's
//! *stateless* Streamable HTTP service. The `Host` is checked here
//! (`allowed_hosts`), then who calls (a key
//! scoped to a toolkit works on its endpoint only), the body is capped and
//! parsed, the session named by `Mcp-Session-Id` checked, the elicitation
//! mode chosen; MCP task messages (2025-11-25 and the 2026-07-28 extension)
//! and the upstreams' UI resources (MCP Apps: `resources/*`, where there are
//! any) are answered before rmcp, and so is the common `tools/call` of a
//! client before 2026-07-28 (`direct_call`, the same handler rmcp would run);
//! everything else by rmcp and the `execute` and `resume` tools (`mcp_tools`).
//!
//! Stateless rather than rmcp's session mode with its `SessionStore`: rmcp's
//! session mode keeps a live worker per session in memory, answers with SSE
//! bodies and opens never-ending GET streams (which hang a buffered Lambda).
//! Stateless, any instance answers any request; sessions are ours
//! (`sessions`).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use executor_core::{DecidedBy, ElicitationMode, Principal, ToolkitName};
use executor_sandbox::Tools;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tracing::Span;

use crate::application::sessions::{STATELESS_VERSION, Sessions};
use crate::compose::Services;
use crate::config::{HostConfig, parse_mode};
use crate::http_edge::allowed_hosts::AllowedHosts;
use crate::http_edge::auth::{Authenticated, Authenticator, rpc_refusal, scoped_elsewhere};
use crate::http_edge::direct_call::DirectCall;
use crate::http_edge::mcp_tools::{Caller, McpServer, tasks_extension, ui_resources};
use crate::http_edge::native::NativeApprovals;
use crate::http_edge::responses::{json_response, preflight, rpc_error};
use crate::http_edge::sessions::{self, SESSION_HEADER};
use crate::http_edge::spans;

type McpService = StreamableHttpService<McpServer, LocalSessionManager>;

/// An MCP endpoint: rmcp's service, and the server behind it for the
/// messages answered before rmcp (MCP tasks).
#[derive(Clone)]
struct McpEndpoint {
    server: McpServer,
    http: McpService,
}

pub(crate) struct McpEdge {
    hosts: AllowedHosts,
    auth: Arc<Authenticator>,
    sessions: Arc<Sessions>,
    root: McpEndpoint,
    toolkits: HashMap<ToolkitName, McpEndpoint>,
    max_body_bytes: usize,
    default_mode: ElicitationMode,
    /// Whether native approvals can be offered (a request-state key is set).
    native_available: bool,
}

impl McpEdge {
    /// `/mcp` over `tools` (its `execute` lists `namespaces`), and one
    /// endpoint per configured toolkit over the toolkit's view.
    pub fn new(
        services: &Services,
        auth: Arc<Authenticator>,
        tools: Arc<dyn Tools>,
        namespaces: &[String],
        config: &HostConfig,
    ) -> Self {
        let native = config.request_state_key.as_ref().map(|key| {
            // A state outlives its pause by no more than the approval window.
            Arc::new(NativeApprovals::new(key, config.timeouts.approval_window))
        });
        let rmcp_config = rmcp_config(config);
        let endpoint = |server: McpServer| -> McpEndpoint {
            let served = server.clone();
            let http = StreamableHttpService::new(move || Ok(served.clone()), Default::default(), rmcp_config.clone());
            McpEndpoint { server, http }
        };
        let executions = &services.executions;
        let toolkits = config
            .toolkits
            .iter()
            .map(|t| {
                let server = McpServer::new(executions.clone(), t.tools.clone(), &t.namespaces, native.clone());
                (t.name.clone(), endpoint(server))
            })
            .collect();
        Self {
            hosts: AllowedHosts::new(config.allowed_hosts.as_deref()),
            auth,
            sessions: services.sessions.clone(),
            native_available: native.is_some(),
            root: endpoint(McpServer::new(executions.clone(), tools, namespaces, native)),
            toolkits,
            max_body_bytes: config.max_body_bytes,
            default_mode: config.default_mode,
        }
    }

    /// The configured toolkit of that name, if any.
    pub fn toolkit(&self, name: &str) -> Option<&ToolkitName> {
        self.toolkits.get_key_value(name).map(|(name, _)| name)
    }

    /// `/mcp` (`toolkit` is `None`) or a toolkit's endpoint; links point at `base_url`.
    pub async fn serve(
        &self,
        request: Request<Bytes>,
        toolkit: Option<&ToolkitName>,
        base_url: String,
    ) -> Response<Bytes> {
        if request.method() == Method::OPTIONS {
            return preflight();
        }
        if let Err(refused) = self.hosts.check(request.uri(), request.headers()) {
            let (status, message) = refused.answer();
            return rpc_error(status, -32600, &message);
        }
        let (owner, credential) = match self.auth.authenticate_scoped(request.headers(), &base_url, rpc_refusal).await {
            Ok(Authenticated { owner, toolkit: None, credential }) => (owner, credential),
            Ok(Authenticated { owner, toolkit: Some(scope), credential }) if Some(&scope) == toolkit => {
                (owner, credential)
            }
            Ok(Authenticated { toolkit: Some(scope), .. }) => {
                return rpc_refusal(StatusCode::FORBIDDEN, &scoped_elsewhere(&scope));
            }
            Err(response) => return response,
        };
        let endpoint = toolkit.and_then(|name| self.toolkits.get(name)).unwrap_or(&self.root);
        match *request.method() {
            Method::POST => self.post(request, (owner, credential), endpoint, toolkit, base_url).await,
            Method::DELETE => sessions::end(&self.sessions, request.headers(), &owner, toolkit).await,
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
        (owner, credential): (Principal, DecidedBy),
        endpoint: &McpEndpoint,
        toolkit: Option<&ToolkitName>,
        base_url: String,
    ) -> Response<Bytes> {
        let (mut parts, body) = request.into_parts();
        if body.len() > self.max_body_bytes {
            let message = format!("the request is {} bytes, over the {}-byte limit", body.len(), self.max_body_bytes);
            return rpc_error(StatusCode::PAYLOAD_TOO_LARGE, -32600, &message);
        }
        let message: Value = match serde_json::from_slice(&body) {
            Ok(message) => message,
            Err(e) => return rpc_error(StatusCode::BAD_REQUEST, -32700, &format!("Parse error: {e}")),
        };
        if let Some(error) = crate::http_edge::jsonrpc::invalid_params(&message) {
            return json_response(StatusCode::OK, &error);
        }
        let mode = match elicitation_mode(parts.uri.query(), self.default_mode) {
            Ok(mode) => mode,
            Err(message) => return rpc_error(StatusCode::BAD_REQUEST, -32602, &message),
        };
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        record_request(&message, &parts.headers);
        let session = match parts.headers.get(SESSION_HEADER) {
            Some(_) if initialize => None,
            Some(value) => match sessions::check(&self.sessions, value, &owner, toolkit).await {
                Ok(session) => {
                    spans::record("mcp.session.id", session.as_str());
                    Some(session)
                }
                Err(response) => return response,
            },
            None => None,
        };
        let mode = self.effective_mode(mode, &parts.headers, &message);
        spans::record("executor.elicitation_mode", mode.as_str());
        let caller = Caller { owner: owner.clone(), credential, session, mode, base_url, span: Span::current() };
        // The task messages' futures boxed: inline, they (kilobytes) would
        // size every request's future, which is moved at each await.
        if tasks_extension::is_extension_request(&message, &parts.headers) {
            return Box::pin(endpoint.server.answer_tasks_extension(&caller, &parts.headers, &message)).await;
        }
        if crate::http_edge::mcp_tools::is_task_message(&message) {
            let answer = Box::pin(endpoint.server.answer_task_message(&caller, &message)).await;
            return json_response(StatusCode::OK, &answer);
        }
        if ui_resources::answers(&message, endpoint.server.tools()) {
            return endpoint.server.answer_resources(&caller, &parts.headers, &message).await;
        }
        if let Some(call) = DirectCall::of(&message, &parts.headers) {
            return call.answer(&endpoint.server, caller).await;
        }
        // A 2026-07-28 execute that declares the tasks extension: `running` may become a task.
        let task_caller = tasks_extension::may_become_task(&message, &parts.headers).then(|| caller.clone());
        parts.extensions.insert(caller);
        let response = forward(&endpoint.http, Request::from_parts(parts, body)).await;
        let response = match message.get("method").and_then(Value::as_str) {
            Some(method @ ("initialize" | "tools/list" | "server/discover")) => {
                with_declarations(method, response, &endpoint.server)
            }
            _ => response,
        };
        let response = match task_caller {
            Some(caller) => Box::pin(endpoint.server.as_task(&caller, response)).await,
            None => response,
        };
        if !initialize || response.status() != StatusCode::OK {
            return response;
        }
        sessions::start(&self.sessions, response, &message, owner, mode, toolkit).await
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
}

/// rmcp's stateless, JSON-answering configuration, with the body cap. Its
/// `Host` check is off: [`McpEdge::serve`] checks every request first.
fn rmcp_config(config: &HostConfig) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_max_request_body_bytes(config.max_body_bytes)
        .disable_allowed_hosts()
}

/// rmcp's answer to `method`, declaring what [`crate::http_edge::mcp_tools`] adds: MCP tasks
/// (and, in `server/discover`, the tasks extension), and MCP Apps when the
/// endpoint has UI resources.
fn with_declarations(method: &str, response: Response<Bytes>, server: &McpServer) -> Response<Bytes> {
    let (parts, body) = response.into_parts();
    let Ok(mut message) = serde_json::from_slice::<Value>(&body) else {
        return Response::from_parts(parts, body);
    };
    crate::http_edge::mcp_tools::declare_tasks(method, &mut message);
    ui_resources::declare(method, &mut message, server.tools());
    let mut response = json_response(parts.status, &message);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_LENGTH {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

async fn forward(service: &McpService, request: Request<Bytes>) -> Response<Bytes> {
    // Boxed: rmcp's future is kilobytes, and every future awaiting it
    // inline would be as large, moved by each layer down to hyper's.
    let response = Box::pin(service.handle(request.map(Full::new))).await;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    crate::http_edge::jsonrpc::error_as_json_rpc(Response::from_parts(parts, body))
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
