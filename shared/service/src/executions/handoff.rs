//! Runs that outlive the answer. Every run (new code, or a claimed
//! continuation) goes on in a task of its own; the request waits for its
//! outcome up to the response budget, then answers `running`, and the task
//! carries on without it. Nothing stops or restarts at the hand-off: a call
//! in flight then completes in the same task and its outcome is kept, so no
//! call is ever made twice.
//!
//! Where the process cannot keep running after its answer (the MCP Lambda
//! function: [`crate::Continuations`]), the run is instead stopped at its
//! next safe point (no call in flight, none waiting for a decision), its
//! journal stored, and another invocation replays it and goes on
//! ([`Executions::continue_handed_on`]).
//!
//! A handed-on run is stored (`running`, with the claim id of its runner) and
//! its task renews a heartbeat on it. A run whose heartbeat stops (the host
//! died) is settled `interrupted` by the next read, never re-run. The task
//! also looks for a cancellation request on the stored record and stops the
//! run at its next safe point.

use std::sync::Arc;
use std::time::Duration;

use executor_core::{ApprovalAction, ExecutionEvent, ExecutionFailure, ExecutionStatus, HEARTBEAT_EVERY};
use executor_sandbox::{Outcome, SandboxError, Segment, Snapshot, Stop, Tools};
use executor_store::{Access, StoreError};
use executor_telemetry::{Metric, count};
use tokio::sync::{Mutex, OwnedSemaphorePermit, oneshot};
use tracing::{Instrument, Span};

use super::{
    Execution, ExecutionResult, Executions, RETENTION, ResumeError, SETTLE_ATTEMPTS, Write, is_running, no_randomness,
    not_found, paused_result, settled, transition_bug,
};

/// How often a run's task reads its stored record (for a cancellation
/// request); the heartbeat is written every [`HEARTBEAT_EVERY`] of these reads.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// What a run holds until it ends: a sandbox slot of this process, and the
/// owner's running slot when a quota counts them.
pub(super) struct Held {
    pub slot: OwnedSemaphorePermit,
    pub quota: Option<crate::quotas::Slot>,
}

/// A run and where its record stands, shared by the request and the run's task.
struct Run {
    execution: Execution,
    /// Whether the store holds it: a continuation always; new code once it
    /// paused or was handed on.
    stored: bool,
    /// The run ended and its task is recording the outcome: too late to hand it on.
    finishing: bool,
}

impl Executions {
    /// Run `segment` of `execution` in a task of its own and answer with its
    /// outcome, or with `running` once the response budget is spent (the run
    /// goes on). `stored`: whether the store already holds the execution (a
    /// claimed continuation). What it `held` is given back when the run ends.
    pub(super) async fn run(
        &self,
        execution: Execution,
        stored: bool,
        segment: Segment,
        tools: Arc<dyn Tools>,
        held: Held,
    ) -> Result<ExecutionResult, ResumeError> {
        let id = execution.id.clone();
        let stop = segment.stop.clone();
        let run = Arc::new(Mutex::new(Run { execution, stored, finishing: false }));
        let (done, mut outcome) = oneshot::channel();
        let (this, task_run, task_stop) = (self.clone(), run.clone(), stop.clone());
        // Boxed: a task's future is copied as it is spawned and again as it
        // finishes, and this one holds the whole run.
        tokio::spawn(Box::pin(
            async move {
                let Held { slot, quota } = held;
                let watcher = tokio::spawn(this.clone().watch(task_run.clone(), task_stop));
                let ran = crate::quotas::counted(this.sandbox.run(segment, tools).await);
                watcher.abort();
                let _ = watcher.await;
                let finished = this.finish(&task_run, ran).await;
                if let (Some(gate), Some(quota)) = (&this.quotas, quota) {
                    gate.release(quota).await;
                }
                // Everything the run held is given back before the answer: the
                // caller's next execution finds its slots free, and a host shut
                // down after the answer leaves no task holding the store.
                drop((slot, this));
                // Nobody may be waiting any more: the outcome is stored all the same.
                let _ = done.send(finished);
            }
            .instrument(Span::current()),
        ));
        // A zero budget (an MCP task) answers at once: a timer would wait for its next tick.
        if !self.budget.is_zero()
            && let Ok(result) = tokio::time::timeout(self.budget, &mut outcome).await
        {
            return result.unwrap_or_else(|_| Err(task_lost()));
        }
        {
            let mut run = run.lock().await;
            if !run.finishing && self.continuations.is_some() {
                // Stopped at the next safe point and handed to another
                // invocation: the outcome below is `running`.
                stop.request_hand_off();
            } else if !run.finishing {
                if !run.stored {
                    if let Err(error) = self.hand_on(&mut run.execution).await {
                        // Nobody could follow it: it stops before its next call.
                        stop.request();
                        return Err(error.into());
                    }
                    run.stored = true;
                }
                tracing::info!(executor.execution.id = id.as_str(), "execution handed on");
                return Ok(ExecutionResult::Running { execution_id: id });
            }
        }
        outcome.await.unwrap_or_else(|_| Err(task_lost()))
    }

    /// Store a new run as `running`, so that it survives the request: its
    /// heartbeat starts now, and its claim id tells its own writes from others'.
    async fn hand_on(&self, execution: &mut Execution) -> Result<(), StoreError> {
        let now = self.clock.now();
        execution.heartbeat_at = Some(now);
        execution.claim = Some(crate::random::claim_id().map_err(no_randomness)?);
        execution.expires_at = now.plus(self.sandbox.limits().wall_clock).plus(RETENTION);
        self.store.create_execution(execution).await
    }

    /// While the run goes on: read its stored record every [`WATCH_EVERY`],
    /// stop the run when it was cancelled or settled by someone else (it fell
    /// silent and was declared interrupted), and renew the heartbeat.
    async fn watch(self, run: Arc<Mutex<Run>>, stop: Stop) {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let mut run = run.lock().await;
            if !run.stored || run.finishing {
                continue;
            }
            let Ok(mut stored) = self.store.get_execution(Access::Internal, &run.execution.id).await else {
                continue;
            };
            if stored.claim != run.execution.claim || !is_running(&stored) {
                stop.request();
                return;
            }
            if stored.cancel_requested {
                stop.request();
            }
            let now = self.clock.now();
            if stored.heartbeat_at.is_none_or(|beat| now >= beat.plus(HEARTBEAT_EVERY)) {
                stored.heartbeat_at = Some(now);
                // A racing write (a cancellation) wins; the next read sees it.
                if self.store.update_execution(&mut stored).await.is_err() {
                    continue;
                }
            }
            run.execution = stored;
        }
    }

    /// The run ended: new code that was never stored answers as it ended (a
    /// pause is stored now); a stored run is settled in the store.
    async fn finish(&self, run: &Mutex<Run>, outcome: Outcome) -> Result<ExecutionResult, ResumeError> {
        let mut run = run.lock().await;
        run.finishing = true;
        if run.stored {
            return self.settle(&mut run.execution, outcome).await;
        }
        let execution_id = run.execution.id.clone();
        match outcome {
            Outcome::Yielded { snapshot, .. } => {
                self.hand_over(&mut run.execution, snapshot.journal)?;
                self.store.create_execution(&run.execution).await?;
                run.stored = true;
                self.continue_elsewhere(&execution_id).await;
                Ok(ExecutionResult::Running { execution_id })
            }
            Outcome::Completed { result, logs } => {
                count(Metric::ExecutionsCompleted);
                if self.stored_outcomes {
                    let event = ExecutionEvent::Complete { result: result.clone() };
                    self.end(&mut run.execution, event, logs.clone(), Write::Create).await?;
                }
                Ok(ExecutionResult::Completed { execution_id, result, logs })
            }
            Outcome::Failed { error, logs } => {
                count(Metric::ExecutionsFailed);
                let (error, event) = ended_with(&error);
                if self.stored_outcomes {
                    self.end(&mut run.execution, event, logs.clone(), Write::Create).await?;
                }
                Ok(ExecutionResult::Failed { execution_id, error, logs })
            }
            Outcome::Paused { snapshot, logs } => {
                let now = self.clock.now();
                let link = self.pause(&mut run.execution, snapshot, logs, now, Write::Create).await?;
                Ok(paused_result(&run.execution, link))
            }
        }
    }

    /// Store how a stored run ended: completed, failed, declined (cancelled)
    /// or paused at its next approval. The calls it made are done and their
    /// outcome is known, so a failed write is tried again (conditional on the
    /// version, so safe to repeat). A record that was settled by someone else
    /// meanwhile (declared interrupted) stands, and is what is reported.
    async fn settle(&self, execution: &mut Execution, outcome: Outcome) -> Result<ExecutionResult, ResumeError> {
        let id = execution.id.clone();
        for attempt in 1..=SETTLE_ATTEMPTS {
            let mut next = execution.clone();
            let now = self.clock.now();
            let written = match outcome.clone() {
                Outcome::Yielded { snapshot, .. } => match self.hand_over(&mut next, snapshot.journal) {
                    Ok(()) => self.store.update_execution(&mut next).await,
                    Err(error) => Err(error),
                }
                .map(|()| ExecutionResult::Running { execution_id: id.clone() }),
                Outcome::Paused { snapshot, logs } => self
                    .pause(&mut next, snapshot, logs, now, Write::Update)
                    .await
                    .map(|link| paused_result(&next, link)),
                Outcome::Completed { result, logs } => {
                    let event = ExecutionEvent::Complete { result: result.clone() };
                    let ended = ExecutionResult::Completed { execution_id: id.clone(), result, logs: logs.clone() };
                    self.end(&mut next, event, logs, Write::Update).await.map(|()| ended)
                }
                Outcome::Failed { error, logs } => {
                    let (failure, event) = ended_with(&error);
                    let ended =
                        ExecutionResult::Failed { execution_id: id.clone(), error: failure, logs: logs.clone() };
                    self.end(&mut next, event, logs, Write::Update).await.map(|()| ended)
                }
            };
            match written {
                Ok(result) => {
                    *execution = next;
                    let status = execution.status();
                    match status {
                        ExecutionStatus::Completed => count(Metric::ExecutionsCompleted),
                        ExecutionStatus::Paused => {}
                        ExecutionStatus::Running => {
                            self.continue_elsewhere(&id).await;
                            return Ok(result);
                        }
                        _ => count(Metric::ExecutionsFailed),
                    }
                    tracing::info!(executor.execution.id = id.as_str(), status = status.as_str(), "execution settled");
                    return Ok(result);
                }
                // Someone else wrote: a cancellation request (the record is
                // still ours: settle on top of it), or an `interrupted` that stands.
                Err(StoreError::Conflict { .. }) => {
                    let stored =
                        self.store.get_execution(Access::Internal, &id).await.map_err(|e| not_found(&id, e))?;
                    if stored.claim != execution.claim || !is_running(&stored) {
                        return settled(&stored);
                    }
                    *execution = stored;
                }
                Err(StoreError::Backend { .. }) if attempt < SETTLE_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        settled(&self.store.get_execution(Access::Internal, &id).await.map_err(|e| not_found(&id, e))?)
    }

    /// Record a hand-off: the journal so far, no runner yet (the next claims
    /// it), and a heartbeat, so that a continuation that never starts reads
    /// as interrupted.
    fn hand_over(&self, execution: &mut Execution, journal: executor_core::Journal) -> Result<(), StoreError> {
        let now = self.clock.now();
        execution.apply(ExecutionEvent::Yield { journal }, now).map_err(transition_bug)?;
        execution.claim = None;
        execution.heartbeat_at = Some(now);
        execution.expires_at = now.plus(self.sandbox.limits().wall_clock).plus(RETENTION);
        Ok(())
    }

    /// Ask another invocation to continue a handed-on run. A failure is
    /// logged: nothing runs it then, and a read settles it as interrupted.
    async fn continue_elsewhere(&self, id: &executor_core::ExecutionId) {
        let Some(continuations) = &self.continuations else { return };
        match continuations.start(id).await {
            Ok(()) => tracing::info!(executor.execution.id = id.as_str(), "execution handed on"),
            Err(error) => tracing::error!(executor.execution.id = id.as_str(), %error, "continuation not started"),
        }
    }

    /// The other side of a hand-off (the approval function, invoked
    /// asynchronously): claim the handed-on execution (one winner: a second
    /// delivery finds it claimed) and run it on from its journal, to its end.
    /// The journal's calls are replayed, never made again.
    pub async fn continue_handed_on(
        &self,
        id: &executor_core::ExecutionId,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let mut execution = self.load(Access::Internal, id).await?;
        if execution.state != executor_core::ExecutionState::Running || execution.claim.is_some() {
            return Err(ResumeError::AlreadySettled(id.clone()));
        }
        // In the toolkit's view if it started in one, with the owner's grants.
        let tools = self.tools_for(&execution, tools)?;
        let tools = self.granted(&execution.owner, tools);
        let slot = self.slot().await?;
        execution.claim = Some(crate::random::claim_id().map_err(no_randomness)?);
        execution.heartbeat_at = Some(self.clock.now());
        match self.store.update_execution(&mut execution).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => return Err(ResumeError::AlreadySettled(id.clone())),
            Err(e) => return Err(not_found(id, e)),
        }
        let snapshot = Snapshot { code: execution.code.clone(), journal: execution.journal.clone() };
        executor_telemetry::add(Metric::ReplaySteps, snapshot.journal.steps.len() as u64);
        let segment = Segment::resume(id.clone(), snapshot, ApprovalAction::Accept)
            .with_max_tool_calls(self.max_tool_calls(&execution.owner));
        // Nobody waits for an answer here: the run goes on to its end (its
        // wall clock ends it first), and is never handed on again.
        let runner = Executions { budget: self.run_limit(), continuations: None, ..self.clone() };
        runner.run(execution, true, segment, tools, Held { slot, quota: None }).await
    }

    /// Apply a final event and store it.
    async fn end(
        &self,
        execution: &mut Execution,
        event: ExecutionEvent,
        logs: Vec<String>,
        write: Write,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let from = write.from(execution.status());
        execution.apply(event, now).map_err(transition_bug)?;
        execution.expires_at = now.plus(RETENTION);
        execution.logs = logs;
        self.save(execution, from, None).await
    }

    /// `resume` of a running execution: with `cancel`, ask its runner to stop
    /// at the next safe point; either way wait, up to the response budget,
    /// for its outcome (a result, an error, a pause, or `running` again).
    pub(super) async fn follow(&self, mut execution: Execution, cancel: bool) -> Result<ExecutionResult, ResumeError> {
        if cancel {
            self.request_cancel(&mut execution).await?;
        }
        self.await_outcome(execution, None, self.budget).await
    }

    /// Mark the stored run as cancelled; its runner reads it within a second.
    pub(super) async fn request_cancel(&self, execution: &mut Execution) -> Result<(), ResumeError> {
        for _ in 0..SETTLE_ATTEMPTS {
            if execution.cancel_requested || !is_running(execution) {
                return Ok(());
            }
            execution.cancel_requested = true;
            match self.store.update_execution(execution).await {
                Ok(()) => {
                    tracing::info!(executor.execution.id = execution.id.as_str(), "cancellation requested");
                    return Ok(());
                }
                // A heartbeat or the settle came first: look again.
                Err(StoreError::Conflict { .. }) => {
                    *execution = self.load(Access::Internal, &execution.id).await?;
                }
                Err(e) => return Err(not_found(&execution.id, e)),
            }
        }
        Ok(())
    }
}

/// How a failed run is recorded: a decline or a cancellation is `declined`,
/// anything else `failed`.
fn ended_with(error: &SandboxError) -> (ExecutionFailure, ExecutionEvent) {
    let failure = ExecutionFailure::from(error);
    let event = match error {
        SandboxError::Declined { .. } | SandboxError::Cancelled | SandboxError::Stopped => {
            ExecutionEvent::Decline { error: failure.clone() }
        }
        _ => ExecutionEvent::Fail { error: failure.clone() },
    };
    (failure, event)
}

/// The run's task ended without an outcome: only a bug (the sandbox catches panics) gets here.
fn task_lost() -> ResumeError {
    ResumeError::Store(StoreError::Corrupt {
        what: "execution",
        detail: "the task running it ended without an outcome".into(),
    })
}
