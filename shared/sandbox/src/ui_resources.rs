//! MCP Apps (`io.modelcontextprotocol/ui`): the `ui://` resources of the
//! upstream MCP servers behind the tools, as the MCP host passes them on to
//! its clients (`resources/list`, `resources/read`). The catalog finds and
//! reads them; views over it hide what they hide of the tools
//! ([`crate::Tools::ui_resources`]).

use serde_json::Value;

/// The URI scheme of MCP Apps' UI resources; no other resource is passed on.
pub const UI_SCHEME: &str = "ui://";

/// A `ui://` resource of an upstream MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct UiResource {
    /// As the upstream names it: the tools' `_meta.ui.resourceUri` point at it unchanged.
    pub uri: String,
    /// The namespace of the source that serves it.
    pub namespace: String,
    /// The tools (paths) whose `_meta.ui.resourceUri` names it.
    pub tools: Vec<String>,
    /// The entry the upstream's `resources/list` gave (`uri`, `name`,
    /// `mimeType`, `_meta`, ...); `None` when only a tool links it (servers
    /// may leave UI-only resources out of their list).
    pub listed: Option<Value>,
}

/// Why a `ui://` resource was not read. Each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UiResourceError {
    #[error(
        "no UI resource {uri} here: only the ui:// resources that the upstream MCP servers list or that their tools \
         link (_meta.ui.resourceUri) are served; see resources/list"
    )]
    NotFound { uri: String },
    #[error(
        "{uri} is named by more than one upstream MCP server ({namespaces}), so it is served by none: ask the \
         operator to connect only one of them, or have the servers name their UI resources apart"
    )]
    Ambiguous { uri: String, namespaces: String },
    #[error(
        "{uri} belongs to `{namespace}`, which uses your own account, and you have not connected it: call any \
         tools.{namespace}.<tool>() in execute to be asked to connect, then read it again"
    )]
    NeedsConnection { uri: String, namespace: String },
    #[error("{uri} is {bytes} bytes, over the {limit}-byte limit for a UI resource; it was not passed on")]
    TooLarge { uri: String, bytes: usize, limit: usize },
    #[error("`{namespace}` could not read {uri}: {message}; try again later")]
    Upstream { uri: String, namespace: String, message: String },
}

/// Whether `uri` names a UI resource: `ui://` and something after it, no
/// whitespace or control characters, at most 2048 characters.
pub fn is_ui_uri(uri: &str) -> bool {
    uri.len() <= 2048
        && uri.strip_prefix(UI_SCHEME).is_some_and(|rest| !rest.is_empty())
        && !uri.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ui_uris_are_ui_resources() {
        let long = format!("ui://{}", "a".repeat(2048));
        let cases = [
            ("ui://weather/view.html", true),
            ("ui://x", true),
            ("ui://", false),
            ("UI://weather", false),
            ("https://weather.example/view.html", false),
            ("file:///etc/passwd", false),
            ("ui://a b", false),
            ("ui://a\n@ui ui://b", false),
            (long.as_str(), false),
            ("", false),
        ];
        for (uri, expected) in cases {
            assert_eq!(is_ui_uri(uri), expected, "{uri:?}");
        }
    }
}
