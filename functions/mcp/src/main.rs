//! The MCP Lambda bootstrap: `/mcp`, `/.well-known/...` and `/healthz`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    executor_http_shell::run(executor_http_shell::Routes::Mcp).await
}
