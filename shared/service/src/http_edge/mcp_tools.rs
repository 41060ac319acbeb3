//! The MCP tools, declared next to their handlers: `execute` and `resume`.
//!
//! rmcp speaks the protocol; this handler sees each call with the caller the
//! HTTP layer authenticated (request extensions, or handed over by
//! `direct_call` for the calls answered without rmcp), so the owner check
//! happens before any store read.

mod tasks;
pub(crate) mod tasks_extension;
pub(crate) mod ui_resources;

use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    ApprovalAction, DecidedBy, ElicitationMode, ExecutionId, IdempotencyKey, MAX_IDEMPOTENCY_KEY_CHARS, Principal,
    SessionId,
};
use executor_sandbox::{Limits, Tools};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tracing::{Instrument, Span};

use crate::application::executions::{Asker, ExecutionResult, Executions, OnceError, ResumeError};
use crate::http_edge::native::NativeApprovals;
use crate::http_edge::results;

pub(crate) use tasks::{declare as declare_tasks, is_task_message};

/// Who is calling, put into the request's extensions by the HTTP layer.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub owner: Principal,
    /// The credential the request authenticated with: who decides a native pause.
    pub credential: DecidedBy,
    pub session: Option<SessionId>,
    /// `?elicitation_mode=` of the request, or the configured default.
    pub mode: ElicitationMode,
    /// Where approval links point.
    pub base_url: String,
    /// The request's span: rmcp runs the handler on a task of its own, which
    /// would otherwise lose it.
    pub span: Span,
}

impl Caller {
    /// Who sends code: this owner, with this credential.
    pub fn asker(&self) -> Asker<'_> {
        Asker { owner: &self.owner, credential: Some(&self.credential) }
    }
}

/// At most this many namespaces are named in `execute`'s description.
const LISTED_NAMESPACES: usize = 50;

#[derive(Clone)]
pub(crate) struct McpServer {
    executions: Arc<Executions>,
    tools: Arc<dyn Tools>,
    declared: Arc<[Tool]>,
    native: Option<Arc<NativeApprovals>>,
}

impl McpServer {
    pub fn new(
        executions: Arc<Executions>,
        tools: Arc<dyn Tools>,
        namespaces: &[String],
        native: Option<Arc<NativeApprovals>>,
    ) -> Self {
        let declared = vec![execute_tool(namespaces, executions.limits()), resume_tool()].into();
        #[cfg(feature = "conformance")]
        let declared = crate::http_edge::conformance::with_fixtures(declared);
        Self { executions, tools, declared, native }
    }

    /// The tools this endpoint serves.
    pub(crate) fn tools(&self) -> &dyn Tools {
        &*self.tools
    }

    async fn execute(&self, caller: &Caller, args: &JsonObject) -> CallToolResponse {
        let Some(code) = args.get("code").and_then(Value::as_str) else {
            return invalid("`code` (a string of JavaScript or TypeScript) is required");
        };
        let key = match args.get("idempotencyKey") {
            None | Some(Value::Null) => None,
            Some(Value::String(key)) => match IdempotencyKey::parse(key) {
                Ok(key) => Some(key),
                Err(e) => return invalid(&e.to_string()),
            },
            Some(other) => return invalid(&format!("`idempotencyKey` must be a string, not {other}")),
        };
        let (executions, session, tools) = (&self.executions, caller.session.as_ref(), self.tools.clone());
        let (asker, code) = (caller.asker(), code.to_owned());
        let result = match &key {
            None => executions.execute(asker, session, caller.mode, code, tools).await.map_err(OnceError::Store),
            Some(key) => executions.execute_once((asker, session), caller.mode, code, key, tools).await,
        };
        match result {
            Ok(result) => self.render(caller, &result),
            Err(OnceError::KeyReused) => invalid(&OnceError::KeyReused.to_string()),
            Err(OnceError::Store(error)) => respond((
                json!({"status": "error", "error": {"code": "store_error", "message": error.to_string()}}),
                true,
            )),
        }
    }

    async fn resume(&self, caller: &Caller, args: &JsonObject) -> CallToolResponse {
        let id = match args.get("executionId").and_then(Value::as_str).map(ExecutionId::parse) {
            Some(Ok(id)) => id,
            Some(Err(e)) => return invalid(&format!("`executionId` is not valid: {e}")),
            None => return invalid("`executionId` (from the paused result) is required"),
        };
        let action = match args.get("action") {
            None | Some(Value::Null) => None,
            Some(Value::String(action)) => match ApprovalAction::parse(action) {
                Ok(action) => Some(action),
                Err(message) => return invalid(&message),
            },
            Some(other) => {
                return invalid(&format!("`action` must be \"accept\", \"decline\" or \"cancel\", not {other}"));
            }
        };
        let pause = match args.get("pauseId") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.parse::<u32>().is_ok() => text.parse().ok(),
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)) => {
                n.as_u64().map(|n| n as u32)
            }
            Some(other) => return invalid(&format!("`pauseId` must be the pauseId of the paused result, not {other}")),
        };
        let result = self.executions.resume(&caller.owner, &id, action, pause, self.tools.clone()).await;
        self.render_resumed(caller, result)
    }

    /// A retried call in native mode: the client's answer decides the pause its
    /// request state names.
    async fn answer(&self, caller: &Caller, request: &CallToolRequestParams, state: &str) -> CallToolResponse {
        let Some(native) = &self.native else {
            return invalid("this server issues no request state; call execute or resume without one");
        };
        let answer = match native.answer(&caller.owner, state, request.input_responses.as_ref()) {
            Ok(answer) => answer,
            Err(error) => return invalid(&error.to_string()),
        };
        let tools = self.tools.clone();
        let (id, step) = (&answer.execution_id, answer.step);
        let result = self
            .executions
            .answer_native(&caller.owner, id, step, (answer.action, answer.remember), caller.credential.clone(), tools)
            .await;
        self.render_resumed(caller, result)
    }

    /// A `tools/call`, from rmcp's handler or answered directly (`direct_call`).
    pub(crate) async fn call(
        &self,
        caller: &Caller,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        #[cfg(feature = "conformance")]
        if let Some(result) = crate::http_edge::conformance::call(&request.name, &args) {
            return Ok(result.into());
        }
        let span = caller.span.clone();
        // Boxed: the call runs on a task of its own (rmcp's, or `direct_call`'s), and inline the
        // whole run (sandbox, store, catalog) is tens of KiB to copy per request.
        let response = match (request.name.as_ref(), request.request_state.as_deref()) {
            ("execute" | "resume", Some(state)) => {
                Box::pin(self.answer(caller, &request, state)).instrument(span).await
            }
            ("execute", None) => Box::pin(self.execute(caller, &args)).instrument(span).await,
            ("resume", None) => Box::pin(self.resume(caller, &args)).instrument(span).await,
            (other, _) => {
                return Err(ErrorData::invalid_params(format!("unknown tool {other:?}; use execute or resume"), None));
            }
        };
        Ok(response)
    }

    fn render_resumed(&self, caller: &Caller, result: Result<ExecutionResult, ResumeError>) -> CallToolResponse {
        match result {
            Ok(result) => self.render(caller, &result),
            Err(error) => respond((results::resume_error(&error), true)),
        }
    }

    /// In native mode a pause asks the client; otherwise the result says what to do.
    fn render(&self, caller: &Caller, result: &ExecutionResult) -> CallToolResponse {
        crate::http_edge::spans::record("executor.execution.id", result.execution_id().as_str());
        if let (
            ElicitationMode::Native,
            Some(native),
            ExecutionResult::Paused { execution_id, pending, mode: ElicitationMode::Native, .. },
        ) = (caller.mode, &self.native, result)
            // A connection is made in the browser, not answered in the client: its result carries the link.
            && pending[0].connect.is_none()
        {
            return CallToolResponse::InputRequired(native.ask(&caller.owner, execution_id, pending));
        }
        respond(results::execution(result, &caller.base_url))
    }
}

fn respond((structured, is_error): (Value, bool)) -> CallToolResponse {
    let mut result =
        if is_error { CallToolResult::structured_error(structured) } else { CallToolResult::structured(structured) };
    if let Some(value) = &result.structured_content {
        result.content = vec![ContentBlock::text(results::text(value))];
    }
    result.into()
}

fn invalid(message: &str) -> CallToolResponse {
    respond((json!({"status": "error", "error": {"code": "invalid_arguments", "message": message}}), true))
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("tool schemas are objects"),
    }
}

/// `1 MiB`, `64 KiB`, `1000 bytes`: as the limits are set.
fn bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// `5 min`, `10 s`, `1500 ms`.
fn duration(d: Duration) -> String {
    match d.as_millis() {
        ms if ms >= 60_000 && ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms >= 1000 && ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{ms} ms"),
    }
}

/// `limits`: the sandbox's, which the description states so code can be written to fit them.
fn execute_tool(namespaces: &[String], limits: &Limits) -> Tool {
    let connected = match namespaces.len() {
        0 => "No sources are connected yet, so `tools` is empty.".to_owned(),
        n if n <= LISTED_NAMESPACES => format!("Connected namespaces: {}.", namespaces.join(", ")),
        n => format!(
            "Connected namespaces: {} and {} more.",
            namespaces[..LISTED_NAMESPACES].join(", "),
            n - LISTED_NAMESPACES
        ),
    };
    let (result, memory) = (bytes(limits.result_bytes), bytes(limits.memory_bytes));
    let (cpu, wall_clock) = (duration(limits.cpu), duration(limits.wall_clock));
    let description = format!(
        "Run JavaScript or TypeScript in a sandbox. The code is the body of an async function: use `await` and \
         `return` a JSON value. {connected} Find tools with `await tools.search({{ query, namespace?, limit? }})` \
         (returns `{{ items: [{{ path, description, namespace, kind, approval }}], total }}`, and \
         `unavailable: [{{ namespace, reason }}]` when a source failed to load), read a tool's TypeScript types with \
         `await tools.describe.tool({{ path }})`, then call it as `await tools.<path>(args)`, which returns \
         `{{ ok: true, data }}` or `{{ ok: false, error: {{ code, message }} }}`. Every tool call must be awaited \
         (`await Promise.all([...])` for several at once): a call not awaited before the code returns is never \
         made. `console.log` output comes back in `logs`. There is no fetch, no imports and no timers; built-ins \
         are frozen (no polyfills or patching). Limits: \
         the returned JSON at most {result}, {cpu} of JavaScript CPU time (tool calls not counted), {wall_clock} \
         wall clock with tool calls (time paused for approval not counted), {memory} of memory; past one, the \
         execution fails with `result_too_large`, `cpu_limit`, `wall_clock_limit` or `memory_limit`. Calls that \
         change things may pause the execution for approval: the result then says how to continue with `resume`. \
         Code that runs long answers `{{ status: \"running\", executionId }}` and goes on: call `resume` with that \
         executionId to wait for its outcome; never run the same code again meanwhile. Send an `idempotencyKey` \
         to make a retry safe: the same key with the same code within 24 hours answers the first run's outcome \
         (or where it stands) and runs nothing."
    );
    let input = json!({
        "type": "object",
        "properties": {
            "code": { "type": "string", "description": "JavaScript or TypeScript; `return` the result." },
            "idempotencyKey": {
                "type": "string",
                "maxLength": MAX_IDEMPOTENCY_KEY_CHARS,
                "description": "Any string of yours (a UUID): a repeat with the same key runs nothing and answers the first run's outcome.",
            },
        },
        "required": ["code"],
    });
    Tool::new("execute", description, schema(input))
}

fn resume_tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "executionId": { "type": "string", "description": "From the paused `execute` or `resume` result." },
            "action": {
                "type": "string",
                "enum": ["accept", "decline", "cancel"],
                "description": "The user's decision. Without it, resume only reports where the execution stands.",
            },
            "pauseId": {
                "type": "string",
                "description": "The pauseId of the paused result the decision is for. If the execution has moved \
                                on (a retry), nothing is decided and resume reports where it stands.",
            },
            "content": { "type": "object", "description": "Optional data for the approval." },
        },
        "required": ["executionId"],
    });
    Tool::new(
        "resume",
        "Continue an execution that paused for approval, or follow one that is running. For a `running` \
         execution, call resume with its executionId and no action: it waits a while and returns the outcome (a \
         result, an error, a pause) or `running` again (then call it again); `action: \"cancel\"` stops it before \
         its next tool call. For a pause, ask the user first, then pass their decision as `action`: \
         `accept` runs the call, `decline` makes it throw in the code, `cancel` stops the execution. Without an \
         `action`, nothing is decided: resume reports where the execution stands. When the pause came with an \
         `approvalUrl` (browser mode), the user decides on that page instead: `resume` then waits for their \
         decision and returns the outcome (an action is ignored). A pause the user's own client asked about is \
         decided only by their answer there. A paused execution belongs to the user, not to the session: resume \
         works from any session of the same user, a new one included, until the pause's `expiresAt`.",
        schema(input),
    )
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("executor", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Use `execute` to run code against the connected tools; `resume` continues a paused execution.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.declared.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.declared.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| {
                ErrorData::internal_error("the request reached the tools without an authenticated caller", None)
            })?;
        self.call(&caller, request).await
    }
}

/// JSON-RPC's "invalid params".
const INVALID_PARAMS: i64 = -32602;

/// A JSON-RPC error answer to a message answered before rmcp (the tasks
/// extension, MCP Apps resources), with its HTTP status.
#[derive(Debug, PartialEq)]
struct Refusal {
    status: http::StatusCode,
    code: i64,
    message: String,
    data: Option<Value>,
}

impl Refusal {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self { status: http::StatusCode::OK, code, message: message.into(), data: None }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
}

/// The JSON-RPC answer with `id` to a message answered before rmcp.
fn json_rpc_answer(id: Value, answered: Result<Value, Refusal>) -> http::Response<bytes::Bytes> {
    use crate::http_edge::responses::json_response;
    match answered {
        Ok(result) => json_response(http::StatusCode::OK, &json!({ "jsonrpc": "2.0", "id": id, "result": result })),
        Err(Refusal { status, code, message, data }) => {
            let mut error = json!({ "code": code, "message": message });
            if let Some(data) = data {
                error["data"] = data;
            }
            json_response(status, &json!({ "jsonrpc": "2.0", "id": id, "error": error }))
        }
    }
}

/// The request's `MCP-Protocol-Version` (empty without one).
fn protocol_version(headers: &http::HeaderMap) -> &str {
    headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_as_set() {
        let sizes =
            [(1 << 20, "1 MiB"), (64 << 20, "64 MiB"), (64 << 10, "64 KiB"), (1000, "1000 bytes"), (0, "0 bytes")];
        for (n, expected) in sizes {
            assert_eq!(bytes(n), expected);
        }
        let durations = [(300_000, "5 min"), (90_000, "90 s"), (10_000, "10 s"), (1500, "1500 ms"), (0, "0 ms")];
        for (ms, expected) in durations {
            assert_eq!(duration(Duration::from_millis(ms)), expected);
        }
    }

    #[test]
    fn execute_states_the_limits_it_runs_with_and_that_calls_are_awaited() {
        let described = |limits: &Limits| execute_tool(&["gh".into()], limits).description.unwrap().into_owned();
        let default = described(&Limits::default());
        for shown in [
            "Connected namespaces: gh.",
            "the returned JSON at most 1 MiB, 10 s of JavaScript CPU time (tool calls not counted), 5 min wall clock",
            "64 MiB of memory",
            "Every tool call must be awaited",
            "a call not awaited before the code returns is never made",
            "built-ins are frozen",
            "path, description, namespace, kind, approval",
        ] {
            assert!(default.contains(shown), "{shown} in {default}");
        }
        let tight = Limits {
            result_bytes: 64 << 10,
            cpu: Duration::from_millis(2500),
            wall_clock: Duration::from_secs(30),
            memory_bytes: 16 << 20,
            ..Limits::default()
        };
        let tight = described(&tight);
        assert!(tight.contains("at most 64 KiB, 2500 ms of JavaScript CPU time"), "{tight}");
        assert!(tight.contains("30 s wall clock"), "{tight}");
        assert!(tight.contains("16 MiB of memory"), "{tight}");
    }
}
