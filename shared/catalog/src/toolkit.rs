//! A toolkit's view of the tools: only the tools its patterns select, and
//! the stricter of the source's and the toolkit's action for each call.
//!
//! Outside the toolkit, search, describe and calls behave as if the tool did
//! not exist: the same `unknown_tool` answer a missing tool gets, and no
//! suggestion that could name a tool the toolkit hides.

use std::sync::Arc;

use async_trait::async_trait;
use executor_core::{Effect, PolicyAction, Principal, Toolkit, ToolkitName};
use executor_sandbox::{CallContext, PathFilter, Policy, Readiness, ToolError, ToolOutcome, ToolSuccess, Tools};
use serde_json::Value;

pub struct ToolkitView {
    toolkit: Toolkit,
    inner: Arc<dyn Tools>,
    /// The namespaces that may hold the toolkit's tools, for `execute`'s description.
    namespaces: Vec<String>,
}

impl ToolkitView {
    /// `toolkit` over `inner`, whose namespaces are `namespaces`.
    pub fn new(toolkit: Toolkit, inner: Arc<dyn Tools>, namespaces: &[String]) -> Self {
        let namespaces = namespaces.iter().filter(|n| toolkit.may_include_namespace(n)).cloned().collect();
        Self { toolkit, inner, namespaces }
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
            let source = action(&self.inner.policy(path, &Value::Null));
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

    fn policy(&self, path: &str, args: &Value) -> Policy {
        // Like an unknown path: the call then says the tool does not exist.
        if !self.toolkit.includes(path) {
            return Policy::run_by_default();
        }
        let source = self.inner.policy(path, args);
        let Some(own) = self.toolkit.tightens(path, action(&source)) else { return source };
        let name = &self.toolkit.name;
        let rule = own.id(name);
        match own.action {
            PolicyAction::Approve => {
                Policy::NeedsApproval { message: format!("tools.{path} needs approval: toolkit `{name}` {own}"), rule }
            }
            PolicyAction::Block => {
                Policy::Blocked { reason: format!("tools.{path} is blocked by toolkit `{name}` {own}"), rule }
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
        let (toolkit, namespaces) = (self.toolkit.clone(), self.namespaces.clone());
        Some(Arc::new(Self { toolkit, inner: wrap(self.inner.clone()), namespaces }))
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
            if let Some(own) = self.toolkit.tightens(&path, source) {
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
}
