//! Who is calling: a bearer API key (`application::keys`) or, when
//! configured, an OIDC JWT. Anything else gets the 401 challenge that points
//! at the RFC 9728 metadata.

use std::sync::Arc;

use bytes::Bytes;
use executor_core::{Clock, DecidedBy, Principal, ToolkitName};
use executor_store::KeyStore;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};

use crate::application::keys::{KeyError, Keys, VerifiedKey};
use crate::http_edge::oidc::Oidc;
use crate::http_edge::responses::rpc_error;
use crate::http_edge::spans;

/// Who a request authenticated as: the owner, the toolkit its key is scoped
/// to, and the credential itself as the audit trail names whoever decides
/// with it (`key:<owner>/<key id>` or `oidc:<issuer>#<subject>`).
pub(crate) struct Authenticated {
    pub owner: Principal,
    pub toolkit: Option<ToolkitName>,
    pub credential: DecidedBy,
}

pub(crate) struct Authenticator {
    keys: Keys,
    oidc: Option<Arc<Oidc>>,
}

impl Authenticator {
    pub fn new(keys: Arc<dyn KeyStore>, oidc: Option<Arc<Oidc>>, clock: Arc<dyn Clock>) -> Self {
        Self { keys: Keys::new(keys, clock), oidc }
    }

    /// Read every key from the store again: one was revoked.
    pub fn forget_keys(&self) {
        self.keys.forget();
    }

    /// The OIDC issuer whose tokens are accepted, if any.
    pub fn issuer(&self) -> Option<&str> {
        self.oidc.as_deref().map(Oidc::issuer)
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
    ) -> Result<Authenticated, Response<Bytes>> {
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
            let owner = crate::http_edge::conformance::anonymous_owner();
            return Ok(Authenticated { credential: DecidedBy::principal(&owner), owner, toolkit: None });
        }
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Err(challenge(
                "Unauthorized: send `Authorization: Bearer <API key>` (create one with `executor keys create`)",
            ));
        };
        if let Some(oidc) = self.oidc.as_ref().filter(|_| Oidc::looks_like_jwt(token)) {
            let (owner, toolkit) = oidc.principal(token).await.map_err(|e| challenge(&format!("Unauthorized: {e}")))?;
            spans::record_owner(&owner);
            return Ok(Authenticated { credential: DecidedBy::principal(&owner), owner, toolkit });
        }
        match self.keys.verify(token).await {
            Ok(VerifiedKey { owner, toolkit, hash }) => {
                spans::record_owner(&owner);
                let credential = DecidedBy::key(&owner, &hash);
                Ok(Authenticated { owner, toolkit, credential })
            }
            Err(error @ KeyError::Unknown) => Err(challenge(&error.to_string())),
            Err(error @ KeyError::Store(_)) => Err(refuse(StatusCode::SERVICE_UNAVAILABLE, &error.to_string())),
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
