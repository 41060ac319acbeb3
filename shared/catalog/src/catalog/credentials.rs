//! A source's credentials and extra headers, resolved: every secret value
//! fetched once at connection and added to the source's redactor.

use base64::Engine as _;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::header::{HeaderName, HeaderValue};

use crate::config::{ApiKeyLocation, Auth, HeaderValue as ConfiguredHeader, OAuth2Config, SourceConfig};
use crate::oauth::TokenEndpoint;
use crate::redact::Redactor;
use crate::secrets::Secrets;

/// What a cookie value cannot hold as it is (RFC 6265 `cookie-octet`s), and
/// `%`, so the encoding can be undone.
const COOKIE_VALUE: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b',').add(b';').add(b'\\').add(b'%');

/// A source's credentials and extra headers, resolved.
#[derive(Default)]
pub(super) struct Credentials {
    pub(super) headers: Vec<(HeaderName, HeaderValue)>,
    pub(super) query: Vec<(String, String)>,
    /// Where its OAuth tokens come from.
    pub(super) token: Option<TokenEndpoint>,
    /// A per-owner OAuth source's authorization server and client.
    pub(super) per_owner: Option<(OAuth2Config, TokenEndpoint)>,
}

/// A client secret, and the HTTP basic credentials a token request makes of
/// it (both parts form-encoded, RFC 6749 2.3.1), as text to redact.
pub(super) fn add_client_secret(redactor: &mut Redactor, client_id: &str, secret: &str) {
    let encode = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    redactor.add(secret);
    redactor.add_basic(&encode(client_id), &encode(secret));
}

/// The source's auth and headers, resolved; every secret value goes into `redactor`.
pub(super) async fn credentials(
    config: &SourceConfig,
    secrets: &Secrets,
    redactor: &mut Redactor,
) -> Result<Credentials, String> {
    let mut out = Credentials::default();
    let header = |out: &mut Credentials, name: &str, value: &str, secret: bool| -> Result<(), String> {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header `{name}`: {e}"))?;
        // The value is not shown: it may be a secret. Bytes, so a secret that is not ASCII is sent as UTF-8.
        let mut value = HeaderValue::from_bytes(value.as_bytes()).map_err(|_| {
            format!("header `{name}`: the value is not valid in a header (line breaks, control characters)")
        })?;
        value.set_sensitive(secret);
        out.headers.push((name, value));
        Ok(())
    };
    match &config.auth {
        None => {}
        Some(Auth::Bearer { token }) => {
            let token = secrets.resolve(token).await.map_err(|e| e.to_string())?;
            redactor.add(&token);
            header(&mut out, "authorization", &format!("Bearer {token}"), true)?;
        }
        Some(Auth::Basic { username, password }) => {
            let password = secrets.resolve(password).await.map_err(|e| e.to_string())?;
            redactor.add_basic(username, &password);
            let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
            header(&mut out, "authorization", &format!("Basic {encoded}"), true)?;
        }
        Some(Auth::ApiKey { name, value, location }) => {
            let value = secrets.resolve(value).await.map_err(|e| e.to_string())?;
            redactor.add(&value);
            match location {
                ApiKeyLocation::Header => header(&mut out, name, &value, true)?,
                ApiKeyLocation::Query => out.query.push((name.clone(), value.to_string())),
                ApiKeyLocation::Cookie => {
                    let cookie = format!("{name}={}", utf8_percent_encode(&value, COOKIE_VALUE));
                    header(&mut out, "cookie", &cookie, true)?;
                }
            }
        }
        Some(Auth::OAuth2ClientCredentials { token_url, client_id, client_secret, scopes }) => {
            let client_secret = secrets.resolve(client_secret).await.map_err(|e| e.to_string())?;
            add_client_secret(redactor, client_id, &client_secret);
            out.token = Some(TokenEndpoint {
                url: token_url.clone(),
                client_id: client_id.clone(),
                client_secret: Some(client_secret),
                scopes: scopes.clone(),
                resource: None,
            });
        }
        Some(Auth::OAuth2(oauth)) => {
            let client_secret = match &oauth.client_secret {
                Some(secret) => {
                    let secret = secrets.resolve(secret).await.map_err(|e| e.to_string())?;
                    add_client_secret(redactor, &oauth.client_id, &secret);
                    Some(secret)
                }
                None => None,
            };
            let endpoint = TokenEndpoint {
                url: oauth.token_url.clone(),
                client_id: oauth.client_id.clone(),
                client_secret,
                scopes: oauth.requested_scopes(),
                resource: None,
            };
            out.per_owner = Some((oauth.clone(), endpoint));
        }
    }
    for (name, value) in &config.headers {
        match value {
            ConfiguredHeader::Literal(text) => header(&mut out, name, text, false)?,
            ConfiguredHeader::Secret(reference) => {
                let value = secrets.resolve(reference).await.map_err(|e| e.to_string())?;
                redactor.add(&value);
                header(&mut out, name, &value, true)?;
            }
        }
    }
    Ok(out)
}
