//! A decision takes a paused execution: paused -> resuming, conditional on
//! the version read, so of any number of racing decisions exactly one wins;
//! the winner alone replays the code with the decision.

use std::sync::Arc;

use executor_core::{
    ApprovalAction, Decider, Execution, ExecutionEvent, ExecutionId, ExecutionState, GrantedBy, TokenHash,
    TransitionError,
};
use executor_sandbox::{Segment, Snapshot, Tools};
use executor_store::{Access, StoreError};
use executor_telemetry::{Metric, count};
use tracing::Instrument;
use tracing::field::Empty;

use super::outcome::{not_found, outcome_name};
use super::recorder::{Write, no_randomness};
use super::runner::{Held, Runner};
use super::{ExecutionResult, Executions, ResumeError};

/// A decision on a pause, and where it came from.
pub(super) struct Decision {
    pub action: ApprovalAction,
    /// The approval link it came through, if any: the claim spends it.
    pub link: Option<TokenHash>,
    /// Who to record as granting, when the person chose "always allow".
    pub remember: Option<GrantedBy>,
    pub by: Decider,
}

impl Decision {
    /// A decision that remembers nothing and came through no link.
    pub fn plain(action: ApprovalAction, by: Decider) -> Self {
        Self { action, link: None, remember: None, by }
    }
}

impl Executions {
    /// Claim the pause with the decision (one winner), replay, and settle or
    /// pause again, in an `execution.resume` span linked to the span of the pause.
    pub(super) async fn decide(
        &self,
        execution: Execution,
        decision: Decision,
        view: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let span = tracing::info_span!(
            "execution.resume",
            executor.execution.id = execution.id.as_str(),
            executor.approval.action = decision.action.as_str(),
            executor.execution.outcome = Empty,
        );
        if let Some(paused_by) = &execution.pause_trace {
            executor_telemetry::link(&span, paused_by, "paused_by");
        }
        let result = self.claim_and_replay(execution, decision, view).instrument(span.clone()).await;
        span.record("executor.execution.outcome", outcome_name(&result));
        result
    }

    async fn claim_and_replay(
        &self,
        execution: Execution,
        decision: Decision,
        view: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        // A slot first: a claim is never made by a run that cannot start.
        let slot = self.slot().await?;
        let action = decision.action;
        let execution = self.claim(execution, &decision).await?;
        count(if action == ApprovalAction::Accept { Metric::ApprovalsAccepted } else { Metric::ApprovalsDeclined });
        tracing::info!(executor.execution.id = execution.id.as_str(), action = action.as_str(), "approval decided");
        self.runner.tools.remember(&execution, action, decision.remember).await;

        // Replayed: the only winner runs the continuation.
        let snapshot = Snapshot { code: execution.code.clone(), journal: execution.journal.clone() };
        executor_telemetry::add(Metric::ReplaySteps, snapshot.journal.steps.len() as u64);
        let max_tool_calls = self.runner.max_tool_calls(&execution.owner);
        let segment = Segment::resume(execution.id.clone(), snapshot, action)
            .with_max_tool_calls(max_tool_calls)
            .owned_by(execution.owner.clone());
        self.runner.run(execution, true, segment, view, Held { slot, quota: None }).await
    }

    /// Paused -> resuming with the decision, counted against the resume cap,
    /// in one write conditional on the version just read. `Ok` only for the winner.
    async fn claim(&self, mut execution: Execution, decision: &Decision) -> Result<Execution, ResumeError> {
        let id = execution.id.clone();
        let now = self.runner.clock.now();
        let claim = crate::application::random::claim_id().map_err(no_randomness)?;
        let event = ExecutionEvent::Claim {
            action: decision.action,
            link: decision.link.clone(),
            claim: claim.clone(),
            by: decision.by.clone(),
        };
        let mut claimed = execution.clone();
        let applied = match claimed.apply(event, now) {
            Ok(applied) => applied,
            Err(TransitionError::ApprovalExpired { .. }) => {
                self.runner.recorder.expire(&mut execution, now).await?;
                return Err(ResumeError::Expired(id));
            }
            Err(_) if *execution.state() == ExecutionState::Expired => return Err(ResumeError::Expired(id)),
            Err(_) => return Err(ResumeError::AlreadySettled(id)),
        };
        // The resume cap, counted in the claim's own write.
        if let Some(gate) = &self.runner.quotas {
            gate.check_resume(&execution.owner, execution.resumes()).map_err(ResumeError::Quota)?;
        }
        match self.runner.recorder.write(&mut claimed, &applied, (Write::Update, None), None).await {
            Ok(()) => Ok(claimed),
            Err(StoreError::Conflict { .. }) => Err(ResumeError::AlreadySettled(id)),
            // The answer was lost, not necessarily the write: if the stored
            // claim is ours, we won and go on; anyone else's, we lost.
            Err(error @ StoreError::Backend { .. }) => {
                let stored =
                    self.runner.store.get_execution(Access::Internal, &id).await.map_err(|e| not_found(&id, e))?;
                let ours =
                    matches!(stored.state(), ExecutionState::Resuming { .. }) && stored.claim() == Some(claim.as_str());
                match stored.state() {
                    _ if ours => Ok(stored),
                    ExecutionState::Paused { .. } => Err(ResumeError::Store(error)),
                    _ => Err(ResumeError::AlreadySettled(id)),
                }
            }
            Err(e) => Err(not_found(&id, e)),
        }
    }

    /// The other side of a hand-off (the approval function, invoked
    /// asynchronously): claim the handed-on execution (one winner: a second
    /// delivery finds it claimed) and run it on from its journal, to its end.
    /// The journal's calls are replayed, never made again.
    pub async fn continue_handed_on(
        &self,
        id: &ExecutionId,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let mut execution = self.load(Access::Internal, id).await?;
        if *execution.state() != ExecutionState::Running || execution.claim().is_some() {
            return Err(ResumeError::AlreadySettled(id.clone()));
        }
        // In the toolkit's view if it started in one.
        let view = self.runner.tools.scope(&execution, tools)?;
        let slot = self.slot().await?;
        let claim = crate::application::random::claim_id().map_err(no_randomness)?;
        match self
            .runner
            .recorder
            .record(&mut execution, ExecutionEvent::Continue { claim }, (Write::Update, None))
            .await
        {
            Ok(_) => {}
            Err(StoreError::Conflict { .. }) => return Err(ResumeError::AlreadySettled(id.clone())),
            Err(e) => return Err(not_found(id, e)),
        }
        let snapshot = Snapshot { code: execution.code.clone(), journal: execution.journal.clone() };
        executor_telemetry::add(Metric::ReplaySteps, snapshot.journal.steps.len() as u64);
        let segment = Segment::resume(id.clone(), snapshot, ApprovalAction::Accept)
            .with_max_tool_calls(self.runner.max_tool_calls(&execution.owner))
            .owned_by(execution.owner.clone());
        // Nobody waits for an answer here: the run goes on to its end (its
        // wall clock ends it first), and is never handed on again.
        let runner = Runner { budget: self.runner.run_limit(), continuations: None, ..self.runner.clone() };
        runner.run(execution, true, segment, view, Held { slot, quota: None }).await
    }
}
