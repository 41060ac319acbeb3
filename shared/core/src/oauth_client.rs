//! A client registration with the authorization server of an OAuth-protected
//! upstream MCP server (RFC 7591 dynamic registration). Stored once per
//! source, so every instance reuses it instead of registering again.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Timestamp;

/// How long a registration is kept when the server gives its secret no
/// expiry: a year, after which the next instance to start registers again.
pub const DEFAULT_REGISTRATION_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// What the authorization server issued, and for which scopes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthClient {
    /// The source's namespace (one registration per source).
    pub source: String,
    /// The authorization server's `issuer`: another server means another registration.
    pub issuer: String,
    pub client_id: String,
    /// Only when the server insisted on a confidential client; sealed with
    /// the owners' token key (the catalog seals and opens it), never in clear.
    pub client_secret: Option<String>,
    /// The scopes registered; asking for more means registering again.
    pub scopes: Vec<String>,
    pub registered_at: Timestamp,
    pub expires_at: Timestamp,
    /// Bumped by every write; a write names the version it replaces.
    pub version: u64,
}

impl OAuthClient {
    /// Whether this registration serves `issuer` for `scopes` at `now`.
    pub fn covers(&self, issuer: &str, scopes: &[String], now: Timestamp) -> bool {
        now < self.expires_at && self.issuer == issuer && scopes.iter().all(|s| self.scopes.contains(s))
    }
}

/// Where the client metadata document is served, under the public URL.
pub const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";
/// Where the authorization server sends the owner back, under the public URL.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// The name authorization servers show on their consent pages.
pub const CLIENT_NAME: &str = "Executor";

/// Where this deployment is reached (`EXECUTOR_PUBLIC_URL`), for what
/// authorization servers need of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSite {
    public_url: String,
}

impl ClientSite {
    pub fn new(public_url: &str) -> Self {
        Self { public_url: public_url.trim_end_matches('/').to_owned() }
    }

    /// The client id when the authorization server reads Client ID Metadata
    /// Documents: the document's own URL.
    pub fn metadata_url(&self) -> String {
        format!("{}{CLIENT_METADATA_PATH}", self.public_url)
    }

    pub fn redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.public_url)
    }

    /// The Client ID Metadata Document served at [`ClientSite::metadata_url`]:
    /// a public client (PKCE, no secret) whose id is that URL.
    pub fn client_metadata(&self) -> Value {
        json!({
            "client_id": self.metadata_url(),
            "client_name": CLIENT_NAME,
            "redirect_uris": [self.redirect_uri()],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_covers_its_issuer_its_scopes_and_fewer_until_it_expires() {
        let now = Timestamp::from_millis(1_000);
        let client = OAuthClient {
            source: "docs".into(),
            issuer: "https://as.example".into(),
            client_id: "c1".into(),
            client_secret: None,
            scopes: vec!["read".into(), "write".into()],
            registered_at: now,
            expires_at: Timestamp::from_millis(2_000),
            version: 1,
        };
        let scopes = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            ("https://as.example", scopes(&["read"]), 1_000, true),
            ("https://as.example", scopes(&[]), 1_999, true),
            ("https://as.example", scopes(&["write", "read"]), 1_000, true),
            ("https://as.example", scopes(&["read", "admin"]), 1_000, false),
            ("https://other.example", scopes(&["read"]), 1_000, false),
            ("https://as.example", scopes(&["read"]), 2_000, false),
        ];
        for (issuer, scopes, at, covered) in cases {
            assert_eq!(client.covers(issuer, &scopes, Timestamp::from_millis(at)), covered, "{issuer} {scopes:?} {at}");
        }
    }

    #[test]
    fn the_client_metadata_document_names_its_own_url_and_the_callback() {
        assert_eq!(
            ClientSite::new("https://exec.example/team/").client_metadata(),
            json!({
                "client_id": "https://exec.example/team/oauth/client-metadata.json",
                "client_name": "Executor",
                "redirect_uris": ["https://exec.example/team/oauth/callback"],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            })
        );
    }
}
