//! An upstream MCP tool's call: what its `inputSchema` requires of the
//! arguments ([`McpInput`]), checked before its policy is asked and again
//! before it is sent. The server's tools are listed in `mcp_source.rs`.

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
        let takes = "any, id, n".to_owned();
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
        assert_eq!(message, "missing required argument `id`; this tool takes: any, id, n");
    }
}
