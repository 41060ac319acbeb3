//! Connecting the sources of a sources file: each one's credentials, its
//! tools (from the catalog index, its document, its schema or its server)
//! and its upstream; an OAuth-protected MCP server's authorization too.
//! Sources connect concurrently, and one that fails is unavailable with the
//! reason rather than failing the catalog (and retried: `availability.rs`).

use std::sync::{Arc, OnceLock};

use executor_core::{Clock, SystemClock};
use executor_telemetry::Metric;
use url::Url;

use crate::catalog::availability::source_state;
use crate::catalog::credentials::{add_client_secret, credentials};
use crate::catalog::endpoint::{ERROR_EXCERPT_CHARS, Endpoint};
use crate::catalog::graphql_upstream::GraphqlUpstream;
use crate::catalog::http_upstream::HttpUpstream;
use crate::catalog::{Catalog, CatalogError, Connection, McpAuth, OAuthBacking, Source, Upstream};
use crate::config::{Auth, CatalogConfig, OAuth2Config, SourceConfig, SourceKind, SpecLocation};
use crate::connections::{OwnerTokens, TOKEN_KEY_ENV};
use crate::mcp_oauth::{self, BearerChallenge};
use crate::mcp_source::{McpConnectError, McpUpstream, OwnerMcp};
use crate::oauth::{TokenCache, TokenEndpoint};
use crate::outbound::Outbound;
use crate::redact::Redactor;
use crate::secrets::Secrets;
use crate::tool::ToolDef;
use crate::{graphql, index, openapi};

impl Catalog {
    /// Connect every source of `config`. Only a broken HTTP client set-up fails
    /// the whole catalog; a failing source is reported per namespace.
    pub async fn connect(config: &CatalogConfig) -> Result<Self, CatalogError> {
        Self::connect_with_clock(config, Arc::new(SystemClock)).await
    }

    /// [`Catalog::connect`], with the clock that decides when OAuth tokens expire.
    pub async fn connect_with_clock(config: &CatalogConfig, clock: Arc<dyn Clock>) -> Result<Self, CatalogError> {
        Self::connect_with(config, clock, OAuthBacking::default()).await
    }

    /// [`Catalog::connect_with_clock`], with what OAuth sources keep in the
    /// deployment's store: owners' tokens for per-owner (`oauth2`) sources,
    /// client registrations for OAuth-protected MCP servers. Without them such
    /// a source is unavailable, with the reason.
    pub async fn connect_with(
        config: &CatalogConfig,
        clock: Arc<dyn Clock>,
        backing: OAuthBacking,
    ) -> Result<Self, CatalogError> {
        let outbound = Outbound::new(&config.outbound)?;
        let secrets = Secrets::default();
        // The index's tools for the documents it holds, checked against them first.
        let mut indexed = match &config.index {
            Some(path) => index::load(path, config)?,
            None => Vec::new(),
        };
        let owners = backing
            .vault
            .map(|vault| Arc::new(OwnerTokens::new(vault.store, vault.key, outbound.clone(), clock.clone())));
        let context = ConnectContext { outbound, secrets, clock, owners, mcp_auth: backing.mcp };
        // Each source's tools from the index; a source that fails keeps them for its retries.
        let mut from_index: Vec<Option<Vec<ToolDef>>> = config
            .sources
            .iter()
            .map(|s| {
                let at = indexed.iter().position(|(namespace, _)| *namespace == s.namespace)?;
                Some(indexed.swap_remove(at).1)
            })
            .collect();
        let connected = futures_util::future::join_all(
            config.sources.iter().zip(from_index.iter_mut()).map(|(s, tools)| connect_source(s, &context, tools)),
        )
        .await;
        let now = context.clock.now();
        let mut tools = Vec::new();
        let mut sources = Vec::new();
        for ((config, result), indexed) in config.sources.iter().zip(connected).zip(from_index) {
            if let Err(reason) = &result {
                let next_retry_at = now.plus(super::availability::backoff(1)).to_rfc3339();
                tracing::warn!(namespace = %config.namespace, %reason, %next_retry_at, "source unavailable");
            }
            let connection = result.map(|(connection, source_tools)| {
                tools.extend(source_tools);
                connection
            });
            sources.push(Source {
                namespace: config.namespace.clone(),
                kind: config.kind.name(),
                policy: config.policy.clone(),
                state: source_state(config, connection, indexed, now),
            });
        }
        tools.sort_by(|a, b| a.path.cmp(&b.path));
        let by_path = tools.iter().enumerate().map(|(i, t)| (t.path.clone(), i)).collect();
        // Kept while a source that failed may still connect per owner once it connects.
        let retried_per_owner = config
            .sources
            .iter()
            .zip(&sources)
            .any(|(config, source)| source.retrying().is_some() && may_connect_per_owner(config));
        let owners = context.owners.clone().filter(|owners| owners.has_sources() || retried_per_owner);
        let (cedar, toolkit_cedar) = (None, std::collections::HashMap::new());
        let ui_ambiguity_logged = Default::default();
        let mut catalog = Self {
            tools,
            by_path,
            index: OnceLock::new(),
            sources,
            owners,
            context,
            cedar,
            toolkit_cedar,
            ui_ambiguity_logged,
        };
        catalog.load_policies(config)?;
        executor_telemetry::level(Metric::SourcesUnavailable, catalog.unavailable_count() as u64);
        Ok(catalog)
    }

    /// The catalog of the sources file named by `flag` or `EXECUTOR_CONFIG`; with
    /// neither, a catalog without sources (search finds nothing).
    pub async fn load(flag: Option<std::path::PathBuf>) -> Result<Self, CatalogError> {
        Self::connect(&CatalogConfig::load_located(flag)?).await
    }
}

/// Whether `config`'s owners may connect their own accounts: an `oauth2`
/// source, or an MCP server without credentials of its own (it may turn out
/// OAuth-protected).
fn may_connect_per_owner(config: &SourceConfig) -> bool {
    matches!((&config.kind, &config.auth), (_, Some(Auth::OAuth2(_))) | (SourceKind::Mcp { .. }, None))
}

/// What connecting a source may use.
pub(super) struct ConnectContext {
    outbound: Outbound,
    secrets: Secrets,
    pub(super) clock: Arc<dyn Clock>,
    owners: Option<Arc<OwnerTokens>>,
    mcp_auth: Option<McpAuth>,
}

/// A source's tools and connection; an error is the reason it is
/// unavailable, redacted with everything the source's config and secrets hold.
/// `indexed`: its tools from the catalog index, so its document is not read;
/// taken only by a connection that succeeds (a retry needs them again).
pub(super) async fn connect_source(
    config: &SourceConfig,
    context: &ConnectContext,
    indexed: &mut Option<Vec<ToolDef>>,
) -> Result<(Connection, Vec<ToolDef>), String> {
    let ConnectContext { outbound, secrets, clock, owners, .. } = context;
    // A key written into a configured URL is known before any secret is resolved.
    let mut redactor = Redactor::default();
    match &config.kind {
        SourceKind::OpenApi { spec, base_url } => {
            redactor.add_url_credentials(base_url);
            if let SpecLocation::Url(url) = spec {
                redactor.add_url_credentials(url);
            }
        }
        SourceKind::Mcp { url } | SourceKind::Graphql { url, .. } => redactor.add_url_credentials(url),
    }
    match &config.auth {
        Some(Auth::OAuth2ClientCredentials { token_url, .. }) => redactor.add_url_credentials(token_url),
        Some(Auth::OAuth2(oauth)) => {
            redactor.add_url_credentials(&oauth.token_url);
            redactor.add_url_credentials(&oauth.authorization_url);
        }
        _ => {}
    }
    let fail = |what: &str, why: String| format!("source `{}` ({what}) failed: {why}", config.namespace);
    let mut credentials = match credentials(config, secrets, &mut redactor).await {
        Ok(credentials) => credentials,
        Err(e) => return Err(redactor.redact(&fail("secrets", e))),
    };
    let tokens = credentials
        .token
        .take()
        .map(|endpoint| Arc::new(TokenCache::new(endpoint, outbound.clone(), clock.clone(), redactor.clone())));
    let (owners, per_owner) = match (credentials.per_owner.take(), owners) {
        (None, _) => (None, None),
        (Some(_), None) => {
            let why = "per-owner OAuth needs a token store and key, which this host was started without".into();
            return Err(redactor.redact(&fail("auth", why)));
        }
        (Some(per_owner), Some(owners)) => (Some(owners.clone()), Some(per_owner)),
    };
    let redactor = Arc::new(redactor);
    // With tokens, what leaves is redacted of them too.
    let current = || tokens.as_ref().map_or_else(|| redactor.clone(), |tokens| tokens.redactor());
    let endpoint = Endpoint {
        headers: credentials.headers,
        outbound: outbound.clone(),
        tokens: tokens.clone(),
        owners: owners.clone().map(|owners| (owners, config.namespace.clone())),
    };
    // The first token is asked for now, so credentials the server refuses make the source unavailable.
    let token = match &tokens {
        Some(tokens) => tokens.token().await.map(drop).map_err(|e| fail("auth", e.to_string())),
        None => Ok(()),
    };
    let connected = match token {
        Ok(()) => connect_upstream(config, endpoint, credentials.query, &current(), context, fail, indexed).await,
        Err(reason) => Err(reason),
    };
    match connected {
        Ok((upstream, tools, discovered)) => {
            let (owners, per_owner, redactor) = match discovered {
                // An OAuth-protected MCP server: its owners connect through the registered client.
                Some(OwnerOAuth { owners, oauth, endpoint, .. }) => {
                    let mut redactor = (*redactor).clone();
                    if let Some(secret) = &endpoint.client_secret {
                        add_client_secret(&mut redactor, &oauth.client_id, secret);
                    }
                    (Some(owners), Some((oauth, endpoint)), Arc::new(redactor))
                }
                None => (owners, per_owner, redactor),
            };
            // Only a source that loaded asks its callers to connect.
            if let (Some(owners), Some((oauth, endpoint))) = (&owners, per_owner) {
                owners.register(&config.namespace, oauth, endpoint, (*redactor).clone());
            }
            Ok((Connection { upstream, redactor, tokens, owners }, tools))
        }
        Err(reason) => Err(current().redact(&reason)),
    }
}

/// What an OAuth-protected MCP server's owners connect with.
struct OwnerOAuth {
    owners: Arc<OwnerTokens>,
    oauth: OAuth2Config,
    endpoint: TokenEndpoint,
    /// The authorization server and client, for the operator.
    about: String,
}

async fn connect_upstream(
    config: &SourceConfig,
    endpoint: Endpoint,
    query: Vec<(String, String)>,
    redactor: &Redactor,
    context: &ConnectContext,
    fail: impl Fn(&str, String) -> String,
    indexed: &mut Option<Vec<ToolDef>>,
) -> Result<(Upstream, Vec<ToolDef>, Option<OwnerOAuth>), String> {
    let outbound = &endpoint.outbound;
    let with_query = |url: &Url| {
        let mut url = url.clone();
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(&query);
        }
        url
    };
    match &config.kind {
        SourceKind::OpenApi { spec, base_url } => {
            outbound.check_url(base_url).map_err(|e| fail("base_url", e.to_string()))?;
            // Nothing below fails once the indexed tools are taken.
            let tools = match indexed.take() {
                Some(tools) => tools,
                None => {
                    let text = match spec {
                        SpecLocation::File(path) => tokio::fs::read_to_string(path)
                            .await
                            .map_err(|e| fail("spec", format!("cannot read {}: {e}", path.display())))?,
                        SpecLocation::Url(url) => {
                            fetch_spec(with_query(url), &endpoint, redactor).await.map_err(|e| fail("spec", e))?
                        }
                    };
                    openapi::load(&config.namespace, &text).map_err(|e| fail("spec", e.to_string()))?
                }
            };
            let upstream = Upstream::OpenApi(HttpUpstream { base_url: base_url.clone(), query, endpoint });
            Ok((upstream, tools, None))
        }
        SourceKind::Graphql { url, schema } => {
            outbound.check_url(url).map_err(|e| fail("url", e.to_string()))?;
            let upstream = GraphqlUpstream { url: with_query(url), endpoint };
            let text = match schema {
                Some(path) => tokio::fs::read_to_string(path)
                    .await
                    .map_err(|e| fail("schema", format!("cannot read {}: {e}", path.display())))?,
                None => upstream.introspect(redactor).await.map_err(|e| fail("introspection", e))?,
            };
            let tools = graphql::load(&config.namespace, &text).map_err(|e| fail("schema", e.to_string()))?;
            Ok((Upstream::Graphql(upstream), tools, None))
        }
        SourceKind::Mcp { url } => {
            // The config refuses OAuth for MCP sources (their headers are fixed at the
            // handshake): a server that wants each owner's authorization says so with a 401.
            let headers: reqwest::header::HeaderMap = endpoint.headers.iter().cloned().collect();
            let url = with_query(url);
            match McpUpstream::connect(&config.namespace, &url, headers.clone(), outbound, redactor).await {
                Ok((mcp, tools)) => Ok((Upstream::Mcp(Box::new(mcp)), tools, None)),
                // Credentials of its own that the server refused are not MCP authorization's business.
                Err(McpConnectError::Unauthorized { challenges, .. }) if config.auth.is_none() => {
                    let challenge = BearerChallenge::from_headers(challenges.iter().map(String::as_str));
                    let discovered = mcp_authorization(config, &url, &challenge, context)
                        .await
                        .map_err(|why| fail("mcp authorization", why))?;
                    let (owners, about) = (discovered.owners.clone(), discovered.about.clone());
                    let (outbound, redactor) = (outbound.clone(), redactor.clone());
                    let mcp = OwnerMcp::new(&config.namespace, url, headers, outbound, owners, redactor, about);
                    Ok((Upstream::OwnerMcp(Box::new(mcp)), Vec::new(), Some(discovered)))
                }
                Err(e) => Err(fail("mcp", e.to_string())),
            }
        }
    }
}

/// An MCP server that answered 401: its authorization server discovered
/// and this deployment registered there (see `mcp_oauth.rs`). The answer is
/// what its owners connect with, or the reason the source is unavailable.
async fn mcp_authorization(
    config: &SourceConfig,
    url: &Url,
    challenge: &BearerChallenge,
    context: &ConnectContext,
) -> Result<OwnerOAuth, String> {
    let discovered = mcp_oauth::discover(&context.outbound, url, challenge).await.map_err(|e| e.to_string())?;
    let Some(McpAuth { registrations, site }) = &context.mcp_auth else {
        return Err(format!(
            "the server requires OAuth authorization from {}, and this host keeps no client registrations",
            discovered.issuer
        ));
    };
    let Some(site) = site else { return Err(mcp_oauth::McpOAuthError::NoPublicUrl.to_string()) };
    let Some(owners) = &context.owners else {
        return Err(format!(
            "the server requires each owner's OAuth authorization from {}, and this host keeps no owners' tokens: \
             start it with a token key ({})",
            discovered.issuer, TOKEN_KEY_ENV
        ));
    };
    let now = context.clock.now();
    let client = mcp_oauth::register(
        &context.outbound,
        &**registrations,
        owners.key(),
        &config.namespace,
        &discovered,
        site,
        now,
    )
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!(
        namespace = %config.namespace,
        issuer = %discovered.issuer,
        client_id = %client.client_id,
        "OAuth-protected MCP server: each owner connects"
    );
    let oauth = OAuth2Config {
        authorization_url: client.authorization_url,
        token_url: client.token_url.clone(),
        client_id: client.client_id.clone(),
        // The registration's secret, if any, is in hand (not a reference): the token endpoint has it.
        client_secret: None,
        scopes: client.scopes.clone(),
        refresh_scope: None,
    };
    let endpoint = TokenEndpoint {
        url: client.token_url,
        client_id: client.client_id,
        client_secret: client.client_secret,
        scopes: client.scopes,
        resource: Some(client.resource),
    };
    let about = format!("{} (client `{}`, scopes {:?})", discovered.issuer, oauth.client_id, oauth.scopes);
    Ok(OwnerOAuth { owners: owners.clone(), oauth, endpoint, about })
}

/// The spec is fetched with the source's credentials: private APIs often protect it too.
async fn fetch_spec(url: Url, endpoint: &Endpoint, redactor: &Redactor) -> Result<String, String> {
    let answer = endpoint
        .send(|outbound| outbound.request(reqwest::Method::GET, url.clone()), None)
        .await
        .map_err(|e| e.to_string())?;
    match answer.status {
        200..300 => Ok(String::from_utf8_lossy(&answer.body).into_owned()),
        status => Err(format!("HTTP {status}: {}", redactor.excerpt(&answer.body, ERROR_EXCERPT_CHARS))),
    }
}
