//! Code mode: model-written JavaScript or TypeScript in a QuickJS sandbox whose
//! only reach outside is `tools.<path>(args)`, with deterministic replay so an
//! execution can pause at a sensitive call and continue in any process.
//!
//! The sandbox knows neither the store nor the catalog: tools come in through
//! [`Tools`], and a pause comes out as a serialisable [`Snapshot`] that the
//! service persists.

mod engine;
mod error;
mod limits;
mod logs;
mod run;
mod source;
mod tools;

use std::sync::Arc;

pub use error::SandboxError;
pub use limits::Limits;
pub use run::{Clock, Outcome, Segment, Snapshot, SystemClock};
pub use source::SyntaxError;
pub use tools::{CallContext, DESCRIBE_PATH, Policy, SEARCH_PATH, ToolError, ToolOutcome, Tools};

/// Runs segments of executions under one set of limits.
#[derive(Clone)]
pub struct Sandbox {
    limits: Limits,
    clock: Arc<dyn Clock>,
}

impl Sandbox {
    pub fn new(limits: Limits) -> Self {
        Self::with_clock(limits, Arc::new(SystemClock))
    }

    pub fn with_clock(limits: Limits, clock: Arc<dyn Clock>) -> Self {
        Self { limits, clock }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Run `segment` until the code completes, fails or pauses. Each run gets a
    /// fresh QuickJS runtime on a blocking thread, so hostile code cannot starve
    /// the async runtime or see another execution's state.
    pub async fn run(&self, segment: Segment, tools: Arc<dyn Tools>) -> Outcome {
        let (limits, clock) = (self.limits.clone(), self.clock.clone());
        let runtime = tokio::runtime::Handle::current();
        let joined = tokio::task::spawn_blocking(move || run::drive(segment, tools, &limits, &*clock, &runtime)).await;
        joined.unwrap_or_else(|panic| Outcome::Failed {
            error: SandboxError::Internal { message: format!("the sandbox thread failed: {panic}") },
            logs: Vec::new(),
        })
    }
}
