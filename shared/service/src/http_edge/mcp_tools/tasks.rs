//! MCP Tasks (protocol 2025-11-25) for the clients that ask for them.
//!
//! rmcp speaks a later tasks extension, so these messages are answered here,
//! before rmcp. A `tools/call` of `execute` with `params.task` starts the
//! execution and answers at once with a task. The task is the execution: its
//! id is the executionId (random, so unguessable), and `tasks/get`,
//! `tasks/result` and `tasks/cancel` read or change the stored execution,
//! checked against the caller like `resume` (another owner's task is not
//! found). A pause is `input_required`; `tasks/result` then answers what
//! `resume` would, so the approval works as in the connection's mode.

use executor_core::{Execution, ExecutionId, ExecutionState};
use rmcp::model::{CallToolResponse, JsonObject};
use serde_json::{Value, json};
use tracing::Instrument;

use super::{Caller, McpServer};
use crate::application::executions::ResumeError;
use crate::http_edge::results;

/// What the initialize result declares: tasks for `tools/call`, and `tasks/cancel`.
fn capability() -> Value {
    json!({ "cancel": {}, "requests": { "tools": { "call": {} } } })
}

/// The `_meta` key tying a result to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The messages answered here: the `tasks/*` methods, and a `tools/call`
/// that asks for a task.
pub(crate) fn is_task_message(message: &Value) -> bool {
    match message.get("method").and_then(Value::as_str) {
        Some("tasks/get" | "tasks/result" | "tasks/cancel") => true,
        Some("tools/call") => message["params"].get("task").is_some_and(Value::is_object),
        _ => false,
    }
}

/// Declare task support in rmcp's answer to `method`: the capability in the
/// initialize result, `execution.taskSupport` on `execute` in the tool list,
/// and the 2026-07-28 extension in the `server/discover` result.
pub(crate) fn declare(method: &str, body: &mut Value) {
    let Some(result) = body.get_mut("result").and_then(Value::as_object_mut) else { return };
    match method {
        "initialize" => {
            if let Some(capabilities) = result.get_mut("capabilities").and_then(Value::as_object_mut) {
                capabilities.insert("tasks".into(), capability());
            }
        }
        "server/discover" => {
            if let Some(capabilities) = result.get_mut("capabilities").and_then(Value::as_object_mut) {
                let extensions = capabilities.entry("extensions").or_insert_with(|| json!({}));
                if let Some(extensions) = extensions.as_object_mut() {
                    extensions.insert(super::tasks_extension::EXTENSION.into(), json!({}));
                }
            }
        }
        "tools/list" => {
            let tools = result.get_mut("tools").and_then(Value::as_array_mut).into_iter().flatten();
            for tool in tools.filter(|tool| tool["name"] == "execute") {
                tool["execution"] = json!({ "taskSupport": "optional" });
            }
        }
        _ => {}
    }
}

/// A JSON-RPC error answer.
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn invalid(message: impl Into<String>) -> Self {
        Self { code: -32602, message: message.into() }
    }
}

impl From<ResumeError> for RpcError {
    fn from(error: ResumeError) -> Self {
        match error {
            ResumeError::NotFound(id) => {
                Self::invalid(format!("no task {id} exists for you; use the taskId that tools/call returned"))
            }
            ResumeError::AlreadySettled(id) => Self::invalid(format!("task {id} has already ended; nothing to cancel")),
            other => Self { code: -32603, message: other.to_string() },
        }
    }
}

impl McpServer {
    /// The JSON-RPC answer to a message [`is_task_message`] accepted.
    pub(crate) async fn answer_task_message(&self, caller: &Caller, message: &Value) -> Value {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let params = message.get("params").and_then(Value::as_object).cloned().unwrap_or_default();
        let span = caller.span.clone();
        let answered = match message.get("method").and_then(Value::as_str) {
            Some("tools/call") => self.start_task(caller, &params).instrument(span).await,
            Some("tasks/get") => self.get_task(caller, &params).instrument(span).await,
            Some("tasks/result") => self.task_result(caller, &params).instrument(span).await,
            Some("tasks/cancel") => self.cancel_task(caller, &params).instrument(span).await,
            _ => Err(RpcError { code: -32601, message: "Method not found".into() }),
        };
        match answered {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(RpcError { code, message }) => {
                json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
            }
        }
    }

    async fn start_task(&self, caller: &Caller, params: &JsonObject) -> Result<Value, RpcError> {
        if params.get("name").and_then(Value::as_str) != Some("execute") {
            return Err(RpcError::invalid("only execute runs as a task; call resume without params.task"));
        }
        let code = params.get("arguments").and_then(|args| args.get("code")).and_then(Value::as_str);
        let Some(code) = code else {
            return Err(RpcError::invalid("`code` (a string of JavaScript or TypeScript) is required"));
        };
        let (owner, session) = (&caller.owner, caller.session.as_ref());
        let code = code.to_owned();
        let started = self.executions.execute_as_task(caller.asker(), session, caller.mode, code, self.tools.clone());
        let id = match started.await {
            Ok(Ok(result)) => result.execution_id().clone(),
            Ok(Err(refused)) => return Err(RpcError { code: -32000, message: refused.error.message }),
            Err(error) => return Err(RpcError { code: -32603, message: error.to_string() }),
        };
        crate::http_edge::spans::record("executor.execution.id", id.as_str());
        let execution = self.executions.task(owner, &id, self.tools.clone()).await?;
        Ok(json!({ "task": task(&execution) }))
    }

    async fn get_task(&self, caller: &Caller, params: &JsonObject) -> Result<Value, RpcError> {
        let id = task_id(params)?;
        Ok(task(&self.executions.task(&caller.owner, &id, self.tools.clone()).await?))
    }

    /// What `resume` without an action answers: the outcome (waiting up to
    /// the response budget for a running one), or the pause and what to do.
    async fn task_result(&self, caller: &Caller, params: &JsonObject) -> Result<Value, RpcError> {
        let id = task_id(params)?;
        let resumed = self.executions.resume(&caller.owner, &id, None, None, self.tools.clone()).await;
        if let Err(ResumeError::NotFound(id)) = &resumed {
            return Err(ResumeError::NotFound(id.clone()).into());
        }
        let internal = |message: String| RpcError { code: -32603, message };
        let mut result = match self.render_resumed(caller, resumed) {
            CallToolResponse::Complete(result) => serde_json::to_value(result),
            // Native mode: the client's own elicitation.
            CallToolResponse::InputRequired(asked) => serde_json::to_value(asked),
            _ => return Err(internal("the tool answered with a kind of result a task cannot carry".into())),
        }
        .map_err(|e| internal(e.to_string()))?;
        if let Some(result) = result.as_object_mut() {
            result.insert("_meta".into(), json!({ RELATED_TASK: { "taskId": id } }));
        }
        Ok(result)
    }

    async fn cancel_task(&self, caller: &Caller, params: &JsonObject) -> Result<Value, RpcError> {
        let id = task_id(params)?;
        Ok(task(&self.executions.cancel_task(&caller.owner, &id, self.tools.clone()).await?))
    }
}

fn task_id(params: &JsonObject) -> Result<ExecutionId, RpcError> {
    let id = params.get("taskId").and_then(Value::as_str).ok_or_else(|| RpcError::invalid("`taskId` is required"))?;
    ExecutionId::parse(id).map_err(|e| RpcError::invalid(format!("`taskId` is not valid: {e}")))
}

/// The execution as a task.
fn task(execution: &Execution) -> Value {
    let (status, message) = status(execution.state(), execution.cancel_requested());
    let mut task = json!({
        "taskId": execution.id,
        "status": status,
        "createdAt": execution.created_at.to_rfc3339(),
        "lastUpdatedAt": execution.updated_at.to_rfc3339(),
        // Readable until the stored execution expires.
        "ttl": execution.expires_at().since(execution.created_at).as_millis() as u64,
        "pollInterval": results::POLL_AFTER_MS,
    });
    if let Some(message) = message {
        task["statusMessage"] = message.into();
    }
    task
}

/// The failure codes of a cancelled execution: stopped while running, or
/// cancelled at a pause.
pub(super) const CANCELLED: [&str; 2] = ["cancelled", "approval_cancelled"];

/// A task's status and message for an execution's state.
fn status(state: &ExecutionState, cancel_requested: bool) -> (&'static str, Option<String>) {
    match state {
        ExecutionState::Running | ExecutionState::Resuming { .. } => {
            ("working", cancel_requested.then(|| "cancellation requested: it stops before its next tool call".into()))
        }
        ExecutionState::Paused { .. } => {
            ("input_required", Some("waiting for approval: tasks/result says what to do".into()))
        }
        ExecutionState::Completed { .. } => ("completed", None),
        ExecutionState::Failed { error } | ExecutionState::Declined { error } => {
            let status = if CANCELLED.contains(&error.code.as_str()) { "cancelled" } else { "failed" };
            (status, Some(error.message.clone()))
        }
        ExecutionState::Expired => {
            ("failed", Some("nobody decided its pause within the approval window, so the call was not made".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use executor_core::{ApprovalAction, ExecutionFailure, Timestamp};

    use super::*;

    fn failure(code: &str) -> ExecutionFailure {
        ExecutionFailure { code: code.into(), message: format!("{code} happened"), retry_after_ms: None }
    }

    #[test]
    fn each_state_has_its_task_status() {
        let deadline = Timestamp::from_millis(9);
        let resuming = ExecutionState::Resuming { action: ApprovalAction::Accept };
        let cases: Vec<(ExecutionState, bool, &str, Option<&str>)> = vec![
            (ExecutionState::Running, false, "working", None),
            (ExecutionState::Running, true, "working", Some("cancellation requested")),
            (resuming, false, "working", None),
            (ExecutionState::Paused { deadline }, false, "input_required", Some("tasks/result")),
            (ExecutionState::Completed { result: json!(3) }, false, "completed", None),
            (ExecutionState::Failed { error: failure("runtime_error") }, false, "failed", Some("runtime_error")),
            (ExecutionState::Failed { error: failure("interrupted") }, false, "failed", Some("interrupted")),
            (ExecutionState::Declined { error: failure("cancelled") }, false, "cancelled", Some("cancelled")),
            (ExecutionState::Declined { error: failure("approval_cancelled") }, false, "cancelled", None),
            (ExecutionState::Declined { error: failure("approval_declined") }, false, "failed", None),
            (ExecutionState::Expired, false, "failed", Some("approval window")),
        ];
        for (state, cancel_requested, expected, message) in cases {
            let (got, text) = status(&state, cancel_requested);
            assert_eq!(got, expected, "{state:?}");
            if let Some(message) = message {
                assert!(text.as_deref().is_some_and(|t| t.contains(message)), "{state:?}: {text:?}");
            }
        }
    }

    #[test]
    fn only_task_messages_are_taken_from_rmcp() {
        let cases = [
            (json!({"method": "tasks/get", "params": {"taskId": "x"}}), true),
            (json!({"method": "tasks/result"}), true),
            (json!({"method": "tasks/cancel"}), true),
            (json!({"method": "tasks/list"}), false),
            (json!({"method": "tools/call", "params": {"name": "execute", "task": {}}}), true),
            (json!({"method": "tools/call", "params": {"name": "execute", "task": {"ttl": 60000}}}), true),
            (json!({"method": "tools/call", "params": {"name": "execute"}}), false),
            (json!({"method": "tools/call", "params": {"name": "execute", "task": null}}), false),
            (json!({"method": "tools/list"}), false),
        ];
        for (message, expected) in cases {
            assert_eq!(is_task_message(&message), expected, "{message}");
        }
    }

    #[test]
    fn support_is_declared_on_execute_and_in_the_capabilities() {
        let mut init = json!({"result": {"capabilities": {"tools": {}}}});
        declare("initialize", &mut init);
        assert_eq!(init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}));
        assert_eq!(init["result"]["capabilities"]["tasks"]["cancel"], json!({}));

        let mut list = json!({"result": {"tools": [{"name": "execute"}, {"name": "resume"}]}});
        declare("tools/list", &mut list);
        assert_eq!(list["result"]["tools"][0]["execution"]["taskSupport"], "optional");
        assert!(list["result"]["tools"][1].get("execution").is_none(), "resume is not a task");

        let mut discover = json!({"result": {"capabilities": {"tools": {}}}});
        declare("server/discover", &mut discover);
        assert_eq!(discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}));
        assert!(discover["result"]["capabilities"].get("tasks").is_none(), "the extension, not 2025-11-25's tasks");

        let mut error = json!({"error": {"code": -1}});
        declare("initialize", &mut error);
        assert_eq!(error, json!({"error": {"code": -1}}));
    }
}
