//! Executions across processes: run, and on a pause persist the snapshot; later
//! claim it (one winner), replay with the decision, and settle.
//!
//! Every state change goes through `Execution::apply` (the one transition
//! table) and is written with `update_execution`, which is conditional on the
//! version read: two racing resumes cannot both run the approved call.
//!
//! A run that outlasts the response budget goes on in a task of its own
//! (`handoff`): the answer is `running`, and `resume` follows it.

mod handoff;
mod tasks;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    ApprovalAction, Clock, ElicitationMode, Execution, ExecutionEvent, ExecutionFailure, ExecutionId, ExecutionState,
    ExecutionStatus, GrantedBy, LinkStatus, PendingCall, Principal, QuotaExceeded, Remember, SessionId, Timeouts,
    Timestamp, TokenHash, ToolkitName, TransitionError,
};
use executor_sandbox::{Connections, Limits, Sandbox, Segment, Snapshot, Tools};
use executor_store::{Access, ExecutionStore, StoreError};
use executor_telemetry::{Metric, count};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::grants::Grants;
use crate::quotas::QuotaGate;
use crate::random::ApprovalToken;
use crate::{Continuations, Events};
use handoff::Held;

/// How long a settled or expired execution stays readable (then TTL removes it),
/// so a late approval link says "expired" rather than "not found".
const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// How often a waiting browser-mode `resume` looks at the stored execution.
const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Writes of a known outcome tried before the error is reported.
const SETTLE_ATTEMPTS: u64 = 3;
/// On top of the sandbox's wall clock: time to record a run's outcome.
const SETTLE_SLACK: Duration = Duration::from_secs(60);

/// The default of [`Executions::with_response_budget`]: below API Gateway's 30 s.
pub const DEFAULT_RESPONSE_BUDGET: Duration = Duration::from_secs(20);

/// What an `execute` or `resume` ended with, for the MCP and approval layers to render.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionResult {
    Completed {
        execution_id: ExecutionId,
        result: Value,
        logs: Vec<String>,
    },
    Failed {
        execution_id: ExecutionId,
        error: ExecutionFailure,
        logs: Vec<String>,
    },
    /// Persisted; waiting for a decision on `pending` until `expires_at`.
    Paused {
        execution_id: ExecutionId,
        expires_at: Timestamp,
        pending: Vec<PendingCall>,
        logs: Vec<String>,
        /// A fresh browser approval link, in browser mode.
        link: Option<ApprovalToken>,
        /// Who may decide: the model (`resume` with an action), the person at
        /// the link (browser), or the person answering in their client (native).
        mode: ElicitationMode,
    },
    /// Still running, past the response budget: it goes on without the
    /// caller, and `resume` follows it.
    Running {
        execution_id: ExecutionId,
    },
}

impl ExecutionResult {
    pub fn execution_id(&self) -> &ExecutionId {
        match self {
            Self::Completed { execution_id, .. }
            | Self::Failed { execution_id, .. }
            | Self::Paused { execution_id, .. }
            | Self::Running { execution_id } => execution_id,
        }
    }

    /// Its `status` in the results: `completed`, `failed`, `paused` or `running`.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Completed { .. } => "completed",
            Self::Failed { .. } => "failed",
            Self::Paused { .. } => "paused",
            Self::Running { .. } => "running",
        }
    }
}

/// Why a resume did nothing. `code()` is its `error.code` in the results (docs/mcp.md, "Tools").
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("no paused execution {0} exists for you; check the executionId returned by execute")]
    NotFound(ExecutionId),
    #[error(
        "execution {0} expired: nobody decided its pause within the approval window (EXECUTOR_APPROVAL_WINDOW_MS), \
         so the call was not made; run the code again"
    )]
    Expired(ExecutionId),
    #[error("execution {0} was already resumed or finished; its decision was applied once")]
    AlreadySettled(ExecutionId),
    #[error("the server is running as many executions as it allows at once ({0}); nothing ran: retry in a few seconds")]
    Busy(usize),
    #[error("{0}")]
    Quota(QuotaExceeded),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ResumeError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "execution_not_found",
            Self::Expired(_) => "execution_expired",
            Self::AlreadySettled(_) => "execution_already_settled",
            Self::Busy(_) => "busy",
            Self::Quota(_) => "quota_exceeded",
            Self::Store(_) => "store_error",
        }
    }
}

/// How long a run waits for a free slot before it is refused as `busy`.
const QUEUE_WAIT: Duration = Duration::from_secs(1);

/// The default of [`Executions::with_max_concurrent`]: with the sandbox's
/// 64 MiB heap each, at most 1 GiB of sandbox memory at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;

/// Cheap to clone (handles and settings): a handed-on run's task holds a clone.
#[derive(Clone)]
pub struct Executions {
    store: Arc<dyn ExecutionStore>,
    sandbox: Sandbox,
    timeouts: Timeouts,
    clock: Arc<dyn Clock>,
    approval_wait: Duration,
    /// One permit per sandbox run in progress: memory stays bounded however
    /// many requests arrive.
    slots: Arc<Semaphore>,
    max_concurrent: usize,
    /// Each toolkit's view of the tools: a toolkit's execution continues in it,
    /// whichever endpoint or link decides it.
    toolkits: Arc<HashMap<ToolkitName, Arc<dyn Tools>>>,
    /// Per-owner quotas; `None` counts nothing.
    quotas: Option<QuotaGate>,
    /// Remembered approvals, applied to every run of their owner's code.
    grants: Option<Arc<Grants>>,
    /// How long an `execute` or `resume` waits for its outcome before it
    /// answers `running`.
    budget: Duration,
    /// Who continues a run past the budget, when this process cannot.
    continuations: Option<Arc<dyn Continuations>>,
    /// Store a run's outcome even when the answer carries it: an MCP task's
    /// outcome is read later, by `tasks/get` and `tasks/result`.
    stored_outcomes: bool,
    /// Lifecycle events, stored with the changes they describe; `None`: off.
    events: Option<Events>,
    /// Per-owner OAuth connections: calls to a source the owner has not connected wait for it.
    connections: Option<Arc<dyn Connections>>,
}

impl Executions {
    pub fn new(store: Arc<dyn ExecutionStore>, sandbox: Sandbox, timeouts: Timeouts, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            sandbox,
            timeouts,
            clock,
            approval_wait: Duration::from_secs(20),
            slots: Arc::new(Semaphore::new(DEFAULT_MAX_CONCURRENT)),
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            toolkits: Arc::default(),
            quotas: None,
            grants: None,
            budget: DEFAULT_RESPONSE_BUDGET,
            continuations: None,
            stored_outcomes: false,
            events: None,
            connections: None,
        }
    }

    /// Make calls to per-owner OAuth sources wait until their owner connects.
    pub fn with_connections(mut self, connections: Option<Arc<dyn Connections>>) -> Self {
        self.connections = connections;
        self
    }

    /// Emit lifecycle events (docs/events.md) with every status change stored.
    pub fn with_events(mut self, events: Option<Events>) -> Self {
        self.events = events;
        self
    }

    /// Store `execution`: created (`from` is `None`) or updated from status
    /// `from`, with the lifecycle events of that change in the same write
    /// (`link`: the approval link it opened); then have them delivered.
    async fn save(
        &self,
        execution: &mut Execution,
        from: Option<ExecutionStatus>,
        link: Option<&ApprovalToken>,
    ) -> Result<(), StoreError> {
        let emitted = self.events.as_ref().map(|events| events.of_execution(from, execution, link)).unwrap_or_default();
        match from {
            None => self.store.create_execution_emitting(execution, &emitted).await?,
            Some(_) => self.store.update_execution_emitting(execution, &emitted).await?,
        }
        if let (Some(events), false) = (&self.events, emitted.is_empty()) {
            events.wake();
        }
        Ok(())
    }

    /// Count and enforce the owners' quotas.
    pub(crate) fn with_quotas(mut self, quotas: QuotaGate) -> Self {
        self.quotas = Some(quotas);
        self
    }

    /// The toolkits' views, by name, for continuing their executions.
    pub fn with_toolkits(mut self, toolkits: HashMap<ToolkitName, Arc<dyn Tools>>) -> Self {
        self.toolkits = Arc::new(toolkits);
        self
    }

    /// The tools a continuation of `execution` runs with, for a caller whose
    /// view is `tools`. A caller in a toolkit (its endpoint, or a key scoped to
    /// it) sees only that toolkit's executions; anyone else is not told they
    /// exist. An unscoped caller may decide a toolkit's execution, which then
    /// continues in the toolkit's view, never a wider one.
    fn tools_for(&self, execution: &Execution, tools: Arc<dyn Tools>) -> Result<Arc<dyn Tools>, ResumeError> {
        let hidden = || ResumeError::NotFound(execution.id.clone());
        match (tools.toolkit(), &execution.toolkit) {
            (Some(scope), started) if started.as_ref() != Some(scope) => Err(hidden()),
            (Some(_), _) | (None, None) => Ok(tools),
            (None, Some(started)) => self.toolkits.get(started).cloned().ok_or_else(hidden),
        }
    }

    /// Apply `grants` when code runs, and store the ones a person asks for.
    pub fn with_grants(mut self, grants: Arc<Grants>) -> Self {
        self.grants = Some(grants);
        self
    }

    /// `tools` as `owner`'s code sees them: with the owner's live grants
    /// applied, and the owner's connections to per-owner sources.
    /// The grants go beneath a toolkit's rules, so they loosen only what the
    /// sources ask, never the toolkit's own `approve`.
    fn granted(&self, owner: &Principal, tools: Arc<dyn Tools>) -> Arc<dyn Tools> {
        let tools = match &self.grants {
            Some(grants) => {
                let endpoint = tools.toolkit().cloned();
                let grant = |inner: Arc<dyn Tools>| grants.tools_for(owner, endpoint.as_ref(), inner);
                tools.beneath(&grant).unwrap_or_else(|| grant(tools.clone()))
            }
            None => tools,
        };
        match &self.connections {
            Some(connections) => crate::connections::tools_for(connections.clone(), owner, tools),
            None => tools,
        }
    }

    /// Hand runs past the budget to another invocation (the MCP Lambda
    /// function), instead of going on in a background task.
    pub fn with_continuations(mut self, continuations: Option<Arc<dyn Continuations>>) -> Self {
        self.continuations = continuations;
        self
    }

    /// How long an `execute` or `resume` waits for the outcome before it
    /// answers `running` (the run goes on). Keep it well below API Gateway's 30 s.
    pub fn with_response_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// At most `max` sandbox runs at once in this process; more wait up to a
    /// second for a slot, then get `busy`.
    pub fn with_max_concurrent(mut self, max: usize) -> Self {
        self.slots = Arc::new(Semaphore::new(max));
        self.max_concurrent = max;
        self
    }

    async fn slot(&self) -> Result<OwnedSemaphorePermit, ResumeError> {
        let acquired = tokio::time::timeout(QUEUE_WAIT, self.slots.clone().acquire_owned()).await;
        match acquired {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                count(Metric::ExecutionsBusy);
                Err(ResumeError::Busy(self.max_concurrent))
            }
        }
    }

    /// How long a browser-mode `resume` waits for the human's decision (keep it
    /// well below API Gateway's 30 s).
    pub fn with_approval_wait(mut self, wait: Duration) -> Self {
        self.approval_wait = wait;
        self
    }

    /// The time by the injected clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// What each run may use: `execute`'s description states it.
    pub(crate) fn limits(&self) -> &Limits {
        self.sandbox.limits()
    }

    /// The longest a run can take to end and be recorded: a quota slot's
    /// lease, and the budget of a continuation nobody waits for.
    fn run_limit(&self) -> Duration {
        self.sandbox.limits().wall_clock + SETTLE_SLACK
    }

    /// The owner's cap on tool calls per execution, if any.
    fn max_tool_calls(&self, owner: &Principal) -> Option<u32> {
        self.quotas.as_ref().and_then(|gate| gate.limits(owner).tool_calls_per_execution)
    }

    /// Run new code. Nothing is stored unless it pauses or outlasts the
    /// response budget (then it is handed on and answers `running`).
    pub async fn execute(
        &self,
        owner: &Principal,
        session: Option<&SessionId>,
        mode: ElicitationMode,
        code: String,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, StoreError> {
        Ok(match self.start(owner, session, mode, code, tools).await? {
            Ok(result) => result,
            Err(Refused { execution_id, error }) => ExecutionResult::Failed { execution_id, error, logs: Vec::new() },
        })
    }

    /// Admit new code (a free slot, the owner's quotas) and run it; refused
    /// before anything ran or was stored when there is no room.
    async fn start(
        &self,
        owner: &Principal,
        session: Option<&SessionId>,
        mode: ElicitationMode,
        code: String,
        tools: Arc<dyn Tools>,
    ) -> Result<Result<ExecutionResult, Refused>, StoreError> {
        let id = crate::random::execution_id().map_err(no_randomness)?;
        let Ok(slot) = self.slot().await else {
            let message = ResumeError::Busy(self.max_concurrent).to_string();
            let error = ExecutionFailure { code: "busy".into(), message, retry_after_ms: None };
            return Ok(Err(Refused { execution_id: id, error }));
        };
        let tools = self.granted(owner, tools);
        let now = self.clock.now();
        let (quota, max_tool_calls) = match &self.quotas {
            None => (None, None),
            Some(gate) => match gate.admit(owner, &id, now, self.run_limit()).await? {
                Ok(quota) => (quota, gate.limits(owner).tool_calls_per_execution),
                Err(exceeded) => {
                    let error = ExecutionFailure::quota(&exceeded);
                    return Ok(Err(Refused { execution_id: id, error }));
                }
            },
        };
        let segment = Segment::start(id.clone(), code.clone(), now, crate::random::seed().map_err(no_randomness)?)
            .with_max_tool_calls(max_tool_calls);
        count(Metric::ExecutionsStarted);
        let mut execution =
            Execution::start(id, owner.clone(), session.cloned(), mode, code, segment.journal.clone(), now);
        execution.toolkit = tools.toolkit().cloned();
        // The quota's running slot is given back when the run ends, which may
        // be after this answer.
        let held = Held { slot, quota };
        let ran = self.run(execution, false, segment, tools, held).await.map_err(|error| match error {
            ResumeError::Store(error) => error,
            other => StoreError::Backend { operation: "record the outcome of an execution", detail: other.to_string() },
        })?;
        Ok(Ok(ran))
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
        let tools = self.tools_for(&execution, tools)?;
        let elsewhere = pause.is_some_and(|step| {
            !matches!(execution.state, ExecutionState::Paused { .. }) || pending_step(&execution) != Some(step)
        });
        // A running execution is followed; a cancel (not one meant for a pause
        // it has left) asks its runner to stop at the next safe point. An
        // accept or decline finds nothing to decide, as before.
        let cancel = action == Some(ApprovalAction::Cancel) && pause.is_none();
        if is_running(&execution) && (action.is_none() || cancel) {
            return self.follow(execution, cancel).await;
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
            (ElicitationMode::Model, Some(action)) => self.decide(execution, action, None, None, tools).await,
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
    /// "always allow" choice in their client.
    pub async fn answer_native(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        step: u32,
        action: ApprovalAction,
        remember: Remember,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Owner(owner), id).await?;
        let tools = self.tools_for(&execution, tools)?;
        let asked = execution.mode == ElicitationMode::Native
            && matches!(execution.state, ExecutionState::Paused { .. })
            && pending_step(&execution) == Some(step);
        if !asked {
            return match execution.state {
                ExecutionState::Expired => Err(ResumeError::Expired(id.clone())),
                _ => Err(ResumeError::AlreadySettled(id.clone())),
            };
        }
        self.decide(execution, action, None, remembered(remember, GrantedBy::Client), tools).await
    }

    /// Apply the owner's decision whatever the mode (`POST /api/executions/{id}/resume`).
    pub async fn decide_as_owner(
        &self,
        owner: &Principal,
        id: &ExecutionId,
        action: ApprovalAction,
        remember: Remember,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Owner(owner), id).await?;
        let tools = self.tools_for(&execution, tools)?;
        self.decide(execution, action, None, remembered(remember, GrantedBy::OwnerApi), tools).await
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
        self.decide_with_link_hash_remembering(id, &ApprovalToken::hash_of(token), action, remember, tools).await
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
        self.decide_with_link_hash_remembering(id, hash, action, None, tools).await
    }

    async fn decide_with_link_hash_remembering(
        &self,
        id: &ExecutionId,
        hash: &TokenHash,
        action: ApprovalAction,
        remember: Option<GrantedBy>,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let execution = self.load(Access::Internal, id).await?;
        let tools = self.tools_for(&execution, tools)?;
        match execution.links.status(hash) {
            LinkStatus::Open => self.decide(execution, action, Some(hash.clone()), remember, tools).await,
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
    async fn load(&self, access: Access<'_>, id: &ExecutionId) -> Result<Execution, ResumeError> {
        let mut execution = self.store.get_execution(access, id).await.map_err(|e| not_found(id, e))?;
        let now = self.clock.now();
        match execution.state {
            ExecutionState::Paused { deadline } if now >= deadline => self.expire(&mut execution, now).await?,
            ExecutionState::Running | ExecutionState::Resuming { .. } if execution.is_stranded(now) => {
                self.interrupt(&mut execution, now).await?
            }
            _ => {}
        }
        Ok(execution)
    }

    /// Claim the pause with `action` (one winner), replay, and settle or pause
    /// again, in an `execution.resume` span linked to the span of the pause.
    async fn decide(
        &self,
        execution: Execution,
        action: ApprovalAction,
        link: Option<TokenHash>,
        remember: Option<GrantedBy>,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let span = tracing::info_span!(
            "execution.resume",
            executor.execution.id = execution.id.as_str(),
            executor.approval.action = action.as_str(),
            executor.execution.outcome = Empty,
        );
        if let Some(paused_by) = &execution.pause_trace {
            executor_telemetry::link(&span, paused_by, "paused_by");
        }
        let result = self.claim_and_replay(execution, action, link, remember, tools).instrument(span.clone()).await;
        span.record("executor.execution.outcome", outcome_name(&result));
        result
    }

    async fn claim_and_replay(
        &self,
        mut execution: Execution,
        action: ApprovalAction,
        link: Option<TokenHash>,
        remember: Option<GrantedBy>,
        tools: Arc<dyn Tools>,
    ) -> Result<ExecutionResult, ResumeError> {
        let id = execution.id.clone();
        // A slot first: a claim is never made by a run that cannot start.
        let slot = self.slot().await?;
        let now = self.clock.now();

        // Claimed: paused -> resuming, conditional on the version just read.
        let before = execution.status();
        match execution.apply(ExecutionEvent::Claim { action, link }, now) {
            Ok(()) => {}
            Err(TransitionError::ApprovalExpired { .. }) => {
                self.expire(&mut execution, now).await?;
                return Err(ResumeError::Expired(id));
            }
            Err(_) if execution.state == ExecutionState::Expired => return Err(ResumeError::Expired(id)),
            Err(_) => return Err(ResumeError::AlreadySettled(id)),
        }
        // The resume cap, counted in the claim's own write.
        if let Some(gate) = &self.quotas {
            gate.check_resume(&execution.owner, execution.resumes).map_err(ResumeError::Quota)?;
        }
        execution.resumes += 1;
        let claim = crate::random::claim_id().map_err(no_randomness)?;
        execution.claim = Some(claim.clone());
        execution.heartbeat_at = Some(now);
        match self.save(&mut execution, Some(before), None).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => return Err(ResumeError::AlreadySettled(id)),
            // The answer was lost, not necessarily the write: if the stored
            // claim is ours, we won and go on; anyone else's, we lost.
            Err(error @ StoreError::Backend { .. }) => {
                let stored = self.store.get_execution(Access::Internal, &id).await.map_err(|e| not_found(&id, e))?;
                let ours = matches!(stored.state, ExecutionState::Resuming { .. })
                    && stored.claim.as_deref() == Some(claim.as_str());
                if !ours {
                    return match stored.state {
                        ExecutionState::Paused { .. } => Err(ResumeError::Store(error)),
                        _ => Err(ResumeError::AlreadySettled(id)),
                    };
                }
                execution = stored;
            }
            Err(e) => return Err(not_found(&id, e)),
        }
        let approval =
            if action == ApprovalAction::Accept { Metric::ApprovalsAccepted } else { Metric::ApprovalsDeclined };
        count(approval);
        tracing::info!(executor.execution.id = id.as_str(), action = action.as_str(), "approval decided");
        let tools = self.with_decided_grants(&execution, action, remember, tools).await;

        // Replayed: the only winner runs the continuation.
        let snapshot = Snapshot { code: execution.code.clone(), journal: execution.journal.clone() };
        executor_telemetry::add(Metric::ReplaySteps, snapshot.journal.steps.len() as u64);
        let max_tool_calls = self.max_tool_calls(&execution.owner);
        let segment = Segment::resume(id, snapshot, action).with_max_tool_calls(max_tool_calls);
        self.run(execution, true, segment, tools, Held { slot, quota: None }).await
    }

    /// After a won claim: store the grant the person asked for (before the
    /// continuation runs, so its later calls of the same tool run at once),
    /// then apply the owner's grants. Neither may undo the decision: if the
    /// store fails here, the approval applies once and later calls ask again.
    async fn with_decided_grants(
        &self,
        execution: &Execution,
        action: ApprovalAction,
        remember: Option<GrantedBy>,
        tools: Arc<dyn Tools>,
    ) -> Arc<dyn Tools> {
        if let (Some(grants), ApprovalAction::Accept, Some(by)) = (&self.grants, action, remember) {
            let pending = execution.journal.pending.iter().map(|call| call.path.as_str());
            if let Err(error) = grants.remember(&execution.owner, execution.toolkit.as_ref(), pending, by).await {
                tracing::warn!(executor.execution.id = execution.id.as_str(), %error, "the grant could not be stored");
            }
        }
        self.granted(&execution.owner, tools)
    }

    /// Wait (at most `wait`) while the execution runs or stays at the pause
    /// `watched` (browser mode: the human has not decided it yet), then report
    /// where it stands. A browser-mode pause is reported with a fresh link, so
    /// the caller can always show one.
    async fn await_outcome(
        &self,
        mut execution: Execution,
        watched: Option<u32>,
        wait: Duration,
    ) -> Result<ExecutionResult, ResumeError> {
        // How long this request may take is the transport's time, not the
        // domain's: it is measured on the runtime's timer, deadlines on the clock.
        let until = tokio::time::Instant::now() + wait;
        loop {
            let now = self.clock.now();
            let waiting = tokio::time::Instant::now() < until;
            match &execution.state {
                ExecutionState::Paused { deadline } if now >= *deadline => {
                    self.expire(&mut execution, now).await?;
                    return Err(ResumeError::Expired(execution.id));
                }
                ExecutionState::Paused { .. } if waiting && pending_step(&execution) == watched => {}
                ExecutionState::Running | ExecutionState::Resuming { .. } if waiting => {}
                ExecutionState::Paused { .. }
                    if execution.mode == ElicitationMode::Browser || waits_for_connect(&execution) =>
                {
                    let token = ApprovalToken::generate().map_err(no_randomness)?;
                    execution.links.open(token.hash());
                    match self.store.update_execution(&mut execution).await {
                        Ok(()) => return Ok(paused_result(&execution, Some(token))),
                        // Decided meanwhile: look again.
                        Err(StoreError::Conflict { .. }) => {}
                        Err(e) => return Err(not_found(&execution.id, e)),
                    }
                }
                _ => return settled(&execution),
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            execution = self.load(Access::Internal, &execution.id).await?;
        }
    }

    /// Expire a paused execution whose approval window closed. A lost race
    /// means someone else changed it first: `execution` then becomes what the
    /// store holds, never the expiry that was not written.
    async fn expire(&self, execution: &mut Execution, now: Timestamp) -> Result<(), StoreError> {
        let was_paused = execution.status() == ExecutionStatus::Paused;
        let mut expired = execution.clone();
        if expired.apply(ExecutionEvent::Expire, now).is_err() {
            return Ok(());
        }
        match self.save(&mut expired, Some(execution.status()), None).await {
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

    /// Record that nothing runs a stranded continuation any more. Losing the
    /// race to the continuation's own late write is fine: that one stands.
    async fn interrupt(&self, execution: &mut Execution, now: Timestamp) -> Result<(), ResumeError> {
        let before = execution.status();
        execution.apply(ExecutionEvent::Interrupt, now).map_err(|e| ResumeError::Store(transition_bug(e)))?;
        execution.expires_at = now.plus(RETENTION);
        match self.save(execution, Some(before), None).await {
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
            Err(e) => Err(not_found(&execution.id, e)),
        }
    }

    /// Record the pause and store it, in an `execution.pause` span whose
    /// traceparent the execution keeps (its resume links to it); in browser
    /// mode, open its first approval link.
    async fn pause(
        &self,
        execution: &mut Execution,
        snapshot: Snapshot,
        logs: Vec<String>,
        now: Timestamp,
        write: Write,
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
            let deadline = now.plus(self.timeouts.approval_window);
            let journal = snapshot.journal;
            let from = write.from(execution.status());
            execution.apply(ExecutionEvent::Pause { journal, deadline }, now).map_err(transition_bug)?;
            execution.expires_at = deadline.plus(RETENTION);
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
            self.save(execution, from, token.as_ref()).await?;
            count(Metric::ExecutionsPaused);
            tracing::info!(executor.execution.id = execution.id.as_str(), pending, "execution paused");
            Ok(token)
        }
        .instrument(span)
        .await
    }
}

/// Who to record as granting, when the person chose "always".
fn remembered(remember: Remember, by: GrantedBy) -> Option<GrantedBy> {
    (remember == Remember::Always).then_some(by)
}

/// New code turned away before it ran (`busy`, a quota): nothing is stored.
pub struct Refused {
    pub execution_id: ExecutionId,
    pub error: ExecutionFailure,
}

/// Whether a pause stores a new execution or updates the one it resumed.
enum Write {
    Create,
    Update,
}

impl Write {
    /// The status a write changes from, as [`Executions::save`] takes it
    /// (`None`: the execution is created).
    fn from(&self, current: ExecutionStatus) -> Option<ExecutionStatus> {
        match self {
            Write::Create => None,
            Write::Update => Some(current),
        }
    }
}

/// How a resume ended, for its span: the result's status or the resume error's code.
fn outcome_name(result: &Result<ExecutionResult, ResumeError>) -> &'static str {
    match result {
        Ok(result) => result.status(),
        Err(error) => error.code(),
    }
}

/// The sandbox and the state machine disagree: a bug, reported rather than hidden.
fn transition_bug(e: TransitionError) -> StoreError {
    StoreError::Corrupt { what: "execution", detail: e.to_string() }
}

fn no_randomness(e: getrandom::Error) -> StoreError {
    StoreError::Backend { operation: "draw random ids", detail: e.to_string() }
}

fn not_found(id: &ExecutionId, e: StoreError) -> ResumeError {
    match e {
        StoreError::NotFound { .. } => ResumeError::NotFound(id.clone()),
        other => ResumeError::Store(other),
    }
}

/// Whether something runs the execution now (a new run handed on, or a continuation).
fn is_running(execution: &Execution) -> bool {
    matches!(execution.state, ExecutionState::Running | ExecutionState::Resuming { .. })
}

/// Whether the execution's pause waits for its owner to connect a source.
fn waits_for_connect(execution: &Execution) -> bool {
    execution.journal.pending.first().is_some_and(|call| call.connect.is_some())
}

/// Which pause an execution is at: the step of its first pending call.
fn pending_step(execution: &Execution) -> Option<u32> {
    execution.journal.pending.first().map(|call| call.step)
}

fn paused_result(execution: &Execution, link: Option<ApprovalToken>) -> ExecutionResult {
    let ExecutionState::Paused { deadline } = execution.state else { unreachable!("only called after a pause") };
    ExecutionResult::Paused {
        execution_id: execution.id.clone(),
        expires_at: deadline,
        pending: execution.journal.pending.clone(),
        logs: execution.logs.clone(),
        link,
        mode: execution.mode,
    }
}

/// Where a stored execution stands, as a result.
fn settled(execution: &Execution) -> Result<ExecutionResult, ResumeError> {
    let execution_id = execution.id.clone();
    let logs = execution.logs.clone();
    Ok(match &execution.state {
        ExecutionState::Paused { .. } => paused_result(execution, None),
        ExecutionState::Running | ExecutionState::Resuming { .. } => ExecutionResult::Running { execution_id },
        ExecutionState::Completed { result } => {
            ExecutionResult::Completed { execution_id, result: result.clone(), logs }
        }
        ExecutionState::Failed { error } | ExecutionState::Declined { error } => {
            ExecutionResult::Failed { execution_id, error: error.clone(), logs }
        }
        ExecutionState::Expired => return Err(ResumeError::Expired(execution_id)),
    })
}
