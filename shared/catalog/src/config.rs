//! The sources file (`EXECUTOR_CONFIG` or `--config`): TOML, validated once at
//! load so that a mistake is reported with the file, the source and the field
//! rather than as a failing tool call later. `executor.example.toml` at the
//! repository root documents every option.
//!
//! This file holds what a loaded sources file is; `config/load.rs` reads the
//! file, `config/source.rs` validates each source in it.

mod load;
mod source;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use executor_core::{Principal, QuotaLimits, SourcePolicy, Toolkit, ToolkitName};
use serde::Deserialize;
use url::Url;

use crate::cedar::CedarSource;
use crate::secrets::SecretRef;

/// The environment variable naming the sources file when `--config` is not given.
pub const CONFIG_ENV: &str = "EXECUTOR_CONFIG";

/// The environment variable naming the index, over the sources file's `index`.
pub const INDEX_ENV: &str = "EXECUTOR_CATALOG_INDEX";

/// Namespaces the sandbox routes to the catalog itself (`tools.search`, `tools.describe.tool`).
pub const RESERVED_NAMESPACES: [&str; 2] = ["search", "describe"];

#[derive(Debug, Clone, PartialEq)]
pub struct CatalogConfig {
    pub outbound: OutboundConfig,
    pub sources: Vec<SourceConfig>,
    /// Narrower views served at `/mcp/toolkits/{name}`.
    pub toolkits: Vec<Toolkit>,
    /// `[policy] cedar`: the Cedar policies that decide every call in place
    /// of the sources' pattern rules and defaults.
    pub cedar: Option<CedarSource>,
    /// `[[toolkits]] cedar`: a toolkit's Cedar policies, which only tighten.
    pub toolkit_cedar: BTreeMap<ToolkitName, CedarSource>,
    /// `[quotas]`: limits of single owners, over the `EXECUTOR_QUOTA_*` defaults.
    pub quotas: BTreeMap<Principal, QuotaLimits>,
    /// The catalog index to load instead of parsing the OpenAPI documents on
    /// file (`index`, or `EXECUTOR_CATALOG_INDEX`; built by `executor catalog build`).
    pub index: Option<PathBuf>,
}

/// Limits on every request the catalog makes (see `outbound.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundConfig {
    /// Loopback destinations (127.0.0.0/8, ::1) are refused unless this is set,
    /// for local development and tests.
    pub allow_loopback: bool,
    pub timeout: Duration,
    pub max_response_bytes: usize,
}

impl Default for OutboundConfig {
    fn default() -> Self {
        Self { allow_loopback: false, timeout: Duration::from_secs(30), max_response_bytes: 10 * 1024 * 1024 }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceConfig {
    pub namespace: String,
    pub kind: SourceKind,
    pub auth: Option<Auth>,
    /// Extra headers sent with every request; values may be secret references.
    pub headers: BTreeMap<String, HeaderValue>,
    pub policy: SourcePolicy,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    OpenApi {
        spec: SpecLocation,
        base_url: Url,
    },
    Mcp {
        url: Url,
    },
    /// `schema`: a file holding the introspection result; without it the
    /// service is introspected with the source's auth.
    Graphql {
        url: Url,
        schema: Option<PathBuf>,
    },
}

impl SourceKind {
    /// As the config spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::OpenApi { .. } => "openapi",
            Self::Mcp { .. } => "mcp",
            Self::Graphql { .. } => "graphql",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SpecLocation {
    File(PathBuf),
    Url(Url),
}

/// A header value: literal text, or a secret fetched at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    Literal(String),
    Secret(SecretRef),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    Bearer {
        token: SecretRef,
    },
    Basic {
        username: String,
        password: SecretRef,
    },
    ApiKey {
        name: String,
        value: SecretRef,
        location: ApiKeyLocation,
    },
    /// The OAuth 2 client credentials grant: the source's requests carry a
    /// bearer token from `token_url`, cached and replaced before it expires.
    OAuth2ClientCredentials {
        token_url: Url,
        client_id: String,
        client_secret: SecretRef,
        scopes: Vec<String>,
    },
    /// The OAuth 2 authorization code grant with PKCE, per owner: each owner
    /// connects their own account, and the source's requests carry that
    /// owner's token.
    OAuth2(OAuth2Config),
}

/// A per-owner OAuth 2 source's authorization server and client. Not tied to
/// a source kind: whatever discovers an authorization server can make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth2Config {
    pub authorization_url: Url,
    pub token_url: Url,
    pub client_id: String,
    /// `None`: a public client (PKCE alone proves the exchange).
    pub client_secret: Option<SecretRef>,
    pub scopes: Vec<String>,
    /// The scope that makes the server issue a refresh token (e.g.
    /// `offline_access`), asked for with `scopes`; without a refresh token
    /// the owner connects again when the access token expires.
    pub refresh_scope: Option<String>,
}

impl OAuth2Config {
    /// Every scope the authorization asks for.
    pub fn requested_scopes(&self) -> Vec<String> {
        let mut scopes = self.scopes.clone();
        if let Some(extra) = &self.refresh_scope
            && !scopes.contains(extra)
        {
            scopes.push(extra.clone());
        }
        scopes
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKeyLocation {
    Header,
    Query,
    /// Sent as `Cookie: <name>=<value>`, the value percent-encoded where cookie syntax requires.
    Cookie,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {file}: {error}; check EXECUTOR_CONFIG or --config")]
    Read { file: PathBuf, error: std::io::Error },
    #[error("{file}: {message}")]
    Syntax { file: PathBuf, message: String },
    #[error("{file}: source `{source_name}`, field `{field}`: {problem}")]
    Invalid { file: PathBuf, source_name: String, field: &'static str, problem: String },
    #[error("{file}: toolkit `{toolkit}`, field `{field}`: {problem}")]
    InvalidToolkit { file: PathBuf, toolkit: String, field: &'static str, problem: String },
    #[error(
        "{file}: {section}: cannot read the Cedar policies {policies}: {error} (`cedar` is relative to the sources file)"
    )]
    ReadPolicies { file: PathBuf, section: String, policies: PathBuf, error: std::io::Error },
    #[error("{file}: [quotas] owner {owner:?}: {problem}")]
    InvalidQuota { file: PathBuf, owner: String, problem: String },
}
