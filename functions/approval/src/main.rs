//! The approval Lambda bootstrap: the browser page `/approvals/...` and the
//! JSON API `/api/...`.

fn main() -> Result<(), lambda_http::Error> {
    executor_lambda_shell::main(executor_lambda_shell::Routes::Approvals)
}
