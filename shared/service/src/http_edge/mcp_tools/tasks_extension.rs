//! The MCP tasks extension of 2026-07-28 (`io.modelcontextprotocol/tasks`,
//! SEP-2663), beside the 2025-11-25 tasks of [`super::tasks`].
//!
//! A 2026-07-28 `tools/call` of `execute` whose request declares the
//! extension (`_meta`, the client capabilities) runs as any call does; when
//! its answer would be `running` (past the response budget) and its pauses
//! are the client's own elicitations (native mode), the answer is a task
//! instead (`resultType: "task"`). The task is the execution: its id is the
//! executionId, read as its owner. `tasks/get` reports it (a pause is
//! `input_required` with the approval's elicitation keyed by the pause id),
//! `tasks/update` decides that pause as a native answer does, and
//! `tasks/cancel` stops the run at its next step.

use bytes::Bytes;
use executor_core::{ApprovalAction, ElicitationMode, Execution, ExecutionId, ExecutionState, Remember};
use http::{HeaderMap, Response, StatusCode, header};
use rmcp::model::{CallToolResponse, InputRequest};
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::{Caller, McpServer, Refusal, json_rpc_answer, protocol_version};
use crate::application::executions::{ExecutionResult, ResumeError};
use crate::application::sessions::STATELESS_VERSION;
use crate::http_edge::native::approval_form;
use crate::http_edge::responses::json_response;
use crate::http_edge::results;

/// The extension's identifier, in client and server capabilities.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a 2026-07-28 request carries its client capabilities (SEP-2575).
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// JSON-RPC error codes of 2026-07-28.
const HEADER_MISMATCH: i64 = -32020;
const MISSING_CAPABILITY: i64 = -32021;

/// The `Mcp-Name` header: for `tasks/*`, the task id (SEP-2243).
const MCP_NAME: &str = "mcp-name";

/// Whether the request's client capabilities (`_meta`) include the extension.
pub(crate) fn declares_extension(message: &Value) -> bool {
    message["params"]["_meta"][CLIENT_CAPABILITIES]["extensions"].get(EXTENSION).is_some()
}

/// A `tasks/*` request of the extension: `tasks/update` (only the extension
/// has it), or `tasks/get` and `tasks/cancel` from a 2026-07-28 client (the
/// protocol version header) or one that declares the extension. Anything
/// else named `tasks/*` is the 2025-11-25 form.
pub(crate) fn is_extension_request(message: &Value, headers: &HeaderMap) -> bool {
    match message.get("method").and_then(Value::as_str) {
        Some("tasks/update") => true,
        Some("tasks/get" | "tasks/cancel") => {
            protocol_version(headers) >= STATELESS_VERSION || declares_extension(message)
        }
        _ => false,
    }
}

/// Whether rmcp's answer to this message may become a task: a 2026-07-28
/// `tools/call` of `execute` that declares the extension (and is not the
/// 2025-11-25 form, which has `params.task`).
pub(crate) fn may_become_task(message: &Value, headers: &HeaderMap) -> bool {
    message.get("method").and_then(Value::as_str) == Some("tools/call")
        && message["params"]["name"] == "execute"
        && message["params"].get("task").is_none()
        && protocol_version(headers) >= STATELESS_VERSION
        && declares_extension(message)
}

impl From<ResumeError> for Refusal {
    fn from(error: ResumeError) -> Self {
        match error {
            ResumeError::NotFound(id) => {
                Self::invalid(format!("no task {id} exists for you; use the taskId that tools/call returned"))
            }
            other => Self::new(-32603, other.to_string()),
        }
    }
}

impl McpServer {
    /// The JSON-RPC answer to a message [`is_extension_request`] accepted.
    pub(crate) async fn answer_tasks_extension(
        &self,
        caller: &Caller,
        headers: &HeaderMap,
        message: &Value,
    ) -> Response<Bytes> {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let answered = self.tasks_extension(caller, headers, message).instrument(caller.span.clone()).await;
        json_rpc_answer(id, answered)
    }

    async fn tasks_extension(&self, caller: &Caller, headers: &HeaderMap, message: &Value) -> Result<Value, Refusal> {
        let params = message.get("params").and_then(Value::as_object).cloned().unwrap_or_default();
        let task_id = params.get("taskId").and_then(Value::as_str);
        if let Some(task_id) = task_id {
            check_name(headers, task_id)?;
        }
        if !declares_extension(message) {
            let required = json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } });
            let message = format!("this request needs the client capability {EXTENSION} in its _meta");
            return Err(Refusal { data: Some(required), ..Refusal::new(MISSING_CAPABILITY, message) });
        }
        let task_id = task_id.ok_or_else(|| Refusal::invalid("`taskId` is required"))?;
        let id = ExecutionId::parse(task_id).map_err(|e| Refusal::invalid(format!("`taskId` is not valid: {e}")))?;
        crate::http_edge::spans::record("executor.execution.id", id.as_str());
        let (owner, tools) = (&caller.owner, self.tools.clone());
        match message.get("method").and_then(Value::as_str) {
            Some("tasks/get") => self.detailed_task(caller, &id).await,
            Some("tasks/update") => {
                let responses = params.get("inputResponses").and_then(Value::as_object).ok_or_else(|| {
                    Refusal::invalid("`inputResponses` (answers keyed by the inputRequests of tasks/get) is required")
                })?;
                self.update_task(caller, &id, responses).await
            }
            Some("tasks/cancel") => match self.executions.cancel_task(owner, &id, tools).await {
                // A task that has already ended stays as it ended.
                Ok(_) | Err(ResumeError::AlreadySettled(_)) => Ok(complete()),
                Err(error) => Err(error.into()),
            },
            _ => Err(Refusal::new(-32601, "Method not found")),
        }
    }

    /// `tasks/get`: the task as it stands, with its status's payload.
    async fn detailed_task(&self, caller: &Caller, id: &ExecutionId) -> Result<Value, Refusal> {
        let (execution, outcome) = self.executions.task_outcome(&caller.owner, id, self.tools.clone()).await?;
        let mut task = task(&execution);
        task["resultType"] = "complete".into();
        match execution.state() {
            ExecutionState::Running | ExecutionState::Resuming { .. } => {
                task["status"] = "working".into();
                if execution.cancel_requested() {
                    task["statusMessage"] = "cancellation requested: it stops before its next tool call".into();
                }
            }
            ExecutionState::Paused { .. } => {
                task["status"] = "input_required".into();
                let requests = self.input_requests(&execution);
                if requests.is_empty() {
                    task["statusMessage"] =
                        "waiting for a decision this client cannot give (a connection, or another approval channel): \
                         call resume with the taskId as executionId"
                            .into();
                }
                task["inputRequests"] = requests.into();
            }
            ExecutionState::Failed { error } | ExecutionState::Declined { error }
                if super::tasks::CANCELLED.contains(&error.code.as_str()) =>
            {
                task["status"] = "cancelled".into();
                task["statusMessage"] = error.message.clone().into();
            }
            // Completed, failed or expired: what the call would have answered
            // had it waited (a tool error is a result with `isError`).
            _ => {
                task["status"] = "completed".into();
                task["result"] = tool_result(outcome, &caller.base_url)?;
            }
        }
        Ok(task)
    }

    /// The approval of a native pause as the client's elicitation, keyed by
    /// the pause id (the step of its first pending call); none for a pause
    /// the client cannot answer.
    fn input_requests(&self, execution: &Execution) -> Map<String, Value> {
        let pending = &execution.journal.pending;
        let (Some(first), Some(_)) = (pending.first(), &self.native) else { return Map::new() };
        if execution.mode != ElicitationMode::Native || first.connect.is_some() {
            return Map::new();
        }
        let request = serde_json::to_value(InputRequest::Elicitation(approval_form(pending))).ok();
        request.map(|request| Map::from_iter([(first.step.to_string(), request)])).unwrap_or_default()
    }

    /// `tasks/update`: each answer decides the pause its key names, as a
    /// native answer does; a key that names no pending pause (answered
    /// already, or never asked) changes nothing.
    async fn update_task(
        &self,
        caller: &Caller,
        id: &ExecutionId,
        responses: &Map<String, Value>,
    ) -> Result<Value, Refusal> {
        let owner = &caller.owner;
        // Another owner's task, or none, is not found even with no answers.
        self.executions.task(owner, id, self.tools.clone()).await?;
        let mut answers = Vec::new();
        for (key, response) in responses {
            let Ok(step) = key.parse::<u32>() else { continue };
            answers.push((step, answer(key, response)?));
        }
        for (step, answer) in answers {
            let by = caller.credential.clone();
            match self.executions.answer_native(owner, id, step, answer, by, self.tools.clone()).await {
                Ok(_) | Err(ResumeError::AlreadySettled(_) | ResumeError::Expired(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(complete())
    }

    /// rmcp's answer to a [`may_become_task`] call: a task instead of
    /// `running`, when the execution's pauses are the client's to answer.
    pub(crate) async fn as_task(&self, caller: &Caller, response: Response<Bytes>) -> Response<Bytes> {
        let (parts, body) = response.into_parts();
        let Some(id) = running(&body) else { return Response::from_parts(parts, body) };
        let task = match self.executions.task(&caller.owner, &id, self.tools.clone()).await {
            Ok(execution) if execution.mode == ElicitationMode::Native && self.native.is_some() => task(&execution),
            _ => return Response::from_parts(parts, body),
        };
        let Ok(mut message) = serde_json::from_slice::<Value>(&body) else { return Response::from_parts(parts, body) };
        let mut result = task;
        result["resultType"] = "task".into();
        result["status"] = "working".into();
        message["result"] = result;
        let mut answer = json_response(parts.status, &message);
        for (name, value) in &parts.headers {
            if name != header::CONTENT_LENGTH && name != header::CONTENT_TYPE {
                answer.headers_mut().insert(name, value.clone());
            }
        }
        answer
    }
}

/// The `tasks/update` and `tasks/cancel` acknowledgement.
fn complete() -> Value {
    json!({ "resultType": "complete" })
}

/// The execution id of a `running` execute result, if the body is one.
fn running(body: &[u8]) -> Option<ExecutionId> {
    let message: Value = serde_json::from_slice(body).ok()?;
    let structured = &message["result"]["structuredContent"];
    if structured["status"] != "running" {
        return None;
    }
    ExecutionId::parse(structured["executionId"].as_str()?).ok()
}

/// The fields every task shape has; `status` is set by the caller.
fn task(execution: &Execution) -> Value {
    json!({
        "taskId": execution.id,
        "status": "working",
        "createdAt": execution.created_at.to_rfc3339(),
        "lastUpdatedAt": execution.updated_at.to_rfc3339(),
        // Readable until the stored execution expires.
        "ttlMs": execution.expires_at().since(execution.created_at).as_millis() as u64,
        "pollIntervalMs": results::POLL_AFTER_MS,
    })
}

/// The `execute` tool result a settled execution stands at.
fn tool_result(outcome: Result<ExecutionResult, ResumeError>, base_url: &str) -> Result<Value, Refusal> {
    let answered = match outcome {
        Ok(result) => super::respond(results::execution(&result, base_url)),
        Err(error) => super::respond((results::resume_error(&error), true)),
    };
    let internal = |message: String| Refusal::new(-32603, message);
    match answered {
        CallToolResponse::Complete(result) => serde_json::to_value(result).map_err(|e| internal(e.to_string())),
        _ => Err(internal("the execution stands at a result a task cannot carry".into())),
    }
}

/// One answer of `inputResponses`: `{action, content?: {remember?}}`, as a
/// native answer gives it; only an accept is remembered.
fn answer(key: &str, response: &Value) -> Result<(ApprovalAction, Remember), Refusal> {
    let wrong = || {
        Refusal::invalid(format!(
            "inputResponses.{key} must be {{action: \"accept\"|\"decline\"|\"cancel\", content?: {{remember?: \
             \"once\"|\"always\"}}}}"
        ))
    };
    let action = response.get("action").and_then(Value::as_str).ok_or_else(wrong)?;
    let action = ApprovalAction::parse(action).map_err(|_| wrong())?;
    let remember = match response.get("content").and_then(|content| content.get("remember")) {
        None | Some(Value::Null) => Remember::Once,
        Some(choice) => choice.as_str().and_then(|c| Remember::parse(c).ok()).ok_or_else(wrong)?,
    };
    Ok((action, if action == ApprovalAction::Accept { remember } else { Remember::Once }))
}

/// `Mcp-Name` must name the task the body names (SEP-2243; a value may come
/// Base64-wrapped as `=?base64?…?=`).
fn check_name(headers: &HeaderMap, task_id: &str) -> Result<(), Refusal> {
    let mismatch =
        |message: String| Refusal { status: StatusCode::BAD_REQUEST, ..Refusal::new(HEADER_MISMATCH, message) };
    let Some(raw) = headers.get(MCP_NAME) else {
        return Err(mismatch("the Mcp-Name header (the taskId) is required".into()));
    };
    let raw = raw.to_str().map_err(|_| mismatch("the Mcp-Name header is not text".into()))?;
    match decoded(raw) {
        Some(name) if name == task_id => Ok(()),
        _ => Err(mismatch(format!("the Mcp-Name header does not match params.taskId `{task_id}`"))),
    }
}

/// A header value of 2026-07-28 (SEP-2243), which may be Base64-wrapped as
/// `=?base64?…?=`; `None` when the wrapping does not decode to text.
pub(super) fn decoded(raw: &str) -> Option<String> {
    match raw.strip_prefix("=?base64?").and_then(|inner| inner.strip_suffix("?=")) {
        Some(inner) => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD.decode(inner).ok();
            bytes.and_then(|bytes| String::from_utf8(bytes).ok())
        }
        None => Some(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (http::HeaderName::from_static(k), http::HeaderValue::from_static(v))).collect()
    }

    #[test]
    fn the_extension_form_is_told_by_what_the_request_carries() {
        let declared = json!({"extensions": {EXTENSION: {}}});
        let new = headers(&[("mcp-protocol-version", "2026-07-28")]);
        let old = headers(&[("mcp-protocol-version", "2025-11-25")]);
        let get = |meta: Value| json!({"method": "tasks/get", "params": {"taskId": "t", "_meta": {CLIENT_CAPABILITIES: meta}}});
        assert!(is_extension_request(&get(declared.clone()), &old), "declared in _meta");
        assert!(is_extension_request(&get(json!({})), &new), "a 2026-07-28 client, capability missing");
        assert!(!is_extension_request(&get(json!({})), &old), "the 2025-11-25 form");
        assert!(is_extension_request(&json!({"method": "tasks/update"}), &old), "only the extension has it");
        assert!(!is_extension_request(&json!({"method": "tasks/result"}), &new), "only 2025-11-25 has it");

        let call = |meta: Value, task: Option<Value>| {
            let mut call =
                json!({"method": "tools/call", "params": {"name": "execute", "_meta": {CLIENT_CAPABILITIES: meta}}});
            if let Some(task) = task {
                call["params"]["task"] = task;
            }
            call
        };
        assert!(may_become_task(&call(declared.clone(), None), &new));
        assert!(!may_become_task(&call(json!({"elicitation": {}}), None), &new), "never without the capability");
        assert!(!may_become_task(&call(declared.clone(), Some(json!({}))), &new), "the 2025-11-25 form");
        assert!(!may_become_task(&call(declared, None), &old));
    }

    #[test]
    fn answers_parse_as_native_answers_do() {
        let cases = [
            (json!({"action": "accept"}), Some((ApprovalAction::Accept, Remember::Once))),
            (
                json!({"action": "accept", "content": {"remember": "always"}}),
                Some((ApprovalAction::Accept, Remember::Always)),
            ),
            (
                json!({"action": "decline", "content": {"remember": "always"}}),
                Some((ApprovalAction::Decline, Remember::Once)),
            ),
            (json!({"action": "cancel"}), Some((ApprovalAction::Cancel, Remember::Once))),
            (json!({"action": "maybe"}), None),
            (json!({"action": "accept", "content": {"remember": "forever"}}), None),
            (json!({}), None),
        ];
        for (response, expected) in cases {
            assert_eq!(answer("3", &response).ok(), expected, "{response}");
        }
    }

    #[test]
    fn the_name_header_must_name_the_task() {
        assert!(check_name(&headers(&[("mcp-name", "abc")]), "abc").is_ok());
        assert!(check_name(&headers(&[("mcp-name", "=?base64?YWJj?=")]), "abc").is_ok());
        for wrong in [headers(&[("mcp-name", "abd")]), headers(&[])] {
            let refused = check_name(&wrong, "abc").unwrap_err();
            assert_eq!((refused.code, refused.status), (HEADER_MISMATCH, StatusCode::BAD_REQUEST));
        }
    }
}
