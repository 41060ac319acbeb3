//! The replay driver: runs one segment of an execution from the start of the
//! code to its completion or its next pause. A resume is a deterministic
//! replay: the code runs again from the start, and every call the journal
//! holds gets its recorded outcome instead of being made again.
//!
//! Each time the code blocks, the calls it issued form a *batch*. The batch is
//! planned as a whole before anything is called (so a divergence from the
//! journal calls nothing), its runnable calls are made concurrently, and the
//! outcomes are delivered in step order. Delivering in step order, never in
//! completion order, is what makes a replay see exactly what the first run saw.
//!
//! [`driver::Driver`] is that loop as a state machine, one [`driver::Phase`]
//! per step; [`plan`] decides each call of a batch; [`spans`] says what
//! happened on the trace.

mod driver;
mod plan;
mod spans;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_core::{ApprovalAction, Clock, ExecutionId, Journal, Principal, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Span;

use crate::tools::Tools;
use crate::{CallLog, Limits, SandboxError, Stop};
use driver::Driver;
pub(crate) use spans::{record_outcome, segment_span};

/// Everything a paused execution needs to continue anywhere: serialisable, no handles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub code: String,
    pub journal: Journal,
}

/// One run of the code: the first, or a replay with decisions on pending calls.
#[derive(Debug, Clone)]
pub struct Segment {
    pub execution_id: ExecutionId,
    pub code: String,
    pub journal: Journal,
    /// Decisions by step: on pending calls, or made ahead of time for calls to come.
    pub decisions: BTreeMap<u32, ApprovalAction>,
    /// The owner's cap on tool calls per execution: a call past it stops the
    /// run with `quota_exceeded` before it is made.
    pub max_tool_calls: Option<u32>,
    /// Asks the run to stop at its next safe point (a cancellation).
    pub stop: Stop,
    /// Where the run reports each call it makes, for the audit trail.
    pub calls: CallLog,
    /// Whose code it is: the policy is told, and every call carries it.
    pub owner: Option<Principal>,
}

impl Segment {
    pub fn start(execution_id: ExecutionId, code: impl Into<String>, started_at: Timestamp, seed: u64) -> Self {
        let journal = Journal::new(started_at, seed);
        Self {
            execution_id,
            code: code.into(),
            journal,
            decisions: BTreeMap::new(),
            max_tool_calls: None,
            stop: Stop::default(),
            calls: CallLog::default(),
            owner: None,
        }
    }

    /// Continue a paused execution with one decision for all of its pending calls.
    pub fn resume(execution_id: ExecutionId, snapshot: Snapshot, action: ApprovalAction) -> Self {
        let decisions = snapshot.journal.pending.iter().map(|p| (p.step, action)).collect();
        Self {
            execution_id,
            code: snapshot.code,
            journal: snapshot.journal,
            decisions,
            max_tool_calls: None,
            stop: Stop::default(),
            calls: CallLog::default(),
            owner: None,
        }
    }

    /// `owner`'s code.
    pub fn owned_by(mut self, owner: Principal) -> Self {
        self.owner = Some(owner);
        self
    }

    /// At most `max` tool calls in the whole execution (replayed ones included).
    pub fn with_max_tool_calls(mut self, max: Option<u32>) -> Self {
        self.max_tool_calls = max;
        self
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Completed {
        result: Value,
        logs: Vec<String>,
    },
    Failed {
        error: SandboxError,
        logs: Vec<String>,
    },
    /// Waiting for decisions on `snapshot.journal.pending`.
    Paused {
        snapshot: Snapshot,
        logs: Vec<String>,
    },
    /// Stopped for a hand-off ([`Stop::request_hand_off`]) at a point where no
    /// call was in flight and none was pending a decision: the journal holds
    /// every call made, and a replay of it goes on from there.
    Yielded {
        snapshot: Snapshot,
        logs: Vec<String>,
    },
}

/// The tool calls of a segment, by what happened to them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Steps {
    replayed: usize,
    called: usize,
    pending: usize,
}

/// Where a segment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// On an async worker thread, which must not be held for long.
    Worker,
    /// Where blocking is fine: a blocking thread, or a `block_on` caller's own.
    Blocking,
}

/// The JavaScript time a run gets on a worker thread before it moves off.
/// Handing a run to a blocking thread costs more than most executions take
/// (docs/benchmarks.md), so a run starts on the worker it was asked on; one
/// that is still going after this much stops and starts over off the worker.
const INLINE_BUDGET: Duration = Duration::from_micros(500);

/// A run stopped at its inline budget: the segment to start over, whose
/// journal holds every call made so far (they are replayed, not made again).
struct Relocate(Box<Segment>);

/// What every run of a segment shares, a relocated one included.
struct Env<'a> {
    tools: Arc<dyn Tools>,
    limits: &'a Limits,
    clock: &'a dyn Clock,
    /// Where tool calls are awaited.
    runtime: &'a tokio::runtime::Handle,
    /// The wall-clock limit, counted from the segment's first run.
    deadline: Instant,
}

/// Run one segment to completion or the next pause. Tool calls are awaited on
/// `runtime`, the worker's other tasks handed on meanwhile. On a worker
/// (`place`), a run past [`INLINE_BUDGET`] starts over on this thread made
/// blocking (`block_in_place`): the code runs again from the start, its calls
/// so far replayed from the journal. The step counts go on the current
/// (segment) span.
pub(crate) fn drive(
    segment: Segment,
    tools: Arc<dyn Tools>,
    limits: &Limits,
    clock: &dyn Clock,
    runtime: &tokio::runtime::Handle,
    place: Place,
) -> Outcome {
    let env = Env { tools, limits, clock, runtime, deadline: Instant::now() + limits.wall_clock };
    let mut steps = Steps::default();
    let budget = (place == Place::Worker).then_some(INLINE_BUDGET);
    let outcome = match Driver::run(segment, &env, budget, &mut steps) {
        Ok(outcome) => outcome,
        Err(Relocate(segment)) => {
            let first = std::mem::take(&mut steps);
            let outcome = tokio::task::block_in_place(|| Driver::run(*segment, &env, None, &mut steps));
            // The second run replayed the first's calls: they count as called.
            steps.replayed = steps.replayed.saturating_sub(first.called);
            steps.called += first.called;
            outcome.unwrap_or_else(|_| unreachable!("only a run with a budget relocates"))
        }
    };
    let span = Span::current();
    if !span.is_disabled() {
        // `execution.run` has no replayed field: recording it there does nothing.
        span.record("executor.steps.replayed", steps.replayed as i64);
        span.record("executor.steps.called", steps.called as i64);
        span.record("executor.steps.pending", steps.pending as i64);
    }
    outcome
}
