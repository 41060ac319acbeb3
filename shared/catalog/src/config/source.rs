//! One `[[sources]]` entry of the sources file, validated: its namespace,
//! kind and locations, auth and headers, each mistake named by its field.

use std::collections::BTreeMap;
use std::path::Path;

use executor_core::SourcePolicy;
use serde::Deserialize;
use url::Url;

use crate::config::{
    ApiKeyLocation, Auth, HeaderValue, OAuth2Config, RESERVED_NAMESPACES, SourceConfig, SourceKind, SpecLocation,
};
use crate::naming::is_identifier;
use crate::redact::display_url;
use crate::secrets::{SecretRef, SecretRefError};

/// A field's name and what is wrong with it.
pub(super) type FieldProblem = (&'static str, String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSource {
    pub(super) namespace: String,
    kind: RawKind,
    spec: Option<String>,
    base_url: Option<String>,
    url: Option<String>,
    schema: Option<String>,
    auth: Option<RawAuth>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    policy: SourcePolicy,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawKind {
    Openapi,
    Mcp,
    Graphql,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum RawAuth {
    Bearer {
        token: String,
    },
    Basic {
        username: String,
        password: String,
    },
    ApiKey {
        name: String,
        value: String,
        #[serde(rename = "in")]
        location: ApiKeyLocation,
    },
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2ClientCredentials {
        token_url: String,
        client_id: String,
        client_secret: String,
        #[serde(default)]
        scopes: Vec<String>,
    },
    #[serde(rename = "oauth2")]
    OAuth2 {
        authorization_url: String,
        token_url: String,
        client_id: String,
        client_secret: Option<String>,
        #[serde(default)]
        scopes: Vec<String>,
        refresh_scope: Option<String>,
    },
}

/// Scopes are single words (RFC 6749 3.3), one per entry.
fn check_scopes<'a>(field: &'static str, scopes: impl IntoIterator<Item = &'a String>) -> Result<(), FieldProblem> {
    match scopes.into_iter().find(|s| s.is_empty() || s.contains(char::is_whitespace)) {
        Some(scope) => Err((field, format!("{scope:?} is not a scope: scopes are single words, one per entry"))),
        None => Ok(()),
    }
}

pub(super) fn validate_source(raw: RawSource, base_dir: &Path) -> Result<SourceConfig, FieldProblem> {
    if !is_identifier(&raw.namespace) {
        return Err((
            "namespace",
            "must be an identifier (letters, digits, `_`, `$`, not starting with a digit)".into(),
        ));
    }
    if RESERVED_NAMESPACES.contains(&raw.namespace.as_str()) {
        return Err((
            "namespace",
            format!("`{}` is reserved for the catalog's own tools; pick another", raw.namespace),
        ));
    }
    let kind = source_kind(&raw, base_dir)?;
    let auth = auth(raw.auth, &kind)?;
    let headers = headers(raw.headers)?;
    Ok(SourceConfig { namespace: raw.namespace, kind, auth, headers, policy: raw.policy })
}

/// The kind and where the source is: each field the kind needs, none it does not.
fn source_kind(raw: &RawSource, base_dir: &Path) -> Result<SourceKind, FieldProblem> {
    fn required<'a>(field: &'static str, value: Option<&'a str>, kind: &str) -> Result<&'a str, FieldProblem> {
        value.ok_or((field, format!("is required for kind = \"{kind}\"")))
    }
    let refuse = |field: &'static str, value: &Option<String>, kind: &str| match value {
        Some(_) => Err((field, format!("does not apply to kind = \"{kind}\""))),
        None => Ok(()),
    };
    Ok(match raw.kind {
        RawKind::Openapi => {
            refuse("url", &raw.url, "openapi")?;
            refuse("schema", &raw.schema, "openapi")?;
            let spec = required("spec", raw.spec.as_deref(), "openapi")?;
            let spec = match spec.starts_with("http://") || spec.starts_with("https://") {
                true => SpecLocation::Url(parse_url("spec", spec)?),
                false => SpecLocation::File(base_dir.join(spec)),
            };
            let base_url = parse_url("base_url", required("base_url", raw.base_url.as_deref(), "openapi")?)?;
            SourceKind::OpenApi { spec, base_url }
        }
        RawKind::Mcp => {
            refuse("spec", &raw.spec, "mcp")?;
            refuse("base_url", &raw.base_url, "mcp")?;
            refuse("schema", &raw.schema, "mcp")?;
            SourceKind::Mcp { url: parse_url("url", required("url", raw.url.as_deref(), "mcp")?)? }
        }
        RawKind::Graphql => {
            refuse("spec", &raw.spec, "graphql")?;
            refuse("base_url", &raw.base_url, "graphql")?;
            SourceKind::Graphql {
                url: parse_url("url", required("url", raw.url.as_deref(), "graphql")?)?,
                schema: raw.schema.as_ref().map(|file| base_dir.join(file)),
            }
        }
    })
}

/// The auth, with every secret a reference and what the kind does not support refused.
fn auth(raw: Option<RawAuth>, kind: &SourceKind) -> Result<Option<Auth>, FieldProblem> {
    let secret = |field: &'static str, value: &str| SecretRef::parse(value).map_err(|e| (field, e.to_string()));
    Ok(match raw {
        None => None,
        Some(RawAuth::Bearer { token }) => Some(Auth::Bearer { token: secret("auth.token", &token)? }),
        Some(RawAuth::Basic { username, password }) => {
            Some(Auth::Basic { username, password: secret("auth.password", &password)? })
        }
        Some(RawAuth::ApiKey { name, value, location }) => {
            if name.is_empty() {
                return Err(("auth.name", "must name the header, query parameter or cookie".into()));
            }
            // RFC 6265: a cookie name is a token; anything else would end the name or the cookie.
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if location == ApiKeyLocation::Cookie && !name.chars().all(token) {
                return Err(("auth.name", format!("`{name}` is not a valid cookie name")));
            }
            Some(Auth::ApiKey { name, value: secret("auth.value", &value)?, location })
        }
        Some(RawAuth::OAuth2ClientCredentials { token_url, client_id, client_secret, scopes }) => {
            if matches!(kind, SourceKind::Mcp { .. }) {
                return Err((
                    "auth.type",
                    "`oauth2_client_credentials` is not supported for kind = \"mcp\" yet; use it with \"openapi\" or \"graphql\" sources".into(),
                ));
            }
            if client_id.is_empty() {
                return Err(("auth.client_id", "must not be empty".into()));
            }
            check_scopes("auth.scopes", &scopes)?;
            Some(Auth::OAuth2ClientCredentials {
                token_url: parse_url("auth.token_url", &token_url)?,
                client_id,
                client_secret: secret("auth.client_secret", &client_secret)?,
                scopes,
            })
        }
        Some(RawAuth::OAuth2 { authorization_url, token_url, client_id, client_secret, scopes, refresh_scope }) => {
            match kind {
                SourceKind::Mcp { .. } => {
                    return Err((
                        "auth.type",
                        "`oauth2` is not supported for kind = \"mcp\" yet; use it with \"openapi\" or \"graphql\" \
                         sources"
                            .into(),
                    ));
                }
                // Introspection would need an owner's token before any owner has connected.
                SourceKind::Graphql { schema: None, .. } => {
                    return Err((
                        "schema",
                        "is required with auth type `oauth2`: the schema cannot be introspected before an owner \
                         connects; save it to a file and name it here"
                            .into(),
                    ));
                }
                _ => {}
            }
            if client_id.is_empty() {
                return Err(("auth.client_id", "must not be empty".into()));
            }
            check_scopes("auth.scopes", &scopes)?;
            check_scopes("auth.refresh_scope", &refresh_scope)?;
            Some(Auth::OAuth2(OAuth2Config {
                authorization_url: parse_url("auth.authorization_url", &authorization_url)?,
                token_url: parse_url("auth.token_url", &token_url)?,
                client_id,
                client_secret: client_secret.map(|s| secret("auth.client_secret", &s)).transpose()?,
                scopes,
                refresh_scope,
            }))
        }
    })
}

/// Extra headers: valid names, values literal or secret references.
fn headers(raw: BTreeMap<String, String>) -> Result<BTreeMap<String, HeaderValue>, FieldProblem> {
    let mut headers = BTreeMap::new();
    for (name, value) in raw {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(("headers", format!("`{name}` is not a valid HTTP header name")));
        }
        let value = match SecretRef::parse(&value) {
            Ok(secret) => HeaderValue::Secret(secret),
            Err(SecretRefError::NotAReference) => HeaderValue::Literal(value),
            Err(e) => return Err(("headers", e.to_string())),
        };
        headers.insert(name, value);
    }
    Ok(headers)
}

/// The value is not repeated when it does not parse: a key in its query would be.
fn parse_url(field: &'static str, value: &str) -> Result<Url, FieldProblem> {
    let url = Url::parse(value).map_err(|e| (field, format!("is not a URL: {e}")))?;
    match url.scheme() {
        "http" | "https" if url.host().is_some() => Ok(url),
        _ => Err((field, format!("`{}` must be an http(s) URL with a host", display_url(&url)))),
    }
}
