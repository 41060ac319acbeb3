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
//! ([`crate::Executions::continue_handed_on`]).
//!
//! The [`Runner`] owns a run from its start or claim to its settle:
//! `Runner::run` composes the run's tools (`run_tools`), `watch` renews its
//! heartbeat and looks for a cancellation, `finish` and `settle` record how
//! it ended, through the recorder.
//!
//! A handed-on run is stored (`running`, with the claim id of its runner) and
//! its task renews a heartbeat on it. A run whose heartbeat stops (the host
//! died) is settled `interrupted` by the next read, never re-run. The task
//! also looks for a cancellation request on the stored record and stops the
//! run at its next safe point.

use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    Clock, Execution, ExecutionEvent, ExecutionFailure, ExecutionId, ExecutionStatus, HEARTBEAT_EVERY, Journal,
    Principal, Receipt, Timeouts, Timestamp, Via,
};
use executor_sandbox::{Outcome, Sandbox, SandboxError, Segment, Snapshot, Stop, Tools};
use executor_store::{Access, ExecutionStore, HistoryStore, MAX_UNGRANTED_TOOLS, StoreError};
use executor_telemetry::{Metric, count};
use tokio::sync::{Mutex, OwnedSemaphorePermit, oneshot};
use tokio::task::JoinHandle;
use tracing::{Instrument, Span};

use super::outcome::{not_found, paused_result, settled};
use super::recorder::{Recorder, RunLog, Write, no_randomness};
use super::run_tools::RunTools;
use super::{DEFAULT_RESPONSE_BUDGET, ExecutionResult, ResumeError, SETTLE_ATTEMPTS, SETTLE_SLACK};
use crate::application::continuations::Continuations;
use crate::application::grants::RunGrants;
use crate::application::quotas::QuotaGate;
use crate::application::random::ApprovalToken;

/// How often a run's task reads its stored record (for a cancellation
/// request); the heartbeat is written every [`HEARTBEAT_EVERY`] of these reads.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// What a run holds until it ends: a sandbox slot of this process, and the
/// owner's running slot when a quota counts them.
pub(super) struct Held {
    pub slot: OwnedSemaphorePermit,
    pub quota: Option<crate::application::quotas::Slot>,
}

/// A run and where its record stands, shared by the request and the run's task.
struct Run {
    execution: Execution,
    /// Whether the store holds it: a continuation always; new code once it
    /// paused or was handed on.
    stored: bool,
    /// The run ended and its task is recording the outcome: too late to hand it on.
    finishing: bool,
    /// The calls it made, for the history of the writes that record it.
    log: RunLog,
    /// The task that watches the stored record ([`Runner::watch`]), started
    /// once the run is stored: a run that ends unstored (most of them)
    /// needs none.
    watcher: Option<JoinHandle<()>>,
}

impl Run {
    /// Watch the stored record from now on, unless it is watched already
    /// or the run is finishing (then nobody would stop the watcher).
    fn watch(&mut self, runner: &Runner, run: &Arc<Mutex<Run>>, stop: &Stop) {
        if self.stored && !self.finishing && self.watcher.is_none() {
            self.watcher = Some(tokio::spawn(runner.clone().watch(run.clone(), stop.clone())));
        }
    }
}

/// One run from its start or claim to its settle, and what it needs: the
/// sandbox, the tools it composes, the recorder, and how long a request waits.
#[derive(Clone)]
pub(super) struct Runner {
    pub(super) store: Arc<dyn ExecutionStore>,
    pub(super) recorder: Recorder,
    pub(super) sandbox: Sandbox,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) timeouts: Timeouts,
    /// What a run's code sees: its toolkit's view, the owner's grants and connections.
    pub(super) tools: RunTools,
    /// Per-owner quotas; `None` counts nothing.
    pub(super) quotas: Option<QuotaGate>,
    /// How long an `execute` or `resume` waits for its outcome before it
    /// answers `running`.
    pub(super) budget: Duration,
    /// Who continues a run past the budget, when this process cannot.
    pub(super) continuations: Option<Arc<dyn Continuations>>,
    /// Store a run's outcome even when the answer carries it: an MCP task's
    /// outcome is read later, by `tasks/get` and `tasks/result`.
    pub(super) stored_outcomes: bool,
}

impl Runner {
    pub(super) fn new(
        (store, history): (Arc<dyn ExecutionStore>, Arc<dyn HistoryStore>),
        sandbox: Sandbox,
        timeouts: Timeouts,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            recorder: Recorder::new(store.clone(), history, clock.clone()),
            store,
            sandbox,
            clock,
            timeouts,
            tools: RunTools::default(),
            quotas: None,
            budget: DEFAULT_RESPONSE_BUDGET,
            continuations: None,
            stored_outcomes: false,
        }
    }

    /// The longest a run can take to end and be recorded: a quota slot's
    /// lease, and the budget of a continuation nobody waits for.
    pub(super) fn run_limit(&self) -> Duration {
        self.sandbox.limits().wall_clock + SETTLE_SLACK
    }

    /// The owner's cap on tool calls per execution, if any.
    pub(super) fn max_tool_calls(&self, owner: &Principal) -> Option<u32> {
        self.quotas.as_ref().and_then(|gate| gate.limits(owner).tool_calls_per_execution)
    }

    /// Run `segment` of `execution` in a task of its own and answer with its
    /// outcome, or with `running` once the response budget is spent (the run
    /// goes on). `stored`: whether the store already holds the execution (a
    /// claimed continuation). What it `held` is given back when the run ends.
    pub(super) async fn run(
        &self,
        execution: Execution,
        stored: bool,
        segment: Segment,
        view: Arc<dyn Tools>,
        held: Held,
    ) -> Result<ExecutionResult, ResumeError> {
        let id = execution.id.clone();
        // The one place a run's tools are composed.
        let (tools, grants) = self.tools.compose(&execution.owner, view);
        let stop = segment.stop.clone();
        // An MCP task's runner stores its outcomes: that is how its code arrived.
        let via = if self.stored_outcomes { Via::Task } else { Via::Mcp };
        let log = RunLog { calls: segment.calls.clone(), via };
        let run = Arc::new(Mutex::new(Run { execution, stored, finishing: false, log, watcher: None }));
        let (this, task_run, task_stop) = (self.clone(), run.clone(), stop.clone());
        let (done, mut outcome) = oneshot::channel();
        // Boxed: a task's future is copied as it is spawned and again as it
        // finishes, and this one holds the whole run.
        tokio::spawn(Box::pin(
            async move {
                let Held { slot, quota } = held;
                let finished = this.passes(&task_run, segment, (tools, grants), task_stop).await;
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
            let shared = run.clone();
            let mut run = run.lock().await;
            if !run.finishing && self.continuations.is_some() {
                // Stopped at the next safe point and handed to another
                // invocation: the outcome below is `running`.
                stop.request_hand_off();
            } else if !run.finishing {
                if !run.stored {
                    let Run { execution, log, .. } = &mut *run;
                    if let Err(error) = self.hand_on(execution, log).await {
                        // Nobody could follow it: it stops before its next call.
                        stop.request();
                        return Err(error.into());
                    }
                    run.stored = true;
                }
                run.watch(self, &shared, &stop);
                tracing::info!(executor.execution.id = id.as_str(), "execution handed on");
                return Ok(ExecutionResult::Running { execution_id: id });
            }
        }
        outcome.await.unwrap_or_else(|_| Err(task_lost()))
    }

    /// Store a new run as `running`, so that it survives the request: its
    /// heartbeat starts now, and its claim id tells its own writes from others'.
    async fn hand_on(&self, execution: &mut Execution, log: &RunLog) -> Result<(), StoreError> {
        let claim = crate::application::random::claim_id().map_err(no_randomness)?;
        let event = ExecutionEvent::HandOn { claim, lease: self.sandbox.limits().wall_clock };
        self.recorder.record(execution, event, (Write::Create, Some(log))).await.map(drop)
    }

    /// Store new code as running before it runs, with the idempotency key of
    /// `receipt` (one winner among racing repeats): the run is then a stored
    /// one, whose outcome a repeat reads.
    pub(super) async fn hand_on_once(
        &self,
        execution: &mut Execution,
        segment: &Segment,
        receipt: &Receipt,
    ) -> Result<(), StoreError> {
        let claim = crate::application::random::claim_id().map_err(no_randomness)?;
        let event = ExecutionEvent::HandOn { claim, lease: self.sandbox.limits().wall_clock };
        let log = RunLog { calls: segment.calls.clone(), via: Via::Mcp };
        self.recorder.hand_on_once(execution, event, &log, receipt).await
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
            if stored.claim() != run.execution.claim() || !stored.is_running() {
                stop.request();
                return;
            }
            if stored.cancel_requested() {
                stop.request();
            }
            let now = self.clock.now();
            if stored.heartbeat_at().is_none_or(|beat| now >= beat.plus(HEARTBEAT_EVERY)) {
                // A racing write (a cancellation) wins; the next read sees it.
                if self.recorder.record(&mut stored, ExecutionEvent::Heartbeat, (Write::Update, None)).await.is_err() {
                    continue;
                }
            }
            run.execution = stored;
        }
    }

    /// Run the code to its end and record how it ended. A pause that was
    /// not stored because a grant lets a call it waits on run (the run had
    /// not read the grants: [`RunGrants`]) runs the code again from that
    /// pause's journal, the grants read: the calls made so far are replayed,
    /// never made again, and the granted ones are made. That happens once at
    /// most: a run that read its grants stores its pause as they decided.
    async fn passes(
        &self,
        run: &Arc<Mutex<Run>>,
        mut segment: Segment,
        (tools, grants): (Arc<dyn Tools>, Option<Arc<RunGrants>>),
        stop: Stop,
    ) -> Result<ExecutionResult, ResumeError> {
        loop {
            let again = Again::of(&segment);
            run.lock().await.watch(self, run, &stop);
            let ran = crate::application::quotas::counted(self.sandbox.run(segment, tools.clone()).await);
            match self.finish(run, ran, grants.as_deref()).await? {
                Pass::Ended(result) => return Ok(result),
                Pass::Again(paused) => {
                    tracing::info!(
                        executor.execution.id = paused.id.as_str(),
                        "a grant lets a call the pause waited on run: the code goes on with the grants read"
                    );
                    segment = again.replaying(paused);
                }
            }
        }
    }

    /// The run ended: new code that was never stored answers as it ended,
    /// its history stored (a pause is stored now); a stored run is settled
    /// in the store.
    async fn finish(
        &self,
        run: &Mutex<Run>,
        outcome: Outcome,
        grants: Option<&RunGrants>,
    ) -> Result<Pass, ResumeError> {
        let mut run = run.lock().await;
        run.finishing = true;
        // Finishing, nobody starts another: this one is stopped before the
        // outcome is recorded (and the answer given, so a host shut down
        // after the answer leaves no task holding the store). It waits for
        // the lock, or sleeps: stopping it does not need the lock.
        if let Some(watcher) = run.watcher.take() {
            watcher.abort();
            let _ = watcher.await;
        }
        let Run { execution, stored, log, finishing, .. } = &mut *run;
        if *stored {
            let settled = self.settle(execution, outcome, log, grants).await;
            *finishing = !matches!(settled, Ok(Pass::Again(_)));
            return settled;
        }
        let execution_id = execution.id.clone();
        // An MCP task's outcome is read later (`tasks/get`): it is stored.
        let ended = if self.stored_outcomes { Write::Create } else { Write::HistoryOnly };
        match outcome {
            Outcome::Yielded { snapshot, .. } => {
                self.hand_over(execution, snapshot.journal, (Write::Create, Some(log))).await?;
                *stored = true;
                self.continue_elsewhere(&execution_id).await;
                Ok(Pass::Ended(ExecutionResult::Running { execution_id }))
            }
            Outcome::Completed { result, logs } => {
                count(Metric::ExecutionsCompleted);
                let event = ExecutionEvent::Complete { result: result.clone() };
                self.end_unstored(execution, event, logs.clone(), (ended, Some(log))).await?;
                Ok(Pass::Ended(ExecutionResult::Completed { execution_id, result, logs }))
            }
            Outcome::Failed { error, logs } => {
                count(Metric::ExecutionsFailed);
                let (error, event) = ended_with(&error);
                self.end_unstored(execution, event, logs.clone(), (ended, Some(log))).await?;
                Ok(Pass::Ended(ExecutionResult::Failed { execution_id, error, logs }))
            }
            Outcome::Paused { snapshot, logs } => {
                // On a copy: a pause a grant refused leaves the execution as it was.
                let mut paused = execution.clone();
                match self.pause(&mut paused, (snapshot, logs), (Write::Create, Some(&*log)), grants).await {
                    Ok(link) => {
                        *execution = paused;
                        Ok(Pass::Ended(paused_result(execution, link)))
                    }
                    Err(error) if error.is_grant_held() => {
                        *finishing = false;
                        Ok(Pass::Again(Box::new(paused)))
                    }
                    Err(error) => Err(error.into()),
                }
            }
        }
    }

    /// Store a pause: conditional on the grants of the calls it waits on
    /// when the run did not read them (too many to check in one write:
    /// refused as if one were held). A refusal leaves `execution` with the
    /// pause's journal (every call made so far) and asks the run to read them.
    async fn pause(
        &self,
        execution: &mut Execution,
        ended: (Snapshot, Vec<String>),
        write: (Write, Option<&RunLog>),
        grants: Option<&RunGrants>,
    ) -> Result<Option<ApprovalToken>, StoreError> {
        let unread = grants.filter(|grants| grants.unread());
        let ungranted = unread.map(|_| awaiting_approval(&ended.0.journal)).filter(|tools| !tools.is_empty());
        let paused = match &ungranted {
            Some(tools) if tools.len() > MAX_UNGRANTED_TOOLS => {
                execution.journal = ended.0.journal;
                Err(StoreError::grant_held())
            }
            _ => self.recorder.pause(execution, ended, self.approval_deadline(), write, ungranted.as_deref()).await,
        };
        if let (Err(error), Some(grants)) = (&paused, unread)
            && error.is_grant_held()
        {
            grants.want();
        }
        paused
    }

    /// Record how new code ended. When only its history is written, a failed
    /// write does not turn the outcome into an error: the calls were made,
    /// and an error would invite running the code again. It is logged.
    async fn end_unstored(
        &self,
        execution: &mut Execution,
        event: ExecutionEvent,
        logs: Vec<String>,
        write: (Write, Option<&RunLog>),
    ) -> Result<(), StoreError> {
        match self.recorder.end(execution, event, logs, write).await {
            Err(error) if write.0 == Write::HistoryOnly => {
                count(Metric::HistoryNotWritten);
                tracing::error!(executor.execution.id = execution.id.as_str(), %error, "history not written");
                Ok(())
            }
            other => other,
        }
    }

    /// Store how a stored run ended: completed, failed, declined (cancelled)
    /// or paused at its next approval. The calls it made are done and their
    /// outcome is known, so a failed write is tried again (conditional on the
    /// version, so safe to repeat). A record that was settled by someone else
    /// meanwhile (declared interrupted) stands, and is what is reported.
    async fn settle(
        &self,
        execution: &mut Execution,
        outcome: Outcome,
        log: &RunLog,
        grants: Option<&RunGrants>,
    ) -> Result<Pass, ResumeError> {
        let id = execution.id.clone();
        for attempt in 1..=SETTLE_ATTEMPTS {
            let mut next = execution.clone();
            let written = self.record_outcome(&mut next, outcome.clone(), log, grants).await;
            match written {
                Ok(result) => {
                    *execution = next;
                    let status = execution.status();
                    match status {
                        ExecutionStatus::Completed => count(Metric::ExecutionsCompleted),
                        ExecutionStatus::Paused => {}
                        ExecutionStatus::Running => {
                            self.continue_elsewhere(&id).await;
                            return Ok(Pass::Ended(result));
                        }
                        _ => count(Metric::ExecutionsFailed),
                    }
                    tracing::info!(executor.execution.id = id.as_str(), status = status.as_str(), "execution settled");
                    return Ok(Pass::Ended(result));
                }
                // Nothing was written: the run goes on, still ours.
                Err(error) if error.is_grant_held() => return Ok(Pass::Again(Box::new(next))),
                // Someone else wrote: a cancellation request (the record is
                // still ours: settle on top of it), or an `interrupted` that stands.
                Err(StoreError::Conflict { .. }) => {
                    let stored =
                        self.store.get_execution(Access::Internal, &id).await.map_err(|e| not_found(&id, e))?;
                    if stored.claim() != execution.claim() || !stored.is_running() {
                        return settled(&stored).map(Pass::Ended);
                    }
                    *execution = stored;
                }
                Err(StoreError::Backend { .. }) if attempt < SETTLE_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let stored = self.store.get_execution(Access::Internal, &id).await.map_err(|e| not_found(&id, e))?;
        settled(&stored).map(Pass::Ended)
    }

    /// How a stored run ended, applied to `next` and stored: handed on,
    /// paused at its next approval, completed, or failed.
    async fn record_outcome(
        &self,
        next: &mut Execution,
        outcome: Outcome,
        log: &RunLog,
        grants: Option<&RunGrants>,
    ) -> Result<ExecutionResult, StoreError> {
        let execution_id = next.id.clone();
        let write = (Write::Update, Some(log));
        match outcome {
            Outcome::Yielded { snapshot, .. } => {
                self.hand_over(next, snapshot.journal, write).await?;
                Ok(ExecutionResult::Running { execution_id })
            }
            Outcome::Paused { snapshot, logs } => {
                let link = self.pause(next, (snapshot, logs), write, grants).await?;
                Ok(paused_result(next, link))
            }
            Outcome::Completed { result, logs } => {
                let event = ExecutionEvent::Complete { result: result.clone() };
                let ended = ExecutionResult::Completed { execution_id, result, logs: logs.clone() };
                self.recorder.end(next, event, logs, write).await.map(|()| ended)
            }
            Outcome::Failed { error, logs } => {
                let (failure, event) = ended_with(&error);
                let ended = ExecutionResult::Failed { execution_id, error: failure, logs: logs.clone() };
                self.recorder.end(next, event, logs, write).await.map(|()| ended)
            }
        }
    }

    /// When a pause made now stops waiting for its decision.
    fn approval_deadline(&self) -> Timestamp {
        self.clock.now().plus(self.timeouts.approval_window)
    }

    /// Record a hand-off: the journal so far, no runner yet (the next claims
    /// it), and a heartbeat, so that a continuation that never starts reads
    /// as interrupted.
    async fn hand_over(
        &self,
        execution: &mut Execution,
        journal: Journal,
        write: (Write, Option<&RunLog>),
    ) -> Result<(), StoreError> {
        let event = ExecutionEvent::Yield { journal, lease: self.sandbox.limits().wall_clock };
        self.recorder.record(execution, event, write).await.map(drop)
    }

    /// Ask another invocation to continue a handed-on run. A failure is
    /// logged: nothing runs it then, and a read settles it as interrupted.
    async fn continue_elsewhere(&self, id: &ExecutionId) {
        let Some(continuations) = &self.continuations else { return };
        match continuations.start(id).await {
            Ok(()) => tracing::info!(executor.execution.id = id.as_str(), "execution handed on"),
            Err(error) => tracing::error!(executor.execution.id = id.as_str(), %error, "continuation not started"),
        }
    }
}

/// How one pass of a run ended: recorded, or not (a grant lets a call its
/// pause waited on run), the execution as the refused pause left it: its
/// journal holds every call made so far.
enum Pass {
    Ended(ExecutionResult),
    Again(Box<Execution>),
}

/// What a run's next pass keeps of its segment: everything but the code and
/// the journal, which come from the pause a grant refused.
struct Again {
    execution_id: ExecutionId,
    decisions: std::collections::BTreeMap<u32, executor_core::ApprovalAction>,
    max_tool_calls: Option<u32>,
    stop: Stop,
    calls: executor_sandbox::CallLog,
    owner: Option<Principal>,
}

impl Again {
    fn of(segment: &Segment) -> Self {
        Self {
            execution_id: segment.execution_id.clone(),
            decisions: segment.decisions.clone(),
            max_tool_calls: segment.max_tool_calls,
            stop: segment.stop.clone(),
            calls: segment.calls.clone(),
            owner: segment.owner.clone(),
        }
    }

    /// The segment that replays `paused`'s journal and plans its pending calls anew.
    fn replaying(self, paused: Box<Execution>) -> Segment {
        let Self { execution_id, decisions, max_tool_calls, stop, calls, owner } = self;
        let paused = *paused;
        let mut journal = paused.journal;
        journal.pending.clear();
        Segment { execution_id, code: paused.code, journal, decisions, max_tool_calls, stop, calls, owner }
    }
}

/// The tools a pause waits on for an approval (not for a connection), each once.
fn awaiting_approval(journal: &Journal) -> Vec<String> {
    let mut tools: Vec<String> =
        journal.pending.iter().filter(|call| call.connect.is_none()).map(|call| call.path.clone()).collect();
    tools.sort();
    tools.dedup();
    tools
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
