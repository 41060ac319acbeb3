//! Per-owner connections to OAuth 2 sources (the authorization code grant
//! with PKCE): what is stored about an owner's tokens for one source, and
//! the state that binds an authorization in progress to the pause it answers.
//!
//! The tokens themselves are never in these records as text: `sealed` is
//! their encryption (AEAD) by the catalog, opaque to the store.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{ExecutionId, Principal, Timestamp, TokenHash};

/// How long an owner's connection is kept after its last write (a refresh or
/// a connect): the store's TTL. Connecting again starts it anew.
pub const CONNECTION_RETENTION: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long an authorization may take, from the connect page to the callback.
pub const OAUTH_STATE_TTL: Duration = Duration::from_secs(10 * 60);

/// An owner's tokens for one source. Written only with conditions on
/// `version`, so two refreshers cannot both spend one refresh token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceConnection {
    pub owner: Principal,
    /// The source's namespace.
    pub source: String,
    pub connected_at: Timestamp,
    /// The scopes the authorization server granted (or, if it did not say, those asked for).
    pub scopes: Vec<String>,
    /// When the access token expires; `None`: the server gave no lifetime.
    pub access_expires_at: Option<Timestamp>,
    /// A refresher claimed the refresh until then: others wait for its result
    /// instead of sending the same refresh token again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refreshing_until: Option<Timestamp>,
    /// The access and refresh tokens, encrypted.
    pub sealed: String,
    /// When the store may forget it.
    pub expires_at: Timestamp,
    /// Bumped by every stored write; writes are conditional on it.
    pub version: u64,
}

/// An authorization in progress: created by the connect page, taken (once)
/// by the callback. Stored under the hash of its random `state` parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthState {
    pub hash: TokenHash,
    pub owner: Principal,
    pub source: String,
    /// The paused execution and the pause (its first pending step) it answers.
    pub execution_id: ExecutionId,
    pub step: u32,
    /// The link the connect page was opened with: the callback decides the pause through it.
    pub link: TokenHash,
    /// The PKCE code verifier, encrypted like the tokens.
    pub sealed_verifier: String,
    pub expires_at: Timestamp,
}
