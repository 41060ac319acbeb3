//! The one writer of executions. Every change is an event that core's
//! `Execution::apply` turns into the next record and an [`Applied`] (what
//! happened, who made it happen, when); the recorder stores that record with
//! the lifecycle events of the change and its entries in the execution's
//! history (with the calls the run made since the last write) in the same
//! conditional write, then has the events delivered. A lost race
//! (`Conflict`) writes nothing. An execution that ended within its answer is
//! never stored: its history alone is.

use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    Actor, Applied, Clock, ElicitationMode, Execution, ExecutionEvent, ExecutionRecord, ExecutionStatus, HistoryAppend,
    Receipt, Timestamp, TransitionError, Via, entries_of,
};
use executor_sandbox::{CallLog, Snapshot};
use executor_store::{Access, Emitted, ExecutionStore, HistoryStore, StoreError, Ungranted};
use executor_telemetry::{Metric, count};
use tracing::{Instrument, Span};

use super::outcome::waits_for_connect;
use crate::application::outbox::Events;
use crate::application::random::ApprovalToken;

/// Whether a write stores a new execution, updates the stored one, or
/// stores only the history of one that is never stored (it ended within
/// its answer).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Write {
    Create,
    Update,
    HistoryOnly,
}

/// What a run adds to the history of the writes that record it: the calls
/// it made, and the surface its code arrived through.
#[derive(Clone)]
pub(super) struct RunLog {
    pub calls: CallLog,
    pub via: Via,
}

#[derive(Clone)]
pub(super) struct Recorder {
    store: Arc<dyn ExecutionStore>,
    history: Arc<dyn HistoryStore>,
    clock: Arc<dyn Clock>,
    /// How long history is kept (`EXECUTOR_AUDIT_RETENTION_DAYS`).
    pub(super) retention: Duration,
    /// Lifecycle events, stored with the changes they describe; `None`: off.
    pub(super) events: Option<Events>,
}

impl Recorder {
    pub(super) fn new(store: Arc<dyn ExecutionStore>, history: Arc<dyn HistoryStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, history, clock, retention: executor_core::DEFAULT_AUDIT_RETENTION, events: None }
    }

    /// Store `execution` as `applied` left it: created, or updated
    /// conditional on the version read, with the lifecycle events and the
    /// history entries of that change (and the calls `run` made since its
    /// last write) in the same write (`link`: the approval link it opened).
    pub(super) async fn write(
        &self,
        execution: &mut Execution,
        applied: &Applied,
        write: (Write, Option<&RunLog>),
        link: Option<&ApprovalToken>,
    ) -> Result<(), StoreError> {
        self.write_with(execution, applied, write, link, Beside::default()).await
    }

    /// [`Recorder::write`], with the conditions of `beside`.
    async fn write_with(
        &self,
        execution: &mut Execution,
        applied: &Applied,
        (write, run): (Write, Option<&RunLog>),
        link: Option<&ApprovalToken>,
        beside: Beside<'_>,
    ) -> Result<(), StoreError> {
        let calls = run.map(|run| run.calls.unwritten()).unwrap_or_default();
        let history = self.history_of(execution, applied, write, run, &calls);
        let emitted = match (&self.events, write) {
            (Some(events), Write::Create) => events.of_execution(None, execution, link, decider(applied)),
            (Some(events), Write::Update) => events.of_execution(Some(applied.from), execution, link, decider(applied)),
            (None, _) | (_, Write::HistoryOnly) => Vec::new(),
        };
        let (owner, toolkit) = (execution.owner.clone(), execution.toolkit.clone());
        let ungranted = beside.ungranted.map(|tools| Ungranted { owner: &owner, toolkit: toolkit.as_ref(), tools });
        let with = |history| Emitted { events: &emitted, history, receipt: beside.receipt, ungranted };
        match (write, history) {
            (Write::Create, history) => self.store.create_execution_emitting(execution, with(history.as_ref())).await?,
            (Write::Update, history) => self.store.update_execution_emitting(execution, with(history.as_ref())).await?,
            (Write::HistoryOnly, Some(history)) => self.history.queue_history(history).await?,
            (Write::HistoryOnly, None) => {}
        }
        if let Some(run) = run {
            run.calls.mark_written(calls.len());
        }
        if let (Some(events), false) = (&self.events, emitted.is_empty()) {
            events.wake();
        }
        Ok(())
    }

    /// The history a write adds: none for one that changes neither the
    /// status nor records anything (a heartbeat, a continuation taken).
    fn history_of(
        &self,
        execution: &Execution,
        applied: &Applied,
        write: Write,
        run: Option<&RunLog>,
        calls: &[executor_core::Called],
    ) -> Option<HistoryAppend> {
        let created = (write != Write::Update).then(|| run.map_or(Via::Mcp, |run| run.via));
        let entries = entries_of(applied, execution, calls, created);
        if entries.is_empty() && applied.from == applied.to {
            return None;
        }
        // The version the write stores: a create stores it as is, an update the next one.
        let part = if write == Write::Update { execution.version + 1 } else { execution.version };
        let keep_until = applied.at.plus(self.retention);
        Some(HistoryAppend { record: ExecutionRecord::of(execution), part, entries, keep_until })
    }

    /// Apply `event` now and store the result. On any error `execution` is
    /// left as it was.
    pub(super) async fn record(
        &self,
        execution: &mut Execution,
        event: ExecutionEvent,
        write: (Write, Option<&RunLog>),
    ) -> Result<Applied, StoreError> {
        let mut next = execution.clone();
        let applied = next.apply(event, self.clock.now()).map_err(transition_bug)?;
        self.write(&mut next, &applied, write, None).await?;
        *execution = next;
        Ok(applied)
    }

    /// Store new code as handed on before it runs, taking the idempotency key
    /// of `receipt` in the same write: `AlreadyExists { what: "idempotency
    /// key" }` (and nothing stored) when a live receipt holds it.
    pub(super) async fn hand_on_once(
        &self,
        execution: &mut Execution,
        event: ExecutionEvent,
        run: &RunLog,
        receipt: &Receipt,
    ) -> Result<(), StoreError> {
        let mut next = execution.clone();
        let applied = next.apply(event, self.clock.now()).map_err(transition_bug)?;
        let beside = Beside { receipt: Some(receipt), ..Beside::default() };
        self.write_with(&mut next, &applied, (Write::Create, Some(run)), None, beside).await?;
        *execution = next;
        Ok(())
    }

    /// Apply a final event (completed, failed, declined) with the run's
    /// `logs`, and store it.
    pub(super) async fn end(
        &self,
        execution: &mut Execution,
        event: ExecutionEvent,
        logs: Vec<String>,
        write: (Write, Option<&RunLog>),
    ) -> Result<(), StoreError> {
        let applied = execution.apply(event, self.clock.now()).map_err(transition_bug)?;
        execution.logs = logs;
        self.write(execution, &applied, write, None).await
    }

    /// Record the pause and store it, in an `execution.pause` span whose
    /// traceparent the execution keeps (its resume links to it); in browser
    /// mode, open its first approval link. `ungranted`: the tools whose
    /// grants the write checks (the run did not read them).
    pub(super) async fn pause(
        &self,
        execution: &mut Execution,
        (snapshot, logs): (Snapshot, Vec<String>),
        deadline: Timestamp,
        write: (Write, Option<&RunLog>),
        ungranted: Option<&[String]>,
    ) -> Result<Option<ApprovalToken>, StoreError> {
        // The tools waiting for a decision, by path: never their arguments.
        let pending: Vec<&str> = snapshot.journal.pending.iter().map(|call| call.path.as_str()).collect();
        let pending = pending.join(",");
        let span = tracing::info_span!(
            "execution.pause",
            executor.execution.id = execution.id.as_str(),
            executor.steps.completed = snapshot.journal.steps.len() as i64,
            executor.steps.pending = snapshot.journal.pending.len() as i64,
            executor.pending.paths = pending.as_str(),
        );
        async {
            let journal = snapshot.journal;
            let applied = execution
                .apply(ExecutionEvent::Pause { journal, deadline }, self.clock.now())
                .map_err(transition_bug)?;
            execution.logs = logs;
            execution.pause_trace = executor_telemetry::traceparent(&Span::current());
            // A connect pause has a link in every mode: it is where the owner connects.
            let token = match execution.mode == ElicitationMode::Browser || waits_for_connect(execution) {
                true => {
                    let token = ApprovalToken::generate().map_err(no_randomness)?;
                    execution.links.open(token.hash());
                    Some(token)
                }
                false => None,
            };
            let beside = Beside { ungranted, ..Beside::default() };
            self.write_with(execution, &applied, write, token.as_ref(), beside).await?;
            count(Metric::ExecutionsPaused);
            tracing::info!(executor.execution.id = execution.id.as_str(), pending, "execution paused");
            Ok(token)
        }
        .instrument(span)
        .await
    }

    /// A fresh approval link on the current pause, stored (no event: the
    /// execution's state does not change). `Conflict` when it was decided meanwhile.
    pub(super) async fn open_link(&self, execution: &mut Execution) -> Result<ApprovalToken, StoreError> {
        let token = ApprovalToken::generate().map_err(no_randomness)?;
        let mut next = execution.clone();
        next.links.open(token.hash());
        self.store.update_execution(&mut next).await?;
        *execution = next;
        Ok(token)
    }

    /// Expire a paused execution whose approval window closed. A lost race
    /// means someone else changed it first: `execution` then becomes what the
    /// store holds, never the expiry that was not written.
    pub(super) async fn expire(&self, execution: &mut Execution, now: Timestamp) -> Result<(), StoreError> {
        let was_paused = execution.status() == ExecutionStatus::Paused;
        let mut expired = execution.clone();
        let Ok(applied) = expired.apply(ExecutionEvent::Expire, now) else {
            return Ok(());
        };
        match self.write(&mut expired, &applied, (Write::Update, None), None).await {
            Ok(()) => {
                if was_paused {
                    count(Metric::ApprovalsExpired);
                }
                tracing::info!(executor.execution.id = execution.id.as_str(), "execution expired");
                *execution = expired;
                Ok(())
            }
            Err(StoreError::Conflict { .. }) => {
                *execution = self.store.get_execution(Access::Internal, &execution.id).await?;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Record that nothing runs a stranded run any more. Losing the race to
    /// the run's own late write is fine: that one stands.
    pub(super) async fn interrupt(&self, execution: &mut Execution, now: Timestamp) -> Result<(), StoreError> {
        let applied = execution.apply(ExecutionEvent::Interrupt, now).map_err(transition_bug)?;
        match self.write(execution, &applied, (Write::Update, None), None).await {
            Ok(()) => {
                count(Metric::ExecutionsFailed);
                count(Metric::ExecutionsInterrupted);
                tracing::warn!(executor.execution.id = execution.id.as_str(), "stranded continuation interrupted");
                Ok(())
            }
            Err(StoreError::Conflict { .. }) => {
                *execution = self.store.get_execution(Access::Internal, &execution.id).await?;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// What a write is conditional on beside the execution's own condition.
#[derive(Default)]
struct Beside<'a> {
    /// A create's idempotency key: taken only if no live receipt holds it.
    receipt: Option<&'a Receipt>,
    /// A pause's tools: stored only if the owner holds no grant for them.
    ungranted: Option<&'a [String]>,
}

/// Who decided, when a decision made this change.
fn decider(applied: &Applied) -> Option<&executor_core::Decider> {
    match &applied.by {
        Actor::Decider(decider) => Some(decider),
        _ => None,
    }
}

/// The sandbox and the state machine disagree: a bug, reported rather than hidden.
pub(super) fn transition_bug(e: TransitionError) -> StoreError {
    StoreError::Corrupt { what: "execution", detail: e.to_string() }
}

pub(super) fn no_randomness(e: getrandom::Error) -> StoreError {
    StoreError::Backend { operation: "draw random ids", detail: e.to_string() }
}
