//! Per-owner connections to OAuth sources, as the service needs them: which
//! tools need one, whether an owner has one, and the authorization code flow
//! that makes one. The catalog implements it (it knows the sources and their
//! authorization servers); the service routes the browser through it.

use async_trait::async_trait;
use executor_core::{ExecutionId, Principal, Timestamp, TokenHash};

/// An owner's connection, as listed (never its tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    pub source: String,
    pub connected_at: Timestamp,
    pub scopes: Vec<String>,
    /// When the current access token expires (it is refreshed then, when it can be).
    pub expires_at: Option<Timestamp>,
}

/// What an authorization in progress answers: the owner, the source, and the
/// pause (execution, step, and the link the connect page was opened with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    pub owner: Principal,
    pub source: String,
    pub execution_id: ExecutionId,
    pub step: u32,
    pub link: TokenHash,
}

/// An authorization the callback took: what it answers, and what finishing
/// it needs (opaque to the service).
pub struct TakenAuthorization {
    pub authorization: Authorization,
    /// The `state` parameter it was taken with.
    pub state: String,
    /// The PKCE verifier, sealed by the implementation.
    pub sealed_verifier: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("no source `{0}` connects per owner (auth type oauth2); check the sources file")]
    UnknownSource(String),
    #[error(
        "this authorization is unknown, was already used, was replaced by opening the connect link again (only the \
         latest one counts), or took longer than 10 minutes; nothing was stored: open the connect link again to start \
         over"
    )]
    StateNotFound,
    /// A callback is completing the pause's connection: no other authorization may start meanwhile.
    #[error(
        "this call's connection is being completed by another authorization right now; wait for its page, or open \
         the link again in a few minutes"
    )]
    Completing,
    #[error("you have no connection to `{0}`; `GET /api/connections` lists yours")]
    NotConnected(String),
    #[error("the authorization server did not issue tokens: {0}")]
    Refused(String),
    #[error("the connection could not be stored or read: {0}")]
    Store(String),
}

#[async_trait]
pub trait Connections: Send + Sync + std::fmt::Debug {
    /// The per-owner source (its namespace) that the tool at `path` belongs to, if any.
    fn source_of(&self, path: &str) -> Option<String>;

    /// The owner's connections.
    async fn connected(&self, owner: &Principal) -> Result<Vec<ConnectionInfo>, ConnectError>;

    /// Start an authorization: store a fresh state bound to `authorization`
    /// (with a PKCE verifier) and answer the URL to send the person to. A
    /// pause has one state at a time: this one replaces any earlier one, which
    /// is refused from then on (`Completing` while a callback holds it).
    async fn begin(&self, authorization: &Authorization, redirect_uri: &str) -> Result<String, ConnectError>;

    /// The callback's first step: take the state (once). Until it is
    /// released, no other state can begin for its pause. Nothing is redeemed yet.
    async fn take(&self, state: &str) -> Result<TakenAuthorization, ConnectError>;

    /// Exchange `code` with the taken state's verifier and store the owner's tokens.
    async fn finish(&self, taken: &TakenAuthorization, code: &str, redirect_uri: &str) -> Result<(), ConnectError>;

    /// Forget a taken state, once the callback is done with it (whatever happened).
    async fn release(&self, taken: &TakenAuthorization);

    /// Forget the owner's connection to `source`.
    async fn disconnect(&self, owner: &Principal, source: &str) -> Result<(), ConnectError>;
}
