//! GraphQL services: a schema (an introspection result, read from a file or
//! asked of the service) to tools, and a tool call's arguments to one
//! GraphQL request. Pure: fetching and sending happen in `catalog.rs`.
//!
//! Each field of the query type becomes a read tool
//! `<namespace>.query.<field>`, each field of the mutation type a write tool
//! `<namespace>.mutation.<field>`. The arguments are the field's arguments,
//! sent as variables, plus `select`: the selection set to return, when the
//! field returns an object. Without it the tool selects the scalar and enum
//! fields of the object (the default selection set), so a call returns
//! something useful without knowing the schema.
//!
//! `select` is one selection set, checked before sending: balanced braces
//! (strings and comments skipped), nothing after the closing brace, nested
//! at most [`MAX_SELECT_DEPTH`] levels. So a query tool can never carry a
//! mutation or a second operation past the approval policy.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use executor_core::Effect;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::naming::deduplicate;
use crate::tool::{Schemas, Target, ToolDef};

/// The argument holding a caller's own selection set.
pub const SELECT_ARGUMENT: &str = "select";
/// How deeply `select` may nest fields: deep selections are how a single
/// GraphQL request gets expensive.
pub const MAX_SELECT_DEPTH: usize = 8;
/// `ofType` wrappers followed in a type reference (the introspection query
/// asks for seven; a hostile file could nest more).
const MAX_TYPE_WRAPPERS: usize = 16;

/// The standard introspection query, with type references seven wrappers deep.
pub const INTROSPECTION_QUERY: &str = "query IntrospectionQuery { __schema { queryType { name } mutationType { name } \
     types { kind name description fields(includeDeprecated: true) { name description args { name description type { \
     ...TypeRef } defaultValue } type { ...TypeRef } } inputFields { name description type { ...TypeRef } defaultValue } \
     enumValues(includeDeprecated: true) { name } } } } fragment TypeRef on __Type { kind name ofType { kind name \
     ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name \
     } } } } } } } }";

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("the schema is not an introspection result (JSON with `__schema`, or `data.__schema`): {0}")]
    Syntax(String),
    #[error("the introspection answered with errors: {0}")]
    Errors(String),
    #[error("the schema has no query type `{0}` among its types")]
    NoQueryType(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationKind {
    Query,
    Mutation,
}

impl OperationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Query => "query",
            Self::Mutation => "mutation",
        }
    }
}

/// What a call needs to become a GraphQL request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphqlOperation {
    pub kind: OperationKind,
    pub field: String,
    pub args: Vec<Argument>,
    /// The default selection set (`{ id name }`) when the field returns an
    /// object, interface or union; shared by the fields returning one type.
    pub selection: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    /// As GraphQL writes it, for the variable's declaration: `[ID!]!`.
    pub type_text: String,
    /// Non-null without a default: the call must give it.
    pub required: bool,
}

/// One request: the document and its variables.
#[derive(Debug, PartialEq)]
pub struct GraphqlRequest {
    pub query: String,
    pub variables: Map<String, Value>,
}

// The introspection result, as far as the catalog reads it.
#[derive(Deserialize)]
struct Envelope {
    data: Option<Data>,
    #[serde(rename = "__schema")]
    schema: Option<Schema>,
    #[serde(default)]
    errors: Vec<GraphqlError>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "__schema")]
    schema: Option<Schema>,
}

/// An entry of a response's `errors`.
#[derive(Debug, Deserialize)]
pub struct GraphqlError {
    #[serde(default)]
    pub message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Schema {
    query_type: Option<Named>,
    mutation_type: Option<Named>,
    types: Vec<FullType>,
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FullType {
    kind: TypeKind,
    name: String,
    description: Option<String>,
    fields: Option<Vec<Field>>,
    input_fields: Option<Vec<InputValue>>,
    enum_values: Option<Vec<Named>>,
}

#[derive(Deserialize)]
struct Field {
    name: String,
    description: Option<String>,
    #[serde(default)]
    args: Vec<InputValue>,
    #[serde(rename = "type")]
    type_ref: TypeRef,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InputValue {
    name: String,
    description: Option<String>,
    #[serde(rename = "type")]
    type_ref: TypeRef,
    default_value: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeRef {
    kind: TypeKind,
    name: Option<String>,
    of_type: Option<Box<TypeRef>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum TypeKind {
    Scalar,
    Object,
    Interface,
    Union,
    Enum,
    InputObject,
    List,
    NonNull,
}

impl TypeRef {
    /// The named type under the list and non-null wrappers.
    fn named(&self) -> (&str, TypeKind) {
        let mut at = self;
        for _ in 0..MAX_TYPE_WRAPPERS {
            match (&at.name, &at.of_type) {
                (Some(name), _) => return (name, at.kind),
                (None, Some(inner)) => at = inner,
                (None, None) => break,
            }
        }
        ("", TypeKind::Scalar)
    }

    /// `[ID!]!`
    fn text(&self, depth: usize) -> String {
        match (self.kind, &self.of_type, &self.name) {
            _ if depth > MAX_TYPE_WRAPPERS => "String".into(),
            (TypeKind::NonNull, Some(inner), _) => format!("{}!", inner.text(depth + 1)),
            (TypeKind::List, Some(inner), _) => format!("[{}]", inner.text(depth + 1)),
            (_, _, Some(name)) => name.clone(),
            _ => "String".into(),
        }
    }

    /// JSON Schema; named types other than built-in scalars are `$ref`s into the root's `types`.
    fn schema(&self, depth: usize) -> Value {
        match (self.kind, &self.of_type, &self.name) {
            _ if depth > MAX_TYPE_WRAPPERS => json!({}),
            (TypeKind::NonNull, Some(inner), _) => inner.schema(depth + 1),
            (TypeKind::List, Some(inner), _) => json!({"type": "array", "items": inner.schema(depth + 1)}),
            (TypeKind::Scalar, _, Some(name)) => scalar(name),
            (_, _, Some(name)) => json!({"$ref": format!("#/types/{name}")}),
            _ => json!({}),
        }
    }
}

fn scalar(name: &str) -> Value {
    match name {
        "Int" => json!({"type": "integer"}),
        "Float" => json!({"type": "number"}),
        "String" | "ID" => json!({"type": "string"}),
        "Boolean" => json!({"type": "boolean"}),
        // Custom scalars (DateTime, JSON, ...): their JSON form is the service's business.
        _ => json!({"description": format!("GraphQL scalar {name}")}),
    }
}

/// Every query and mutation field of an introspection result as a tool under `namespace`.
pub fn load(namespace: &str, text: &str) -> Result<Vec<ToolDef>, SchemaError> {
    let envelope: Envelope = serde_json::from_str(text).map_err(|e| SchemaError::Syntax(e.to_string()))?;
    if !envelope.errors.is_empty() {
        return Err(SchemaError::Errors(messages(&envelope.errors)));
    }
    let schema = envelope
        .schema
        .or(envelope.data.and_then(|d| d.schema))
        .ok_or_else(|| SchemaError::Syntax("no `__schema`".into()))?;
    build(namespace, schema)
}

/// The messages of a response's `errors`, as one line.
pub fn messages(errors: &[GraphqlError]) -> String {
    let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
    messages.join("; ")
}

fn build(namespace: &str, schema: Schema) -> Result<Vec<ToolDef>, SchemaError> {
    let by_name: HashMap<&str, &FullType> = schema.types.iter().map(|t| (t.name.as_str(), t)).collect();
    let query_name = schema.query_type.as_ref().map_or("Query", |n| n.name.as_str());
    let query = by_name.get(query_name).ok_or_else(|| SchemaError::NoQueryType(query_name.into()))?;
    let mutation = schema.mutation_type.as_ref().and_then(|n| by_name.get(n.name.as_str()));

    let root = Arc::new(json!({ "types": type_schemas(&schema.types) }));
    let mut selections: HashMap<&str, Arc<str>> = HashMap::new();
    let mut built: Vec<(String, ToolDef)> = Vec::new();
    for (kind, owner) in [(OperationKind::Query, Some(query)), (OperationKind::Mutation, mutation)] {
        let Some(owner) = owner else { continue };
        let mut fields: Vec<&Field> = owner.fields.iter().flatten().filter(|f| !f.name.starts_with("__")).collect();
        // Named in field order, so names do not depend on the order the service lists them.
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        for field in fields {
            let (type_name, type_kind) = field.type_ref.named();
            let selection = match type_kind {
                TypeKind::Object | TypeKind::Interface | TypeKind::Union => Some(
                    selections.entry(type_name).or_insert_with(|| default_selection(by_name.get(type_name))).clone(),
                ),
                _ => None,
            };
            let tool = tool(namespace, kind, field, selection, &root);
            built.push((format!("{namespace}.{}.{}", kind.as_str(), crate::naming::sanitize(&field.name)), tool));
        }
    }
    let names = deduplicate(built.iter().map(|(wanted, _)| wanted.clone()));
    Ok(built.into_iter().zip(names).map(|((_, tool), path)| ToolDef { path, ..tool }).collect())
}

fn tool(
    namespace: &str,
    kind: OperationKind,
    field: &Field,
    selection: Option<Arc<str>>,
    root: &Arc<Value>,
) -> ToolDef {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut args = Vec::new();
    for arg in &field.args {
        let mut schema = arg.type_ref.schema(0);
        if let (Some(text), Value::Object(object)) = (&arg.description, &mut schema) {
            object.insert("description".into(), Value::String(text.clone()));
        }
        properties.insert(arg.name.clone(), schema);
        let needed = arg.type_ref.kind == TypeKind::NonNull && arg.default_value.is_none();
        if needed {
            required.push(Value::String(arg.name.clone()));
        }
        args.push(Argument { name: arg.name.clone(), type_text: arg.type_ref.text(0), required: needed });
    }
    if let Some(selection) = &selection {
        properties.insert(
            SELECT_ARGUMENT.into(),
            json!({"type": "string", "description": format!(
                "The GraphQL selection set to return instead of the default `{selection}`, e.g. `{{ id author {{ name }} }}`"
            )}),
        );
    }
    let input = json!({"type": "object", "properties": properties, "required": required});
    let signature = format!("GraphQL {} {}: {}", kind.as_str(), field.name, field.type_ref.text(0));
    let description = match field.description.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => format!("{text}\n{signature}"),
        _ => signature,
    };
    ToolDef {
        path: String::new(),
        namespace: namespace.to_owned(),
        description,
        effect: match kind {
            OperationKind::Query => Effect::Read,
            OperationKind::Mutation => Effect::Write,
        },
        schemas: Schemas::Text {
            input: input.to_string(),
            output: Some(field.type_ref.schema(0).to_string()),
            root: Some(root.clone()),
        },
        target: Target::Graphql(Arc::new(GraphqlOperation { kind, field: field.name.clone(), args, selection })),
    }
}

/// JSON Schemas of the named types, for descriptions: enums and input
/// objects whole, objects and interfaces as their default selection (what a
/// call without `select` returns), unions as their `__typename`.
fn type_schemas(types: &[FullType]) -> Map<String, Value> {
    let mut out = Map::new();
    for t in types.iter().filter(|t| !t.name.starts_with("__")) {
        let described = |mut schema: Value| {
            if let (Some(text), Value::Object(object)) = (&t.description, &mut schema) {
                object.insert("description".into(), Value::String(text.clone()));
            }
            schema
        };
        let schema = match t.kind {
            TypeKind::Enum => {
                json!({"enum": t.enum_values.iter().flatten().map(|v| v.name.clone()).collect::<Vec<_>>()})
            }
            TypeKind::InputObject => {
                let fields = t.input_fields.iter().flatten();
                let required: Vec<&str> = fields
                    .clone()
                    .filter(|f| f.type_ref.kind == TypeKind::NonNull && f.default_value.is_none())
                    .map(|f| f.name.as_str())
                    .collect();
                let properties: Map<String, Value> = fields.map(|f| (f.name.clone(), f.type_ref.schema(0))).collect();
                json!({"type": "object", "properties": properties, "required": required})
            }
            TypeKind::Object | TypeKind::Interface => {
                let properties: Map<String, Value> = selectable(t)
                    .map(|f| {
                        let schema = f.type_ref.schema(0);
                        match f.type_ref.kind {
                            TypeKind::NonNull => (f.name.clone(), schema),
                            _ => (f.name.clone(), json!({"anyOf": [schema, {"type": "null"}]})),
                        }
                    })
                    .collect();
                let required: Vec<&String> = properties.keys().collect();
                json!({"type": "object", "properties": properties, "required": required})
            }
            TypeKind::Union => json!({"type": "object", "properties": {"__typename": {"type": "string"}}}),
            _ => continue,
        };
        out.insert(t.name.clone(), described(schema));
    }
    out
}

/// The fields of an object the default selection takes: scalars and enums without required arguments.
fn selectable(t: &FullType) -> impl Iterator<Item = &Field> {
    t.fields.iter().flatten().filter(|f| {
        matches!(f.type_ref.named().1, TypeKind::Scalar | TypeKind::Enum)
            && f.args.iter().all(|a| a.type_ref.kind != TypeKind::NonNull || a.default_value.is_some())
    })
}

fn default_selection(t: Option<&&FullType>) -> Arc<str> {
    let names: Vec<&str> = match t {
        Some(t) if matches!(t.kind, TypeKind::Object | TypeKind::Interface) => {
            selectable(t).map(|f| f.name.as_str()).collect()
        }
        _ => Vec::new(),
    };
    // A type without scalar fields still answers with its name, so the selection is never empty.
    match names.is_empty() {
        true => "{ __typename }".into(),
        false => format!("{{ {} }}", names.join(" ")).into(),
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgumentError {
    #[error("arguments must be an object; this tool takes: {0}")]
    NotAnObject(String),
    #[error("missing required argument `{name}`; this tool takes: {takes}")]
    Missing { name: String, takes: String },
    #[error("unknown argument `{name}`; this tool takes: {takes}")]
    Unknown { name: String, takes: String },
    #[error("`select` {0}; pass a selection set such as `{{ id name }}`")]
    Select(String),
}

impl GraphqlOperation {
    fn takes(&self) -> String {
        let mut names: Vec<String> =
            self.args.iter().map(|a| format!("{}{}", a.name, if a.required { "" } else { "?" })).collect();
        if self.selection.is_some() {
            names.push(format!("{SELECT_ARGUMENT}?"));
        }
        match names.is_empty() {
            true => "no arguments".into(),
            false => names.join(", "),
        }
    }

    /// The document and variables for `args`. Arguments left out are left
    /// out of the document too, so the service's defaults apply.
    pub fn request(&self, args: &Value) -> Result<GraphqlRequest, ArgumentError> {
        let empty = Map::new();
        let given = match args {
            Value::Object(map) => map,
            Value::Null => &empty,
            _ => return Err(ArgumentError::NotAnObject(self.takes())),
        };
        let known = |name: &str| {
            self.args.iter().any(|a| a.name == name) || (name == SELECT_ARGUMENT && self.selection.is_some())
        };
        if let Some(name) = given.keys().find(|k| !known(k)) {
            return Err(ArgumentError::Unknown { name: name.clone(), takes: self.takes() });
        }
        let mut declarations = Vec::new();
        let mut passed = Vec::new();
        let mut variables = Map::new();
        for arg in &self.args {
            match given.get(&arg.name) {
                // An explicit null is a value GraphQL distinguishes from absence; a required one stays missing.
                Some(Value::Null) | None if arg.required => {
                    return Err(ArgumentError::Missing { name: arg.name.clone(), takes: self.takes() });
                }
                None => {}
                Some(value) => {
                    declarations.push(format!("${}: {}", arg.name, arg.type_text));
                    passed.push(format!("{0}: ${0}", arg.name));
                    variables.insert(arg.name.clone(), value.clone());
                }
            }
        }
        let selection = match (given.get(SELECT_ARGUMENT), &self.selection) {
            (Some(Value::String(text)), Some(_)) => selection_set(text).map_err(ArgumentError::Select)?,
            (Some(_), Some(_)) => return Err(ArgumentError::Select("must be a string".into())),
            (None, Some(default)) => default.to_string(),
            (_, None) => String::new(),
        };
        let mut query = String::from(self.kind.as_str());
        if !declarations.is_empty() {
            let _ = write!(query, "({})", declarations.join(", "));
        }
        let _ = write!(query, " {{ {}", self.field);
        if !passed.is_empty() {
            let _ = write!(query, "({})", passed.join(", "));
        }
        // Line breaks around the selection: a comment inside it ends at its line.
        let _ = write!(query, "\n{selection}\n}}");
        Ok(GraphqlRequest { query, variables })
    }
}

/// `text` as exactly one selection set (braces added when left out).
fn selection_set(text: &str) -> Result<String, String> {
    let text = text.trim();
    let text = match text.starts_with('{') {
        true => text.to_owned(),
        false => format!("{{ {text} }}"),
    };
    let bytes = text.as_bytes();
    let (mut depth, mut at) = (0usize, 0usize);
    while at < bytes.len() {
        match bytes[at] {
            b'{' => {
                depth += 1;
                if depth > MAX_SELECT_DEPTH {
                    return Err(format!("nests deeper than {MAX_SELECT_DEPTH} levels"));
                }
            }
            b'}' => {
                // Never below zero: the text starts with `{`, and reaching zero ends it.
                depth -= 1;
                if depth == 0 && at + 1 != bytes.len() {
                    return Err("must be one selection set: there is text after its closing brace".into());
                }
            }
            b'#' => {
                at = text[at..].find('\n').map_or(bytes.len(), |n| at + n);
                continue;
            }
            b'"' if text[at..].starts_with("\"\"\"") => {
                let end = text[at + 3..].find("\"\"\"").ok_or("has an unterminated block string")?;
                at += 3 + end + 3;
                continue;
            }
            b'"' => {
                at += 1;
                loop {
                    match bytes.get(at) {
                        None | Some(b'\n') => return Err("has an unterminated string".into()),
                        Some(b'\\') => at += 2,
                        Some(b'"') => break,
                        Some(_) => at += 1,
                    }
                }
            }
            _ => {}
        }
        at += 1;
    }
    match depth {
        0 if text.len() > 2 && text[1..text.len() - 1].trim().is_empty() => Err("is empty".into()),
        0 => Ok(text),
        _ => Err("leaves a brace open".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn type_ref(text: &str) -> Value {
        if let Some(inner) = text.strip_suffix('!') {
            return json!({"kind": "NON_NULL", "name": null, "ofType": type_ref(inner)});
        }
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return json!({"kind": "LIST", "name": null, "ofType": type_ref(inner)});
        }
        let kind = match text {
            "Int" | "String" | "ID" | "Boolean" | "Float" | "DateTime" => "SCALAR",
            "State" => "ENUM",
            "IssueInput" => "INPUT_OBJECT",
            "Node" => "INTERFACE",
            "Result" => "UNION",
            _ => "OBJECT",
        };
        json!({"kind": kind, "name": text, "ofType": null})
    }

    fn field(name: &str, ty: &str, args: &[(&str, &str)]) -> Value {
        let args: Vec<Value> = args.iter().map(|(n, t)| json!({"name": n, "type": type_ref(t)})).collect();
        json!({"name": name, "args": args, "type": type_ref(ty)})
    }

    fn schema() -> String {
        json!({"data": {"__schema": {
            "queryType": {"name": "Query"}, "mutationType": {"name": "Mutation"},
            "types": [
                {"kind": "OBJECT", "name": "Query", "fields": [
                    field("issue", "Issue", &[("id", "ID!")]),
                    field("issues", "[Issue!]!", &[("state", "State"), ("first", "Int")]),
                    field("count", "Int!", &[]),
                    field("search", "[Result]", &[("q", "String!")]),
                    field("__type", "String", &[]),
                ]},
                {"kind": "OBJECT", "name": "Mutation", "fields": [field("createIssue", "Issue!", &[("input", "IssueInput!")])]},
                {"kind": "OBJECT", "name": "Issue", "description": "An issue", "fields": [
                    field("id", "ID!", &[]), field("title", "String", &[]), field("state", "State!", &[]),
                    field("author", "User", &[]), field("comments", "[String]", &[("first", "Int!")]),
                    field("createdAt", "DateTime", &[]),
                ]},
                {"kind": "OBJECT", "name": "User", "fields": [field("login", "String!", &[])]},
                {"kind": "UNION", "name": "Result"},
                {"kind": "ENUM", "name": "State", "enumValues": [{"name": "OPEN"}, {"name": "CLOSED"}]},
                {"kind": "SCALAR", "name": "DateTime"},
                {"kind": "INPUT_OBJECT", "name": "IssueInput", "inputFields": [
                    {"name": "title", "type": type_ref("String!")}, {"name": "body", "type": type_ref("String")},
                ]},
            ]
        }}})
        .to_string()
    }

    fn operation(tools: &[ToolDef], path: &str) -> Arc<GraphqlOperation> {
        match &tools.iter().find(|t| t.path == path).unwrap().target {
            Target::Graphql(op) => op.clone(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn fields_become_tools_with_default_selections() {
        let tools = load("gh", &schema()).unwrap();
        let paths: Vec<(&str, Effect)> = tools.iter().map(|t| (t.path.as_str(), t.effect)).collect();
        assert_eq!(
            paths,
            [
                ("gh.query.count", Effect::Read),
                ("gh.query.issue", Effect::Read),
                ("gh.query.issues", Effect::Read),
                ("gh.query.search", Effect::Read),
                ("gh.mutation.createIssue", Effect::Write),
            ]
        );
        let issue = operation(&tools, "gh.query.issue");
        // Scalars and enums without required arguments; objects and `comments(first: Int!)` are left out.
        assert_eq!(issue.selection.as_deref(), Some("{ id title state createdAt }"));
        assert_eq!(operation(&tools, "gh.query.issues").selection, issue.selection, "shared per type");
        assert_eq!(operation(&tools, "gh.query.search").selection.as_deref(), Some("{ __typename }"));
        assert_eq!(operation(&tools, "gh.query.count").selection, None);
        assert_eq!(
            tools.iter().find(|t| t.path == "gh.query.issue").unwrap().description,
            "GraphQL query issue: Issue"
        );
    }

    #[test]
    fn typescript_declares_arguments_and_the_default_selection() {
        let tools = load("gh", &schema()).unwrap();
        let ts = tools.iter().find(|t| t.path == "gh.mutation.createIssue").unwrap().typescript().unwrap();
        assert!(ts.contains("type Input = { input: IssueInput; /** The GraphQL selection set"), "{ts}");
        assert!(ts.contains("type Output = Issue;"), "{ts}");
        assert!(ts.contains("type IssueInput = { body?: string; title: string };"), "{ts}");
        assert!(ts.contains(r#"state: State"#) && ts.contains(r#"type State = "OPEN" | "CLOSED";"#), "{ts}");
        let issue = ts.lines().find(|l| l.starts_with("type Issue =")).unwrap();
        assert_eq!(issue, "type Issue = { createdAt: unknown; id: string; state: State; title: string | null };");
        let count = tools.iter().find(|t| t.path == "gh.query.count").unwrap().typescript().unwrap();
        assert!(count.contains("type Output = number;") && !count.contains("select"), "{count}");
    }

    #[test]
    fn requests_declare_only_the_given_arguments() {
        let tools = load("gh", &schema()).unwrap();
        let issues = operation(&tools, "gh.query.issues");
        let request = issues.request(&json!({"state": "OPEN"})).unwrap();
        assert_eq!(request.query, "query($state: State) { issues(state: $state)\n{ id title state createdAt }\n}");
        assert_eq!(Value::Object(request.variables), json!({"state": "OPEN"}));
        let custom = issues.request(&json!({"select": "id author { login }"})).unwrap();
        assert_eq!(custom.query, "query { issues\n{ id author { login } }\n}");
        let create = operation(&tools, "gh.mutation.createIssue");
        let request = create.request(&json!({"input": {"title": "t"}})).unwrap();
        assert!(request.query.starts_with("mutation($input: IssueInput!) { createIssue(input: $input)"));
        assert_eq!(operation(&tools, "gh.query.count").request(&Value::Null).unwrap().query, "query { count\n\n}");
    }

    #[test]
    fn bad_arguments_are_refused_before_sending() {
        let tools = load("gh", &schema()).unwrap();
        let issue = operation(&tools, "gh.query.issue");
        let takes = "id, select?".to_owned();
        assert_eq!(issue.request(&json!({})), Err(ArgumentError::Missing { name: "id".into(), takes: takes.clone() }));
        assert_eq!(
            issue.request(&json!({"id": null})),
            Err(ArgumentError::Missing { name: "id".into(), takes: takes.clone() })
        );
        assert_eq!(issue.request(&json!({"id": "1", "x": 1})), Err(ArgumentError::Unknown { name: "x".into(), takes }));
        assert!(matches!(issue.request(&json!([1])), Err(ArgumentError::NotAnObject(_))));
        let count = operation(&tools, "gh.query.count");
        assert!(matches!(count.request(&json!({"select": "{ a }"})), Err(ArgumentError::Unknown { .. })));
    }

    #[test]
    fn select_is_exactly_one_bounded_selection_set() {
        assert_eq!(selection_set(" id name ").unwrap(), "{ id name }");
        assert_eq!(selection_set("{ a(q: \"}\") { b } # }\n }").unwrap(), "{ a(q: \"}\") { b } # }\n }");
        assert_eq!(selection_set("{ a(q: \"\"\" } \"\"\") }").unwrap(), "{ a(q: \"\"\" } \"\"\") }");
        let refused = [
            ("{ id } } mutation { deleteAll { id } ", "text after its closing brace"),
            ("{ id } query other { x }", "text after its closing brace"),
            ("{ id # }", "leaves a brace open"),
            ("id }", "text after its closing brace"),
            ("{ a } }", "text after its closing brace"),
            ("{ a(q: \"x) }", "unterminated string"),
            ("{ a(q: \"\"\"x) }", "unterminated block string"),
            ("{ }", "is empty"),
            ("", "is empty"),
        ];
        for (text, expected) in refused {
            let error = selection_set(text).unwrap_err();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        let deep = format!("{}x{}", "{ a ".repeat(MAX_SELECT_DEPTH + 1), "}".repeat(MAX_SELECT_DEPTH + 1));
        assert!(selection_set(&deep).unwrap_err().contains("deeper than 8"));
        let ok = format!("{}x{}", "{ a ".repeat(MAX_SELECT_DEPTH), "}".repeat(MAX_SELECT_DEPTH));
        assert!(selection_set(&ok).is_ok());
    }

    #[test]
    fn broken_schemas_say_what_is_wrong() {
        assert!(matches!(load("gh", "<html>"), Err(SchemaError::Syntax(_))));
        assert!(matches!(load("gh", r#"{"data": null}"#), Err(SchemaError::Syntax(_))));
        let errors = load("gh", r#"{"errors": [{"message": "introspection is disabled"}]}"#).unwrap_err();
        assert_eq!(errors.to_string(), "the introspection answered with errors: introspection is disabled");
        let no_query = load("gh", r#"{"__schema": {"queryType": {"name": "Q"}, "types": []}}"#).unwrap_err();
        assert!(matches!(no_query, SchemaError::NoQueryType(_)));
    }
}
