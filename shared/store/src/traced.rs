//! A span around every call of the storage ports (`store.<operation>`) and of
//! the alarm scheduler (`scheduler.<operation>`), named by `otel.name`, with
//! the backend and how the call ended. Keys, records and error details stay out.

use std::future::Future;

use tracing::Instrument;
use tracing::field::Empty;

use crate::StoreError;

/// Run `call` in a span named `name` (e.g. `store.get_execution`) on `backend`
/// (`dynamodb`, `redb`, `eventbridge_scheduler`, `in_process`).
pub async fn traced<T>(
    name: &'static str,
    backend: &'static str,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let span = tracing::info_span!(
        "store",
        otel.name = name,
        executor.backend = backend,
        executor.store.outcome = Empty,
        otel.status_code = Empty,
    );
    let result = call.instrument(span.clone()).await;
    if !span.is_disabled() {
        span.record("executor.store.outcome", outcome(&result));
        if matches!(result, Err(StoreError::Backend { .. } | StoreError::Corrupt { .. })) {
            span.record("otel.status_code", "error");
        }
    }
    result
}

/// How a call ended; the expected refusals (absent, taken, raced) are not errors.
fn outcome<T>(result: &Result<T, StoreError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(StoreError::NotFound { .. }) => "not_found",
        Err(StoreError::AlreadyExists { .. }) => "already_exists",
        Err(StoreError::Conflict { .. }) => "conflict",
        Err(StoreError::TooLarge { .. }) => "too_large",
        Err(StoreError::Corrupt { .. }) => "corrupt",
        Err(StoreError::Backend { .. }) => "backend_error",
    }
}
