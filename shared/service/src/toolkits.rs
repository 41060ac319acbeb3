//! Toolkit endpoints: `/mcp/toolkits/{name}` serves the whole MCP surface of
//! `/mcp` over a toolkit's view of the tools (which the hosts build from the
//! catalog's `[[toolkits]]`). A key scoped to a toolkit works there and
//! nowhere else.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use executor_core::ToolkitName;
use executor_sandbox::Tools;
use http::{Response, StatusCode};

use crate::responses::rpc_error;

/// Where toolkits are served.
pub(crate) const TOOLKITS_PATH: &str = "/mcp/toolkits/";

/// One toolkit as the host serves it.
#[derive(Clone)]
pub struct ToolkitEndpoint {
    pub name: ToolkitName,
    /// The toolkit's view: only its tools, its stricter policy.
    pub tools: Arc<dyn Tools>,
    /// What `execute`'s description lists on the endpoint.
    pub namespaces: Vec<String>,
}

impl fmt::Debug for ToolkitEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolkitEndpoint").field("name", &self.name).field("namespaces", &self.namespaces).finish()
    }
}

/// The answer for `/mcp/toolkits/{name}` when no toolkit has that name.
pub(crate) fn unknown(name: &str) -> Response<Bytes> {
    let shown: String = name.chars().take(64).collect();
    rpc_error(
        StatusCode::NOT_FOUND,
        -32001,
        &format!("no toolkit `{shown}` is configured; toolkits are listed as [[toolkits]] in the sources file"),
    )
}
