//! Upstream MCP servers over Streamable HTTP ([`McpClient`]), through the
//! catalog's checked HTTP client: `tools/list` becomes tools under the
//! source's namespace, `tools/call` results become data or a `ToolError`.
//! A call's arguments are checked against its tool's `inputSchema`
//! ([`McpInput`], `tool/mcp.rs`) before its policy is asked and again before it is sent.
//! Arguments travel only as JSON in the request body: the URL and headers
//! are the source's own. The catalog redacts what comes back.
//!
//! MCP Apps: a tool's `_meta.ui` is kept on its definition; a server that
//! declares resources is asked for its `ui://` ones once per instance, as
//! its tools are listed (at the same time, so nothing waits longer; a list
//! that fails is asked again on first need), and each is read when a client
//! reads it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use executor_core::{Effect, Principal};
use executor_sandbox::{ToolError, ToolOutcome};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value};
use url::Url;

use crate::connections::{OwnerTokenError, OwnerTokens};
use crate::mcp_client::{CallToolResult, ListedTool, McpClient, McpClientError};
use crate::naming::{deduplicate, path_segment};
use crate::outbound::Outbound;
use crate::redact::Redactor;
use crate::search::SearchIndex;
use crate::tool::mcp::{McpInput, McpUi};
use crate::tool::{Schemas, Target, ToolDef, first_sentence};

/// Why an upstream MCP server could not be connected.
#[derive(Debug, thiserror::Error)]
pub enum McpConnectError {
    /// It answered 401: with the `WWW-Authenticate` values, for MCP authorization.
    #[error("MCP handshake failed: HTTP 401 (the server requires authorization): {body}")]
    Unauthorized { challenges: Vec<String>, body: String },
    /// Text meant for the operator; the caller prefixes the source and redacts.
    #[error("{0}")]
    Failed(String),
}

pub struct McpUpstream {
    client: McpClient,
    /// Its `ui://` resources, once listed.
    ui: tokio::sync::OnceCell<Vec<Value>>,
}

/// At most this many `ui://` resources are taken from one server's list.
pub(crate) const MAX_LISTED_UI: usize = 100;

impl McpUpstream {
    /// Connect and list the tools. `redactor` is for the
    /// client's excerpts of upstream answers, redacted before they are cut.
    pub async fn connect(
        namespace: &str,
        url: &Url,
        headers: HeaderMap,
        outbound: &Outbound,
        redactor: &Redactor,
    ) -> Result<(Self, Vec<ToolDef>), McpConnectError> {
        outbound.check_url(url).map_err(|e| McpConnectError::Failed(e.to_string()))?;
        let client = match McpClient::connect(url.clone(), headers, outbound, redactor).await {
            Ok(client) => client,
            Err(McpClientError::Unauthorized { challenges, body }) => {
                return Err(McpConnectError::Unauthorized { challenges, body });
            }
            Err(e) => return Err(McpConnectError::Failed(format!("MCP handshake failed: {e}"))),
        };
        let (listed, ui) = futures_util::future::join(client.list_tools(), list_ui_now(&client)).await;
        let listed = listed.map_err(|e| McpConnectError::Failed(format!("tools/list failed: {e}")))?;
        Ok((Self { client, ui: listed_ui(namespace, ui) }, tool_defs(namespace, listed)))
    }

    /// Its `ui://` resources as far as listed already (none asked for).
    pub fn ui_listed(&self) -> &[Value] {
        self.ui.get().map_or(&[], Vec::as_slice)
    }

    /// Its `ui://` resources, listed now if not yet (a failure is tried again next time).
    pub async fn list_ui(&self) -> Result<&[Value], McpClientError> {
        self.ui.get_or_try_init(|| list_ui_now(&self.client)).await.map(Vec::as_slice)
    }

    /// `resources/read` of `uri`.
    pub async fn read(&self, uri: &str) -> Result<Value, McpClientError> {
        self.client.read_resource(uri).await
    }

    pub async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        match self.client.call_tool(name, arguments(args)?).await {
            Ok(result) => outcome(result),
            Err(e) => Err(ToolError { code: "upstream_error".into(), message: e.to_string() }),
        }
    }
}

/// A server's `ui://` resources, asked for when it declares resources.
async fn list_ui_now(client: &McpClient) -> Result<Vec<Value>, McpClientError> {
    match client.declares_resources() {
        true => client.list_ui_resources(MAX_LISTED_UI).await,
        false => Ok(Vec::new()),
    }
}

/// What [`list_ui_now`] found, kept; a failure is logged and leaves it to be asked again.
fn listed_ui(namespace: &str, listed: Result<Vec<Value>, McpClientError>) -> tokio::sync::OnceCell<Vec<Value>> {
    match listed {
        Ok(listed) => tokio::sync::OnceCell::new_with(Some(listed)),
        Err(error) => {
            // The client's excerpts of the server's answers are redacted already.
            tracing::warn!(%namespace, %error, "UI resources could not be listed; asked again on first need");
            tokio::sync::OnceCell::new()
        }
    }
}

/// The listed tools as the catalog's, under `namespace`.
fn tool_defs(namespace: &str, mut listed: Vec<ListedTool>) -> Vec<ToolDef> {
    // Named in name order, so collisions after sanitising resolve the same way every time.
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    let paths = deduplicate(listed.iter().map(|t| format!("{namespace}.{}", path_segment(&t.name))));
    listed
        .into_iter()
        .zip(paths)
        .map(|(tool, path)| {
            let description = tool.description.as_deref().or(tool.title.as_deref()).unwrap_or("").to_owned();
            ToolDef {
                target: Target::Mcp {
                    hints: tool.annotations.as_ref().map(|a| a.hints()).unwrap_or_default(),
                    input: Arc::new(McpInput::from_schema(&tool.input_schema)),
                    ui: McpUi::from_meta(tool.meta.as_ref()).map(Arc::new),
                    name: tool.name,
                },
                path,
                namespace: namespace.to_owned(),
                summary: first_sentence(&description),
                description,
                // Only an explicit read-only hint makes a read: an unannotated tool may change things.
                effect: match tool.annotations.as_ref().and_then(|a| a.read_only_hint) {
                    Some(true) => Effect::Read,
                    _ => Effect::Write,
                },
                schemas: Schemas::Text {
                    input: Value::Object(tool.input_schema).to_string(),
                    output: tool.output_schema.map(|s| Value::Object(s).to_string()),
                    root: None,
                },
            }
        })
        .collect()
}

/// A call's arguments as `tools/call` takes them.
fn arguments(args: Value) -> Result<Option<Map<String, Value>>, ToolError> {
    match args {
        Value::Object(map) => Ok(Some(map)),
        Value::Null => Ok(None),
        _ => Err(ToolError { code: "invalid_arguments".into(), message: "arguments must be an object".into() }),
    }
}

/// An OAuth-protected MCP server that each owner connects to (MCP
/// authorization): every request carries the calling owner's token, in a
/// session of that owner's (servers may bind sessions to their user). Its
/// tools are listed once per instance, with the token of the first connected
/// owner who needs them: before that, this instance does not know them.
pub struct OwnerMcp {
    namespace: String,
    url: Url,
    /// The source's configured headers; the owner's `Authorization` is added per session.
    headers: HeaderMap,
    outbound: Outbound,
    owners: Arc<OwnerTokens>,
    /// The source's own secrets (the registered client's secret).
    redactor: Redactor,
    listed: tokio::sync::OnceCell<Listed>,
    /// Its `ui://` resources, once listed with a connected owner's token.
    ui: tokio::sync::OnceCell<Vec<Value>>,
    sessions: Mutex<HashMap<Principal, Session>>,
    /// Where owners authorize, for the operator and the model.
    authorization: String,
}

/// Sessions kept at most: remade on demand, so a long-lived host with many
/// owners forgets them rather than growing.
const MAX_SESSIONS: usize = 256;

struct Session {
    token: Arc<str>,
    client: Arc<McpClient>,
}

/// The tools of an [`OwnerMcp`], once listed.
pub struct Listed {
    pub tools: Vec<ToolDef>,
    pub index: SearchIndex,
}

/// Why an owner's request to an [`OwnerMcp`] was not answered.
#[derive(Debug, thiserror::Error)]
pub enum OwnerMcpError {
    #[error(transparent)]
    Token(#[from] OwnerTokenError),
    #[error("the MCP request failed: {0}")]
    Failed(McpClientError),
}

impl OwnerMcpError {
    pub fn into_tool_error(self) -> ToolError {
        let code = match &self {
            OwnerMcpError::Token(_) => "auth_error",
            OwnerMcpError::Failed(_) => "upstream_error",
        };
        ToolError { code: code.into(), message: self.to_string() }
    }
}

impl OwnerMcp {
    pub(crate) fn new(
        namespace: &str,
        url: Url,
        headers: HeaderMap,
        outbound: Outbound,
        owners: Arc<OwnerTokens>,
        redactor: Redactor,
        authorization: String,
    ) -> Self {
        Self {
            namespace: namespace.to_owned(),
            url,
            headers,
            outbound,
            owners,
            redactor,
            listed: tokio::sync::OnceCell::new(),
            ui: tokio::sync::OnceCell::new(),
            sessions: Mutex::default(),
            authorization,
        }
    }

    /// Where owners authorize: the authorization server and client.
    pub fn authorization(&self) -> &str {
        &self.authorization
    }

    /// The tools, when this instance has listed them.
    pub fn tools(&self) -> Option<&Listed> {
        self.listed.get()
    }

    /// The tools, listed with `owner`'s token if this instance has not yet
    /// (one listing at a time: the others wait for it and share it).
    pub async fn list(&self, owner: &Principal) -> Result<&Listed, OwnerMcpError> {
        self.listed
            .get_or_try_init(|| async {
                let (client, token) = self.session(owner).await?;
                let (listed, ui) = futures_util::future::join(client.list_tools(), list_ui_now(&client)).await;
                let listed = self.answered(owner, &token, listed).await?;
                if let Some(ui) = listed_ui(&self.namespace, ui).into_inner() {
                    let _ = self.ui.set(ui);
                }
                let tools = tool_defs(&self.namespace, listed);
                tracing::info!(namespace = %self.namespace, tools = tools.len(), "tools listed with an owner's token");
                Ok(Listed { index: SearchIndex::build(&tools), tools })
            })
            .await
    }

    /// `tools/call` with `owner`'s token.
    pub async fn call(&self, owner: &Principal, name: &str, args: Value) -> ToolOutcome {
        let arguments = arguments(args)?;
        let (client, token) = self.session(owner).await.map_err(OwnerMcpError::into_tool_error)?;
        let result = client.call_tool(name, arguments).await;
        outcome(self.answered(owner, &token, result).await.map_err(OwnerMcpError::into_tool_error)?)
    }

    /// Its `ui://` resources as far as listed already (none asked for).
    pub fn ui_listed(&self) -> &[Value] {
        self.ui.get().map_or(&[], Vec::as_slice)
    }

    /// Its `ui://` resources for `owner`, who must have connected: listed
    /// with their token if this instance has not yet (once, as the tools).
    pub async fn list_ui(&self, owner: &Principal) -> Result<&[Value], OwnerMcpError> {
        let (client, token) = self.session(owner).await?;
        let listed =
            self.ui.get_or_try_init(|| async { self.answered(owner, &token, list_ui_now(&client).await).await });
        listed.await.map(Vec::as_slice)
    }

    /// `resources/read` of `uri` with `owner`'s token.
    pub async fn read(&self, owner: &Principal, uri: &str) -> Result<Value, OwnerMcpError> {
        let (client, token) = self.session(owner).await?;
        let result = client.read_resource(uri).await;
        self.answered(owner, &token, result).await
    }

    /// `owner`'s session with their current token: the one kept, or a new
    /// one (the first, or the token was refreshed).
    async fn session(&self, owner: &Principal) -> Result<(Arc<McpClient>, Arc<str>), OwnerMcpError> {
        let token = self.owners.access_token(owner, &self.namespace).await?;
        let kept = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(owner)
            .and_then(|session| (session.token == token).then(|| session.client.clone()));
        if let Some(client) = kept {
            return Ok((client, token));
        }
        let mut headers = self.headers.clone();
        // Checked to be valid in a header when it was issued.
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            OwnerMcpError::Failed(McpClientError::Protocol("the access token is not valid in a header".into()))
        })?;
        bearer.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, bearer);
        let redactor = self.owners.redactor(&self.redactor);
        let connected = McpClient::connect(self.url.clone(), headers, &self.outbound, &redactor).await;
        let client = Arc::new(self.answered(owner, &token, connected).await?);
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= MAX_SESSIONS {
            sessions.clear();
        }
        sessions.insert(owner.clone(), Session { token: token.clone(), client: client.clone() });
        Ok((client, token))
    }

    /// A 401 means the server no longer takes `owner`'s token (revoked at
    /// the provider): their session and connection go, and they are asked to
    /// connect again on their next run.
    async fn answered<T>(
        &self,
        owner: &Principal,
        token: &str,
        result: Result<T, McpClientError>,
    ) -> Result<T, OwnerMcpError> {
        match result {
            Ok(value) => Ok(value),
            Err(McpClientError::Unauthorized { .. }) => {
                self.sessions.lock().unwrap_or_else(|e| e.into_inner()).remove(owner);
                Err(OwnerMcpError::Token(self.owners.forget(owner, &self.namespace, token).await))
            }
            Err(error) => Err(OwnerMcpError::Failed(error)),
        }
    }
}

/// Structured content when present; otherwise the text (parsed when it is
/// JSON); several blocks become an array of them.
fn outcome(result: CallToolResult) -> ToolOutcome {
    let text = |block: &Value| match (block.get("type").and_then(Value::as_str), block.get("text")) {
        (Some("text"), Some(Value::String(text))) => Some(text.clone()),
        _ => None,
    };
    if result.is_error == Some(true) {
        let message: Vec<String> = result.content.iter().filter_map(text).collect();
        let message = match (message.is_empty(), &result.structured_content) {
            (false, _) => message.join("\n"),
            (true, Some(data)) => data.to_string(),
            (true, None) => "the tool reported an error without a message".into(),
        };
        return Err(ToolError { code: "tool_error".into(), message });
    }
    let data = match (result.structured_content, result.content.as_slice()) {
        (Some(data), _) => data,
        (None, []) => Value::Null,
        (None, [single]) => match text(single) {
            Some(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            None => single.clone(),
        },
        (None, many) => Value::Array(many.to_vec()),
    };
    Ok(data)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn listed(name: &str, description: Option<&str>, schema: Value) -> ListedTool {
        serde_json::from_value(
            json!({"name": name, "title": "A title", "description": description, "inputSchema": schema}),
        )
        .unwrap()
    }

    #[test]
    fn a_summary_is_the_first_sentence_of_the_description() {
        let object = json!({"type": "object"});
        let cases = [
            (Some("Search the docs. Returns at most ten pages."), "Search the docs."),
            (Some("Search the docs\n\nArgs: query"), "Search the docs"),
            (None, "A title"),
        ];
        for (description, expected) in cases {
            let tools = tool_defs("d", vec![listed("search", description, object.clone())]);
            assert_eq!(tools[0].summary, expected, "{description:?}");
            assert_eq!(tools[0].description, description.unwrap_or("A title"));
        }
    }

    #[test]
    fn a_tool_without_properties_takes_an_empty_object() {
        let cases = [
            (json!({"type": "object"}), "type Input = {};"),
            (json!({"type": "object", "properties": {}}), "type Input = {};"),
            (json!({"type": "object", "additionalProperties": true}), "type Input = Record<string, unknown>;"),
        ];
        for (schema, expected) in cases {
            let tools = tool_defs("d", vec![listed("now", None, schema.clone())]);
            let ts = tools[0].typescript().unwrap();
            assert!(ts.contains(expected), "{schema}: {ts}");
        }
    }
}
