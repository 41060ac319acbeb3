//! Continuations on AWS: the MCP function hands a run past its response
//! budget to the approval function, invoked asynchronously (`InvocationType:
//! Event`, no retries: the store decides what runs, and a second delivery
//! would find the run claimed anyway). The event is an API Gateway request
//! (HTTP API, payload 2.0) for the continuation route, so the approval
//! function's one handler takes it; API Gateway itself routes nothing there.

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use executor_core::ExecutionId;
use executor_service::{CONTINUATION_PATH, ContinuationError, Continuations};
use serde_json::{Value, json};

/// The approval function, by name or ARN (`EXECUTOR_APPROVAL_FUNCTION`).
#[derive(Debug)]
pub struct LambdaContinuations {
    client: aws_sdk_lambda::Client,
    function: String,
}

impl LambdaContinuations {
    pub fn new(client: aws_sdk_lambda::Client, function: impl Into<String>) -> Self {
        Self { client, function: function.into() }
    }

    /// From `EXECUTOR_APPROVAL_FUNCTION` and the standard `AWS_*` variables;
    /// `None` when the variable is unset (runs then go on in a background
    /// task, which a Lambda function freezes once it has answered).
    pub async fn from_env() -> Result<Option<Self>, executor_aws::AwsConfigError> {
        let Some(function) = std::env::var("EXECUTOR_APPROVAL_FUNCTION").ok().filter(|f| !f.trim().is_empty()) else {
            return Ok(None);
        };
        let config = executor_aws::sdk_config().await?;
        Ok(Some(Self::new(aws_sdk_lambda::Client::new(config), function)))
    }
}

#[async_trait]
impl Continuations for LambdaContinuations {
    async fn start(&self, id: &ExecutionId) -> Result<(), ContinuationError> {
        let failed = |detail: String| ContinuationError { id: id.clone(), detail };
        let payload = serde_json::to_vec(&continuation_event(id)).map_err(|e| failed(e.to_string()))?;
        self.client
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| failed(aws_sdk_lambda::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }
}

/// What the asynchronous invocation carries: `POST <CONTINUATION_PATH><id>`
/// as API Gateway would send it.
pub fn continuation_event(id: &ExecutionId) -> Value {
    let path = format!("{CONTINUATION_PATH}{id}");
    json!({
        "version": "2.0",
        "routeKey": format!("POST {path}"),
        "rawPath": path,
        "rawQueryString": "",
        "headers": { "content-type": "application/json" },
        "requestContext": {
            "accountId": "internal",
            "apiId": "internal",
            "domainName": "internal",
            "domainPrefix": "internal",
            "http": { "method": "POST", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "executor" },
            "requestId": id.as_str(),
            "routeKey": format!("POST {path}"),
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 0,
        },
        "body": "",
        "isBase64Encoded": false,
    })
}

/// The request the approval function's handler receives for `event`, as the
/// Lambda runtime builds it.
pub fn request_from_event(event: Value) -> Result<lambda_http::Request, serde_json::Error> {
    lambda_http::request::from_str(&event.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_is_a_request_for_the_continuation_route() {
        let id = ExecutionId::parse("abc123").unwrap();
        let request = request_from_event(continuation_event(&id)).unwrap();
        assert_eq!(request.method(), http::Method::POST);
        assert_eq!(request.uri().path(), "/internal/continuations/abc123");
    }
}
