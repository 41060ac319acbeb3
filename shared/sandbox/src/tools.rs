//! What the sandbox needs from the outside world: the tools the code may call
//! and the policy that says which calls need a decision. The catalog implements it.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use executor_core::{DEFAULT_RULE, Effect, ExecutionId, Principal, Timestamp, ToolkitName};
use serde_json::Value;

use crate::ui_resources::{UiResource, UiResourceError};

/// Reserved paths handled by [`Tools::search`] and [`Tools::describe`].
pub const SEARCH_PATH: &str = "search";
pub const DESCRIBE_PATH: &str = "describe.tool";

/// Which tool paths a view shows (a toolkit's patterns).
pub type PathFilter<'a> = dyn for<'p> Fn(&'p str) -> bool + Send + Sync + 'a;

/// What lets a call run without anyone being asked, as the audit trail names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowance {
    /// The policy rule with this id (`default`: reads run when nothing else is said).
    Rule(String),
    /// The owner's "always allow" grant with this id.
    Grant(String),
}

/// Whether a call may run, and which rule (or grant) says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    Run {
        by: Allowance,
    },
    /// Pause until a person or the model decides; `message` is what they are
    /// asked, `rule` the id of the rule that asks.
    NeedsApproval {
        message: String,
        rule: String,
    },
    /// Pause until the owner connects `source` (a per-owner OAuth source they
    /// have no tokens for); `message` says so.
    NeedsConnect {
        source: String,
        message: String,
    },
    /// Never run; the code gets `{ok:false, error:{code:"blocked"}}`.
    Blocked {
        reason: String,
        rule: String,
    },
}

impl Policy {
    /// Runs, by the rule `rule`.
    pub fn run_by(rule: impl Into<String>) -> Self {
        Self::Run { by: Allowance::Rule(rule.into()) }
    }

    /// Runs because nothing says otherwise (unknown paths, reads by default).
    pub fn run_by_default() -> Self {
        Self::run_by(DEFAULT_RULE)
    }
}

/// A tool's failure as the code sees it: `{ok:false, error:{code, message}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: String,
    pub message: String,
}

/// `Ok(data)` becomes `{ok:true, data}` in the code.
pub type ToolOutcome = Result<Value, ToolError>;

/// A successful call with what the code sees besides its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSuccess {
    pub data: Value,
    /// For HTTP tools: the response status, delivered as `{ok:true, data, http:{status}}`.
    pub http_status: Option<u16>,
}

impl ToolSuccess {
    /// Data and nothing else: `{ok:true, data}`.
    pub fn plain(data: Value) -> Self {
        Self { data, http_status: None }
    }
}

/// What an execution called before one of its calls: every tool call its
/// code issued at an earlier step (`tools.search` and `tools.describe.tool`
/// aside), whatever became of it (made, waiting, declined, blocked), so a
/// replay of the same code counts the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub calls: u32,
    /// Those of them whose tool writes.
    pub writes: u32,
    /// Those of them to the same tool as this call.
    pub calls_to_tool: u32,
}

/// One call as [`Tools::policy`] is asked about it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyCall<'a> {
    pub path: &'a str,
    pub args: &'a Value,
    /// Whose code makes it; `None` where nobody is known (what a search item says).
    pub owner: Option<&'a Principal>,
    /// The toolkit whose view it is made in, set by that view.
    pub toolkit: Option<&'a ToolkitName>,
    /// What the execution called before it.
    pub before: CallCounts,
}

impl<'a> PolicyCall<'a> {
    /// A call of `path` with `args`, by nobody known, first of its execution.
    pub fn new(path: &'a str, args: &'a Value) -> Self {
        Self { path, args, owner: None, toolkit: None, before: CallCounts::default() }
    }
}

/// Which call this is, for logs and idempotency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    pub execution_id: ExecutionId,
    pub step: u32,
    /// Whose code makes the call: per-owner sources use that owner's tokens.
    pub owner: Option<Principal>,
    /// What the execution called before this call, for a policy asked again as it is made.
    pub before: CallCounts,
}

impl CallContext {
    /// Step `step` of `execution_id`, by nobody known, first of its execution.
    pub fn new(execution_id: ExecutionId, step: u32) -> Self {
        Self { execution_id, step, owner: None, before: CallCounts::default() }
    }

    /// The call as a policy is asked about it again when it is made.
    pub fn policy_call<'a>(&'a self, path: &'a str, args: &'a Value) -> PolicyCall<'a> {
        PolicyCall { owner: self.owner.as_ref(), before: self.before, ..PolicyCall::new(path, args) }
    }

    /// `<executionId>:<step>`: the same for every attempt at this call, so an
    /// upstream that honours idempotency keys never applies it twice.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.execution_id, self.step)
    }
}

/// Whether each source behind the tools is connected: what `GET /readyz` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readiness {
    /// By namespace.
    pub sources: BTreeMap<String, SourceReadiness>,
}

impl Readiness {
    /// Every source connected (tools without sources are ready).
    pub fn is_ready(&self) -> bool {
        self.sources.values().all(|s| matches!(s, SourceReadiness::Connected))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceReadiness {
    Connected,
    /// Not connected since `since` (the first failure), for `reason` (the
    /// latest failure's, redacted); tried again from `next_retry_at` on.
    Unavailable {
        reason: String,
        since: Timestamp,
        next_retry_at: Timestamp,
    },
}

#[async_trait]
pub trait Tools: Send + Sync {
    /// Check a new call's arguments against its tool's input (required,
    /// unknown, types, what the request could not carry safely), before
    /// [`Tools::policy`] is asked: `Err(message)` fails the call at once with
    /// `invalid_arguments`, whatever the policy would say, so nobody is asked
    /// to approve a call that could not be made. A path the view does not
    /// know passes (its call then says so). No default: a view that forgot to
    /// forward it to the view it wraps would let invalid calls pause again.
    fn validate(&self, path: &str, args: &Value) -> Result<(), String>;

    /// Decide whether a call may run, before it is made (after [`Tools::validate`]).
    fn policy(&self, call: &PolicyCall<'_>) -> Policy;

    /// Whether the tool at `path` reads or writes, as its source describes it
    /// (`None`: no such tool here), for the audit trail. No default, like
    /// `validate`: a view must forward it to the view it wraps.
    fn effect(&self, path: &str) -> Option<Effect>;

    /// Called once per run, the first time [`Tools::policy`] says a new call
    /// needs approval or a connection, before that call is planned: a view
    /// whose decisions depend on stored data (the owner's grants and
    /// connections) loads it here, so runs that never meet one never read it.
    async fn prepare_approvals(&self) {}

    /// Called with the run's owner by the view that knows it, when the owner's
    /// connections are read (and before a search): tools that only an owner's
    /// token can list (an OAuth-protected MCP server's) are listed now, so the
    /// policy decides on them. Views forward it to the view they wrap.
    async fn prepare_for(&self, _owner: &Principal) {}

    /// Make a call. Only called for paths the policy lets run (or that were approved).
    async fn call(&self, path: &str, args: Value, ctx: &CallContext) -> ToolOutcome;

    /// The call the sandbox makes: [`Tools::call`] plus the HTTP status, which
    /// the code sees and the journal records. Tools backed by HTTP override it.
    async fn call_with_status(&self, path: &str, args: Value, ctx: &CallContext) -> Result<ToolSuccess, ToolError> {
        self.call(path, args, ctx).await.map(ToolSuccess::plain)
    }

    /// `tools.search(request)`: `{items:[{path, description, namespace}], total}`.
    async fn search(&self, request: Value) -> ToolOutcome;

    /// `tools.describe.tool({path})`: TypeScript declarations of the tool.
    async fn describe(&self, request: Value) -> ToolOutcome;

    /// Whether this view has a tool at `path` (a toolkit's view hides the
    /// tools outside it). Views that cannot tell say yes.
    fn offers(&self, _path: &str) -> bool {
        true
    }

    /// The toolkit this view of the tools is, if it is one (a toolkit's
    /// executions are resumed with that toolkit's view).
    fn toolkit(&self) -> Option<&ToolkitName> {
        None
    }

    /// This view with `wrap` applied beneath its own rules, when it has rules
    /// of its own over another view (a toolkit's view: its stricter actions
    /// must apply after whatever `wrap` loosens, such as the owner's grants);
    /// `None` for a view that is to be wrapped whole.
    fn beneath(&self, _wrap: &dyn Fn(Arc<dyn Tools>) -> Arc<dyn Tools>) -> Option<Arc<dyn Tools>> {
        None
    }

    /// How the sources behind these tools stand, for `GET /readyz`. A trait
    /// method rather than a provider the hosts pass beside the tools: the host
    /// already holds the tools it serves (the catalog), so readiness cannot
    /// name other sources than the calls reach, and needs no wiring of its
    /// own. The host asks the tools it was given, not a run's views; the
    /// default (no sources) is ready.
    fn readiness(&self) -> Readiness {
        Readiness::default()
    }

    /// `tools.search` among the tools `visible` keeps, for a toolkit's view.
    /// The default filters what [`Tools::search`] found; the catalog filters
    /// before paging, so limits and totals count only visible tools.
    async fn search_visible(&self, request: Value, visible: &PathFilter<'_>) -> ToolOutcome {
        let mut found = self.search(request).await?;
        if let Some(items) = found["items"].as_array_mut() {
            items.retain(|item| item["path"].as_str().is_some_and(visible));
            let total = items.len();
            found["total"] = total.into();
        }
        Ok(found)
    }

    /// The `ui://` resources (MCP Apps) of the upstream MCP servers this
    /// view shows, as far as they are known without asking anyone: those
    /// its tools link (`_meta.ui.resourceUri`) and those listed already.
    /// The MCP host declares the `io.modelcontextprotocol/ui` extension when
    /// there are any. Views that hide tools hide their resources; the
    /// default (no MCP sources) has none.
    fn known_ui_resources(&self) -> Vec<UiResource> {
        Vec::new()
    }

    /// The `ui://` resources `owner` may read through this view, for
    /// `resources/list`: the upstreams that declare resources are asked
    /// (once per instance), a per-owner server with `owner`'s token (and
    /// only when they have connected it). Views forward it, hiding what they hide.
    async fn ui_resources(&self, _owner: &Principal) -> Vec<UiResource> {
        Vec::new()
    }

    /// `resources/read` of the `ui://` resource `uri` from the upstream that
    /// serves it, with `owner`'s credentials where the server is per owner:
    /// the upstream's result (`contents`, each with its `_meta.ui`). Any
    /// other URI, or one this view hides, is [`UiResourceError::NotFound`].
    async fn read_ui_resource(&self, _owner: &Principal, uri: &str) -> Result<Value, UiResourceError> {
        Err(UiResourceError::NotFound { uri: uri.to_owned() })
    }
}
