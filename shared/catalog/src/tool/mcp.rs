//! An upstream MCP tool's call: what its `inputSchema` requires of the
//! arguments ([`McpInput`]), checked before its policy is asked and again
//! before it is sent; and its MCP Apps link ([`McpUi`]). The server's tools
//! are listed in `mcp_source.rs`.

use serde_json::{Map, Value};

/// What a tool's `inputSchema` says of its arguments, as far as they are
/// checked before a call is planned: the required properties, each
/// property's JSON types, and whether others may be given
/// (`additionalProperties: false` says not). The server checks the rest
/// (formats, nested objects, ...): a schema this does not read checks nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpInput {
    required: Vec<String>,
    /// Each property with the types its schema allows (none: any).
    properties: Vec<(String, Vec<JsonType>)>,
    closed: bool,
}

/// Why a call's arguments do not fit its tool's `inputSchema`. Nothing is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpArgumentError {
    #[error("arguments must be an object, e.g. tools.x.y({{id: \"a\"}}); this tool takes: {takes}")]
    NotAnObject { takes: String },
    #[error("missing required argument `{argument}`; this tool takes: {takes}")]
    Missing { argument: String, takes: String },
    #[error("unknown argument `{argument}`; this tool takes: {takes}")]
    Unknown { argument: String, takes: String },
    #[error("argument `{argument}` must be {expected}, got {found}; see tools.describe.tool for the input type")]
    WrongType { argument: String, expected: String, found: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "string" => Self::String,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }

    fn named(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "a boolean",
            Self::Integer => "an integer",
            Self::Number => "a number",
            Self::String => "a string",
            Self::Array => "an array",
            Self::Object => "an object",
        }
    }

    /// JSON Schema's rule: an integer is any number without a fractional part.
    fn fits(self, value: &Value) -> bool {
        match (self, value) {
            (Self::Integer, Value::Number(n)) => n.as_f64().is_some_and(|f| f.fract() == 0.0),
            (Self::Number, Value::Number(_)) => true,
            _ => Self::of(value) == self,
        }
    }

    fn of(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(_) => Self::Boolean,
            Value::Number(_) => Self::Number,
            Value::String(_) => Self::String,
            Value::Array(_) => Self::Array,
            Value::Object(_) => Self::Object,
        }
    }
}

impl McpInput {
    pub fn from_schema(schema: &Map<String, Value>) -> Self {
        let properties = schema.get("properties").and_then(Value::as_object);
        let properties = properties
            .into_iter()
            .flatten()
            .map(|(name, property)| {
                // A type this does not know makes the property unchecked, never refused.
                let types = match property.get("type") {
                    Some(Value::String(name)) => JsonType::parse(name).into_iter().collect(),
                    Some(Value::Array(names)) => names
                        .iter()
                        .map(|name| name.as_str().and_then(JsonType::parse))
                        .collect::<Option<Vec<_>>>()
                        .unwrap_or_default(),
                    _ => Vec::new(),
                };
                (name.clone(), types)
            })
            .collect();
        let required = schema.get("required").and_then(Value::as_array);
        let required = required.into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect();
        Self { required, properties, closed: schema.get("additionalProperties") == Some(&Value::Bool(false)) }
    }

    /// Whether `args` fit: an object (or nothing) with every required
    /// property, no unknown one when the schema is closed, and each
    /// property of a type its schema allows.
    pub fn check(&self, args: &Value) -> Result<(), McpArgumentError> {
        let empty = Map::new();
        let args = match args {
            Value::Object(map) => map,
            Value::Null => &empty,
            _ => return Err(McpArgumentError::NotAnObject { takes: self.takes() }),
        };
        let declared = |name: &str| self.properties.iter().find(|(n, _)| n == name).map(|(_, types)| types);
        if self.closed
            && let Some(unknown) = args.keys().find(|name| declared(name).is_none())
        {
            return Err(McpArgumentError::Unknown { argument: unknown.clone(), takes: self.takes() });
        }
        if let Some(missing) = self.required.iter().find(|name| !args.contains_key(*name)) {
            return Err(McpArgumentError::Missing { argument: missing.clone(), takes: self.takes() });
        }
        for (name, value) in args {
            let Some(types) = declared(name).filter(|types| !types.is_empty()) else { continue };
            if !types.iter().any(|t| t.fits(value)) {
                let expected = types.iter().map(|t| t.named()).collect::<Vec<_>>().join(" or ");
                let found = JsonType::of(value).named();
                return Err(McpArgumentError::WrongType { argument: name.clone(), expected, found });
            }
        }
        Ok(())
    }

    /// The properties, for messages.
    fn takes(&self) -> String {
        match self.properties.is_empty() {
            true => "no declared arguments".into(),
            false => self.properties.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(", "),
        }
    }
}

/// The most of a tool's `_meta.ui` kept whole, as JSON; past it only
/// `resourceUri` and `visibility` are kept.
const MAX_UI_META_BYTES: usize = 4096;

/// An MCP Apps tool's `_meta.ui` (SEP-1865, `io.modelcontextprotocol/ui`):
/// the view its results are shown in (`resourceUri`, a `ui://` resource of
/// the same server) and who may call it (`visibility`: `model`, `app`).
/// Kept as the server sent it, for search items and the gateway; describe
/// shows it as an `@ui` line.
#[derive(Debug, Clone, PartialEq)]
pub struct McpUi {
    raw: Map<String, Value>,
}

impl McpUi {
    /// From a listed tool's `_meta`: its `ui` object, or the deprecated flat
    /// `ui/resourceUri` as `{resourceUri}`. `None` when it has neither.
    pub fn from_meta(meta: Option<&Map<String, Value>>) -> Option<Self> {
        let meta = meta?;
        let mut raw = match meta.get("ui") {
            Some(Value::Object(ui)) => ui.clone(),
            _ => Map::new(),
        };
        if !raw.contains_key("resourceUri")
            && let Some(Value::String(uri)) = meta.get("ui/resourceUri")
        {
            raw.insert("resourceUri".into(), Value::String(uri.clone()));
        }
        if raw.is_empty() {
            return None;
        }
        if Value::Object(raw.clone()).to_string().len() > MAX_UI_META_BYTES {
            raw.retain(|key, _| key == "resourceUri" || key == "visibility");
            if Value::Object(raw.clone()).to_string().len() > MAX_UI_META_BYTES {
                raw.retain(|key, value| {
                    key == "resourceUri" && value.as_str().is_some_and(executor_sandbox::is_ui_uri)
                });
            }
        }
        Some(Self { raw })
    }

    /// `_meta.ui` as the server sent it (capped).
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// The `ui://` resource of the tool's view, when it names a valid one.
    pub fn resource_uri(&self) -> Option<&str> {
        self.raw.get("resourceUri").and_then(Value::as_str).filter(|uri| executor_sandbox::is_ui_uri(uri))
    }

    /// Who may call the tool, when the server said (`model`, `app`; others left out).
    pub fn visibility(&self) -> Option<Vec<&str>> {
        let listed = self.raw.get("visibility")?.as_array()?;
        Some(listed.iter().filter_map(Value::as_str).filter(|v| matches!(*v, "model" | "app")).collect())
    }

    /// The line `describe` adds to the tool's doc comment:
    /// `@ui ui://weather/view.html (visibility: model, app)`.
    pub fn doc_line(&self) -> Option<String> {
        let uri = self.resource_uri();
        let visibility = self.visibility().map(|v| format!("visibility: {}", v.join(", ")));
        match (uri, visibility) {
            (Some(uri), Some(visibility)) => Some(format!("@ui {uri} ({visibility})")),
            (Some(uri), None) => Some(format!("@ui {uri}")),
            (None, Some(visibility)) => Some(format!("@ui ({visibility})")),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn input(schema: Value) -> McpInput {
        McpInput::from_schema(schema.as_object().unwrap())
    }

    #[test]
    fn arguments_are_checked_against_the_input_schema() {
        let open = input(json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "n": {"type": ["integer", "null"]}, "any": {"type": "weird"}},
            "required": ["id"],
        }));
        let closed =
            input(json!({"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": false}));
        let fits = [
            (&open, json!({"id": "a"})),
            (&open, json!({"id": "a", "n": 3, "extra": true})),
            (&open, json!({"id": "a", "n": 3.0})),
            (&open, json!({"id": "a", "n": null, "any": [1]})),
            (&closed, json!({})),
            (&closed, Value::Null),
        ];
        for (input, args) in fits {
            assert_eq!(input.check(&args), Ok(()), "{args}");
        }
        let takes = "id, n, any".to_owned();
        let refused = [
            (&open, json!({}), McpArgumentError::Missing { argument: "id".into(), takes: takes.clone() }),
            (&open, json!([1]), McpArgumentError::NotAnObject { takes: takes.clone() }),
            (
                &open,
                json!({"id": 5}),
                McpArgumentError::WrongType { argument: "id".into(), expected: "a string".into(), found: "a number" },
            ),
            (
                &open,
                json!({"id": "a", "n": 1.5}),
                McpArgumentError::WrongType {
                    argument: "n".into(),
                    expected: "an integer or null".into(),
                    found: "a number",
                },
            ),
            (
                &closed,
                json!({"id": "a", "extra": 1}),
                McpArgumentError::Unknown { argument: "extra".into(), takes: "id".into() },
            ),
        ];
        for (input, args, expected) in refused {
            assert_eq!(input.check(&args), Err(expected), "{args}");
        }
        let message = open.check(&json!({})).unwrap_err().to_string();
        assert_eq!(message, "missing required argument `id`; this tool takes: id, n, any");
    }

    #[test]
    fn a_tools_ui_link_is_kept_and_shown_as_an_ui_line() {
        let meta = |value: Value| value.as_object().cloned();
        let big = "x".repeat(MAX_UI_META_BYTES);
        let cases = [
            (
                json!({"ui": {"resourceUri": "ui://w/view.html", "visibility": ["model", "app"]}}),
                Some("@ui ui://w/view.html (visibility: model, app)"),
            ),
            (json!({"ui": {"resourceUri": "ui://w/view.html"}}), Some("@ui ui://w/view.html")),
            (json!({"ui": {"visibility": ["app", "else"]}}), Some("@ui (visibility: app)")),
            // The deprecated flat key.
            (json!({"ui/resourceUri": "ui://w/old.html"}), Some("@ui ui://w/old.html")),
            // Not a UI resource, or a line break that would forge another tag: kept raw, never shown.
            (json!({"ui": {"resourceUri": "https://w.example/view.html"}}), None),
            (json!({"ui": {"resourceUri": "ui://a\n@ui ui://b"}}), None),
            (json!({"ui": {"resourceUri": "ui://w/v.html", "csp": big}}), Some("@ui ui://w/v.html")),
        ];
        for (given, line) in cases {
            let ui = McpUi::from_meta(meta(given.clone()).as_ref()).unwrap();
            assert_eq!(ui.doc_line().as_deref(), line, "{given}");
            assert!(Value::Object(ui.raw().clone()).to_string().len() <= MAX_UI_META_BYTES, "{given}");
        }
        assert_eq!(McpUi::from_meta(meta(json!({"other": 1})).as_ref()), None);
        assert_eq!(McpUi::from_meta(None), None);
        let kept = McpUi::from_meta(meta(json!({"ui": {"resourceUri": "ui://w", "prefersBorder": true}})).as_ref());
        assert_eq!(kept.unwrap().raw()["prefersBorder"], true, "unknown fields are kept");
    }
}
