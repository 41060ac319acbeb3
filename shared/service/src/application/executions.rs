//! Executions across processes: run, and on a pause persist the snapshot; later
//! claim it (one winner), replay with the decision, and settle.
//!
//! The rooms, in the order a request walks through them:
//! - `entry`: the entry points (start, resume, decide, view, follow) and `tasks`
//!   for the MCP tasks: they load what they act on and check who may see it;
//! - `idempotent`: `execute` with an `idempotencyKey`, run at most once;
//! - `claim`: a decision takes a paused execution, or a continuation a
//!   handed-on one (one winner each), and hands the run to the runner;
//! - `runner`: the `Runner`, which owns one run from its start or claim to
//!   its settle: the sandbox run in a task of its own, its heartbeat and
//!   cancellation watch, the hand-off past the response budget, and the
//!   outcome recorded;
//! - `recorder`: the one writer: every change is an event applied by core's
//!   `Execution::apply` and stored with its lifecycle events in one
//!   conditional write, so two racing resumes cannot both run the approved call;
//! - `run_tools`: the tools a run sees (its toolkit's view, the owner's grants
//!   and connections), composed in one place;
//! - `outcome`: where a stored execution stands, as a result.

mod claim;
mod entry;
mod follow;
mod idempotent;
mod outcome;
mod recorder;
mod run_tools;
mod runner;
mod tasks;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    Clock, ElicitationMode, ExecutionFailure, ExecutionId, PendingCall, QuotaExceeded, Timeouts, Timestamp, ToolkitName,
};
use executor_sandbox::{Connections, Limits, Sandbox, Tools};
use executor_store::{ExecutionStore, HistoryStore, StoreError};
use executor_telemetry::{Metric, count};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::application::continuations::Continuations;
use crate::application::grants::Grants;
use crate::application::outbox::Events;
use crate::application::quotas::QuotaGate;
use crate::application::random::ApprovalToken;
use runner::Runner;

pub use entry::{Asker, Refused};
pub use idempotent::OnceError;

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

/// The entry points to executions; cheap to clone (handles and settings).
#[derive(Clone)]
pub struct Executions {
    /// What runs them: every run, and every write, goes through it.
    runner: Runner,
    approval_wait: Duration,
    /// One permit per sandbox run in progress: memory stays bounded however
    /// many requests arrive.
    slots: Arc<Semaphore>,
    max_concurrent: usize,
}

impl Executions {
    /// Executions stored in `store`, with their history.
    pub fn new<S: ExecutionStore + HistoryStore + 'static>(
        store: Arc<S>,
        sandbox: Sandbox,
        timeouts: Timeouts,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            runner: Runner::new((store.clone(), store), sandbox, timeouts, clock),
            approval_wait: Duration::from_secs(20),
            slots: Arc::new(Semaphore::new(DEFAULT_MAX_CONCURRENT)),
            max_concurrent: DEFAULT_MAX_CONCURRENT,
        }
    }

    /// Make calls to per-owner OAuth sources wait until their owner connects.
    pub fn with_connections(mut self, connections: Option<Arc<dyn Connections>>) -> Self {
        self.runner.tools.connections = connections;
        self
    }

    /// Keep each execution's history for `retention` (`EXECUTOR_AUDIT_RETENTION_DAYS`).
    pub fn with_audit_retention(mut self, retention: Duration) -> Self {
        self.runner.recorder.retention = retention;
        self
    }

    /// Emit lifecycle events (docs/events.md) with every status change stored.
    pub fn with_events(mut self, events: Option<Events>) -> Self {
        self.runner.recorder.events = events;
        self
    }

    /// Count and enforce the owners' quotas.
    pub(crate) fn with_quotas(mut self, quotas: QuotaGate) -> Self {
        self.runner.quotas = Some(quotas);
        self
    }

    /// The toolkits' views, by name, for continuing their executions.
    pub fn with_toolkits(mut self, toolkits: HashMap<ToolkitName, Arc<dyn Tools>>) -> Self {
        self.runner.tools.toolkits = Arc::new(toolkits);
        self
    }

    /// Apply `grants` when code runs, and store the ones a person asks for.
    pub fn with_grants(mut self, grants: Arc<Grants>) -> Self {
        self.runner.tools.grants = Some(grants);
        self
    }

    /// Hand runs past the budget to another invocation (the MCP Lambda
    /// function), instead of going on in a background task.
    pub fn with_continuations(mut self, continuations: Option<Arc<dyn Continuations>>) -> Self {
        self.runner.continuations = continuations;
        self
    }

    /// How long an `execute` or `resume` waits for the outcome before it
    /// answers `running` (the run goes on). Keep it well below API Gateway's 30 s.
    pub fn with_response_budget(mut self, budget: Duration) -> Self {
        self.runner.budget = budget;
        self
    }

    /// At most `max` sandbox runs at once in this process; more wait up to a
    /// second for a slot, then get `busy`.
    pub fn with_max_concurrent(mut self, max: usize) -> Self {
        self.slots = Arc::new(Semaphore::new(max));
        self.max_concurrent = max;
        self
    }

    /// How long a browser-mode `resume` waits for the human's decision (keep it
    /// well below API Gateway's 30 s).
    pub fn with_approval_wait(mut self, wait: Duration) -> Self {
        self.approval_wait = wait;
        self
    }

    /// The time by the injected clock.
    pub fn now(&self) -> Timestamp {
        self.runner.clock.now()
    }

    /// What each run may use: `execute`'s description states it.
    pub(crate) fn limits(&self) -> &Limits {
        self.runner.sandbox.limits()
    }

    /// A sandbox slot of this process, waited for at most [`QUEUE_WAIT`].
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
}
