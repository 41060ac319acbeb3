use std::time::Duration;

use executor_core::{ExecutionFailure, NonDeterministicReplay, QuotaExceeded};

use crate::source::SyntaxError;

/// Why an execution failed. `code()` is the stable `error.code` clients see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("the code is {size} bytes, over the {limit}-byte limit; send less code")]
    CodeTooLarge { size: usize, limit: usize },
    #[error("the code nests brackets more than {limit} levels deep; flatten it")]
    TooDeep { limit: usize },
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    #[error("the code used more than {limit:?} of CPU time; do less work per execution")]
    CpuLimit { limit: Duration },
    #[error(
        "the execution ran longer than its maximum run time of {} s (EXECUTOR_MAX_EXECUTION_MS; time paused for \
         approval does not count); do less per execution, or raise the limit",
        limit.as_secs_f64()
    )]
    WallClockLimit { limit: Duration },
    #[error(
        "the code used more than {limit} bytes of memory (or threw null); work on less data at a time, and throw Error objects"
    )]
    MemoryLimit { limit: usize },
    #[error("the code recursed too deeply (stack over {limit} bytes); use a loop instead of deep recursion")]
    StackLimit { limit: usize },
    #[error(
        "the tool calls the code made without waiting hold more than {limit} bytes of arguments; await calls \
         before making more, or send less in each"
    )]
    CallBytesLimit { limit: usize },
    #[error(
        "the answers of the tool calls this execution made, which it keeps to replay them, hold more than {limit} \
         bytes; make fewer calls per execution, or ask for less in each"
    )]
    KeptResultsLimit { limit: usize },
    #[error("the result is {size} bytes of JSON, over the {limit}-byte limit; return less data")]
    ResultTooLarge { size: usize, limit: usize },
    #[error("the result cannot be returned as JSON: {message}")]
    ResultNotSerializable { message: String },
    #[error("uncaught {message}")]
    Uncaught { message: String },
    #[error("{message}")]
    Declined { message: String },
    #[error("the approval was cancelled, so the execution stopped")]
    Cancelled,
    #[error(
        "the execution was cancelled while it ran; it stopped before its next tool call, and the calls made \
         before that stand"
    )]
    Stopped,
    #[error(transparent)]
    NonDeterministic(#[from] NonDeterministicReplay),
    #[error("the code awaits something that never settles (every tool call has returned); check for a missing resolve")]
    NeverSettles,
    #[error("internal sandbox error: {message}")]
    Internal { message: String },
    /// An owner's quota (tool calls per execution) stopped the run.
    #[error("{0}")]
    Quota(QuotaExceeded),
}

impl SandboxError {
    /// The code failed on its own terms (an exception, its result, a decision,
    /// a replay mismatch) and no limit cut QuickJS short mid-operation, so
    /// the engine is as clean as after a completed run and may be reused.
    pub(crate) fn leaves_engine_clean(&self) -> bool {
        matches!(
            self,
            Self::ResultTooLarge { .. }
                | Self::ResultNotSerializable { .. }
                | Self::Uncaught { .. }
                | Self::Declined { .. }
                | Self::Cancelled
                | Self::NonDeterministic(_)
                | Self::NeverSettles
                | Self::Quota(_)
        )
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::CodeTooLarge { .. } => "code_too_large",
            Self::TooDeep { .. } => "code_too_deep",
            Self::Syntax(_) => "syntax_error",
            Self::CpuLimit { .. } => "cpu_limit",
            Self::WallClockLimit { .. } => "wall_clock_limit",
            Self::MemoryLimit { .. } => "memory_limit",
            Self::CallBytesLimit { .. } => "call_bytes_limit",
            Self::KeptResultsLimit { .. } => "kept_results_limit",
            Self::StackLimit { .. } => "stack_limit",
            Self::ResultTooLarge { .. } => "result_too_large",
            Self::ResultNotSerializable { .. } => "result_not_serializable",
            Self::Uncaught { .. } => "runtime_error",
            Self::Declined { .. } => "approval_declined",
            Self::Cancelled => "approval_cancelled",
            Self::Stopped => "cancelled",
            Self::NonDeterministic(_) => "non_deterministic_replay",
            Self::NeverSettles => "never_settles",
            Self::Internal { .. } => "internal_error",
            Self::Quota(_) => "quota_exceeded",
        }
    }
}

impl From<&SandboxError> for ExecutionFailure {
    fn from(error: &SandboxError) -> Self {
        match error {
            SandboxError::Quota(exceeded) => Self::quota(exceeded),
            _ => Self { code: error.code().to_owned(), message: error.to_string(), retry_after_ms: None },
        }
    }
}
