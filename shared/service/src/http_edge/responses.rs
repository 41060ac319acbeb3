//! The HTTP answers the routes share: JSON-RPC errors, JSON and text bodies,
//! CORS; and the approval surface's private answers (its pages and its JSON API).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::http_edge::approval_page::CONTENT_SECURITY_POLICY;

pub(crate) fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response<Bytes> {
    json_response(status, &json!({ "jsonrpc": "2.0", "error": { "code": code, "message": message }, "id": null }))
}

pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(crate) fn text(status: StatusCode, body: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(body.as_bytes()));
    *response.status_mut() = status;
    response
}

pub(crate) fn empty(status: StatusCode) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = status;
    response
}

pub(crate) fn preflight() -> Response<Bytes> {
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
pub(crate) fn with_cors(mut response: Response<Bytes>) -> Response<Bytes> {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("Mcp-Session-Id, WWW-Authenticate"));
    response
}

/// An HTML page of the approval surface: strict CSP, unframeable, private.
pub(crate) fn page(status: StatusCode, html: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(html));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    if let Ok(csp) = HeaderValue::from_str(&CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    private(response)
}

/// A request the API did not let in (401, with the host's challenge added, or
/// 503), in the API's error shape.
pub(crate) fn api_error(status: StatusCode, message: &str) -> Response<Bytes> {
    let code = match status {
        StatusCode::UNAUTHORIZED => "unauthorized",
        // The only 403 of the API: a key or token scoped to a toolkit, used outside it.
        StatusCode::FORBIDDEN => "forbidden_scope",
        _ => "unavailable",
    };
    api_json(status, &json!({"error": {"code": code, "message": message}}))
}

pub(crate) fn api_json(status: StatusCode, body: &Value) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    private(response)
}

/// Approvals carry secrets in their URLs and answers: keep them out of caches and referrers.
fn private(mut response: Response<Bytes>) -> Response<Bytes> {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
