//! The drive loop as a state machine. A run goes through the same phases
//! for every batch: [`Phase::Running`] until the code waits on calls,
//! [`Phase::Planning`] them, [`Phase::Calling`] the runnable ones,
//! [`Phase::Journaling`] every outcome, [`Phase::Delivering`] them in step
//! order, and back to running, until an [`Exit`]. Each phase is one method
//! of [`Driver`] that does its work and names the next phase, so the order
//! of a replay is the order of these transitions and nothing else.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_core::{
    AllowedBy, CallOutcome, Called, Effect, Journal, JournalStep, PendingCall, StepOutcome, Timestamp,
};
use futures_util::future::Either;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tracing::Instrument;

use super::plan::{Action, Allowed, counts_before, is_builtin, plan};
use super::spans::{record_call, tool_span};
use super::{Env, Outcome, Relocate, Segment, Snapshot, Steps};
use crate::SandboxError;
use crate::engine::{Delivery, Engine, IssuedCall, MainState};
use crate::source;
use crate::tools::{
    Allowance, CallContext, CallCounts, DESCRIBE_PATH, Policy, PolicyCall, SEARCH_PATH, ToolError, ToolSuccess, Tools,
};

/// The calls of one round in flight at once. The host holds every answer of
/// the round until the round ends, each as big as an upstream may send.
const CALLS_IN_FLIGHT: usize = 64;

/// Where a run is. Each phase does one thing and names the next.
#[derive(Debug)]
pub(super) enum Phase {
    /// The code runs until it finishes or waits on tool calls.
    Running,
    /// The code waits on these calls, issued since the last round (a batch):
    /// stop here if asked, else plan every one before any is made.
    Planning(Vec<IssuedCall>),
    /// The batch is planned: make its runnable calls, concurrently.
    Calling(Batch),
    /// The calls are made: record what happened to each call of the batch.
    Journaling(Batch, Made),
    /// Every call of the batch is journaled: hand the outcomes to the code.
    Delivering(Vec<IssuedCall>),
    /// The run is over.
    Exit(Exit),
}

/// How a run ends.
#[derive(Debug, PartialEq)]
pub(super) enum Exit {
    /// The code returned this.
    Completed(Value),
    Failed(SandboxError),
    /// A call waits for a decision: the journal holds it as pending.
    Paused,
    /// Handed off ([`crate::Stop::request_hand_off`]) at a safe point with
    /// nothing pending: the journal holds every call made.
    HandedOff,
    /// Past its inline budget: to start over off the worker.
    Relocated,
}

/// A planned batch: its calls in step order, and what happens to each.
#[derive(Debug)]
pub(super) struct Batch {
    calls: Vec<IssuedCall>,
    actions: Vec<Action>,
    /// What the execution called before each of `calls`.
    counts: Vec<CallCounts>,
}

/// What the calls of a batch that were made answered (and how long each
/// took), one for each [`Action::Call`] in step order, and when the batch
/// completed (the time its outcomes are journaled and delivered at).
#[derive(Debug)]
pub(super) struct Made {
    results: Vec<(Result<ToolSuccess, ToolError>, Duration)>,
    completed_at: Timestamp,
}

/// One run of a segment: the code in a fresh engine, driven phase by phase.
pub(super) struct Driver<'a> {
    /// What the run started from; its journal grows as calls complete.
    segment: Segment,
    env: &'a Env<'a>,
    engine: Engine,
    /// The code's clock: the start, then the latest delivered completion time.
    pinned: Timestamp,
    /// Whether `Tools::prepare_approvals` ran in this run.
    prepared: Cell<bool>,
    steps: &'a mut Steps,
    /// What the journal's answers hold ([`held_bytes`]), for [`crate::Limits::kept_results_bytes`].
    kept_bytes: usize,
}

impl<'a> Driver<'a> {
    /// Run `segment` from the start of its code to its exit. `Err`: it went
    /// past `budget` and is to start over off the worker.
    pub(super) fn run(
        segment: Segment,
        env: &'a Env<'a>,
        budget: Option<Duration>,
        steps: &'a mut Steps,
    ) -> Result<Outcome, Relocate> {
        let (mut driver, mut phase) = match Self::start(segment, env, budget, steps) {
            Ok(started) => started,
            Err(error) => return Ok(Outcome::Failed { error, logs: Vec::new() }),
        };
        loop {
            phase = match phase {
                Phase::Exit(exit) => return driver.exit(exit),
                phase => driver.advance(phase),
            };
        }
    }

    /// The code begun in a fresh engine, and the phase it is in. `Err`: it
    /// could not start (nothing ran, so nothing was logged).
    fn start(
        segment: Segment,
        env: &'a Env<'a>,
        budget: Option<Duration>,
        steps: &'a mut Steps,
    ) -> Result<(Self, Phase), SandboxError> {
        let js = source::prepare(&segment.code, env.limits)?;
        let pinned = segment.journal.started_at;
        let (seed, stop) = (segment.journal.seed, segment.stop.clone());
        let engine = Engine::new(seed, pinned.as_millis() as f64, env.limits, env.deadline, stop, budget)?;
        let kept_bytes = segment.journal.steps.iter().map(|step| outcome_bytes(&step.outcome)).sum();
        let mut driver = Self { segment, env, engine, pinned, prepared: Cell::new(false), steps, kept_bytes };
        let phase = match driver.engine.begin(&js) {
            Ok(()) => Phase::Running,
            Err(error) => driver.engine_error(error),
        };
        Ok((driver, phase))
    }

    /// One transition: the work of `phase`, and the phase that follows.
    pub(super) fn advance(&mut self, phase: Phase) -> Phase {
        match phase {
            Phase::Running => self.run_until_blocked(),
            Phase::Planning(calls) => self.plan(calls),
            Phase::Calling(batch) => self.call(batch),
            Phase::Journaling(batch, made) => self.journal(batch, made),
            Phase::Delivering(calls) => self.deliver(calls),
            Phase::Exit(exit) => Phase::Exit(exit),
        }
    }

    /// Running: queued jobs run until the code finishes or waits on calls.
    fn run_until_blocked(&mut self) -> Phase {
        if let Err(error) = self.engine.run_jobs() {
            return self.engine_error(error);
        }
        match self.engine.state() {
            MainState::Completed(json) => Phase::Exit(completed(json, self.env.limits.result_bytes)),
            MainState::Failed(error) => self.engine_error(error),
            MainState::Pending => match self.engine.take_issued() {
                calls if calls.is_empty() => Phase::Exit(Exit::Failed(SandboxError::NeverSettles)),
                calls => Phase::Planning(calls),
            },
        }
    }

    /// Planning, with the tools: arguments first, then the policy. After the
    /// first preparation both are asked again: it may list an owner's tools,
    /// whose arguments only then can be checked.
    fn plan(&self, calls: Vec<IssuedCall>) -> Phase {
        let Env { tools, runtime, .. } = self.env;
        let owner = self.segment.owner.as_ref();
        let decide = |path: &str, args: &Value, before: CallCounts| {
            let call = PolicyCall { owner, before, ..PolicyCall::new(path, args) };
            let decide = || tools.validate(path, args).map(|()| tools.policy(&call));
            match decide() {
                Ok(Policy::NeedsApproval { .. } | Policy::NeedsConnect { .. }) if !self.prepared.replace(true) => {
                    wait(runtime, tools.prepare_approvals());
                    decide()
                }
                decision => decision,
            }
        };
        let counts = counts_before(&self.segment.journal, &calls, |path| tools.effect(path) == Some(Effect::Write));
        plan_batch(&self.segment, calls, counts, decide)
    }

    /// Calling: the runnable calls, [`CALLS_IN_FLIGHT`] at a time; CPU time
    /// is not counted meanwhile. Once the answers in hand pass what the
    /// execution may keep, the calls not yet begun are not made (the run then
    /// ends with the limit, in [`Driver::journal`]).
    fn call(&mut self, batch: Batch) -> Phase {
        let env = self.env;
        self.steps.replayed += batch.actions.iter().filter(|a| matches!(a, Action::Replay(_))).count();
        let room = env.limits.kept_results_bytes.saturating_sub(self.kept_bytes);
        let answered = Rc::new(Cell::new(0usize));
        let runnable = batch.calls.iter().zip(&batch.actions).zip(&batch.counts);
        let calls = runnable.filter(|((_, a), _)| matches!(a, Action::Call(_))).map(|((call, _), before)| {
            self.steps.called += 1;
            let ctx = CallContext {
                owner: self.segment.owner.clone(),
                before: *before,
                ..CallContext::new(self.segment.execution_id.clone(), call.step)
            };
            let (made, answered) = (make(env.tools.clone(), ctx, call.clone()), answered.clone());
            async move {
                if answered.get() > room {
                    let message = "not made: the answers the execution keeps passed their limit".to_owned();
                    return (Err(ToolError { code: "not_made".into(), message }), Duration::ZERO);
                }
                let made = made.await;
                answered.set(answered.get() + result_bytes(&made.0));
                made
            }
        });
        // Made into futures now (none starts before it is polled), so the batch is free to move on.
        let calls: Vec<_> = calls.collect();
        // A lone call (each `await tools.x(...)` in turn) is awaited as it is:
        // the stream that keeps several in flight cost more than an
        // in-process call.
        let all = match <[_; 1]>::try_from(calls) {
            Ok([one]) => Either::Left(one.map(|made| vec![made])),
            Err(calls) => {
                Either::Right(futures_util::stream::iter(calls).buffered(CALLS_IN_FLIGHT).collect::<Vec<_>>())
            }
        };
        let mut all = std::pin::pin!(all);
        // Calls that finish at once (in-process tools) need no timer or runtime hand-off.
        let results = match all.as_mut().now_or_never() {
            Some(results) => results,
            None => {
                let remaining = env.deadline.saturating_duration_since(Instant::now());
                match wait(env.runtime, tokio::time::timeout(remaining, all)) {
                    Ok(results) => results,
                    Err(_) => {
                        let error = SandboxError::WallClockLimit { limit: env.limits.wall_clock };
                        return Phase::Exit(Exit::Failed(error));
                    }
                }
            }
        };
        let made = Made { results, completed_at: env.clock.now() };
        Phase::Journaling(batch, made)
    }

    /// Journaling. Paused if a call waits for a decision: calls already made
    /// are journaled, nothing is delivered, so the replay re-forms this same batch.
    fn journal(&mut self, batch: Batch, made: Made) -> Phase {
        self.kept_bytes += made.results.iter().map(|(result, _)| result_bytes(result)).sum::<usize>();
        let log = |call: &IssuedCall, action: &Action, made: Option<&(Result<ToolSuccess, ToolError>, Duration)>| {
            if let Some(called) = called(call, action, made, &*self.env.tools) {
                self.segment.calls.add(called);
            }
        };
        let pending = record_batch(&mut self.segment.journal, &batch, made, log);
        self.steps.pending += pending;
        let limit = self.env.limits.kept_results_bytes;
        if self.kept_bytes > limit {
            return Phase::Exit(Exit::Failed(SandboxError::KeptResultsLimit { limit }));
        }
        if pending > 0 { Phase::Exit(Exit::Paused) } else { Phase::Delivering(batch.calls) }
    }

    /// Delivering: outcomes in step order, with the clock pinned to the batch.
    fn deliver(&mut self, calls: Vec<IssuedCall>) -> Phase {
        for call in &calls {
            let Some(done) = self.segment.journal.completed(call.step) else {
                unreachable!("every call of the batch is journaled")
            };
            self.pinned = self.pinned.max(done.completed_at);
            let delivery = delivery(&call.path, &done.outcome);
            self.engine.set_pinned_now(self.pinned.as_millis() as f64);
            if let Err(error) = self.engine.deliver(call.step, delivery) {
                return self.engine_error(error);
            }
        }
        Phase::Running
    }

    /// What an error from the engine means: the run's end, or its relocation.
    fn engine_error(&self, error: SandboxError) -> Phase {
        Phase::Exit(if self.engine.relocating() { Exit::Relocated } else { Exit::Failed(error) })
    }

    /// The run's outcome, with its logs. A run that completed, paused, was
    /// handed off or failed on its own terms leaves its engine to be reset for
    /// the next run (if no limit tripped): after a limit or a relocation it
    /// may be cut short mid-operation.
    fn exit(self, exit: Exit) -> Result<Outcome, Relocate> {
        let Self { segment, engine, .. } = self;
        let snapshot = |segment: Segment| Snapshot { code: segment.code, journal: segment.journal };
        Ok(match exit {
            Exit::Completed(result) => Outcome::Completed { result, logs: engine.into_logs(true) },
            Exit::Failed(error) => {
                let clean = error.leaves_engine_clean();
                Outcome::Failed { error, logs: engine.into_logs(clean) }
            }
            Exit::Paused => Outcome::Paused { snapshot: snapshot(segment), logs: engine.into_logs(true) },
            Exit::HandedOff => Outcome::Yielded { snapshot: snapshot(segment), logs: engine.into_logs(true) },
            Exit::Relocated => {
                engine.into_logs(false);
                return Err(Relocate(Box::new(segment)));
            }
        })
    }
}

/// A finished run's result, refused when its JSON is over `limit` bytes.
fn completed(json: String, limit: usize) -> Exit {
    if json.len() > limit {
        return Exit::Failed(SandboxError::ResultTooLarge { size: json.len(), limit });
    }
    Exit::Completed(serde_json::from_str(&json).unwrap_or(Value::Null))
}

/// Planning: stop at this safe point if asked (no call is in flight, and none
/// of the batch has been made), else plan every call of the batch before any
/// is made. `decide` checks a new call's arguments, then asks the policy.
fn plan_batch(
    segment: &Segment,
    calls: Vec<IssuedCall>,
    counts: Vec<CallCounts>,
    decide: impl Fn(&str, &Value, CallCounts) -> Result<Policy, String>,
) -> Phase {
    if segment.stop.is_requested() {
        return Phase::Exit(Exit::Failed(SandboxError::Stopped));
    }
    // Not while a decided call waits to be made: its decision is not in the journal.
    if segment.stop.is_hand_off() && segment.journal.pending.is_empty() {
        return Phase::Exit(Exit::HandedOff);
    }
    match plan(&segment.journal, &segment.decisions, &calls, &counts, segment.max_tool_calls, decide) {
        Err(error) => Phase::Exit(Exit::Failed(error)),
        Ok(actions) if actions.contains(&Action::Cancel) => Phase::Exit(Exit::Failed(SandboxError::Cancelled)),
        Ok(actions) => Phase::Calling(Batch { calls, actions, counts }),
    }
}

/// One call of a batch, in its `tool.call` span.
fn make(
    tools: Arc<dyn Tools>,
    ctx: CallContext,
    call: IssuedCall,
) -> impl Future<Output = (Result<ToolSuccess, ToolError>, Duration)> {
    let span = tool_span(&call.path, call.step);
    async move {
        let started = Instant::now();
        let outcome = match call.path.as_str() {
            SEARCH_PATH => tools.search(call.args).await.map(ToolSuccess::plain),
            DESCRIBE_PATH => tools.describe(call.args).await.map(ToolSuccess::plain),
            path => tools.call_with_status(path, call.args, &ctx).await,
        };
        record_call(started, &outcome);
        (outcome, started.elapsed())
    }
    .instrument(span)
}

/// About what a JSON value holds in memory: its text, and 16 bytes a value.
fn held_bytes(value: &Value) -> usize {
    16 + match value {
        Value::String(text) => text.len(),
        Value::Array(items) => items.iter().map(held_bytes).sum(),
        Value::Object(fields) => fields.iter().map(|(name, field)| name.len() + held_bytes(field)).sum(),
        _ => 0,
    }
}

fn result_bytes(result: &Result<ToolSuccess, ToolError>) -> usize {
    match result {
        Ok(success) => held_bytes(&success.data),
        Err(error) => error.code.len() + error.message.len(),
    }
}

fn outcome_bytes(outcome: &StepOutcome) -> usize {
    match outcome {
        StepOutcome::Ok { data } | StepOutcome::HttpOk { data, .. } => held_bytes(data),
        StepOutcome::Err { code, message } => code.len() + message.len(),
        other => serde_json::to_string(other).map_or(0, |text| text.len()),
    }
}

/// Journaling: record what happened to each call of the batch, the calls
/// made with the batch's completion time, and `log` each new one for the
/// audit trail. Answers how many wait for a decision.
fn record_batch(
    journal: &mut Journal,
    batch: &Batch,
    made: Made,
    mut log: impl FnMut(&IssuedCall, &Action, Option<&(Result<ToolSuccess, ToolError>, Duration)>),
) -> usize {
    let completed_at = made.completed_at;
    // `buffered` answers in the order it was given the calls, the batch's.
    let mut results = made.results.into_iter();
    let mut pending = 0;
    for (call, action) in batch.calls.iter().zip(&batch.actions) {
        // Calls that were not made still get a span, saying why.
        if let Some(why) = action.not_made() {
            tool_span(&call.path, call.step).record("executor.tool.outcome", why);
        }
        let outcome = match action {
            Action::Replay(_) | Action::Cancel => continue,
            Action::Await { message, connect, rule } => {
                let pending_call = match connect {
                    Some(source) => PendingCall::connect(call.step, &call.path, call.args.clone(), message, source),
                    None => PendingCall::new(call.step, &call.path, call.args.clone(), message),
                };
                journal.add_pending(PendingCall { rule: rule.clone(), ..pending_call });
                pending += 1;
                continue;
            }
            Action::Call(_) => {
                let made = results.next().unwrap_or_else(|| unreachable!("every planned call has a result"));
                log(call, action, Some(&made));
                match made.0 {
                    Ok(ToolSuccess { data, http_status: None }) => StepOutcome::Ok { data },
                    Ok(ToolSuccess { data, http_status: Some(status) }) => StepOutcome::HttpOk { data, status },
                    Err(ToolError { code, message }) => StepOutcome::Err { code, message },
                }
            }
            Action::Decline => {
                StepOutcome::Declined { message: format!("the call to tools.{} was declined", call.path) }
            }
            Action::Block { reason, .. } => {
                log(call, action, None);
                StepOutcome::Err { code: "blocked".into(), message: reason.clone() }
            }
            Action::Invalid(message) => {
                log(call, action, None);
                StepOutcome::Err { code: "invalid_arguments".into(), message: message.clone() }
            }
        };
        let (step, path, args_hash) = (call.step, call.path.clone(), call.args_hash.clone());
        journal.record(JournalStep { step, path, args_hash, outcome, completed_at });
    }
    pending
}

/// A new call as the audit trail records it: made (with how it ended and
/// what let it run), blocked, or refused for its arguments. Built-ins
/// (search, describe) reach no source and are not recorded.
fn called(
    call: &IssuedCall,
    action: &Action,
    made: Option<&(Result<ToolSuccess, ToolError>, Duration)>,
    tools: &dyn Tools,
) -> Option<Called> {
    let mut called = Called {
        step: call.step,
        tool: call.path.clone(),
        kind: tools.effect(&call.path),
        outcome: CallOutcome::Ok,
        http_status: None,
        error_code: None,
        duration_ms: 0,
        allowed_by: None,
        policy_id: None,
        grant_id: None,
    };
    match action {
        Action::Call(Allowed::Builtin) => return None,
        Action::Call(Allowed::By(Allowance::Rule(rule))) => {
            (called.allowed_by, called.policy_id) = (Some(AllowedBy::Policy), Some(rule.clone()))
        }
        Action::Call(Allowed::By(Allowance::Grant(grant))) => {
            (called.allowed_by, called.grant_id) = (Some(AllowedBy::Grant), Some(grant.clone()))
        }
        Action::Call(Allowed::Decision) => called.allowed_by = Some(AllowedBy::Decision),
        Action::Block { rule, .. } => {
            (called.outcome, called.error_code, called.policy_id) =
                (CallOutcome::Blocked, Some("blocked".into()), Some(rule.clone()))
        }
        Action::Invalid(_) => {
            (called.outcome, called.error_code) = (CallOutcome::Error, Some("invalid_arguments".into()))
        }
        _ => return None,
    }
    if let Some((result, took)) = made {
        called.duration_ms = took.as_millis() as u64;
        match result {
            Ok(success) => called.http_status = success.http_status,
            Err(error) => (called.outcome, called.error_code) = (CallOutcome::Error, Some(error.code.clone())),
        }
    }
    Some(called)
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

/// Wait for `future` from the synchronous run, handing the worker's other
/// tasks to another thread first when on a worker.
fn wait<F: Future>(runtime: &tokio::runtime::Handle, future: F) -> F::Output {
    tokio::task::block_in_place(|| runtime.block_on(future))
}

#[cfg(test)]
mod tests;
