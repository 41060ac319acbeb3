//! Optional OIDC bearer tokens (Cognito, Auth0, any IdP): a JWT signed by a
//! key of the issuer's JWKS, for our audience, not expired. The owner is
//! `oidc:<issuer>#<claim>` (the claim is `sub` by default), a name space of its
//! own: an IdP user whose claim equals an API-key owner's name is not that
//! owner. With `share_key_owners` (explicit configuration) the claim itself is
//! the owner, so a person's key and their IdP login are one owner. The JWKS is
//! fetched once and again only for an unknown key id, at most once a minute.
//!
//! A token with the claim [`TOOLKIT_CLAIM`] is scoped to the toolkit it names,
//! as a key created with `--toolkit` is.

use std::time::{Duration, Instant};

use executor_core::{Principal, ToolkitName};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};
use serde_json::Value;
use tokio::sync::RwLock;

use crate::config::OidcConfig;

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the token is not a valid JWT from the configured issuer: {0}")]
    Invalid(String),
    #[error("the token has no usable `{0}` claim to name its owner")]
    NoOwner(String),
    #[error("the token's `{TOOLKIT_CLAIM}` claim must name a toolkit: {0}")]
    Toolkit(String),
    #[error("the issuer's keys could not be fetched: {0}")]
    Keys(String),
}

/// The claim that scopes a token to one toolkit (`/mcp/toolkits/{name}`).
pub const TOOLKIT_CLAIM: &str = "executor_toolkit";

/// The shortest time between two JWKS fetches.
const REFETCH_AFTER: Duration = Duration::from_secs(60);

pub struct Oidc {
    config: OidcConfig,
    http: reqwest::Client,
    keys: RwLock<Option<(Instant, JwkSet)>>,
}

impl Oidc {
    pub fn new(config: OidcConfig) -> Self {
        crate::http_edge::jwt_crypto::install();
        let http = executor_http_client::builder().timeout(Duration::from_secs(5)).build().unwrap_or_default();
        Self { config, http, keys: RwLock::new(None) }
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// Whether `token` is shaped like a JWT (API keys are not).
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3
    }

    /// The owner named by a valid token, and the toolkit its
    /// [`TOOLKIT_CLAIM`] scopes it to.
    pub async fn principal(&self, token: &str) -> Result<(Principal, Option<ToolkitName>), OidcError> {
        let header = decode_header(token).map_err(|e| OidcError::Invalid(e.to_string()))?;
        let kid = header.kid.ok_or_else(|| OidcError::Invalid("the token names no key (`kid`)".into()))?;
        let key = self.key(&kid).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        let claims = decode::<Value>(token, &key, &validation).map_err(|e| OidcError::Invalid(e.to_string()))?.claims;
        let owner = claims.get(&self.config.owner_claim).and_then(Value::as_str).unwrap_or_default();
        let principal = if self.config.share_key_owners {
            Principal::key_owner(owner)
        } else {
            Principal::oidc(&self.config.issuer, owner)
        };
        let principal = principal.map_err(|_| OidcError::NoOwner(self.config.owner_claim.clone()))?;
        let toolkit = match claims.get(TOOLKIT_CLAIM) {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(ToolkitName::parse(name).map_err(|e| OidcError::Toolkit(e.to_string()))?),
            Some(other) => return Err(OidcError::Toolkit(format!("{other} is not a string"))),
        };
        Ok((principal, toolkit))
    }

    async fn key(&self, kid: &str) -> Result<DecodingKey, OidcError> {
        let cached = self.keys.read().await;
        let found = |set: &JwkSet| set.find(kid).map(DecodingKey::from_jwk);
        if let Some((fetched, set)) = cached.as_ref() {
            if let Some(key) = found(set) {
                return key.map_err(|e| OidcError::Keys(e.to_string()));
            }
            if fetched.elapsed() < REFETCH_AFTER {
                return Err(OidcError::Invalid(format!("no key {kid:?} in the issuer's JWKS")));
            }
        }
        drop(cached);
        let set = self.fetch().await?;
        let key = found(&set);
        *self.keys.write().await = Some((Instant::now(), set));
        key.ok_or_else(|| OidcError::Invalid(format!("no key {kid:?} in the issuer's JWKS")))?
            .map_err(|e| OidcError::Keys(e.to_string()))
    }

    async fn fetch(&self) -> Result<JwkSet, OidcError> {
        let keys = |e: reqwest::Error| OidcError::Keys(e.to_string());
        let url = match &self.config.jwks_url {
            Some(url) => url.clone(),
            None => {
                let discovery =
                    format!("{}/.well-known/openid-configuration", self.config.issuer.trim_end_matches('/'));
                let document: Value =
                    self.http.get(discovery).send().await.map_err(keys)?.json().await.map_err(keys)?;
                document["jwks_uri"]
                    .as_str()
                    .ok_or_else(|| OidcError::Keys("discovery has no jwks_uri".into()))?
                    .to_owned()
            }
        };
        self.http.get(url).send().await.map_err(keys)?.error_for_status().map_err(keys)?.json().await.map_err(keys)
    }
}
