//! Toolkit endpoints: `/mcp/toolkits/{name}` serves the whole MCP surface of
//! `/mcp` over a toolkit's view of the tools (which the hosts build from the
//! catalog's `[[toolkits]]`). A key scoped to a toolkit works there and
//! nowhere else.

use bytes::Bytes;
use http::{Response, StatusCode};

use crate::http_edge::responses::rpc_error;

/// Where toolkits are served.
pub(crate) const TOOLKITS_PATH: &str = "/mcp/toolkits/";

/// The answer for `/mcp/toolkits/{name}` when no toolkit has that name.
pub(crate) fn unknown(name: &str) -> Response<Bytes> {
    let shown: String = name.chars().take(64).collect();
    rpc_error(
        StatusCode::NOT_FOUND,
        -32001,
        &format!("no toolkit `{shown}` is configured; toolkits are listed as [[toolkits]] in the sources file"),
    )
}
