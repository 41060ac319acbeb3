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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_core::{
    ApprovalAction, Clock, ExecutionId, Journal, JournalStep, PendingCall, QuotaExceeded, QuotaLimit, Replay,
    StepOutcome, Timestamp,
};
use futures_util::FutureExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::engine::{Delivery, Engine, IssuedCall, MainState};
use crate::source;
use crate::tools::{CallContext, DESCRIBE_PATH, Policy, SEARCH_PATH, ToolError, ToolSuccess, Tools};
use crate::{Limits, SandboxError, Stop};

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
        }
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

/// What happens to one call of a batch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// In the journal: hand back the recorded outcome.
    Replay(StepOutcome),
    /// Make the call now.
    Call,
    /// Declined: the code's promise rejects.
    Decline,
    /// The policy refuses it.
    Block(String),
    /// Needs a decision that has not been made: pause. `connect`: the source
    /// the owner must connect first.
    Await { message: String, connect: Option<String> },
    /// The decision cancelled the execution.
    Cancel,
}

fn is_builtin(path: &str) -> bool {
    path == SEARCH_PATH || path == DESCRIBE_PATH
}

fn decided(action: ApprovalAction) -> Action {
    match action {
        ApprovalAction::Accept => Action::Call,
        ApprovalAction::Decline => Action::Decline,
        ApprovalAction::Cancel => Action::Cancel,
    }
}

/// Decide every call of a batch before any is made.
pub(crate) fn plan(
    journal: &Journal,
    decisions: &BTreeMap<u32, ApprovalAction>,
    batch: &[IssuedCall],
    max_calls: Option<u32>,
    policy: impl Fn(&str, &Value) -> Policy,
) -> Result<Vec<Action>, SandboxError> {
    batch
        .iter()
        .map(|call| {
            let replay = journal.check(call.step, &call.path, &call.args_hash)?;
            // Steps count every call from 0, so a new call at step `max` is one too many.
            if let (Replay::New, Some(max)) = (&replay, max_calls)
                && call.step >= max
            {
                return Err(SandboxError::Quota(QuotaExceeded::per_execution(QuotaLimit::ToolCallsPerExecution, max)));
            }
            Ok(match replay {
                Replay::Recorded(done) => Action::Replay(done.outcome.clone()),
                Replay::Pending(pending) => match decisions.get(&call.step) {
                    // Accepting a call that waits for a connection does not make one:
                    // while the owner has none, it waits again. Once connected, the
                    // call is planned as new (a write still asks for its approval).
                    Some(ApprovalAction::Accept) if pending.connect.is_some() => match policy(&call.path, &call.args) {
                        Policy::Run => Action::Call,
                        Policy::NeedsApproval { message } => Action::Await { message, connect: None },
                        Policy::NeedsConnect { source, message } => Action::Await { message, connect: Some(source) },
                        Policy::Blocked { reason } => Action::Block(reason),
                    },
                    Some(action) => decided(*action),
                    None => Action::Await { message: pending.message.clone(), connect: pending.connect.clone() },
                },
                Replay::New if is_builtin(&call.path) => Action::Call,
                Replay::New => match policy(&call.path, &call.args) {
                    Policy::Run => Action::Call,
                    // A decision made ahead of time (by step) applies without pausing.
                    Policy::NeedsApproval { message } => match decisions.get(&call.step) {
                        Some(action) => decided(*action),
                        None => Action::Await { message, connect: None },
                    },
                    Policy::NeedsConnect { source, message } => Action::Await { message, connect: Some(source) },
                    Policy::Blocked { reason } => Action::Block(reason),
                },
            })
        })
        .collect()
}

/// What the code's promise receives for a journaled outcome.
fn delivery(path: &str, outcome: &StepOutcome) -> Delivery {
    match (is_builtin(path), outcome) {
        (_, StepOutcome::Declined { message }) => Delivery::Declined(message.clone()),
        (true, StepOutcome::Ok { data } | StepOutcome::HttpOk { data, .. }) => Delivery::Json(data.to_string()),
        (true, StepOutcome::Err { message, .. }) => Delivery::Error(message.clone()),
        // Written straight to text: tool results can be large, and cloning them
        // into an envelope first would copy them twice.
        (false, StepOutcome::Ok { data }) => Delivery::Json(format!("{{\"ok\":true,\"data\":{data}}}")),
        (false, StepOutcome::HttpOk { data, status }) => {
            Delivery::Json(format!("{{\"ok\":true,\"data\":{data},\"http\":{{\"status\":{status}}}}}"))
        }
        (false, StepOutcome::Err { code, message }) => {
            Delivery::Json(json!({ "ok": false, "error": { "code": code, "message": message } }).to_string())
        }
    }
}

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
fn tool_span(path: &str, step: u32) -> Span {
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

/// The tool calls of a segment, by what happened to them.
#[derive(Default)]
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
    let deadline = Instant::now() + limits.wall_clock;
    let mut steps = Steps::default();
    let budget = (place == Place::Worker).then_some(INLINE_BUDGET);
    let outcome = match drive_counting(segment, tools.clone(), limits, clock, runtime, deadline, budget, &mut steps) {
        Ok(outcome) => outcome,
        Err(Relocate(segment)) => {
            let first = std::mem::take(&mut steps);
            let outcome = tokio::task::block_in_place(|| {
                drive_counting(*segment, tools, limits, clock, runtime, deadline, None, &mut steps)
            });
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

/// Wait for `future` from the synchronous run, handing the worker's other
/// tasks to another thread first when on a worker.
fn wait<F: std::future::Future>(runtime: &tokio::runtime::Handle, future: F) -> F::Output {
    tokio::task::block_in_place(|| runtime.block_on(future))
}

#[allow(clippy::too_many_arguments)]
fn drive_counting(
    segment: Segment,
    tools: Arc<dyn Tools>,
    limits: &Limits,
    clock: &dyn Clock,
    runtime: &tokio::runtime::Handle,
    deadline: Instant,
    inline_budget: Option<Duration>,
    steps: &mut Steps,
) -> Result<Outcome, Relocate> {
    let Segment { execution_id, code, mut journal, decisions, max_tool_calls, stop } = segment;
    let failed = |error: SandboxError, logs: Vec<String>| Ok(Outcome::Failed { error, logs });

    let js = match source::prepare(&code, limits) {
        Ok(js) => js,
        Err(error) => return failed(error, Vec::new()),
    };
    let mut pinned = journal.started_at;
    // Whether `tools.prepare_approvals` ran in this segment.
    let prepared = std::cell::Cell::new(false);
    let mut engine =
        match Engine::new(journal.seed, pinned.as_millis() as f64, limits, deadline, stop.clone(), inline_budget) {
            Ok(engine) => engine,
            Err(error) => return failed(error, Vec::new()),
        };
    // What an error from the engine means: the run's end, or its relocation.
    macro_rules! engine_failed {
        ($error:expr) => {{
            if engine.relocating() {
                engine.into_logs(false);
                let segment = Segment { execution_id, code, journal, decisions, max_tool_calls, stop };
                return Err(Relocate(Box::new(segment)));
            }
            return failed($error, engine.into_logs(false));
        }};
    }
    if let Err(error) = engine.begin(&js) {
        engine_failed!(error);
    }

    loop {
        // Running: the code runs until it finishes or waits on tool calls.
        if let Err(error) = engine.run_jobs() {
            engine_failed!(error);
        }
        match engine.state() {
            MainState::Completed(json) if json.len() > limits.result_bytes => {
                let error = SandboxError::ResultTooLarge { size: json.len(), limit: limits.result_bytes };
                return failed(error, engine.into_logs(false));
            }
            MainState::Completed(json) => {
                let result = serde_json::from_str(&json).unwrap_or(Value::Null);
                return Ok(Outcome::Completed { result, logs: engine.into_logs(true) });
            }
            MainState::Failed(error) => engine_failed!(error),
            MainState::Pending => {}
        }

        // Blocked: plan the batch of calls the code waits on.
        let batch = engine.take_issued();
        if batch.is_empty() {
            return failed(SandboxError::NeverSettles, engine.into_logs(false));
        }
        // A safe point: no call is in flight, and none of this batch has been made.
        if stop.is_requested() {
            return failed(SandboxError::Stopped, engine.into_logs(false));
        }
        // Not while a decided call waits to be made: its decision is not in the journal.
        if stop.is_hand_off() && journal.pending.is_empty() {
            return Ok(Outcome::Yielded { snapshot: Snapshot { code, journal }, logs: engine.into_logs(true) });
        }
        let policy = |path: &str, args: &Value| match tools.policy(path, args) {
            Policy::NeedsApproval { .. } | Policy::NeedsConnect { .. } if !prepared.replace(true) => {
                wait(runtime, tools.prepare_approvals());
                tools.policy(path, args)
            }
            policy => policy,
        };
        let actions = match plan(&journal, &decisions, &batch, max_tool_calls, policy) {
            Ok(actions) => actions,
            Err(error) => return failed(error, engine.into_logs(false)),
        };
        if actions.contains(&Action::Cancel) {
            return failed(SandboxError::Cancelled, engine.into_logs(false));
        }

        // Calling: the runnable calls, concurrently; CPU time is not counted meanwhile.
        steps.replayed += actions.iter().filter(|a| matches!(a, Action::Replay(_))).count();
        let calls = batch.iter().zip(&actions).filter(|(_, a)| **a == Action::Call).map(|(call, _)| {
            steps.called += 1;
            let tools = tools.clone();
            let ctx = CallContext { execution_id: execution_id.clone(), step: call.step, owner: None };
            let call = call.clone();
            let span = tool_span(&call.path, call.step);
            async move {
                let started = Instant::now();
                let outcome = match call.path.as_str() {
                    SEARCH_PATH => tools.search(call.args).await.map(ToolSuccess::plain),
                    DESCRIBE_PATH => tools.describe(call.args).await.map(ToolSuccess::plain),
                    path => tools.call_with_status(path, call.args, &ctx).await,
                };
                let span = Span::current();
                if !span.is_disabled() {
                    span.record("executor.tool.duration_ms", started.elapsed().as_micros() as f64 / 1000.0);
                    match &outcome {
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
                (ctx.step, outcome)
            }
            .instrument(span)
        });
        let mut all = futures_util::future::join_all(calls);
        // Calls that finish at once (in-process tools) need no timer or runtime hand-off.
        let results = match (&mut all).now_or_never() {
            Some(results) => results,
            None => {
                let remaining = deadline.saturating_duration_since(Instant::now());
                match wait(runtime, tokio::time::timeout(remaining, all)) {
                    Ok(results) => results,
                    Err(_) => {
                        let error = SandboxError::WallClockLimit { limit: limits.wall_clock };
                        return failed(error, engine.into_logs(false));
                    }
                }
            }
        };
        let mut results: BTreeMap<u32, _> = results.into_iter().collect();
        let completed_at = clock.now();

        // Journaling: record what happened to each call.
        let mut paused = false;
        for (call, action) in batch.iter().zip(&actions) {
            // Calls that were not made still get a span, saying why.
            let not_made = match action {
                Action::Await { connect: None, .. } => Some("approval_required"),
                Action::Await { connect: Some(_), .. } => Some("connect_required"),
                Action::Decline => Some("declined"),
                Action::Block(_) => Some("blocked"),
                Action::Replay(_) | Action::Cancel | Action::Call => None,
            };
            if let Some(why) = not_made {
                tool_span(&call.path, call.step).record("executor.tool.outcome", why);
            }
            let outcome = match action {
                Action::Replay(_) | Action::Cancel => continue,
                Action::Await { message, connect } => {
                    let pending = match connect {
                        Some(source) => PendingCall::connect(call.step, &call.path, call.args.clone(), message, source),
                        None => PendingCall::new(call.step, &call.path, call.args.clone(), message),
                    };
                    journal.add_pending(pending);
                    paused = true;
                    steps.pending += 1;
                    continue;
                }
                Action::Call => match results.remove(&call.step) {
                    Some(Ok(ToolSuccess { data, http_status: None })) => StepOutcome::Ok { data },
                    Some(Ok(ToolSuccess { data, http_status: Some(status) })) => StepOutcome::HttpOk { data, status },
                    Some(Err(ToolError { code, message })) => StepOutcome::Err { code, message },
                    None => unreachable!("every planned call has a result"),
                },
                Action::Decline => {
                    StepOutcome::Declined { message: format!("the call to tools.{} was declined", call.path) }
                }
                Action::Block(reason) => StepOutcome::Err { code: "blocked".into(), message: reason.clone() },
            };
            journal.record(JournalStep {
                step: call.step,
                path: call.path.clone(),
                args_hash: call.args_hash.clone(),
                outcome,
                completed_at,
            });
        }
        if paused {
            // Paused: calls already made are journaled; nothing is delivered, so
            // the replay re-forms this same batch.
            return Ok(Outcome::Paused { snapshot: Snapshot { code, journal }, logs: engine.into_logs(true) });
        }

        // Delivering: outcomes in step order, with the clock pinned to the batch.
        for call in &batch {
            let Some(done) = journal.completed(call.step) else { unreachable!("every call of the batch is journaled") };
            pinned = pinned.max(done.completed_at);
            let delivery = delivery(&call.path, &done.outcome);
            engine.set_pinned_now(pinned.as_millis() as f64);
            if let Err(error) = engine.deliver(call.step, delivery) {
                engine_failed!(error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use executor_core::ArgsHash;

    use super::*;

    fn call(step: u32, path: &str, args: Value) -> IssuedCall {
        IssuedCall::new(step, path, args)
    }

    #[test]
    fn planning_a_batch() {
        let mut journal = Journal::new(Timestamp::from_millis(0), 1);
        journal.record(JournalStep {
            step: 0,
            path: "gh.list".into(),
            args_hash: ArgsHash::of(&json!({})),
            outcome: StepOutcome::Ok { data: json!([1]) },
            completed_at: Timestamp::from_millis(5),
        });
        for step in [1, 2, 3] {
            journal.add_pending(PendingCall::new(step, "gh.create", json!({"n": step}), "create?"));
        }
        let decisions = BTreeMap::from([(1, ApprovalAction::Accept), (2, ApprovalAction::Decline)]);
        let policy = |path: &str, _: &Value| match path {
            "gh.create" => Policy::NeedsApproval { message: "create?".into() },
            "gh.delete" => Policy::Blocked { reason: "deletes are off".into() },
            _ => Policy::Run,
        };
        let batch = [
            call(0, "gh.list", json!({})),
            call(1, "gh.create", json!({"n": 1})),
            call(2, "gh.create", json!({"n": 2})),
            call(3, "gh.create", json!({"n": 3})),
            call(4, "gh.create", json!({"n": 4})),
            call(5, "gh.delete", json!({})),
            call(6, "gh.get", json!({})),
            call(7, "search", json!({"query": "x"})),
        ];
        let actions = plan(&journal, &decisions, &batch, None, policy).unwrap();
        assert_eq!(
            actions,
            [
                Action::Replay(StepOutcome::Ok { data: json!([1]) }),
                Action::Call,
                Action::Decline,
                Action::Await { message: "create?".into(), connect: None },
                Action::Await { message: "create?".into(), connect: None },
                Action::Block("deletes are off".into()),
                Action::Call,
                Action::Call,
            ]
        );

        let diverged = plan(&journal, &decisions, &[call(0, "gh.get", json!({}))], None, policy);
        assert!(matches!(diverged, Err(SandboxError::NonDeterministic(_))));
        let cancelled = plan(&journal, &BTreeMap::from([(1, ApprovalAction::Cancel)]), &batch[1..2], None, policy);
        assert_eq!(cancelled.unwrap(), [Action::Cancel]);
        let ahead = BTreeMap::from([(4, ApprovalAction::Accept), (5, ApprovalAction::Accept)]);
        let planned = plan(&journal, &ahead, &batch[4..6], None, policy).unwrap();
        assert_eq!(planned, [Action::Call, Action::Block("deletes are off".into())], "a decision never unblocks");
    }

    #[test]
    fn a_call_waiting_for_a_connection_waits_until_there_is_one() {
        let connect = || Policy::NeedsConnect { source: "crm".into(), message: "connect crm".into() };
        let waits = Action::Await { message: "connect crm".into(), connect: Some("crm".into()) };
        let batch = [call(0, "crm.list", json!({}))];
        let fresh = Journal::new(Timestamp::from_millis(0), 1);
        let accepted = BTreeMap::from([(0, ApprovalAction::Accept)]);
        // New: it waits, and a decision ahead of time does not connect anything.
        assert_eq!(
            plan(&fresh, &BTreeMap::new(), &batch, None, |_, _| connect()).unwrap(),
            std::slice::from_ref(&waits)
        );
        assert_eq!(plan(&fresh, &accepted, &batch, None, |_, _| connect()).unwrap(), std::slice::from_ref(&waits));
        // Pending: accepted while still not connected, it waits again; once
        // connected it is planned by the policy, so a write still asks for approval.
        let mut journal = Journal::new(Timestamp::from_millis(0), 1);
        journal.add_pending(PendingCall::connect(0, "crm.list", json!({}), "connect crm", "crm"));
        assert_eq!(
            plan(&journal, &BTreeMap::new(), &batch, None, |_, _| Policy::Run).unwrap(),
            std::slice::from_ref(&waits)
        );
        assert_eq!(plan(&journal, &accepted, &batch, None, |_, _| connect()).unwrap(), [waits]);
        assert_eq!(plan(&journal, &accepted, &batch, None, |_, _| Policy::Run).unwrap(), [Action::Call]);
        let approve = |_: &str, _: &Value| Policy::NeedsApproval { message: "write?".into() };
        let asks = Action::Await { message: "write?".into(), connect: None };
        assert_eq!(plan(&journal, &accepted, &batch, None, approve).unwrap(), [asks]);
        let declined = BTreeMap::from([(0, ApprovalAction::Decline)]);
        assert_eq!(plan(&journal, &declined, &batch, None, |_, _| connect()).unwrap(), [Action::Decline]);
    }

    #[test]
    fn deliveries_wrap_tool_results_but_not_builtins() {
        let ok = StepOutcome::Ok { data: json!(1) };
        let http = StepOutcome::HttpOk { data: json!({"id": 3}), status: 201 };
        let err = StepOutcome::Err { code: "http_404".into(), message: "not found".into() };
        let declined = StepOutcome::Declined { message: "no".into() };
        let value = |v: Value| Delivery::Json(v.to_string());
        let cases = [
            ("a.b", &ok, value(json!({"ok": true, "data": 1}))),
            ("a.b", &http, value(json!({"ok": true, "data": {"id": 3}, "http": {"status": 201}}))),
            ("a.b", &err, value(json!({"ok": false, "error": {"code": "http_404", "message": "not found"}}))),
            ("a.b", &declined, Delivery::Declined("no".into())),
            ("search", &ok, value(json!(1))),
            ("describe.tool", &err, Delivery::Error("not found".into())),
        ];
        let parsed = |d: Delivery| match d {
            Delivery::Json(text) => Ok(serde_json::from_str::<Value>(&text).unwrap()),
            other => Err(other),
        };
        for (path, outcome, expected) in cases {
            assert_eq!(parsed(delivery(path, outcome)), parsed(expected), "{path} {outcome:?}");
        }
    }
}
