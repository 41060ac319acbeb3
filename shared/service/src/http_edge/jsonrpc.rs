//! JSON-RPC answers where rmcp would give another kind.
//!
//! rmcp reads a request whose `params` do not fit its method as a custom
//! request of the same name and answers it as an unknown method (or, for a
//! method it can serve without params, ignores the bad ones); the caller is
//! owed "Invalid params" (-32602) saying what is wrong. And rmcp refuses some
//! requests (content negotiation, unreadable messages) in plain text, where a
//! JSON-RPC client expects a JSON-RPC error.

use bytes::Bytes;
use http::{HeaderValue, Response, header};
use rmcp::model::{CallToolRequestParams, InitializeRequestParams, PaginatedRequestParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The JSON-RPC error answering `message` when it is a request of a method
/// this server serves whose params are not of that method's shape.
pub(crate) fn invalid_params(message: &Value) -> Option<Value> {
    let id = message.get("id")?;
    let method = message.get("method")?.as_str()?;
    let params = message.get("params").filter(|p| !p.is_null());
    let problem = match method {
        "initialize" => fits::<InitializeRequestParams>(params, true),
        "tools/list" => fits::<PaginatedRequestParams>(params, false),
        "tools/call" => fits::<CallToolRequestParams>(params, true),
        _ => Ok(()),
    }
    .err()?;
    let message = format!("Invalid params for {method}: {problem}");
    Some(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32602, "message": message } }))
}

/// An error answer that is not JSON, as a JSON-RPC error (-32600, Invalid
/// Request) with the same status and its text as the message.
pub(crate) fn error_as_json_rpc(response: Response<Bytes>) -> Response<Bytes> {
    let json =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if json || !(response.status().is_client_error() || response.status().is_server_error()) {
        return response;
    }
    let (mut parts, text) = response.into_parts();
    let message = String::from_utf8_lossy(&text);
    let body = json!({ "jsonrpc": "2.0", "error": { "code": -32600, "message": message.trim() }, "id": null });
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Bytes::from(body.to_string()))
}

fn fits<T: DeserializeOwned>(params: Option<&Value>, required: bool) -> Result<(), String> {
    match params {
        None if required => Err("`params` is required".into()),
        None => Ok(()),
        Some(params) => T::deserialize(params).map(drop).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_of_the_wrong_shape_are_named() {
        let error = |message: Value| invalid_params(&message).map(|e| (e["id"].clone(), e["error"]["message"].clone()));
        let list = |params: Value| json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": params});
        assert_eq!(
            error(list(json!({"cursor": 5}))),
            Some((json!(7), json!("Invalid params for tools/list: invalid type: integer `5`, expected a string")))
        );
        assert_eq!(error(list(json!({"cursor": "next"}))), None);
        assert_eq!(error(list(json!(null))), None);
        assert_eq!(error(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})), None);
        assert!(error(list(json!([1]))).is_some());
        let call = |params: Value| json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": params});
        assert_eq!(error(call(json!({"name": "execute", "arguments": {"code": "return 1"}}))), None);
        assert!(error(call(json!({"name": 5}))).is_some());
        assert!(error(call(json!({"name": "execute", "arguments": "return 1"}))).is_some());
        assert_eq!(
            error(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call"})),
            Some((json!(2), json!("Invalid params for tools/call: `params` is required")))
        );
        assert!(error(json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}})).is_some());
        // Notifications are never answered; other methods are rmcp's to judge.
        assert_eq!(error(json!({"jsonrpc": "2.0", "method": "tools/list", "params": {"cursor": 5}})), None);
        assert_eq!(error(json!({"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": 5})), None);
    }

    #[test]
    fn text_errors_become_json_rpc_errors_of_the_same_status() {
        let answer = |status: u16, content_type: Option<&'static str>, body: &'static str| {
            let mut response = Response::builder().status(status);
            if let Some(t) = content_type {
                response = response.header(header::CONTENT_TYPE, t);
            }
            let response = error_as_json_rpc(response.body(Bytes::from_static(body.as_bytes())).unwrap());
            let json = response.headers().get(header::CONTENT_TYPE).map(|t| t.to_str().unwrap().to_owned());
            (response.status().as_u16(), json, String::from_utf8(response.body().to_vec()).unwrap())
        };
        let (status, content_type, body) = answer(406, Some("text/plain"), "Not Acceptable: send both\n");
        assert_eq!((status, content_type.as_deref()), (406, Some("application/json")));
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Not Acceptable: send both"}, "id": null})
        );
        assert_eq!(answer(415, None, "no").0, 415);
        assert!(answer(415, None, "no").2.contains("-32600"));
        let json = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}"#;
        assert_eq!(answer(404, Some("application/json"), json).2, json);
        assert_eq!(answer(202, None, "").2, "");
    }
}
