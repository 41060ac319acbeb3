//! MCP sessions of the stateful protocol versions (2025-03-26 .. 2025-11-25).

use serde::{Deserialize, Serialize};

use crate::{Principal, SessionId, Timestamp, ToolkitName};

/// How approvals reach a human for this connection (`?elicitation_mode=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationMode {
    /// The model is told to call `resume`; the default.
    #[default]
    Model,
    /// An approval link for a person in a browser.
    Browser,
    /// The client's own elicitation UI (2026-07-28 input-required results).
    Native,
}

impl ElicitationMode {
    /// As in `?elicitation_mode=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Model => "model",
            Self::Browser => "browser",
            Self::Native => "native",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Active,
    Destroyed,
}

/// What the client said about itself in `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientInfo {
    pub name: String,
    pub version: String,
    /// The client capabilities object, kept verbatim.
    #[serde(default)]
    pub capabilities: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("session {0} was already destroyed; start a new session with `initialize`")]
    AlreadyDestroyed(SessionId),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: SessionId,
    pub owner: Principal,
    pub created_at: Timestamp,
    pub last_activity_at: Timestamp,
    pub protocol_version: String,
    pub client: ClientInfo,
    pub elicitation_mode: ElicitationMode,
    pub status: SessionStatus,
    /// When the session's alarm is set to fire; the in-process scheduler re-arms
    /// from it after a restart.
    #[serde(default)]
    pub alarm_at: Option<Timestamp>,
    /// The toolkit whose endpoint started it (`None`: `/mcp`): a session is
    /// used and ended only on its own endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ToolkitName>,
    /// When storage may forget the record (DynamoDB TTL); reads treat it as gone after.
    pub expires_at: Timestamp,
    /// Bumped by every stored write; writes are conditional on it.
    pub version: u64,
}

impl Session {
    /// A session as created by `initialize`.
    pub fn new(
        id: SessionId,
        owner: Principal,
        now: Timestamp,
        protocol_version: impl Into<String>,
        client: ClientInfo,
        elicitation_mode: ElicitationMode,
        expires_at: Timestamp,
    ) -> Self {
        Self {
            id,
            owner,
            created_at: now,
            last_activity_at: now,
            protocol_version: protocol_version.into(),
            client,
            elicitation_mode,
            status: SessionStatus::Active,
            alarm_at: None,
            toolkit: None,
            expires_at,
            version: 0,
        }
    }

    /// The same session, started on `toolkit`'s endpoint.
    pub fn on_endpoint(self, toolkit: Option<ToolkitName>) -> Self {
        Self { toolkit, ..self }
    }

    pub fn is_active(&self) -> bool {
        self.status == SessionStatus::Active
    }

    pub fn destroy(&mut self) -> Result<(), SessionError> {
        match self.status {
            SessionStatus::Active => {
                self.status = SessionStatus::Destroyed;
                Ok(())
            }
            SessionStatus::Destroyed => Err(SessionError::AlreadyDestroyed(self.id.clone())),
        }
    }
}
