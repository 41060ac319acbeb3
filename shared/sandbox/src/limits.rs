//! Resource limits of one execution. Every one is configurable; the defaults
//! and the `error.code` each limit ends an execution with are listed in
//! docs/sandbox.md ("Limits").

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// QuickJS heap.
    pub memory_bytes: usize,
    /// QuickJS stack.
    pub stack_bytes: usize,
    /// JavaScript running time; the clock stops while tool calls are in flight.
    pub cpu: Duration,
    /// Everything, tool calls included, per segment (time paused for approval
    /// does not count): the maximum run time, `EXECUTOR_MAX_EXECUTION_MS`. Keep
    /// it below the timeout of the Lambda function that runs continuations.
    pub wall_clock: Duration,
    /// Code as sent, fence included.
    pub code_bytes: usize,
    /// The returned value as JSON.
    pub result_bytes: usize,
    /// All console output together; the rest is cut and the cut is marked.
    pub log_bytes: usize,
    /// Bracket nesting of the code; deeper code is refused before parsing.
    pub nesting_depth: usize,
    /// The tool calls one round of the code makes (those it issues before it
    /// next waits): their arguments as JSON, and [`CALL_OVERHEAD_BYTES`] a
    /// call. The host holds them, outside the QuickJS heap and its limit.
    pub call_bytes: usize,
    /// The answers of every call the execution has made, which its journal
    /// keeps so that a resume replays them: about their JSON text, and 16
    /// bytes a value. Held by the host, outside the QuickJS heap.
    pub kept_results_bytes: usize,
}

/// What one issued call counts towards [`Limits::call_bytes`] besides its
/// arguments: its path, its place in the batch, the step's bookkeeping.
pub const CALL_OVERHEAD_BYTES: usize = 1024;

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            stack_bytes: 1 << 20,
            cpu: Duration::from_secs(10),
            wall_clock: Duration::from_secs(300),
            code_bytes: 256 << 10,
            result_bytes: 1 << 20,
            log_bytes: 64 << 10,
            nesting_depth: 256,
            call_bytes: 16 << 20,
            kept_results_bytes: 64 << 20,
        }
    }
}
