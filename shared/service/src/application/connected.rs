//! The tools as an owner's code sees them when sources connect per owner:
//! a call to a source the owner has not connected waits for the connection
//! (it pauses with `interaction.kind: "connect"`), and every call carries
//! its owner. The connect flow itself is the HTTP edge's (`http_edge::connect`).

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use executor_core::{Principal, ToolkitName};
use executor_sandbox::{
    CallContext, Connections, PathFilter, Policy, PolicyCall, ToolError, ToolOutcome, ToolSuccess, Tools, UiResource,
    UiResourceError,
};
use serde_json::Value;
use tokio::sync::OnceCell;

/// `tools` as `owner`'s code sees them: a call to a per-owner source the
/// owner has not connected waits for the connection; every call carries the owner.
pub(crate) fn tools_for(connections: Arc<dyn Connections>, owner: &Principal, tools: Arc<dyn Tools>) -> Arc<dyn Tools> {
    Arc::new(Connected { inner: tools, owner: owner.clone(), connections, connected: OnceCell::new() })
}

struct Connected {
    inner: Arc<dyn Tools>,
    owner: Principal,
    connections: Arc<dyn Connections>,
    /// The owner's connected sources, once a call of this run needed one.
    connected: OnceCell<HashSet<String>>,
}

impl Connected {
    fn with_owner(&self, ctx: &CallContext) -> CallContext {
        CallContext { owner: Some(self.owner.clone()), ..ctx.clone() }
    }
}

#[async_trait]
impl Tools for Connected {
    fn validate(&self, path: &str, args: &Value) -> Result<(), String> {
        self.inner.validate(path, args)
    }

    fn policy(&self, call: &PolicyCall<'_>) -> Policy {
        let path = call.path;
        // Only for a tool this view has: a hidden or unknown one answers as if it did not exist.
        if let Some(source) = self.connections.source_of(path)
            && self.inner.offers(path)
            && !self.connected.get().is_some_and(|sources| sources.contains(&source))
        {
            let message = format!(
                "tools.{path} uses your own `{source}` account, which you have not connected yet: connect it to \
                 continue (the call runs once you have)"
            );
            return Policy::NeedsConnect { source, message };
        }
        self.inner.policy(call)
    }

    fn effect(&self, path: &str) -> Option<executor_core::Effect> {
        self.inner.effect(path)
    }

    /// Read the owner's connections (and whatever the inner view reads). If
    /// they cannot be read, none counts: the call asks to connect.
    async fn prepare_approvals(&self) {
        self.connected
            .get_or_init(|| async {
                match self.connections.connected(&self.owner).await {
                    Ok(connected) => connected.into_iter().map(|c| c.source).collect(),
                    Err(error) => {
                        tracing::warn!(%error, "connections could not be read; calls that need one ask to connect");
                        HashSet::new()
                    }
                }
            })
            .await;
        self.inner.prepare_for(&self.owner).await;
        self.inner.prepare_approvals().await;
    }

    async fn call(&self, path: &str, args: Value, ctx: &CallContext) -> ToolOutcome {
        self.inner.call(path, args, &self.with_owner(ctx)).await
    }

    async fn call_with_status(&self, path: &str, args: Value, ctx: &CallContext) -> Result<ToolSuccess, ToolError> {
        self.inner.call_with_status(path, args, &self.with_owner(ctx)).await
    }

    /// A search or describe may be for tools only the owner's token lists.
    async fn search(&self, request: Value) -> ToolOutcome {
        self.inner.prepare_for(&self.owner).await;
        self.inner.search(request).await
    }

    async fn describe(&self, request: Value) -> ToolOutcome {
        self.inner.prepare_for(&self.owner).await;
        self.inner.describe(request).await
    }

    fn toolkit(&self) -> Option<&ToolkitName> {
        self.inner.toolkit()
    }

    fn offers(&self, path: &str) -> bool {
        self.inner.offers(path)
    }

    async fn search_visible(&self, request: Value, visible: &PathFilter<'_>) -> ToolOutcome {
        self.inner.prepare_for(&self.owner).await;
        self.inner.search_visible(request, visible).await
    }

    fn known_ui_resources(&self) -> Vec<UiResource> {
        self.inner.known_ui_resources()
    }

    async fn ui_resources(&self, owner: &Principal) -> Vec<UiResource> {
        self.inner.ui_resources(owner).await
    }

    async fn read_ui_resource(&self, owner: &Principal, uri: &str) -> Result<Value, UiResourceError> {
        self.inner.read_ui_resource(owner, uri).await
    }
}
