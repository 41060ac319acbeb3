//! One tool as the sandbox sees it, whatever its source: the model every
//! other part of the catalog builds, searches or calls. It imports nothing of
//! theirs: what a call of each kind needs is in `tool/` (`http.rs`,
//! `graphql.rs`, `mcp.rs`), and so is the reader of schemas kept in the
//! catalog index (`indexed.rs`).

pub(crate) mod graphql;
pub(crate) mod http;
pub(crate) mod indexed;
pub(crate) mod mcp;

use std::sync::Arc;

use executor_core::Effect;
use serde_json::Value;

use crate::tool::graphql::GraphqlOperation;
use crate::tool::http::HttpOperation;
use crate::tool::indexed::{IndexError, IndexedSource, Span};
use crate::tool::mcp::{McpInput, McpUi};
use crate::typescript::{self, Refs, SchemaIn};

#[derive(Debug, Clone)]
pub struct ToolDef {
    /// `<namespace>.<group>.<name>` for OpenAPI, `<namespace>.<name>` for MCP,
    /// `<namespace>.query|mutation.<field>` for GraphQL.
    pub path: String,
    pub namespace: String,
    /// Everything the source says of the tool: `describe` shows it whole.
    pub description: String,
    /// What a search item says the tool is, on one line (see [`one_line`] and [`first_sentence`]).
    pub summary: String,
    pub effect: Effect,
    pub schemas: Schemas,
    pub target: Target,
}

/// The longest summary, in characters: a search item is one glance.
const SUMMARY_CHARS: usize = 160;

/// Words whose full stop ends no sentence ("e.g. a name").
const ABBREVIATIONS: [&str; 6] = ["e.g", "i.e", "etc", "vs", "cf", "approx"];

/// The first non-empty line of a text written as a title (an OpenAPI summary), capped.
pub(crate) fn one_line(text: &str) -> String {
    capped(text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or(""))
}

/// The first sentence of a long text's first non-empty line, capped: a
/// description often opens with a paragraph, and a prefix of it would stop mid-thought.
pub(crate) fn first_sentence(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
    let end = line.char_indices().find_map(|(at, c)| {
        let after = &line[at + c.len_utf8()..];
        let word = line[..at].rsplit(char::is_whitespace).next().unwrap_or("");
        let word = word.trim_start_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        // An initial ("J. Smith") or a known abbreviation does not end the sentence.
        let abbreviation = word.chars().count() == 1 || ABBREVIATIONS.contains(&word.as_str());
        (matches!(c, '.' | '!' | '?') && after.starts_with(char::is_whitespace) && !abbreviation)
            .then_some(at + c.len_utf8())
    });
    capped(&line[..end.unwrap_or(line.len())])
}

/// At most [`SUMMARY_CHARS`], cut after a whole word and marked `…`.
fn capped(line: &str) -> String {
    let Some((limit, _)) = line.char_indices().nth(SUMMARY_CHARS) else { return line.to_owned() };
    let head = &line[..limit];
    // Back to the last space, unless the line has none to cut at.
    let head = match head.rfind(char::is_whitespace) {
        Some(space) if space > 0 => &head[..space],
        _ => head,
    };
    format!("{}…", head.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':')))
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
    /// what its `inputSchema` requires of a call's arguments, and its MCP
    /// Apps link (`_meta.ui`) when it has one.
    Mcp {
        name: String,
        hints: Vec<(&'static str, bool)>,
        input: Arc<McpInput>,
        ui: Option<Arc<McpUi>>,
    },
    Graphql(Arc<GraphqlOperation>),
}

impl ToolDef {
    /// The last segment of the path.
    pub fn name(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }

    /// The MCP Apps link of an MCP tool that has one (`_meta.ui`).
    pub fn ui(&self) -> Option<&McpUi> {
        match &self.target {
            Target::Mcp { ui, .. } => ui.as_deref(),
            _ => None,
        }
    }

    /// The TypeScript declarations `describe` answers with. Fails only when
    /// the schemas are in a catalog index that cannot be read any more. An
    /// MCP Apps tool's doc comment ends with its `@ui` line: text, like the
    /// rest of the answer, so describe's shape stays a string that agents
    /// and clients read alike (the object itself is in search items).
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
        let description = match self.ui().and_then(McpUi::doc_line) {
            Some(line) => format!("{}\n{line}", self.description.trim()).trim_start().to_owned(),
            None => self.description.clone(),
        };
        Ok(typescript::declarations(&format!("tools.{}", self.path), &description, input, output, http))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_the_first_sentence_or_line() {
        let long = format!("{}.", "word ".repeat(50).trim_end());
        let cut = format!("{}…", "word ".repeat(32).trim_end());
        let cases = [
            ("List issues.", "List issues."),
            (
                "  \n\nLists the issues of a repository. Pull requests are issues too.",
                "Lists the issues of a repository.",
            ),
            ("Lists issues\nof a repository.", "Lists issues"),
            ("Is it merged? Returns 204 when it is.", "Is it merged?"),
            ("Deletes it! No undo.", "Deletes it!"),
            ("Filters by label, e.g. bug. Up to 100.", "Filters by label, e.g. bug."),
            ("Written by J. Smith in 2020. More.", "Written by J. Smith in 2020."),
            ("Version 1.2.3 is current. Later ones differ.", "Version 1.2.3 is current."),
            ("Ends with a dot.", "Ends with a dot."),
            ("Uses example.com (see docs).", "Uses example.com (see docs)."),
            ("", ""),
            (long.as_str(), cut.as_str()),
        ];
        for (text, expected) in cases {
            assert_eq!(first_sentence(text), expected, "{text:?}");
        }
    }

    #[test]
    fn a_title_is_kept_whole_on_one_line() {
        let unbroken = "x".repeat(SUMMARY_CHARS + 5);
        let unbroken_cut = format!("{}…", "x".repeat(SUMMARY_CHARS));
        let comma = format!("{}, and more", "a".repeat(SUMMARY_CHARS - 2));
        let comma_cut = format!("{}…", "a".repeat(SUMMARY_CHARS - 2));
        let cases = [
            ("Get a repository. Or a fork.", "Get a repository. Or a fork."),
            ("\n  Get a user  \nmore", "Get a user"),
            (unbroken.as_str(), unbroken_cut.as_str()),
            (comma.as_str(), comma_cut.as_str()),
        ];
        for (text, expected) in cases {
            assert_eq!(one_line(text), expected, "{text:?}");
        }
    }
}
