//! The catalog: every configured source's tools under one roof, implementing
//! the sandbox's `Tools` (policy, call by path, search, describe).
//!
//! Sources are connected once per process, concurrently. A source that fails
//! (spec unreachable, handshake refused, secret missing) does not take the
//! others down: it is listed by [`Catalog::namespaces`] with the reason, and
//! calls and searches in its namespace answer with that reason, never with a
//! silent "0 tools". It is retried with backoff (`availability.rs`), in the
//! background where the host runs one ([`Catalog::heal_in_background`]) and
//! on its first use once a retry is due; once it connects, its tools are
//! searched, described and called like the others'.
//!
//! Every text that leaves a source (results, error messages, the reason a
//! source is unavailable) passes its [`Redactor`] in this module (`tools.rs`,
//! `connect.rs`), in one place per kind.
//!
//! This file holds the catalog itself (its tools by path, its sources and
//! what they are asked); the rest is one job a file: `connect.rs` connects
//! the sources, with `credentials.rs` resolving their auth; `availability.rs`
//! retries the sources that failed and says how each stands; `tools.rs` is
//! the sandbox's `Tools`; `http_upstream.rs` and `graphql_upstream.rs` call
//! OpenAPI and GraphQL sources through `endpoint.rs` (MCP sources are
//! `mcp_source.rs`); `tool_errors.rs` words the errors a call answers with;
//! `ui_resources.rs` finds and reads the MCP servers' `ui://` resources (MCP Apps).

mod availability;
mod connect;
mod credentials;
mod endpoint;
mod graphql_upstream;
mod http_upstream;
mod tool_errors;
mod tools;
mod ui_resources;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use executor_core::{ClientSite, SourcePolicy, Toolkit, ToolkitName};
use executor_sandbox::{ToolError, Tools};
use serde::Serialize;

pub use crate::catalog::availability::Healing;
use crate::catalog::availability::Retrying;
use crate::catalog::connect::ConnectContext;
use crate::catalog::graphql_upstream::GraphqlUpstream;
use crate::catalog::http_upstream::HttpUpstream;
use crate::catalog::tool_errors::{needs_connection, unavailable};
use crate::cedar::{CedarDecision, CedarError, CedarPolicies};
use crate::config::ConfigError;
use crate::connections::{OwnerTokens, TokenKey};
use crate::mcp_source::{McpUpstream, OwnerMcp};
use crate::oauth::TokenCache;
use crate::outbound::OutboundError;
use crate::redact::Redactor;
use crate::search::{SearchIndex, search_parts};
use crate::tool::ToolDef;
use crate::tool::indexed::IndexError;
use crate::toolkit::ToolkitView;

/// How much of the reason a source is unavailable `execute`'s description shows.
const LABEL_REASON_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot set up the outbound HTTP client: {0}")]
    Outbound(#[from] OutboundError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Cedar(#[from] CedarError),
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
    /// What connecting a source uses, kept for the retries of those that failed.
    context: ConnectContext,
    /// `[policy] cedar`: decides every call in place of the sources' rules.
    cedar: Option<Arc<CedarPolicies>>,
    /// Each toolkit's own Cedar policies, applied by its view.
    toolkit_cedar: HashMap<ToolkitName, Arc<CedarPolicies>>,
    /// The `ui://` URIs more than one MCP source names, once logged (`ui_resources.rs`).
    ui_ambiguity_logged: Mutex<HashSet<String>>,
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
    state: SourceState,
}

enum SourceState {
    /// Connected with the catalog.
    Connected(Box<Connection>),
    /// Failed then, and retried until it connects (`availability.rs`).
    Retrying(Box<Retrying>),
}

impl Source {
    /// Its connection, once it has one.
    fn connection(&self) -> Option<&Connection> {
        match &self.state {
            SourceState::Connected(connection) => Some(connection.as_ref()),
            SourceState::Retrying(retrying) => retrying.healed().map(|healed| &healed.connection),
        }
    }

    /// A source that failed with the catalog, connected or not since.
    fn retrying(&self) -> Option<&Retrying> {
        match &self.state {
            SourceState::Retrying(retrying) => Some(retrying),
            SourceState::Connected(_) => None,
        }
    }

    /// Why it is unavailable (redacted), while it is.
    fn unavailable(&self) -> Option<String> {
        self.retrying().and_then(Retrying::reason)
    }
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
    Mcp(Box<McpUpstream>),
    /// An OAuth-protected MCP server: each owner's calls carry their token.
    OwnerMcp(Box<OwnerMcp>),
    Graphql(GraphqlUpstream),
}

impl Catalog {
    /// Per-owner connections to its `oauth2` sources, when it has any: the
    /// host's connect flow and `/api/connections` go through them.
    pub fn connections(&self) -> Option<Arc<dyn executor_sandbox::Connections>> {
        self.owners.clone().map(|owners| owners as Arc<dyn executor_sandbox::Connections>)
    }

    /// A namespace as `execute`'s description lists it: its name, and
    /// `(unavailable: <reason>)` when its source failed to load.
    pub fn label(&self, namespace: &str) -> String {
        match self.source(namespace).and_then(Source::unavailable) {
            Some(reason) => {
                format!("{namespace} (unavailable: {})", executor_core::text::cut_text(&reason, LABEL_REASON_CHARS))
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
                tools: match (self.owner_mcp(&s.namespace), s.retrying().and_then(Retrying::healed)) {
                    (Some(mcp), _) => mcp.tools().map_or(0, |listed| listed.tools.len()),
                    (None, Some(healed)) => healed.tools.len(),
                    (None, None) => self.tools.iter().filter(|t| t.namespace == s.namespace).count(),
                },
                error: s.unavailable(),
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
                let mut view = ToolkitView::new(toolkit.clone(), inner.clone(), &namespaces);
                if let Some(policies) = catalog.toolkit_cedar.get(&toolkit.name) {
                    view = view.with_cedar(policies.clone(), catalog.clone());
                }
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
        let source = self.source(namespace)?;
        if let Some(tool) = source.retrying().and_then(Retrying::healed).and_then(|healed| healed.tool(path)) {
            return Some(tool);
        }
        self.owner_mcp(namespace)?.tools()?.tools.iter().find(|t| t.path == path)
    }

    fn source(&self, namespace: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.namespace == namespace)
    }

    /// The OAuth-protected MCP server of `namespace`, when it is one.
    fn owner_mcp(&self, namespace: &str) -> Option<&OwnerMcp> {
        match self.source(namespace).and_then(Source::connection) {
            Some(Connection { upstream: Upstream::OwnerMcp(mcp), .. }) => Some(mcp),
            _ => None,
        }
    }

    /// The OAuth-protected MCP server of `namespace` while this instance has not listed its tools.
    fn unlisted(&self, namespace: &str) -> Option<&OwnerMcp> {
        self.owner_mcp(namespace).filter(|mcp| mcp.tools().is_none())
    }

    /// The search parts: every tool known at start, each source's connected
    /// since, and each OAuth-protected MCP server's once listed.
    fn search(&self, query: &str, include: impl Fn(&ToolDef) -> bool) -> Vec<&ToolDef> {
        let index = self.index.get_or_init(|| SearchIndex::build(&self.tools));
        let mut parts = vec![(index, self.tools.as_slice())];
        parts.extend(
            self.sources
                .iter()
                .filter_map(|s| s.retrying()?.healed())
                .map(|healed| (&healed.index, healed.tools.as_slice())),
        );
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
        if let Some(reason) = self.source(namespace).and_then(Source::unavailable) {
            return unavailable(namespace, &reason);
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

    /// The Cedar policies read at start: the top-level set and each
    /// toolkit's, validated against the schema and the tools they name.
    fn load_policies(&mut self, config: &crate::CatalogConfig) -> Result<(), CedarError> {
        let load = |source| CedarPolicies::load(source, &|path| self.knows_tool(path)).map(Arc::new);
        let cedar = config.cedar.as_ref().map(load).transpose()?;
        let toolkits = config.toolkit_cedar.iter().map(|(name, source)| Ok((name.clone(), load(source)?)));
        let toolkit_cedar = toolkits.collect::<Result<_, CedarError>>()?;
        (self.cedar, self.toolkit_cedar) = (cedar, toolkit_cedar);
        Ok(())
    }

    /// Whether a tool exists at `path`; `None` when its source cannot tell
    /// yet (unavailable, or its tools listed only to a connected owner).
    fn knows_tool(&self, path: &str) -> Option<bool> {
        let namespace = path.split('.').next().unwrap_or(path);
        let source = self.source(namespace)?;
        if source.unavailable().is_some() || self.unlisted(namespace).is_some() {
            return None;
        }
        Some(self.tool(path).is_some())
    }

    /// What `policies` say of `call`; `None` for a tool the catalog does not have.
    pub(crate) fn cedar_decide(
        &self,
        policies: &CedarPolicies,
        call: &executor_sandbox::PolicyCall<'_>,
    ) -> Option<CedarDecision> {
        let tool = self.tool(call.path)?;
        let kind = self.source(&tool.namespace).map_or("", |s| s.kind);
        Some(policies.decide(call, &tool.cedar_facts(kind)))
    }

    /// The catalog's schema for Cedar policies (`executor policy schema`).
    pub fn cedar_schema(&self) -> String {
        let namespaces: Vec<(String, &str, usize)> =
            self.namespaces().into_iter().map(|n| (n.namespace, n.kind, n.tools)).collect();
        crate::cedar::schema_text(&namespaces)
    }

    /// Every tool's path known at start, in order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.path.as_str())
    }
}
