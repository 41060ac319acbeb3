//! The tools a run's code sees, composed in one place: the caller's view
//! (or the view of the toolkit the execution started in), then the owner's
//! grants beneath the toolkit's rules, then the owner's connections.

use std::collections::HashMap;
use std::sync::Arc;

use executor_core::{ApprovalAction, Execution, GrantedBy, Principal, ToolkitName};
use executor_sandbox::{Connections, Tools};

use super::ResumeError;
use crate::application::grants::{Grants, RunGrants};

#[derive(Clone, Default)]
pub(super) struct RunTools {
    /// Each toolkit's view of the tools: a toolkit's execution continues in it,
    /// whichever endpoint or link decides it.
    pub(super) toolkits: Arc<HashMap<ToolkitName, Arc<dyn Tools>>>,
    /// Remembered approvals, applied to every run of their owner's code.
    pub(super) grants: Option<Arc<Grants>>,
    /// Per-owner OAuth connections: calls to a source the owner has not connected wait for it.
    pub(super) connections: Option<Arc<dyn Connections>>,
}

impl RunTools {
    /// The view a continuation of `execution` runs in, for a caller whose
    /// view is `caller`. A caller in a toolkit (its endpoint, or a key scoped
    /// to it) sees only that toolkit's executions; anyone else is not told
    /// they exist. An unscoped caller may decide a toolkit's execution, which
    /// then continues in the toolkit's view, never a wider one.
    pub(super) fn scope(&self, execution: &Execution, caller: Arc<dyn Tools>) -> Result<Arc<dyn Tools>, ResumeError> {
        let hidden = || ResumeError::NotFound(execution.id.clone());
        match (caller.toolkit(), &execution.toolkit) {
            (Some(scope), started) if started.as_ref() != Some(scope) => Err(hidden()),
            (Some(_), _) | (None, None) => Ok(caller),
            (None, Some(started)) => self.toolkits.get(started).cloned().ok_or_else(hidden),
        }
    }

    /// `view` as `owner`'s code sees it: with the owner's live grants
    /// applied, and the owner's connections to per-owner sources. The grants
    /// go beneath a toolkit's rules, so they loosen only what the sources
    /// ask, never the toolkit's own `approve`. With them, the grants as the
    /// run sees them (`None`: no grants apply here).
    pub(super) fn compose(&self, owner: &Principal, view: Arc<dyn Tools>) -> (Arc<dyn Tools>, Option<Arc<RunGrants>>) {
        let (tools, run) = match &self.grants {
            Some(grants) => {
                let endpoint = view.toolkit().cloned();
                let run = Arc::new(RunGrants::default());
                let grant = |inner: Arc<dyn Tools>| grants.tools_of_run(owner, endpoint.as_ref(), inner, run.clone());
                (view.beneath(&grant).unwrap_or_else(|| grant(view.clone())), Some(run))
            }
            None => (view, None),
        };
        let tools = match &self.connections {
            Some(connections) => crate::application::connected::tools_for(connections.clone(), owner, tools),
            None => tools,
        };
        (tools, run)
    }

    /// After a won claim: store the grant the person asked for (before the
    /// continuation runs, so its later calls of the same tool run at once).
    /// It may not undo the decision: if the store fails here, the approval
    /// applies once and later calls ask again.
    pub(super) async fn remember(&self, execution: &Execution, action: ApprovalAction, by: Option<GrantedBy>) {
        let (Some(grants), ApprovalAction::Accept, Some(by)) = (&self.grants, action, by) else { return };
        let pending = execution.journal.pending.iter().map(|call| call.path.as_str());
        if let Err(error) = grants.remember(&execution.owner, execution.toolkit.as_ref(), pending, by).await {
            tracing::warn!(executor.execution.id = execution.id.as_str(), %error, "the grant could not be stored");
        }
    }
}
