//! Continuations on AWS: the MCP function hands a run past its response
//! budget to the approval function, invoked asynchronously (`InvocationType:
//! Event`, no retries: the store decides what runs, and a second delivery
//! would find the run claimed anyway). The event is its own kind,
//! `{"executorContinuation": {"executionId": "<id>"}}`, told apart from API
//! Gateway requests before any HTTP routing: API Gateway builds its events
//! itself, so no path, header or body a client sends can make one.

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use executor_core::ExecutionId;
use executor_service::{ContinuationError, Continuations};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::EventError;

/// The top-level key of a continuation event.
const CONTINUATION_KEY: &str = "executorContinuation";

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

/// What the asynchronous invocation carries.
pub fn continuation_event(id: &ExecutionId) -> Value {
    json!({ CONTINUATION_KEY: { "executionId": id } })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Continuation {
    execution_id: String,
}

/// The execution a continuation event names; `None` when `event` is no
/// continuation event (then it is an API Gateway request).
pub(crate) fn continuation(event: &Value) -> Option<Result<ExecutionId, EventError>> {
    let body = event.get(CONTINUATION_KEY)?;
    let named = serde_json::from_value::<Continuation>(body.clone())
        .map_err(|e| e.to_string())
        .and_then(|c| ExecutionId::parse(c.execution_id).map_err(|e| e.to_string()));
    Some(named.map_err(EventError::Continuation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_names_the_execution_and_nothing_else_is_one() {
        let id = ExecutionId::parse("abc123").unwrap();
        assert_eq!(continuation(&continuation_event(&id)).unwrap().unwrap(), id);
        assert!(continuation(&json!({"version": "2.0", "rawPath": "/api/x"})).is_none());
        for bad in [json!({CONTINUATION_KEY: {}}), json!({CONTINUATION_KEY: {"executionId": "../x"}})] {
            assert!(matches!(continuation(&bad), Some(Err(EventError::Continuation(_)))), "{bad}");
        }
    }
}
