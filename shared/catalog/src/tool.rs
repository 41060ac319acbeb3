//! One tool as the sandbox sees it, whatever its source.

use std::sync::Arc;

use executor_core::Effect;
use serde_json::Value;

use crate::graphql::GraphqlOperation;
use crate::index::{IndexError, IndexedSource, Span};
use crate::mcp_source::McpInput;
use crate::openapi::HttpOperation;
use crate::typescript::{self, Refs, SchemaIn};

#[derive(Debug, Clone)]
pub struct ToolDef {
    /// `<namespace>.<group>.<name>` for OpenAPI, `<namespace>.<name>` for MCP,
    /// `<namespace>.query|mutation.<field>` for GraphQL.
    pub path: String,
    pub namespace: String,
    pub description: String,
    pub effect: Effect,
    pub schemas: Schemas,
    pub target: Target,
}

/// The tool's JSON Schemas, read only by `describe`.
#[derive(Debug, Clone)]
pub enum Schemas {
    /// As JSON text: parsed `Value`s take about ten times the memory.
    Text {
        /// The arguments.
        input: String,
        /// The data.
        output: Option<String>,
        /// What `$ref`s in `input`/`output` point into: the OpenAPI document's
        /// `components`, or the GraphQL schema's named types, shared by all of
        /// the source's tools. `None`: each schema is its own root (MCP).
        root: Option<Arc<Value>>,
    },
    /// In a catalog index file, read on the first `describe` of the tool.
    Indexed { source: Arc<IndexedSource>, input: Span, output: Option<Span> },
}

/// How to make the call.
#[derive(Debug, Clone)]
pub enum Target {
    Http(Arc<HttpOperation>),
    /// The upstream MCP tool's own name, the annotations it declared
    /// (e.g. `("destructiveHint", true)`), shown to whoever approves a call,
    /// and what its `inputSchema` requires of a call's arguments.
    Mcp {
        name: String,
        hints: Vec<(&'static str, bool)>,
        input: Arc<McpInput>,
    },
    Graphql(Arc<GraphqlOperation>),
}

impl ToolDef {
    /// The last segment of the path.
    pub fn name(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }

    /// The TypeScript declarations `describe` answers with. Fails only when
    /// the schemas are in a catalog index that cannot be read any more.
    pub fn typescript(&self) -> Result<String, IndexError> {
        let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
        let (input, output, root): (Value, Option<Value>, Option<&dyn Refs>) = match &self.schemas {
            Schemas::Text { input, output, root } => {
                (parse(input), output.as_deref().map(parse), root.as_deref().map(|root| root as &dyn Refs))
            }
            Schemas::Indexed { source, input, output } => {
                let output = output.map(|span| source.read(span)).transpose()?;
                (parse(&source.read(*input)?), output.as_deref().map(parse), Some(&**source as &dyn Refs))
            }
        };
        let input = SchemaIn { schema: &input, root: root.unwrap_or(&input) };
        let output = output.as_ref().map(|schema| SchemaIn { schema, root: root.unwrap_or(schema) });
        let http = matches!(self.target, Target::Http(_));
        Ok(typescript::declarations(&format!("tools.{}", self.path), &self.description, input, output, http))
    }
}
