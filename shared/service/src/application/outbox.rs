//! Delivering the outbox (docs/events.md). Events are stored by the write
//! that makes the change they describe (`*_emitting`); this sends them to the
//! sink, oldest first, and deletes each once the sink has it. Nothing here
//! runs on a request's path: a write wakes a delivery task, and requests and
//! alarms only start one (at most every [`RETRY_INTERVAL`]) to pick up what an
//! earlier attempt, or another process, left behind.
//!
//! One delivery task per process at a time, so a process never sends an event
//! twice; two processes may (an event is delivered at least once).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_core::{Clock, Decider, Event, Execution, ExecutionStatus, Session, Timestamp};
use executor_events::{EventSink, SinkError};
use executor_store::{OutboxStore, StoreError};
use tokio::sync::watch;

use crate::application::random::ApprovalToken;

/// Events read from the store per query.
const BATCH: usize = 10;
/// Batches one delivery run sends at most.
const MAX_BATCHES: usize = 100;

/// How long after a failed (or last) delivery a request or alarm looks at the
/// outbox again. A new event is sent at once regardless.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// The lifecycle events of this host, and their delivery.
#[derive(Clone)]
pub struct Events {
    outbox: Arc<Outbox>,
    /// Base of the approval links events carry; hosts that open no links
    /// (the alarm function) have none.
    links: Option<String>,
}

struct Outbox {
    store: Arc<dyn OutboxStore>,
    sink: Arc<dyn EventSink>,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    /// `true` while a delivery task runs.
    busy: watch::Sender<bool>,
}

struct State {
    running: bool,
    /// Woken while running: look again before stopping.
    again: bool,
    /// A request or alarm after this starts a delivery.
    next_sweep: Timestamp,
}

impl Events {
    /// Events stored in `store` and sent to `sink`; approval links point at `links`.
    pub fn new(
        store: Arc<dyn OutboxStore>,
        sink: Arc<dyn EventSink>,
        clock: Arc<dyn Clock>,
        links: Option<&str>,
    ) -> Self {
        let state = State { running: false, again: false, next_sweep: Timestamp::from_millis(0) };
        let outbox = Outbox { store, sink, clock, state: Mutex::new(state), busy: watch::channel(false).0 };
        Self { outbox: Arc::new(outbox), links: links.map(|base| base.trim_end_matches('/').to_owned()) }
    }

    /// The events of writing `after` (from `before`; `None` when creating it).
    /// `link`: the approval link this write opened, if any.
    pub fn of_execution(
        &self,
        before: Option<ExecutionStatus>,
        after: &Execution,
        link: Option<&ApprovalToken>,
        decider: Option<&Decider>,
    ) -> Vec<Event> {
        // A create stores the version as is; an update stores the next one.
        let written = if before.is_some() { after.version + 1 } else { after.version };
        let url = match (link, &self.links) {
            (Some(token), Some(base)) => Some(token.approval_url(base, &after.id)),
            _ => None,
        };
        executor_core::execution_events(before, after, written, url.as_deref(), decider, self.outbox.clock.now())
    }

    /// The event of destroying `session` (its next version).
    pub fn of_session_destroyed(&self, session: &Session) -> Event {
        executor_core::session_destroyed(session, session.version + 1, self.outbox.clock.now())
    }

    /// Events were just stored: deliver them now, in the background.
    pub fn wake(&self) {
        Outbox::start(&self.outbox, true);
    }

    /// On every request and alarm: start a delivery if the outbox has not
    /// been looked at for [`RETRY_INTERVAL`]. Never waits.
    pub fn sweep(&self) {
        Outbox::start(&self.outbox, false);
    }

    /// Wait, at most `wait`, for a delivery under way to end. For hosts that
    /// stop running once they answer (Lambda): an event not delivered by
    /// then stays in the outbox for the next request or alarm.
    pub async fn settle(&self, wait: Duration) {
        let mut busy = self.outbox.busy.subscribe();
        let _ = tokio::time::timeout(wait, busy.wait_for(|running| !running)).await;
    }
}

impl Outbox {
    /// Start the delivery task unless one runs (then it looks again before
    /// stopping). `now`: a write just stored events; otherwise only when the
    /// sweep is due.
    fn start(outbox: &Arc<Self>, now: bool) {
        {
            let mut state = outbox.state.lock().unwrap_or_else(|e| e.into_inner());
            if !now && outbox.clock.now() < state.next_sweep {
                return;
            }
            if state.running {
                state.again = true;
                return;
            }
            state.running = true;
            state.again = false;
            state.next_sweep = outbox.clock.now().plus(RETRY_INTERVAL);
        }
        outbox.busy.send_replace(true);
        let outbox = outbox.clone();
        tokio::spawn(async move { outbox.run().await });
    }

    async fn run(&self) {
        loop {
            let delivered = self.deliver().await;
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(error) = delivered {
                // Retried by the first request or alarm after the interval.
                state.next_sweep = self.clock.now().plus(RETRY_INTERVAL);
                tracing::warn!(%error, "event delivery failed; a later request or alarm retries it");
            } else if state.again {
                state.again = false;
                continue;
            }
            state.running = false;
            break;
        }
        self.busy.send_replace(false);
    }

    /// Send pending events, oldest first, until none is left or one fails
    /// (the next attempt starts with it: order is kept).
    async fn deliver(&self) -> Result<(), DeliveryError> {
        // Bounded: what is left after this many batches waits for the next run.
        for _ in 0..MAX_BATCHES {
            let batch = self.store.pending_events(BATCH).await?;
            for event in &batch {
                self.sink.send(event).await?;
                tracing::info!(
                    event.id = event.id.as_str(),
                    event.r#type = event.detail_type.as_str(),
                    "event delivered"
                );
                self.store.delete_event(event).await?;
            }
            if batch.len() < BATCH {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Why a delivery stopped; the events stay in the outbox.
#[derive(Debug, thiserror::Error)]
enum DeliveryError {
    #[error("cannot read or update the outbox: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sink(#[from] SinkError),
}
