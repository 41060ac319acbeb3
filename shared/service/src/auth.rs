//! Who is calling: a bearer API key (only its SHA-256 is stored) or, when
//! configured, an OIDC JWT. Anything else gets the 401 challenge that points
//! at the RFC 9728 metadata.
//!
//! A verified key is remembered for [`KEY_CACHE_TTL`] (by the host's clock),
//! so a request on a live session reads the store once (its session), not
//! twice. The price is the revocation delay: a key revoked where this process
//! does not hear of it (another Lambda instance, `executor keys revoke --store
//! dynamodb`) still works here until its entry expires. `executor serve` on
//! the embedded store hears of every revocation (the admin socket calls
//! [`crate::Host::forget_keys`]), so there a revoked key stops at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use executor_core::{Clock, Principal, Timestamp, TokenHash, ToolkitName};
use executor_store::{KeyStore, StoreError};
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};

use crate::oidc::Oidc;
use crate::responses::rpc_error;
use crate::spans;

/// How long a verified API key is taken on trust: the longest a key revoked
/// elsewhere keeps working in this process.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(60);
/// Keys remembered at once (a few hundred bytes each): past it the entry
/// closest to expiry makes room.
const KEY_CACHE_ENTRIES: usize = 4096;

pub(crate) struct Authenticator {
    keys: Arc<dyn KeyStore>,
    oidc: Option<Oidc>,
    verified: KeyCache,
}

/// Keys read from the store, with when they must be read again.
struct KeyCache {
    clock: Arc<dyn Clock>,
    entries: Mutex<HashMap<TokenHash, Verified>>,
}

#[derive(Clone)]
struct Verified {
    owner: Principal,
    toolkit: Option<ToolkitName>,
    until: Timestamp,
}

impl KeyCache {
    fn get(&self, hash: &TokenHash) -> Option<Verified> {
        let now = self.clock.now();
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(hash).filter(|v| v.until > now).cloned()
    }

    fn put(&self, hash: TokenHash, owner: Principal, toolkit: Option<ToolkitName>) {
        let now = self.clock.now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= KEY_CACHE_ENTRIES && !entries.contains_key(&hash) {
            entries.retain(|_, v| v.until > now);
            if entries.len() >= KEY_CACHE_ENTRIES
                && let Some(first) = entries.iter().min_by_key(|(_, v)| v.until).map(|(k, _)| k.clone())
            {
                entries.remove(&first);
            }
        }
        entries.insert(hash, Verified { owner, toolkit, until: now.plus(KEY_CACHE_TTL) });
    }

    fn clear(&self) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

impl Authenticator {
    pub fn new(keys: Arc<dyn KeyStore>, oidc: Option<Oidc>, clock: Arc<dyn Clock>) -> Self {
        Self { keys, oidc, verified: KeyCache { clock, entries: Mutex::new(HashMap::new()) } }
    }

    /// Read every key from the store again: one was revoked.
    pub fn forget_keys(&self) {
        self.verified.clear();
    }

    /// The OIDC issuer whose tokens are accepted, if any.
    pub fn issuer(&self) -> Option<&str> {
        self.oidc.as_ref().map(Oidc::issuer)
    }

    /// The caller of a bearer API key (or OIDC token) and the toolkit it is
    /// scoped to, if any; or the 401 challenge. A scoped caller works only on
    /// its toolkit's routes: each route checks. `refuse` answers in the
    /// surface's own shape (JSON-RPC for `/mcp`, the API's for `/api`).
    pub async fn authenticate_scoped(
        &self,
        headers: &HeaderMap,
        base_url: &str,
        refuse: fn(StatusCode, &str) -> Response<Bytes>,
    ) -> Result<(Principal, Option<ToolkitName>), Response<Bytes>> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim);
        let challenge = |message: &str| {
            let mut response = refuse(StatusCode::UNAUTHORIZED, message);
            let metadata = format!("{base_url}/.well-known/oauth-protected-resource/mcp");
            if let Ok(value) = HeaderValue::from_str(&format!("Bearer resource_metadata=\"{metadata}\"")) {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
            }
            response
        };
        // Only the conformance build: its suite cannot send a token (see `conformance::anonymous_owner`).
        #[cfg(feature = "conformance")]
        if token.is_none_or(str::is_empty) {
            return Ok((crate::conformance::anonymous_owner(), None));
        }
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(challenge(
                "Unauthorized: send `Authorization: Bearer <API key>` (create one with `executor keys create`)",
            ));
        };
        if let Some(oidc) = self.oidc.as_ref().filter(|_| Oidc::looks_like_jwt(token)) {
            let (owner, toolkit) = oidc.principal(token).await.map_err(|e| challenge(&format!("Unauthorized: {e}")))?;
            spans::record_owner(&owner);
            return Ok((owner, toolkit));
        }
        let hash = TokenHash::of_token(token);
        if let Some(Verified { owner, toolkit, .. }) = self.verified.get(&hash) {
            spans::record_owner(&owner);
            return Ok((owner, toolkit));
        }
        match self.keys.find_key(&hash).await {
            Ok(key) => {
                spans::record_owner(&key.owner);
                self.verified.put(hash, key.owner.clone(), key.toolkit.clone());
                Ok((key.owner, key.toolkit))
            }
            Err(StoreError::NotFound { .. }) => Err(challenge("Unauthorized: the API key is not valid")),
            Err(e) => Err(refuse(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())),
        }
    }
}

/// Why a key scoped to `toolkit` is refused here (403).
pub(crate) fn scoped_elsewhere(toolkit: &ToolkitName) -> String {
    format!("Forbidden: this key is scoped to toolkit `{toolkit}` and works only on /mcp/toolkits/{toolkit}")
}

/// A request `/mcp` did not let in: 401, or 503 when the keys cannot be read.
pub(crate) fn rpc_refusal(status: StatusCode, message: &str) -> Response<Bytes> {
    let code = match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => -32001,
        _ => -32603,
    };
    rpc_error(status, code, message)
}
