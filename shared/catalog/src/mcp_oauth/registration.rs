//! Step 3: this deployment's client at the discovered authorization server:
//! a Client ID Metadata Document when the server reads them, else a dynamic
//! registration (RFC 7591), stored per source for every instance.

use std::sync::Arc;

use executor_core::{CLIENT_NAME, ClientSite, DEFAULT_REGISTRATION_TTL, OAuthClient, Timestamp};
use executor_store::{OAuthClientStore, StoreError};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use crate::connections::TokenKey;
use crate::mcp_oauth::discovery::Discovered;
use crate::mcp_oauth::error::{EXCERPT_CHARS, McpOAuthError};
use crate::outbound::Outbound;
use crate::redact::{Redactor, display_url};

/// What the per-owner authorization code flow needs for an MCP source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClientConfig {
    pub authorization_url: Url,
    pub token_url: Url,
    pub client_id: String,
    pub client_secret: Option<Arc<str>>,
    pub scopes: Vec<String>,
    /// Sent as RFC 8707 `resource`, so the tokens are issued for this server.
    pub resource: Url,
}

/// The dynamic registration answer (RFC 7591 3.2.1), the fields used.
#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    /// Seconds since the epoch; 0 or absent: no expiry.
    client_secret_expires_at: Option<u64>,
}

/// The client of `source` at the discovered server: a metadata document URL
/// when the server reads them, else the stored registration when it still
/// covers the issuer and scopes, else a new dynamic registration, stored
/// (replacing the one it supersedes) for every instance. A client secret is
/// stored sealed with `key` (the owners' token key): a stored one that does
/// not open (the key changed) is registered anew.
pub async fn register(
    outbound: &Outbound,
    store: &dyn OAuthClientStore,
    key: &TokenKey,
    source: &str,
    discovered: &Discovered,
    site: &ClientSite,
    now: Timestamp,
) -> Result<OAuthClientConfig, McpOAuthError> {
    let context = format!("oauth client\n{source}");
    let open = |stored: &OAuthClient| -> Option<Option<String>> {
        match &stored.client_secret {
            None => Some(None),
            Some(sealed) => String::from_utf8(key.open(sealed, &context).ok()?).ok().map(Some),
        }
    };
    let config = |client_id: String, client_secret: Option<String>| OAuthClientConfig {
        authorization_url: discovered.authorization_endpoint.clone(),
        token_url: discovered.token_endpoint.clone(),
        client_id,
        client_secret: client_secret.map(Arc::from),
        scopes: discovered.scopes.clone(),
        resource: discovered.resource.clone(),
    };
    if discovered.client_id_metadata_documents {
        return Ok(config(site.metadata_url(), None));
    }
    let Some(endpoint) = &discovered.registration_endpoint else {
        return Err(McpOAuthError::NoRegistration { issuer: discovered.issuer.clone() });
    };
    let stored = match store.get_oauth_client(source).await {
        Ok(stored) => Some(stored),
        Err(StoreError::NotFound { .. }) => None,
        Err(other) => return Err(other.into()),
    };
    if let Some(stored) = stored.as_ref().filter(|s| s.covers(&discovered.issuer, &discovered.scopes, now))
        && let Some(secret) = open(stored)
    {
        return Ok(config(stored.client_id.clone(), secret));
    }
    let registered = dynamic_registration(outbound, endpoint, discovered, site).await?;
    let expires_at = match registered.client_secret_expires_at {
        Some(seconds) if seconds > 0 => Timestamp::from_millis(seconds.saturating_mul(1000)),
        _ => now.plus(DEFAULT_REGISTRATION_TTL),
    };
    let sealed = match &registered.client_secret {
        Some(secret) => Some(key.seal(secret.as_bytes(), &context).map_err(|e| McpOAuthError::Seal(e.to_string()))?),
        None => None,
    };
    let mut client = OAuthClient {
        source: source.to_owned(),
        issuer: discovered.issuer.clone(),
        client_id: registered.client_id.clone(),
        client_secret: sealed,
        scopes: discovered.scopes.clone(),
        registered_at: now,
        expires_at,
        version: stored.map_or(0, |s| s.version),
    };
    match store.put_oauth_client(&mut client).await {
        Ok(()) => {
            tracing::info!(source, issuer = %client.issuer, scopes = ?client.scopes, "OAuth client registered");
            Ok(config(registered.client_id, registered.client_secret))
        }
        // Another instance registered meanwhile: theirs is the one every instance uses.
        Err(StoreError::AlreadyExists { .. } | StoreError::Conflict { .. }) => {
            let theirs = store.get_oauth_client(source).await?;
            let secret = open(&theirs).ok_or_else(|| {
                McpOAuthError::Seal(
                    "another instance stored it under another token key; check the deployment's key".into(),
                )
            })?;
            Ok(config(theirs.client_id, secret))
        }
        Err(other) => Err(other.into()),
    }
}

const REGISTRATION: &str = "the client registration endpoint";

/// RFC 7591: a public client using PKCE, for the scopes asked for.
async fn dynamic_registration(
    outbound: &Outbound,
    endpoint: &Url,
    discovered: &Discovered,
    site: &ClientSite,
) -> Result<Registered, McpOAuthError> {
    let shown = display_url(endpoint);
    let mut body = json!({
        "client_name": CLIENT_NAME,
        "redirect_uris": [site.redirect_uri()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if !discovered.scopes.is_empty() {
        body["scope"] = Value::String(discovered.scopes.join(" "));
    }
    let request = outbound
        .request(reqwest::Method::POST, endpoint.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body.to_string());
    let answer = outbound.send(request).await.map_err(|error| McpOAuthError::Unreachable {
        what: REGISTRATION,
        url: shown.clone(),
        error,
    })?;
    if !(200..300).contains(&answer.status) {
        let excerpt = Redactor::default().excerpt(&answer.body, EXCERPT_CHARS);
        return Err(McpOAuthError::Status { what: REGISTRATION, url: shown, status: answer.status, excerpt });
    }
    // The answer is not quoted: it may hold a client secret.
    let registered: Registered = serde_json::from_slice(&answer.body).map_err(|_| McpOAuthError::Invalid {
        what: REGISTRATION,
        url: shown.clone(),
        problem: "the answer is not a registration with a `client_id`".into(),
    })?;
    if registered.client_id.is_empty() {
        return Err(McpOAuthError::Invalid {
            what: REGISTRATION,
            url: shown,
            problem: "the `client_id` is empty".into(),
        });
    }
    Ok(registered)
}
