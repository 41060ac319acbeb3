//! Per-owner OAuth 2 (authorization code with PKCE): each owner connects
//! their own account to a source, and that source's requests carry the
//! owner's token.
//!
//! Tokens live in the store, one item per owner and source, sealed with
//! AES-256-GCM under the [`TokenKey`] (bound to the owner and source, so a
//! sealed value moved to another item does not open). Nothing else keeps
//! them: they are not in snapshots, logs, spans or events, and every token
//! handed out is added to the redactor of the source's results.
//!
//! Refresh. An expired access token is refreshed with the refresh token, and
//! providers that rotate refresh tokens revoke the whole family when a spent
//! one is sent again. So only one refresher may send it: within a process,
//! callers for one owner and source queue on one lock (single flight); across
//! processes, the refresher first *claims* the refresh (a write of
//! `refreshing_until`, conditional on the version it read). The one claim
//! that wins sends the refresh request and writes the new tokens (conditional
//! on its claim); the others wait for that write and use its tokens. A
//! refresher that dies after sending leaves its claim to expire
//! ([`REFRESH_LEASE`]); the next one then sends the stored refresh token,
//! which is only safe if the provider never received the first request.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use executor_core::{
    CONNECTION_RETENTION, Clock, ExecutionId, OAUTH_STATE_TTL, OAuthState, Principal, SourceConnection, Timestamp,
    TokenHash,
};
use executor_sandbox::{Authorization, ConnectError, ConnectionInfo, Connections, TakenAuthorization};
use executor_store::{ConnectionStore, StoreError};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::OAuth2Config;
use crate::oauth::{Issued, OAuthError, TokenEndpoint};
use crate::outbound::Outbound;
use crate::redact::{Redactor, display_url};

/// Names the secret whose text is the token key (on AWS).
pub const TOKEN_KEY_ENV: &str = "EXECUTOR_TOKEN_KEY_SECRET_ARN";

/// A refresh claimed by a refresher that then vanished is open to others after this long.
pub const REFRESH_LEASE: Duration = Duration::from_secs(30);
/// An access token this close to its expiry is refreshed before use.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// How often a caller waiting for another process's refresh looks again, and how many times.
const WAIT_STEP: Duration = Duration::from_millis(50);
const WAIT_STEPS: u32 = 400;
/// Tokens the redactor keeps: recently used ones, whoever owns them.
const REMEMBERED_TOKENS: usize = 256;
const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The key that seals owners' tokens at rest.
#[derive(Clone)]
pub struct TokenKey(Arc<LessSafeKey>);

impl TokenKey {
    /// Exactly 32 random bytes (the local key file's content).
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let key = UnboundKey::new(&AES_256_GCM, bytes).ok()?;
        Some(Self(Arc::new(LessSafeKey::new(key))))
    }

    /// A key derived from a secret's text (at least 32 characters, e.g. a
    /// generated Secrets Manager secret): its SHA-256.
    pub fn derive(secret: &str) -> Option<Self> {
        (secret.len() >= 32).then(|| Self::from_bytes(&Sha256::digest(secret.as_bytes()))).flatten()
    }

    /// The key named by `EXECUTOR_TOKEN_KEY_SECRET_ARN` (a secret reference:
    /// a Secrets Manager ARN, or `env:NAME`), read once; `None` when unset.
    pub async fn from_env() -> Result<Option<Self>, String> {
        let Some(reference) = std::env::var(TOKEN_KEY_ENV).ok().filter(|v| !v.is_empty()) else { return Ok(None) };
        let reference = crate::secrets::SecretRef::parse(&reference).map_err(|e| format!("{TOKEN_KEY_ENV}: {e}"))?;
        let secret = crate::secrets::Secrets::default().resolve(&reference).await.map_err(|e| e.to_string())?;
        Self::derive(&secret)
            .map(Some)
            .ok_or_else(|| format!("{TOKEN_KEY_ENV}: the secret must be at least 32 characters of random text"))
    }

    /// base64url(nonce || ciphertext || tag), bound to `context`.
    pub(crate) fn seal(&self, plaintext: &[u8], context: &str) -> Result<String, ConnectError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| ConnectError::Store("no randomness for a nonce".into()))?;
        let mut sealed = plaintext.to_vec();
        self.0
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(context.as_bytes()), &mut sealed)
            .map_err(|_| ConnectError::Store("the tokens could not be encrypted".into()))?;
        Ok(BASE64.encode([nonce.as_slice(), &sealed].concat()))
    }

    pub(crate) fn open(&self, sealed: &str, context: &str) -> Result<Vec<u8>, ConnectError> {
        let unreadable = || {
            ConnectError::Store(
                "a stored connection cannot be decrypted (the token key changed?); disconnect and connect again".into(),
            )
        };
        let bytes = BASE64.decode(sealed).map_err(|_| unreadable())?;
        if bytes.len() < NONCE_LEN {
            return Err(unreadable());
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| unreadable())?;
        let mut buffer = ciphertext.to_vec();
        let opened =
            self.0.open_in_place(nonce, Aad::from(context.as_bytes()), &mut buffer).map_err(|_| unreadable())?;
        Ok(opened.to_vec())
    }
}

/// What is sealed in a connection.
#[derive(Serialize, Deserialize)]
struct Tokens {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
}

/// Why a per-owner source's request has no token.
#[derive(Debug, thiserror::Error)]
pub enum OwnerTokenError {
    #[error("no connection to `{0}` for this owner; run the code again to be asked to connect")]
    NotConnected(String),
    #[error("the connection to `{0}` expired and cannot be refreshed; run the code again to be asked to connect")]
    Lapsed(String),
    #[error("refreshing the connection to `{source_name}` failed: {error}")]
    Refresh { source_name: String, error: OAuthError },
    /// The server refused the owner's token (revoked at the provider): the connection is removed.
    #[error(
        "`{0}` refused your connection's token (HTTP 401), so the connection was removed; run the code again to be \
         asked to connect"
    )]
    Rejected(String),
    #[error("another process is refreshing the connection to `{0}` and has not finished; retry in a few seconds")]
    StillRefreshing(String),
    #[error("{0}")]
    Connection(ConnectError),
}

/// One per-owner source: its authorization server and client.
struct OwnerSource {
    config: OAuth2Config,
    endpoint: TokenEndpoint,
    /// The client secret.
    redactor: Redactor,
}

/// Held while one owner's tokens for one source are read and, if need be, refreshed.
type Flight = Arc<tokio::sync::Mutex<()>>;

/// The per-owner sources of a catalog and their owners' tokens.
pub struct OwnerTokens {
    sources: RwLock<HashMap<String, Arc<OwnerSource>>>,
    store: Arc<dyn ConnectionStore>,
    key: TokenKey,
    outbound: Outbound,
    clock: Arc<dyn Clock>,
    /// One lock per owner and source: the in-process single flight.
    flights: Mutex<HashMap<(Principal, String), Flight>>,
    issued: Mutex<VecDeque<Arc<str>>>,
}

impl std::fmt::Debug for OwnerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sources = self.sources.read().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("OwnerTokens").field("sources", &sources.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

fn context(owner: &Principal, source: &str) -> String {
    format!("connection\n{owner}\n{source}")
}

fn store_error(error: StoreError) -> ConnectError {
    ConnectError::Store(error.to_string())
}

impl OwnerTokens {
    pub(crate) fn new(
        store: Arc<dyn ConnectionStore>,
        key: TokenKey,
        outbound: Outbound,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            sources: RwLock::default(),
            store,
            key,
            outbound,
            clock,
            flights: Mutex::default(),
            issued: Mutex::default(),
        }
    }

    pub(crate) fn register(&self, namespace: &str, config: OAuth2Config, endpoint: TokenEndpoint, redactor: Redactor) {
        let source = Arc::new(OwnerSource { config, endpoint, redactor });
        self.sources.write().unwrap_or_else(|e| e.into_inner()).insert(namespace.to_owned(), source);
    }

    /// The key owners' tokens are sealed with, which seals registered client secrets too.
    pub(crate) fn key(&self) -> &TokenKey {
        &self.key
    }

    pub(crate) fn has_sources(&self) -> bool {
        !self.sources.read().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    fn source(&self, namespace: &str) -> Result<Arc<OwnerSource>, ConnectError> {
        let sources = self.sources.read().unwrap_or_else(|e| e.into_inner());
        sources.get(namespace).cloned().ok_or_else(|| ConnectError::UnknownSource(namespace.to_owned()))
    }

    /// `base` with the tokens handed out lately: what a per-owner source's answers are redacted of.
    pub(crate) fn redactor(&self, base: &Redactor) -> Redactor {
        let mut redactor = base.clone();
        for token in self.issued.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            redactor.add(token);
        }
        redactor
    }

    fn remember(&self, token: &str) {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        if !issued.iter().any(|t| &**t == token) {
            issued.push_back(token.into());
            if issued.len() > REMEMBERED_TOKENS {
                issued.pop_front();
            }
        }
    }

    fn flight(&self, owner: &Principal, source: &str) -> Flight {
        let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        flights.entry((owner.clone(), source.to_owned())).or_default().clone()
    }

    fn seal_tokens(&self, owner: &Principal, source: &str, tokens: &Tokens) -> Result<String, ConnectError> {
        let json = serde_json::to_vec(tokens).map_err(|e| ConnectError::Store(e.to_string()))?;
        self.key.seal(&json, &context(owner, source))
    }

    fn open_tokens(&self, connection: &SourceConnection) -> Result<Tokens, ConnectError> {
        let json = self.key.open(&connection.sealed, &context(&connection.owner, &connection.source))?;
        serde_json::from_slice(&json).map_err(|e| ConnectError::Store(e.to_string()))
    }

    /// The connection after `issued`: new tokens (a refresh that issued no
    /// new refresh token keeps the old one), their expiry, and no claim.
    fn issued_connection(
        &self,
        base: &SourceConnection,
        issued: &Issued,
        old_refresh: Option<String>,
        now: Timestamp,
    ) -> Result<SourceConnection, ConnectError> {
        let tokens = Tokens {
            access_token: issued.access.value.to_string(),
            refresh_token: issued.refresh_token.clone().or(old_refresh),
        };
        let scopes = match &issued.scope {
            Some(scope) => scope.split_whitespace().map(str::to_owned).collect(),
            None => base.scopes.clone(),
        };
        Ok(SourceConnection {
            sealed: self.seal_tokens(&base.owner, &base.source, &tokens)?,
            scopes,
            access_expires_at: issued.expires_at,
            refreshing_until: None,
            expires_at: now.plus(CONNECTION_RETENTION),
            ..base.clone()
        })
    }

    /// `owner`'s access token for `source`, refreshed first when it expired
    /// (see the module's description).
    pub(crate) async fn access_token(&self, owner: &Principal, source: &str) -> Result<Arc<str>, OwnerTokenError> {
        let per_owner = self.source(source).map_err(OwnerTokenError::Connection)?;
        let flight = self.flight(owner, source);
        let _single = flight.lock().await;
        for _ in 0..WAIT_STEPS {
            let connection = match self.store.get_connection(owner, source).await {
                Ok(connection) => connection,
                Err(StoreError::NotFound { .. }) => return Err(OwnerTokenError::NotConnected(source.to_owned())),
                Err(e) => return Err(OwnerTokenError::Connection(store_error(e))),
            };
            let tokens = self.open_tokens(&connection).map_err(OwnerTokenError::Connection)?;
            let now = self.clock.now();
            let fresh = connection.access_expires_at.is_none_or(|at| now.plus(EXPIRY_MARGIN) < at);
            if fresh {
                self.remember(&tokens.access_token);
                return Ok(tokens.access_token.into());
            }
            let Some(refresh_token) = tokens.refresh_token else {
                return Err(OwnerTokenError::Lapsed(source.to_owned()));
            };
            if connection.refreshing_until.is_some_and(|until| now < until) {
                // Another process holds the claim: its write brings the new tokens.
                tokio::time::sleep(WAIT_STEP).await;
                continue;
            }
            let mut claimed =
                SourceConnection { refreshing_until: Some(now.plus(REFRESH_LEASE)), ..connection.clone() };
            match self.store.save_connection(&mut claimed, Some(connection.version)).await {
                Ok(()) => {}
                // Someone else claimed, refreshed or disconnected first: look again.
                Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(OwnerTokenError::Connection(store_error(e))),
            }
            let redactor = self.redactor(&per_owner.redactor);
            let refreshed = per_owner.endpoint.refresh(&refresh_token, &self.outbound, &redactor, now).await;
            return match refreshed {
                Ok(issued) => {
                    let mut next = self
                        .issued_connection(&claimed, &issued, Some(refresh_token), now)
                        .map_err(OwnerTokenError::Connection)?;
                    self.store
                        .save_connection(&mut next, Some(claimed.version))
                        .await
                        .map_err(|e| OwnerTokenError::Connection(store_error(e)))?;
                    tracing::info!(source, %owner, "OAuth connection refreshed");
                    self.remember(&issued.access.value);
                    Ok(issued.access.value)
                }
                Err(OAuthError::InvalidGrant { .. }) => {
                    // The refresh token is dead: drop the connection, so the next call asks to connect.
                    let _ = self.store.delete_connection(owner, source, Some(claimed.version)).await;
                    tracing::warn!(source, %owner, "OAuth refresh refused (invalid_grant); connection dropped");
                    Err(OwnerTokenError::Lapsed(source.to_owned()))
                }
                Err(error) => {
                    // Give the claim back: the refresh token was not spent (or the server says nothing usable).
                    let mut released = SourceConnection { refreshing_until: None, ..claimed.clone() };
                    let _ = self.store.save_connection(&mut released, Some(claimed.version)).await;
                    Err(OwnerTokenError::Refresh { source_name: source.to_owned(), error })
                }
            };
        }
        Err(OwnerTokenError::StillRefreshing(source.to_owned()))
    }

    /// `token` was refused by the source (revoked before it expired): drop
    /// `owner`'s connection if it still holds that token (not one made since),
    /// so their next call asks them to connect again.
    pub(crate) async fn forget(&self, owner: &Principal, source: &str, token: &str) -> OwnerTokenError {
        let rejected = OwnerTokenError::Rejected(source.to_owned());
        let Ok(connection) = self.store.get_connection(owner, source).await else { return rejected };
        if self.open_tokens(&connection).is_ok_and(|tokens| tokens.access_token == token) {
            let _ = self.store.delete_connection(owner, source, Some(connection.version)).await;
            tracing::warn!(source, %owner, "the source refused the access token (HTTP 401); connection dropped");
        }
        rejected
    }
}

fn random_text() -> Result<String, ConnectError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes).map_err(|_| ConnectError::Store("no randomness for a state".into()))?;
    Ok(BASE64.encode(bytes))
}

#[async_trait]
impl Connections for OwnerTokens {
    fn source_of(&self, path: &str) -> Option<String> {
        let namespace = path.split('.').next()?;
        let sources = self.sources.read().unwrap_or_else(|e| e.into_inner());
        sources.contains_key(namespace).then(|| namespace.to_owned())
    }

    async fn connected(&self, owner: &Principal) -> Result<Vec<ConnectionInfo>, ConnectError> {
        let connections = self.store.list_connections(owner).await.map_err(store_error)?;
        let mut listed: Vec<ConnectionInfo> = connections
            .into_iter()
            .filter(|c| self.source(&c.source).is_ok())
            .map(|c| ConnectionInfo {
                source: c.source,
                connected_at: c.connected_at,
                scopes: c.scopes,
                expires_at: c.access_expires_at,
            })
            .collect();
        listed.sort_by(|a, b| a.source.cmp(&b.source));
        Ok(listed)
    }

    async fn begin(&self, authorization: &Authorization, redirect_uri: &str) -> Result<String, ConnectError> {
        let source = self.source(&authorization.source)?;
        // The execution id leads the callback to the pause's one stored state.
        let state = format!("{}.{}", authorization.execution_id, random_text()?);
        let verifier = random_text()?;
        let hash = TokenHash::of_token(&state);
        let sealed_verifier = self.key.seal(verifier.as_bytes(), &format!("state\n{}", hash.as_str()))?;
        let record = OAuthState {
            hash,
            owner: authorization.owner.clone(),
            source: authorization.source.clone(),
            execution_id: authorization.execution_id.clone(),
            step: authorization.step,
            link: authorization.link.clone(),
            sealed_verifier,
            expires_at: self.clock.now().plus(OAUTH_STATE_TTL),
        };
        match self.store.put_oauth_state(&record).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => return Err(ConnectError::Completing),
            Err(e) => return Err(store_error(e)),
        }
        // RFC 7636 4.2: S256.
        let challenge = BASE64.encode(Sha256::digest(verifier.as_bytes()));
        let mut url = source.config.authorization_url.clone();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &source.config.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &source.config.requested_scopes().join(" "))
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(resource) = &source.endpoint.resource {
            url.query_pairs_mut().append_pair("resource", resource.as_str());
        }
        tracing::info!(
            source = authorization.source,
            owner = %authorization.owner,
            authorization_url = %display_url(&source.config.authorization_url),
            "OAuth authorization started"
        );
        Ok(url.into())
    }

    async fn take(&self, state: &str) -> Result<TakenAuthorization, ConnectError> {
        let execution = state.split_once('.').and_then(|(id, _)| ExecutionId::parse(id).ok());
        let Some(execution) = execution else { return Err(ConnectError::StateNotFound) };
        let record = match self.store.take_oauth_state(&execution, &TokenHash::of_token(state)).await {
            Ok(record) => record,
            Err(StoreError::NotFound { .. }) => return Err(ConnectError::StateNotFound),
            Err(e) => return Err(store_error(e)),
        };
        Ok(TakenAuthorization {
            authorization: Authorization {
                owner: record.owner,
                source: record.source,
                execution_id: record.execution_id,
                step: record.step,
                link: record.link,
            },
            state: state.to_owned(),
            sealed_verifier: record.sealed_verifier,
        })
    }

    async fn finish(&self, taken: &TakenAuthorization, code: &str, redirect_uri: &str) -> Result<(), ConnectError> {
        let Authorization { owner, source: name, .. } = &taken.authorization;
        let source = self.source(name)?;
        let hash = TokenHash::of_token(&taken.state);
        let verifier = self.key.open(&taken.sealed_verifier, &format!("state\n{}", hash.as_str()))?;
        let verifier = String::from_utf8(verifier).map_err(|e| ConnectError::Store(e.to_string()))?;
        let now = self.clock.now();
        let issued = source
            .endpoint
            .authorization_code(code, &verifier, redirect_uri, &self.outbound, &self.redactor(&source.redactor), now)
            .await
            .map_err(|e| ConnectError::Refused(e.to_string()))?;
        let base = SourceConnection {
            owner: owner.clone(),
            source: name.clone(),
            connected_at: now,
            scopes: source.config.requested_scopes(),
            access_expires_at: None,
            refreshing_until: None,
            sealed: String::new(),
            expires_at: now,
            version: 0,
        };
        let mut connection = self.issued_connection(&base, &issued, None, now)?;
        // A new connection replaces any earlier one (connecting again after a revoke).
        let stored = match self.store.get_connection(owner, name).await {
            Ok(stored) => Some(stored.version),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(store_error(e)),
        };
        self.store.save_connection(&mut connection, stored).await.map_err(store_error)?;
        self.remember(&issued.access.value);
        tracing::info!(source = name, %owner, "OAuth connection stored");
        Ok(())
    }

    async fn release(&self, taken: &TakenAuthorization) {
        let (execution, hash) = (&taken.authorization.execution_id, TokenHash::of_token(&taken.state));
        if let Err(error) = self.store.release_oauth_state(execution, &hash).await {
            // It lapses with its expiry; until then the pause cannot start another authorization.
            tracing::warn!(%error, executor.execution.id = execution.as_str(), "an OAuth state could not be released");
        }
    }

    async fn disconnect(&self, owner: &Principal, source: &str) -> Result<(), ConnectError> {
        match self.store.delete_connection(owner, source, None).await {
            Ok(()) => {
                tracing::info!(source, %owner, "OAuth connection removed");
                Ok(())
            }
            Err(StoreError::NotFound { .. }) => Err(ConnectError::NotConnected(source.to_owned())),
            Err(e) => Err(store_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_tokens_open_only_with_their_key_and_context() {
        let key = TokenKey::from_bytes(&[7u8; 32]).unwrap();
        let sealed = key.seal(b"secret-token", "connection\nalice\ncrm").unwrap();
        assert!(!sealed.contains("secret-token"));
        assert_eq!(key.open(&sealed, "connection\nalice\ncrm").unwrap(), b"secret-token");
        assert!(key.open(&sealed, "connection\nbob\ncrm").is_err(), "bound to its owner and source");
        let other = TokenKey::from_bytes(&[8u8; 32]).unwrap();
        assert!(other.open(&sealed, "connection\nalice\ncrm").is_err());
        assert_ne!(sealed, key.seal(b"secret-token", "connection\nalice\ncrm").unwrap(), "a fresh nonce each time");
        assert!(TokenKey::from_bytes(&[0u8; 31]).is_none());
        assert!(TokenKey::derive("too short").is_none());
        assert!(TokenKey::derive(&"x".repeat(32)).is_some());
    }
}
