//! The host: the application's services (built by [`compose`]) behind the
//! routes of both surfaces, framework-neutral (`http::Request<Bytes>` ->
//! `http::Response<Bytes>`), used by `executor serve` and the Lambda shell
//! alike. Each request is parsed into a [`Route`] once; the authenticated API
//! routes pass one guard; then the room that answers it: the MCP edge
//! (`mcp`), the approval page and JSON API (`approvals`), the console
//! (`console`), grants (`grants_api`), the connect flow (`connect`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use executor_core::{ClientSite, DecidedBy, ExecutionId, Principal, ToolkitName};
use executor_sandbox::{Readiness, Sandbox, SourceReadiness, Tools};
use executor_scheduler::AlarmScheduler;
use executor_store::Store;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::application::alarms::Alarms;
use crate::application::executions::{ExecutionResult, ResumeError};
use crate::compose::{Services, compose};
use crate::config::HostConfig;
use crate::http_edge::approvals::ApprovalRoutes;
use crate::http_edge::auth::{Authenticated, Authenticator, scoped_elsewhere};
use crate::http_edge::connect::ConnectRoutes;
use crate::http_edge::console::ConsoleRoutes;
use crate::http_edge::mcp::McpEdge;
use crate::http_edge::oidc::Oidc;
use crate::http_edge::responses::{api_error, api_json, json_response, rpc_error, text, with_cors};
use crate::http_edge::routes::{Api, Route, Surface};
use crate::http_edge::spans;

/// Who calls an API route, past the guard: the owner, their credential, and
/// the toolkit (with its view) a scoped key is limited to.
struct ApiCaller {
    owner: Principal,
    credential: DecidedBy,
    scope: Option<(ToolkitName, Arc<dyn Tools>)>,
}

#[derive(Clone)]
pub struct Host {
    services: Services,
    auth: Arc<Authenticator>,
    mcp: Arc<McpEdge>,
    approvals: Arc<ApprovalRoutes>,
    console: Arc<ConsoleRoutes>,
    /// The connect flow and `/api/connections`, when a source connects per owner.
    connect: Option<Arc<ConnectRoutes>>,
    /// Each toolkit's view, for the JSON API calls of keys scoped to it.
    toolkits: Arc<HashMap<ToolkitName, Arc<dyn Tools>>>,
    config: HostConfig,
    tools: Arc<dyn Tools>,
}

impl Host {
    /// The services [`compose`]d from `config`, served over `tools` (whose
    /// namespaces `execute` lists).
    pub fn new<S: Store + 'static>(
        store: Arc<S>,
        tools: Arc<dyn Tools>,
        namespaces: &[String],
        sandbox: Sandbox,
        scheduler: Arc<dyn AlarmScheduler>,
        config: HostConfig,
    ) -> Self {
        let services = compose(store.clone(), sandbox, scheduler, &config);
        let oidc = config.oidc.clone().map(|oidc| Arc::new(Oidc::new(oidc)));
        let console = Arc::new(ConsoleRoutes {
            sign_in: services.console.clone(),
            executions: services.executions.clone(),
            history: services.history.clone(),
            grants: services.grants.clone(),
            connections: config.connections.clone(),
            tools: tools.clone(),
            oidc: oidc.clone().filter(|oidc| oidc.console_client_id().is_some()),
        });
        let auth = Arc::new(Authenticator::new(store, oidc, config.clock.clone()));
        let mcp = Arc::new(McpEdge::new(&services, auth.clone(), tools.clone(), namespaces, &config));
        let executions = services.executions.clone();
        let approvals = Arc::new(ApprovalRoutes::new(executions.clone(), tools.clone()));
        let connect = config
            .connections
            .clone()
            .map(|connections| Arc::new(ConnectRoutes::new(connections, executions, tools.clone())));
        let toolkits = config.toolkits.iter().map(|t| (t.name.clone(), t.tools.clone())).collect();
        Self { services, auth, mcp, approvals, console, connect, toolkits: Arc::new(toolkits), config, tools }
    }

    /// Wait, at most `wait`, for event delivery under way (a host that stops
    /// running once it answers calls this before answering; see docs/events.md).
    pub async fn settle_events(&self, wait: std::time::Duration) {
        if let Some(events) = &self.services.events {
            events.settle(wait).await;
        }
    }

    /// Every request gives the outbox a chance to retry what is left in it.
    fn sweep_events(&self) {
        if let Some(events) = &self.services.events {
            events.sweep();
        }
    }

    /// The alarm handler: what a fired alarm (in-process timer or the alarm
    /// function) calls.
    pub fn alarms(&self) -> Arc<Alarms> {
        self.services.alarms.clone()
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
        match Surface::of(request.uri().path()) {
            Surface::Approvals => self.handle_approvals(request).await,
            Surface::Mcp => self.handle_mcp(request).await,
        }
    }

    /// The MCP function's routes: `/mcp`, `/.well-known/...`, `/healthz`,
    /// `/readyz`, each request in an `mcp.request` span.
    pub async fn handle_mcp(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.sweep_events();
        let span = spans::mcp_request(&request);
        let started = Instant::now();
        let response = self.route(Surface::Mcp, request).instrument(span.clone()).await;
        spans::finish(&span, response.status(), started);
        response
    }

    /// The approval function's routes: `/approvals/{id}` (link token),
    /// `/oauth/...` and `/api/...` (bearer token of the owner), each request
    /// in an `approval.request` span.
    pub async fn handle_approvals(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.sweep_events();
        let span = spans::approval_request(&request);
        let started = Instant::now();
        let response = self.route(Surface::Approvals, request).instrument(span.clone()).await;
        spans::finish(&span, response.status(), started);
        response
    }

    async fn route(&self, surface: Surface, request: Request<Bytes>) -> Response<Bytes> {
        let base_url = self.base_url(request.headers());
        match Route::parse(surface, request.method(), request.uri().path()) {
            Route::Health => text(StatusCode::OK, "ok"),
            Route::Ready => ready(&self.tools.readiness()),
            Route::ProtectedResource => with_cors(self.protected_resource(&base_url)),
            Route::Mcp => with_cors(self.mcp.serve(request, None, base_url).await),
            Route::Toolkit(name) => match self.mcp.toolkit(name).cloned() {
                Some(name) => with_cors(self.mcp.serve(request, Some(&name), base_url).await),
                None => with_cors(crate::http_edge::toolkits::unknown(name)),
            },
            // The other routes' futures boxed: inline, the largest (kilobytes)
            // would size every request's future, moved at each await.
            Route::ApprovalPage => Box::pin(self.approvals.page(&request, base_url.starts_with("https://"))).await,
            Route::Console => Box::pin(self.console.handle(&request, &base_url)).await,
            Route::Connect | Route::ConnectCallback => Box::pin(self.connect(request, &base_url)).await,
            Route::Api(api) => match self.guard(&request, api, &base_url).await {
                Ok(caller) => Box::pin(self.api(api, &request, caller, &base_url)).await,
                Err(refusal) => refusal,
            },
            Route::ClientMetadata => json_response(StatusCode::OK, &ClientSite::new(&base_url).client_metadata()),
            Route::NotFound => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    /// The one guard of the authenticated API routes: who calls, and the
    /// toolkit view their key is scoped to. Grants and connections are the
    /// owner's own, not a toolkit's: a scoped key cannot manage them; a key
    /// whose toolkit is no longer configured reaches nothing.
    async fn guard(&self, request: &Request<Bytes>, api: Api, base_url: &str) -> Result<ApiCaller, Response<Bytes>> {
        let Authenticated { owner, toolkit, credential } =
            self.auth.authenticate_scoped(request.headers(), base_url, api_error).await?;
        let Some(name) = toolkit else { return Ok(ApiCaller { owner, credential, scope: None }) };
        match (api, self.toolkits.get(&name)) {
            (Api::Executions | Api::History, Some(view)) => {
                Ok(ApiCaller { owner, credential, scope: Some((name, view.clone())) })
            }
            _ => Err(api_error(StatusCode::FORBIDDEN, &scoped_elsewhere(&name))),
        }
    }

    async fn api(&self, api: Api, request: &Request<Bytes>, caller: ApiCaller, base_url: &str) -> Response<Bytes> {
        let ApiCaller { owner, credential, scope } = caller;
        let owner = &owner;
        match api {
            Api::Executions => {
                let view = scope.map(|(_, view)| view);
                self.approvals.api(request, (owner, &credential), view, base_url).await
            }
            Api::History => {
                let toolkit = scope.as_ref().map(|(name, _)| name);
                crate::http_edge::history_api::answer(&self.services.history, request, owner, toolkit).await
            }
            Api::Grants => crate::http_edge::grants_api::answer(&self.services.grants, request, owner).await,
            Api::Connections => match &self.connect {
                Some(connect) => connect.api(request, owner).await,
                None if request.method() == Method::GET => json_response(StatusCode::OK, &json!({"connections": []})),
                None => api_json(
                    StatusCode::NOT_FOUND,
                    &json!({"error": {"code": "connection_not_found", "message": "no source connects per owner"}}),
                ),
            },
        }
    }

    /// `/oauth/connect/{id}` and `/oauth/callback`.
    async fn connect(&self, request: Request<Bytes>, base_url: &str) -> Response<Bytes> {
        let Some(connect) = &self.connect else {
            return text(StatusCode::NOT_FOUND, "no source connects per owner");
        };
        match request.uri().path() == crate::http_edge::connect::CALLBACK_PATH {
            false => connect.connect(&request, base_url).await,
            true => connect.callback(&request, base_url).await,
        }
    }

    /// The protected resource metadata: where MCP clients learn how to authenticate.
    fn protected_resource(&self, base_url: &str) -> Response<Bytes> {
        let mut metadata = json!({
            "resource": format!("{base_url}/mcp"),
            "bearer_methods_supported": ["header"],
            "resource_name": "Executor",
        });
        if let Some(issuer) = self.auth.issuer() {
            metadata["authorization_servers"] = json!([issuer]);
        }
        json_response(StatusCode::OK, &metadata)
    }

    /// Continue an execution the MCP function handed on: claim it (one
    /// winner; a second delivery finds it claimed) and run it to its end. On
    /// AWS the approval function's shell calls this for a continuation event,
    /// which no HTTP request can be; nobody reads the outcome but the logs.
    pub async fn continue_execution(&self, id: &ExecutionId) -> Result<ExecutionResult, ResumeError> {
        self.sweep_events();
        let outcome = self.services.executions.continue_handed_on(id, self.tools.clone()).await;
        match &outcome {
            Ok(result) => {
                tracing::info!(executor.execution.id = id.as_str(), status = result.status(), "continuation ended")
            }
            Err(error) => tracing::warn!(executor.execution.id = id.as_str(), %error, "continuation not run"),
        }
        outcome
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

/// `GET /readyz`: 200 `{"status":"ready","sources":{...}}` when every source
/// is connected, else 503 `{"status":"degraded","sources":{...}}` with why
/// and until when each unavailable one waits for its next retry. Never
/// cached: it changes as sources connect.
fn ready(readiness: &Readiness) -> Response<Bytes> {
    let source = |state: &SourceReadiness| match state {
        SourceReadiness::Connected => json!({"state": "connected"}),
        SourceReadiness::Unavailable { reason, since, next_retry_at } => json!({
            "state": "unavailable",
            "reason": reason,
            "since": since.to_rfc3339(),
            "nextRetryAt": next_retry_at.to_rfc3339(),
        }),
    };
    let sources: serde_json::Map<String, Value> =
        readiness.sources.iter().map(|(namespace, state)| (namespace.clone(), source(state))).collect();
    let (status, word) = match readiness.is_ready() {
        true => (StatusCode::OK, "ready"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "degraded"),
    };
    let mut response = json_response(status, &json!({"status": word, "sources": sources}));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use executor_core::Timestamp;

    use super::*;

    #[test]
    fn readiness_is_200_when_every_source_is_connected_else_503_with_each_outage() {
        let body = |response: &Response<Bytes>| serde_json::from_slice::<Value>(response.body()).unwrap();
        let mut readiness = Readiness::default();
        let none = ready(&readiness);
        assert_eq!((none.status(), body(&none)), (StatusCode::OK, json!({"status": "ready", "sources": {}})));
        readiness.sources.insert("shop".into(), SourceReadiness::Connected);
        let connected = ready(&readiness);
        assert_eq!(connected.status(), StatusCode::OK);
        assert_eq!(body(&connected), json!({"status": "ready", "sources": {"shop": {"state": "connected"}}}));
        assert_eq!(connected.headers()[header::CACHE_CONTROL], "no-store");
        assert_eq!(connected.headers()[header::CONTENT_TYPE], "application/json");
        let (since, next_retry_at) =
            (Timestamp::from_millis(1_795_895_181_000), Timestamp::from_millis(1_795_895_183_000));
        let reason = "source `gh` (spec) failed: HTTP 503".to_owned();
        readiness.sources.insert("gh".into(), SourceReadiness::Unavailable { reason, since, next_retry_at });
        let degraded = ready(&readiness);
        assert_eq!(degraded.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body(&degraded),
            json!({"status": "degraded", "sources": {
                "gh": {"state": "unavailable", "reason": "source `gh` (spec) failed: HTTP 503",
                    "since": "2026-11-28T19:46:21.000Z", "nextRetryAt": "2026-11-28T19:46:23.000Z"},
                "shop": {"state": "connected"},
            }})
        );
    }
}
