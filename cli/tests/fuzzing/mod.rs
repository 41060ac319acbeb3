//! What the fuzz targets and the malformed-request test share: a real host
//! (embedded store, a known API key, an OpenAPI source whose writes need
//! approval), requests as raw HTTP/1.1 bytes, their generators, and what every
//! answer must be.
#![allow(dead_code)] // Each test file uses its own part.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use executor_catalog::{Catalog, CatalogConfig};
use executor_cli::serve;
use executor_core::{ApiKey, Principal, TokenHash};
use executor_service::{Host, HostConfig};
use executor_store::{EmbeddedStore, KeyStore};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The API key of the fuzzing owner: fixed, so that saved inputs replay.
pub const TOKEN: &str = "exk_fuzz0000000000000000000000000000000000000000000000000000000000";
/// In an input, stands for a paused execution's id (made fresh for the input).
pub const EXECUTION: &str = "@execution@";
/// In an input, stands for that execution's approval-link token.
pub const LINK: &str = "@link@";
/// A CSRF value of the right form (32 hex digits).
pub const CSRF: &str = "0123456789abcdef0123456789abcdef";

const SPEC: &str = r#"openapi: 3.0.0
info: { title: shop, version: "1" }
paths:
  /orders:
    post:
      operationId: create_order
      tags: [orders]
      requestBody: { content: { application/json: { schema: { type: object } } } }
"#;

/// A host as `executor serve` builds it, in `dir`, with the key [`TOKEN`] for
/// `fuzzer` and the source `shop`, whose upstream (a closed loopback port) is
/// never reached unless a call is approved.
pub async fn host(dir: &std::path::Path) -> Host {
    let store = Arc::new(EmbeddedStore::open(dir).unwrap());
    let key = ApiKey {
        hash: TokenHash::of_token(TOKEN),
        owner: Principal::parse("fuzzer").unwrap(),
        created_at: SystemTime::now().into(),
        toolkit: None,
    };
    store.create_key(&key).await.unwrap();
    std::fs::write(dir.join("shop.yaml"), SPEC).unwrap();
    let config = "[outbound]\nallow_loopback = true\n\n[[sources]]\nnamespace = \"shop\"\nkind = \"openapi\"\n\
                  spec = \"shop.yaml\"\nbase_url = \"http://127.0.0.1:9\"\n";
    let config = CatalogConfig::from_toml_str(config, &dir.join("executor.toml")).unwrap();
    let catalog = Catalog::connect(&config).await.unwrap();
    let namespaces = vec!["shop".to_owned()];
    serve::host(store, Arc::new(catalog), &namespaces, HostConfig::default()).await.unwrap()
}

/// A request as it travels: method, target, headers, body.
#[derive(Debug, Clone)]
pub struct Raw {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Raw {
    /// HTTP/1.1 bytes, `Content-Length` set from the body.
    pub fn render(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.target).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(format!("content-length: {}\r\n\r\n", self.body.len()).as_bytes());
        out.extend_from_slice(&self.body);
        out
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }
}

/// The request in `bytes` as the server hands it to the host (hyper parses
/// the head; the body is what follows it), or why it is not one.
pub fn parse(bytes: &[u8]) -> Result<http::Request<Bytes>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Request::new(&mut headers);
    let end = match head.parse(bytes) {
        Ok(httparse::Status::Complete(end)) => end,
        Ok(httparse::Status::Partial) => return Err("the head is incomplete".into()),
        Err(e) => return Err(format!("not an HTTP request: {e}")),
    };
    let mut request = http::Request::builder().method(head.method.unwrap_or_default()).uri(head.path.unwrap_or("/"));
    for header in head.headers.iter() {
        request = request.header(header.name, header.value);
    }
    request.body(Bytes::copy_from_slice(&bytes[end..])).map_err(|e| format!("not a request hyper passes on: {e}"))
}

/// What every answer must be: never a server error; on `/mcp`, JSON-RPC
/// (a result or an error), or empty for the statuses that have no body.
pub fn check_answer(path: &str, status: u16, content_type: Option<&str>, body: &[u8]) -> Result<(), String> {
    let shown = || format!("{status} {}", String::from_utf8_lossy(&body[..body.len().min(400)]));
    if status >= 500 {
        return Err(format!("a server error: {}", shown()));
    }
    if path.trim_end_matches('/') != "/mcp" || body.is_empty() && matches!(status, 202 | 204 | 405) {
        return Ok(());
    }
    if !content_type.is_some_and(|t| t.starts_with("application/json")) {
        return Err(format!("not JSON ({content_type:?}): {}", shown()));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON ({e}): {}", shown()))?;
    let messages = match &value {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    for message in messages {
        let one_of = message.get("result").is_some() != message.get("error").is_some();
        if message["jsonrpc"] != "2.0" || !one_of {
            return Err(format!("not a JSON-RPC response: {}", shown()));
        }
    }
    Ok(())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z_]{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Code for `execute`: finishing, failing, pausing, and not JavaScript at all.
fn code() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("return 1 + 2")),
        Just(json!("throw new Error('no')")),
        Just(json!("return await tools.shop.orders.create_order({ body: {} })")),
        Just(json!("return await tools.search({ query: 'order' })")),
        Just(json!("return (")),
        Just(json!("const x: number = 'typed'; return x")),
        "\\PC{0,40}".prop_map(Value::from),
        json_value(),
    ]
}

fn method_name() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("initialize")),
        Just(json!("tools/list")),
        Just(json!("tools/call")),
        Just(json!("notifications/initialized")),
        Just(json!("ping")),
        Just(json!("resources/list")),
        Just(json!("prompts/get")),
        Just(json!("logging/setLevel")),
        Just(json!("completion/complete")),
        "[a-z/]{0,16}".prop_map(Value::from),
        json_value(),
    ]
}

fn params() -> impl Strategy<Value = Option<Value>> {
    let tool_arguments = prop_oneof![
        code().prop_map(|code| json!({ "code": code })),
        (json_value(), prop_oneof![Just(json!("accept")), Just(json!("decline")), json_value()])
            .prop_map(|(id, action)| json!({ "executionId": id, "action": action })),
        json_value(),
    ];
    let structured = prop_oneof![
        (prop_oneof![Just(json!("execute")), Just(json!("resume")), json_value()], tool_arguments)
            .prop_map(|(name, arguments)| json!({ "name": name, "arguments": arguments })),
        json_value().prop_map(|cursor| json!({ "cursor": cursor })),
        (prop_oneof![Just(json!("2025-06-18")), Just(json!("2026-07-28")), json_value()], json_value()).prop_map(
            |(version, capabilities)| {
                json!({ "protocolVersion": version, "capabilities": capabilities,
                        "clientInfo": { "name": "fuzz", "version": "1" } })
            }
        ),
        json_value(),
    ];
    prop::option::weighted(0.9, structured)
}

/// A JSON-RPC message, right or wrong in any of its parts.
fn message() -> impl Strategy<Value = Value> {
    let jsonrpc = prop_oneof![4 => Just(Some(json!("2.0"))), 1 => Just(None), 1 => json_value().prop_map(Some)];
    let id = prop_oneof![
        3 => any::<u32>().prop_map(|n| Some(json!(n))),
        1 => "\\PC{0,8}".prop_map(|s| Some(json!(s))),
        1 => Just(None),
        1 => json_value().prop_map(Some),
    ];
    (jsonrpc, id, method_name(), params()).prop_map(|(jsonrpc, id, method, params)| {
        let mut message = serde_json::Map::new();
        for (name, value) in [("jsonrpc", jsonrpc), ("id", id), ("method", Some(method)), ("params", params)] {
            if let Some(value) = value {
                message.insert(name.into(), value);
            }
        }
        Value::Object(message)
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => message().prop_map(|m| m.to_string().into_bytes()),
        1 => prop::collection::vec(message(), 0..3).prop_map(|m| Value::from(m).to_string().into_bytes()),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

/// A header value that may appear in a request: printable, or empty.
fn header_value() -> impl Strategy<Value = String> {
    "[ -~]{0,40}".prop_map(|v| v.trim().to_owned())
}

fn optional(
    name: &'static str,
    values: impl Strategy<Value = String>,
) -> impl Strategy<Value = Option<(String, String)>> {
    prop::option::weighted(0.8, values.prop_map(move |v| (name.to_owned(), v)))
}

/// Requests for the MCP routes: mostly `POST /mcp` with a JSON-RPC body, and
/// every part (method, path, query, headers, body) sometimes wrong.
pub fn mcp_request() -> impl Strategy<Value = Raw> {
    let method = prop_oneof![
        8 => Just("POST".to_owned()),
        1 => Just("GET".to_owned()),
        1 => Just("DELETE".to_owned()),
        1 => Just("OPTIONS".to_owned()),
        1 => "[A-Z]{1,7}",
    ];
    let path = prop_oneof![
        8 => Just("/mcp".to_owned()),
        1 => Just("/mcp/".to_owned()),
        1 => Just("/healthz".to_owned()),
        1 => Just("/.well-known/oauth-protected-resource/mcp".to_owned()),
        1 => "/[a-zA-Z0-9._~%/-]{0,20}",
    ];
    let query = prop::option::weighted(
        0.3,
        prop_oneof![
            Just("elicitation_mode=browser".to_owned()),
            Just("elicitation_mode=native".to_owned()),
            "elicitation_mode=[a-z%0-9]{0,10}",
            "[a-zA-Z0-9=&%._-]{0,24}",
        ],
    );
    let authorization = optional(
        "authorization",
        prop_oneof![
            6 => Just(format!("Bearer {TOKEN}")),
            1 => Just("Bearer exk_wrong".to_owned()),
            1 => Just("Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig".to_owned()),
            1 => header_value(),
        ],
    );
    let content_type =
        optional("content-type", prop_oneof![6 => Just("application/json".to_owned()), 1 => header_value()]);
    let accept = optional(
        "accept",
        prop_oneof![
            6 => Just("application/json, text/event-stream".to_owned()),
            1 => Just("text/event-stream".to_owned()),
            1 => header_value(),
        ],
    );
    let session = prop::option::weighted(
        0.2,
        prop_oneof![Just("00000000-0000-0000-0000-000000000000".to_owned()), header_value()]
            .prop_map(|v| ("mcp-session-id".to_owned(), v)),
    );
    let version = prop::option::weighted(
        0.4,
        prop_oneof![Just("2025-06-18".to_owned()), Just("2026-07-28".to_owned()), header_value()]
            .prop_map(|v| ("mcp-protocol-version".to_owned(), v)),
    );
    let host = prop_oneof![
        6 => Just(Some(("host".to_owned(), "127.0.0.1".to_owned()))),
        1 => Just(None),
        1 => header_value().prop_map(|v| Some(("host".to_owned(), v))),
    ];
    let headers = (authorization, content_type, accept, session, version, host)
        .prop_map(|(a, b, c, d, e, f)| [a, b, c, d, e, f].into_iter().flatten().collect::<Vec<_>>());
    (method, path, query, headers, body())
        .prop_map(|(method, path, query, headers, body)| {
            let target = match query {
                Some(query) => format!("{path}?{query}"),
                None => path,
            };
            Raw { method, target, headers, body }
        })
        .prop_filter("a request hyper passes on", |raw| parse(&raw.render()).is_ok())
}

/// Requests for the approval routes: the page (`/approvals/{id}`, link
/// token, CSRF cookie and form) and the JSON API (`/api/executions/...`),
/// about a real paused execution ([`EXECUTION`], [`LINK`]) or none.
pub fn approval_request() -> impl Strategy<Value = Raw> {
    let id = prop_oneof![4 => Just(EXECUTION.to_owned()), 1 => "[a-zA-Z0-9_%.-]{0,30}"];
    let path = (
        id,
        prop_oneof![Just("/approvals/"), Just("/api/executions/")],
        prop_oneof![Just(""), Just("/"), Just("/resume"), Just("/x")],
    )
        .prop_map(|(id, prefix, suffix)| format!("{prefix}{id}{suffix}"));
    let query = prop::option::weighted(
        0.8,
        prop_oneof![
            4 => Just(format!("token={LINK}")),
            1 => "token=[a-zA-Z0-9%_-]{0,40}",
            1 => "[a-zA-Z0-9=&%._-]{0,24}",
        ],
    );
    let method = prop_oneof![4 => Just("GET".to_owned()), 4 => Just("POST".to_owned()), 1 => "[A-Z]{1,7}"];
    let cookie = optional(
        "cookie",
        prop_oneof![
            4 => Just(format!("executor_csrf={CSRF}")),
            1 => "executor_csrf=[ -:<-~]{0,40}",
            1 => header_value(),
        ],
    );
    let authorization =
        optional("authorization", prop_oneof![4 => Just(format!("Bearer {TOKEN}")), 1 => header_value()]);
    let content_type = optional(
        "content-type",
        prop_oneof![
            Just("application/x-www-form-urlencoded".to_owned()),
            Just("application/json".to_owned()),
            header_value(),
        ],
    );
    let decision = prop_oneof![Just("accept".to_owned()), Just("decline".to_owned()), "[a-z%0-9]{0,10}"];
    let body = prop_oneof![
        3 => (prop_oneof![Just(CSRF.to_owned()), "[0-9a-f%]{0,40}"], decision.clone())
            .prop_map(|(csrf, decision)| format!("csrf={csrf}&decision={decision}").into_bytes()),
        2 => prop_oneof![Just(json!("accept")), Just(json!("decline")), Just(json!("cancel")), json_value()]
            .prop_map(|action| json!({ "action": action }).to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ];
    let host = Just(("host".to_owned(), "127.0.0.1".to_owned()));
    (method, path, query, cookie, authorization, content_type, host, body)
        .prop_map(|(method, path, query, cookie, authorization, content_type, host, body)| {
            let target = match query {
                Some(query) => format!("{path}?{query}"),
                None => path,
            };
            let headers = [cookie, authorization, content_type, Some(host)].into_iter().flatten().collect();
            Raw { method, target, headers, body }
        })
        .prop_filter("a request hyper passes on", |raw| parse(&raw.render()).is_ok())
}

/// Pause a fresh execution of the fuzzing owner (browser mode) and return its
/// id and approval-link token.
pub async fn paused(host: &Host) -> (String, String) {
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "execute",
        "arguments": {"code": "return await tools.shop.orders.create_order({ body: {} })"}}});
    let request = http::Request::post("/mcp?elicitation_mode=browser")
        .header("host", "127.0.0.1")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(Bytes::from(call.to_string()))
        .unwrap();
    let response = host.handle(request).await;
    let answer: Value = serde_json::from_slice(response.body()).unwrap();
    let url = answer["result"]["structuredContent"]["approvalUrl"].as_str().unwrap_or_else(|| panic!("{answer}"));
    let (path, token) = url.split_once("?token=").unwrap();
    (path.rsplit('/').next().unwrap().to_owned(), token.to_owned())
}
