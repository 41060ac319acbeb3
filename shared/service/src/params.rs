//! Requests whose `params` do not fit their method. rmcp reads such a request
//! as a custom one of the same name and answers it as an unknown method (or,
//! for a method it can serve without params, ignores the bad ones); the
//! caller is owed JSON-RPC's "Invalid params" (-32602) saying what is wrong.

use rmcp::model::{CallToolRequestParams, InitializeRequestParams, PaginatedRequestParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The JSON-RPC error answering `message` when it is a request of a method
/// this server serves whose params are not of that method's shape.
pub(crate) fn invalid(message: &Value) -> Option<Value> {
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
        let error = |message: Value| invalid(&message).map(|e| (e["id"].clone(), e["error"]["message"].clone()));
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
}
