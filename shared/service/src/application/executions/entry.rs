//! The entry points: new code, the decisions of every channel, and what an
//! execution's owner (or the holder of its link) may read. Each loads what it
//! acts on as it stands now and checks who may see it before anything else.

use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    ApprovalAction, Channel, DecidedBy, Decider, ElicitationMode, Execution, ExecutionFailure, ExecutionId,
    ExecutionState, GrantedBy, LinkStatus, Principal, Remember, SessionId, TokenHash,
};
use executor_sandbox::{Segment, Tools};
use executor_store::{Access, StoreError};
use executor_telemetry::{Metric, count};
use tracing::Instrument;
use tracing::field::Empty;

use super::claim::Decision;
use super::outcome::{not_found, outcome_name, pending_step, settled, waits_for_connect};
use super::recorder::no_randomness;
use super::runner::Held;
use super::{ExecutionResult, Executions, ResumeError};
use crate::application::random::ApprovalToken;

/// Who sends new code: its owner and, over HTTP, the credential it came
/// with, which the execution keeps so an approver sees who asks.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    pub owner: &'a Principal,
    pub credential: Option<&'a DecidedBy>,
}

impl<'a> From<&'a Principal> for Asker<'a> {
    fn from(owner: &'a Principal) -> Self {
        Self { owner, credential: None }
    }
}

/// New code turned away before it ran (`busy`, a quota): nothing is stored.
pub struct Refused {
    pub execution_id: ExecutionId,
    pub error: ExecutionFailure,
}

impl Executions {
    /// Run new code. Nothing is stored unless it pauses or outlasts the
    /// response budget (then it is handed on and answers `running`).
    pub async fn execute<'a>(
        &self,
        asker: impl Into<Asker<'a>>,
        session: Option<&SessionId>,
        mode: ElicitationMode,
        code: String,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, StoreError> {
        Ok(match self.start(asker.into(), session, mode, code, tools).await? {
            Ok(result) => result,
            Err(Refused { execution_id, error }) => ExecutionResult::Failed { execution_id, error, logs: Vec::new() },
        })
    }

    /// Admit new code (a free slot, the owner's quotas) and run it in the
    /// caller's `view`; refused before anything ran or was stored when there is no room.
    pub(super) async fn start(
        &self,
        asker: Asker<'_>,
        session: Option<&SessionId>,
        mode: ElicitationMode,
        code: String,
        view: Arc<dyn Tools>,
    ) -> Result<Result<ExecutionResult, Refused>, StoreError> {
        let admitted = match self.admit(asker.owner).await? {
            Ok(admitted) => admitted,
            Err(refused) => return Ok(Err(refused)),
        };
        let (execution, segment) = self.new_execution(&admitted, asker, session, mode, code, &view)?;
        // The quota's running slot is given back when the run ends, which may
        // be after this answer.
        let ran = self.runner.run(execution, false, segment, view, admitted.held).await.map_err(recorded)?;
        Ok(Ok(ran))
    }

    /// A new execution's id, a free slot and the owner's quotas taken for
    /// it; or, with nothing taken, why there is no room.
    pub(super) async fn admit(&self, owner: &Principal) -> Result<Result<Admitted, Refused>, StoreError> {
        let id = crate::application::random::execution_id(self.runner.clock.now()).map_err(no_randomness)?;
        let Ok(slot) = self.slot().await else {
            let message = ResumeError::Busy(self.max_concurrent).to_string();
            let error = ExecutionFailure { code: "busy".into(), message, retry_after_ms: None };
            return Ok(Err(Refused { execution_id: id, error }));
        };
        let now = self.runner.clock.now();
        let (quota, max_tool_calls) = match &self.runner.quotas {
            None => (None, None),
            Some(gate) => match gate.admit(owner, &id, now, self.runner.run_limit()).await? {
                Ok(quota) => (quota, gate.limits(owner).tool_calls_per_execution),
                Err(exceeded) => {
                    let error = ExecutionFailure::quota(&exceeded);
                    return Ok(Err(Refused { execution_id: id, error }));
                }
            },
        };
        Ok(Ok(Admitted { id, held: Held { slot, quota }, max_tool_calls }))
    }

    /// The new execution of `code` and its first segment, as `admitted`.
    pub(super) fn new_execution(
        &self,
        admitted: &Admitted,
        asker: Asker<'_>,
        session: Option<&SessionId>,
        mode: ElicitationMode,
        code: String,
        view: &Arc<dyn Tools>,
    ) -> Result<(Execution, Segment), StoreError> {
        let (id, now) = (admitted.id.clone(), self.runner.clock.now());
        let seed = crate::application::random::seed().map_err(no_randomness)?;
        let segment = Segment::start(id.clone(), code.clone(), now, seed)
            .with_max_tool_calls(admitted.max_tool_calls)
            .owned_by(asker.owner.clone());
        count(Metric::ExecutionsStarted);
        let mut execution =
            Execution::start(id, asker.owner.clone(), session.cloned(), mode, code, segment.journal.clone(), now);
        execution.toolkit = view.toolkit().cloned();
        execution.asked_by = asker.credential.cloned();
        Ok((execution, segment))
    }

    /// The `resume` tool. Only a model-mode pause is decided here, and only
    /// when the model names an action; without one the pause is answered
    /// again (its text tells the model to ask the user first). A browser pause
    /// is decided by the person at the link: `resume` waits for the outcome.
    /// A native pause is decided by the answer to its own elicitation:
    /// `resume` reports where it stands.
    ///
    /// `pause` names the pause the decision is for (the `pauseId` of the
    /// paused result). When the execution is no longer at that pause (a
    /// retried decision whose answer was lost, after the code went on), the
    /// decision is not applied to whatever is pending now: the answer is
    /// where the execution stands, e.g. the next pause, shown for the first time.
    pub async fn resume(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        action: Option<ApprovalAction>,
        pause: Option<u32>,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Owner(owner), id).await?;
        let tools = self.runner.tools.scope(&execution, tools)?;
        let elsewhere = pause.is_some_and(|step| {
            !matches!(execution.state(), ExecutionState::Paused { .. }) || pending_step(&execution) != Some(step)
        });
        // A running execution is followed; a cancel (not one meant for a pause
        // it has left) asks its runner to stop at the next safe point. An
        // accept or decline finds nothing to decide, as before.
        let cancel = action == Some(ApprovalAction::Cancel) && pause.is_none();
        if execution.is_running() && (action.is_none() || cancel) {
            return self.follow(execution, cancel.then(|| Decider::model(Channel::Model))).await;
        }
        match (execution.mode, action) {
            (ElicitationMode::Model, Some(_)) if elsewhere => settled(&execution),
            (ElicitationMode::Browser, _) => {
                let span = tracing::info_span!(
                    "execution.await_decision",
                    executor.execution.id = id.as_str(),
                    executor.execution.outcome = Empty,
                );
                let watched = pending_step(&execution);
                let wait = self.approval_wait;
                let result = self.await_outcome(execution, watched, wait).instrument(span.clone()).await;
                span.record("executor.execution.outcome", outcome_name(&result));
                result
            }
            // The model decides this call only: it can never remember a decision.
            (ElicitationMode::Model, Some(action)) => {
                self.decide(execution, Decision::plain(action, Decider::model(Channel::Model)), tools).await
            }
            // A pause for a connection is answered with a fresh connect link.
            (ElicitationMode::Model, None) | (ElicitationMode::Native, _) if waits_for_connect(&execution) => {
                self.await_outcome(execution, None, Duration::ZERO).await
            }
            (ElicitationMode::Model, None) | (ElicitationMode::Native, _) => settled(&execution),
        }
    }

    /// The answer to a native-mode elicitation: it decides the pause at `step`
    /// (the one it was asked about) and no other. Once that pause is decided,
    /// the same answer again is `AlreadySettled`. `remember` is the person's
    /// "always allow" choice in their client; `by`, the credential their
    /// client authenticated with.
    pub async fn answer_native(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        step: u32,
        (action, remember): (ApprovalAction, Remember),
        by: DecidedBy,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Owner(owner), id).await?;
        let tools = self.runner.tools.scope(&execution, tools)?;
        let asked = execution.mode == ElicitationMode::Native
            && matches!(execution.state(), ExecutionState::Paused { .. })
            && pending_step(&execution) == Some(step);
        if !asked {
            return match execution.state() {
                ExecutionState::Expired => Err(ResumeError::Expired(id.clone())),
                _ => Err(ResumeError::AlreadySettled(id.clone())),
            };
        }
        let remember = remembered(remember, GrantedBy::Client);
        let by = Decider { channel: Channel::Client, by };
        self.decide(execution, Decision { action, link: None, remember, by }, tools).await
    }

    /// Apply the owner's decision whatever the mode, through their own
    /// channel: the JSON API (`POST /api/executions/{id}/resume`) or the console.
    pub async fn decide_as_owner(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        (action, remember): (ApprovalAction, Remember),
        by: Decider,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Owner(owner), id).await?;
        let tools = self.runner.tools.scope(&execution, tools)?;
        let granted_by = match by.channel {
            Channel::Console => GrantedBy::Console,
            _ => GrantedBy::OwnerApi,
        };
        let remember = remembered(remember, granted_by);
        self.decide(execution, Decision { action, link: None, remember, by }, tools).await
    }

    /// Apply a decision sent through a browser approval link. A link that
    /// already decided says so; any other unknown link is "not found".
    pub async fn decide_with_link(
        &self,
        id: &ExecutionId,
        token: &str,
        action: ApprovalAction,
        remember: Remember,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let remember = remembered(remember, GrantedBy::ApprovalPage);
        let link = ApprovalToken::hash_of(token);
        self.decide_through_link(id, (action, remember, link), Channel::ApprovalPage, tools).await
    }

    /// Apply a decision through the link whose hash is `hash`: a connect
    /// callback knows the link its authorization began with, not the link itself.
    pub(crate) async fn decide_with_link_hash(
        &self,
        id: &ExecutionId,
        hash: &TokenHash,
        action: ApprovalAction,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        self.decide_through_link(id, (action, None, hash.clone()), Channel::Connect, tools).await
    }

    /// Apply a decision (`action`, what to remember, the link's hash) if its
    /// link is open on the execution's current pause. Whoever holds the link
    /// decides: the history names the link, sent to the owner.
    async fn decide_through_link(
        &self,
        id: &ExecutionId,
        (action, remember, hash): (ApprovalAction, Option<GrantedBy>, TokenHash),
        channel: Channel,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Internal, id).await?;
        let tools = self.runner.tools.scope(&execution, tools)?;
        let by = Decider { channel, by: DecidedBy::link(&execution.owner, &hash) };
        match execution.links.status(&hash) {
            LinkStatus::Open => {
                let decision = Decision { action, link: Some(hash), remember, by };
                self.decide(execution, decision, tools).await
            }
            LinkStatus::Spent => Err(ResumeError::AlreadySettled(id.clone())),
            LinkStatus::Unknown => Err(ResumeError::NotFound(id.clone())),
        }
    }

    /// The execution an open approval link shows; an expired one is marked so.
    /// The link that decided says so (a reload after the click), like `decide_with_link`.
    pub async fn view_with_link(&self, id: &ExecutionId, token: &str) -> Result<Execution, ResumeError> {
        self.view_with_link_hash(id, &ApprovalToken::hash_of(token)).await
    }

    /// [`Executions::view_with_link`] by the link's hash (a connect callback's).
    pub(crate) async fn view_with_link_hash(
        &self,
        id: &ExecutionId,
        hash: &TokenHash,
    ) -> Result<Execution, ResumeError> {
        let execution = self.load(Access::Internal, id).await?;
        match execution.links.status(hash) {
            LinkStatus::Open => Ok(execution),
            LinkStatus::Spent => Err(ResumeError::AlreadySettled(id.clone())),
            LinkStatus::Unknown => Err(ResumeError::NotFound(id.clone())),
        }
    }

    /// Where an execution of `owner` stands.
    pub async fn view(&self, owner: &Principal, id: &ExecutionId) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Owner(owner), id).await?;
        settled(&execution)
    }

    /// [`Executions::view`] for a caller whose view is `tools` (`GET
    /// /api/executions/{id}`): another toolkit's execution is not found.
    pub async fn view_in(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        settled(&self.task(owner, id, tools).await?)
    }

    /// The execution as it stands now: a pause past its window is expired and
    /// a stranded continuation interrupted (and stored so) before anyone sees it.
    pub(super) async fn load(&self, access: Access<'_>, id: &ExecutionId) -> Result<Execution, ResumeError> {
        let mut execution = self.runner.store.get_execution(access, id).await.map_err(|e| not_found(id, e))?;
        let now = self.runner.clock.now();
        match *execution.state() {
            ExecutionState::Paused { deadline } if now >= deadline => {
                self.runner.recorder.expire(&mut execution, now).await?
            }
            _ if execution.is_stranded(now) => {
                self.runner.recorder.interrupt(&mut execution, now).await.map_err(|e| not_found(id, e))?
            }
            _ => {}
        }
        Ok(execution)
    }
}

/// What new code was admitted with: its id, what it holds until it ends,
/// and the owner's cap on its tool calls.
pub(super) struct Admitted {
    pub id: ExecutionId,
    pub held: Held,
    pub max_tool_calls: Option<u32>,
}

/// A run's error as the store error `execute` reports.
pub(super) fn recorded(error: ResumeError) -> StoreError {
    match error {
        ResumeError::Store(error) => error,
        other => StoreError::Backend { operation: "record the outcome of an execution", detail: other.to_string() },
    }
}

/// Who to record as granting, when the person chose "always".
fn remembered(remember: Remember, by: GrantedBy) -> Option<GrantedBy> {
    (remember == Remember::Always).then_some(by)
}
