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
    /// fresh QuickJS runtime, driven synchronously off the async scheduler, so
    /// hostile code cannot starve other requests or see another execution's state.
    pub async fn run(&self, segment: Segment, tools: Arc<dyn Tools>) -> Outcome {
        let (limits, clock) = (self.limits.clone(), self.clock.clone());
        let runtime = tokio::runtime::Handle::current();
        let drive = move || run::drive(segment, tools, &limits, &*clock, &runtime);
        // On a multi-threaded runtime the worker itself turns blocking (no thread
        // hand-off, which costs more than a small execution); elsewhere a blocking
        // thread takes the work.
        if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            return tokio::task::block_in_place(drive);
        }
        tokio::task::spawn_blocking(drive).await.unwrap_or_else(|panic| Outcome::Failed {
            error: SandboxError::Internal { message: format!("the sandbox thread failed: {panic}") },
            logs: Vec::new(),
        })
    }
}
#[doc(hidden)]
pub fn probe_drive(code: &str, tools: Arc<dyn Tools>) -> Outcome {
    let rt = tokio::runtime::Handle::current();
    run::drive(
        run::Segment::start(
            executor_core::ExecutionId::parse("x").unwrap(),
            code,
            executor_core::Timestamp::from_millis(0),
            1,
        ),
        tools,
        &Limits::default(),
        &SystemClock,
        &rt,
    )
}
#[doc(hidden)]
pub fn probe_engine(js: &str) -> std::time::Duration {
    let t = std::time::Instant::now();
    let e = engine::Engine::start(
        js,
        1,
        0.0,
        &Limits::default(),
        std::time::Instant::now() + std::time::Duration::from_secs(10),
    )
    .unwrap();
    let _d = t.elapsed();
    let t = std::time::Instant::now();
    drop(e);
    t.elapsed()
}
