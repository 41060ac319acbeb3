//! An OpenAPI tool's call: what it needs to become an HTTP request
//! ([`HttpOperation`]), and its arguments made into one. Pure: the document
//! is read in `openapi.rs`, the request sent in `catalog/http_upstream.rs`.
//!
//! Arguments are one flat object: each parameter by its name (a name used in
//! two locations gets the location as prefix for the second, e.g.
//! `query_id`), and the request body as `body`. The document (paths,
//! parameter names) is trusted; argument values are not: a path parameter
//! must stay one segment ([`path_problem`]; one the document marks
//! `x-multi-segment: true`, such as GitHub's `heads/main` refs, may hold
//! several, each checked alike), a header value must be visible
//! ASCII, and query values are form-encoded. A parameter's value must also
//! fit the JSON type its schema declares ([`ParamType`]). The same
//! [`HttpOperation::request`] checks a call before its policy is asked and
//! builds its request when it is made.

use icu_normalizer::ComposingNormalizerBorrowed;
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use url::Url;

/// The argument holding the request body.
pub const BODY_ARGUMENT: &str = "body";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamLocation {
    Path,
    Query,
    Header,
}

impl ParamLocation {
    /// As a document's parameter `in` names it.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "path" => Some(Self::Path),
            "query" => Some(Self::Query),
            "header" => Some(Self::Header),
            // Cookies are not sent: the catalog keeps no cookie jar.
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
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
    /// A path parameter the document marks `x-multi-segment: true`: its value
    /// may be several segments joined by `/` (each checked as one).
    #[serde(default)]
    pub multi_segment: bool,
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
    pub(crate) fn misfit(self, value: &Value) -> Option<&'static str> {
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
    /// The document's `operationId` (`""` without one), as Cedar policies see it.
    pub operation_id: String,
    pub params: Vec<Param>,
    /// `Some(required)` when the operation takes a JSON body.
    pub body: Option<bool>,
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
    #[error(
        "argument `{argument}` (path parameter of several segments) has a segment that {problem}; its value is \
         segments joined by `/`, each not empty, `.` or `..`, and without `\\`, control characters or anything \
         that decodes or normalises to `/`, `\\` or them"
    )]
    UnsafeSegments { argument: String, problem: &'static str },
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
                ParamLocation::Path if param.multi_segment => {
                    let value = scalar(value);
                    let mut encoded = Vec::new();
                    for segment in value.split('/') {
                        if let Some(problem) = path_problem(segment) {
                            return Err(ArgumentError::UnsafeSegments { argument: param.argument.clone(), problem });
                        }
                        encoded.push(utf8_percent_encode(segment, VALUE).to_string());
                    }
                    // Split into segments of their own by `segments`.
                    path_values.push((&param.name, encoded.join("/")));
                }
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
            // Only a multi-segment value holds a `/` here: literals and other values are encoded.
            .flat_map(|segment| segment.split('/').map(str::to_owned).collect::<Vec<_>>())
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
/// decode before routing), with and without NFKC normalisation before it
/// (some fold `．` into `.`, and `％2e` into `%2e`, which decodes to `.`),
/// and so is the part before a `;` (servlet containers route `..;x` as `..`).
fn path_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return Some("is empty");
    }
    let nfkc = ComposingNormalizerBorrowed::new_nfkc();
    // The forms the value may reach after as many decodings as rounds so far.
    let mut forms = vec![value.to_owned()];
    for round in 0..=MAX_DECODINGS {
        let mut decoded_forms: Vec<String> = Vec::new();
        for form in &forms {
            let normalized = nfkc.normalize(form);
            for reading in [form.as_str(), &normalized] {
                let before_parameters = reading.split(';').next().unwrap_or_default();
                if matches!(before_parameters, "" | "." | "..") {
                    return Some("is, or decodes to, a `.` or `..` segment");
                }
                if reading.chars().any(|c| matches!(c, '/' | '\\') || c.is_control()) {
                    return Some("contains, or decodes to, `/`, `\\` or a control character");
                }
                let Ok(decoded) = percent_decode_str(reading).decode_utf8() else {
                    // Overlong forms (`%c0%ae`) are `.` to some decoders.
                    return Some("decodes to bytes that are not UTF-8");
                };
                if decoded != reading && !decoded_forms.iter().any(|known| *known == decoded) {
                    decoded_forms.push(decoded.into_owned());
                }
            }
        }
        if decoded_forms.is_empty() {
            return None;
        }
        if round == MAX_DECODINGS {
            break;
        }
        forms = decoded_forms;
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

    use serde_json::json;

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
            "\u{ff05}2e",
            "\u{ff05}2e\u{ff05}2e",
            "\u{ff05}\u{ff12}\u{ff45}",
            "a\u{ff05}2fb",
            "%ef%bc%852e",
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
            operation_id: String::new(),
            params: vec![
                Param {
                    name: "name".into(),
                    argument: "name".into(),
                    location: ParamLocation::Path,
                    required: true,
                    kind: Some(ParamType::String),
                    multi_segment: false,
                },
                Param {
                    name: "n".into(),
                    argument: "n".into(),
                    location: ParamLocation::Path,
                    required: true,
                    kind: Some(ParamType::Integer),
                    multi_segment: false,
                },
                Param {
                    name: "q".into(),
                    argument: "q".into(),
                    location: ParamLocation::Query,
                    required: false,
                    kind: None,
                    multi_segment: false,
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
        // A multi-segment parameter (`x-multi-segment`): several segments, each checked as one.
        let mut refs = HttpOperation { path: "/git/refs/{ref}".into(), ..op.clone() };
        refs.params =
            vec![Param { multi_segment: true, name: "ref".into(), argument: "ref".into(), ..op.params[0].clone() }];
        let base = Url::parse("https://h.test/api").unwrap();
        let kept = [
            ("heads/main", "https://h.test/api/git/refs/heads/main"),
            ("tags/v1 b", "https://h.test/api/git/refs/tags/v1%20b"),
        ];
        for (value, expected) in kept {
            let parts = refs.request(&json!({"ref": value})).unwrap();
            assert_eq!(parts.url(&base, &[], &refs.path).unwrap().as_str(), expected, "{value}");
        }
        for value in ["heads/../main", "heads//main", "/heads", "heads/", "heads/%2e%2e", "a\\b", "heads/%2F", ".."] {
            let error = refs.request(&json!({"ref": value})).unwrap_err();
            assert!(matches!(error, ArgumentError::UnsafeSegments { .. }), "{value:?} is refused: {error:?}");
        }
        // A dot segment in the document itself is caught when the URL is built.
        let dotted = HttpOperation { path: "/a/../b".into(), params: vec![], ..op };
        let parts = dotted.request(&json!({})).unwrap();
        let error = parts.url(&Url::parse("https://h.test").unwrap(), &[], &dotted.path).unwrap_err();
        assert_eq!(error, ArgumentError::PathChanged { path: "/a/../b".into() });
    }

    /// Every form a chain of lenient upstreams and proxies might route one
    /// URL path segment as: up to five steps, each a (lossy) percent-decoding
    /// or an NFKC normalisation, in any order.
    fn readings(segment: &str) -> Vec<String> {
        let nfkc = ComposingNormalizerBorrowed::new_nfkc();
        let mut seen = vec![segment.to_owned()];
        let mut frontier = seen.clone();
        for _ in 0..5 {
            let mut next = Vec::new();
            for form in &frontier {
                for step in
                    [percent_decode_str(form).decode_utf8_lossy().into_owned(), nfkc.normalize(form).into_owned()]
                {
                    if !seen.contains(&step) {
                        seen.push(step.clone());
                        next.push(step);
                    }
                }
            }
            frontier = next;
        }
        seen
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(3000))]

        /// A path parameter's value, however it is written, lands as one
        /// segment in its place, decodes back to itself, and no reading of
        /// it is a dot segment or holds a separator; or it is refused.
        #[test]
        fn a_path_value_is_one_segment_under_every_reading(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "a", "1", "~", "-", ".", "..", "/", "\\", ";", "?", "#", " ", "%", "%%", "2e", "2E", "25", "2f", "5c",
                "%2e", "%2E", "%2f", "%5C", "%25", "%252e", "%c0%ae", "%e2%80%a4", "%ef%bc%8e", "\u{ff0e}", "\u{ff0f}",
                "\u{ff3c}", "\u{2024}", "\u{2025}", "\u{ff05}", "\u{ff12}", "\u{ff45}", "\u{ff25}", "\u{ff46}",
                "\u{fe52}", "\u{fe68}", "\u{0}", "\t", "\u{85}", "\u{2028}", "ü", "e\u{301}",
            ]), 1..7),
        ) {
            let value: String = pieces.concat();
            let op = HttpOperation {
                method: "GET".into(),
                path: "/files/{name}/end".into(),
                operation_id: String::new(),
                params: vec![Param {
                    name: "name".into(),
                    argument: "name".into(),
                    location: ParamLocation::Path,
                    required: true,
                    kind: Some(ParamType::String),
                    multi_segment: false,
                }],
                body: None,
            };
            let base = Url::parse("https://h.test/api/").unwrap();
            match op.request(&json!({"name": value})) {
                Err(error) => proptest::prop_assert!(matches!(error, ArgumentError::UnsafePath { .. }), "{error:?}"),
                Ok(parts) => {
                    let url = parts.url(&base, &[], &op.path).unwrap();
                    let segments: Vec<&str> = url.path_segments().unwrap().collect();
                    proptest::prop_assert_eq!(segments.len(), 4, "{}", url);
                    proptest::prop_assert_eq!((segments[0], segments[1], segments[3]), ("api", "files", "end"));
                    let decoded = percent_decode_str(segments[2]).decode_utf8().unwrap();
                    proptest::prop_assert_eq!(&decoded, &value);
                    for reading in readings(segments[2]) {
                        let routed = reading.split(';').next().unwrap_or_default();
                        proptest::prop_assert!(
                            !matches!(routed, "" | "." | "..")
                                && !reading.chars().any(|c| matches!(c, '/' | '\\') || c.is_control()),
                            "{value:?} is sent as {} and may be read as {reading:?}",
                            segments[2]
                        );
                    }
                }
            }
        }
    }
}
