//! The MCP Lambda bootstrap: `/mcp`, `/.well-known/...` and `/healthz`.

fn main() -> Result<(), executor_lambda_shell::Error> {
    executor_lambda_shell::main(executor_lambda_shell::Routes::Mcp)
}
