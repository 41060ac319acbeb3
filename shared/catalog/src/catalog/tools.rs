//! The catalog as the sandbox's `Tools`: argument checks and policy before a
//! call, the call itself (redacted on the way back), search and describe.

use async_trait::async_trait;
use executor_core::{Effect, PolicyAction, Principal};
use executor_sandbox::{
    CallContext, PathFilter, Policy, PolicyCall, Readiness, ToolError, ToolOutcome, ToolSuccess, Tools, UiResource,
    UiResourceError,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::approval_text;
use crate::catalog::tool_errors::{invalid, needs_connection, no_caller, unavailable};
use crate::catalog::{Catalog, Source, Upstream};
use crate::connections::OwnerTokenError;
use crate::mcp_source::{OwnerMcp, OwnerMcpError};
use crate::tool::{Target, ToolDef};

const DEFAULT_SEARCH_LIMIT: usize = 20;
const MAX_SEARCH_LIMIT: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    #[serde(default)]
    query: String,
    namespace: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
}

/// The longest `tools.search` query: far more than the few words a search
/// needs, and little enough that no query costs the host more than a few
/// milliseconds.
const MAX_QUERY_BYTES: usize = 2048;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeRequest {
    path: String,
}

/// `tools.search("x")` is taken as `tools.search({query: "x"})`, and likewise for describe.
fn request<T: for<'de> Deserialize<'de>>(request: Value, key: &str, usage: &str) -> Result<T, ToolError> {
    let request = match request {
        Value::String(text) => json!({ key: text }),
        other => other,
    };
    serde_json::from_value(request).map_err(|e| invalid(format!("{e}; usage: {usage}")))
}

/// A decision of the catalog's policy, and why, in words and as the audit trail's id.
struct Decided {
    action: PolicyAction,
    reason: String,
    id: String,
}

#[async_trait]
impl Tools for Catalog {
    /// The checks that making the call would make, so a call that could not be
    /// made fails before anyone is asked to approve it. Unknown paths and
    /// tools of unavailable sources pass: their call says why.
    fn validate(&self, path: &str, args: &Value) -> Result<(), String> {
        let Some(tool) = self.tool(path) else { return Ok(()) };
        let Some(connection) = self.source(&tool.namespace).and_then(Source::connection) else { return Ok(()) };
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

    fn policy(&self, call: &PolicyCall<'_>) -> Policy {
        let (path, args) = (call.path, call.args);
        // Unknown paths run: the call itself then explains what exists. In a
        // source not connected yet, the call is decided again if it connects
        // meanwhile (`decide_again`).
        let Some(tool) = self.tool(path) else {
            let namespace = path.split('.').next().unwrap_or(path);
            if let Some(retrying) = self.source(namespace).and_then(Source::retrying).filter(|r| r.healed().is_none()) {
                retrying.planned_blind(path);
            }
            return Policy::run_by_default();
        };
        let Some(source) = self.source(&tool.namespace) else { return Policy::run_by_default() };
        let decision = self.decide(source, tool, call);
        let rule = decision.id;
        let what = match &tool.target {
            Target::Http(op) => format!("{} {}", op.method, op.path),
            Target::Mcp { name, .. } => format!("MCP tool `{name}`"),
            Target::Graphql(op) => format!("GraphQL {} `{}`", op.kind.as_str(), op.field),
        };
        match decision.action {
            PolicyAction::Run => Policy::run_by(rule),
            PolicyAction::Approve => {
                let headline = format!("tools.{path} ({what}) needs approval: {}", decision.reason);
                // A tool of an unavailable source: its call explains why.
                let Some(connection) = source.connection() else {
                    return Policy::NeedsApproval { message: headline, rule };
                };
                let effect = match (&tool.target, &connection.upstream) {
                    (Target::Http(op), Upstream::OpenApi(http)) => http.effect(op, args),
                    (Target::Mcp { name, hints, .. }, _) => approval_text::mcp_effect(name, hints),
                    (Target::Graphql(op), Upstream::Graphql(upstream)) => upstream.effect(op),
                    _ => unreachable!("a source's tools have that source's target kind"),
                };
                let redactor = connection.redactor();
                let message = approval_text::approval_message(&headline, &tool.description, &effect, args, &redactor);
                Policy::NeedsApproval { message, rule }
            }
            PolicyAction::Block => {
                Policy::Blocked { reason: format!("tools.{path} ({what}) is blocked by {}", decision.reason), rule }
            }
        }
    }

    fn effect(&self, path: &str) -> Option<Effect> {
        self.tool(path).map(|tool| tool.effect)
    }

    async fn call(&self, path: &str, args: Value, ctx: &CallContext) -> ToolOutcome {
        self.call_with_status(path, args, ctx).await.map(|success| success.data)
    }

    /// OpenAPI results carry their status: the code sees `{ok:true, data, http:{status}}`.
    async fn call_with_status(&self, path: &str, args: Value, ctx: &CallContext) -> Result<ToolSuccess, ToolError> {
        let namespace = path.split('.').next().unwrap_or(path);
        // Its first use once a retry is due.
        self.heal_namespace(namespace).await;
        self.decide_again(&ctx.policy_call(path, &args))?;
        if let Some(mcp) = self.owner_mcp(namespace) {
            return self.call_owner_mcp(mcp, path, args, ctx).await;
        }
        let Some(tool) = self.tool(path) else { return Err(self.unknown_tool(path)) };
        let Some(connection) = self.source(&tool.namespace).and_then(Source::connection) else {
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

    fn readiness(&self) -> Readiness {
        self.source_readiness()
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
                    let connection = source.connection();
                    let error =
                        connection.map_or_else(|| error.to_string(), |c| c.redactor().redact(&error.to_string()));
                    tracing::warn!(namespace = %source.namespace, %error, "tools could not be listed with the owner's token");
                }
            }
        }
    }

    async fn search_visible(&self, request: Value, visible: &PathFilter<'_>) -> ToolOutcome {
        let usage = "tools.search({query: string, namespace?: string, limit?: number, offset?: number})";
        let request: SearchRequest = self::request(request, "query", usage)?;
        // A search uses every source it searches: those due a retry get it first.
        match &request.namespace {
            Some(namespace) => self.heal_namespace(namespace).await,
            None => drop(self.heal().await),
        }
        self.search_tools(request, visible)
    }

    async fn describe(&self, request: Value) -> ToolOutcome {
        let request: DescribeRequest = self::request(request, "path", "tools.describe.tool({path: string})")?;
        let path = request.path.strip_prefix("tools.").unwrap_or(&request.path);
        self.heal_namespace(path.split('.').next().unwrap_or(path)).await;
        match self.tool(path) {
            Some(tool) => tool
                .typescript()
                .map(Value::String)
                .map_err(|e| ToolError { code: "catalog_index_unreadable".into(), message: e.to_string() }),
            None => Err(self.unknown_tool(path)),
        }
    }

    fn known_ui_resources(&self) -> Vec<UiResource> {
        self.known_ui()
    }

    async fn ui_resources(&self, owner: &Principal) -> Vec<UiResource> {
        self.list_ui(owner).await
    }

    async fn read_ui_resource(&self, owner: &Principal, uri: &str) -> Result<Value, UiResourceError> {
        self.read_ui(owner, uri).await
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
        let Some(connection) = self.source(namespace).and_then(Source::connection) else {
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
        if !listed_before && !matches!(self.policy(&ctx.policy_call(path, &args)), Policy::Run { .. }) {
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

    /// A call planned while its source was unavailable, made once the source
    /// has connected (by this call or meanwhile): it was planned without the
    /// tool, so it is decided now, before it is made. Only one that runs
    /// unasked goes on; the others are run again to be decided as usual (the
    /// views above this one, a toolkit's rules, applied by path at planning).
    fn decide_again(&self, call: &PolicyCall<'_>) -> Result<(), ToolError> {
        let (path, args) = (call.path, call.args);
        let namespace = path.split('.').next().unwrap_or(path);
        let Some(retrying) = self.source(namespace).and_then(Source::retrying) else { return Ok(()) };
        // Taken connected or not: a call of a source still unavailable is answered so.
        if !retrying.take_blind(path) || retrying.healed().is_none() {
            return Ok(());
        }
        self.validate(path, args).map_err(invalid)?;
        match self.policy(call) {
            Policy::Run { .. } => Ok(()),
            Policy::Blocked { reason, .. } => Err(ToolError { code: "blocked".into(), message: reason }),
            Policy::NeedsApproval { .. } | Policy::NeedsConnect { .. } => {
                let message = format!(
                    "tools.{path} needs a decision, and `{namespace}` connected only as it was called (it was \
                     unavailable when the call was planned); run the code again to be asked"
                );
                Err(ToolError { code: "approval_required".into(), message })
            }
        }
    }

    /// What the policy does with `call` of `tool` in `source`: the Cedar
    /// policies when configured, else the source's rules and default.
    fn decide(&self, source: &Source, tool: &ToolDef, call: &PolicyCall<'_>) -> Decided {
        if let Some(cedar) = &self.cedar {
            let decision = cedar.decide(call, &tool.cedar_facts(source.kind));
            return Decided { action: decision.action, reason: decision.reason(), id: decision.id() };
        }
        let decision = source.policy.decide(&tool.path, tool.effect);
        Decided {
            action: decision.action,
            reason: decision.reason.to_string(),
            id: decision.reason.id(&tool.namespace),
        }
    }

    /// What the policy does with a call of `tool` before any argument or
    /// caller is known (toolkits tighten it in their view; `approval` of a search item).
    fn approval(&self, tool: &ToolDef) -> PolicyAction {
        let no_args = Value::Object(Default::default());
        self.source(&tool.namespace).map_or(PolicyAction::Run, |source| {
            self.decide(source, tool, &PolicyCall::new(&tool.path, &no_args)).action
        })
    }

    /// `tools.search`: the matching tools `visible` lets through, a page of
    /// them, and the namespaces searched whose tools are not known.
    fn search_tools(&self, request: SearchRequest, visible: &PathFilter<'_>) -> Result<Value, ToolError> {
        // Ranking costs the host about 8 µs a word, outside the sandbox's CPU limit.
        if request.query.len() > MAX_QUERY_BYTES {
            let size = request.query.len();
            return Err(invalid(format!(
                "the query is {size} bytes, over the {MAX_QUERY_BYTES}-byte limit; search with a few words of what \
                 the tool does"
            )));
        }
        if let Some(namespace) = &request.namespace {
            match self.source(namespace) {
                None => {
                    let known: Vec<&str> = self.sources.iter().map(|s| s.namespace.as_str()).collect();
                    return Err(invalid(format!("no namespace `{namespace}`; namespaces: {}", known.join(", "))));
                }
                Some(source) => {
                    if let Some(reason) = source.unavailable() {
                        return Err(unavailable(namespace, &reason));
                    }
                }
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
                let mut item = json!({
                    "path": tool.path,
                    "description": tool.summary,
                    "namespace": tool.namespace,
                    // `read` or `write`; `run`, `approve` or `block`.
                    "kind": tool.effect,
                    "approval": self.approval(tool),
                });
                // An MCP Apps tool's `_meta.ui`, as its server sent it.
                if let Some(ui) = tool.ui() {
                    item["ui"] = Value::Object(ui.raw().clone());
                }
                item
            })
            .collect();
        // Sources that failed to load are named with the reason, so a search
        // that finds nothing there never reads as "no such tools".
        let unavailable: Vec<Value> = self
            .sources
            .iter()
            .filter(|s| request.namespace.as_ref().is_none_or(|n| *n == s.namespace))
            .filter_map(|s| Some(json!({"namespace": s.namespace, "kind": s.kind, "reason": s.unavailable()?})))
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
