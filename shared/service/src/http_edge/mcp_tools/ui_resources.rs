//! MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865): the upstream MCP
//! servers' `ui://` resources passed on to this server's clients.
//!
//! `resources/list`, `resources/read` and `resources/templates/list` are
//! answered here, before rmcp, from the tools this endpoint serves
//! ([`Tools::ui_resources`], [`Tools::read_ui_resource`]: the catalog, or a
//! toolkit's view of it, which hides the resources of tools outside the
//! toolkit), as the caller: a per-owner (OAuth-protected) server is read with
//! the caller's own token. Raw JSON rather than rmcp's resource types, so what
//! an upstream says of a resource (`_meta.ui` with its CSP and permissions,
//! fields of later versions) reaches the client unchanged. Only `ui://`
//! resources pass; any other URI is not found.
//!
//! All of it only when the endpoint has a UI resource
//! ([`Tools::known_ui_resources`]: the tools that link one, the lists read
//! already): `initialize` and `server/discover` then declare the extension
//! (and `resources`), and the `resources/*` messages are answered here.
//! Otherwise the endpoint is what it was without MCP Apps: nothing declared,
//! and rmcp answers `resources/*` ("method not found").

use executor_sandbox::{Tools, UiResourceError};
use http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};
use tracing::Instrument;

use super::{Caller, INVALID_PARAMS, McpServer, Refusal, json_rpc_answer, protocol_version};
use crate::application::sessions::STATELESS_VERSION;

/// The extension's identifier, in capabilities.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/ui";

/// JSON-RPC error codes: invalid params (also "resource not found", SEP-2164),
/// an internal error, and 2026-07-28's header mismatch.
const INTERNAL_ERROR: i64 = -32603;
const HEADER_MISMATCH: i64 = -32020;

/// Whether `message` is answered here: a `resources/*` message, on an
/// endpoint with UI resources.
pub(crate) fn answers(message: &Value, tools: &dyn Tools) -> bool {
    is_resource_request(message) && !tools.known_ui_resources().is_empty()
}

/// The `resources/*` messages MCP Apps needs.
fn is_resource_request(message: &Value) -> bool {
    matches!(
        message.get("method").and_then(Value::as_str),
        Some("resources/list" | "resources/read" | "resources/templates/list")
    )
}

/// In rmcp's answer to `initialize` or `server/discover`: the extension and
/// `resources`, when `tools` has UI resources.
pub(crate) fn declare(method: &str, body: &mut Value, tools: &dyn Tools) {
    if !matches!(method, "initialize" | "server/discover") || tools.known_ui_resources().is_empty() {
        return;
    }
    let Some(capabilities) = body.pointer_mut("/result/capabilities").and_then(Value::as_object_mut) else { return };
    capabilities.entry("resources").or_insert_with(|| json!({}));
    let extensions = capabilities.entry("extensions").or_insert_with(|| json!({}));
    if let Some(extensions) = extensions.as_object_mut() {
        extensions.insert(EXTENSION.into(), json!({}));
    }
}

/// A read's failure as a JSON-RPC error: what the caller cannot read is
/// invalid params with the URI (SEP-2164's "resource not found"); what went
/// wrong upstream is an internal error. Each message says what to do.
fn refusal(error: &UiResourceError) -> Refusal {
    let (code, data) = match error {
        UiResourceError::NotFound { uri } | UiResourceError::Ambiguous { uri, .. } => {
            (INVALID_PARAMS, json!({ "uri": uri }))
        }
        UiResourceError::NeedsConnection { uri, namespace } => {
            (INVALID_PARAMS, json!({ "uri": uri, "namespace": namespace }))
        }
        UiResourceError::TooLarge { uri, .. } | UiResourceError::Upstream { uri, .. } => {
            (INTERNAL_ERROR, json!({ "uri": uri }))
        }
    };
    Refusal { status: StatusCode::OK, code, message: error.to_string(), data: Some(data) }
}

/// A 2026-07-28 request names its method (`Mcp-Method`) and a read its URI
/// (`Mcp-Name`, maybe `=?base64?…?=`) in headers, as rmcp checks for the
/// requests it answers: they must match the body (SEP-2243).
fn check_headers(headers: &HeaderMap, method: &str, uri: Option<&str>) -> Result<(), Refusal> {
    if protocol_version(headers) < STATELESS_VERSION {
        return Ok(());
    }
    let mismatch =
        |message: String| Refusal { status: StatusCode::BAD_REQUEST, code: HEADER_MISMATCH, message, data: None };
    let header = |name: &str| headers.get(name).map(|v| v.to_str().ok().and_then(super::tasks_extension::decoded));
    match header("mcp-method") {
        Some(Some(given)) if given == method => {}
        _ => return Err(mismatch(format!("the Mcp-Method header must be `{method}`, the body's method"))),
    }
    match (uri, header("mcp-name")) {
        (None, _) => Ok(()),
        (Some(uri), Some(Some(given))) if given == uri => Ok(()),
        (Some(uri), _) => Err(mismatch(format!("the Mcp-Name header must be params.uri `{uri}`"))),
    }
}

impl McpServer {
    /// The JSON-RPC answer to a message [`answers`] accepted.
    pub(crate) async fn answer_resources(
        &self,
        caller: &Caller,
        headers: &HeaderMap,
        message: &Value,
    ) -> Response<bytes::Bytes> {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let answered = self.resources(caller, headers, message).instrument(caller.span.clone()).await;
        let answered = answered.map(|mut result| {
            // 2026-07-28 results say they are complete (SEP-2322); older ones carry no such field.
            if let Some(result) = result.as_object_mut() {
                match protocol_version(headers) >= STATELESS_VERSION {
                    true => result.insert("resultType".into(), "complete".into()),
                    false => result.remove("resultType"),
                };
            }
            result
        });
        json_rpc_answer(id, answered)
    }

    async fn resources(&self, caller: &Caller, headers: &HeaderMap, message: &Value) -> Result<Value, Refusal> {
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        if !(params.is_null() || params.is_object()) {
            return Err(Refusal::invalid("`params` must be an object"));
        }
        let uri = match method {
            "resources/read" => match params.get("uri") {
                Some(Value::String(uri)) => Some(uri.as_str()),
                _ => {
                    return Err(Refusal::invalid(
                        "`uri` is required: a ui:// URI from resources/list or from a tool's _meta.ui.resourceUri \
                         (tools.describe.tool shows it as @ui)",
                    ));
                }
            },
            _ => None,
        };
        check_headers(headers, method, uri)?;
        if params.get("cursor").is_some_and(|cursor| !cursor.is_null()) {
            return Err(Refusal::invalid("this server lists everything on one page and gives no cursor; send none"));
        }
        match (method, uri) {
            ("resources/read", Some(uri)) => {
                let read = self.tools.read_ui_resource(&caller.owner, uri).await;
                read.map_err(|error| refusal(&error))
            }
            ("resources/templates/list", _) => Ok(json!({ "resourceTemplates": [] })),
            _ => {
                let found = self.tools.ui_resources(&caller.owner).await;
                // Those only a tool links are read by their URI, not listed (servers may leave them out too).
                let listed: Vec<Value> = found.into_iter().filter_map(|resource| resource.listed).collect();
                Ok(json!({ "resources": listed }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (http::HeaderName::from_static(k), http::HeaderValue::from_static(v))).collect()
    }

    #[test]
    fn resource_messages_are_answered_here() {
        for (method, here) in [
            ("resources/list", true),
            ("resources/read", true),
            ("resources/templates/list", true),
            ("resources/subscribe", false),
            ("tools/list", false),
        ] {
            assert_eq!(is_resource_request(&json!({"method": method})), here, "{method}");
        }
    }

    #[test]
    fn read_failures_say_which_uri_and_what_to_do() {
        let uri = "ui://w/view.html".to_owned();
        let cases = [
            (UiResourceError::NotFound { uri: uri.clone() }, INVALID_PARAMS, json!({"uri": uri})),
            (
                UiResourceError::Ambiguous { uri: uri.clone(), namespaces: "a, b".into() },
                INVALID_PARAMS,
                json!({"uri": uri}),
            ),
            (
                UiResourceError::NeedsConnection { uri: uri.clone(), namespace: "w".into() },
                INVALID_PARAMS,
                json!({"uri": uri, "namespace": "w"}),
            ),
            (UiResourceError::TooLarge { uri: uri.clone(), bytes: 9, limit: 8 }, INTERNAL_ERROR, json!({"uri": uri})),
            (
                UiResourceError::Upstream { uri: uri.clone(), namespace: "w".into(), message: "HTTP 500".into() },
                INTERNAL_ERROR,
                json!({"uri": uri}),
            ),
        ];
        for (error, code, data) in cases {
            let refused = refusal(&error);
            assert_eq!((refused.code, refused.data.as_ref()), (code, Some(&data)), "{error}");
            assert!(refused.message.contains(&uri), "{}", refused.message);
        }
    }

    #[test]
    fn new_clients_name_the_method_and_uri_in_headers() {
        let read =
            |pairs: &[(&'static str, &'static str)]| check_headers(&headers(pairs), "resources/read", Some("ui://w"));
        let new = ("mcp-protocol-version", "2026-07-28");
        assert_eq!(read(&[("mcp-protocol-version", "2025-11-25")]), Ok(()), "older clients send none");
        assert_eq!(read(&[new, ("mcp-method", "resources/read"), ("mcp-name", "ui://w")]), Ok(()));
        assert_eq!(read(&[new, ("mcp-method", "resources/read"), ("mcp-name", "=?base64?dWk6Ly93?=")]), Ok(()));
        for wrong in [
            vec![new],
            vec![new, ("mcp-method", "resources/read")],
            vec![new, ("mcp-method", "resources/list"), ("mcp-name", "ui://w")],
            vec![new, ("mcp-method", "resources/read"), ("mcp-name", "ui://other")],
        ] {
            let refused = read(&wrong).unwrap_err();
            assert_eq!((refused.status, refused.code), (StatusCode::BAD_REQUEST, HEADER_MISMATCH), "{wrong:?}");
        }
        let list = check_headers(&headers(&[new, ("mcp-method", "resources/list")]), "resources/list", None);
        assert_eq!(list, Ok(()), "a list names no resource");
    }

    #[test]
    fn the_extension_is_declared_only_with_ui_resources() {
        use std::sync::Arc;

        use executor_sandbox::UiResource;

        struct WithUi(bool);
        #[async_trait::async_trait]
        impl Tools for WithUi {
            fn validate(&self, _: &str, _: &Value) -> Result<(), String> {
                Ok(())
            }
            fn policy(&self, _: &executor_sandbox::PolicyCall<'_>) -> executor_sandbox::Policy {
                executor_sandbox::Policy::run_by_default()
            }
            fn effect(&self, _: &str) -> Option<executor_core::Effect> {
                None
            }
            async fn call(
                &self,
                _: &str,
                _: Value,
                _: &executor_sandbox::CallContext,
            ) -> executor_sandbox::ToolOutcome {
                Ok(Value::Null)
            }
            async fn search(&self, _: Value) -> executor_sandbox::ToolOutcome {
                Ok(Value::Null)
            }
            async fn describe(&self, _: Value) -> executor_sandbox::ToolOutcome {
                Ok(Value::Null)
            }
            fn known_ui_resources(&self) -> Vec<UiResource> {
                let resource = UiResource { uri: "ui://w".into(), namespace: "w".into(), tools: vec![], listed: None };
                self.0.then_some(resource).into_iter().collect()
            }
        }
        let answer = || json!({"result": {"capabilities": {"tools": {}}}});
        for (method, ui, declared) in [
            ("initialize", true, true),
            ("server/discover", true, true),
            ("tools/list", true, false),
            ("initialize", false, false),
        ] {
            let mut body = answer();
            declare(method, &mut body, &*Arc::new(WithUi(ui)));
            let capabilities = &body["result"]["capabilities"];
            assert_eq!(capabilities["extensions"].get(EXTENSION).is_some(), declared, "{method} {ui}");
            assert_eq!(capabilities.get("resources").is_some(), declared, "{method} {ui}");
        }
    }
}
