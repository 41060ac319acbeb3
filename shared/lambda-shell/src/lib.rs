//! The shell of the two HTTP Lambda functions (MCP and approval): wire the
//! host from the environment, then answer each invocation. The raw event is
//! read here: a continuation event (the approval function only) goes to
//! `Host::continue_execution` before anything is taken for HTTP; an API
//! Gateway event (HTTP API, payload 2.0) becomes the framework-neutral
//! host's request, and its answer goes back. Buffered: no streams are opened.

mod api_gateway;
mod continuations;

pub use continuations::{LambdaContinuations, continuation_event};
pub use lambda_runtime::Error;

use std::sync::Arc;

use executor_catalog::{Catalog, CatalogConfig, McpAuth, OAuthBacking, TokenKey, Vault};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::EventBridgeScheduler;
use executor_service::{Host, HostConfig, ToolkitEndpoint};
use executor_store::DynamoStore;
use executor_telemetry::Telemetry;
use lambda_runtime::{LambdaEvent, Runtime, service_fn};
use serde_json::{Value, json};

/// How long an answer waits for event delivery under way (docs/events.md).
const EVENT_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Which of the host's routes a function serves (API Gateway sends it only those).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routes {
    /// `/mcp`, `/.well-known/...`, `/healthz`.
    Mcp,
    /// `/approvals/...`, `/api/...`.
    Approvals,
}

impl Routes {
    /// The function's name in telemetry (the `Service` metric dimension).
    pub fn service(self) -> &'static str {
        match self {
            Routes::Mcp => "mcp",
            Routes::Approvals => "approval",
        }
    }
}

/// A function's `main` (call it first there): [`run`] on the sandbox's tokio runtime, in UTC.
pub fn main(routes: Routes) -> Result<(), Error> {
    // SAFETY: a function's `main` calls this first, before any thread starts.
    unsafe { executor_sandbox::pin_time_zone() };
    executor_sandbox::tokio_runtime()?.block_on(run(routes))
}

/// Wire the host from the environment and serve Lambda invocations until the runtime stops.
pub async fn run(routes: Routes) -> Result<(), Error> {
    let telemetry = Telemetry::lambda(routes.service())?;
    let store = Arc::new(DynamoStore::from_env().await?);
    let scheduler = Arc::new(EventBridgeScheduler::from_env().await?);
    // API Gateway routes by host already; DNS-rebinding checks are for loopback.
    let config = HostConfig { allowed_hosts: None, ..HostConfig::default() }.with_env(|n| std::env::var(n).ok())?;
    config.require_event_links()?;
    let mut config = config.connect_events().await?;
    // The MCP function cannot keep a run going after it answers: it hands
    // runs past the response budget to the approval function.
    if routes == Routes::Mcp
        && let Some(continuations) = LambdaContinuations::from_env().await?
    {
        config.continuations = Some(Arc::new(continuations));
    }
    let sources = CatalogConfig::load_located(None)?;
    // Owners' OAuth tokens are sealed with the key from EXECUTOR_TOKEN_KEY_SECRET_ARN, read once per cold start;
    // OAuth-protected MCP sources register once for every function, in the table.
    let vault = TokenKey::from_env().await?.map(|key| Vault { store: store.clone(), key });
    let site = config.public_url.as_deref().map(executor_core::ClientSite::new);
    let mcp = Some(McpAuth { registrations: store.clone(), site });
    let catalog = Arc::new(Catalog::connect_with(&sources, config.clock.clone(), OAuthBacking { vault, mcp }).await?);
    config.connections = catalog.connections();
    // Named with the reason when a source failed to load, never as an empty namespace.
    let namespaces: Vec<String> = catalog.namespaces().iter().map(|n| catalog.label(&n.namespace)).collect();
    config.quotas.owners = sources.quotas;
    config.toolkits = Catalog::toolkit_views(&catalog, &sources.toolkits)
        .into_iter()
        .map(|view| ToolkitEndpoint {
            name: view.name().clone(),
            namespaces: view.namespaces().iter().map(|n| catalog.label(n)).collect(),
            tools: Arc::new(view),
        })
        .collect();
    let sandbox = Sandbox::new(Limits { wall_clock: config.max_execution, ..Limits::default() });
    let host = Host::new(store, catalog, &namespaces, sandbox, scheduler, config);
    // Each invocation in a task on a worker thread (the Runtime API loop runs on
    // the main thread): its execution starts on that worker with no hand-off,
    // and the worker, idle while the next invocation is awaited, frees the
    // execution's context and prepares the next one (`executor_sandbox::tidy`).
    let handler = service_fn(move |event: LambdaEvent<Value>| {
        let host = host.clone();
        // In the invocation's span, which the request's logs and spans belong to.
        let handled = async move { handle(&host, routes, event.payload).await };
        let answer = tokio::spawn(tracing::Instrument::in_current_span(handled));
        async move { answer.await.unwrap_or_else(|e| Ok(crashed(&e))).map_err(Error::from) }
    });
    Runtime::new(handler).layer(telemetry.invocations()).run().await
}

/// An event this function does not take. The invocation fails, which the
/// function's logs and its `Errors` metric show; no client ever sees it.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error(
        "the event is no API Gateway HTTP API (payload 2.0) request: {0}; route only HTTP API integrations with \
         payload format 2.0 to this function"
    )]
    NotHttp(String),
    #[error(
        "the continuation event is not {{\"executorContinuation\": {{\"executionId\": \"<id>\"}}}}: {0}; it is made by \
         the MCP function (executor_lambda_shell::continuation_event)"
    )]
    Continuation(String),
    #[error(
        "a continuation event reached the MCP function; only the approval function runs them: set \
         EXECUTOR_APPROVAL_FUNCTION on the MCP function to the approval function's name"
    )]
    NotHere,
}

/// Answer one invocation: a continuation (the approval function only; it
/// runs to the end of the execution), or an API Gateway request.
pub async fn handle(host: &Host, routes: Routes, event: Value) -> Result<Value, EventError> {
    if let Some(id) = continuations::continuation(&event) {
        if routes != Routes::Approvals {
            return Err(EventError::NotHere);
        }
        let id = id?;
        let answer = match host.continue_execution(&id).await {
            Ok(result) => json!({ "executionId": id, "status": result.status() }),
            Err(error) => json!({ "executionId": id, "error": { "code": error.code(), "message": error.to_string() } }),
        };
        host.settle_events(EVENT_WAIT).await;
        return Ok(answer);
    }
    let event: api_gateway::Event = serde_json::from_value(event).map_err(|e| EventError::NotHttp(e.to_string()))?;
    let request = match event.into_request() {
        Ok(request) => request,
        Err(reason) => return Ok(api_gateway::bad_request(&reason)),
    };
    let response = match routes {
        Routes::Mcp => host.handle_mcp(request).await,
        Routes::Approvals => host.handle_approvals(request).await,
    };
    // Nothing runs once the function has answered: a delivery this request
    // started gets a moment to finish; what it leaves is retried later.
    host.settle_events(EVENT_WAIT).await;
    Ok(api_gateway::answer(response))
}

/// The answer when the task handling an invocation panicked.
fn crashed(error: &tokio::task::JoinError) -> Value {
    let body = json!({ "error": format!("internal error: the request failed ({error}); try it again") });
    let mut response = http::Response::new(bytes::Bytes::from(body.to_string()));
    *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    api_gateway::answer(response)
}
