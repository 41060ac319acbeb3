//! MCP sessions (protocol versions before 2026-07-28): a layer of our own in
//! front of rmcp's stateless service. `initialize` stores the session with a
//! conditional put and arms its first alarm; every later request must name a
//! live session of the same owner (else 404, the same answer for unknown,
//! destroyed and foreign sessions) and marks its activity, coalesced.
//! `DELETE /mcp` destroys it; its paused executions live on (they belong to
//! the owner).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use executor_core::{ClientInfo, Clock, ElicitationMode, Principal, Session, SessionId, ToolkitName};
use executor_store::{Access, SessionStore, StoreError};
use executor_telemetry::Metric;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::Value;

use crate::responses::{empty, rpc_error};
use crate::{Alarms, spans};

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
/// Sessions of this protocol version and later have none (served statelessly).
pub(crate) const STATELESS_VERSION: &str = "2026-07-28";

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

    /// After a successful `initialize` of a version with sessions: store the
    /// session (conditional put) and hand its id to the client.
    pub async fn start(
        &self,
        mut response: Response<Bytes>,
        request: &Value,
        owner: Principal,
        mode: ElicitationMode,
        endpoint: Option<&ToolkitName>,
    ) -> Response<Bytes> {
        let answered: Value = serde_json::from_slice(response.body()).unwrap_or_default();
        let Some(version) = answered["result"]["protocolVersion"].as_str() else { return response };
        if version >= STATELESS_VERSION {
            return response;
        }
        let params = &request["params"];
        let client = ClientInfo {
            name: params["clientInfo"]["name"].as_str().unwrap_or_default().to_owned(),
            version: params["clientInfo"]["version"].as_str().unwrap_or_default().to_owned(),
            capabilities: params["capabilities"].clone(),
        };
        let id = match crate::random::session_id() {
            Ok(id) => id,
            Err(e) => return rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &format!("no randomness: {e}")),
        };
        let now = self.clock.now();
        let mut session = Session::new(id, owner, now, version, client, mode, now.plus(self.retention))
            .on_endpoint(endpoint.cloned());
        let alarm = self.alarms.first_alarm(&mut session);
        if let Err(e) = self.store.create_session(&session).await {
            return rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &format!("could not start a session: {e}"));
        }
        spans::record("mcp.session.id", session.id.as_str());
        executor_telemetry::count(Metric::SessionsCreated);
        tracing::info!(mcp.protocol.version = version, "session created");
        if let Err(e) = self.alarms.arm(&session.id, alarm).await {
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32603,
                &format!("could not arm the session's alarm: {e}"),
            );
        }
        if let Ok(value) = HeaderValue::from_str(session.id.as_str()) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        response
    }

    /// The caller's live session on `endpoint` (`None`: `/mcp`), its activity
    /// marked (at most once per `activity_interval`), or 404 "Session not
    /// found": another endpoint's session is as unknown as a missing one, so
    /// a key scoped to a toolkit cannot use or end a session of `/mcp`.
    pub async fn check(
        &self,
        value: &HeaderValue,
        owner: &Principal,
        endpoint: Option<&ToolkitName>,
    ) -> Result<SessionId, Response<Bytes>> {
        let not_found = || rpc_error(StatusCode::NOT_FOUND, -32001, "Session not found");
        let id = value.to_str().ok().and_then(|v| SessionId::parse(v).ok()).ok_or_else(not_found)?;
        let session = match self.store.get_session(Access::Owner(owner), &id).await {
            Ok(session) if session.is_active() && session.toolkit.as_ref() == endpoint => session,
            Ok(_) | Err(StoreError::NotFound { .. }) => return Err(not_found()),
            Err(e) => return Err(rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &e.to_string())),
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

    /// `DELETE /mcp` (or a toolkit's endpoint): end the caller's session there.
    pub async fn end(&self, headers: &HeaderMap, owner: &Principal, endpoint: Option<&ToolkitName>) -> Response<Bytes> {
        let Some(value) = headers.get(SESSION_HEADER) else {
            return rpc_error(StatusCode::BAD_REQUEST, -32600, "DELETE needs the Mcp-Session-Id header");
        };
        let id = match self.check(value, owner, endpoint).await {
            Ok(id) => id,
            Err(response) => return response,
        };
        for _ in 0..3 {
            let mut session = match self.store.get_session(Access::Owner(owner), &id).await {
                Ok(session) if session.is_active() => session,
                _ => return rpc_error(StatusCode::NOT_FOUND, -32001, "Session not found"),
            };
            match self.alarms.destroy(&mut session).await {
                Ok(()) => return empty(StatusCode::NO_CONTENT),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32603, &e.to_string()),
            }
        }
        rpc_error(StatusCode::CONFLICT, -32000, "the session is busy; try again")
    }
}
