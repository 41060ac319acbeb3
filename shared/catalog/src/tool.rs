//! One tool as the sandbox sees it, whatever its source.

use std::sync::Arc;

use executor_core::Effect;
use serde_json::Value;

use crate::graphql::GraphqlOperation;
use crate::openapi::HttpOperation;
use crate::typescript::{self, SchemaIn};

#[derive(Debug, Clone)]
pub struct ToolDef {
    /// `<namespace>.<group>.<name>` for OpenAPI, `<namespace>.<name>` for MCP,
    /// `<namespace>.query|mutation.<field>` for GraphQL.
    pub path: String,
    pub namespace: String,
    pub description: String,
    pub effect: Effect,
    /// JSON Schema of the arguments, as JSON text: parsed `Value`s take about
    /// ten times the memory, and schemas are only read by `describe`.
    pub input: String,
    /// JSON Schema of the data, as JSON text.
    pub output: Option<String>,
    /// What `$ref`s in `input`/`output` point into: the OpenAPI document's
    /// `components`, or the GraphQL schema's named types, shared by all of
    /// the source's tools. `None`: each schema is its own root (MCP).
    pub root: Option<Arc<Value>>,
    pub target: Target,
}

/// How to make the call.
#[derive(Debug, Clone)]
pub enum Target {
    Http(Arc<HttpOperation>),
    /// The upstream MCP tool's own name, and the annotations it declared
    /// (e.g. `("destructiveHint", true)`), shown to whoever approves a call.
    Mcp {
        name: String,
        hints: Vec<(&'static str, bool)>,
    },
    Graphql(Arc<GraphqlOperation>),
}

impl ToolDef {
    /// The last segment of the path.
    pub fn name(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }

    pub fn typescript(&self) -> String {
        let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
        let (input, output) = (parse(&self.input), self.output.as_deref().map(parse));
        let input = SchemaIn { schema: &input, root: self.root.as_deref().unwrap_or(&input) };
        let output = output.as_ref().map(|schema| SchemaIn { schema, root: self.root.as_deref().unwrap_or(schema) });
        let http = matches!(self.target, Target::Http(_));
        typescript::declarations(&format!("tools.{}", self.path), &self.description, input, output, http)
    }
}
