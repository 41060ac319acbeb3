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
//!
//! The console signs people in with the same issuer (the authorization code
//! flow with PKCE, `EXECUTOR_CONSOLE_CLIENT_ID`): its ID tokens, for the
//! console's client, name the same owner a bearer token of theirs would.

use std::time::{Duration, Instant};

use executor_core::{Principal, ToolkitName};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};
use serde_json::Value;
use tokio::sync::{OnceCell, RwLock};

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
    #[error("the issuer could not be asked ({0}); try signing in again shortly")]
    Issuer(String),
}

/// Where the console's sign-in leaves for and where its code is redeemed,
/// from the issuer's discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub authorization: String,
    pub token: String,
}

/// The longest answer read from the issuer's token endpoint.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// The claim that scopes a token to one toolkit (`/mcp/toolkits/{name}`).
pub const TOOLKIT_CLAIM: &str = "executor_toolkit";

/// The shortest time between two JWKS fetches.
const REFETCH_AFTER: Duration = Duration::from_secs(60);

pub struct Oidc {
    config: OidcConfig,
    http: reqwest::Client,
    keys: RwLock<Option<(Instant, JwkSet)>>,
    discovery: OnceCell<Value>,
}

impl Oidc {
    pub fn new(config: OidcConfig) -> Self {
        crate::http_edge::jwt_crypto::install();
        let http = executor_http_client::builder().timeout(Duration::from_secs(5)).build().unwrap_or_default();
        Self { config, http, keys: RwLock::new(None), discovery: OnceCell::new() }
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The console's client at the issuer, when the console signs in with it.
    pub fn console_client_id(&self) -> Option<&str> {
        self.config.console_client_id.as_deref()
    }

    /// Whether `token` is shaped like a JWT (API keys are not).
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3
    }

    /// The owner named by a valid token, and the toolkit its
    /// [`TOOLKIT_CLAIM`] scopes it to.
    pub async fn principal(&self, token: &str) -> Result<(Principal, Option<ToolkitName>), OidcError> {
        let claims = self.claims(token, &self.config.audience).await?;
        let principal = self.owner_of(&claims)?;
        let toolkit = match claims.get(TOOLKIT_CLAIM) {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(ToolkitName::parse(name).map_err(|e| OidcError::Toolkit(e.to_string()))?),
            Some(other) => return Err(OidcError::Toolkit(format!("{other} is not a string"))),
        };
        Ok((principal, toolkit))
    }

    /// Who the console's sign-in signed in: the owner its ID token names (as
    /// a bearer token of theirs would) and the claim that names them. The
    /// token must be for `client_id` and carry this sign-in's `nonce`.
    pub async fn console_principal(
        &self,
        id_token: &str,
        client_id: &str,
        nonce: &str,
    ) -> Result<(Principal, String), OidcError> {
        let claims = self.claims(id_token, client_id).await?;
        if claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err(OidcError::Invalid("the ID token's nonce is not this sign-in's".into()));
        }
        let principal = self.owner_of(&claims)?;
        let subject = claims.get(&self.config.owner_claim).and_then(Value::as_str).unwrap_or_default().to_owned();
        Ok((principal, subject))
    }

    /// The issuer's authorization and token endpoints.
    pub async fn endpoints(&self) -> Result<Endpoints, OidcError> {
        let document = self.discovery().await.map_err(|e| OidcError::Issuer(e.to_string()))?;
        let endpoint = |name: &str| {
            document
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| OidcError::Issuer(format!("its discovery document has no `{name}`")))
        };
        Ok(Endpoints { authorization: endpoint("authorization_endpoint")?, token: endpoint("token_endpoint")? })
    }

    /// The ID token the issuer gives for `code`: the authorization code
    /// grant of a public client, proven by the PKCE `verifier`.
    pub async fn redeem(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
        client_id: &str,
    ) -> Result<String, OidcError> {
        let token_endpoint = self.endpoints().await?.token;
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("client_id", client_id)
            .append_pair("code_verifier", verifier)
            .finish();
        let issuer = |e: reqwest::Error| OidcError::Issuer(e.without_url().to_string());
        let request = self.http.post(token_endpoint).header("content-type", "application/x-www-form-urlencoded");
        let response = request.body(form).send().await.map_err(issuer)?;
        let status = response.status();
        let body = response.bytes().await.map_err(issuer)?;
        let body = &body[..body.len().min(MAX_TOKEN_RESPONSE_BYTES)];
        let answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        if !status.is_success() {
            // The error code only: the body may echo what was sent.
            let error = answer.get("error").and_then(Value::as_str).unwrap_or("no error code");
            return Err(OidcError::Issuer(format!("its token endpoint answered {status} ({error})")));
        }
        answer
            .get("id_token")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| OidcError::Issuer("its token endpoint gave no id_token".into()))
    }

    /// The claims of a valid token of the issuer for `audience`.
    async fn claims(&self, token: &str, audience: &str) -> Result<Value, OidcError> {
        let header = decode_header(token).map_err(|e| OidcError::Invalid(e.to_string()))?;
        let kid = header.kid.ok_or_else(|| OidcError::Invalid("the token names no key (`kid`)".into()))?;
        let key = self.key(&kid).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[audience]);
        Ok(decode::<Value>(token, &key, &validation).map_err(|e| OidcError::Invalid(e.to_string()))?.claims)
    }

    /// The owner the claims name: in the issuer's name space, or an API-key
    /// owner with `share_key_owners`.
    fn owner_of(&self, claims: &Value) -> Result<Principal, OidcError> {
        let owner = claims.get(&self.config.owner_claim).and_then(Value::as_str).unwrap_or_default();
        let principal = if self.config.share_key_owners {
            Principal::key_owner(owner)
        } else {
            Principal::oidc(&self.config.issuer, owner)
        };
        principal.map_err(|_| OidcError::NoOwner(self.config.owner_claim.clone()))
    }

    async fn discovery(&self) -> Result<Value, reqwest::Error> {
        let url = format!("{}/.well-known/openid-configuration", self.config.issuer.trim_end_matches('/'));
        let document = self
            .discovery
            .get_or_try_init(|| async { self.http.get(url).send().await?.error_for_status()?.json::<Value>().await })
            .await?;
        Ok(document.clone())
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
                let document = self.discovery().await.map_err(keys)?;
                document["jwks_uri"]
                    .as_str()
                    .ok_or_else(|| OidcError::Keys("discovery has no jwks_uri".into()))?
                    .to_owned()
            }
        };
        self.http.get(url).send().await.map_err(keys)?.error_for_status().map_err(keys)?.json().await.map_err(keys)
    }
}
