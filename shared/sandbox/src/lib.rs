//! Code mode: model-written JavaScript or TypeScript in a QuickJS sandbox whose
//! only reach outside is `tools.<path>(args)`, with deterministic replay so an
//! execution can pause at a sensitive call and continue in any process.
//!
//! The sandbox knows neither the store nor the catalog: tools come in through
//! [`Tools`], and a pause comes out as a serialisable [`Snapshot`] that the
//! service persists.

mod connections;
mod engine;
mod error;
mod limits;
mod logs;
mod run;
mod source;
mod stop;
mod tools;

use std::sync::Arc;

use executor_core::{Clock, SystemClock};

pub use connections::{Authorization, ConnectError, ConnectionInfo, Connections};
pub use error::SandboxError;
pub use limits::Limits;
pub use run::{Outcome, Segment, Snapshot};
pub use source::SyntaxError;
pub use stop::Stop;
pub use tools::{
    CallContext, DESCRIBE_PATH, PathFilter, Policy, SEARCH_PATH, ToolError, ToolOutcome, ToolSuccess, Tools,
};

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
    /// fresh QuickJS context, driven synchronously off the async scheduler, so
    /// hostile code cannot starve other requests or see another execution's state.
    ///
    /// The segment runs in an `execution.run` span (new code) or an
    /// `execution.replay` span (a resume), with its tool calls as children.
    pub async fn run(&self, segment: Segment, tools: Arc<dyn Tools>) -> Outcome {
        let span = run::segment_span(&segment);
        let (limits, clock, in_span) = (self.limits.clone(), self.clock.clone(), span.clone());
        let runtime = tokio::runtime::Handle::current();
        let outcome =
            off_the_scheduler(move || in_span.in_scope(|| run::drive(segment, tools, &limits, &*clock, &runtime)))
                .await;
        run::record_outcome(&span, &outcome);
        outcome
    }
}

/// On a multi-threaded runtime the worker itself turns blocking (no thread
/// hand-off, which costs more than a small execution); elsewhere a blocking
/// thread takes the work.
async fn off_the_scheduler(drive: impl FnOnce() -> Outcome + Send + 'static) -> Outcome {
    let crashed = |what: String| Outcome::Failed {
        error: SandboxError::Internal { message: format!("the sandbox failed: {what}") },
        logs: Vec::new(),
    };
    if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
        let caught = tokio::task::block_in_place(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(drive)));
        return caught.unwrap_or_else(|_| crashed("it panicked".into()));
    }
    tokio::task::spawn_blocking(drive).await.unwrap_or_else(|e| crashed(e.to_string()))
}
