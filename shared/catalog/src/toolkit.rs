//! A toolkit's view of the tools: only the tools its patterns select, and
//! the stricter of the source's and the toolkit's action for each call.
//!
//! Outside the toolkit, search, describe and calls behave as if the tool did
//! not exist: the same `unknown_tool` answer a missing tool gets, and no
//! suggestion that could name a tool the toolkit hides.

use std::sync::Arc;

use async_trait::async_trait;
use executor_core::{Effect, PolicyAction, Principal, Toolkit, ToolkitName, strictness};
use executor_sandbox::{
    CallContext, PathFilter, Policy, PolicyCall, Readiness, ToolError, ToolOutcome, ToolSuccess, Tools, UiResource,
    UiResourceError,
};

use crate::Catalog;
use crate::cedar::{CedarPolicies, NO_POLICY_ID};
use serde_json::Value;

pub struct ToolkitView {
    toolkit: Toolkit,
    inner: Arc<dyn Tools>,
    /// The namespaces that may hold the toolkit's tools, for `execute`'s description.
    namespaces: Vec<String>,
    /// The toolkit's Cedar policies, and the catalog that says what each tool is.
    cedar: Option<(Arc<CedarPolicies>, Arc<Catalog>)>,
}

impl ToolkitView {
    /// `toolkit` over `inner`, whose namespaces are `namespaces`.
    pub fn new(toolkit: Toolkit, inner: Arc<dyn Tools>, namespaces: &[String]) -> Self {
        let namespaces = namespaces.iter().filter(|n| toolkit.may_include_namespace(n)).cloned().collect();
        Self { toolkit, inner, namespaces, cedar: None }
    }

    /// With the toolkit's own Cedar `policies`, over the tools of `catalog`.
    pub fn with_cedar(self, policies: Arc<CedarPolicies>, catalog: Arc<Catalog>) -> Self {
        Self { cedar: Some((policies, catalog)), ..self }
    }

    pub fn name(&self) -> &ToolkitName {
        &self.toolkit.name
    }

    /// The namespaces `execute`'s description lists on the toolkit's endpoint.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// The toolkit's rules that would loosen a source's decision for one of
    /// `paths` and so have no effect, one line each, for the start-up warning.
    pub fn loosening<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut warnings: Vec<String> = Vec::new();
        for path in paths.into_iter().filter(|p| self.toolkit.includes(p)) {
            let source = action(&self.inner.policy(&PolicyCall::new(path, &Value::Null)));
            let Some(own) = self.toolkit.would_loosen(path, source) else { continue };
            let prefix = format!("toolkit `{}` {own} ", self.toolkit.name);
            // One line per rule: the first tool it would loosen is example enough.
            if warnings.iter().any(|w| w.starts_with(&prefix)) {
                continue;
            }
            warnings.push(format!(
                "{prefix}says `{}` for tools.{path}, looser than its source's `{}`: a toolkit can only tighten, so \
                 this has no effect",
                name(own.action),
                name(source)
            ));
        }
        warnings
    }

    /// The toolkit's own decision on `call` (its rules, then its Cedar
    /// policies), when it is stricter than `source`; `None` when that stands.
    fn tightens(&self, call: &PolicyCall<'_>, source: PolicyAction) -> Option<Tightened> {
        let name = &self.toolkit.name;
        let rules = self.toolkit.tightens(call.path, source);
        let mut own = rules.map(|d| Tightened { action: d.action, why: d.to_string(), rule: d.id(name) });
        if let Some((policies, catalog)) = &self.cedar
            && let Some(decision) = catalog.cedar_decide(policies, call)
            && strictness(decision.action) > strictness(own.as_ref().map_or(source, |own| own.action))
        {
            let rule = match decision.policies.is_empty() {
                true => format!("toolkit:{name}:{NO_POLICY_ID}"),
                false => decision.id(),
            };
            own = Some(Tightened { action: decision.action, why: decision.reason(), rule });
        }
        own
    }

    /// What a tool outside the toolkit, or missing, looks like.
    fn unknown(path: &str) -> ToolError {
        ToolError {
            code: "unknown_tool".into(),
            message: format!("no tool `{path}`; find tools with tools.search({{query}})"),
        }
    }

    /// The inner answer, with a missing tool answered as [`Self::unknown`] (the
    /// inner one may suggest a tool outside the toolkit).
    fn hide<T>(path: &str, outcome: Result<T, ToolError>) -> Result<T, ToolError> {
        outcome.map_err(|error| if error.code == "unknown_tool" { Self::unknown(path) } else { error })
    }
}

impl ToolkitView {
    /// MCP Apps: a UI resource is the toolkit's when one of its tools links
    /// it, or, linked by no tool, when a source the toolkit may include lists
    /// it. The linking tools outside the toolkit are not named.
    fn ui_visible(&self, mut resource: UiResource) -> Option<UiResource> {
        if !self.namespaces.contains(&resource.namespace) {
            return None;
        }
        if resource.tools.is_empty() {
            return Some(resource);
        }
        resource.tools.retain(|path| self.toolkit.includes(path));
        (!resource.tools.is_empty()).then_some(resource)
    }
}

/// A toolkit's decision stricter than its source's: why, and the id of what decided.
struct Tightened {
    action: PolicyAction,
    why: String,
    rule: String,
}

fn action(policy: &Policy) -> PolicyAction {
    match policy {
        Policy::Run { .. } => PolicyAction::Run,
        // Either waits for a person before it runs.
        Policy::NeedsApproval { .. } | Policy::NeedsConnect { .. } => PolicyAction::Approve,
        Policy::Blocked { .. } => PolicyAction::Block,
    }
}

fn name(action: PolicyAction) -> &'static str {
    match action {
        PolicyAction::Run => "run",
        PolicyAction::Approve => "approve",
        PolicyAction::Block => "block",
    }
}

#[async_trait]
impl Tools for ToolkitView {
    /// The inner view's check, for the toolkit's tools; any other passes, like
    /// an unknown path (the call then says the tool does not exist).
    fn validate(&self, path: &str, args: &Value) -> Result<(), String> {
        match self.toolkit.includes(path) {
            true => self.inner.validate(path, args),
            false => Ok(()),
        }
    }

    fn policy(&self, call: &PolicyCall<'_>) -> Policy {
        let path = call.path;
        // Like an unknown path: the call then says the tool does not exist.
        if !self.toolkit.includes(path) {
            return Policy::run_by_default();
        }
        let call = PolicyCall { toolkit: Some(&self.toolkit.name), ..*call };
        let source = self.inner.policy(&call);
        let name = &self.toolkit.name;
        let Some(Tightened { action, why, rule }) = self.tightens(&call, action(&source)) else { return source };
        match action {
            PolicyAction::Approve => {
                Policy::NeedsApproval { message: format!("tools.{path} needs approval: toolkit `{name}` {why}"), rule }
            }
            PolicyAction::Block => {
                Policy::Blocked { reason: format!("tools.{path} is blocked by toolkit `{name}` {why}"), rule }
            }
            PolicyAction::Run => unreachable!("run is never stricter than another action"),
        }
    }

    fn effect(&self, path: &str) -> Option<Effect> {
        self.toolkit.includes(path).then(|| self.inner.effect(path)).flatten()
    }

    async fn prepare_for(&self, owner: &Principal) {
        self.inner.prepare_for(owner).await;
    }

    async fn call(&self, path: &str, args: Value, ctx: &CallContext) -> ToolOutcome {
        self.call_with_status(path, args, ctx).await.map(|success| success.data)
    }

    async fn call_with_status(&self, path: &str, args: Value, ctx: &CallContext) -> Result<ToolSuccess, ToolError> {
        if !self.toolkit.includes(path) {
            return Err(Self::unknown(path));
        }
        Self::hide(path, self.inner.call_with_status(path, args, ctx).await)
    }

    async fn search(&self, request: Value) -> ToolOutcome {
        if let Some(namespace) = request.get("namespace").and_then(Value::as_str)
            && !self.namespaces.iter().any(|n| n == namespace)
        {
            let message = format!("no namespace `{namespace}`; namespaces: {}", self.namespaces.join(", "));
            return Err(ToolError { code: "invalid_arguments".into(), message });
        }
        self.search_visible(request, &|_| true).await
    }

    async fn describe(&self, request: Value) -> ToolOutcome {
        let path = match &request {
            Value::String(path) => Some(path.as_str()),
            other => other.get("path").and_then(Value::as_str),
        };
        match path.map(|p| p.strip_prefix("tools.").unwrap_or(p)) {
            Some(path) if !self.toolkit.includes(path) => Err(Self::unknown(path)),
            Some(path) => Self::hide(path, self.inner.describe(request.clone()).await),
            // Malformed: the inner usage message says what is expected.
            None => self.inner.describe(request).await,
        }
    }

    fn toolkit(&self) -> Option<&ToolkitName> {
        Some(&self.toolkit.name)
    }

    /// The toolkit's rules stay on top: what `wrap` loosens (the owner's
    /// grants) never loosens the toolkit's own `approve` or `block`.
    fn beneath(&self, wrap: &dyn Fn(Arc<dyn Tools>) -> Arc<dyn Tools>) -> Option<Arc<dyn Tools>> {
        let (toolkit, namespaces, cedar) = (self.toolkit.clone(), self.namespaces.clone(), self.cedar.clone());
        Some(Arc::new(Self { toolkit, inner: wrap(self.inner.clone()), namespaces, cedar }))
    }

    async fn prepare_approvals(&self) {
        self.inner.prepare_approvals().await;
    }

    fn offers(&self, path: &str) -> bool {
        self.toolkit.includes(path) && self.inner.offers(path)
    }

    /// The sources that could hold the toolkit's tools.
    fn readiness(&self) -> Readiness {
        let mut readiness = self.inner.readiness();
        readiness.sources.retain(|namespace, _| self.namespaces.iter().any(|n| n == namespace));
        readiness
    }

    async fn search_visible(&self, request: Value, visible: &PathFilter<'_>) -> ToolOutcome {
        let mut found =
            self.inner.search_visible(request, &|path| self.toolkit.includes(path) && visible(path)).await?;
        // What a call would do here: the stricter of its source's action and the toolkit's.
        for item in found["items"].as_array_mut().into_iter().flatten() {
            let (Some(path), Ok(source)) =
                (item["path"].as_str().map(str::to_owned), serde_json::from_value(item["approval"].clone()))
            else {
                continue;
            };
            let no_args = Value::Object(Default::default());
            let call = PolicyCall { toolkit: Some(&self.toolkit.name), ..PolicyCall::new(&path, &no_args) };
            if let Some(own) = self.tightens(&call, source) {
                item["approval"] = name(own.action).into();
            }
        }
        // Only the sources that could hold the toolkit's tools are its business
        // (unavailable ones, and those waiting for a connection to list their tools).
        for key in ["unavailable", "needsConnection"] {
            if let Some(Value::Array(sources)) = found.get_mut(key) {
                sources.retain(|u| u["namespace"].as_str().is_some_and(|n| self.namespaces.iter().any(|m| m == n)));
                if sources.is_empty()
                    && let Some(object) = found.as_object_mut()
                {
                    object.remove(key);
                }
            }
        }
        Ok(found)
    }

    fn known_ui_resources(&self) -> Vec<UiResource> {
        self.inner.known_ui_resources().into_iter().filter_map(|r| self.ui_visible(r)).collect()
    }

    async fn ui_resources(&self, owner: &Principal) -> Vec<UiResource> {
        self.inner.ui_resources(owner).await.into_iter().filter_map(|r| self.ui_visible(r)).collect()
    }

    /// Only a resource of the toolkit's is read; any other is not found, as a
    /// tool outside the toolkit is unknown.
    async fn read_ui_resource(&self, owner: &Principal, uri: &str) -> Result<Value, UiResourceError> {
        // Known covers the resources of a per-owner source `owner` has not connected (the read says so).
        let mut visible = self.known_ui_resources().into_iter().any(|r| r.uri == uri);
        if !visible {
            visible = self.ui_resources(owner).await.into_iter().any(|r| r.uri == uri);
        }
        match visible {
            true => self.inner.read_ui_resource(owner, uri).await,
            false => Err(UiResourceError::NotFound { uri: uri.to_owned() }),
        }
    }
}
