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
//! The document a call makes is parsed (apollo-parser, as the GraphQL
//! specification reads it) and checked before it is sent: one query or
//! mutation, as the tool is, whose root selects the tool's field alone,
//! with the given arguments as variables, its selection set nested at most
//! [`MAX_SELECT_DEPTH`] levels and spreading no fragment. What is sent is
//! that parsed document printed again without comments or ignored
//! characters, so the service reads what was checked. So `select` can never
//! carry another root field or a second operation past the approval policy,
//! and the names the schema supplies are checked when it is loaded.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use apollo_parser::cst::{self, CstNode};
use apollo_parser::{Lexer, Parser, SyntaxKind, SyntaxNode, TokenKind};
use executor_core::Effect;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::naming::deduplicate;
use crate::tool::{Schemas, Target, ToolDef, first_sentence};

/// The argument holding a caller's own selection set.
pub const SELECT_ARGUMENT: &str = "select";
/// How deeply `select` may nest fields: deep selections are how a single
/// GraphQL request gets expensive.
pub const MAX_SELECT_DEPTH: usize = 8;
/// The parser's bound on nesting (selection sets, list and object values,
/// list types): deeper input is refused without recursing further. Well
/// above what a document within [`MAX_SELECT_DEPTH`] needs.
const MAX_PARSE_NESTING: usize = 64;
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
    /// A name or type that would go into a document is not GraphQL.
    #[error(
        "the schema has {what} `{text}`, which GraphQL does not allow (names are letters, digits and `_`, \
         not starting with a digit): fix the schema"
    )]
    NotGraphql { what: String, text: String },
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
            check_field(&owner.name, field)?;
            let (type_name, type_kind) = field.type_ref.named();
            let selection = match type_kind {
                TypeKind::Object | TypeKind::Interface | TypeKind::Union => Some(match selections.get(type_name) {
                    Some(made) => made.clone(),
                    None => {
                        let made = default_selection(by_name.get(type_name))?;
                        selections.insert(type_name, made.clone());
                        made
                    }
                }),
                _ => None,
            };
            let tool = tool(namespace, kind, field, selection, &root);
            built.push((format!("{namespace}.{}.{}", kind.as_str(), crate::naming::sanitize(&field.name)), tool));
        }
    }
    let names = deduplicate(built.iter().map(|(wanted, _)| wanted.clone()));
    Ok(built.into_iter().zip(names).map(|((_, tool), path)| ToolDef { path, ..tool }).collect())
}

/// The names and types a field's tool writes into its documents must be
/// GraphQL: they come from the schema, a file or a service we do not control.
fn check_field(owner: &str, field: &Field) -> Result<(), SchemaError> {
    let refused = |what: String, text: &str| Err(SchemaError::NotGraphql { what, text: text.to_owned() });
    if !is_name(&field.name) {
        return refused(format!("a field of `{owner}` named"), &field.name);
    }
    for arg in &field.args {
        if !is_name(&arg.name) {
            return refused(format!("an argument of `{owner}.{}` named", field.name), &arg.name);
        }
        let text = arg.type_ref.text(0);
        if !is_type(&text) {
            return refused(format!("the argument `{owner}.{}({})` of type", field.name, arg.name), &text);
        }
    }
    Ok(())
}

/// `[_A-Za-z][_0-9A-Za-z]*`
fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// A type as [`TypeRef::text`] writes it: a name in list and non-null wrappers (`[ID!]!`, not `ID!!`).
fn is_type(text: &str) -> bool {
    let nullable = text.strip_suffix('!').unwrap_or(text);
    match nullable.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        Some(item) => is_type(item),
        None => is_name(nullable),
    }
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
    let (description, summary) = match field.description.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => (format!("{text}\n{signature}"), first_sentence(text)),
        _ => (signature.clone(), signature),
    };
    ToolDef {
        path: String::new(),
        namespace: namespace.to_owned(),
        description,
        summary,
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

fn default_selection(t: Option<&&FullType>) -> Result<Arc<str>, SchemaError> {
    let names: Vec<&str> = match t {
        Some(t) if matches!(t.kind, TypeKind::Object | TypeKind::Interface) => {
            selectable(t).map(|f| f.name.as_str()).collect()
        }
        _ => Vec::new(),
    };
    if let (Some(t), Some(bad)) = (t, names.iter().find(|n| !is_name(n))) {
        return Err(SchemaError::NotGraphql {
            what: format!("a field of `{}` named", t.name),
            text: (*bad).to_owned(),
        });
    }
    // A type without scalar fields still answers with its name, so the selection is never empty.
    Ok(match names.is_empty() {
        true => "{ __typename }".into(),
        false => format!("{{ {} }}", names.join(" ")).into(),
    })
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
                    passed.push(arg.name.as_str());
                    variables.insert(arg.name.clone(), value.clone());
                }
            }
        }
        let selection = match (given.get(SELECT_ARGUMENT), &self.selection) {
            (Some(Value::String(text)), Some(_)) => braced(text).map_err(ArgumentError::Select)?,
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
            let arguments: Vec<String> = passed.iter().map(|name| format!("{name}: ${name}")).collect();
            let _ = write!(query, "({})", arguments.join(", "));
        }
        // Line breaks around the selection: a comment inside it ends at its line.
        let _ = write!(query, "\n{selection}\n}}");
        // Everything but `select` is the schema's names, checked when it was loaded.
        let query = self.checked(&query, &passed).map_err(ArgumentError::Select)?;
        Ok(GraphqlRequest { query, variables })
    }

    /// `document` parsed and checked to be this tool's operation: one query
    /// or mutation, as the tool is, without directives, whose root selects
    /// only its field (unaliased, without directives, exactly the `passed`
    /// arguments as variables) with a selection set at most
    /// [`MAX_SELECT_DEPTH`] deep that spreads no fragment. An alias or a
    /// directive at the root is refused rather than reasoned about: the
    /// documents made here have none, and the answer is read at the field's
    /// name. Returned printed again, as it is sent.
    fn checked(&self, document: &str, passed: &[&str]) -> Result<String, String> {
        let tree = Parser::new(document).recursion_limit(MAX_PARSE_NESTING).parse();
        if let Some(error) = tree.errors().next() {
            // The text at fault, shortened: it may be a long string.
            let at: String = error.data().chars().take(40).collect();
            return Err(match error.is_limit() {
                true => format!("nests deeper than {MAX_SELECT_DEPTH} levels"),
                false => format!("is not one GraphQL selection set: {} at `{at}`", error.message()),
            });
        }
        let document = tree.document();
        let field = &self.field;
        let definitions: Vec<cst::Definition> = document.definitions().collect();
        let [cst::Definition::OperationDefinition(operation)] = definitions.as_slice() else {
            let found: Vec<String> = definitions.iter().map(definition).collect();
            return Err(format!(
                "must be one selection set of `{field}`, but the document would hold {}: \
                 nothing may follow the selection's closing brace",
                found.join(", ")
            ));
        };
        let kind = match operation.operation_type() {
            // `{ ... }` alone is a query.
            None => Some(OperationKind::Query),
            Some(t) if t.query_token().is_some() => Some(OperationKind::Query),
            Some(t) if t.mutation_token().is_some() => Some(OperationKind::Mutation),
            Some(_) => None,
        };
        if kind != Some(self.kind) {
            return Err(format!(
                "must be one selection set of `{field}`, but the document would be a {} rather than a {}",
                definition(&definitions[0]),
                self.kind.as_str()
            ));
        }
        if has_directives(operation.directives()) {
            return Err(format!("must be one selection set of `{field}`, but the operation would carry a directive"));
        }
        let roots: Vec<cst::Selection> = operation.selection_set().iter().flat_map(|s| s.selections()).collect();
        let root = match roots.as_slice() {
            [cst::Selection::Field(root)]
                if root.alias().is_none() && !has_directives(root.directives()) && name(root.name()) == *field =>
            {
                root
            }
            _ => {
                let found: Vec<String> = roots.iter().map(|s| format!("`{}`", selection(s))).collect();
                return Err(format!(
                    "must be one selection set of `{field}`, but the operation would select {} at its root: \
                     the selection closes early",
                    found.join(", ")
                ));
            }
        };
        let arguments: Vec<(String, Option<String>)> = (root.arguments().iter().flat_map(|a| a.arguments()))
            .map(|a| match a.value() {
                Some(cst::Value::Variable(variable)) => (name(a.name()), Some(name(variable.name()))),
                _ => (name(a.name()), None),
            })
            .collect();
        let expected: Vec<(String, Option<String>)> =
            passed.iter().map(|p| ((*p).to_owned(), Some((*p).to_owned()))).collect();
        if arguments != expected {
            return Err(format!("must not change the arguments of `{field}`"));
        }
        if let Some(set) = root.selection_set()
            && depth(&set)? > MAX_SELECT_DEPTH
        {
            return Err(format!("nests deeper than {MAX_SELECT_DEPTH} levels"));
        }
        Ok(print(document.syntax()))
    }
}

/// `text` as a selection set: braces added when it does not open with one
/// (after what GraphQL ignores: white space, a BOM, comments, commas).
fn braced(text: &str) -> Result<String, String> {
    let first = Lexer::new(text)
        .map_while(Result::ok)
        .map(|token| token.kind())
        .find(|kind| !matches!(kind, TokenKind::Whitespace | TokenKind::Comment | TokenKind::Comma));
    match first {
        Some(TokenKind::LCurly) => Ok(text.to_owned()),
        Some(TokenKind::Eof) => Err("is empty".into()),
        // Line breaks: a comment at its end ends before the added brace.
        _ => Ok(format!("{{\n{text}\n}}")),
    }
}

/// How many levels of selection sets `set` nests (itself one); a fragment
/// spread is refused, since no fragment can be defined. The parser's bound
/// on nesting bounds this recursion.
fn depth(set: &cst::SelectionSet) -> Result<usize, String> {
    let mut deepest = 0;
    for selection in set.selections() {
        let inner = match selection {
            cst::Selection::Field(field) => field.selection_set(),
            cst::Selection::InlineFragment(fragment) => fragment.selection_set(),
            cst::Selection::FragmentSpread(spread) => {
                let fragment = name(spread.fragment_name().and_then(|f| f.name()));
                return Err(format!(
                    "spreads the fragment `{fragment}`, but no fragment can be defined: \
                     write an inline fragment (`... on Type {{ field }}`) instead"
                ));
            }
        };
        if let Some(inner) = inner {
            deepest = deepest.max(depth(&inner)?);
        }
    }
    Ok(deepest + 1)
}

fn has_directives(directives: Option<cst::Directives>) -> bool {
    directives.is_some_and(|d| d.directives().next().is_some())
}

fn name(name: Option<cst::Name>) -> String {
    name.map(|n| n.text().to_string()).unwrap_or_default()
}

/// A definition as an error names it: `mutation`, `fragment F`.
fn definition(definition: &cst::Definition) -> String {
    match definition {
        cst::Definition::OperationDefinition(operation) => {
            let kind = operation.operation_type().and_then(|t| t.syntax().first_token());
            let kind = kind.map_or("query".to_owned(), |t| t.text().to_owned());
            match operation.name() {
                Some(named) => format!("{kind} {}", name(Some(named))),
                None => kind,
            }
        }
        cst::Definition::FragmentDefinition(fragment) => {
            format!("fragment {}", name(fragment.fragment_name().and_then(|f| f.name())))
        }
        _ => "a type system definition".into(),
    }
}

/// A root selection as an error names it: `deleteAll`, `again: createItem`, `...F`, `... on Mutation`.
fn selection(selection: &cst::Selection) -> String {
    match selection {
        cst::Selection::Field(field) => {
            let alias = field.alias().map(|a| format!("{}: ", name(a.name()))).unwrap_or_default();
            let directives: String = (field.directives().iter().flat_map(|d| d.directives()))
                .map(|d| format!(" @{}", name(d.name())))
                .collect();
            format!("{alias}{}{directives}", name(field.name()))
        }
        cst::Selection::FragmentSpread(spread) => format!("...{}", name(spread.fragment_name().and_then(|f| f.name()))),
        cst::Selection::InlineFragment(fragment) => match fragment.type_condition().and_then(|t| t.named_type()) {
            Some(on) => format!("... on {}", name(on.name())),
            None => "...".into(),
        },
    }
}

/// The parsed document as it is sent: its tokens one space apart (none
/// where GraphQL writes none), without comments, white space or a BOM, and
/// every string as a JSON string (which is a GraphQL string), so block
/// strings and `\u{...}` escapes reach the service as plain strings.
fn print(document: &SyntaxNode) -> String {
    let mut out = String::with_capacity(document.text().len().into());
    let mut glued = true;
    for token in document.descendants_with_tokens().filter_map(|e| e.into_token()) {
        let kind = token.kind();
        if matches!(kind, SyntaxKind::WHITESPACE | SyntaxKind::COMMENT) {
            continue;
        }
        let tight = matches!(
            kind,
            SyntaxKind::L_PAREN
                | SyntaxKind::R_PAREN
                | SyntaxKind::R_BRACK
                | SyntaxKind::COLON
                | SyntaxKind::BANG
                | SyntaxKind::COMMA
        );
        if !glued && !tight {
            out.push(' ');
        }
        match token.parent().and_then(cst::StringValue::cast) {
            Some(string) if kind == SyntaxKind::STRING => {
                out.push_str(&Value::String(String::from(&string)).to_string())
            }
            _ => out.push_str(token.text()),
        }
        glued = matches!(kind, SyntaxKind::DOLLAR | SyntaxKind::AT | SyntaxKind::L_PAREN | SyntaxKind::L_BRACK);
    }
    out
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
        // No arguments and no selection: it takes nothing, and says so.
        assert!(count.contains("type Input = {};"), "{count}");
    }

    #[test]
    fn a_summary_is_the_first_sentence_of_the_field_description() {
        let mut introspection: Value = serde_json::from_str(&schema()).unwrap();
        let fields = &mut introspection["data"]["__schema"]["types"][0]["fields"];
        fields[0]["description"] = json!("Look up an issue by its ID. Fails when it is gone.");
        fields[1]["description"] = json!("Issues, newest first\nPaginated.");
        let tools = load("gh", &introspection.to_string()).unwrap();
        let tool = |path: &str| tools.iter().find(|t| t.path == path).unwrap();
        let cases = [
            ("gh.query.issue", "Look up an issue by its ID."),
            ("gh.query.issues", "Issues, newest first"),
            // Without a description, the signature says what it is.
            ("gh.query.count", "GraphQL query count: Int!"),
        ];
        for (path, expected) in cases {
            assert_eq!(tool(path).summary, expected, "{path}");
        }
        assert_eq!(
            tool("gh.query.issue").description,
            "Look up an issue by its ID. Fails when it is gone.\nGraphQL query issue: Issue"
        );
    }

    #[test]
    fn requests_declare_only_the_given_arguments() {
        let tools = load("gh", &schema()).unwrap();
        let issues = operation(&tools, "gh.query.issues");
        let request = issues.request(&json!({"state": "OPEN"})).unwrap();
        assert_eq!(request.query, "query($state: State) { issues(state: $state) { id title state createdAt } }");
        assert_eq!(Value::Object(request.variables), json!({"state": "OPEN"}));
        let custom = issues.request(&json!({"select": "id author { login }"})).unwrap();
        assert_eq!(custom.query, "query { issues { id author { login } } }");
        let create = operation(&tools, "gh.mutation.createIssue");
        let request = create.request(&json!({"input": {"title": "t"}})).unwrap();
        assert!(request.query.starts_with("mutation($input: IssueInput!) { createIssue(input: $input) {"));
        assert_eq!(operation(&tools, "gh.query.count").request(&Value::Null).unwrap().query, "query { count }");
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

    fn nested(levels: usize) -> String {
        format!("{}x{}", "{ a ".repeat(levels), " }".repeat(levels))
    }

    #[test]
    fn selects_that_leave_their_field_are_refused() {
        let tools = load("gh", &schema()).unwrap();
        let create = operation(&tools, "gh.mutation.createIssue");
        let deep = nested(MAX_SELECT_DEPTH + 1);
        let deeper = nested(MAX_PARSE_NESTING + 1);
        let refused = [
            // A comment ends at `\r` as at `\n`, so the selection closes and the rest is the operation's.
            (
                "{ id #\r } deleteAll again: createIssue(input: {title: \"y\"}) { id #\n }",
                "would select `createIssue`, `deleteAll`, `again: createIssue` at its root",
            ),
            ("{ id #\r\n } deleteAll { id }", "would select `createIssue`, `deleteAll` at its root"),
            ("id #\r } deleteAll { id #\n", "would select `createIssue`, `deleteAll` at its root"),
            // A BOM is ignored like white space: the select opens with its brace.
            ("\u{feff}{ id } deleteAll", "would select `createIssue`, `deleteAll` at its root"),
            ("{ id }\u{feff} deleteAll", "would select `createIssue`, `deleteAll` at its root"),
            // Escapes mean something in strings only.
            ("{ id(q: \"\\u007d\") } deleteAll", "would select `createIssue`, `deleteAll` at its root"),
            ("{ id \\u007d deleteAll { id }", "is not one GraphQL selection set"),
            // A block string ends at `"""`, not at `\"""`.
            ("{ a(q: \"\"\" \\\"\"\" } \"\"\") } deleteAll", "would select `createIssue`, `deleteAll` at its root"),
            ("{ a(q: \"\"\" } \"\"\") } } mutation X { deleteAll ", "would hold mutation, mutation X"),
            ("{ id } again: createIssue(input: {title: \"y\"}) { id }", "`createIssue`, `again: createIssue` at"),
            ("{ id } ...F } fragment F on Mutation { deleteAll ", "would hold mutation, fragment F"),
            ("{ ...F } } fragment F on Issue { id ", "would hold mutation, fragment F"),
            ("{ id ...F }", "spreads the fragment `F`, but no fragment can be defined"),
            ("{ id } ... on Mutation { deleteAll }", "would select `createIssue`, `... on Mutation` at its root"),
            ("{ id } ... { deleteAll }", "would select `createIssue`, `...` at its root"),
            ("{ id } deleteAll @include(if: true)", "would select `createIssue`, `deleteAll @include` at"),
            ("{ id } } mutation X { deleteAll { id } ", "would hold mutation, mutation X"),
            ("{ id } } subscription { issues { id } ", "would hold mutation, subscription"),
            ("{ a { b } } } { deleteAll ", "would hold mutation, query"),
            ("{ id } } }", "is not one GraphQL selection set"),
            ("id } deleteAll { id", "would select `createIssue`, `deleteAll` at its root"),
            ("{ a(q: \"x) }", "is not one GraphQL selection set"),
            ("{ }", "is not one GraphQL selection set"),
            ("", "is empty"),
            (" # only a comment", "is empty"),
            (&deep, "nests deeper than 8 levels"),
            (&deeper, "nests deeper than 8 levels"),
        ];
        for (select, expected) in refused {
            let refused = create.request(&json!({"input": {"title": "t"}, "select": select}));
            let Err(ArgumentError::Select(message)) = refused else { panic!("{select:?}: {refused:?}") };
            assert!(message.contains(expected), "{select:?}: {message}");
        }
        let not_text = create.request(&json!({"input": {"title": "t"}, "select": ["id"]}));
        assert_eq!(not_text, Err(ArgumentError::Select("must be a string".into())));
        let issue = operation(&tools, "gh.query.issue");
        let read = issue.request(&json!({"id": "1", "select": "{ id #\r } secret"})).unwrap_err();
        assert_eq!(
            read.to_string(),
            "`select` must be one selection set of `issue`, but the operation would select `issue`, `secret` at \
             its root: the selection closes early; pass a selection set such as `{ id name }`"
        );
    }

    #[test]
    fn valid_selects_are_sent_as_parsed() {
        let tools = load("gh", &schema()).unwrap();
        let issue = operation(&tools, "gh.query.issue");
        let sent = |select: &str| issue.request(&json!({"id": "1", "select": select})).map(|r| r.query);
        let cases = [
            ("id title", "{ id title }"),
            ("\u{feff}id, title", "{ id, title }"),
            ("# why\n{ id # the id\r title }", "{ id title }"),
            ("{ a(q: \"} # {\") { b } me: title }", "{ a(q: \"} # {\") { b } me: title }"),
            ("{ a(q: \"\"\" } # \\\"\"\" \"\"\") }", "{ a(q: \" } # \\\"\\\"\\\" \") }"),
            ("{ a(q: \"\\u007d } deleteAll {\", r: \"\\u{1F600}\") }", "{ a(q: \"} } deleteAll {\", r: \"😀\") }"),
            ("{ a(n: [1, -2.5e3], o: {k: null}) }", "{ a(n: [1, -2.5e3], o: { k: null }) }"),
            (
                "{ id ... on Issue { title } author @include(if: true) { login } }",
                "{ id ... on Issue { title } author @include(if: true) { login } }",
            ),
        ];
        for (select, expected) in cases {
            assert_eq!(sent(select).unwrap(), format!("query($id: ID!) {{ issue(id: $id) {expected} }}"), "{select:?}");
        }
        let deepest = nested(MAX_SELECT_DEPTH);
        assert_eq!(sent(&deepest).unwrap(), format!("query($id: ID!) {{ issue(id: $id) {deepest} }}"));
    }

    #[test]
    fn documents_are_refused_unless_they_are_the_tools_operation() {
        let tools = load("gh", &schema()).unwrap();
        let create = operation(&tools, "gh.mutation.createIssue");
        let cases = [
            ("subscription($input: IssueInput!) { createIssue(input: $input) { id } }", "a subscription rather"),
            ("query($input: IssueInput!) { createIssue(input: $input) { id } }", "a query rather than a mutation"),
            ("{ createIssue(input: $input) { id } }", "a query rather than a mutation"),
            ("mutation($input: IssueInput!) @x { createIssue(input: $input) { id } }", "would carry a directive"),
            ("mutation($input: IssueInput!) { a: createIssue(input: $input) { id } }", "select `a: createIssue` at"),
            ("mutation($i: IssueInput!) { createIssue(input: $i) @skip(if: true) { id } }", "`createIssue @skip` at"),
            ("mutation($input: IssueInput!) { createIssues(input: $input) { id } }", "`createIssues` at"),
            ("mutation { createIssue(input: {title: \"x\"}) { id } }", "must not change the arguments"),
            ("mutation($input: IssueInput!) { createIssue(input: $input, b: $input) { id } }", "must not change"),
            ("mutation($other: IssueInput!) { createIssue(input: $other) { id } }", "must not change"),
            ("fragment F on Mutation { deleteAll }", "would hold fragment F"),
            ("type Mutation { deleteAll: Int }", "would hold a type system definition"),
        ];
        for (document, expected) in cases {
            let error = create.checked(document, &["input"]).unwrap_err();
            assert!(error.contains(expected), "{document:?}: {error}");
        }
        let plain = "mutation($input: IssueInput!) { createIssue(input: $input) { id } }";
        assert_eq!(create.checked(plain, &["input"]).unwrap(), plain);
    }

    #[test]
    fn names_the_schema_puts_in_documents_must_be_graphql() {
        let with = |query_fields: Value, issue_fields: Value| {
            json!({"__schema": {"queryType": {"name": "Query"}, "types": [
                {"kind": "OBJECT", "name": "Query", "fields": query_fields},
                {"kind": "OBJECT", "name": "Issue", "fields": issue_fields},
                {"kind": "INPUT_OBJECT", "name": "IssueInput", "inputFields": []},
            ]}})
            .to_string()
        };
        let id = json!([field("id", "ID!", &[])]);
        let non_null_twice = json!({"kind": "NON_NULL", "name": null, "ofType": type_ref("ID!")});
        let cases = [
            (
                json!([field("issue { id } secret", "Issue", &[])]),
                &id,
                "a field of `Query` named `issue { id } secret`",
            ),
            (json!([field("issue", "Issue", &[("id: ID) { id } x(y", "ID")])]), &id, "an argument of `Query.issue`"),
            (
                json!([{"name": "issue", "type": type_ref("Issue"), "args": [{"name": "id", "type": non_null_twice}]}]),
                &id,
                "the argument `Query.issue(id)` of type `ID!!`",
            ),
            (json!([field("issue", "Issue", &[])]), &json!([field("9lives", "Int", &[])]), "a field of `Issue` named"),
        ];
        for (query_fields, issue_fields, expected) in cases {
            let error = load("gh", &with(query_fields, issue_fields.clone())).unwrap_err();
            assert!(matches!(error, SchemaError::NotGraphql { .. }), "{error}");
            assert!(error.to_string().contains(expected), "{error}");
            assert!(error.to_string().ends_with("fix the schema"), "{error}");
        }
        let fine = with(json!([field("issue", "Issue", &[("ids", "[ID!]!"), ("input", "IssueInput")])]), id);
        assert_eq!(load("gh", &fine).unwrap().len(), 1);
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
