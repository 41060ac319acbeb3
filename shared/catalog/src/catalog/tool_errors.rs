//! The errors the catalog's own checks answer a call with, worded in one
//! place: what the code reads when a tool cannot be called as asked.

use executor_sandbox::ToolError;

use crate::mcp_source::OwnerMcp;

pub(super) fn unavailable(namespace: &str, reason: &str) -> ToolError {
    ToolError {
        code: "source_unavailable".into(),
        message: format!("namespace `{namespace}` is unavailable: {reason}"),
    }
}

/// A per-owner source's call made without an owner (no authenticated caller).
pub(super) fn no_caller(path: &str) -> ToolError {
    let message = format!("tools.{path} uses its caller's own connection, and this call has no caller");
    ToolError { code: "auth_error".into(), message }
}

/// Why an OAuth-protected MCP server's tools are not known on this instance, and what to do.
pub(super) fn needs_connection(namespace: &str, mcp: &OwnerMcp) -> String {
    format!(
        "`{namespace}` is an OAuth-protected MCP server (owners authorize at {}) that lists its tools only to a \
         connected owner, and none has used it here yet: call any tool in it (e.g. `tools.{namespace}.search({{}})`) \
         to be asked to connect your account; the call then runs if the server has that tool, and its tools are \
         searchable from then on",
        mcp.authorization()
    )
}

pub(super) fn invalid(message: String) -> ToolError {
    ToolError { code: "invalid_arguments".into(), message }
}
