//! The common `tools/call` answered without rmcp's Streamable HTTP service:
//! a client of a revision before 2026-07-28 (stateless or in a session) with
//! plain headers and no `_meta`. For such a request each of rmcp's checks
//! provably passes, and rmcp's answer is the handler's result as a JSON-RPC
//! response: the same [`McpServer::call`], serialised the same way, here.
//! rmcp would first parse the message a second time (its untagged typed
//! `JsonRpcMessage`) and run the handler behind a service loop on two tasks
//! of its own: a sixth of the request's instructions (docs/benchmarks.md).
//!
//! Anything else, and anything this module is not sure of, goes to rmcp as
//! before: the 2026-07-28 revision (per-request `_meta`, SEP-2243 headers,
//! input-required results, the tasks extension), an `Accept` with parameters,
//! an `Mcp-*` header it does not know, a key in the message it does not know.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult};
use serde::Deserialize;
use serde_json::Value;

use crate::http_edge::mcp_tools::{Caller, McpServer};
use crate::http_edge::responses::rpc_error;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// A `tools/call` whose answer is the handler's alone.
#[derive(Debug)]
pub(crate) struct DirectCall {
    id: RequestId,
    params: CallToolRequestParams,
}

impl DirectCall {
    /// The call in `message`, when rmcp would hand it to the handler as it is
    /// and answer with the handler's result: `None` sends it to rmcp.
    pub fn of(message: &Value, headers: &HeaderMap) -> Option<Self> {
        if !(accepts_json_and_event_stream(headers) && sends_json(headers) && plain_protocol_headers(headers)) {
            return None;
        }
        let message = message.as_object()?;
        let known = ["jsonrpc", "id", "method", "params"];
        if !message.keys().all(|key| known.contains(&key.as_str()))
            || message.get("jsonrpc")? != "2.0"
            || message.get("method")? != "tools/call"
        {
            return None;
        }
        let params = message.get("params")?.as_object()?;
        // No `_meta` (per-request protocol metadata, progress tokens), no `task`,
        // no `requestState`/`inputResponses`: those are rmcp's to read.
        if !params.keys().all(|key| key == "name" || key == "arguments") {
            return None;
        }
        let id = RequestId::deserialize(message.get("id")?).ok()?;
        let params = CallToolRequestParams::deserialize(message.get("params")?).ok()?;
        Some(Self { id, params })
    }

    /// The JSON-RPC answer, as rmcp gives it: 200 with the result, or with
    /// the handler's error.
    pub async fn answer(self, server: &McpServer, caller: Caller) -> Response<Bytes> {
        let Self { id, params } = self;
        let server = server.clone();
        // On a task of its own, as rmcp runs it: a client that goes away
        // does not cut a run short between two of its writes.
        let handled = tokio::spawn(async move { server.call(&caller, params).await }).await;
        let message = match handled {
            Ok(Ok(response)) => match legacy_shape(ServerResult::from(response)) {
                Ok(result) => ServerJsonRpcMessage::response(result, id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            },
            Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(id)),
            Err(failed) => {
                tracing::error!(error = %failed, "a tool call's task failed");
                return rpc_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    -32603,
                    "the tool call failed; see the server log",
                );
            }
        };
        let body = serde_json::to_vec(&message).expect("a JSON-RPC message serialises");
        let mut response = Response::new(Bytes::from(body));
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
        response
    }
}

/// A result as rmcp's handler gives it to a peer before 2026-07-28, the only
/// kind answered here: without `resultType: "complete"` and non-object
/// structured content, and never input-required.
fn legacy_shape(mut result: ServerResult) -> Result<ServerResult, ErrorData> {
    if matches!(result, ServerResult::InputRequiredResult(_)) {
        let message = "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer";
        return Err(ErrorData::invalid_request(message, None));
    }
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    Ok(result)
}

/// `Accept` lists both media types rmcp requires, as plain values. A list
/// with parameters (weights, quoted strings) is rmcp's to weigh.
fn accepts_json_and_event_stream(headers: &HeaderMap) -> bool {
    let (mut json, mut event_stream) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { return false };
        if value.contains([';', '"']) {
            return false;
        }
        for media_type in value.split(',').map(str::trim) {
            json |= media_type.eq_ignore_ascii_case(JSON);
            event_stream |= media_type.eq_ignore_ascii_case(EVENT_STREAM);
        }
    }
    json && event_stream
}

/// `Content-Type` is JSON, by rmcp's reading of it.
fn sends_json(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).is_some_and(|value| {
        let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case(JSON)
    })
}

/// No protocol version, or one known version from before the standard
/// headers (SEP-2243) and per-request metadata; and of the `Mcp-*` headers
/// only the version and the session (which was checked before).
fn plain_protocol_headers(headers: &HeaderMap) -> bool {
    let mut versions = headers.get_all("mcp-protocol-version").iter();
    let version_is_plain = match (versions.next(), versions.next()) {
        (None, _) => true,
        (Some(version), None) => version.to_str().is_ok_and(|version| {
            version < ProtocolVersion::STANDARD_HEADERS.as_str()
                && ProtocolVersion::KNOWN_VERSIONS.iter().any(|known| known.as_str() == version)
        }),
        (Some(_), Some(_)) => false,
    };
    version_is_plain
        && headers.keys().all(|name| {
            let name = name.as_str();
            !name.starts_with("mcp-") || name == "mcp-protocol-version" || name == "mcp-session-id"
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    const PLAIN: [(&str, &str); 2] =
        [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];

    fn call() -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"code": "return 1"}}})
    }

    #[test]
    fn only_requests_every_rmcp_check_passes_are_answered_directly() {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut all = PLAIN.to_vec();
            all.extend_from_slice(extra);
            headers(&all)
        };
        let edit = |change: fn(&mut Value)| {
            let mut message = call();
            change(&mut message);
            message
        };
        let cases: Vec<(&str, Value, HeaderMap, bool)> = vec![
            ("plain", call(), headers(&PLAIN), true),
            ("in a session", call(), with(&[("mcp-session-id", "s1"), ("mcp-protocol-version", "2025-06-18")]), true),
            ("2025-11-25", call(), with(&[("mcp-protocol-version", "2025-11-25")]), true),
            ("2024-11-05", call(), with(&[("mcp-protocol-version", "2024-11-05")]), true),
            ("a string id", edit(|m| m["id"] = json!("a")), headers(&PLAIN), true),
            ("no arguments", edit(|m| m["params"] = json!({"name": "resume"})), headers(&PLAIN), true),
            (
                "charset",
                call(),
                headers(&[
                    ("content-type", "application/json; charset=utf-8"),
                    ("accept", "text/event-stream, application/json"),
                ]),
                true,
            ),
            (
                "accept in two headers",
                call(),
                headers(&[
                    ("content-type", "application/json"),
                    ("accept", "application/json"),
                    ("accept", "text/event-stream"),
                ]),
                true,
            ),
            // rmcp weighs these, serves the 2026-07-28 revision, or refuses.
            ("2026-07-28", call(), with(&[("mcp-protocol-version", "2026-07-28")]), false),
            ("unknown version", call(), with(&[("mcp-protocol-version", "2030-01-01")]), false),
            (
                "two versions",
                call(),
                with(&[("mcp-protocol-version", "2025-06-18"), ("mcp-protocol-version", "2025-06-18")]),
                false,
            ),
            ("Mcp-Name", call(), with(&[("mcp-name", "execute")]), false),
            ("Mcp-Method", call(), with(&[("mcp-method", "tools/call")]), false),
            ("Mcp-Param-*", call(), with(&[("mcp-param-code", "x")]), false),
            (
                "weighted accept",
                call(),
                headers(&[PLAIN[0], ("accept", "application/json;q=0, text/event-stream")]),
                false,
            ),
            ("json only", call(), headers(&[PLAIN[0], ("accept", "application/json")]), false),
            ("no accept", call(), headers(&[PLAIN[0]]), false),
            ("wildcard", call(), headers(&[PLAIN[0], ("accept", "*/*")]), false),
            ("text body", call(), headers(&[("content-type", "text/plain"), PLAIN[1]]), false),
            ("no content type", call(), headers(&[PLAIN[1]]), false),
            ("_meta", edit(|m| m["params"]["_meta"] = json!({"progressToken": 1})), headers(&PLAIN), false),
            ("task", edit(|m| m["params"]["task"] = json!({"ttl": 1000})), headers(&PLAIN), false),
            ("request state", edit(|m| m["params"]["requestState"] = json!("s")), headers(&PLAIN), false),
            ("another key", edit(|m| m["extra"] = json!(1)), headers(&PLAIN), false),
            ("jsonrpc 1.0", edit(|m| m["jsonrpc"] = json!("1.0")), headers(&PLAIN), false),
            ("a notification", edit(|m| drop(m.as_object_mut().unwrap().remove("id"))), headers(&PLAIN), false),
            ("a null id", edit(|m| m["id"] = Value::Null), headers(&PLAIN), false),
            ("a fractional id", edit(|m| m["id"] = json!(1.5)), headers(&PLAIN), false),
            ("another method", edit(|m| m["method"] = json!("tools/list")), headers(&PLAIN), false),
            ("arguments not an object", edit(|m| m["params"]["arguments"] = json!("x")), headers(&PLAIN), false),
            ("a batch", json!([call()]), headers(&PLAIN), false),
        ];
        for (name, message, headers, direct) in cases {
            assert_eq!(DirectCall::of(&message, &headers).is_some(), direct, "{name}");
        }
        let taken = DirectCall::of(&call(), &headers(&PLAIN)).unwrap();
        assert_eq!((taken.id, taken.params.name.as_ref()), (RequestId::Number(7), "execute"));
        assert_eq!(taken.params.arguments.unwrap()["code"], "return 1");
    }
}
