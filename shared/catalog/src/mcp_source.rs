//! Upstream MCP servers over Streamable HTTP ([`McpClient`]), through the
//! catalog's checked HTTP client: `tools/list` becomes tools under the
//! source's namespace, `tools/call` results become data or a `ToolError`.
//! Arguments travel only as JSON in the request body: the URL and headers
//! are the source's own. The catalog redacts what comes back.

use std::collections::HashMap;

use executor_core::Effect;
use executor_sandbox::{ToolError, ToolOutcome};
use serde_json::Value;
use url::Url;

use crate::mcp_client::{CallToolResult, McpClient, McpClientError};

use crate::naming::{deduplicate, sanitize};
use crate::outbound::Outbound;
use crate::redact::Redactor;
use crate::tool::{Schemas, Target, ToolDef};

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
}

impl McpUpstream {
    /// Connect and list the tools. `redactor` is for the
    /// client's excerpts of upstream answers, redacted before they are cut.
    pub async fn connect(
        namespace: &str,
        url: &Url,
        headers: HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
        outbound: &Outbound,
        redactor: &Redactor,
    ) -> Result<(Self, Vec<ToolDef>), McpConnectError> {
        outbound.check_url(url).map_err(|e| McpConnectError::Failed(e.to_string()))?;
        let client = match McpClient::connect(url.clone(), headers.into_iter().collect(), outbound, redactor).await {
            Ok(client) => client,
            Err(McpClientError::Unauthorized { challenges, body }) => {
                return Err(McpConnectError::Unauthorized { challenges, body });
            }
            Err(e) => return Err(McpConnectError::Failed(format!("MCP handshake failed: {e}"))),
        };
        let mut listed =
            client.list_tools().await.map_err(|e| McpConnectError::Failed(format!("tools/list failed: {e}")))?;
        // Named in name order, so collisions after sanitising resolve the same way every time.
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        let paths = deduplicate(listed.iter().map(|t| format!("{namespace}.{}", sanitize(&t.name))));
        let tools = listed
            .into_iter()
            .zip(paths)
            .map(|(tool, path)| ToolDef {
                path,
                namespace: namespace.to_owned(),
                description: tool.description.as_deref().or(tool.title.as_deref()).unwrap_or("").to_owned(),
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
                target: Target::Mcp {
                    hints: tool.annotations.as_ref().map(|a| a.hints()).unwrap_or_default(),
                    name: tool.name,
                },
            })
            .collect();
        Ok((Self { client }, tools))
    }

    pub async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            _ => {
                return Err(ToolError {
                    code: "invalid_arguments".into(),
                    message: "arguments must be an object".into(),
                });
            }
        };
        match self.client.call_tool(name, arguments).await {
            Ok(result) => outcome(result),
            Err(e) => Err(ToolError { code: "upstream_error".into(), message: e.to_string() }),
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
