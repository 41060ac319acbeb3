//! OpenAPI 3.0 / 3.1 documents (JSON or YAML) to tools. Pure: fetching the
//! document happens in `catalog/connect.rs`; what a call's arguments become
//! is `tool/http.rs`, sent by `catalog/http_upstream.rs`.
//!
//! Naming: `<namespace>.<group>.<name>`, where group is the operation's first
//! tag (else the first literal path segment, else `root`) and name is its
//! `operationId` (else method and path), each sanitised to an identifier.
//! Operations are named in (path, method) order, so when two want the same
//! path the one that sorts first keeps it and the next gets `_2`.

use std::collections::BTreeMap;
use std::sync::Arc;

use executor_core::Effect;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::naming::{deduplicate, path_segment};
use crate::tool::{Schemas, Target, ToolDef, first_sentence, one_line};

// The call model belongs to the tool model (`tool/http.rs`); still named
// here, as before it moved: `executor_catalog::openapi` is public.
pub use crate::tool::http::{
    ArgumentError, BODY_ARGUMENT, HttpOperation, Param, ParamLocation, ParamType, RequestParts,
};

/// Hops through `$ref` chains (a ref to a ref to ...) before giving up, which
/// also stops cycles of refs that point at each other.
const MAX_REF_HOPS: usize = 16;

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("the document is neither JSON nor YAML: {0}")]
    Syntax(String),
    #[error("the document is not OpenAPI 3.x (found {found}); convert Swagger 2.0 documents to OpenAPI 3 first")]
    Version { found: String },
    #[error("the document has no `paths`")]
    NoPaths,
}

/// Header parameters a document may declare but a call may not set: those
/// OpenAPI says to ignore (`Accept`, `Content-Type`, `Authorization`), the
/// ones that frame or route the request, and those the gateway writes.
/// (A source's own credential headers are kept from the call as it is sent.)
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "authorization",
    "connection",
    "content-length",
    "content-type",
    "cookie",
    "expect",
    "host",
    "idempotency-key",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn is_reserved_header(name: &str) -> bool {
    RESERVED_HEADERS.iter().any(|reserved| reserved.eq_ignore_ascii_case(name.trim()))
}

// Reading the type is reading the document, so it is done here; `tool/http.rs`
// checks a call's values against it.
impl ParamType {
    /// The type a parameter's schema declares (`$ref`s resolved against `doc`).
    fn of(doc: &Value, schema: &Value) -> Option<Self> {
        let declared = resolve(doc, schema)?.get("type")?;
        let name = match declared {
            Value::String(name) => name.as_str(),
            Value::Array(names) => match names.iter().filter(|n| n.as_str() != Some("null")).collect::<Vec<_>>()[..] {
                [Value::String(name)] => name.as_str(),
                _ => return None,
            },
            _ => return None,
        };
        Some(match name {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }
}

/// The parts of a JSON document the catalog reads. Path items stay raw text
/// until their turn, so a large document is never parsed whole: a parsed
/// `Value` takes about ten times the memory of its text.
#[derive(Deserialize)]
struct RawDocument<'a> {
    openapi: Option<Value>,
    swagger: Option<Value>,
    #[serde(borrow)]
    paths: Option<BTreeMap<String, &'a RawValue>>,
    #[serde(borrow)]
    components: Option<&'a RawValue>,
}

fn syntax(error: impl std::fmt::Display) -> SpecError {
    SpecError::Syntax(error.to_string())
}

/// Every operation of a document (JSON when it starts with `{`, YAML
/// otherwise) as a tool under `namespace`. Only the document's `components`
/// are kept, shared by the tools for `$ref`s in descriptions.
pub fn load(namespace: &str, text: &str) -> Result<Vec<ToolDef>, SpecError> {
    if text.trim_start().starts_with('{') {
        let raw: RawDocument = serde_json::from_str(text).map_err(syntax)?;
        check_version(raw.openapi.as_ref(), raw.swagger.as_ref())?;
        let components = match raw.components {
            Some(components) => serde_json::from_str(components.get()).map_err(syntax)?,
            None => Value::Null,
        };
        let paths = raw.paths.ok_or(SpecError::NoPaths)?;
        build(namespace, components, paths.into_iter().map(|(path, item)| (path, serde_json::from_str(item.get()))))
    } else {
        // YAML has no raw values to defer: it is parsed whole, then taken apart.
        let mut doc: Value = yaml_serde::from_str(text).map_err(syntax)?;
        check_version(doc.get("openapi"), doc.get("swagger"))?;
        let components = doc.get_mut("components").map(Value::take).unwrap_or(Value::Null);
        let Some(Value::Object(paths)) = doc.get_mut("paths").map(Value::take) else { return Err(SpecError::NoPaths) };
        build(namespace, components, paths.into_iter().map(|(path, item)| (path, Ok(item))))
    }
}

fn check_version(openapi: Option<&Value>, swagger: Option<&Value>) -> Result<(), SpecError> {
    match (openapi.and_then(Value::as_str), swagger) {
        (Some(version), _) if version.starts_with("3.") => Ok(()),
        (Some(version), _) => Err(SpecError::Version { found: format!("openapi {version}") }),
        (None, Some(version)) => Err(SpecError::Version { found: format!("swagger {version}") }),
        (None, None) => Err(SpecError::Version { found: "no `openapi` field".into() }),
    }
}

/// Path items one at a time; `$ref`s resolve against the components only.
fn build(
    namespace: &str,
    components: Value,
    items: impl Iterator<Item = (String, Result<Value, serde_json::Error>)>,
) -> Result<Vec<ToolDef>, SpecError> {
    let root = Arc::new(json!({ "components": components }));
    let mut built: Vec<((String, usize), String, ToolDef)> = Vec::new();
    for (path, item) in items {
        let item = item.map_err(syntax)?;
        let Some(item) = resolve(&root, &item) else { continue };
        for (order, method) in METHODS.iter().enumerate() {
            if let Some(operation) = item.get(*method) {
                let wanted = format!("{namespace}.{}.{}", group(operation, &path), name(operation, method, &path));
                let tool = build_tool(&root, namespace, &path, method, item, operation);
                built.push(((path.clone(), order), wanted, tool));
            }
        }
    }
    // Sorted, so naming never depends on the document's key order.
    built.sort_by(|a, b| a.0.cmp(&b.0));
    let names = deduplicate(built.iter().map(|(_, wanted, _)| wanted.clone()));
    Ok(built.into_iter().zip(names).map(|((_, _, tool), path)| ToolDef { path, ..tool }).collect())
}

fn group(operation: &Value, path: &str) -> String {
    let tag = operation.pointer("/tags/0").and_then(Value::as_str);
    let segment = path.split('/').find(|s| !s.is_empty() && !s.starts_with('{'));
    path_segment(tag.or(segment).unwrap_or("root"))
}

fn name(operation: &Value, method: &str, path: &str) -> String {
    match operation.get("operationId").and_then(Value::as_str) {
        Some(id) => path_segment(id),
        None => path_segment(&format!("{method} {path}")),
    }
}

/// Follow `$ref` (local only) to the value it names.
pub fn resolve<'a>(doc: &'a Value, mut value: &'a Value) -> Option<&'a Value> {
    for _ in 0..MAX_REF_HOPS {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => value = doc.pointer(reference.strip_prefix('#')?)?,
            None => return Some(value),
        }
    }
    None
}

/// The tool of one operation; its path is set by [`build`]. `root` holds the
/// components its `$ref`s point into.
fn build_tool(
    root: &Arc<Value>,
    namespace: &str,
    path: &str,
    method: &str,
    item: &Value,
    operation: &Value,
) -> ToolDef {
    let doc = &**root;
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params = Vec::new();
    for param in declared_params(doc, item, operation) {
        let (Some(name), Some(location)) = (
            param.get("name").and_then(Value::as_str),
            param.get("in").and_then(Value::as_str).and_then(ParamLocation::parse),
        ) else {
            continue;
        };
        // Headers the gateway sets itself are never the caller's to choose.
        if location == ParamLocation::Header && is_reserved_header(name) {
            continue;
        }
        let argument = match properties.contains_key(name) || name == BODY_ARGUMENT {
            true => format!("{}_{name}", location.as_str()),
            false => name.to_owned(),
        };
        let is_required = location == ParamLocation::Path || param.get("required") == Some(&Value::Bool(true));
        let mut schema = param.get("schema").cloned().unwrap_or_else(|| json!({"type": "string"}));
        let kind = ParamType::of(doc, &schema);
        if let (Some(description), Some(object)) = (param.get("description"), schema.as_object_mut()) {
            object.entry("description").or_insert_with(|| description.clone());
        }
        properties.insert(argument.clone(), schema);
        if is_required {
            required.push(Value::String(argument.clone()));
        }
        let multi_segment = location == ParamLocation::Path && param.get("x-multi-segment") == Some(&Value::Bool(true));
        params.push(Param { name: name.to_owned(), argument, location, required: is_required, kind, multi_segment });
    }

    let body = operation.get("requestBody").and_then(|b| resolve(doc, b));
    let body_required = body.map(|b| b.get("required") == Some(&Value::Bool(true)));
    if let Some(body) = body {
        let schema = json_content(body).cloned().unwrap_or(json!({}));
        properties.insert(BODY_ARGUMENT.into(), schema);
        if body_required == Some(true) {
            required.push(BODY_ARGUMENT.into());
        }
    }
    let input = json!({"type": "object", "properties": properties, "required": required}).to_string();
    let output = success_response(doc, operation).and_then(json_content).map(Value::to_string);

    let text = |key: &str| operation.get(key).and_then(Value::as_str).unwrap_or("").trim();
    let method_upper = method.to_ascii_uppercase();
    let route = format!("{method_upper} {path}");
    let description = [text("summary"), text("description"), &route]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    // The summary is the operation's title; without one, the description's opening says what it does.
    let summary = match (text("summary"), text("description")) {
        ("", "") => route,
        ("", description) => first_sentence(description),
        (summary, _) => one_line(summary),
    };
    let effect = match method {
        "get" | "head" | "options" => Effect::Read,
        _ => Effect::Write,
    };
    ToolDef {
        path: String::new(),
        namespace: namespace.to_owned(),
        description,
        summary,
        effect,
        schemas: Schemas::Text { input, output, root: Some(root.clone()) },
        target: Target::Http(Arc::new(HttpOperation {
            method: method_upper,
            path: path.to_owned(),
            operation_id: operation.get("operationId").and_then(Value::as_str).unwrap_or_default().to_owned(),
            params,
            body: body_required,
        })),
    }
}

/// The operation's parameters: the path item's, then the operation's, which
/// override path-item ones of the same name and location.
fn declared_params<'a>(doc: &'a Value, item: &'a Value, operation: &'a Value) -> Vec<&'a Value> {
    let declared = |v: &'a Value| v.get("parameters").and_then(Value::as_array).into_iter().flatten();
    let op_params: Vec<&Value> = declared(operation).filter_map(|p| resolve(doc, p)).collect();
    let mut params: Vec<&Value> = declared(item)
        .filter_map(|p| resolve(doc, p))
        .filter(|param| !op_params.iter().any(|o| o.get("name") == param.get("name") && o.get("in") == param.get("in")))
        .collect();
    params.extend(op_params);
    params
}

fn success_response<'a>(doc: &'a Value, operation: &'a Value) -> Option<&'a Value> {
    let responses = operation.get("responses")?.as_object()?;
    ["200", "201", "202", "203", "206", "2XX", "default"].iter().find_map(|code| resolve(doc, responses.get(*code)?))
}

fn json_content(holder: &Value) -> Option<&Value> {
    let content = holder.get("content")?.as_object()?;
    content.iter().find(|(media, _)| media.contains("json")).and_then(|(_, media)| media.get("schema"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r##"
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /repos/{owner}/{repo}/issues:
    parameters:
      - {name: owner, in: path, required: true, schema: {type: string}}
      - {name: repo, in: path, required: true, schema: {type: string}}
    get:
      tags: [issues]
      operationId: issues/list
      parameters:
        - {name: state, in: query, schema: {type: string, enum: [open, closed]}}
        - {name: labels, in: query, schema: {type: array, items: {type: string}}}
        - {$ref: "#/components/parameters/Trace"}
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: array, items: {$ref: "#/components/schemas/Issue"}}}}}
    post:
      tags: [issues]
      operationId: issues/create
      requestBody: {$ref: "#/components/requestBodies/NewIssue"}
      responses: {"201": {description: created}}
  /health:
    get: {responses: {"200": {description: ok}}}
  /v2/health:
    get: {operationId: "get /health", tags: [health], responses: {"200": {description: ok}}}
  /{id}:
    delete:
      parameters: [{name: id, in: path, schema: {type: integer}}, {name: id, in: query, schema: {type: string}}]
      responses: {"204": {description: gone}}
components:
  parameters:
    Trace: {name: X-Trace, in: header, schema: {type: string}}
  requestBodies:
    NewIssue: {required: true, content: {application/json: {schema: {$ref: "#/components/schemas/Issue"}}}}
  schemas:
    Issue: {type: object, properties: {title: {type: string}, parent: {$ref: "#/components/schemas/Issue"}}}
"##;

    /// Input, output and root of a tool loaded from a document.
    fn text(tool: &ToolDef) -> (&str, Option<&str>, Option<&Value>) {
        match &tool.schemas {
            Schemas::Text { input, output, root } => (input, output.as_deref(), root.as_deref()),
            Schemas::Indexed { .. } => unreachable!("a document's tools carry their schemas"),
        }
    }

    fn http(tool: &ToolDef) -> &HttpOperation {
        match &tool.target {
            Target::Http(op) => op,
            _ => unreachable!("OpenAPI tools call over HTTP"),
        }
    }

    #[test]
    fn operations_become_named_tools() {
        let tools = load("gh", SPEC).unwrap();
        // The same document as JSON takes the raw-text path and gives the same tools.
        let json_text = yaml_serde::from_str::<Value>(SPEC).unwrap().to_string();
        let from_json = load("gh", &json_text).unwrap();
        let summary = |tools: &[ToolDef]| -> Vec<(String, String, Option<String>)> {
            tools.iter().map(|t| (t.path.clone(), text(t).0.to_owned(), text(t).1.map(str::to_owned))).collect()
        };
        assert_eq!(summary(&tools), summary(&from_json));
        let paths: Vec<(&str, Effect)> = tools.iter().map(|t| (t.path.as_str(), t.effect)).collect();
        assert_eq!(
            paths,
            [
                ("gh.health.get_health", Effect::Read),
                ("gh.issues.issues_list", Effect::Read),
                ("gh.issues.issues_create", Effect::Write),
                ("gh.health.get_health_2", Effect::Read),
                ("gh.root.delete_id", Effect::Write),
            ]
        );
        assert!(tools[1].description.ends_with("GET /repos/{owner}/{repo}/issues"));
        let input: Value = serde_json::from_str(text(&tools[2]).0).unwrap();
        assert_eq!(input["required"], json!(["owner", "repo", "body"]));
        let output: Value = serde_json::from_str(text(&tools[1]).1.unwrap()).unwrap();
        assert_eq!(output["items"]["$ref"], "#/components/schemas/Issue");
        let root = text(&tools[0]).2.unwrap();
        assert!(root.pointer("/components/schemas/Issue").is_some() && root.get("paths").is_none());
    }

    #[test]
    fn a_summary_is_the_operations_title_else_its_descriptions_opening() {
        let long = "Lists the runs of a workflow. Anyone with read access can use it; see the docs.";
        let load_get = |get: Value| {
            let spec =
                json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/runs": {"get": get}}});
            load("ci", &spec.to_string()).unwrap().remove(0)
        };
        let cases = [
            (json!({"summary": "List runs. Paginated", "description": "Long text."}), "List runs. Paginated"),
            (json!({"description": long}), "Lists the runs of a workflow."),
            (json!({"description": "Lists runs\nfor a repository"}), "Lists runs"),
            (json!({"summary": "  ", "description": ""}), "GET /runs"),
            (json!({"tags": ["runs"]}), "GET /runs"),
        ];
        for (get, expected) in cases {
            let tool = load_get(get.clone());
            assert_eq!(tool.summary, expected, "{get}");
            assert!(tool.description.ends_with("GET /runs"), "{}", tool.description);
        }
        // `describe` still shows all of it.
        let ts = load_get(json!({"description": long})).typescript().unwrap();
        assert!(ts.contains(&format!("/** {long}\nGET /runs */")), "{ts}");
    }

    #[test]
    fn names_the_tools_object_answers_itself_get_an_underscore() {
        // `tools.x.then` is not a thenable's and `toString` prints the hint:
        // a tool under either name could not be called.
        let spec = json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {
            "/a": {"get": {"operationId": "then", "tags": ["toJSON"]}},
            "/b": {"get": {"operationId": "toString"}},
        }});
        let paths: Vec<String> = load("x", &spec.to_string()).unwrap().into_iter().map(|t| t.path).collect();
        assert_eq!(paths, ["x.toJSON_.then_", "x.b.toString_"]);
    }

    #[test]
    fn an_operation_without_parameters_takes_an_empty_object() {
        let tools = load("gh", SPEC).unwrap();
        let ts = tools[0].typescript().unwrap();
        assert!(ts.contains("type Input = {};"), "{ts}");
        let ts = tools[1].typescript().unwrap();
        // In the document's order.
        assert!(ts.contains("owner: string; repo: string; state?: \"open\" | \"closed\"; labels?: string[];"), "{ts}");
    }

    #[test]
    fn swagger_and_garbage_are_refused() {
        let swagger = load("x", r#"{"swagger": "2.0", "paths": {}}"#).unwrap_err();
        assert!(swagger.to_string().contains("swagger \"2.0\""), "{swagger}");
        assert!(matches!(load("x", "swagger: '2.0'"), Err(SpecError::Version { .. })));
        assert!(matches!(load("x", "{nope"), Err(SpecError::Syntax(_))));
        assert!(matches!(load("x", r#"{"openapi": "3.1.0"}"#), Err(SpecError::NoPaths)));
    }

    #[test]
    fn headers_the_gateway_owns_are_never_arguments() {
        let spec = r#"{"openapi": "3.1.0", "paths": {"/x": {"post": {"operationId": "x", "parameters": [
            {"name": "Host", "in": "header"}, {"name": "content-length", "in": "header"},
            {"name": "Transfer-Encoding", "in": "header"}, {"name": "Authorization", "in": "header"},
            {"name": "Cookie", "in": "header"}, {"name": "Idempotency-Key", "in": "header"},
            {"name": "X-Trace", "in": "header"}, {"name": "host", "in": "query"}]}}}}"#;
        let tools = load("t", spec).unwrap();
        let op = http(&tools[0]);
        let arguments: Vec<(&str, ParamLocation)> =
            op.params.iter().map(|p| (p.argument.as_str(), p.location)).collect();
        assert_eq!(arguments, [("X-Trace", ParamLocation::Header), ("host", ParamLocation::Query)]);
        let refused = op.request(&json!({"Host": "evil.example", "X-Trace": "t"})).unwrap_err();
        assert!(refused.to_string().contains("unknown argument `Host`"), "{refused}");
    }

    #[test]
    fn arguments_map_to_path_query_header_and_body() {
        let tools = load("gh", SPEC).unwrap();
        let list = http(&tools[1]);
        let parts = list
            .request(&json!({"owner": "a b", "repo": "x.y", "state": "open", "labels": ["x", "y"], "X-Trace": "t1"}))
            .unwrap();
        assert_eq!(parts.segments, ["repos", "a%20b", "x.y", "issues"]);
        assert_eq!(
            parts.query,
            [("state".into(), "open".into()), ("labels".into(), "x".into()), ("labels".into(), "y".into())]
        );
        assert_eq!(parts.headers, [("X-Trace".to_string(), "t1".to_string())]);
        assert_eq!(parts.body, None);

        let create = http(&tools[2]);
        let parts = create.request(&json!({"owner": "o", "repo": "r", "body": {"title": "t"}})).unwrap();
        assert_eq!(parts.body, Some(json!({"title": "t"})));

        let delete = http(&tools[4]);
        assert_eq!(delete.params[1].argument, "query_id");
        let parts = delete.request(&json!({"id": 7, "query_id": "q"})).unwrap();
        assert_eq!((parts.segments, parts.query.len()), (vec!["7".to_owned()], 1));

        let errors = [
            (list.request(&json!([])), "must be an object"),
            (list.request(&json!({"owner": "o"})), "missing required argument `repo` (path parameter)"),
            (
                list.request(&json!({"owner": "o", "repo": "r", "stat": 1})),
                "unknown argument `stat`; this tool takes: owner, repo, state",
            ),
            (create.request(&json!({"owner": "o", "repo": "r"})), "missing required argument `body`"),
            (list.request(&json!({"owner": "..", "repo": "r"})), "argument `owner` (path parameter) is, or decodes"),
            (list.request(&json!({"owner": "o", "repo": "r", "X-Trace": "a\r\nb"})), "`X-Trace` (header parameter)"),
        ];
        for (result, expected) in errors {
            let message = result.unwrap_err().to_string();
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn parameter_values_fit_their_declared_types() {
        let tools = load("gh", SPEC).unwrap();
        let (list, delete) = (http(&tools[1]), http(&tools[4]));
        assert_eq!(delete.params[0].kind, Some(ParamType::Integer));
        let fits = [
            (delete, json!({"id": 7})),
            (delete, json!({"id": "7"})),
            (delete, json!({"id": -3})),
            (delete, json!({"id": 7, "query_id": 5})),
            (delete, json!({"id": 7, "query_id": false})),
            (list, json!({"owner": "o", "repo": "r", "labels": ["x"]})),
            (list, json!({"owner": "o", "repo": "r", "labels": "x"})),
        ];
        for (op, args) in fits {
            assert!(op.request(&args).is_ok(), "{args} fits");
        }
        let integer = "argument `id` (path parameter) must be an integer (7 or \"7\"), got";
        let refused = [
            (delete, json!({"id": "seven"}), format!("{integer} a string that does not read as one")),
            (delete, json!({"id": "7.0"}), format!("{integer} a string that does not read as one")),
            (delete, json!({"id": 7.5}), format!("{integer} a number that is not an integer in range")),
            (delete, json!({"id": 1e21}), format!("{integer} a number that is not an integer in range")),
            (delete, json!({"id": true}), format!("{integer} a boolean")),
            (delete, json!({"id": [7]}), format!("{integer} an array")),
            (
                delete,
                json!({"id": 7, "query_id": {"a": 1}}),
                "argument `query_id` (query parameter) must be a string".into(),
            ),
            (
                list,
                json!({"owner": "o", "repo": "r", "labels": {"a": 1}}),
                "argument `labels` (query parameter) must be an array".into(),
            ),
        ];
        for (op, args, expected) in refused {
            let message = op.request(&args).unwrap_err().to_string();
            assert!(message.starts_with(&expected), "{args}: {message}");
        }
        let doc = json!({"components": {"schemas": {"Id": {"type": "integer"}}}});
        let declared = [
            (json!({"$ref": "#/components/schemas/Id"}), Some(ParamType::Integer)),
            (json!({"type": ["number", "null"]}), Some(ParamType::Number)),
            (json!({"type": ["number", "string"]}), None),
            (json!({"type": "null"}), None),
            (json!({"enum": ["a"]}), None),
        ];
        for (schema, expected) in declared {
            assert_eq!(ParamType::of(&doc, &schema), expected, "{schema}");
        }
        let (number, boolean) = (ParamType::Number, ParamType::Boolean);
        let values = [
            (number, json!("1.5"), None),
            (number, json!("NaN"), Some("a string that does not read as one")),
            (number, json!("inf"), Some("a string that does not read as one")),
            (boolean, json!("true"), None),
            (boolean, json!("yes"), Some("a string that does not read as one")),
            (boolean, json!(1), Some("a number")),
        ];
        for (kind, value, expected) in values {
            assert_eq!(kind.misfit(&value), expected, "{kind:?} {value}");
        }
    }

    #[test]
    fn cyclic_refs_end() {
        let doc = json!({"a": {"$ref": "#/b"}, "b": {"$ref": "#/a"}});
        assert_eq!(resolve(&doc, &doc["a"]), None);
    }
}
