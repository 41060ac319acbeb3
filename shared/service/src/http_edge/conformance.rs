//! Fixtures of the official MCP conformance suite (npm
//! `@modelcontextprotocol/conformance`), compiled only with the `conformance`
//! feature, which `scripts/test-conformance` builds `executor serve` with. Never
//! enable it in a build that serves anyone: see [`anonymous_owner`].
//!
//! The suite's server scenarios call tools of fixed names and check what comes
//! back. These are the ones a JSON-answering, stream-less server can honour;
//! the rest (progress and log notifications, sampling, elicitation mid-call,
//! SSE) need a server-to-client stream this server never opens, and are listed
//! with their reasons in `tests/conformance/expected-failures.yml`.

use std::sync::Arc;

use executor_core::Principal;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents, Tool};
use serde_json::{Value, json};

/// The owner of requests that carry no `Authorization` header.
///
/// The suite's client sends no headers of its own (its CLI has no option for
/// one), and `/mcp` otherwise answers 401 to such requests. So this build, and
/// only this build, serves them as one fixed owner. A request with a token is
/// still checked as usual, and a wrong token is still 401.
pub(crate) fn anonymous_owner() -> Principal {
    Principal::parse("conformance").expect("a valid principal")
}

/// A 1x1 red PNG.
const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FDAAAAAElFTkSuQmCC";
/// One millisecond of silence: 8 samples, 8-bit mono at 8 kHz.
const SILENT_WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

const JSON_SCHEMA_TOOL: &str = "json_schema_2020_12_tool";

/// `declared` (`execute` and `resume`) followed by the fixture tools.
pub(crate) fn with_fixtures(declared: Arc<[Tool]>) -> Arc<[Tool]> {
    declared.iter().cloned().chain(tools()).collect()
}

fn tools() -> Vec<Tool> {
    let no_arguments = || object(json!({ "type": "object", "properties": {} }));
    let mut tools: Vec<Tool> = [
        ("test_simple_text", "Conformance fixture: returns one text block."),
        ("test_image_content", "Conformance fixture: returns a PNG image block."),
        ("test_audio_content", "Conformance fixture: returns a WAV audio block."),
        ("test_embedded_resource", "Conformance fixture: returns an embedded text resource."),
        ("test_multiple_content_types", "Conformance fixture: returns text, image and resource blocks."),
        ("test_error_handling", "Conformance fixture: always fails with isError."),
    ]
    .into_iter()
    .map(|(name, description)| Tool::new(name, description, no_arguments()))
    .collect();
    // The suite checks that `$schema`, `$defs` and `additionalProperties`
    // reach the client as declared.
    let schema_2020_12 = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": { "street": { "type": "string" }, "city": { "type": "string" } },
            },
        },
        "properties": { "name": { "type": "string" }, "address": { "$ref": "#/$defs/address" } },
        "additionalProperties": false,
    });
    tools.push(Tool::new(JSON_SCHEMA_TOOL, "Tool with JSON Schema 2020-12 features", object(schema_2020_12)));
    tools
}

/// The answer of fixture tool `name`, or `None` when it is not one.
pub(crate) fn call(name: &str, args: &JsonObject) -> Option<CallToolResult> {
    let result = match name {
        "test_simple_text" => {
            CallToolResult::success(vec![ContentBlock::text("This is a simple text response for testing.")])
        }
        "test_image_content" => CallToolResult::success(vec![ContentBlock::image(RED_PIXEL_PNG, "image/png")]),
        "test_audio_content" => CallToolResult::success(vec![ContentBlock::audio(SILENT_WAV, "audio/wav")]),
        "test_embedded_resource" => CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::text("This is an embedded resource content.", "test://embedded-resource")
                .with_mime_type("text/plain"),
        )]),
        "test_multiple_content_types" => CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(RED_PIXEL_PNG, "image/png"),
            ContentBlock::resource(
                ResourceContents::text(
                    json!({ "test": "data", "value": 123 }).to_string(),
                    "test://mixed-content-resource",
                )
                .with_mime_type("application/json"),
            ),
        ]),
        "test_error_handling" => {
            CallToolResult::error(vec![ContentBlock::text("This tool intentionally returns an error for testing")])
        }
        JSON_SCHEMA_TOOL => {
            CallToolResult::success(vec![ContentBlock::text(format!("Received: {}", Value::Object(args.clone())))])
        }
        _ => return None,
    };
    Some(result)
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("tool schemas are objects"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_declared_fixture_answers() {
        for tool in tools() {
            let result = call(&tool.name, &JsonObject::new()).unwrap_or_else(|| panic!("{} has no handler", tool.name));
            assert!(!result.content.is_empty(), "{}", tool.name);
            assert_eq!(result.is_error, Some(tool.name == "test_error_handling"), "{}", tool.name);
        }
        assert!(call("execute", &JsonObject::new()).is_none());
    }

    #[test]
    fn the_2020_12_schema_keeps_its_keywords() {
        let tools = tools();
        let schema = &tools.iter().find(|t| t.name == JSON_SCHEMA_TOOL).unwrap().input_schema;
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert!(schema["$defs"]["address"].is_object());
        assert_eq!(schema["additionalProperties"], false);
    }
}
