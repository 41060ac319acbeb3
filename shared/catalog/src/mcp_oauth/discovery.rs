//! Step 2: from the server's 401 to its authorization server: the protected
//! resource metadata (RFC 9728), then the authorization server's (RFC 8414,
//! else OpenID Connect discovery), which must offer PKCE with S256.

use serde::Deserialize;
use url::Url;

use crate::mcp_oauth::challenge::BearerChallenge;
use crate::mcp_oauth::error::{EXCERPT_CHARS, McpOAuthError};
use crate::outbound::Outbound;
use crate::redact::{Redactor, display_url};

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

#[cfg(test)]
mod tests {
    use super::*;

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
