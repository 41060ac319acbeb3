//! The real MCP bootstrap under a local mock of the Lambda Runtime API, as
//! the tests that start it share it: its start, and the mock's hand-over
//! of an invocation.

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;

/// The bootstrap in the environment Lambda gives the deployed function and
/// nothing else (test credentials, which reach no AWS), its Runtime API at `api`.
pub fn bootstrap(api: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-function"));
    command
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "executor-mcp")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "test")
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("EXECUTOR_TABLE", "executor")
        .env("EXECUTOR_SCHEDULE_GROUP", "executor")
        .env("EXECUTOR_ALARM_TARGET_ARN", "arn:aws:lambda:eu-west-1:1:function:executor-alarm")
        .env("EXECUTOR_SCHEDULER_ROLE_ARN", "arn:aws:iam::1:role/executor-scheduler");
    command
}

/// The Runtime API's answer to `next`: `event` as the invocation `request_id`.
pub fn hand_over(stream: &mut TcpStream, request_id: &str, event: &str) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: {request_id}\r\n\
         Lambda-Runtime-Deadline-Ms: 99999999999999\r\n\
         Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:eu-west-1:1:function:executor-mcp\r\n\
         Content-Length: {}\r\n\r\n",
        event.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(event.as_bytes());
}
