//! What can happen to an execution, who makes it happen, and the table of
//! which events each status admits.

use std::time::Duration;

use serde_json::Value;

use super::{ApprovalAction, ExecutionFailure, ExecutionStatus};
use crate::{DecidedBy, Journal, Timestamp, TokenHash};

/// The channel a decision or a cancellation came through: who the history
/// names as having made it happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The model, through `resume` with an `action`.
    Model,
    /// The person at a browser approval link.
    ApprovalPage,
    /// The person answering the elicitation in their own MCP client.
    Client,
    /// The owner, through the JSON API (`/api/executions/{id}/resume`).
    OwnerApi,
    /// The owner's OAuth connection completed (or was refused) at the connect link.
    Connect,
    /// The owner's MCP client, through the MCP tasks `cancel`.
    Task,
    /// The owner, signed in to the console (`/console`).
    Console,
}

impl Channel {
    /// The channel as the audit trail names it: `model`, `browser` (an
    /// approval or connect link, the console), `native` (the person's own client) or
    /// `api` (the owner's JSON API).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Model | Self::Task => "model",
            Self::ApprovalPage | Self::Connect | Self::Console => "browser",
            Self::Client => "native",
            Self::OwnerApi => "api",
        }
    }
}

/// Who decided (or cancelled), and through which channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    pub channel: Channel,
    pub by: DecidedBy,
}

impl Decider {
    /// The model, through `resume` (or the MCP tasks `cancel`).
    pub fn model(channel: Channel) -> Self {
        Self { channel, by: DecidedBy::model() }
    }
}

/// Who made a change happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// Whatever runs the execution: its sandbox run, its heartbeat, a hand-off.
    Runner,
    /// Time: an approval window closed, a heartbeat stopped, a lease ran out.
    Clock,
    /// A decision or a cancellation.
    Decider(Decider),
}

/// Something that happens to an execution. Every change to a stored
/// execution is one of these, applied by [`super::Execution::apply`].
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionEvent {
    /// New code outlived its answer and is stored as running: `claim` names
    /// its runner, and the record lives at least `lease` (the run's wall clock).
    HandOn {
        claim: String,
        lease: Duration,
    },
    /// A call needs approval; the journal holds it as pending.
    Pause {
        journal: Journal,
        deadline: Timestamp,
    },
    /// A decision arrived and this resumer takes the execution: `claim` is
    /// the resumer's id (after a lost answer it tells its own claim from
    /// another's), `link` the approval link it came through, if any. Counts
    /// one more resume.
    Claim {
        action: ApprovalAction,
        link: Option<TokenHash>,
        claim: String,
        by: Decider,
    },
    /// The invocation that continues a handed-on run takes it (one winner).
    Continue {
        claim: String,
    },
    /// The runner is still there.
    Heartbeat,
    /// Someone asked a running execution to stop: its runner sees it at its
    /// next heartbeat and stops at the next safe point.
    RequestCancel {
        by: Decider,
    },
    Complete {
        result: Value,
    },
    Fail {
        error: ExecutionFailure,
    },
    /// The decision declined or cancelled the call and the code did not recover,
    /// or a running execution was cancelled.
    Decline {
        error: ExecutionFailure,
    },
    /// Handed on at a point where no call was in flight: the journal holds
    /// every call made, nobody runs it until the next `Continue`, and the
    /// record lives at least `lease` more.
    Yield {
        journal: Journal,
        lease: Duration,
    },
    /// The approval window or the session's lease ran out, or a resumer vanished.
    Expire,
    /// The run's heartbeat stopped: whatever ran it stopped (a crash, a Lambda
    /// timed out or recycled mid-run). It is not run again: a call in flight
    /// may already have reached the upstream.
    Interrupt,
}

impl ExecutionEvent {
    pub fn name(&self) -> &'static str {
        match self {
            Self::HandOn { .. } => "hand_on",
            Self::Pause { .. } => "pause",
            Self::Claim { .. } => "claim",
            Self::Continue { .. } => "continue",
            Self::Heartbeat => "heartbeat",
            Self::RequestCancel { .. } => "request_cancel",
            Self::Complete { .. } => "complete",
            Self::Fail { .. } => "fail",
            Self::Decline { .. } => "decline",
            Self::Yield { .. } => "yield",
            Self::Expire => "expire",
            Self::Interrupt => "interrupt",
        }
    }

    /// Who makes this event happen.
    pub fn actor(&self) -> Actor {
        match self {
            Self::Claim { by, .. } | Self::RequestCancel { by } => Actor::Decider(by.clone()),
            Self::Expire | Self::Interrupt => Actor::Clock,
            _ => Actor::Runner,
        }
    }

    /// Whether it changes what the execution is doing (and so its
    /// `updated_at`), rather than who runs it or how long it is kept.
    pub(super) fn moves_on(&self) -> bool {
        !matches!(self, Self::HandOn { .. } | Self::Continue { .. } | Self::Heartbeat | Self::RequestCancel { .. })
    }
}

/// The transition table: the status an event leads to, or `None` if it is illegal.
pub fn next_status(from: ExecutionStatus, event: &ExecutionEvent) -> Option<ExecutionStatus> {
    use ExecutionEvent as E;
    use ExecutionStatus as S;
    Some(match (from, event) {
        (S::Running, E::HandOn { .. } | E::Continue { .. }) => S::Running,
        (S::Running | S::Resuming, E::Heartbeat | E::RequestCancel { .. }) => from,
        (S::Running | S::Resuming, E::Pause { .. }) => S::Paused,
        (S::Paused, E::Claim { .. }) => S::Resuming,
        (S::Running | S::Resuming, E::Complete { .. }) => S::Completed,
        (S::Running | S::Resuming, E::Fail { .. }) => S::Failed,
        (S::Running | S::Resuming, E::Decline { .. }) => S::Declined,
        (S::Running | S::Paused | S::Resuming, E::Expire) => S::Expired,
        (S::Running | S::Resuming, E::Interrupt) => S::Failed,
        (S::Running | S::Resuming, E::Yield { .. }) => S::Running,
        _ => return None,
    })
}

/// What one applied event did: what happened, who made it happen and when,
/// and the status it moved the execution from and to.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub event: &'static str,
    pub by: Actor,
    pub at: Timestamp,
    pub from: ExecutionStatus,
    pub to: ExecutionStatus,
}
