//! MCP sessions over HTTP: the `Mcp-Session-Id` header handed out after a
//! successful `initialize` of a version with sessions, checked on every later
//! request, and ended by `DELETE`. What a session is lives in
//! `application::sessions`.

use bytes::Bytes;
use executor_core::{ClientInfo, ElicitationMode, Principal, SessionId, ToolkitName};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::Value;

use crate::application::sessions::{STATELESS_VERSION, SessionError, Sessions};
use crate::http_edge::responses::{empty, rpc_error};
use crate::http_edge::spans;

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// After a successful `initialize` of a version with sessions: start the
/// session and hand its id to the client.
pub(crate) async fn start(
    sessions: &Sessions,
    mut response: Response<Bytes>,
    request: &Value,
    owner: Principal,
    mode: ElicitationMode,
    endpoint: Option<&ToolkitName>,
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
    let id = match sessions.start(owner, version, client, mode, endpoint).await {
        Ok(id) => id,
        Err(error) => return refusal(&error),
    };
    spans::record("mcp.session.id", id.as_str());
    if let Ok(value) = HeaderValue::from_str(id.as_str()) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// The caller's live session named by the header, or 404 "Session not found".
pub(crate) async fn check(
    sessions: &Sessions,
    value: &HeaderValue,
    owner: &Principal,
    endpoint: Option<&ToolkitName>,
) -> Result<SessionId, Response<Bytes>> {
    let id = value.to_str().map_err(|_| refusal(&SessionError::NotFound))?;
    sessions.check(id, owner, endpoint).await.map_err(|error| refusal(&error))
}

/// `DELETE /mcp` (or a toolkit's endpoint): end the caller's session there.
pub(crate) async fn end(
    sessions: &Sessions,
    headers: &HeaderMap,
    owner: &Principal,
    endpoint: Option<&ToolkitName>,
) -> Response<Bytes> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return rpc_error(StatusCode::BAD_REQUEST, -32600, "DELETE needs the Mcp-Session-Id header");
    };
    let Ok(id) = value.to_str() else { return refusal(&SessionError::NotFound) };
    match sessions.end(id, owner, endpoint).await {
        Ok(()) => empty(StatusCode::NO_CONTENT),
        Err(error) => refusal(&error),
    }
}

/// A session error as the JSON-RPC answer clients expect.
fn refusal(error: &SessionError) -> Response<Bytes> {
    let (status, code) = match error {
        SessionError::NotFound => (StatusCode::NOT_FOUND, -32001),
        SessionError::Busy => (StatusCode::CONFLICT, -32000),
        _ => (StatusCode::SERVICE_UNAVAILABLE, -32603),
    };
    rpc_error(status, code, &error.to_string())
}
