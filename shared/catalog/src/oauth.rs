//! OAuth 2 access tokens for a source's requests (RFC 6749).
//!
//! [`TokenEndpoint`] asks an authorization server for a token: the client
//! authenticates with HTTP basic auth and the grant's form fields are posted.
//! The client credentials grant (machine to machine) keeps one token per
//! source in a [`TokenCache`]; the per-owner grants (authorization code and
//! refresh token) post other fields to the same endpoint and keep their
//! tokens per owner (`connections.rs`). A public client (no secret) sends
//! its `client_id` in the form instead of basic auth.
//!
//! [`TokenCache`] holds a source's current token and gets a new one shortly
//! before it expires, by the catalog's clock, or after the upstream refused
//! it (401). One request at a time per source: callers that find the token
//! missing or stale queue on one lock, the first fetches, the others reuse
//! its result. Every token handed out is added to the cache's redactor, so
//! no result, error or log line carries it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use base64::Engine as _;
use executor_core::{Clock, Timestamp};
use serde::Deserialize;
use url::Url;

use crate::outbound::{Outbound, OutboundError};
use crate::redact::{Redactor, display_url};

/// How long before its expiry a token is replaced (at most half its lifetime),
/// so a request never leaves with a token about to lapse.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// Recently issued tokens the redactor keeps: an upstream may echo one a
/// little after it was replaced. Bounded, as a service answering 401 to
/// everything makes a new token per call.
const REMEMBERED_TOKENS: usize = 8;
/// How much of the authorization server's error answer is shown.
const EXCERPT_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("cannot reach the token endpoint {url}: {error}")]
    Unreachable { url: String, error: OutboundError },
    #[error(
        "the token endpoint {url} refused the client (HTTP {status}): {excerpt}; check the source's client_id, \
         client_secret and scopes"
    )]
    Refused { url: String, status: u16, excerpt: String },
    /// The answer is not shown: it may hold a token.
    #[error("the token endpoint {url} answered without a usable bearer `access_token`: {problem}")]
    Malformed { url: String, problem: String },
    /// The code or refresh token is spent, expired or revoked: only a new authorization helps.
    #[error("the token endpoint {url} refused the grant (invalid_grant): the owner must connect again")]
    InvalidGrant { url: String },
}

/// A token and when to stop using it.
#[derive(Clone)]
pub struct AccessToken {
    pub value: Arc<str>,
    /// `None`: the server gave no lifetime; used until an upstream refuses it.
    replace_at: Option<Timestamp>,
}

impl AccessToken {
    pub(crate) fn fresh(&self, now: Timestamp) -> bool {
        self.replace_at.is_none_or(|at| now < at)
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    token_type: Option<String>,
    /// Seconds; some servers send it as a string.
    expires_in: Option<serde_json::Value>,
    refresh_token: Option<String>,
    scope: Option<String>,
}

/// What a per-owner grant issued.
pub struct Issued {
    pub access: AccessToken,
    /// When the access token expires, exactly (not the early replacement time).
    pub expires_at: Option<Timestamp>,
    pub refresh_token: Option<String>,
    /// The scopes granted, when the server said (RFC 6749 5.1).
    pub scope: Option<String>,
}

/// An authorization server's token endpoint, and the client's credentials there.
#[derive(Debug, Clone)]
pub struct TokenEndpoint {
    pub url: Url,
    pub client_id: String,
    /// `None`: a public client.
    pub client_secret: Option<Arc<str>>,
    pub scopes: Vec<String>,
    /// RFC 8707 `resource`: the server the tokens are for, sent with every
    /// grant. MCP authorization requires it (a token for one MCP server must
    /// not open another); `None` for configured sources.
    pub resource: Option<Url>,
}

impl TokenEndpoint {
    /// The client credentials grant, with the configured scopes.
    async fn client_credentials(
        &self,
        outbound: &Outbound,
        redactor: &Redactor,
        now: Timestamp,
    ) -> Result<AccessToken, OAuthError> {
        let scope = self.scopes.join(" ");
        let mut form = vec![("grant_type", "client_credentials")];
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        self.request(&form, outbound, redactor, now).await.map(|issued| issued.access)
    }

    /// The authorization code grant (RFC 6749 4.1.3) with its PKCE verifier (RFC 7636 4.5).
    pub(crate) async fn authorization_code(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
        outbound: &Outbound,
        redactor: &Redactor,
        now: Timestamp,
    ) -> Result<Issued, OAuthError> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
        ];
        self.request(&form, outbound, redactor, now).await
    }

    /// The refresh token grant (RFC 6749 6).
    pub(crate) async fn refresh(
        &self,
        refresh_token: &str,
        outbound: &Outbound,
        redactor: &Redactor,
        now: Timestamp,
    ) -> Result<Issued, OAuthError> {
        let form = [("grant_type", "refresh_token"), ("refresh_token", refresh_token)];
        self.request(&form, outbound, redactor, now).await
    }

    async fn request(
        &self,
        form: &[(&str, &str)],
        outbound: &Outbound,
        redactor: &Redactor,
        now: Timestamp,
    ) -> Result<Issued, OAuthError> {
        let url = display_url(&self.url);
        let mut form = form.to_vec();
        if let Some(resource) = &self.resource {
            form.push(("resource", resource.as_str()));
        }
        let mut request = outbound.request(reqwest::Method::POST, self.url.clone());
        match &self.client_secret {
            Some(secret) => {
                // RFC 6749 2.3.1: the id and secret are form-encoded before they are joined.
                let encode = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
                let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    encode(&self.client_id),
                    encode(secret)
                ));
                let mut authorization = reqwest::header::HeaderValue::from_str(&format!("Basic {basic}"))
                    .expect("base64 is valid in a header");
                authorization.set_sensitive(true);
                request = request.header(reqwest::header::AUTHORIZATION, authorization);
            }
            // A public client names itself in the form (RFC 6749 4.1.3).
            None => form.push(("client_id", &self.client_id)),
        }
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(&form).finish();
        let request = request
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body);
        let answer =
            outbound.send(request).await.map_err(|error| OAuthError::Unreachable { url: url.clone(), error })?;
        if !(200..300).contains(&answer.status) {
            #[derive(Deserialize)]
            struct ErrorResponse {
                error: String,
            }
            if serde_json::from_slice::<ErrorResponse>(&answer.body).is_ok_and(|e| e.error == "invalid_grant") {
                return Err(OAuthError::InvalidGrant { url });
            }
            let excerpt = redactor.excerpt(&answer.body, EXCERPT_CHARS);
            return Err(OAuthError::Refused { url, status: answer.status, excerpt });
        }
        parse(&answer.body, now).map_err(|problem| OAuthError::Malformed { url, problem: problem.into() })
    }
}

/// A token endpoint's successful answer; the problem never quotes it (it may hold a token).
fn parse(body: &[u8], now: Timestamp) -> Result<Issued, &'static str> {
    let response: TokenResponse = serde_json::from_slice(body).map_err(|_| "not a JSON token response")?;
    if response.token_type.as_deref().is_some_and(|t| !t.eq_ignore_ascii_case("bearer")) {
        return Err("the token_type is not Bearer");
    }
    if response.access_token.is_empty()
        || reqwest::header::HeaderValue::from_str(&format!("Bearer {}", response.access_token)).is_err()
    {
        return Err("the access_token is empty or not valid in a header");
    }
    let lifetime = match &response.expires_in {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    let replace_at = lifetime.map(|seconds| {
        let lifetime = Duration::from_secs(seconds);
        now.plus(lifetime - REFRESH_MARGIN.min(lifetime / 2))
    });
    Ok(Issued {
        access: AccessToken { value: response.access_token.into(), replace_at },
        expires_at: lifetime.map(|seconds| now.plus(Duration::from_secs(seconds))),
        refresh_token: response.refresh_token.filter(|t| !t.is_empty()),
        scope: response.scope,
    })
}

/// A source's current token (see the module's description).
pub struct TokenCache {
    endpoint: TokenEndpoint,
    outbound: Outbound,
    clock: Arc<dyn Clock>,
    /// Held while a token is fetched: that is what makes the fetch single flight.
    current: tokio::sync::Mutex<Option<AccessToken>>,
    /// The source's other secrets, the client secret among them.
    base: Redactor,
    issued: Mutex<VecDeque<Arc<str>>>,
    redactor: RwLock<Arc<Redactor>>,
}

impl TokenCache {
    pub fn new(endpoint: TokenEndpoint, outbound: Outbound, clock: Arc<dyn Clock>, base: Redactor) -> Self {
        let redactor = RwLock::new(Arc::new(base.clone()));
        Self {
            endpoint,
            outbound,
            clock,
            current: tokio::sync::Mutex::new(None),
            base,
            issued: Mutex::new(VecDeque::new()),
            redactor,
        }
    }

    /// A token that is not about to expire: the cached one, or a new one.
    pub async fn token(&self) -> Result<Arc<str>, OAuthError> {
        let mut current = self.current.lock().await;
        let now = self.clock.now();
        if let Some(token) = current.as_ref().filter(|t| t.fresh(now)) {
            return Ok(token.value.clone());
        }
        let token = self.endpoint.client_credentials(&self.outbound, &self.redactor(), now).await?;
        // When and from where, never the token.
        let lifetime = token.replace_at.map(|at| at.since(now).as_secs());
        tracing::info!(token_url = %display_url(&self.endpoint.url), ?lifetime, "OAuth access token issued");
        self.remember(&token.value);
        let value = token.value.clone();
        *current = Some(token);
        Ok(value)
    }

    /// The upstream refused `token`: forget it, unless another caller has replaced it already.
    pub async fn rejected(&self, token: &str) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|t| &*t.value == token) {
            *current = None;
        }
    }

    /// The source's secrets and the tokens issued lately.
    pub fn redactor(&self) -> Arc<Redactor> {
        self.redactor.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn remember(&self, token: &Arc<str>) {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.push_back(token.clone());
        if issued.len() > REMEMBERED_TOKENS {
            issued.pop_front();
        }
        let mut redactor = self.base.clone();
        for token in issued.iter() {
            redactor.add(token);
        }
        *self.redactor.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(redactor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_answers_and_when_they_are_replaced() {
        let now = Timestamp::from_millis(1_000_000);
        let at = |body: &str| parse(body.as_bytes(), now).map(|t| t.access.replace_at);
        let secs = |s: u64| Some(now.plus(Duration::from_secs(s)));
        // Replaced 60 s early, or halfway through a short lifetime; `expires_in` as a number or a string.
        assert_eq!(at(r#"{"access_token": "a", "token_type": "Bearer", "expires_in": 3600}"#), Ok(secs(3540)));
        assert_eq!(at(r#"{"access_token": "a", "token_type": "bearer", "expires_in": "90"}"#), Ok(secs(45)));
        assert_eq!(at(r#"{"access_token": "a"}"#), Ok(None), "no lifetime: kept until refused");
        let token = parse(br#"{"access_token": "a"}"#, now).unwrap().access;
        assert!(token.fresh(now.plus(Duration::from_secs(86_400 * 365))));
        let refused = [
            (r#"{"access_token": "a", "token_type": "mac"}"#, "the token_type is not Bearer"),
            (r#"{"access_token": ""}"#, "the access_token is empty or not valid in a header"),
            ("{\"access_token\": \"a\\nb\"}", "the access_token is empty or not valid in a header"),
            (r#"{"token": "a"}"#, "not a JSON token response"),
            ("<html>", "not a JSON token response"),
        ];
        for (body, problem) in refused {
            assert_eq!(parse(body.as_bytes(), now).err(), Some(problem), "{body}");
        }
    }
}
