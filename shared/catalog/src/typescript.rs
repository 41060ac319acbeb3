//! JSON Schema to compact TypeScript, for `tools.describe.tool`.
//!
//! Local `$ref`s become named types declared once after the tool's own types,
//! so a cyclic schema (a tree node whose children are tree nodes) is a type
//! that refers to itself rather than an endless expansion. Inline nesting is
//! capped all the same, for hostile schemas.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use crate::naming::{is_identifier, sanitize};

/// Deeper inline nesting than this is written `unknown`.
const MAX_DEPTH: usize = 24;
/// At most this many named types per description, to keep it compact.
const MAX_NAMED: usize = 64;

/// A schema and the document its `$ref`s point into.
#[derive(Clone, Copy)]
pub struct SchemaIn<'a> {
    pub schema: &'a Value,
    pub root: &'a dyn Refs,
}

/// What local `$ref`s (`#/...`) point at.
pub trait Refs {
    fn target(&self, reference: &str) -> Option<&Value>;
}

/// A whole document in memory.
impl Refs for Value {
    fn target(&self, reference: &str) -> Option<&Value> {
        reference.strip_prefix('#').and_then(|pointer| self.pointer(pointer))
    }
}

/// `type Input = …; type Output = …;` then the referenced named types.
/// `http`: the tool answers over HTTP, so a success also carries its status.
pub fn declarations(
    call: &str,
    description: &str,
    input: SchemaIn<'_>,
    output: Option<SchemaIn<'_>>,
    http: bool,
) -> String {
    let mut out = String::new();
    let status = if http { "; http: { status: number }" } else { "" };
    let _ = writeln!(
        out,
        "// {call}(input: Input): Promise<{{ ok: true; data: Output{status} }} | {{ ok: false; error: {{ code: string; message: string }} }}>"
    );
    let summary = description.trim();
    if !summary.is_empty() {
        let _ = writeln!(out, "/** {} */", summary.replace("*/", "* /"));
    }
    let mut types = Renderer::new(input.root);
    let input_ts = if takes_nothing(input.schema) { "{}".into() } else { types.render(input.schema, 0, true) };
    let mut named = String::new();
    let output_ts = match output {
        None => "unknown".to_owned(),
        // One document (OpenAPI): a type both use is declared once.
        Some(output) if std::ptr::addr_eq(output.root, input.root) => types.render(output.schema, 0, false),
        // Its own (an MCP tool's output schema): its types take names the input's left.
        Some(output) => {
            let taken = types.write_named(&mut named);
            let mut output_types = Renderer::new(output.root);
            output_types.taken = taken;
            let output_ts = output_types.render(output.schema, 0, false);
            types = output_types;
            output_ts
        }
    };
    let _ = writeln!(out, "type Input = {input_ts};");
    let _ = writeln!(out, "type Output = {output_ts};");
    types.write_named(&mut named);
    out.push_str(&named);
    out
}

/// Names a declared type may not take: the tool's own, and TypeScript's
/// keywords and types (a `Record` of the document's would change what
/// `Record<string, unknown>` means).
const RESERVED: &[&str] = &[
    "Input",
    "Output",
    "Record",
    "Promise",
    "Array",
    "string",
    "number",
    "boolean",
    "bigint",
    "symbol",
    "object",
    "unknown",
    "never",
    "any",
    "void",
    "null",
    "undefined",
    "true",
    "false",
    "this",
    "type",
    "typeof",
    "keyof",
    "infer",
    "is",
    "asserts",
    "readonly",
    "unique",
    "abstract",
    "as",
    "satisfies",
    "declare",
    "namespace",
    "module",
    "global",
    "require",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "return",
    "super",
    "switch",
    "throw",
    "try",
    "var",
    "while",
    "with",
    "yield",
    "let",
    "static",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "await",
    "async",
    "of",
    "get",
    "set",
];

struct Renderer<'a> {
    root: &'a dyn Refs,
    /// `$ref` pointer -> type name, in discovery order.
    names: BTreeMap<String, String>,
    /// Names declared already by another renderer of the same declarations.
    taken: Vec<String>,
    /// Declarations of named types, by name, once rendered.
    declared: Vec<(String, String)>,
    queue: Vec<(String, &'a Value)>,
}

impl<'a> Renderer<'a> {
    fn new(root: &'a dyn Refs) -> Self {
        Self { root, names: BTreeMap::new(), taken: Vec::new(), declared: Vec::new(), queue: Vec::new() }
    }

    /// Declare every named type met so far; the names declared, and taken
    /// before, are returned.
    fn write_named(&mut self, out: &mut String) -> Vec<String> {
        while let Some((name, schema)) = self.queue.pop() {
            let rendered = self.render(schema, 0, false);
            self.declared.push((name, rendered));
        }
        self.declared.sort();
        for (name, rendered) in self.declared.drain(..) {
            let _ = writeln!(out, "type {name} = {rendered};");
        }
        self.taken.extend(self.names.values().cloned());
        std::mem::take(&mut self.taken)
    }

    fn named(&mut self, reference: &str) -> String {
        if let Some(name) = self.names.get(reference) {
            return name.clone();
        }
        let target = self.root.target(reference);
        let (Some(target), true) = (target, self.names.len() < MAX_NAMED) else { return "unknown".into() };
        let base = sanitize(reference.rsplit('/').next().unwrap_or("Ref"));
        let mut name = base.clone();
        let mut n = 1;
        while self.names.values().chain(&self.taken).any(|taken| *taken == name) || RESERVED.contains(&name.as_str()) {
            n += 1;
            name = format!("{base}{n}");
        }
        self.names.insert(reference.to_owned(), name.clone());
        self.queue.push((name.clone(), target));
        name
    }

    fn render(&mut self, schema: &'a Value, depth: usize, documented: bool) -> String {
        let Some(object) = schema.as_object() else {
            return if schema == &Value::Bool(false) { "never".into() } else { "unknown".into() };
        };
        if depth > MAX_DEPTH {
            return "unknown".into();
        }
        let rendered = if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            self.named(reference)
        } else if let Some(constant) = object.get("const") {
            constant.to_string()
        } else if let Some(Value::Array(values)) = object.get("enum") {
            union(values.iter().map(Value::to_string).collect())
        } else if let Some(Value::Array(members)) = object.get("oneOf").or_else(|| object.get("anyOf")) {
            union(members.iter().map(|m| self.render(m, depth + 1, false)).collect())
        } else if let Some(Value::Array(members)) = object.get("allOf") {
            let parts: Vec<String> = members.iter().map(|m| parenthesise(self.render(m, depth + 1, false))).collect();
            if parts.is_empty() { "unknown".into() } else { parts.join(" & ") }
        } else {
            match object.get("type") {
                Some(Value::Array(types)) => union(
                    types
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|t| self.render_type(t, schema, depth, documented))
                        .collect(),
                ),
                Some(Value::String(t)) => self.render_type(t, schema, depth, documented),
                _ if object.contains_key("properties") => self.render_type("object", schema, depth, documented),
                _ => "unknown".into(),
            }
        };
        // OpenAPI 3.0 marks nullable schemas with a flag instead of a type union.
        match object.get("nullable") {
            Some(Value::Bool(true)) => union(vec![rendered, "null".into()]),
            _ => rendered,
        }
    }

    fn render_type(&mut self, kind: &str, schema: &'a Value, depth: usize, documented: bool) -> String {
        match kind {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => match schema.get("items") {
                Some(items) => format!("{}[]", parenthesise(self.render(items, depth + 1, false))),
                None => "unknown[]".into(),
            },
            "object" => self.render_object(schema, depth, documented),
            _ => "unknown".into(),
        }
    }

    fn render_object(&mut self, schema: &'a Value, depth: usize, documented: bool) -> String {
        let required: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let mut fields = Vec::new();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let key = if is_identifier(name) { name.clone() } else { Value::String(name.clone()).to_string() };
                let optional = if required.contains(&name.as_str()) { "" } else { "?" };
                let doc = match property.get("description").and_then(Value::as_str) {
                    Some(text) if documented => format!("/** {} */ ", first_line(text)),
                    _ => String::new(),
                };
                fields.push(format!("{doc}{key}{optional}: {}", self.render(property, depth + 1, false)));
            }
        }
        match schema.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            Some(extra @ Value::Object(_)) => {
                fields.push(format!("[key: string]: {}", self.render(extra, depth + 1, false)));
            }
            _ if fields.is_empty() => return "Record<string, unknown>".into(),
            _ => {}
        }
        if fields.is_empty() { "{}".into() } else { format!("{{ {} }}", fields.join("; ")) }
    }
}

/// Whether a tool's arguments schema is an object that names no argument and
/// declares no others: the tool takes `{}`, not `Record<string, unknown>`,
/// which would invite arguments that are refused. OpenAPI and GraphQL tools
/// refuse any argument they do not declare. An MCP `inputSchema` of a bare
/// `{"type": "object"}` (what servers list for a function without
/// parameters) allows others only by JSON Schema's default, which promises
/// nothing is read; a server that takes more says so with
/// `additionalProperties: true` or a schema, and is declared so.
fn takes_nothing(schema: &Value) -> bool {
    let Some(object) = schema.as_object() else { return false };
    let composed = ["$ref", "oneOf", "anyOf", "allOf", "patternProperties"].iter().any(|k| object.contains_key(*k));
    object.get("type").and_then(Value::as_str) == Some("object")
        && !composed
        && object.get("properties").and_then(Value::as_object).is_none_or(|p| p.is_empty())
        && matches!(object.get("additionalProperties"), None | Some(Value::Bool(false)))
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim().replace("*/", "* /");
    match line.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

fn union(mut members: Vec<String>) -> String {
    members.dedup();
    match members.len() {
        0 => "never".into(),
        _ if members.iter().any(|m| m == "unknown") => "unknown".into(),
        _ => members.join(" | "),
    }
}

/// Unions and intersections need brackets inside `T[]` and `A & B`.
fn parenthesise(ts: String) -> String {
    if ts.contains(" | ") || ts.contains(" & ") { format!("({ts})") } else { ts }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn ts(schema: Value, root: Value) -> String {
        let root = if root.is_null() { schema.clone() } else { root };
        let text = declarations("tools.t.x", "", SchemaIn { schema: &schema, root: &root }, None, false);
        text.lines().filter(|l| !l.starts_with("//") && !l.starts_with("type Output")).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn schemas_become_typescript() {
        let cases = [
            (json!({"type": "string"}), "type Input = string;"),
            (json!({"type": "integer", "nullable": true}), "type Input = number | null;"),
            (json!({"type": ["string", "null"]}), "type Input = string | null;"),
            (json!({"enum": ["open", "closed", 3]}), r#"type Input = "open" | "closed" | 3;"#),
            (json!({"const": "x"}), r#"type Input = "x";"#),
            (
                json!({"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "number"}]}}),
                "type Input = (string | number)[];",
            ),
            (
                json!({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"type": "object", "properties": {"b": {"type": "boolean"}}}]}),
                "type Input = { a: string } & { b?: boolean };",
            ),
            (
                json!({"type": "object", "properties": {"meta": {"type": "object"}}}),
                "type Input = { meta?: Record<string, unknown> };",
            ),
            (
                json!({"type": "object", "additionalProperties": {"type": "number"}}),
                "type Input = { [key: string]: number };",
            ),
            (
                json!({"type": "object", "properties": {"a-b": {"type": "string", "description": "dashed\nmore"}, "n": {}}, "required": ["a-b"]}),
                r#"type Input = { /** dashed */ "a-b": string; n?: unknown };"#,
            ),
            (json!({}), "type Input = unknown;"),
        ];
        for (schema, expected) in cases {
            assert_eq!(ts(schema.clone(), Value::Null), expected, "{schema}");
        }
    }

    #[test]
    fn a_tool_without_arguments_takes_an_empty_object() {
        let cases = [
            // OpenAPI and GraphQL tools without parameters, an MCP tool without properties.
            (json!({"type": "object", "properties": {}, "required": []}), "type Input = {};"),
            (json!({"type": "object"}), "type Input = {};"),
            (json!({"type": "object", "additionalProperties": false}), "type Input = {};"),
            // An MCP server that says it takes any arguments.
            (json!({"type": "object", "additionalProperties": true}), "type Input = Record<string, unknown>;"),
            (
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                "type Input = { [key: string]: string };",
            ),
            (json!({"type": "object", "patternProperties": {"^x-": {}}}), "type Input = Record<string, unknown>;"),
            (json!({"type": "object", "properties": {"a": {"type": "string"}}}), "type Input = { a?: string };"),
        ];
        for (schema, expected) in cases {
            assert_eq!(ts(schema.clone(), Value::Null), expected, "{schema}");
        }
    }

    #[test]
    fn refs_become_named_types_and_cycles_terminate() {
        let root = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}, "leaf": {"$ref": "#/components/schemas/Leaf"}}},
            "Leaf": {"type": "string"}
        }}});
        let got = ts(json!({"$ref": "#/components/schemas/Node"}), root);
        assert_eq!(got, "type Input = Node;\ntype Leaf = string;\ntype Node = { children?: Node[]; leaf?: Leaf };");
        assert_eq!(ts(json!({"$ref": "other.json#/x"}), json!({})), "type Input = unknown;");
        // A document's type named like one of TypeScript's takes another name.
        let root = json!({"components": {"schemas": {"Record": {"type": "string"}, "string": {"type": "number"}}}});
        let got = ts(json!({"type": "array", "items": {"$ref": "#/components/schemas/Record"}}), root.clone());
        assert_eq!(got, "type Input = Record2[];\ntype Record2 = string;");
        assert_eq!(
            ts(json!({"$ref": "#/components/schemas/string"}), root),
            "type Input = string2;\ntype string2 = number;"
        );
    }

    #[test]
    fn input_and_output_declare_each_type_once() {
        let root = json!({"components": {"schemas": {"Node": {"type": "string"}}}});
        let node = json!({"$ref": "#/components/schemas/Node"});
        let both = declarations(
            "tools.t.x",
            "",
            SchemaIn { schema: &node, root: &root },
            Some(SchemaIn { schema: &node, root: &root }),
            false,
        );
        assert!(both.ends_with("type Input = Node;\ntype Output = Node;\ntype Node = string;\n"), "{both}");
        // An output schema of its own (MCP): its types keep clear of the input's names.
        let own = json!({"components": {"schemas": {"Node": {"type": "number"}}}});
        let apart = declarations(
            "tools.t.x",
            "",
            SchemaIn { schema: &node, root: &root },
            Some(SchemaIn { schema: &node, root: &own }),
            false,
        );
        assert!(
            apart.ends_with("type Input = Node;\ntype Output = Node2;\ntype Node = string;\ntype Node2 = number;\n"),
            "{apart}"
        );
    }

    #[test]
    fn http_tools_declare_their_status() {
        let schema = json!({});
        let input = SchemaIn { schema: &schema, root: &schema };
        for (http, result) in
            [(true, "{ ok: true; data: Output; http: { status: number } }"), (false, "{ ok: true; data: Output }")]
        {
            let first = declarations("tools.t.x", "", input, None, http).lines().next().unwrap().to_owned();
            assert!(first.contains(&format!("Promise<{result} | {{ ok: false;")), "{first}");
        }
    }

    #[test]
    fn hostile_nesting_is_cut() {
        let mut schema = json!({"type": "string"});
        for _ in 0..200 {
            schema = json!({"type": "array", "items": schema});
        }
        assert!(ts(schema, Value::Null).contains("unknown"));
    }

    /// Names, texts and values a hostile document may hold.
    const NAMES: &[&str] = &[
        "Node", "node", "a-b", "a_b", "Input", "Output", "Record", "string", "number", "unknown", "never", "class",
        "type", "default", "1st", "", "日本", "*/", "$x", "_",
    ];
    const TEXTS: &[&str] = &["plain", "*/ type X = 1; /*", "a\n*/b", "/* c", "\u{2028}x", "**/", "\\", "`${x}`"];

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            proptest::sample::select(TEXTS).prop_map(Value::from),
            "[ -~\u{2028}\u{2029}\u{0}]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map(proptest::sample::select(NAMES), inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    fn schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            proptest::sample::select(&["string", "integer", "boolean", "null", "object", "array", "weird"][..])
                .prop_map(|t| json!({"type": t})),
            proptest::sample::select(NAMES).prop_map(|n| json!({"$ref": format!("#/components/schemas/{n}")})),
            value().prop_map(|v| json!({"const": v})),
            proptest::collection::vec(value(), 0..4).prop_map(|v| json!({"enum": v})),
            Just(json!({})),
            Just(json!(false)),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                (
                    proptest::collection::btree_map(
                        proptest::sample::select(NAMES),
                        (inner.clone(), proptest::option::of(proptest::sample::select(TEXTS))),
                        0..4
                    ),
                    proptest::collection::vec(proptest::sample::select(NAMES), 0..3),
                    proptest::option::of(inner.clone()),
                )
                    .prop_map(|(properties, required, extra)| {
                        let properties: serde_json::Map<String, Value> = properties
                            .into_iter()
                            .map(|(name, (mut schema, description))| {
                                if let (Some(object), Some(text)) = (schema.as_object_mut(), description) {
                                    object.insert("description".into(), text.into());
                                }
                                (name.to_owned(), schema)
                            })
                            .collect();
                        let mut object = json!({"type": "object", "properties": properties, "required": required});
                        if let Some(extra) = extra {
                            object["additionalProperties"] = extra;
                        }
                        object
                    }),
                inner.clone().prop_map(|items| json!({"type": "array", "items": items})),
                proptest::collection::vec(inner.clone(), 0..3).prop_map(|m| json!({"oneOf": m})),
                proptest::collection::vec(inner.clone(), 0..3).prop_map(|m| json!({"allOf": m})),
                inner.prop_map(|mut s| {
                    if let Some(object) = s.as_object_mut() {
                        object.insert("nullable".into(), true.into());
                    }
                    s
                }),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]

        /// Whatever a document holds, what the model is shown is TypeScript
        /// that parses and declares each type once, and names no type
        /// after one of TypeScript's own.
        #[test]
        fn declarations_are_typescript_for_any_schema(
            input in schema(),
            output in proptest::option::of(schema()),
            components in proptest::collection::btree_map(proptest::sample::select(NAMES), schema(), 0..6),
            description in proptest::sample::select(TEXTS),
        ) {
            let components: serde_json::Map<String, Value> =
                components.into_iter().map(|(name, schema)| (name.to_owned(), schema)).collect();
            let root = json!({"components": {"schemas": components}});
            let output = output.as_ref().map(|schema| SchemaIn { schema, root: &root });
            let text = declarations("tools.t.x", description, SchemaIn { schema: &input, root: &root }, output, true);
            let allocator = oxc::allocator::Allocator::default();
            let parsed = oxc::parser::Parser::new(&allocator, &text, oxc::span::SourceType::ts()).parse();
            let errors: Vec<String> = parsed.diagnostics.iter().map(ToString::to_string).collect();
            proptest::prop_assert!(errors.is_empty(), "{errors:?} in\n{text}");
            let checked = oxc::semantic::SemanticBuilder::new().with_check_syntax_error(true).build(&parsed.program);
            let errors: Vec<String> = checked.diagnostics.iter().map(ToString::to_string).collect();
            proptest::prop_assert!(errors.is_empty(), "{errors:?} in\n{text}");
            for line in text.lines() {
                if let Some(name) = line.strip_prefix("type ").and_then(|rest| rest.split(' ').next()) {
                    proptest::prop_assert!(
                        !["Record", "string", "number", "unknown", "never", "boolean", "null", "object"].contains(&name),
                        "a type named `{}` hides TypeScript's own:\n{}", name, text
                    );
                }
            }
        }
    }
}
