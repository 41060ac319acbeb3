//! What a segment and its tool calls put on the trace: which execution and
//! tool, how each ended, never a call's arguments.

use std::time::Instant;

use tracing::Span;
use tracing::field::Empty;

use super::plan::is_builtin;
use super::{Outcome, Segment};
use crate::tools::{ToolError, ToolSuccess};

/// The span a segment runs in: `execution.run` for new code, `execution.replay`
/// for a resume (which starts from a journal).
pub(crate) fn segment_span(segment: &Segment) -> Span {
    let id = segment.execution_id.as_str();
    if segment.journal.steps.is_empty() && segment.journal.pending.is_empty() {
        tracing::info_span!(
            "execution.run",
            executor.execution.id = id,
            executor.execution.outcome = Empty,
            executor.execution.error_code = Empty,
            executor.steps.called = Empty,
            executor.steps.pending = Empty,
        )
    } else {
        tracing::info_span!(
            "execution.replay",
            executor.execution.id = id,
            executor.execution.outcome = Empty,
            executor.execution.error_code = Empty,
            executor.steps.journaled = segment.journal.steps.len() as i64,
            executor.steps.replayed = Empty,
            executor.steps.called = Empty,
            executor.steps.pending = Empty,
        )
    }
}

/// How the segment ended, on its span: `completed`, `failed` (with the error code) or `paused`.
pub(crate) fn record_outcome(span: &Span, outcome: &Outcome) {
    match outcome {
        Outcome::Completed { .. } => span.record("executor.execution.outcome", "completed"),
        Outcome::Paused { .. } => span.record("executor.execution.outcome", "paused"),
        Outcome::Yielded { .. } => span.record("executor.execution.outcome", "yielded"),
        Outcome::Failed { error, .. } => {
            span.record("executor.execution.error_code", error.code());
            span.record("executor.execution.outcome", "failed")
        }
    };
}

/// A `tool.call` span: which tool, never its arguments.
pub(super) fn tool_span(path: &str, step: u32) -> Span {
    let namespace = if is_builtin(path) { "tools" } else { path.split('.').next().unwrap_or(path) };
    tracing::info_span!(
        "tool.call",
        executor.tool.path = path,
        executor.tool.namespace = namespace,
        executor.tool.step = i64::from(step),
        executor.tool.outcome = Empty,
        executor.tool.error_code = Empty,
        executor.tool.http_status = Empty,
        executor.tool.duration_ms = Empty,
    )
}

/// How a call that was made ended, on the current (`tool.call`) span.
pub(super) fn record_call(started: Instant, outcome: &Result<ToolSuccess, ToolError>) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("executor.tool.duration_ms", started.elapsed().as_micros() as f64 / 1000.0);
    match outcome {
        Ok(success) => {
            span.record("executor.tool.outcome", "ok");
            if let Some(status) = success.http_status {
                span.record("executor.tool.http_status", i64::from(status));
            }
        }
        Err(error) => {
            span.record("executor.tool.outcome", "error");
            span.record("executor.tool.error_code", error.code.as_str());
        }
    }
}
