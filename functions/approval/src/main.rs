//! The approval Lambda bootstrap: the browser page `/approvals/...` and the
//! JSON API `/api/...`.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    executor_http_shell::run(executor_http_shell::Routes::Approvals).await
}
