//! The part of an MCP client the catalog needs, over Streamable HTTP: the
//! handshake, `tools/list` (every page) and `tools/call`; for MCP Apps,
//! `resources/list` (its `ui://` entries) and `resources/read`.
//!
//! Our own rather than rmcp's client: rmcp's (SSE reconnection, a worker task
//! per connection, its whole client model) added about 0.4 MB zipped to every
//! Lambda bootstrap for these three requests. What it does, per the
//! 2025-11-25 transport: every message is a POST through the catalog's
//! checked client; answers come as JSON or as an SSE stream, which is read
//! until the answer with our id (requests the server sends meanwhile are
//! answered: `ping` with an empty result, anything else "method not found",
//! as a client without capabilities must); `Mcp-Session-Id` and the
//! negotiated `MCP-Protocol-Version` go on every later request.
//!
//! At most once: a 404 for the session (the upstream restarted) starts a new
//! session and repeats the request only for `tools/list`; a `tools/call`
//! whose session was lost fails, not retried, since it may have run (the
//! next request starts the new session). Redirects are not followed (every
//! message is a POST). Not supported: the optional GET stream for
//! server-initiated messages and resuming a broken SSE stream (the call
//! fails; the agent's code can retry it).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use url::Url;

use crate::outbound::{Outbound, OutboundError};
use crate::redact::Redactor;

/// What we ask for; older servers answer with theirs.
const PROTOCOL_VERSION: &str = "2025-11-25";
const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// A server that keeps handing out cursors is not listing tools any more.
const MAX_PAGES: usize = 100;
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// How much of an upstream's error answer is kept.
const EXCERPT_CHARS: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum McpClientError {
    #[error(transparent)]
    Outbound(#[from] OutboundError),
    #[error("HTTP {status}: {body}")]
    Status { status: u16, body: String },
    /// HTTP 401, with the server's `WWW-Authenticate` values: how to authorize.
    #[error("HTTP 401 (the server requires authorization): {body}")]
    Unauthorized { challenges: Vec<String>, body: String },
    #[error("error {code}: {message}")]
    Rpc { code: i64, message: String },
    #[error("the server does not speak MCP as expected: {0}")]
    Protocol(String),
    #[error(
        "the server lost the MCP session during {method} (HTTP 404): the request was not retried, as it may have \
         run; the next request starts a new session (call again only if running it twice is harmless)"
    )]
    SessionLost { method: String },
}

/// Whether a request may be sent again in a new session when the server has
/// lost the one it was sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// Reads: sending twice changes nothing.
    Repeatable,
    /// The outcome of the first attempt is unknown, so there is no second.
    AtMostOnce,
}

/// A tool as `tools/list` describes it (the fields the catalog uses).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedTool {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Map<String, Value>,
    pub output_schema: Option<Map<String, Value>>,
    pub annotations: Option<ToolAnnotations>,
    /// Where MCP Apps link the tool's view (`_meta.ui`).
    #[serde(rename = "_meta")]
    pub meta: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
    pub idempotent_hint: Option<bool>,
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// The hints the tool declared, by their MCP names.
    pub fn hints(&self) -> Vec<(&'static str, bool)> {
        [
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    #[serde(default)]
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    pub is_error: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolsPage {
    tools: Vec<ListedTool>,
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourcesPage {
    #[serde(default)]
    resources: Vec<Value>,
    next_cursor: Option<String>,
}

/// The session the server gave us, and the version it agreed to (none
/// while `initialize` is under way).
#[derive(Debug, Clone, Default)]
struct Handshake {
    session: Option<HeaderValue>,
    version: Option<String>,
    /// The session is gone (or its replacement failed): start a new one first.
    renew: bool,
    /// The server declared the `resources` capability.
    resources: bool,
}

pub struct McpClient {
    outbound: Outbound,
    url: Url,
    headers: HeaderMap,
    handshake: Mutex<Handshake>,
    next_id: AtomicU64,
    redactor: Redactor,
}

impl McpClient {
    /// Connect: `initialize`, then `notifications/initialized`. Excerpts of
    /// error answers are redacted by `redactor` before they are cut.
    pub async fn connect(
        url: Url,
        headers: HeaderMap,
        outbound: &Outbound,
        redactor: &Redactor,
    ) -> Result<Self, McpClientError> {
        let client = Self {
            outbound: outbound.clone(),
            url,
            headers,
            handshake: Mutex::new(Handshake::default()),
            next_id: AtomicU64::new(1),
            redactor: redactor.clone(),
        };
        client.initialize().await?;
        Ok(client)
    }

    /// Every tool, following `nextCursor`.
    pub async fn list_tools(&self) -> Result<Vec<ListedTool>, McpClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map_or_else(|| json!({}), |c| json!({ "cursor": c }));
            let page: ToolsPage = parse(self.request("tools/list", params, Delivery::Repeatable).await?)?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(McpClientError::Protocol(format!("tools/list went on for more than {MAX_PAGES} pages")))
    }

    /// Whether the server declared resources at the handshake (else it is not asked for them).
    pub fn declares_resources(&self) -> bool {
        self.handshake.lock().expect("handshake lock").resources
    }

    /// The `ui://` entries of `resources/list`, following `nextCursor`, at
    /// most `max` of them (the rest is left unread, and logged).
    pub async fn list_ui_resources(&self, max: usize) -> Result<Vec<Value>, McpClientError> {
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map_or_else(|| json!({}), |c| json!({ "cursor": c }));
            let page: ResourcesPage = parse(self.request("resources/list", params, Delivery::Repeatable).await?)?;
            let ui = page.resources.into_iter().filter(|r| r["uri"].as_str().is_some_and(executor_sandbox::is_ui_uri));
            found.extend(ui);
            if found.len() > max {
                tracing::warn!(url = %crate::redact::display_url(&self.url), max, "more UI resources than are passed on; the rest are left out");
                found.truncate(max);
                return Ok(found);
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(found),
            }
        }
        Err(McpClientError::Protocol(format!("resources/list went on for more than {MAX_PAGES} pages")))
    }

    /// `resources/read` of `uri`: the result as the server gave it.
    pub async fn read_resource(&self, uri: &str) -> Result<Value, McpClientError> {
        self.request("resources/read", json!({ "uri": uri }), Delivery::Repeatable).await
    }

    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, McpClientError> {
        let mut params = json!({ "name": name });
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        parse(self.request("tools/call", params, Delivery::AtMostOnce).await?)
    }

    /// A new session; should it fail, the next request tries again.
    async fn initialize(&self) -> Result<(), McpClientError> {
        *self.handshake.lock().expect("handshake lock") = Handshake::default();
        let result = self.handshake().await;
        if result.is_err() {
            self.handshake.lock().expect("handshake lock").renew = true;
        }
        result
    }

    async fn handshake(&self) -> Result<(), McpClientError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "executor", "version": env!("CARGO_PKG_VERSION") },
        });
        let (result, session) = self.exchange("initialize", params).await?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(McpClientError::Protocol(format!("the server wants protocol version {version:?}")));
        }
        let resources = result["capabilities"].get("resources").is_some_and(Value::is_object);
        *self.handshake.lock().expect("handshake lock") =
            Handshake { session, version: Some(version.to_owned()), renew: false, resources };
        let notification = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let response = self.outbound.open(self.post(&notification)).await?;
        match response.status().as_u16() {
            200..=299 => Ok(()),
            status => Err(McpClientError::Status { status, body: "notifications/initialized was refused".into() }),
        }
    }

    /// A request in the current session. A session the server has forgotten
    /// (404) is replaced; the request is sent again in the new one only if
    /// it is [`Delivery::Repeatable`].
    async fn request(&self, method: &str, params: Value, delivery: Delivery) -> Result<Value, McpClientError> {
        if self.handshake.lock().expect("handshake lock").renew {
            self.initialize().await?;
        }
        let had_session = self.handshake.lock().expect("handshake lock").session.is_some();
        match self.exchange(method, params.clone()).await {
            Err(McpClientError::Status { status: 404, .. }) if had_session => match delivery {
                Delivery::Repeatable => {
                    self.initialize().await?;
                    Ok(self.exchange(method, params).await?.0)
                }
                Delivery::AtMostOnce => {
                    self.handshake.lock().expect("handshake lock").renew = true;
                    Err(McpClientError::SessionLost { method: method.to_owned() })
                }
            },
            other => Ok(other?.0),
        }
    }

    /// One request and its answer's result, with the session id the response named.
    async fn exchange(&self, method: &str, params: Value) -> Result<(Value, Option<HeaderValue>), McpClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let mut response = self.outbound.open(self.post(&request)).await?;
        let status = response.status().as_u16();
        let session = response.headers().get(SESSION_HEADER).cloned();
        let location = response.headers().get(reqwest::header::LOCATION).map(|l| l.as_bytes().to_vec());
        let challenges: Vec<String> = response
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !(200..300).contains(&status) || !is_stream {
            let body = self.outbound.read_body(&mut response).await?;
            if !(200..300).contains(&status) {
                let mut body = self.redactor.excerpt(&body, EXCERPT_CHARS);
                if status == 401 {
                    return Err(McpClientError::Unauthorized { challenges, body });
                }
                if let (300..400, Some(location)) = (status, location) {
                    let location = self.redactor.excerpt(&location, EXCERPT_CHARS);
                    body =
                        format!("a redirect, not followed (Location: {location}); set the source's url to it: {body}");
                }
                return Err(McpClientError::Status { status, body });
            }
            let message: Value = serde_json::from_slice(&body)
                .map_err(|e| McpClientError::Protocol(format!("the answer to {method} is not JSON: {e}")))?;
            return Ok((answer(message, id)?.ok_or_else(|| no_answer(method))?, session));
        }
        let mut events = SseEvents::default();
        let mut read = 0;
        while let Some(chunk) = self.outbound.next_chunk(&mut response, read).await? {
            read += chunk.len();
            for data in events.push(&chunk) {
                let Ok(message) = serde_json::from_str::<Value>(&data) else { continue };
                if let Some(result) = answer(message.clone(), id)? {
                    return Ok((result, session));
                }
                self.answer_server_request(&message).await;
            }
        }
        Err(no_answer(method))
    }

    /// A client without capabilities answers `ping` and refuses the rest.
    async fn answer_server_request(&self, message: &Value) {
        let (Some(id), Some(method)) = (message.get("id"), message.get("method").and_then(Value::as_str)) else {
            return; // a notification (progress, logging): nothing to answer
        };
        let reply = match method {
            "ping" => json!({ "jsonrpc": "2.0", "id": id, "result": {} }),
            _ => json!({ "jsonrpc": "2.0", "id": id,
                "error": { "code": -32601, "message": format!("{method} is not supported by this client") } }),
        };
        // Best effort: if the server does not take it, its request fails, and so will ours.
        let _ = self.outbound.send(self.post(&reply)).await;
    }

    fn post(&self, message: &Value) -> reqwest::RequestBuilder {
        let handshake = self.handshake.lock().expect("handshake lock").clone();
        let mut request = self
            .outbound
            .request(reqwest::Method::POST, self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(message.to_string());
        if let Some(session) = handshake.session {
            request = request.header(SESSION_HEADER, session);
        }
        if let Some(version) = handshake.version {
            request = request.header(VERSION_HEADER, version);
        }
        request
    }
}

fn no_answer(method: &str) -> McpClientError {
    McpClientError::Protocol(format!("the server ended the response to {method} without answering it"))
}

fn parse<T: serde::de::DeserializeOwned>(result: Value) -> Result<T, McpClientError> {
    serde_json::from_value(result).map_err(|e| McpClientError::Protocol(e.to_string()))
}

/// The result of `message` if it answers request `id`; its error as one.
fn answer(message: Value, id: u64) -> Result<Option<Value>, McpClientError> {
    let Value::Object(mut message) = message else { return Ok(None) };
    if message.contains_key("method") || message.get("id").and_then(Value::as_u64) != Some(id) {
        return Ok(None);
    }
    if let Some(error) = message.remove("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
        let text = error.get("message").and_then(Value::as_str).unwrap_or("no message").to_owned();
        return Err(McpClientError::Rpc { code, message: text });
    }
    Ok(Some(message.remove("result").unwrap_or(Value::Null)))
}

/// Server-sent events, fed as bytes arrive: the `data` of each complete event.
#[derive(Default)]
struct SseEvents {
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no event end, so a large event
    /// arriving in many pieces is scanned once, not once per piece.
    scanned: usize,
}

impl SseEvents {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        // A separator may straddle two pieces: look again at the last three bytes.
        while let Some((end, separator)) = event_end(&self.pending, self.scanned.saturating_sub(3)) {
            let event: Vec<u8> = self.pending.drain(..end + separator).take(end).collect();
            self.scanned = 0;
            let text = String::from_utf8_lossy(&event);
            // SSE ends a line at CRLF, LF or a lone CR (`str::lines` knows only the first two).
            let data: Vec<&str> = text
                .split("\r\n")
                .flat_map(|part| part.split(['\r', '\n']))
                .filter_map(|line| line.strip_prefix("data"))
                .filter_map(|rest| match rest.strip_prefix(':') {
                    Some(value) => Some(value.strip_prefix(' ').unwrap_or(value)),
                    None if rest.is_empty() => Some(""),
                    None => None,
                })
                .collect();
            // Events without data (priming events carry only an id) are skipped.
            if data.iter().any(|d| !d.is_empty()) {
                events.push(data.join("\n"));
            }
        }
        self.scanned = self.pending.len();
        events
    }
}

/// Where the first event in `buffer` (searched from `from`) ends, and the
/// length of the two line endings that end it (CRLF, LF or CR each).
fn event_end(buffer: &[u8], from: usize) -> Option<(usize, usize)> {
    (from..buffer.len()).find_map(|i| {
        let first = line_end(&buffer[i..])?;
        let second = line_end(&buffer[i + first..])?;
        Some((i, first + second))
    })
}

/// The length of the line ending at the start of `rest`, if one is there.
fn line_end(rest: &[u8]) -> Option<usize> {
    match rest {
        [b'\r', b'\n', ..] => Some(2),
        [b'\r'] => None, // maybe the first half of a CRLF still on its way
        [b'\r' | b'\n', ..] => Some(1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_split_however_the_bytes_arrive() {
        let stream = "id: 0\nretry: 1000\ndata:\n\n: comment\nevent: message\ndata: {\"a\":1}\n\ndata: x\ndata:y\r\n\r\n\
                      data: mixed\n\r\ndata: cr\rdata: only\r\rdata: last";
        let expected = ["{\"a\":1}", "x\ny", "mixed", "cr\nonly"];
        for piece in [1, 2, 5, 7, stream.len()] {
            let mut events = SseEvents::default();
            let mut seen = Vec::new();
            for chunk in stream.as_bytes().chunks(piece) {
                seen.extend(events.push(chunk));
            }
            assert_eq!(seen, expected, "in pieces of {piece}");
            assert_eq!(events.pending, b"data: last", "an unfinished event waits");
        }
    }

    #[test]
    fn answers_are_matched_by_id() {
        let cases = [
            (json!({"jsonrpc": "2.0", "id": 7, "result": {"ok": true}}), Some(json!({"ok": true}))),
            (json!({"jsonrpc": "2.0", "id": 8, "result": {}}), None),
            (json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}), None),
            (json!({"jsonrpc": "2.0", "method": "notifications/progress"}), None),
            (json!([1, 2]), None),
        ];
        for (message, expected) in cases {
            assert_eq!(answer(message.clone(), 7).unwrap(), expected, "{message}");
        }
        let error = json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "bad params"}});
        assert_eq!(answer(error, 7).unwrap_err().to_string(), "error -32602: bad params");
    }
}
