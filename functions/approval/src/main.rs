//! The approval Lambda bootstrap: the browser page `/approvals/...` and the
//! JSON API `/api/...`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    executor_lambda_shell::run(executor_lambda_shell::Routes::Approvals).await
}
