//! The sources file (`EXECUTOR_CONFIG` or `--config`): TOML, validated once at
//! load so that a mistake is reported with the file, the source and the field
//! rather than as a failing tool call later. `executor.example.toml` at the
//! repository root documents every option.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use executor_core::{Principal, QuotaLimits, SourcePolicy, ToolPattern, Toolkit, ToolkitName};
use serde::Deserialize;
use url::Url;

use crate::naming::is_identifier;
use crate::redact::display_url;
use crate::secrets::{SecretRef, SecretRefError};

/// The environment variable naming the sources file when `--config` is not given.
pub const CONFIG_ENV: &str = "EXECUTOR_CONFIG";

/// Namespaces the sandbox routes to the catalog itself (`tools.search`, `tools.describe.tool`).
pub const RESERVED_NAMESPACES: [&str; 2] = ["search", "describe"];

#[derive(Debug, Clone, PartialEq)]
pub struct CatalogConfig {
    pub outbound: OutboundConfig,
    pub sources: Vec<SourceConfig>,
    /// Narrower views served at `/mcp/toolkits/{name}`.
    pub toolkits: Vec<Toolkit>,
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
    #[error("{file}: [quotas] owner {owner:?}: {problem}")]
    InvalidQuota { file: PathBuf, owner: String, problem: String },
}

// What the file says, before validation. Unknown fields are refused so a typo
// is an error, not a silently ignored setting.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    outbound: RawOutbound,
    #[serde(default)]
    sources: Vec<RawSource>,
    #[serde(default)]
    toolkits: Vec<RawToolkit>,
    /// Owner name (as `keys list` shows it) -> limits.
    #[serde(default)]
    quotas: BTreeMap<String, QuotaLimits>,
    index: Option<PathBuf>,
}

// Fields are checked one by one (not by serde), so an error names the toolkit.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolkit {
    name: String,
    tools: Vec<String>,
    policy: Option<toml::Value>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutbound {
    allow_loopback: Option<bool>,
    timeout_ms: Option<u64>,
    max_response_bytes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    namespace: String,
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

impl CatalogConfig {
    /// The sources file to load: the `--config` flag when given, else `EXECUTOR_CONFIG`, else none.
    pub fn locate(flag: Option<PathBuf>) -> Option<PathBuf> {
        flag.or_else(|| std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
    }

    /// The sources file named by `flag` or `EXECUTOR_CONFIG`, validated; with
    /// neither, no sources, toolkits or quota overrides. `EXECUTOR_CATALOG_INDEX`
    /// names the index in place of the file's `index`.
    pub fn load_located(flag: Option<PathBuf>) -> Result<Self, ConfigError> {
        let mut config = match Self::locate(flag) {
            Some(path) => Self::load(&path)?,
            None => Self {
                outbound: OutboundConfig::default(),
                sources: Vec::new(),
                toolkits: Vec::new(),
                quotas: BTreeMap::new(),
                index: None,
            },
        };
        if let Some(index) = std::env::var_os(crate::index::INDEX_ENV).filter(|v| !v.is_empty()) {
            config.index = Some(PathBuf::from(index));
        }
        Ok(config)
    }

    /// Read and validate a sources file. Relative spec paths are relative to the file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read { file: path.into(), error })?;
        Self::from_toml_str(&text, path)
    }

    /// Validate TOML text; `file` names it in errors and anchors relative spec paths.
    pub fn from_toml_str(text: &str, file: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| ConfigError::Syntax { file: file.into(), message: e.to_string() })?;
        let defaults = OutboundConfig::default();
        let outbound = OutboundConfig {
            allow_loopback: raw.outbound.allow_loopback.unwrap_or(defaults.allow_loopback),
            timeout: raw.outbound.timeout_ms.map_or(defaults.timeout, Duration::from_millis),
            max_response_bytes: raw.outbound.max_response_bytes.unwrap_or(defaults.max_response_bytes),
        };
        let base_dir = file.parent().unwrap_or(Path::new("."));
        let mut sources: Vec<SourceConfig> = Vec::new();
        for source in raw.sources {
            let name = source.namespace.clone();
            let invalid = |field: &'static str, problem: String| ConfigError::Invalid {
                file: file.into(),
                source_name: name.clone(),
                field,
                problem,
            };
            let validated = validate_source(source, base_dir).map_err(|(field, problem)| invalid(field, problem))?;
            if sources.iter().any(|s| s.namespace == validated.namespace) {
                return Err(invalid("namespace", "another source already uses this namespace".into()));
            }
            sources.push(validated);
        }
        let mut toolkits: Vec<Toolkit> = Vec::new();
        for raw in raw.toolkits {
            let invalid = |field: &'static str, problem: String| ConfigError::InvalidToolkit {
                file: file.into(),
                toolkit: raw.name.clone(),
                field,
                problem,
            };
            let toolkit = validate_toolkit(&raw).map_err(|(field, problem)| invalid(field, problem))?;
            if toolkits.iter().any(|t| t.name == toolkit.name) {
                return Err(invalid("name", "another toolkit already has this name".into()));
            }
            toolkits.push(toolkit);
        }
        let mut quotas = BTreeMap::new();
        for (owner, limits) in raw.quotas {
            let principal = Principal::parse(owner.as_str()).map_err(|e| ConfigError::InvalidQuota {
                file: file.into(),
                owner,
                problem: e.to_string(),
            })?;
            quotas.insert(principal, limits);
        }
        // Relative to the file, as spec paths are.
        let index = raw.index.map(|index| base_dir.join(index));
        Ok(Self { outbound, sources, toolkits, quotas, index })
    }
}

fn validate_toolkit(raw: &RawToolkit) -> Result<Toolkit, FieldProblem> {
    let name = ToolkitName::parse(&raw.name).map_err(|e| ("name", e.to_string()))?;
    if raw.tools.is_empty() {
        return Err(("tools", "must list at least one tool pattern, e.g. tools = [\"github.issues.*\"]".into()));
    }
    let tools = raw
        .tools
        .iter()
        .map(|pattern| ToolPattern::parse(pattern).map_err(|e| ("tools", e.to_string())))
        .collect::<Result<_, _>>()?;
    let policy = match &raw.policy {
        None => SourcePolicy::default(),
        Some(value) => value.clone().try_into().map_err(|e: toml::de::Error| ("policy", e.message().to_owned()))?,
    };
    Ok(Toolkit { name, tools, policy })
}

type FieldProblem = (&'static str, String);

fn validate_source(raw: RawSource, base_dir: &Path) -> Result<SourceConfig, FieldProblem> {
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
    let required = |field: &'static str, value: Option<String>, kind: &str| {
        value.ok_or((field, format!("is required for kind = \"{kind}\"")))
    };
    let refuse = |field: &'static str, value: &Option<String>, kind: &str| match value {
        Some(_) => Err((field, format!("does not apply to kind = \"{kind}\""))),
        None => Ok(()),
    };
    let kind = match raw.kind {
        RawKind::Openapi => {
            refuse("url", &raw.url, "openapi")?;
            refuse("schema", &raw.schema, "openapi")?;
            let spec = required("spec", raw.spec, "openapi")?;
            let spec = match spec.starts_with("http://") || spec.starts_with("https://") {
                true => SpecLocation::Url(parse_url("spec", &spec)?),
                false => SpecLocation::File(base_dir.join(spec)),
            };
            let base_url = parse_url("base_url", &required("base_url", raw.base_url, "openapi")?)?;
            SourceKind::OpenApi { spec, base_url }
        }
        RawKind::Mcp => {
            refuse("spec", &raw.spec, "mcp")?;
            refuse("base_url", &raw.base_url, "mcp")?;
            refuse("schema", &raw.schema, "mcp")?;
            SourceKind::Mcp { url: parse_url("url", &required("url", raw.url, "mcp")?)? }
        }
        RawKind::Graphql => {
            refuse("spec", &raw.spec, "graphql")?;
            refuse("base_url", &raw.base_url, "graphql")?;
            SourceKind::Graphql {
                url: parse_url("url", &required("url", raw.url, "graphql")?)?,
                schema: raw.schema.map(|file| base_dir.join(file)),
            }
        }
    };
    let secret = |field: &'static str, value: &str| SecretRef::parse(value).map_err(|e| (field, e.to_string()));
    let auth = match raw.auth {
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
            match &kind {
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
    };
    let mut headers = BTreeMap::new();
    for (name, value) in raw.headers {
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
    Ok(SourceConfig { namespace: raw.namespace, kind, auth, headers, policy: raw.policy })
}

/// The value is not repeated when it does not parse: a key in its query would be.
fn parse_url(field: &'static str, value: &str) -> Result<Url, FieldProblem> {
    let url = Url::parse(value).map_err(|e| (field, format!("is not a URL: {e}")))?;
    match url.scheme() {
        "http" | "https" if url.host().is_some() => Ok(url),
        _ => Err((field, format!("`{}` must be an http(s) URL with a host", display_url(&url)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<CatalogConfig, ConfigError> {
        CatalogConfig::from_toml_str(text, Path::new("/etc/executor.toml"))
    }

    #[test]
    fn a_complete_file_loads() {
        let config = load(
            r#"
            [outbound]
            allow_loopback = true
            timeout_ms = 5000

            [[sources]]
            namespace = "github"
            kind = "openapi"
            spec = "specs/github.yaml"
            base_url = "https://api.example.test"
            auth = { type = "bearer", token = "env:GITHUB_TOKEN" }
            headers = { "X-Team" = "core", "X-Key" = "env:KEY" }
            policy = { default = "approve", rules = [{ pattern = "github.issues.*", action = "run" }] }

            [[sources]]
            namespace = "docs"
            kind = "mcp"
            url = "https://mcp.example.test/mcp"
            auth = { type = "api_key", name = "X-Api-Key", in = "header", value = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:docs-AbCdEf" }
            "#,
        )
        .unwrap();
        assert!(config.outbound.allow_loopback);
        assert_eq!(config.outbound.timeout, Duration::from_secs(5));
        let github = &config.sources[0];
        assert_eq!(
            github.kind,
            SourceKind::OpenApi {
                spec: SpecLocation::File("/etc/specs/github.yaml".into()),
                base_url: Url::parse("https://api.example.test").unwrap()
            }
        );
        assert_eq!(github.auth, Some(Auth::Bearer { token: SecretRef::Env("GITHUB_TOKEN".into()) }));
        assert_eq!(github.headers["X-Team"], HeaderValue::Literal("core".into()));
        assert_eq!(github.headers["X-Key"], HeaderValue::Secret(SecretRef::Env("KEY".into())));
        assert_eq!(github.policy.rules.len(), 1);
        assert!(matches!(config.sources[1].auth, Some(Auth::ApiKey { location: ApiKeyLocation::Header, .. })));
    }

    #[test]
    fn the_example_file_is_valid() {
        let config = load(include_str!("../../../executor.example.toml")).unwrap();
        let namespaces: Vec<&str> = config.sources.iter().map(|s| s.namespace.as_str()).collect();
        assert_eq!(namespaces, ["github", "billing", "docs", "tracker", "crm"]);
        assert!(matches!(&config.sources[4].auth, Some(Auth::OAuth2(o)) if o.refresh_scope.is_some()));
        assert!(matches!(config.sources[3].kind, SourceKind::Graphql { schema: Some(_), .. }));
        assert!(
            matches!(&config.sources[3].auth, Some(Auth::OAuth2ClientCredentials { scopes, .. }) if scopes.len() == 2)
        );
        assert_eq!(config.toolkits[0].name.as_str(), "support");
        assert!(config.toolkits[0].includes("github.issues.create") && !config.toolkits[0].includes("billing.x"));
        let bot = Principal::parse("ci-bot").unwrap();
        assert_eq!(config.quotas[&bot].executions_per_hour, Some(1000));
    }

    #[test]
    fn toolkit_and_quota_mistakes_name_the_file_the_toolkit_and_the_field() {
        let cases = [
            ("[[toolkits]]\nname = \"Support\"\ntools = [\"a.*\"]", "toolkit `Support`, field `name`"),
            ("[[toolkits]]\nname = \"s\"\ntools = []", "toolkit `s`, field `tools`: must list"),
            ("[[toolkits]]\nname = \"s\"\ntools = [\"a b\"]", "toolkit `s`, field `tools`: tool pattern `a b`"),
            (
                "[[toolkits]]\nname = \"s\"\ntools = [\"a.*\"]\npolicy = { default = \"sometimes\" }",
                "toolkit `s`, field `policy`",
            ),
            (
                "[[toolkits]]\nname = \"s\"\ntools = [\"a.*\"]\n[[toolkits]]\nname = \"s\"\ntools = [\"b.*\"]",
                "toolkit `s`, field `name`: another toolkit",
            ),
            ("[[toolkits]]\nname = \"s\"\ntools = [\"a.*\"]\nfilter = 1", "unknown field `filter`"),
            ("[quotas.\"a\\nb\"]\nexecutions_per_hour = 1", "[quotas] owner \"a\\nb\""),
            ("[quotas.alice]\nexecutions_per_day = 1", "unknown field `executions_per_day`"),
        ];
        for (text, expected) in cases {
            let message = load(text).unwrap_err().to_string();
            assert!(message.starts_with("/etc/executor.toml"), "{message}");
            assert!(message.contains(expected), "expected `{expected}` in: {message}");
        }
    }

    #[test]
    fn a_per_owner_oauth_source_loads() {
        let config = load(
            r#"
            [[sources]]
            namespace = "crm"
            kind = "openapi"
            spec = "crm.json"
            base_url = "https://crm.test"
            auth = { type = "oauth2", authorization_url = "https://id.test/authorize", token_url = "https://id.test/token", client_id = "executor", client_secret = "env:CRM_SECRET", scopes = ["contacts.read"], refresh_scope = "offline_access" }
            "#,
        )
        .unwrap();
        let Some(Auth::OAuth2(oauth)) = &config.sources[0].auth else { panic!("{:?}", config.sources[0].auth) };
        assert_eq!(oauth.authorization_url.as_str(), "https://id.test/authorize");
        assert!(oauth.client_secret.is_some());
        assert_eq!(oauth.requested_scopes(), ["contacts.read", "offline_access"]);
        // A public client: no secret.
        let public = load(
            r#"
            [[sources]]
            namespace = "crm"
            kind = "graphql"
            url = "https://crm.test/graphql"
            schema = "crm.graphql"
            auth = { type = "oauth2", authorization_url = "https://id.test/authorize", token_url = "https://id.test/token", client_id = "executor" }
            "#,
        )
        .unwrap();
        assert!(
            matches!(&public.sources[0].auth, Some(Auth::OAuth2(o)) if o.client_secret.is_none() && o.requested_scopes().is_empty())
        );
    }

    #[test]
    fn mistakes_name_the_file_the_source_and_the_field() {
        let source = |body: &str| format!("[[sources]]\nnamespace = \"gh\"\n{body}");
        let oauth = |secret: &str, scopes: &str| {
            format!(
                "auth = {{ type = \"oauth2_client_credentials\", token_url = \"https://auth.x.test/token\", client_id = \"c\", client_secret = \"{secret}\", scopes = {scopes} }}"
            )
        };
        let per_owner = |extra: &str| {
            format!(
                "auth = {{ type = \"oauth2\", authorization_url = \"https://a.test/authorize\", token_url = \"https://a.test/token\", client_id = \"c\", {extra} }}"
            )
        };
        let openapi = "kind = \"openapi\"\nspec = \"a.json\"\nbase_url = \"https://x.test\"";
        let cases = [
            (source("kind = \"openapi\"\nbase_url = \"https://x.test\""), "source `gh`, field `spec`: is required"),
            (source("kind = \"mcp\""), "field `url`: is required"),
            (
                source("kind = \"mcp\"\nurl = \"ftp://u:hunter2@x.test/?k=hunter2\""),
                "field `url`: `ftp://x.test/` must be an http(s) URL",
            ),
            (source("kind = \"mcp\"\nurl = \"https://x.test:99999/?k=hunter2\""), "field `url`: is not a URL"),
            (
                source(
                    "kind = \"mcp\"\nurl = \"https://x.test\"\nauth = { type = \"api_key\", name = \"a;b\", in = \"cookie\", value = \"env:K\" }",
                ),
                "field `auth.name`: `a;b` is not a valid cookie name",
            ),
            (source("kind = \"mcp\"\nurl = \"https://x.test\"\nspec = \"a.json\""), "field `spec`: does not apply"),
            (
                source("kind = \"mcp\"\nurl = \"https://x.test\"\nauth = { type = \"bearer\", token = \"hunter2\" }"),
                "field `auth.token`: a secret must be a reference",
            ),
            (
                "[[sources]]\nnamespace = \"search\"\nkind = \"mcp\"\nurl = \"https://x.test\"".into(),
                "source `search`, field `namespace`: `search` is reserved",
            ),
            (
                "[[sources]]\nnamespace = \"my-api\"\nkind = \"mcp\"\nurl = \"https://x.test\"".into(),
                "field `namespace`: must be an identifier",
            ),
            (
                format!("{0}\n{0}", source("kind = \"mcp\"\nurl = \"https://x.test\"")),
                "field `namespace`: another source already uses",
            ),
            (source("kind = \"mcp\"\nurl = \"https://x.test\"\nspek = 1"), "unknown field `spek`"),
            (source("kind = \"graphql\""), "source `gh`, field `url`: is required for kind = \"graphql\""),
            (
                source("kind = \"graphql\"\nurl = \"https://x.test\"\nspec = \"a.json\""),
                "field `spec`: does not apply to kind = \"graphql\"",
            ),
            (source("kind = \"openapi\"\nschema = \"s.json\""), "field `schema`: does not apply"),
            (
                source(&format!("kind = \"graphql\"\nurl = \"https://x.test\"\n{}", oauth("hunter2", "[\"read\"]"))),
                "field `auth.client_secret`: a secret must be a reference",
            ),
            (
                source(&format!("kind = \"graphql\"\nurl = \"https://x.test\"\n{}", oauth("env:S", "[\"a b\"]"))),
                "field `auth.scopes`: \"a b\" is not a scope",
            ),
            (
                source(&format!("kind = \"mcp\"\nurl = \"https://x.test\"\n{}", oauth("env:S", "[]"))),
                "field `auth.type`: `oauth2_client_credentials` is not supported for kind = \"mcp\"",
            ),
            (
                source(
                    "kind = \"graphql\"\nurl = \"https://x.test\"\nauth = { type = \"oauth2_client_credentials\", token_url = \"ftp://x.test/?k=hunter2\", client_id = \"c\", client_secret = \"env:S\" }",
                ),
                "field `auth.token_url`: `ftp://x.test/` must be an http(s) URL",
            ),
            (
                source(
                    "kind = \"graphql\"\nurl = \"https://x.test\"\nauth = { type = \"oauth2_client_credentials\", token_url = \"https://x.test\", client_secret = \"env:S\" }",
                ),
                "missing field `client_id`",
            ),
            (
                source(
                    "kind = \"mcp\"\nurl = \"https://x.test\"\npolicy = { rules = [{ pattern = \"a b\", action = \"run\" }] }",
                ),
                "`a b`",
            ),
            (
                source(&format!("kind = \"graphql\"\nurl = \"https://x.test\"\n{}", per_owner("scopes = [\"r\"]"))),
                "field `schema`: is required with auth type `oauth2`",
            ),
            (
                source(&format!("kind = \"mcp\"\nurl = \"https://x.test\"\n{}", per_owner("scopes = []"))),
                "field `auth.type`: `oauth2` is not supported for kind = \"mcp\"",
            ),
            (
                source(&format!("{openapi}\n{}", per_owner("refresh_scope = \"offline access\""))),
                "field `auth.refresh_scope`: \"offline access\" is not a scope",
            ),
            (
                source(&format!("{openapi}\n{}", per_owner("client_secret = \"hunter2\""))),
                "field `auth.client_secret`: a secret must be a reference",
            ),
            (
                source(&format!(
                    "{openapi}\nauth = {{ type = \"oauth2\", authorization_url = \"ftp://a.test/?k=hunter2\", token_url = \"https://a.test/t\", client_id = \"c\" }}"
                )),
                "field `auth.authorization_url`: `ftp://a.test/` must be an http(s) URL",
            ),
        ];
        for (text, expected) in cases {
            let message = load(&text).unwrap_err().to_string();
            assert!(message.starts_with("/etc/executor.toml"), "{message}");
            assert!(message.contains(expected), "expected `{expected}` in: {message}");
            assert!(!message.contains("hunter2"), "a secret written in the file is not echoed: {message}");
        }
        let missing = CatalogConfig::load(Path::new("/nonexistent/executor.toml")).unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/executor.toml"), "{missing}");
    }
}
