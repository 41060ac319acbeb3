//! OpenAPI 3.0 / 3.1 documents (JSON or YAML) to tools, and a tool call's
//! arguments to an HTTP request. Pure: fetching the document and sending the
//! request happen in `outbound.rs` and `catalog.rs`.
//!
//! Naming: `<namespace>.<group>.<name>`, where group is the operation's first
//! tag (else the first literal path segment, else `root`) and name is its
//! `operationId` (else method and path), each sanitised to an identifier.
//! Operations are named in (path, method) order, so when two want the same
//! path the one that sorts first keeps it and the next gets `_2`.
//!
//! Arguments are one flat object: each parameter by its name (a name used in
//! two locations gets the location as prefix for the second, e.g.
//! `query_id`), and the request body as `body`. The document (paths,
//! parameter names) is trusted; argument values are not: a path parameter
//! must stay one segment ([`path_problem`]), a header value must be visible
//! ASCII, and query values are form-encoded. A parameter's value must also
//! fit the JSON type its schema declares ([`ParamType`]). The same
//! [`HttpOperation::request`] checks a call before its policy is asked and
//! builds its request when it is made.

use std::collections::BTreeMap;
use std::sync::Arc;

use executor_core::Effect;
use icu_normalizer::ComposingNormalizerBorrowed;
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use url::Url;

use crate::naming::{deduplicate, sanitize};
use crate::tool::{Schemas, Target, ToolDef, first_sentence, one_line};

/// Hops through `$ref` chains (a ref to a ref to ...) before giving up, which
/// also stops cycles of refs that point at each other.
const MAX_REF_HOPS: usize = 16;
/// The argument holding the request body.
pub const BODY_ARGUMENT: &str = "body";

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamLocation {
    Path,
    Query,
    Header,
}

impl ParamLocation {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "path" => Some(Self::Path),
            "query" => Some(Self::Query),
            "header" => Some(Self::Header),
            // Cookies are not sent: the catalog keeps no cookie jar.
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Query => "query",
            Self::Header => "header",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// The name upstream expects.
    pub name: String,
    /// The argument it is read from.
    pub argument: String,
    pub location: ParamLocation,
    pub required: bool,
    /// The JSON type its schema declares, when it declares one (a type list
    /// counts when it is one type and `null`).
    pub kind: Option<ParamType>,
}

/// A parameter's declared JSON type. Parameters travel as text, so a value
/// fits when its text reads as one: `7` and `"7"` both fit `integer` (they
/// make the same request), `"seven"`, `7.5`, `true` or `[7]` do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

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

    /// What fits, for the message when a value does not.
    fn expected(self) -> &'static str {
        match self {
            Self::String => "a string (or a number or boolean, sent as text)",
            Self::Integer => "an integer (7 or \"7\")",
            Self::Number => "a number (1.5 or \"1.5\")",
            Self::Boolean => "a boolean (true or false, or \"true\" or \"false\")",
            Self::Array => "an array (or one value, sent as a one-item array)",
            Self::Object => "an object",
        }
    }

    /// Why `value` does not fit, if it does not.
    fn misfit(self, value: &Value) -> Option<&'static str> {
        let text_reads = |text: &str| match self {
            Self::Integer => {
                let digits = text.strip_prefix('-').unwrap_or(text);
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            }
            Self::Number => text.parse::<f64>().is_ok_and(f64::is_finite),
            Self::Boolean => matches!(text, "true" | "false"),
            Self::String | Self::Array => true,
            Self::Object => false,
        };
        let fits = match (self, value) {
            (Self::Object, Value::Object(_)) | (Self::Array, Value::Array(_)) => true,
            (_, Value::Object(_) | Value::Array(_)) => false,
            // As text, `2.0` is not an integer (JavaScript's integers arrive without a fraction).
            (Self::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Self::Number | Self::String | Self::Array, Value::Number(_)) => true,
            (Self::Boolean | Self::String | Self::Array, Value::Bool(_)) => true,
            (_, Value::String(text)) => text_reads(text),
            _ => false,
        };
        (!fits).then_some(match value {
            Value::Object(_) => "an object",
            Value::Array(_) => "an array",
            Value::Bool(_) => "a boolean",
            Value::Number(_) if self == Self::Integer => "a number that is not an integer in range",
            Value::Number(_) => "a number",
            Value::String(_) => "a string that does not read as one",
            Value::Null => "null",
        })
    }
}

/// What a call needs to become an HTTP request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpOperation {
    /// Upper case, e.g. `GET`.
    pub method: String,
    /// As in the document, e.g. `/repos/{owner}/{repo}/issues`.
    pub path: String,
    pub params: Vec<Param>,
    /// `Some(required)` when the operation takes a JSON body.
    pub body: Option<bool>,
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
    sanitize(tag.or(segment).unwrap_or("root"))
}

fn name(operation: &Value, method: &str, path: &str) -> String {
    match operation.get("operationId").and_then(Value::as_str) {
        Some(id) => sanitize(id),
        None => sanitize(&format!("{method} {path}")),
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
    // Operation parameters override path-item ones with the same name and location.
    let declared = |v: &Value| v.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut raw: Vec<&Value> = Vec::new();
    let (item_params, op_params) = (declared(item), declared(operation));
    let op_params: Vec<&Value> = op_params.iter().filter_map(|p| resolve(doc, p)).collect();
    for param in item_params.iter().filter_map(|p| resolve(doc, p)) {
        let same = |o: &&Value| o.get("name") == param.get("name") && o.get("in") == param.get("in");
        if !op_params.iter().any(same) {
            raw.push(param);
        }
    }
    raw.extend(op_params.iter().copied());

    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params = Vec::new();
    for param in raw {
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
        params.push(Param { name: name.to_owned(), argument, location, required: is_required, kind });
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
            params,
            body: body_required,
        })),
    }
}

fn success_response<'a>(doc: &'a Value, operation: &'a Value) -> Option<&'a Value> {
    let responses = operation.get("responses")?.as_object()?;
    ["200", "201", "202", "203", "206", "2XX", "default"].iter().find_map(|code| resolve(doc, responses.get(*code)?))
}

fn json_content(holder: &Value) -> Option<&Value> {
    let content = holder.get("content")?.as_object()?;
    content.iter().find(|(media, _)| media.contains("json")).and_then(|(_, media)| media.get("schema"))
}

/// Why a call's arguments cannot become a request. Nothing is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    #[error("arguments must be an object, e.g. tools.x.y({{id: 1}})")]
    NotAnObject,
    #[error(
        "missing required argument `{argument}` ({location} parameter); see tools.describe.tool for the input type"
    )]
    Missing { argument: String, location: &'static str },
    #[error("missing required argument `body` (the JSON request body)")]
    MissingBody,
    #[error("unknown argument `{argument}`; this tool takes: {expected}")]
    Unknown { argument: String, expected: String },
    #[error(
        "argument `{argument}` (path parameter) {problem}; a path parameter is exactly one path segment: not empty, \
         `.` or `..`, and without `/`, `\\`, control characters or anything that decodes or normalises to them"
    )]
    UnsafePath { argument: String, problem: &'static str },
    #[error("argument `{argument}` (header parameter) may hold only visible ASCII characters, spaces and tabs")]
    UnsafeHeader { argument: String },
    #[error(
        "argument `{argument}` ({location} parameter) must be {expected}, got {found}; see tools.describe.tool for \
         the input type"
    )]
    WrongType { argument: String, location: &'static str, expected: &'static str, found: &'static str },
    #[error("the URL would not keep the operation's path `{path}` (a segment of it would be read as `.` or `..`)")]
    PathChanged { path: String },
}

/// The parts of a request a call's arguments decide.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestParts {
    /// The operation's path segments, parameters substituted, each percent-encoded.
    pub segments: Vec<String>,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

/// Parameter values keep only RFC 3986's unreserved characters: nothing else
/// can add a segment, a query or a host, or be read as a delimiter.
const VALUE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
/// The document's own path text: what a URL path cannot hold as it is (`%` is
/// left, the document may have encoded already).
const LITERAL: &AsciiSet =
    &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'<').add(b'>').add(b'?').add(b'`').add(b'{').add(b'}').add(b'\\');
/// Percent-decoding rounds looked through for a hidden `..` or `/`.
const MAX_DECODINGS: usize = 4;

impl HttpOperation {
    pub fn request(&self, args: &Value) -> Result<RequestParts, ArgumentError> {
        let args = match args {
            Value::Object(map) => map,
            Value::Null => &Map::new(),
            _ => return Err(ArgumentError::NotAnObject),
        };
        if let Some(unknown) = args.keys().find(|k| {
            k.as_str() != BODY_ARGUMENT && !self.params.iter().any(|p| &p.argument == *k)
                || (k.as_str() == BODY_ARGUMENT && self.body.is_none())
        }) {
            let mut expected: Vec<&str> = self.params.iter().map(|p| p.argument.as_str()).collect();
            expected.extend(self.body.map(|_| BODY_ARGUMENT));
            let expected = if expected.is_empty() { "no arguments".into() } else { expected.join(", ") };
            return Err(ArgumentError::Unknown { argument: unknown.clone(), expected });
        }
        let mut path_values: Vec<(&str, String)> = Vec::new();
        let mut parts = RequestParts { segments: Vec::new(), query: Vec::new(), headers: Vec::new(), body: None };
        for param in &self.params {
            let Some(value) = args.get(&param.argument).filter(|v| !v.is_null()) else {
                if param.required {
                    return Err(ArgumentError::Missing {
                        argument: param.argument.clone(),
                        location: param.location.as_str(),
                    });
                }
                continue;
            };
            if let Some(kind) = param.kind
                && let Some(found) = kind.misfit(value)
            {
                return Err(ArgumentError::WrongType {
                    argument: param.argument.clone(),
                    location: param.location.as_str(),
                    expected: kind.expected(),
                    found,
                });
            }
            match param.location {
                ParamLocation::Path => {
                    let value = scalar(value);
                    if let Some(problem) = path_problem(&value) {
                        return Err(ArgumentError::UnsafePath { argument: param.argument.clone(), problem });
                    }
                    path_values.push((&param.name, utf8_percent_encode(&value, VALUE).to_string()));
                }
                // Arrays repeat the parameter (OpenAPI's default `form`, `explode: true`).
                ParamLocation::Query => match value {
                    Value::Array(items) => {
                        parts.query.extend(items.iter().map(|item| (param.name.clone(), scalar(item))));
                    }
                    _ => parts.query.push((param.name.clone(), scalar(value))),
                },
                ParamLocation::Header => {
                    let value = scalar(value);
                    if !value.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) {
                        return Err(ArgumentError::UnsafeHeader { argument: param.argument.clone() });
                    }
                    parts.headers.push((param.name.clone(), value));
                }
            }
        }
        parts.segments = self.segments(&path_values);
        match (args.get(BODY_ARGUMENT), self.body) {
            (Some(body), Some(_)) => parts.body = Some(body.clone()),
            (None, Some(true)) => return Err(ArgumentError::MissingBody),
            _ => {}
        }
        Ok(parts)
    }

    /// The document's path, segment by segment, with `{name}`s replaced by
    /// their encoded values; the document's own text is taken as written.
    fn segments(&self, values: &[(&str, String)]) -> Vec<String> {
        let path = self.path.strip_prefix('/').unwrap_or(&self.path);
        path.split('/')
            .map(|template| {
                let mut segment = String::new();
                let mut rest = template;
                while let Some(open) = rest.find('{') {
                    let close = rest[open..].find('}').map(|c| open + c);
                    let value = close.and_then(|close| values.iter().find(|(name, _)| *name == &rest[open + 1..close]));
                    let (Some(close), Some((_, value))) = (close, value) else {
                        segment.extend(utf8_percent_encode(&rest[..=open], LITERAL));
                        rest = &rest[open + 1..];
                        continue;
                    };
                    segment.extend(utf8_percent_encode(&rest[..open], LITERAL));
                    segment.push_str(value);
                    rest = &rest[close + 1..];
                }
                segment.extend(utf8_percent_encode(rest, LITERAL));
                segment
            })
            .collect()
    }
}

impl RequestParts {
    /// `base` with these segments after its path and these query pairs after
    /// `credentials` (and its own query). The URL is checked to hold exactly
    /// the segments meant, so nothing can be re-read as a dot segment.
    pub fn url(&self, base: &Url, credentials: &[(String, String)], template: &str) -> Result<Url, ArgumentError> {
        let mut intended: Vec<&str> = base.path_segments().map(Iterator::collect).unwrap_or_default();
        // The base's trailing slash is not a segment of its own.
        if intended.last() == Some(&"") {
            intended.pop();
        }
        intended.extend(self.segments.iter().map(String::as_str));
        let mut url = base.clone();
        url.set_path(&format!("/{}", intended.join("/")));
        if url.path_segments().is_none_or(|segments| !segments.eq(intended.iter().copied())) {
            return Err(ArgumentError::PathChanged { path: template.to_owned() });
        }
        if !credentials.is_empty() || !self.query.is_empty() {
            url.query_pairs_mut().extend_pairs(credentials.iter().chain(&self.query));
        }
        Ok(url)
    }
}

/// Why a path parameter's value could change the path, if it could. Each
/// layer of percent-decoding is looked at too (an upstream or a proxy may
/// decode before routing), after NFKC normalisation (some fold `．` into
/// `.`), and so is the part before a `;` (servlet containers route
/// `..;x` as `..`).
fn path_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return Some("is empty");
    }
    let nfkc = ComposingNormalizerBorrowed::new_nfkc();
    let mut layer = value.to_owned();
    for _ in 0..=MAX_DECODINGS {
        let normalized = nfkc.normalize(&layer);
        let before_parameters = normalized.split(';').next().unwrap_or_default();
        if matches!(before_parameters, "" | "." | "..") {
            return Some("is, or decodes to, a `.` or `..` segment");
        }
        if normalized.chars().any(|c| matches!(c, '/' | '\\') || c.is_control()) {
            return Some("contains, or decodes to, `/`, `\\` or a control character");
        }
        let Ok(decoded) = percent_decode_str(&layer).decode_utf8() else {
            // Overlong forms (`%c0%ae`) are `.` to some decoders.
            return Some("decodes to bytes that are not UTF-8");
        };
        if decoded == layer.as_str() {
            return None;
        }
        layer = decoded.into_owned();
    }
    Some("is percent-encoded too many times over")
}

/// Strings as they are, anything else as JSON text.
fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
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
    fn an_operation_without_parameters_takes_an_empty_object() {
        let tools = load("gh", SPEC).unwrap();
        let ts = tools[0].typescript().unwrap();
        assert!(ts.contains("type Input = {};"), "{ts}");
        let ts = tools[1].typescript().unwrap();
        assert!(ts.contains("labels?: string[]; owner: string; repo: string;"), "{ts}");
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
    fn path_parameters_stay_one_segment() {
        let refused = [
            "",
            ".",
            "..",
            "../x",
            "x/..",
            "a/b",
            "a\\b",
            "/",
            "%2e",
            "%2E%2e",
            "%2e%2e/",
            ".%2e",
            "%2f",
            "a%2Fb",
            "%5c",
            "%252e%252e",
            "%25252f",
            "%c0%ae%c0%ae",
            "%ff",
            "\0",
            "a\u{0}b",
            "\r\n",
            "a\tb",
            "\u{7f}",
            "\u{85}",
            "．．",
            "．",
            "‥",
            "a／b",
            "a＼b",
            "..;x",
            ".;",
            ";x",
            "%2e%2e;jsessionid=1",
            "%2525252525252e",
        ];
        for value in refused {
            assert!(path_problem(value).is_some(), "{value:?} is refused");
        }
        let kept = [
            "a", "a b", "a.b", "..a", "a..", "...", "…", "%", "100%", "%zz", "%2", "ü", "日本", "?x=1", "#frag", "a;b",
        ];
        for value in kept {
            assert_eq!(path_problem(value), None, "{value:?} is kept");
        }
    }

    #[test]
    fn urls_keep_the_segments_meant() {
        let op = HttpOperation {
            method: "GET".into(),
            path: "/files/{name}/v{n}.json/{missing}".into(),
            params: vec![
                Param {
                    name: "name".into(),
                    argument: "name".into(),
                    location: ParamLocation::Path,
                    required: true,
                    kind: Some(ParamType::String),
                },
                Param {
                    name: "n".into(),
                    argument: "n".into(),
                    location: ParamLocation::Path,
                    required: true,
                    kind: Some(ParamType::Integer),
                },
                Param {
                    name: "q".into(),
                    argument: "q".into(),
                    location: ParamLocation::Query,
                    required: false,
                    kind: None,
                },
            ],
            body: None,
        };
        let credentials = [("key".to_owned(), "k&=#".to_owned())];
        let cases = [
            ("https://h.test/api/", "a b?#%", "https://h.test/api/files/a%20b%3F%23%25/v2.json/%7Bmissing%7D"),
            ("https://h.test", "..a", "https://h.test/files/..a/v2.json/%7Bmissing%7D"),
            ("https://h.test/a%2Fb", "ü", "https://h.test/a%2Fb/files/%C3%BC/v2.json/%7Bmissing%7D"),
        ];
        for (base, name, expected) in cases {
            let parts = op.request(&json!({"name": name, "n": 2, "q": "x&y=z#w"})).unwrap();
            let url = parts.url(&Url::parse(base).unwrap(), &credentials, &op.path).unwrap();
            assert_eq!(url.as_str(), format!("{expected}?key=k%26%3D%23&q=x%26y%3Dz%23w"));
        }
        // A dot segment in the document itself is caught when the URL is built.
        let dotted = HttpOperation { path: "/a/../b".into(), params: vec![], ..op };
        let parts = dotted.request(&json!({})).unwrap();
        let error = parts.url(&Url::parse("https://h.test").unwrap(), &[], &dotted.path).unwrap_err();
        assert_eq!(error, ArgumentError::PathChanged { path: "/a/../b".into() });
    }

    #[test]
    fn cyclic_refs_end() {
        let doc = json!({"a": {"$ref": "#/b"}, "b": {"$ref": "#/a"}});
        assert_eq!(resolve(&doc, &doc["a"]), None);
    }
}
