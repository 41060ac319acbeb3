//! OAuth-protected upstream MCP servers: from the server's 401 to a client
//! registration with its authorization server.
//!
//! 1. [`challenges`] reads `WWW-Authenticate` (several challenges, quoted or
//!    bare parameters); the `Bearer` challenge's `resource_metadata` names the
//!    protected resource metadata (RFC 9728), else its well-known URL is tried.
//! 2. [`discover`] reads that metadata (its `resource` must be the server's
//!    URL or a path above it), then the first authorization server's metadata
//!    (RFC 8414 `/.well-known/oauth-authorization-server`, else OpenID
//!    `/.well-known/openid-configuration`), which must offer PKCE with S256.
//! 3. [`register`] picks the client: a Client ID Metadata Document (our URL
//!    serving [`ClientSite::client_metadata`]) when the server accepts them, else dynamic
//!    registration (RFC 7591), stored per source so every instance reuses it,
//!    and done again when the scopes asked for are not all registered.
//!
//! Every request goes through the catalog's [`Outbound`] (address rules,
//! size cap, timeout). The result, [`OAuthClientConfig`], is what the
//! per-owner authorization code flow needs: the catalog registers it with
//! the owners' tokens (`connections.rs`), and the source becomes an
//! `OwnerMcp` (`mcp_source.rs`) whose owners connect before their calls.

use std::sync::Arc;

use executor_core::{CALLBACK_PATH, CLIENT_NAME, ClientSite, DEFAULT_REGISTRATION_TTL, OAuthClient, Timestamp};
use executor_store::{OAuthClientStore, StoreError};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use crate::connections::TokenKey;
use crate::outbound::{Outbound, OutboundError};
use crate::redact::{Redactor, display_url};

/// How much of an authorization server's error answer is shown.
const EXCERPT_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum McpOAuthError {
    #[error(
        "the server answered 401 without a Bearer challenge naming `resource_metadata`, and no protected resource \
         metadata was found at {tried}; it does not support MCP authorization: give the source an `auth` it accepts"
    )]
    NoMetadata { tried: String },
    #[error("cannot read {what} at {url}: {error}")]
    Unreachable { what: &'static str, url: String, error: OutboundError },
    #[error("{what} at {url} answered HTTP {status}: {excerpt}")]
    Status { what: &'static str, url: String, status: u16, excerpt: String },
    #[error("{what} at {url} is not valid: {problem}")]
    Invalid { what: &'static str, url: String, problem: String },
    #[error(
        "the protected resource metadata at {url} describes the resource {resource}, not this server ({server}); \
         check the source's url"
    )]
    WrongResource { url: String, resource: String, server: String },
    #[error(
        "the authorization server {issuer} does not offer PKCE with S256 (code_challenge_methods_supported: \
         {offered}), which MCP authorization requires; ask its operator to enable it"
    )]
    NoPkce { issuer: String, offered: String },
    #[error(
        "no public URL is configured, so the authorization server cannot send owners back (redirect URI \
         <public URL>{CALLBACK_PATH}): set EXECUTOR_PUBLIC_URL (or `executor serve --public-url`)"
    )]
    NoPublicUrl,
    #[error(
        "the authorization server {issuer} supports neither Client ID Metadata Documents nor dynamic client \
         registration: register a client there yourself and configure the source's `auth` with its client_id"
    )]
    NoRegistration { issuer: String },
    #[error("cannot store the client registration: {0}")]
    Store(#[from] StoreError),
    #[error("cannot seal or open the registered client secret: {0}")]
    Seal(String),
}

/// One challenge of a `WWW-Authenticate` header: its scheme, and its
/// parameters with lower-cased names (a token68 is left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Every challenge in `headers` (each a `WWW-Authenticate` value), per RFC
/// 9110 11.6.1: challenges and their parameters are both comma-separated;
/// a name followed by `=` is a parameter, any other word starts a challenge.
/// Whatever does not parse is skipped, never an error.
pub fn challenges<'a>(headers: impl IntoIterator<Item = &'a str>) -> Vec<Challenge> {
    let mut found: Vec<Challenge> = Vec::new();
    for header in headers {
        let mut rest = header;
        loop {
            rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
            let end = rest.find(|c: char| c == ',' || c == '=' || c == '"' || c.is_ascii_whitespace());
            let (word, after) = rest.split_at(end.unwrap_or(rest.len()));
            if word.is_empty() {
                match after.chars().next() {
                    // A stray `=` or quote: skip to the next comma.
                    Some(_) => {
                        rest = after.find(',').map_or("", |i| &after[i..]);
                        continue;
                    }
                    None => break,
                }
            }
            let after_spaces = after.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let Some(value_part) = after_spaces.strip_prefix('=') else {
                found.push(Challenge { scheme: word.to_owned(), params: Vec::new() });
                rest = after;
                continue;
            };
            let value_part = value_part.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let (value, remaining) = match value_part.strip_prefix('"') {
                Some(quoted) => unquote(quoted),
                None => {
                    let end = value_part.find(|c: char| c == ',' || c.is_ascii_whitespace());
                    let (value, remaining) = value_part.split_at(end.unwrap_or(value_part.len()));
                    // `word=` then a comma or the end, or `==`: a token68 (`abc==`), not a parameter.
                    if value.is_empty() || value.starts_with('=') {
                        rest = remaining.trim_start_matches('=');
                        continue;
                    }
                    (value.to_owned(), remaining)
                }
            };
            if let Some(challenge) = found.last_mut() {
                challenge.params.push((word.to_ascii_lowercase(), value));
            }
            rest = remaining;
        }
    }
    found
}

/// The text of a quoted string (after its opening quote) and what follows
/// it; an unterminated one runs to the end.
fn unquote(quoted: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (value, &quoted[i + 1..]),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            c => value.push(c),
        }
    }
    (value, "")
}

/// What a server's 401 says about its authorization: where its metadata is,
/// and the scopes the request needed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
}

impl BearerChallenge {
    /// The `Bearer` challenge among `headers`' challenges.
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = &'a str>) -> Self {
        let all = challenges(headers);
        let bearer = all.iter().find(|c| c.scheme.eq_ignore_ascii_case("bearer"));
        Self {
            resource_metadata: bearer.and_then(|c| c.param("resource_metadata")).map(str::to_owned),
            scope: bearer.and_then(|c| c.param("scope")).map(str::to_owned),
        }
    }
}

/// A protected MCP server's authorization server, as discovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The resource the tokens are for (RFC 8707 `resource` in the
    /// authorization and token requests).
    pub resource: Url,
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    pub registration_endpoint: Option<Url>,
    /// The server accepts an HTTPS URL as client id, fetching the client's metadata there.
    pub client_id_metadata_documents: bool,
    /// What to ask for: the challenge's `scope`, else the resource's `scopes_supported`.
    pub scopes: Vec<String>,
}

#[derive(Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    #[serde(default)]
    code_challenge_methods_supported: Vec<String>,
    #[serde(default)]
    client_id_metadata_document_supported: bool,
}

const RESOURCE_METADATA: &str = "the protected resource metadata";
const SERVER_METADATA: &str = "the authorization server metadata";

/// Find the authorization server of the MCP server at `server`, which
/// answered 401 with `challenge`.
pub async fn discover(
    outbound: &Outbound,
    server: &Url,
    challenge: &BearerChallenge,
) -> Result<Discovered, McpOAuthError> {
    let (metadata_url, metadata) = resource_metadata(outbound, server, challenge).await?;
    let shown = display_url(&metadata_url);
    let invalid = |problem: String| McpOAuthError::Invalid { what: RESOURCE_METADATA, url: shown.clone(), problem };
    let resource = Url::parse(&metadata.resource).map_err(|e| invalid(format!("`resource` is not a URL: {e}")))?;
    if !covers(&resource, server) {
        return Err(McpOAuthError::WrongResource {
            url: shown,
            resource: display_url(&resource),
            server: display_url(server),
        });
    }
    let issuer =
        metadata.authorization_servers.first().ok_or_else(|| invalid("`authorization_servers` is empty".into()))?;
    let issuer = Url::parse(issuer).map_err(|e| invalid(format!("the authorization server is not a URL: {e}")))?;
    let (server_url, server) = server_metadata(outbound, &issuer).await?;
    let shown = display_url(&server_url);
    let invalid = |problem: String| McpOAuthError::Invalid { what: SERVER_METADATA, url: shown.clone(), problem };
    // RFC 8414 3.3: metadata naming another issuer must not be used.
    if server.issuer.trim_end_matches('/') != issuer.as_str().trim_end_matches('/') {
        return Err(invalid(format!("its `issuer` is {:?}, not {:?}", server.issuer, issuer.as_str())));
    }
    if !server.code_challenge_methods_supported.iter().any(|m| m == "S256") {
        return Err(McpOAuthError::NoPkce {
            issuer: server.issuer,
            offered: format!("{:?}", server.code_challenge_methods_supported),
        });
    }
    let endpoint = |name: &str, text: &str| {
        Url::parse(text).map_err(|e| invalid(format!("`{name}` is not a URL: {e}"))).and_then(|url| {
            outbound.check_url(&url).map_err(|e| invalid(format!("`{name}`: {e}")))?;
            Ok(url)
        })
    };
    let scopes = match &challenge.scope {
        Some(scope) => scope.split_ascii_whitespace().map(str::to_owned).collect(),
        None => metadata.scopes_supported,
    };
    Ok(Discovered {
        resource,
        authorization_endpoint: endpoint("authorization_endpoint", &server.authorization_endpoint)?,
        token_endpoint: endpoint("token_endpoint", &server.token_endpoint)?,
        registration_endpoint: server
            .registration_endpoint
            .as_deref()
            .map(|u| endpoint("registration_endpoint", u))
            .transpose()?,
        client_id_metadata_documents: server.client_id_metadata_document_supported,
        issuer: server.issuer,
        scopes,
    })
}

/// Whether tokens for `resource` are for `server`: the same URL, or one of
/// its parents on the same origin (a resource identifier may name the host).
fn covers(resource: &Url, server: &Url) -> bool {
    let path = resource.path().trim_end_matches('/');
    resource.origin() == server.origin()
        && resource.query().is_none()
        && (server.path().trim_end_matches('/') == path || server.path().starts_with(&format!("{path}/")))
}

/// The metadata the challenge names; without it, the well-known URLs of
/// RFC 9728 3.1 (with the server's path, then at the root).
async fn resource_metadata(
    outbound: &Outbound,
    server: &Url,
    challenge: &BearerChallenge,
) -> Result<(Url, ResourceMetadata), McpOAuthError> {
    if let Some(named) = &challenge.resource_metadata {
        let url = server.join(named).map_err(|e| McpOAuthError::Invalid {
            what: RESOURCE_METADATA,
            url: named.clone(),
            problem: format!("`resource_metadata` is not a URL: {e}"),
        })?;
        let metadata = get_json(outbound, RESOURCE_METADATA, &url).await?;
        return Ok((url, metadata));
    }
    let candidates = well_known(server, "oauth-protected-resource");
    for url in &candidates {
        match get_json(outbound, RESOURCE_METADATA, url).await {
            Ok(metadata) => return Ok((url.clone(), metadata)),
            Err(McpOAuthError::Status { status: 404, .. }) => continue,
            Err(other) => return Err(other),
        }
    }
    let tried = candidates.iter().map(display_url).collect::<Vec<_>>().join(" and ");
    Err(McpOAuthError::NoMetadata { tried })
}

/// RFC 8414 metadata, else OpenID Connect discovery (inserted after the
/// host, then appended to the issuer's path); the first that answers.
async fn server_metadata(outbound: &Outbound, issuer: &Url) -> Result<(Url, ServerMetadata), McpOAuthError> {
    let mut candidates = well_known(issuer, "oauth-authorization-server");
    candidates.truncate(1);
    candidates.extend(well_known(issuer, "openid-configuration").into_iter().take(1));
    let mut appended = issuer.clone();
    appended.set_path(&format!("{}/.well-known/openid-configuration", issuer.path().trim_end_matches('/')));
    if !candidates.contains(&appended) {
        candidates.push(appended);
    }
    let mut last = None;
    for url in candidates {
        match get_json(outbound, SERVER_METADATA, &url).await {
            Ok(metadata) => return Ok((url, metadata)),
            Err(error @ McpOAuthError::Status { status: 404, .. }) => last = Some(error),
            Err(other) => return Err(other),
        }
    }
    Err(last.expect("there is always a candidate"))
}

/// `/.well-known/<name>` inserted between the host and `url`'s path, then
/// at the root when the path is not empty.
fn well_known(url: &Url, name: &str) -> Vec<Url> {
    let path = url.path().trim_end_matches('/');
    let at = |path: String| {
        let mut url = url.clone();
        url.set_path(&path);
        url.set_query(None);
        url.set_fragment(None);
        url
    };
    let mut candidates = vec![at(format!("/.well-known/{name}{path}"))];
    if !path.is_empty() {
        candidates.push(at(format!("/.well-known/{name}")));
    }
    candidates
}

async fn get_json<T: for<'de> Deserialize<'de>>(
    outbound: &Outbound,
    what: &'static str,
    url: &Url,
) -> Result<T, McpOAuthError> {
    let shown = display_url(url);
    let request =
        outbound.request(reqwest::Method::GET, url.clone()).header(reqwest::header::ACCEPT, "application/json");
    let answer =
        outbound.send(request).await.map_err(|error| McpOAuthError::Unreachable { what, url: shown.clone(), error })?;
    if !(200..300).contains(&answer.status) {
        let excerpt = Redactor::default().excerpt(&answer.body, EXCERPT_CHARS);
        return Err(McpOAuthError::Status { what, url: shown, status: answer.status, excerpt });
    }
    serde_json::from_slice(&answer.body).map_err(|e| McpOAuthError::Invalid {
        what,
        url: shown,
        problem: e.to_string(),
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A challenge as (scheme, parameters).
    type Parsed = (String, Vec<(String, String)>);

    fn parsed(headers: &[&str]) -> Vec<Parsed> {
        challenges(headers.iter().copied()).into_iter().map(|c| (c.scheme, c.params)).collect()
    }

    fn owned(scheme: &str, params: &[(&str, &str)]) -> Parsed {
        (scheme.into(), params.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect())
    }

    #[test]
    fn challenges_are_read_however_they_are_written() {
        let meta = "https://mcp.example/.well-known/oauth-protected-resource";
        let cases: Vec<(Vec<&str>, Vec<Parsed>)> = vec![
            (
                vec![r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource""#],
                vec![owned("Bearer", &[("resource_metadata", meta)])],
            ),
            (
                vec!["Bearer resource_metadata=https://mcp.example/.well-known/oauth-protected-resource"],
                vec![owned("Bearer", &[("resource_metadata", meta)])],
            ),
            (
                vec![
                    r#"Bearer realm="mcp", error="invalid_token", error_description="The token, \"it\" expired", scope="a b""#,
                ],
                vec![owned(
                    "Bearer",
                    &[
                        ("realm", "mcp"),
                        ("error", "invalid_token"),
                        ("error_description", "The token, \"it\" expired"),
                        ("scope", "a b"),
                    ],
                )],
            ),
            (
                vec![r#"Basic realm="x", Bearer resource_metadata="https://m/x""#],
                vec![owned("Basic", &[("realm", "x")]), owned("Bearer", &[("resource_metadata", "https://m/x")])],
            ),
            (
                vec![r#"Basic realm="x""#, r#"bearer Resource_Metadata = "https://m/x" , scope=read"#],
                vec![
                    owned("Basic", &[("realm", "x")]),
                    owned("bearer", &[("resource_metadata", "https://m/x"), ("scope", "read")]),
                ],
            ),
            (vec!["Negotiate abc123==, Bearer"], vec![owned("Negotiate", &[]), owned("Bearer", &[])]),
            (vec!["Bearer"], vec![owned("Bearer", &[])]),
            (vec!["", " , ,"], vec![]),
            (vec![r#"Bearer realm="unterminated"#], vec![owned("Bearer", &[("realm", "unterminated")])]),
            (vec![r#"=x, "quoted", Bearer a=1"#], vec![owned("Bearer", &[("a", "1")])]),
        ];
        for (headers, expected) in cases {
            assert_eq!(parsed(&headers), expected, "{headers:?}");
        }
        let bearer =
            BearerChallenge::from_headers([r#"Basic realm="x", Bearer resource_metadata="/prm", scope="a b""#]);
        assert_eq!(bearer, BearerChallenge { resource_metadata: Some("/prm".into()), scope: Some("a b".into()) });
        assert_eq!(BearerChallenge::from_headers([r#"Basic resource_metadata="/prm""#]), BearerChallenge::default());
    }

    #[test]
    fn any_header_text_parses_without_panicking() {
        // A small deterministic generator over the characters that matter to the grammar.
        let alphabet: Vec<char> = " ,=\"\\\tBearer_metadta:/é".chars().collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut text = String::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 40) as usize;
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            for challenge in challenges([text.as_str()]) {
                assert!(!challenge.scheme.is_empty(), "{text:?}");
                assert!(challenge.params.iter().all(|(n, _)| !n.is_empty()), "{text:?}");
            }
        }
    }

    #[test]
    fn a_resource_covers_its_url_and_the_paths_below() {
        let url = |s: &str| Url::parse(s).unwrap();
        let cases = [
            ("https://m.example/mcp", "https://m.example/mcp", true),
            ("https://m.example/mcp/", "https://m.example/mcp", true),
            ("https://m.example", "https://m.example/mcp", true),
            ("https://m.example/", "https://m.example/mcp", true),
            ("https://m.example/mcp", "https://m.example/mcp/v2", true),
            ("https://m.example/mc", "https://m.example/mcp", false),
            ("https://m.example/other", "https://m.example/mcp", false),
            ("https://m.example:8443/mcp", "https://m.example/mcp", false),
            ("http://m.example/mcp", "https://m.example/mcp", false),
            ("https://evil.example/mcp", "https://m.example/mcp", false),
        ];
        for (resource, server, covered) in cases {
            assert_eq!(covers(&url(resource), &url(server)), covered, "{resource} for {server}");
        }
    }

    #[test]
    fn well_known_urls_go_after_the_host() {
        let urls = |s: &str, name: &str| {
            well_known(&Url::parse(s).unwrap(), name).iter().map(|u| u.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            urls("https://m.example/mcp?x=1", "oauth-protected-resource"),
            [
                "https://m.example/.well-known/oauth-protected-resource/mcp",
                "https://m.example/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            urls("https://as.example", "oauth-authorization-server"),
            ["https://as.example/.well-known/oauth-authorization-server"]
        );
        assert_eq!(
            urls("https://as.example/tenant/", "openid-configuration"),
            [
                "https://as.example/.well-known/openid-configuration/tenant",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
    }
}
