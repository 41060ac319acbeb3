//! One tool as the sandbox sees it, whatever its source.

use std::sync::Arc;

use executor_core::Effect;
use serde_json::Value;

use crate::openapi::HttpOperation;
use crate::typescript::{self, SchemaIn};

#[derive(Debug, Clone)]
pub struct ToolDef {
    /// `<namespace>.<group>.<name>` for OpenAPI, `<namespace>.<name>` for MCP.
    pub path: String,
    pub namespace: String,
    pub description: String,
    pub effect: Effect,
    pub input: Value,
    pub output: Option<Value>,
    /// The document `$ref`s in `input`/`output` point into: the OpenAPI spec,
    /// shared by all of its tools. `None`: each schema is its own root (MCP).
    pub root: Option<Arc<Value>>,
    pub target: Target,
}

/// How to make the call.
#[derive(Debug, Clone)]
pub enum Target {
    Http(Arc<HttpOperation>),
    /// The upstream MCP tool's own name.
    Mcp(String),
}

impl ToolDef {
    /// The last segment of the path.
    pub fn name(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }

    pub fn typescript(&self) -> String {
        let input = SchemaIn { schema: &self.input, root: self.root.as_deref().unwrap_or(&self.input) };
        let output =
            self.output.as_ref().map(|schema| SchemaIn { schema, root: self.root.as_deref().unwrap_or(schema) });
        typescript::declarations(&format!("tools.{}", self.path), &self.description, input, output)
    }
}
