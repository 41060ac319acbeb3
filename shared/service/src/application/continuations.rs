//! How a run is handed on where the host cannot keep it running after its
//! answer (a Lambda function freezes once it has answered): the run stops at
//! its next safe point (no call in flight, none waiting for a decision), its
//! journal is stored, and another invocation is asked to replay it and go on.
//! On AWS that is the approval function, invoked asynchronously with an event
//! of its own (never an HTTP request: no path or header reaches it), which
//! calls `Host::continue_execution`; the local host needs none of this (its
//! runs go on in a background task).

use async_trait::async_trait;
use executor_core::ExecutionId;

/// Starts the continuation of a handed-on execution in another invocation.
#[async_trait]
pub trait Continuations: Send + Sync + std::fmt::Debug {
    /// Ask for `id` to be continued. Returns once the request is accepted,
    /// not when the run ends.
    async fn start(&self, id: &ExecutionId) -> Result<(), ContinuationError>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "could not start the continuation of execution {id}: {detail}; it reads as interrupted within a minute. Check \
     that the MCP function may invoke the approval function (EXECUTOR_APPROVAL_FUNCTION)"
)]
pub struct ContinuationError {
    pub id: ExecutionId,
    pub detail: String,
}
