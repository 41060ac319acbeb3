//! The approval Lambda bootstrap: the browser page `/approvals/...`, the
//! JSON API `/api/...`, and the continuations the MCP function hands on.

fn main() -> Result<(), executor_lambda_shell::Error> {
    executor_lambda_shell::main(executor_lambda_shell::Routes::Approvals)
}
