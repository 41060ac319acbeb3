//! What happens when a session's alarm fires: load the session and its paused
//! work, let `decide_session_alarm` (the pure table in core) decide, then act.
//! Requests never touch the scheduler; only session creation, alarms and
//! `DELETE /mcp` do.
//!
//! Every act is one conditional write of the session, then one scheduler call.
//! A crash between the two is completed by the next delivery of the same alarm
//! (Scheduler and Lambda retry a failed alarm): it finds the session already
//! pointing at the next generation and arms that generation, idempotently.

use std::sync::Arc;

use executor_core::{AlarmDecision, Session, SessionId, Timeouts, Timestamp, decide_session_alarm, needs_paused_count};
use executor_scheduler::AlarmScheduler;
use executor_store::{Access, ExecutionStore, SessionStore, StoreError};
use executor_telemetry::{Metric, count};
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::application::outbox::Events;

/// Attempts at acting on a decision when the session changes meanwhile.
const RACES: usize = 3;

pub struct Alarms {
    sessions: Arc<dyn SessionStore>,
    executions: Arc<dyn ExecutionStore>,
    scheduler: Arc<dyn AlarmScheduler>,
    timeouts: Timeouts,
    events: Option<Events>,
}

impl Alarms {
    pub fn new(
        sessions: Arc<dyn SessionStore>,
        executions: Arc<dyn ExecutionStore>,
        scheduler: Arc<dyn AlarmScheduler>,
        timeouts: Timeouts,
    ) -> Self {
        Self { sessions, executions, scheduler, timeouts, events: None }
    }

    /// Emit `Session Destroyed`, and deliver what the outbox holds when an alarm fires.
    pub fn with_events(mut self, events: Option<Events>) -> Self {
        self.events = events;
        self
    }

    /// How long a fired alarm waits for event delivery before it returns
    /// (the alarm function stops running once it does).
    const EVENT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

    /// Arm a new session's first alarm (created + SESSION_TIMEOUT) and record it.
    pub fn first_alarm(&self, session: &mut Session) -> Timestamp {
        let at = session.created_at.plus(self.timeouts.session_timeout);
        session.alarm_at = Some(at);
        at
    }

    pub async fn arm(&self, session: &SessionId, at: Timestamp) -> Result<(), StoreError> {
        self.scheduler.schedule(session, at).await
    }

    /// The alarm of `session` armed for `generation` fired at `now`: decide and
    /// act, in an `alarm.fire` span. Every write is conditional on the version
    /// the decision was made from, so a stale alarm never destroys a session
    /// that became active: it decides again.
    pub async fn fire(
        &self,
        session_id: &SessionId,
        generation: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<AlarmDecision, StoreError> {
        let span = tracing::info_span!(
            "alarm.fire",
            mcp.session.id = session_id.as_str(),
            executor.alarm.decision = Empty,
            executor.alarm.paused = Empty,
            executor.alarm.attempts = Empty,
            otel.status_code = Empty,
            trace_id = Empty,
        );
        executor_telemetry::adopt(&span, None);
        if let Some(events) = &self.events {
            events.sweep();
        }
        let result = self.decide_and_act(session_id, generation, now).instrument(span.clone()).await;
        if let Some(events) = &self.events {
            events.settle(Self::EVENT_WAIT).await;
        }
        let _in_span = span.enter();
        match &result {
            Ok(decision) => {
                let (name, metric) = match decision {
                    AlarmDecision::Ignore => ("ignore", Metric::AlarmsIgnored),
                    AlarmDecision::Reschedule { .. } => ("reschedule", Metric::AlarmsRescheduled),
                    AlarmDecision::ExtendPausedLease { .. } => ("extend_paused_lease", Metric::AlarmsLeaseExtended),
                    AlarmDecision::Destroy => ("destroy", Metric::AlarmsDestroyed),
                };
                span.record("executor.alarm.decision", name);
                count(metric);
                tracing::info!(decision = name, "alarm decided");
            }
            Err(error) => {
                span.record("otel.status_code", "error");
                tracing::warn!(%error, "alarm failed");
            }
        }
        result
    }

    async fn decide_and_act(
        &self,
        session_id: &SessionId,
        generation: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<AlarmDecision, StoreError> {
        for attempt in 1..=RACES {
            Span::current().record("executor.alarm.attempts", attempt as i64);
            let session = match self.sessions.get_session(Access::Internal, session_id).await {
                Ok(session) => Some(session),
                Err(StoreError::NotFound { .. }) => None,
                Err(e) => return Err(e),
            };
            // An earlier delivery of this alarm already decided the next
            // generation: make sure that one is armed (it may have crashed
            // before arming it), and start no second chain of alarms.
            if let (Some(fired), Some(s)) = (generation, &session)
                && let Some(next) = s.alarm_at.filter(|next| s.is_active() && *next > fired)
            {
                self.scheduler.schedule(session_id, next).await?;
                return Ok(AlarmDecision::Ignore);
            }
            let paused = if needs_paused_count(now, session.as_ref(), &self.timeouts) {
                let paused = self.executions.paused_executions(Access::Internal, session_id).await?.len();
                Span::current().record("executor.alarm.paused", paused as i64);
                paused
            } else {
                0
            };
            let decision = decide_session_alarm(now, session.as_ref(), paused, &self.timeouts);
            let acted = match (decision, session) {
                (AlarmDecision::Ignore, _) | (_, None) => return Ok(AlarmDecision::Ignore),
                (AlarmDecision::Destroy, Some(mut session)) => self.destroy(&mut session).await,
                (AlarmDecision::Reschedule { at } | AlarmDecision::ExtendPausedLease { at }, Some(mut session)) => {
                    session.alarm_at = Some(at);
                    match self.sessions.update_session(&mut session).await {
                        Ok(()) => self.scheduler.schedule(session_id, at).await,
                        Err(e) => Err(e),
                    }
                }
            };
            match acted {
                Ok(()) => return Ok(decision),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict { what: "session" })
    }

    /// Mark the session destroyed (conditional on its version), then disarm its
    /// pending alarm. Items are left to TTL. Paused executions are not touched:
    /// they belong to their owner, not to the session, and live until their own
    /// approval window closes.
    ///
    /// The write is the destroy; disarming is tidying. If it fails, the alarm
    /// still fires, finds the session destroyed, does nothing, and Scheduler
    /// deletes it: the next alarm completes the destroy.
    pub async fn destroy(&self, session: &mut Session) -> Result<(), StoreError> {
        let armed = session.alarm_at;
        if session.destroy().is_err() {
            return Ok(());
        }
        session.alarm_at = None;
        let events: Vec<_> = self.events.iter().map(|events| events.of_session_destroyed(session)).collect();
        self.sessions.update_session_emitting(session, &events).await?;
        if let Some(events) = &self.events {
            events.wake();
        }
        count(Metric::SessionsDestroyed);
        tracing::info!(mcp.session.id = session.id.as_str(), "session destroyed");
        if let Some(at) = armed
            && let Err(error) = self.scheduler.cancel(&session.id, at).await
        {
            tracing::warn!(mcp.session.id = session.id.as_str(), %error, "the destroyed session's alarm stays armed; it will find nothing to do");
        }
        Ok(())
    }
}
