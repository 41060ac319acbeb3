//! MCP as plain HTTP requests, for the tests that look at what goes over
//! the wire: the JSON-RPC messages and headers of a 2025-06-18 client.

use serde_json::{Value, json};

/// `initialize` of a 2025-06-18 client named `client`.
pub fn initialize(client: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}})
}

/// A POST of the JSON-RPC `body` to the MCP endpoint `url` with `token`:
/// the headers every request has, none naming a protocol version.
pub fn post(http: &reqwest::Client, url: &str, token: &str, body: &Value) -> reqwest::RequestBuilder {
    http.post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
}

/// [`post`] as a 2025-06-18 client (`MCP-Protocol-Version`), in `session`
/// if there is one.
pub fn post_in(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let request = post(http, url, token, body).header("mcp-protocol-version", "2025-06-18");
    match session {
        Some(session) => request.header("mcp-session-id", session),
        None => request,
    }
}
