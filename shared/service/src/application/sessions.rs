//! MCP sessions (protocol versions before 2026-07-28): a layer of our own in
//! front of rmcp's stateless service. A session is stored with a conditional
//! put and its first alarm armed; every later request must name a live
//! session of the same owner on the same endpoint (else "not found", the same
//! answer for unknown, destroyed and foreign sessions) and marks its
//! activity, coalesced. Ending it destroys it; its paused executions live on
//! (they belong to the owner). The HTTP side is `http_edge::sessions`.

use std::sync::Arc;
use std::time::Duration;

use executor_core::{ClientInfo, Clock, ElicitationMode, Principal, Session, SessionId, ToolkitName};
use executor_store::{Access, SessionStore, StoreError};
use executor_telemetry::Metric;

use crate::application::alarms::Alarms;

/// Sessions of this protocol version and later have none (served statelessly).
pub(crate) const STATELESS_VERSION: &str = "2026-07-28";

/// Why a session could not be started, used or ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// Unknown, destroyed, another owner's or another endpoint's: all alike.
    #[error("Session not found")]
    NotFound,
    #[error("the session is busy; try again")]
    Busy,
    #[error("no randomness: {0}")]
    NoRandomness(getrandom::Error),
    #[error("could not start a session: {0}")]
    NotStored(StoreError),
    #[error("could not arm the session's alarm: {0}")]
    NotArmed(StoreError),
    #[error("{0}")]
    Store(StoreError),
}

pub(crate) struct Sessions {
    store: Arc<dyn SessionStore>,
    alarms: Arc<Alarms>,
    clock: Arc<dyn Clock>,
    /// Activity is written at most this often per session.
    activity_interval: Duration,
    /// How long a session record is kept (TTL) after its last write.
    retention: Duration,
}

impl Sessions {
    pub fn new(
        store: Arc<dyn SessionStore>,
        alarms: Arc<Alarms>,
        clock: Arc<dyn Clock>,
        activity_interval: Duration,
        retention: Duration,
    ) -> Self {
        Self { store, alarms, clock, activity_interval, retention }
    }

    /// Store a new session of protocol `version` for `owner` on `endpoint`
    /// (conditional put) and arm its first alarm.
    pub async fn start(
        &self,
        owner: Principal,
        version: &str,
        client: ClientInfo,
        mode: ElicitationMode,
        endpoint: Option<&ToolkitName>,
    ) -> Result<SessionId, SessionError> {
        let id = crate::application::random::session_id().map_err(SessionError::NoRandomness)?;
        let now = self.clock.now();
        let mut session = Session::new(id, owner, now, version, client, mode, now.plus(self.retention))
            .on_endpoint(endpoint.cloned());
        let alarm = self.alarms.first_alarm(&mut session);
        self.store.create_session(&session).await.map_err(SessionError::NotStored)?;
        executor_telemetry::count(Metric::SessionsCreated);
        tracing::info!(mcp.protocol.version = version, "session created");
        self.alarms.arm(&session.id, alarm).await.map_err(SessionError::NotArmed)?;
        Ok(session.id)
    }

    /// The caller's live session `id` on `endpoint` (`None`: `/mcp`), its
    /// activity marked (at most once per `activity_interval`). Another
    /// endpoint's session is as unknown as a missing one, so a key scoped to a
    /// toolkit cannot use or end a session of `/mcp`.
    pub async fn check(
        &self,
        id: &str,
        owner: &Principal,
        endpoint: Option<&ToolkitName>,
    ) -> Result<SessionId, SessionError> {
        let id = SessionId::parse(id).map_err(|_| SessionError::NotFound)?;
        let session = match self.store.get_session(Access::Owner(owner), &id).await {
            Ok(session) if session.is_active() && session.toolkit.as_ref() == endpoint => session,
            Ok(_) | Err(StoreError::NotFound { .. }) => return Err(SessionError::NotFound),
            Err(e) => return Err(SessionError::Store(e)),
        };
        self.mark_activity(session).await;
        Ok(id)
    }

    /// Record that the session was used now (coalesced: at most once per
    /// `activity_interval`). Losing the race to a request marking the same
    /// activity is fine; losing it to the alarm's write (which bumps the
    /// version) is not, so the write is tried again on the fresh record. A
    /// store failure does not fail the request: it is logged and counted,
    /// since the alarm may then see the session idle for longer than it was.
    async fn mark_activity(&self, mut session: Session) {
        for _ in 0..2 {
            let now = self.clock.now();
            if now.since(session.last_activity_at) < self.activity_interval {
                return;
            }
            session.last_activity_at = now;
            session.expires_at = now.plus(self.retention);
            match self.store.update_session(&mut session).await {
                Ok(()) => return,
                Err(StoreError::Conflict { .. }) => match self.store.get_session(Access::Internal, &session.id).await {
                    Ok(fresh) if fresh.is_active() => session = fresh,
                    _ => return,
                },
                Err(StoreError::NotFound { .. }) => return,
                Err(error) => {
                    executor_telemetry::count(Metric::ActivityWriteFailures);
                    tracing::warn!(mcp.session.id = session.id.as_str(), %error, "could not record the session's activity");
                    return;
                }
            }
        }
    }

    /// End the caller's session `id` on `endpoint`: destroyed, its alarm disarmed.
    pub async fn end(&self, id: &str, owner: &Principal, endpoint: Option<&ToolkitName>) -> Result<(), SessionError> {
        let id = self.check(id, owner, endpoint).await?;
        for _ in 0..3 {
            let mut session = match self.store.get_session(Access::Owner(owner), &id).await {
                Ok(session) if session.is_active() => session,
                _ => return Err(SessionError::NotFound),
            };
            match self.alarms.destroy(&mut session).await {
                Ok(()) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(SessionError::Store(e)),
            }
        }
        Err(SessionError::Busy)
    }
}
