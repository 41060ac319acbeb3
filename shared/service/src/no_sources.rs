//! The tools of a host with no sources configured.

/// The tools of a server with no sources configured: search finds nothing and
/// every call says how to connect a source.
pub struct NoSources;

#[async_trait::async_trait]
impl executor_sandbox::Tools for NoSources {
    fn policy(&self, _path: &str, _args: &serde_json::Value) -> executor_sandbox::Policy {
        executor_sandbox::Policy::Run
    }

    async fn call(
        &self,
        path: &str,
        _args: serde_json::Value,
        _ctx: &executor_sandbox::CallContext,
    ) -> executor_sandbox::ToolOutcome {
        Err(executor_sandbox::ToolError {
            code: "unknown_tool".into(),
            message: format!("no source provides tools.{path}: none are connected"),
        })
    }

    async fn search(&self, _request: serde_json::Value) -> executor_sandbox::ToolOutcome {
        Ok(serde_json::json!({ "items": [], "total": 0 }))
    }

    async fn describe(&self, request: serde_json::Value) -> executor_sandbox::ToolOutcome {
        let path = request["path"].as_str().unwrap_or_default();
        Err(executor_sandbox::ToolError {
            code: "unknown_tool".into(),
            message: format!("no tool {path:?}: no sources are connected"),
        })
    }
}
