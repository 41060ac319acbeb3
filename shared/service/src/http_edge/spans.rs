//! The spans of the host's entry points, `mcp.request` and
//! `approval.request`, and what they may record: the route, the MCP method
//! and tool, the protocol version, the session id, a short hash of the owner
//! (never the owner), the execution id and the status. Never a body, a query
//! string (approval tokens travel in it) or any other header value.

use std::time::Instant;

use bytes::Bytes;
use executor_core::Principal;
use http::{Request, StatusCode};
use sha2::{Digest, Sha256};
use tracing::Span;
use tracing::field::Empty;

/// The span of a request to the MCP function's routes, continuing the trace
/// its `traceparent` names.
pub(crate) fn mcp_request(request: &Request<Bytes>) -> Span {
    let span = tracing::info_span!(
        "mcp.request",
        otel.kind = "server",
        http.request.method = request.method().as_str(),
        url.path = request.uri().path(),
        mcp.method.name = Empty,
        gen_ai.tool.name = Empty,
        mcp.protocol.version = Empty,
        mcp.session.id = Empty,
        executor.owner.hash = Empty,
        executor.elicitation_mode = Empty,
        executor.execution.id = Empty,
        http.response.status_code = Empty,
        otel.status_code = Empty,
        trace_id = Empty,
    );
    executor_telemetry::adopt(&span, Some(request.headers()));
    span
}

/// The span of a request to the approval function's routes.
pub(crate) fn approval_request(request: &Request<Bytes>) -> Span {
    let path = request.uri().path();
    let route = match path.split('/').collect::<Vec<_>>()[..] {
        ["", "approvals", _] => "/approvals/{executionId}",
        ["", "api", "executions", _] => "/api/executions/{executionId}",
        ["", "api", "executions", _, "resume"] => "/api/executions/{executionId}/resume",
        ["", "healthz"] => "/healthz",
        ["", "oauth", "client-metadata.json"] => "/oauth/client-metadata.json",
        ["", "console"] => "/console",
        ["", "console", "signin"] => "/console/signin",
        ["", "console", "logout"] => "/console/logout",
        ["", "console", "oidc", "start"] => "/console/oidc/start",
        ["", "console", "oidc", "callback"] => "/console/oidc/callback",
        ["", "console", "executions", _] => "/console/executions/{executionId}",
        ["", "console", "grants", _, "revoke"] => "/console/grants/{grantId}/revoke",
        ["", "console", "connections", _, "disconnect"] => "/console/connections/{source}/disconnect",
        _ => "other",
    };
    let span = tracing::info_span!(
        "approval.request",
        otel.kind = "server",
        http.request.method = request.method().as_str(),
        http.route = route,
        executor.execution.id = Empty,
        executor.owner.hash = Empty,
        http.response.status_code = Empty,
        otel.status_code = Empty,
        trace_id = Empty,
    );
    executor_telemetry::adopt(&span, Some(request.headers()));
    span
}

/// Close a request: its status on the span, and one log line.
pub(crate) fn finish(span: &Span, status: StatusCode, started: Instant) {
    if span.is_disabled() {
        return;
    }
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
    let duration_ms = started.elapsed().as_micros() as f64 / 1000.0;
    span.in_scope(|| tracing::info!(status = i64::from(status.as_u16()), duration_ms, "request handled"));
}

/// Record on the current span, if it has the field and is recorded at all.
pub(crate) fn record(field: &'static str, value: &str) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record(field, value);
    }
}

/// Record the caller's owner hash on the current span.
pub(crate) fn record_owner(owner: &Principal) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record("executor.owner.hash", owner_hash(owner));
    }
}

/// The first 12 hex digits of the owner's SHA-256: the same for every request
/// of one owner, so one caller's requests can be found, without naming them.
pub(crate) fn owner_hash(owner: &Principal) -> String {
    let digest = Sha256::digest(owner.as_str().as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_hashes_are_short_and_stable() {
        let alice = Principal::parse("alice").unwrap();
        assert_eq!(owner_hash(&alice), "2bd806c97f0e");
        assert_ne!(owner_hash(&alice), owner_hash(&Principal::parse("bob").unwrap()));
    }
}
