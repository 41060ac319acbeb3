//! GraphQL services: a schema (an introspection result, read from a file or
//! asked of the service) to tools. Pure: fetching and sending happen in
//! `catalog/graphql_upstream.rs`; what a call's arguments become is
//! `tool/graphql.rs`.
//!
//! Each field of the query type becomes a read tool
//! `<namespace>.query.<field>`, each field of the mutation type a write tool
//! `<namespace>.mutation.<field>`. The arguments are the field's arguments,
//! sent as variables, plus `select`: the selection set to return, when the
//! field returns an object. Without it the tool selects the scalar and enum
//! fields of the object (the default selection set), so a call returns
//! something useful without knowing the schema. The names the schema
//! supplies are checked when it is loaded: they go into every document.

use std::collections::HashMap;
use std::sync::Arc;

use executor_core::Effect;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::naming::{deduplicate, path_segment};
use crate::tool::graphql::{Argument, GraphqlOperation, OperationKind, SELECT_ARGUMENT};
use crate::tool::{Schemas, Target, ToolDef, first_sentence};

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
            built.push((format!("{namespace}.{}.{}", kind.as_str(), path_segment(&field.name)), tool));
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

#[cfg(test)]
mod tests;
