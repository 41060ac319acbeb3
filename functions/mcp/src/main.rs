//! The MCP Lambda bootstrap: `/mcp`, `/.well-known/...` and `/healthz`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    executor_lambda_shell::run(executor_lambda_shell::Routes::Mcp).await
}
