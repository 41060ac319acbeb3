//! The catalog: every configured source's tools under one roof, implementing
//! the sandbox's `Tools` (policy, call by path, search, describe).
//!
//! Sources are connected once per process, concurrently. A source that fails
//! (spec unreachable, handshake refused, secret missing) does not take the
//! others down: it is listed by [`Catalog::namespaces`] with the reason, and
//! calls and searches in its namespace answer with that reason, never with a
//! silent "0 tools".
//!
//! Every text that leaves a source (results, error messages, the reason a
//! source is unavailable) passes its [`Redactor`] here, in one place per kind.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use base64::Engine as _;
use executor_core::{ClientSite, Clock, PolicyAction, Principal, SourcePolicy, SystemClock, Toolkit};
use executor_sandbox::{CallContext, PathFilter, Policy, ToolError, ToolOutcome, ToolSuccess, Tools};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use url::Url;

use crate::approval_text;
use crate::config::{
    ApiKeyLocation, Auth, CatalogConfig, HeaderValue as ConfiguredHeader, OAuth2Config, SourceConfig, SourceKind,
    SpecLocation,
};
use crate::connections::{OwnerTokenError, OwnerTokens, TokenKey};
use crate::graphql::{self, GraphqlOperation};
use crate::mcp_oauth::{self, BearerChallenge};
use crate::mcp_source::{McpConnectError, McpUpstream, OwnerMcp, OwnerMcpError};
use crate::oauth::{OAuthError, TokenCache, TokenEndpoint};
use crate::openapi::{self, HttpOperation};
use crate::outbound::{Outbound, OutboundError};
use crate::redact::{Redactor, display_url};
use crate::search::{SearchIndex, search_parts};
use crate::secrets::Secrets;
use crate::tool::{Target, ToolDef};
use crate::toolkit::ToolkitView;

/// How much of an upstream error body the code sees.
const ERROR_EXCERPT_CHARS: usize = 500;
/// How much of the reason a source is unavailable `execute`'s description shows.
const LABEL_REASON_CHARS: usize = 200;
const DEFAULT_SEARCH_LIMIT: usize = 20;
const MAX_SEARCH_LIMIT: usize = 100;
/// What a cookie value cannot hold as it is (RFC 6265 `cookie-octet`s), and
/// `%`, so the encoding can be undone.
const COOKIE_VALUE: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b',').add(b';').add(b'\\').add(b'%');

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot set up the outbound HTTP client: {0}")]
    Outbound(#[from] OutboundError),
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    #[error(transparent)]
    Index(#[from] crate::IndexError),
}

/// What MCP authorization needs of the deployment: where client
/// registrations are kept (shared by every instance), and where this
/// deployment is reached (the redirect URI and the client metadata document
/// live there; `None` when no public URL is configured).
#[derive(Clone)]
pub struct McpAuth {
    pub registrations: Arc<dyn executor_store::OAuthClientStore>,
    pub site: Option<ClientSite>,
}

/// A namespace as the `execute` tool's description lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamespaceInfo {
    pub namespace: String,
    /// `openapi`, `mcp` or `graphql`.
    pub kind: &'static str,
    pub tools: usize,
    /// Why the source is unavailable, when it is.
    pub error: Option<String>,
    /// Why its tools are not known yet: an OAuth-protected MCP server lists
    /// them only to a connected owner, and none has called it on this instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_connection: Option<String>,
}

pub struct Catalog {
    /// Sorted by path.
    tools: Vec<ToolDef>,
    by_path: HashMap<String, usize>,
    /// Built on the first search: processes that only call tools never pay for it.
    index: OnceLock<SearchIndex>,
    sources: Vec<Source>,
    /// The per-owner OAuth sources and their owners' tokens, when any source is one.
    owners: Option<Arc<OwnerTokens>>,
}

/// What OAuth sources keep in the deployment's store; see [`Catalog::connect_with`].
#[derive(Default)]
pub struct OAuthBacking {
    /// Owners' tokens, for per-owner (`oauth2`) sources.
    pub vault: Option<Vault>,
    /// Client registrations, for OAuth-protected MCP servers.
    pub mcp: Option<McpAuth>,
}

/// Where per-owner OAuth tokens are kept: the store, and the key that seals them.
pub struct Vault {
    pub store: Arc<dyn executor_store::ConnectionStore>,
    pub key: TokenKey,
}

struct Source {
    namespace: String,
    kind: &'static str,
    policy: SourcePolicy,
    connection: Result<Connection, String>,
}

struct Connection {
    upstream: Upstream,
    /// Every secret value this source was configured with.
    redactor: Arc<Redactor>,
    /// The source's OAuth token, when it has one.
    tokens: Option<Arc<TokenCache>>,
    /// Its owners' tokens, for a per-owner OAuth source.
    owners: Option<Arc<OwnerTokens>>,
}

impl Connection {
    /// Every secret value this source uses, the tokens issued to it included.
    fn redactor(&self) -> Arc<Redactor> {
        if let Some(owners) = &self.owners {
            return Arc::new(owners.redactor(&self.redactor));
        }
        self.tokens.as_ref().map_or_else(|| self.redactor.clone(), |tokens| tokens.redactor())
    }
}

enum Upstream {
    OpenApi(HttpUpstream),
    Mcp(McpUpstream),
    /// An OAuth-protected MCP server: each owner's calls carry their token.
    OwnerMcp(OwnerMcp),
    Graphql(GraphqlUpstream),
}

struct HttpUpstream {
    base_url: Url,
    /// Query credentials (an API key `in = "query"`), added to every URL.
    query: Vec<(String, String)>,
    endpoint: Endpoint,
}

struct GraphqlUpstream {
    /// With the query credentials in it.
    url: Url,
    endpoint: Endpoint,
}

/// Sends a source's requests with its credential headers and its OAuth token.
struct Endpoint {
    headers: Vec<(HeaderName, HeaderValue)>,
    outbound: Outbound,
    tokens: Option<Arc<TokenCache>>,
    /// A per-owner source: its owners' tokens and its namespace.
    owners: Option<(Arc<OwnerTokens>, String)>,
}

/// Why a request was not answered.
#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error(transparent)]
    Outbound(#[from] OutboundError),
    #[error("no access token: {0}")]
    Token(#[from] OAuthError),
    #[error("no access token: {0}")]
    Owner(#[from] OwnerTokenError),
}

/// A source's credentials and extra headers, resolved.
#[derive(Default)]
struct Credentials {
    headers: Vec<(HeaderName, HeaderValue)>,
    query: Vec<(String, String)>,
    /// Where its OAuth tokens come from.
    token: Option<TokenEndpoint>,
    /// A per-owner OAuth source's authorization server and client.
    per_owner: Option<(OAuth2Config, TokenEndpoint)>,
}

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
            Some(path) => crate::index::load(path, config)?,
            None => Vec::new(),
        };
        let owners = backing
            .vault
            .map(|vault| Arc::new(OwnerTokens::new(vault.store, vault.key, outbound.clone(), clock.clone())));
        let context = ConnectContext { outbound, secrets, clock, owners, mcp_auth: backing.mcp };
        let connected = futures_util::future::join_all(config.sources.iter().map(|s| {
            let tools = indexed.iter().position(|(namespace, _)| *namespace == s.namespace);
            connect_source(s, &context, tools.map(|at| indexed.swap_remove(at).1))
        }))
        .await;
        let owners = context.owners;
        let mut tools = Vec::new();
        let mut sources = Vec::new();
        for (config, result) in config.sources.iter().zip(connected) {
            if let Err(reason) = &result {
                tracing::warn!(namespace = %config.namespace, %reason, "source unavailable");
            }
            let connection = result.map(|(connection, source_tools)| {
                tools.extend(source_tools);
                connection
            });
            sources.push(Source {
                namespace: config.namespace.clone(),
                kind: config.kind.name(),
                policy: config.policy.clone(),
                connection,
            });
        }
        tools.sort_by(|a, b| a.path.cmp(&b.path));
        let by_path = tools.iter().enumerate().map(|(i, t)| (t.path.clone(), i)).collect();
        let owners = owners.filter(|owners| owners.has_sources());
        Ok(Self { tools, by_path, index: OnceLock::new(), sources, owners })
    }

    /// Per-owner connections to its `oauth2` sources, when it has any: the
    /// host's connect flow and `/api/connections` go through them.
    pub fn connections(&self) -> Option<Arc<dyn executor_sandbox::Connections>> {
        self.owners.clone().map(|owners| owners as Arc<dyn executor_sandbox::Connections>)
    }

    /// The catalog of the sources file named by `flag` or `EXECUTOR_CONFIG`; with
    /// neither, a catalog without sources (search finds nothing).
    pub async fn load(flag: Option<std::path::PathBuf>) -> Result<Self, CatalogError> {
        Self::connect(&CatalogConfig::load_located(flag)?).await
    }

    /// A namespace as `execute`'s description lists it: its name, and
    /// `(unavailable: <reason>)` when its source failed to load.
    pub fn label(&self, namespace: &str) -> String {
        match self.source(namespace).map(|s| &s.connection) {
            Some(Err(reason)) => {
                format!("{namespace} (unavailable: {})", executor_core::text::cut_text(reason, LABEL_REASON_CHARS))
            }
            _ if self.unlisted(namespace).is_some() => {
                format!("{namespace} (its tools are listed once you connect: call any `tools.{namespace}.<name>()`)")
            }
            _ => namespace.to_owned(),
        }
    }

    pub fn namespaces(&self) -> Vec<NamespaceInfo> {
        self.sources
            .iter()
            .map(|s| NamespaceInfo {
                namespace: s.namespace.clone(),
                kind: s.kind,
                tools: match self.owner_mcp(&s.namespace) {
                    Some(mcp) => mcp.tools().map_or(0, |listed| listed.tools.len()),
                    None => self.tools.iter().filter(|t| t.namespace == s.namespace).count(),
                },
                error: s.connection.as_ref().err().cloned(),
                needs_connection: self.unlisted(&s.namespace).map(|mcp| needs_connection(&s.namespace, mcp)),
            })
            .collect()
    }

    /// The views of `toolkits` over `catalog`. A toolkit rule that would
    /// loosen a source's decision has no effect and is logged as a warning.
    pub fn toolkit_views(catalog: &Arc<Self>, toolkits: &[Toolkit]) -> Vec<ToolkitView> {
        let namespaces: Vec<String> = catalog.sources.iter().map(|s| s.namespace.clone()).collect();
        let inner: Arc<dyn Tools> = catalog.clone();
        toolkits
            .iter()
            .map(|toolkit| {
                let view = ToolkitView::new(toolkit.clone(), inner.clone(), &namespaces);
                for warning in view.loosening(catalog.paths()) {
                    tracing::warn!(toolkit = %toolkit.name, "{warning}");
                }
                view
            })
            .collect()
    }

    fn tool(&self, path: &str) -> Option<&ToolDef> {
        if let Some(i) = self.by_path.get(path) {
            return Some(&self.tools[*i]);
        }
        let namespace = path.split('.').next()?;
        self.owner_mcp(namespace)?.tools()?.tools.iter().find(|t| t.path == path)
    }

    fn source(&self, namespace: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.namespace == namespace)
    }

    /// The OAuth-protected MCP server of `namespace`, when it is one.
    fn owner_mcp(&self, namespace: &str) -> Option<&OwnerMcp> {
        match self.source(namespace).map(|s| &s.connection) {
            Some(Ok(Connection { upstream: Upstream::OwnerMcp(mcp), .. })) => Some(mcp),
            _ => None,
        }
    }

    /// The OAuth-protected MCP server of `namespace` while this instance has not listed its tools.
    fn unlisted(&self, namespace: &str) -> Option<&OwnerMcp> {
        self.owner_mcp(namespace).filter(|mcp| mcp.tools().is_none())
    }

    /// The search parts: every tool known at start, and each OAuth-protected MCP server's once listed.
    fn search(&self, query: &str, include: impl Fn(&ToolDef) -> bool) -> Vec<&ToolDef> {
        let index = self.index.get_or_init(|| SearchIndex::build(&self.tools));
        let mut parts = vec![(index, self.tools.as_slice())];
        parts.extend(
            self.sources
                .iter()
                .filter_map(|s| self.owner_mcp(&s.namespace)?.tools())
                .map(|listed| (&listed.index, listed.tools.as_slice())),
        );
        search_parts(&parts, query, include)
    }

    /// No such tool: say why (its source failed to load) or what comes close.
    fn unknown_tool(&self, path: &str) -> ToolError {
        let namespace = path.split('.').next().unwrap_or(path);
        if let Some(Source { connection: Err(reason), .. }) = self.source(namespace) {
            return unavailable(namespace, reason);
        }
        if let Some(mcp) = self.unlisted(namespace) {
            return ToolError { code: "connection_required".into(), message: needs_connection(namespace, mcp) };
        }
        let message = match self.search(path, |_| true).first().map(|t| &t.path) {
            Some(close) => format!("no tool `{path}`; did you mean `{close}`? Find tools with tools.search({{query}})"),
            None => format!("no tool `{path}`; find tools with tools.search({{query}})"),
        };
        ToolError { code: "unknown_tool".into(), message }
    }

    /// Every tool's path, in order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.path.as_str())
    }

    /// What the source's policy does with a call of `tool` before any
    /// argument is known (toolkits tighten it in their view; `approval` of a search item).
    fn approval(&self, tool: &ToolDef) -> PolicyAction {
        self.source(&tool.namespace).map_or(PolicyAction::Run, |s| s.policy.decide(&tool.path, tool.effect).action)
    }

    fn search_tools(&self, request: SearchRequest, visible: &PathFilter<'_>) -> Result<Value, ToolError> {
        if let Some(namespace) = &request.namespace {
            match self.source(namespace) {
                None => {
                    let known: Vec<&str> = self.sources.iter().map(|s| s.namespace.as_str()).collect();
                    return Err(invalid(format!("no namespace `{namespace}`; namespaces: {}", known.join(", "))));
                }
                Some(Source { connection: Err(reason), .. }) => return Err(unavailable(namespace, reason)),
                Some(_) => {}
            }
        }
        let limit = request.limit.unwrap_or(DEFAULT_SEARCH_LIMIT).min(MAX_SEARCH_LIMIT);
        let hits = self.search(&request.query, |t| {
            request.namespace.as_ref().is_none_or(|n| &t.namespace == n) && visible(&t.path)
        });
        let items: Vec<Value> = hits
            .iter()
            .skip(request.offset.unwrap_or(0))
            .take(limit)
            .map(|tool| {
                json!({
                    "path": tool.path,
                    "description": tool.summary,
                    "namespace": tool.namespace,
                    // `read` or `write`; `run`, `approve` or `block`.
                    "kind": tool.effect,
                    "approval": self.approval(tool),
                })
            })
            .collect();
        // Sources that failed to load are named with the reason, so a search
        // that finds nothing there never reads as "no such tools".
        let unavailable: Vec<Value> = self
            .sources
            .iter()
            .filter(|s| request.namespace.as_ref().is_none_or(|n| *n == s.namespace))
            .filter_map(|s| match &s.connection {
                Err(reason) => Some(json!({"namespace": s.namespace, "kind": s.kind, "reason": reason})),
                Ok(_) => None,
            })
            .collect();
        // Likewise the servers whose tools no connected owner has listed here yet.
        let unlisted: Vec<Value> = self
            .sources
            .iter()
            .filter(|s| request.namespace.as_ref().is_none_or(|n| *n == s.namespace))
            .filter_map(|s| Some((s, self.unlisted(&s.namespace)?)))
            .map(|(s, mcp)| json!({"namespace": s.namespace, "kind": s.kind, "reason": needs_connection(&s.namespace, mcp)}))
            .collect();
        let mut found = json!({"items": items, "total": hits.len()});
        if !unavailable.is_empty() {
            found["unavailable"] = Value::Array(unavailable);
        }
        if !unlisted.is_empty() {
            found["needsConnection"] = Value::Array(unlisted);
        }
        Ok(found)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    #[serde(default)]
    query: String,
    namespace: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeRequest {
    path: String,
}

fn unavailable(namespace: &str, reason: &str) -> ToolError {
    ToolError {
        code: "source_unavailable".into(),
        message: format!("namespace `{namespace}` is unavailable: {reason}"),
    }
}

/// A per-owner source's call made without an owner (no authenticated caller).
fn no_caller(path: &str) -> ToolError {
    let message = format!("tools.{path} uses its caller's own connection, and this call has no caller");
    ToolError { code: "auth_error".into(), message }
}

/// Why an OAuth-protected MCP server's tools are not known on this instance, and what to do.
fn needs_connection(namespace: &str, mcp: &OwnerMcp) -> String {
    format!(
        "`{namespace}` is an OAuth-protected MCP server (owners authorize at {}) that lists its tools only to a \
         connected owner, and none has used it here yet: call any tool in it (e.g. `tools.{namespace}.search({{}})`) \
         to be asked to connect your account; the call then runs if the server has that tool, and its tools are \
         searchable from then on",
        mcp.authorization()
    )
}

fn invalid(message: String) -> ToolError {
    ToolError { code: "invalid_arguments".into(), message }
}

/// `tools.search("x")` is taken as `tools.search({query: "x"})`, and likewise for describe.
fn request<T: for<'de> Deserialize<'de>>(request: Value, key: &str, usage: &str) -> Result<T, ToolError> {
    let request = match request {
        Value::String(text) => json!({ key: text }),
        other => other,
    };
    serde_json::from_value(request).map_err(|e| invalid(format!("{e}; usage: {usage}")))
}

#[async_trait]
impl Tools for Catalog {
    /// The checks that making the call would make, so a call that could not be
    /// made fails before anyone is asked to approve it. Unknown paths and
    /// tools of unavailable sources pass: their call says why.
    fn validate(&self, path: &str, args: &Value) -> Result<(), String> {
        let Some(tool) = self.tool(path) else { return Ok(()) };
        let Some(Source { connection: Ok(connection), .. }) = self.source(&tool.namespace) else { return Ok(()) };
        let checked = match (&tool.target, &connection.upstream) {
            (Target::Http(op), Upstream::OpenApi(http)) => {
                http.request(op, args, false).map(drop).map_err(|e| e.to_string())
            }
            (Target::Mcp { input, .. }, _) => input.check(args).map_err(|e| e.to_string()),
            (Target::Graphql(op), Upstream::Graphql(_)) => op.request(args).map(drop).map_err(|e| e.to_string()),
            _ => unreachable!("a source's tools have that source's target kind"),
        };
        checked.map_err(|message| connection.redactor().redact(&message))
    }

    fn policy(&self, path: &str, args: &Value) -> Policy {
        // Unknown paths run: the call itself then explains what exists.
        let Some(tool) = self.tool(path) else { return Policy::Run };
        let Some(source) = self.source(&tool.namespace) else { return Policy::Run };
        let decision = source.policy.decide(path, tool.effect);
        let what = match &tool.target {
            Target::Http(op) => format!("{} {}", op.method, op.path),
            Target::Mcp { name, .. } => format!("MCP tool `{name}`"),
            Target::Graphql(op) => format!("GraphQL {} `{}`", op.kind.as_str(), op.field),
        };
        match decision.action {
            PolicyAction::Run => Policy::Run,
            PolicyAction::Approve => {
                let headline = format!("tools.{path} ({what}) needs approval: {}", decision.reason);
                // A tool of an unavailable source: its call explains why.
                let Ok(connection) = &source.connection else { return Policy::NeedsApproval { message: headline } };
                let effect = match (&tool.target, &connection.upstream) {
                    (Target::Http(op), Upstream::OpenApi(http)) => http.effect(op, args),
                    (Target::Mcp { name, hints, .. }, _) => approval_text::mcp_effect(name, hints),
                    (Target::Graphql(op), Upstream::Graphql(upstream)) => upstream.effect(op),
                    _ => unreachable!("a source's tools have that source's target kind"),
                };
                let redactor = connection.redactor();
                let message = approval_text::approval_message(&headline, &tool.description, &effect, args, &redactor);
                Policy::NeedsApproval { message }
            }
            PolicyAction::Block => {
                Policy::Blocked { reason: format!("tools.{path} ({what}) is blocked by {}", decision.reason) }
            }
        }
    }

    async fn call(&self, path: &str, args: Value, ctx: &CallContext) -> ToolOutcome {
        self.call_with_status(path, args, ctx).await.map(|success| success.data)
    }

    /// OpenAPI results carry their status: the code sees `{ok:true, data, http:{status}}`.
    async fn call_with_status(&self, path: &str, args: Value, ctx: &CallContext) -> Result<ToolSuccess, ToolError> {
        let namespace = path.split('.').next().unwrap_or(path);
        if let Some(mcp) = self.owner_mcp(namespace) {
            return self.call_owner_mcp(mcp, path, args, ctx).await;
        }
        let Some(tool) = self.tool(path) else { return Err(self.unknown_tool(path)) };
        let Some(Source { connection: Ok(connection), .. }) = self.source(&tool.namespace) else {
            return Err(self.unknown_tool(path));
        };
        if connection.owners.is_some() && ctx.owner.is_none() {
            return Err(no_caller(path));
        }
        let redactor = &*connection.redactor();
        let outcome = match (&tool.target, &connection.upstream) {
            (Target::Http(op), Upstream::OpenApi(http)) => http.call(op, args, tool.effect, ctx, redactor).await,
            (Target::Mcp { name, input, .. }, Upstream::Mcp(mcp)) => match input.check(&args) {
                Ok(()) => mcp.call(name, args).await.map(ToolSuccess::plain),
                Err(error) => Err(invalid(error.to_string())),
            },
            (Target::Graphql(op), Upstream::Graphql(upstream)) => upstream.call(op, args, ctx, redactor).await,
            _ => unreachable!("a source's tools have that source's target kind"),
        };
        match outcome {
            Ok(success) => Ok(ToolSuccess { data: redactor.redact_json(success.data), ..success }),
            Err(error) => Err(ToolError { message: redactor.redact(&error.message), ..error }),
        }
    }

    async fn search(&self, request: Value) -> ToolOutcome {
        self.search_visible(request, &|_| true).await
    }

    /// Before an OAuth-protected MCP server's tools are listed, any path in
    /// its namespace may be one of them.
    fn offers(&self, path: &str) -> bool {
        self.tool(path).is_some()
            || path
                .split_once('.')
                .is_some_and(|(namespace, name)| !name.is_empty() && self.unlisted(namespace).is_some())
    }

    /// The OAuth-protected MCP servers this instance has not listed yet are
    /// listed with `owner`'s token when they have connected, so the policy
    /// decides on the real tools (and a search finds them).
    async fn prepare_for(&self, owner: &Principal) {
        for source in &self.sources {
            let Some(mcp) = self.unlisted(&source.namespace) else { continue };
            match mcp.list(owner).await {
                Ok(_) | Err(OwnerMcpError::Token(OwnerTokenError::NotConnected(_))) => {}
                Err(error) => {
                    let connection = source.connection.as_ref().ok();
                    let error =
                        connection.map_or_else(|| error.to_string(), |c| c.redactor().redact(&error.to_string()));
                    tracing::warn!(namespace = %source.namespace, %error, "tools could not be listed with the owner's token");
                }
            }
        }
    }

    async fn search_visible(&self, request: Value, visible: &PathFilter<'_>) -> ToolOutcome {
        let usage = "tools.search({query: string, namespace?: string, limit?: number, offset?: number})";
        self.search_tools(self::request(request, "query", usage)?, visible)
    }

    async fn describe(&self, request: Value) -> ToolOutcome {
        let request: DescribeRequest = self::request(request, "path", "tools.describe.tool({path: string})")?;
        let path = request.path.strip_prefix("tools.").unwrap_or(&request.path);
        match self.tool(path) {
            Some(tool) => tool
                .typescript()
                .map(Value::String)
                .map_err(|e| ToolError { code: "catalog_index_unreadable".into(), message: e.to_string() }),
            None => Err(self.unknown_tool(path)),
        }
    }
}

impl Catalog {
    /// A call to an OAuth-protected MCP server, with the caller's token: its
    /// tools listed first if this instance has not yet.
    async fn call_owner_mcp(
        &self,
        mcp: &OwnerMcp,
        path: &str,
        args: Value,
        ctx: &CallContext,
    ) -> Result<ToolSuccess, ToolError> {
        let Some(owner) = &ctx.owner else { return Err(no_caller(path)) };
        let namespace = path.split('.').next().unwrap_or(path);
        let Some(Source { connection: Ok(connection), .. }) = self.source(namespace) else {
            return Err(self.unknown_tool(path));
        };
        let listed_before = mcp.tools().is_some();
        let redact = |error: ToolError| ToolError { message: connection.redactor().redact(&error.message), ..error };
        mcp.list(owner).await.map_err(|e| redact(e.into_tool_error()))?;
        let Some(tool) = self.tool(path) else { return Err(self.unknown_tool(path)) };
        let Target::Mcp { name, input, .. } = &tool.target else {
            unreachable!("a source's tools have that source's target kind")
        };
        input.check(&args).map_err(|e| redact(invalid(e.to_string())))?;
        // Listed only now (listing at planning failed): the policy the call was
        // planned with did not know the tool, so only one that runs unasked goes on.
        if !listed_before && self.policy(path, &args) != Policy::Run {
            let message = format!(
                "tools.{path} needs a decision, and `{namespace}`'s tools were only listed as it was called; run the \
                 code again to be asked"
            );
            return Err(ToolError { code: "approval_required".into(), message });
        }
        let redactor = connection.redactor();
        match mcp.call(owner, name, args).await {
            Ok(data) => Ok(ToolSuccess::plain(redactor.redact_json(data))),
            Err(error) => Err(ToolError { message: redactor.redact(&error.message), ..error }),
        }
    }
}

impl HttpUpstream {
    /// What a call would do, for the person approving it: the method and the
    /// URL with the path filled in (without the source's credentials), or the
    /// operation's template when the arguments do not make a request.
    fn effect(&self, op: &HttpOperation, args: &Value) -> String {
        match self.request(op, args, false) {
            Ok((_, url)) => format!("{} {url}", op.method),
            Err(_) => format!("{} {}{}", op.method, self.base_url.as_str().trim_end_matches('/'), op.path),
        }
    }

    /// The request a call's arguments make: its parts, and its URL with the
    /// source's query credentials when `with_credentials` (never in what a
    /// person is shown). One function both validates a call before its
    /// policy is asked and builds it when it is made.
    fn request(
        &self,
        op: &HttpOperation,
        args: &Value,
        with_credentials: bool,
    ) -> Result<(openapi::RequestParts, Url), openapi::ArgumentError> {
        let parts = op.request(args)?;
        let credentials = if with_credentials { self.query.as_slice() } else { &[] };
        let url = parts.url(&self.base_url, credentials, &op.path)?;
        Ok((parts, url))
    }

    async fn call(
        &self,
        op: &HttpOperation,
        args: Value,
        effect: executor_core::Effect,
        ctx: &CallContext,
        redactor: &Redactor,
    ) -> Result<ToolSuccess, ToolError> {
        let (parts, url) = self.request(op, &args, true).map_err(|e| invalid(e.to_string()))?;
        let method = reqwest::Method::from_bytes(op.method.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let request = |outbound: &Outbound| {
            let mut request = outbound.request(method.clone(), url.clone());
            // A header the source's credentials set is theirs alone, never also the caller's.
            let credential =
                |name: &str| self.endpoint.headers.iter().any(|(own, _)| own.as_str().eq_ignore_ascii_case(name));
            for (name, value) in parts.headers.iter().filter(|(name, _)| !credential(name)) {
                request = request.header(name, value);
            }
            if effect == executor_core::Effect::Write {
                // The same for every attempt at this call, for upstreams that honour it.
                request = request.header("Idempotency-Key", ctx.idempotency_key());
            }
            if let Some(body) = &parts.body {
                request = request.header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_string());
            }
            request
        };
        let answer = self.endpoint.send(request, ctx.owner.as_ref()).await.map_err(send_error)?;
        let status = answer.status;
        if (200..300).contains(&status) {
            let text = String::from_utf8_lossy(&answer.body);
            let data = match text.trim().is_empty() {
                true => Value::Null,
                false => serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into_owned())),
            };
            return Ok(ToolSuccess { data, http_status: Some(status) });
        }
        let excerpt = redactor.excerpt(&answer.body, ERROR_EXCERPT_CHARS);
        let hint = match (status, answer.location) {
            (300..400, location) => {
                let location = location.map_or("none".into(), |l| redactor.excerpt(l.as_bytes(), ERROR_EXCERPT_CHARS));
                let rule = match op.method.as_str() {
                    "GET" | "HEAD" => "redirects to another origin, or more than 5, are not followed",
                    _ => "only GET and HEAD follow redirects: this request was sent once and not re-sent",
                };
                format!(" ({rule}; Location: {location})")
            }
            _ => String::new(),
        };
        Err(ToolError { code: format!("http_{status}"), message: format!("HTTP {status}{hint}: {excerpt}") })
    }
}

impl GraphqlUpstream {
    /// For the person approving a call: what runs where (the variables are the arguments shown).
    fn effect(&self, op: &GraphqlOperation) -> String {
        format!("GraphQL {} `{}` at {}", op.kind.as_str(), op.field, display_url(&self.url))
    }

    /// POST `{query, variables}` as JSON; `idempotency_key` for writes; as `owner` for a per-owner source.
    async fn post(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
        owner: Option<&executor_core::Principal>,
    ) -> Result<crate::outbound::Answer, SendError> {
        let body = body.to_string();
        self.endpoint
            .send(
                |outbound| {
                    let request = outbound
                        .request(reqwest::Method::POST, self.url.clone())
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .header(reqwest::header::ACCEPT, "application/graphql-response+json, application/json")
                        .body(body.clone());
                    match idempotency_key {
                        Some(key) => request.header("Idempotency-Key", key),
                        None => request,
                    }
                },
                owner,
            )
            .await
    }

    /// The schema, asked of the service with the source's credentials.
    async fn introspect(&self, redactor: &Redactor) -> Result<String, String> {
        let answer =
            self.post(&json!({"query": graphql::INTROSPECTION_QUERY}), None, None).await.map_err(|e| e.to_string())?;
        match answer.status {
            200..300 => Ok(String::from_utf8_lossy(&answer.body).into_owned()),
            status => Err(format!(
                "introspection answered HTTP {status}: {}",
                redactor.excerpt(&answer.body, ERROR_EXCERPT_CHARS)
            )),
        }
    }

    /// The field's data, or the messages of the answer's `errors`.
    async fn call(
        &self,
        op: &GraphqlOperation,
        args: Value,
        ctx: &CallContext,
        redactor: &Redactor,
    ) -> Result<ToolSuccess, ToolError> {
        let request = op.request(&args).map_err(|e| invalid(e.to_string()))?;
        let body = json!({"query": request.query, "variables": request.variables});
        let key = (op.kind == graphql::OperationKind::Mutation).then(|| ctx.idempotency_key());
        let answer = self.post(&body, key.as_deref(), ctx.owner.as_ref()).await.map_err(send_error)?;
        #[derive(Deserialize)]
        struct Response {
            data: Option<Value>,
            #[serde(default)]
            errors: Vec<graphql::GraphqlError>,
        }
        let status = answer.status;
        match serde_json::from_slice::<Response>(&answer.body) {
            // Services answer errors with 200 or 4xx alike; the messages are what the code needs.
            Ok(response) if !response.errors.is_empty() => {
                let message = redactor.excerpt(graphql::messages(&response.errors).as_bytes(), ERROR_EXCERPT_CHARS);
                Err(ToolError { code: "graphql_error".into(), message })
            }
            Ok(Response { data: Some(mut data), .. }) if (200..300).contains(&status) => {
                Ok(ToolSuccess::plain(data.get_mut(&op.field).map(Value::take).unwrap_or(Value::Null)))
            }
            _ => {
                let excerpt = redactor.excerpt(&answer.body, ERROR_EXCERPT_CHARS);
                match status {
                    200..300 => Err(ToolError {
                        code: "upstream_error".into(),
                        message: format!("the service answered without GraphQL `data` or `errors`: {excerpt}"),
                    }),
                    _ => {
                        Err(ToolError { code: format!("http_{status}"), message: format!("HTTP {status}: {excerpt}") })
                    }
                }
            }
        }
    }
}

impl Endpoint {
    /// Send the request `build` makes, with the source's credentials. With
    /// an OAuth token, a 401 gets one more attempt with a new token: the
    /// token may have been revoked before it expired.
    /// A per-owner source's requests carry `owner`'s token; without an owner
    /// (the spec, fetched at start) they carry none.
    async fn send(
        &self,
        build: impl Fn(&Outbound) -> reqwest::RequestBuilder,
        owner: Option<&executor_core::Principal>,
    ) -> Result<crate::outbound::Answer, SendError> {
        if let (Some((owners, source)), Some(owner)) = (&self.owners, owner) {
            let token = owners.access_token(owner, source).await?;
            return Ok(self.send_with(&build, Some(&token)).await?);
        }
        let Some(tokens) = &self.tokens else { return Ok(self.send_with(&build, None).await?) };
        let token = tokens.token().await?;
        let answer = self.send_with(&build, Some(&token)).await?;
        if answer.status != 401 {
            return Ok(answer);
        }
        tokens.rejected(&token).await;
        let token = tokens.token().await?;
        Ok(self.send_with(&build, Some(&token)).await?)
    }

    async fn send_with(
        &self,
        build: &impl Fn(&Outbound) -> reqwest::RequestBuilder,
        token: Option<&str>,
    ) -> Result<crate::outbound::Answer, OutboundError> {
        let mut request = build(&self.outbound);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(token) = token {
            // Checked to be valid in a header when it was issued.
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| OutboundError::Failed { detail: "the access token is not valid in a header".into() })?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        self.outbound.send(request).await
    }
}

fn send_error(error: SendError) -> ToolError {
    let code = match &error {
        SendError::Outbound(OutboundError::Refused { .. } | OutboundError::BadUrl { .. }) => "destination_refused",
        SendError::Outbound(OutboundError::Timeout { .. }) => "timeout",
        SendError::Outbound(OutboundError::TooLarge { .. }) => "response_too_large",
        SendError::Outbound(OutboundError::Failed { .. }) => "upstream_error",
        SendError::Token(_) | SendError::Owner(_) => "auth_error",
    };
    ToolError { code: code.into(), message: error.to_string() }
}

/// What connecting a source may use.
struct ConnectContext {
    outbound: Outbound,
    secrets: Secrets,
    clock: Arc<dyn Clock>,
    owners: Option<Arc<OwnerTokens>>,
    mcp_auth: Option<McpAuth>,
}

/// A source's tools and connection; an error is the reason it is
/// unavailable, redacted with everything the source's config and secrets hold.
/// `indexed`: its tools from the catalog index, so its document is not read.
async fn connect_source(
    config: &SourceConfig,
    context: &ConnectContext,
    indexed: Option<Vec<ToolDef>>,
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

/// A client secret, and the HTTP basic credentials a token request makes of
/// it (both parts form-encoded, RFC 6749 2.3.1), as text to redact.
fn add_client_secret(redactor: &mut Redactor, client_id: &str, secret: &str) {
    let encode = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    redactor.add(secret);
    redactor.add_basic(&encode(client_id), &encode(secret));
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
    indexed: Option<Vec<ToolDef>>,
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
            let tools = match indexed {
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
                Ok((mcp, tools)) => Ok((Upstream::Mcp(mcp), tools, None)),
                // Credentials of its own that the server refused are not MCP authorization's business.
                Err(McpConnectError::Unauthorized { challenges, .. }) if config.auth.is_none() => {
                    let challenge = BearerChallenge::from_headers(challenges.iter().map(String::as_str));
                    let discovered = mcp_authorization(config, &url, &challenge, context)
                        .await
                        .map_err(|why| fail("mcp authorization", why))?;
                    let (owners, about) = (discovered.owners.clone(), discovered.about.clone());
                    let (outbound, redactor) = (outbound.clone(), redactor.clone());
                    let mcp = OwnerMcp::new(&config.namespace, url, headers, outbound, owners, redactor, about);
                    Ok((Upstream::OwnerMcp(mcp), Vec::new(), Some(discovered)))
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
            discovered.issuer,
            crate::connections::TOKEN_KEY_ENV
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

/// The source's auth and headers, resolved; every secret value goes into `redactor`.
async fn credentials(config: &SourceConfig, secrets: &Secrets, redactor: &mut Redactor) -> Result<Credentials, String> {
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
