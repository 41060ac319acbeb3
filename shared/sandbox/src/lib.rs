//! Code mode: model-written JavaScript or TypeScript in a QuickJS sandbox whose
//! only reach outside is `tools.<path>(args)`, with deterministic replay so an
//! execution can pause at a sensitive call and continue in any process.
//!
//! The sandbox knows neither the store nor the catalog: tools come in through
//! [`Tools`], and a pause comes out as a serialisable [`Snapshot`] that the
//! service persists.

mod call_log;
mod connections;
mod engine;
mod error;
mod let_as_var;
mod limits;
mod logs;
mod run;
mod source;
mod stop;
mod tools;
mod ui_resources;

use std::sync::Arc;

use executor_core::{Clock, SystemClock};
use run::Place;
use tokio::runtime::RuntimeFlavor;

pub use call_log::CallLog;
pub use connections::{Authorization, ConnectError, ConnectionInfo, Connections, TakenAuthorization};
pub use engine::{contexts_created, tidy};
pub use error::SandboxError;
pub use limits::{CALL_OVERHEAD_BYTES, Limits};
pub use run::{Outcome, Segment, Snapshot};
pub use source::SyntaxError;
pub use stop::Stop;
pub use tools::{
    Allowance, CallContext, CallCounts, DESCRIBE_PATH, PathFilter, Policy, PolicyCall, Readiness, SEARCH_PATH,
    SourceReadiness, ToolError, ToolOutcome, ToolSuccess, Tools,
};
pub use ui_resources::{UI_SCHEME, UiResource, UiResourceError, is_ui_uri};

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
    /// clean QuickJS context (fresh, or locked down and reset after an earlier
    /// run: no other execution's state to see; docs/sandbox.md), driven
    /// synchronously: in a task on a worker thread, there for its first
    /// moments, then off the scheduler (`run::drive`), so hostile code cannot
    /// starve other requests.
    ///
    /// The segment runs in an `execution.run` span (new code) or an
    /// `execution.replay` span (a resume), with its tool calls as children.
    pub async fn run(&self, segment: Segment, tools: Arc<dyn Tools>) -> Outcome {
        let span = run::segment_span(&segment);
        let (limits, clock, in_span) = (self.limits.clone(), self.clock.clone(), span.clone());
        let runtime = tokio::runtime::Handle::current();
        let flavor = runtime.runtime_flavor();
        let drive = move |place| {
            let drive = || in_span.in_scope(|| run::drive(segment, tools, &limits, &*clock, &runtime, place));
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(drive))
                .unwrap_or_else(|_| crashed("it panicked".into()))
        };
        let outcome = match flavor {
            // In a task on a worker thread: there, within a budget (`run::drive`).
            RuntimeFlavor::MultiThread if tokio::task::try_id().is_some() => drive(Place::Worker),
            // A `block_on` caller's own thread may block.
            RuntimeFlavor::MultiThread => drive(Place::Blocking),
            // A single-threaded runtime must not block at all.
            _ => tokio::task::spawn_blocking(move || drive(Place::Blocking))
                .await
                .unwrap_or_else(|e| crashed(e.to_string())),
        };
        run::record_outcome(&span, &outcome);
        outcome
    }
}

fn crashed(what: String) -> Outcome {
    Outcome::Failed {
        error: SandboxError::Internal { message: format!("the sandbox failed: {what}") },
        logs: Vec::new(),
    }
}

/// Pin this process's time zone to UTC. QuickJS takes local time from the
/// process's zone (`localtime_r`), so without it a pause made on a host in one
/// zone and replayed on a host in another would see other local times, make a
/// call with other arguments and fail as a non-deterministic replay.
///
/// # Safety
///
/// It sets `TZ`: call it first in `main`, before any other thread starts.
pub unsafe fn pin_time_zone() {
    // SAFETY: the caller guarantees no other thread reads or writes the environment meanwhile.
    unsafe { std::env::set_var("TZ", "UTC0") };
    // The C library reads `TZ` once, at its first local-time call: read it again now.
    #[cfg(unix)]
    {
        // POSIX; the `libc` crate does not declare it.
        unsafe extern "C" {
            fn tzset();
        }
        // SAFETY: tzset only loads the zone named by `TZ` into the C library's own state.
        unsafe { tzset() };
    }
}

/// The tokio runtime a host runs on: multi-threaded, and every worker
/// [`tidy`]s the sandbox when it is about to wait for work, so freeing an
/// execution's context and preparing the next one happen between requests,
/// not on their path.
pub fn tokio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio_runtime_builder().build()
}

/// What [`tokio_runtime`] builds, for a host that sizes or names its runtimes itself.
pub fn tokio_runtime_builder() -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all().on_thread_park(tidy);
    builder
}
