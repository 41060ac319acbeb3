//! Remembered approvals ("always allow"): stored per owner and tool, applied
//! while the policy is evaluated, listed and revoked by their owner.
//!
//! Grants are never cached across runs: a revoke takes effect on the owner's
//! next call, in every process. A run that meets a call needing approval
//! reads its owner's grants (one query) when this process last saw the owner
//! hold one; otherwise it reads nothing, and the pause it stores is
//! conditional on there being no live grant for the calls it waits on (in the
//! same write, [`executor_store::Ungranted`]). When there is one, nothing is
//! stored and the run goes again from its journal with the grants read
//! ([`RunGrants`]). Either way a call runs by a grant that was live when the
//! run decided, and a pause is stored only when no grant lets its calls run,
//! as read or as checked in its write.
//! Only someone a pause asked can create one (the approval page,
//! the owner's JSON API, the answer to a native elicitation); `resume` cannot.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use executor_core::Effect;
use executor_core::{Clock, Grant, GrantId, GrantedBy, Principal, ToolkitName};
use executor_sandbox::{
    Allowance, CallContext, PathFilter, Policy, PolicyCall, ToolError, ToolOutcome, ToolSuccess, Tools, UiResource,
    UiResourceError,
};
use executor_store::{Access, GrantStore, StoreError};
use serde_json::Value;
use tokio::sync::OnceCell;

pub struct Grants {
    store: Arc<dyn GrantStore>,
    clock: Arc<dyn Clock>,
    ttl: Duration,
    holders: Arc<Holders>,
}

impl Grants {
    /// Grants made here live for `ttl` (`EXECUTOR_GRANT_TTL_MS`).
    pub fn new(store: Arc<dyn GrantStore>, clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        Self { store, clock, ttl, holders: Arc::default() }
    }

    /// `tools` as `owner`'s code sees them on `endpoint` (`None`: `/mcp`): a
    /// call that needs approval runs when the owner has a live grant for its
    /// tool that applies there. Blocked stays blocked. The grants are read
    /// when the run first meets a call that needs approval (see [`RunGrants`]).
    pub fn tools_for(
        &self,
        owner: &Principal,
        endpoint: Option<&ToolkitName>,
        tools: Arc<dyn Tools>,
    ) -> Arc<dyn Tools> {
        self.tools_of_run(owner, endpoint, tools, Arc::default())
    }

    /// [`Grants::tools_for`], the grants as `run` sees them.
    pub(crate) fn tools_of_run(
        &self,
        owner: &Principal,
        endpoint: Option<&ToolkitName>,
        tools: Arc<dyn Tools>,
        run: Arc<RunGrants>,
    ) -> Arc<dyn Tools> {
        Arc::new(Granted {
            inner: tools,
            owner: owner.clone(),
            endpoint: endpoint.cloned(),
            store: self.store.clone(),
            holders: self.holders.clone(),
            run,
        })
    }

    /// "Always allow" each of `tools` for `owner`, on `toolkit`'s endpoint
    /// only when the pause was a toolkit's (`None`: everywhere). A tool
    /// already granted (a concurrent answer) keeps its grant.
    pub async fn remember<'a>(
        &self,
        owner: &Principal,
        toolkit: Option<&ToolkitName>,
        tools: impl IntoIterator<Item = &'a str>,
        by: GrantedBy,
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        let unique: HashSet<&str> = tools.into_iter().collect();
        for tool in unique {
            let id = crate::application::random::grant_id()
                .map_err(|e| StoreError::Backend { operation: "draw a grant id", detail: e.to_string() })?;
            let grant = Grant::new(id, owner.clone(), tool, by, now, self.ttl).in_toolkit(toolkit.cloned());
            match self.store.create_grant(&grant).await {
                Ok(()) | Err(StoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
            tracing::info!(executor.grant.id = grant.id.as_str(), tool, by = by.as_str(), "approval remembered");
            self.holders.note(owner, true);
        }
        Ok(())
    }

    /// `owner`'s live grants, oldest first.
    pub async fn list(&self, owner: &Principal) -> Result<Vec<Grant>, StoreError> {
        let mut grants = self.store.list_grants(owner).await?;
        grants.sort_by_key(|g| g.created_at);
        Ok(grants)
    }

    /// Revoke `owner`'s grant `id` (its next call asks again); `NotFound` for
    /// anyone else's, a malformed id, or none.
    pub async fn revoke(&self, owner: &Principal, id: &str) -> Result<Grant, StoreError> {
        let id = GrantId::parse(id).map_err(|_| StoreError::NotFound { what: "grant" })?;
        let grant = self.store.revoke_grant(Access::Owner(owner), &id).await?;
        tracing::info!(executor.grant.id = grant.id.as_str(), tool = grant.tool, "grant revoked");
        Ok(grant)
    }
}

/// At most this many owners are remembered as holding grants; past it the
/// memory starts again (their runs then find their grants in a pause's write).
const MAX_HOLDERS: usize = 4096;

/// The owners this process last saw holding a live grant. It decides only
/// whether a run reads the grants before it pauses or has its pause's write
/// check them, never whether a grant applies: both see the grants as stored.
#[derive(Default)]
struct Holders(Mutex<HashSet<Principal>>);

impl Holders {
    fn holds(&self, owner: &Principal) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).contains(owner)
    }

    fn note(&self, owner: &Principal, holds: bool) {
        let mut holders = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match holds {
            true if holders.contains(owner) => {}
            true => {
                if holders.len() >= MAX_HOLDERS {
                    holders.clear();
                }
                holders.insert(owner.clone());
            }
            false => {
                holders.remove(owner);
            }
        }
    }
}

/// The owner's grants as one run sees them: read at its first call that
/// needs approval when its owner is known here to hold one, or when an
/// earlier pass of the run found one; otherwise not read, and the run's
/// pause is stored only if no grant lets a call it waits on run.
#[derive(Default)]
pub(crate) struct RunGrants {
    /// The granted tools and their grants' ids, once read.
    read: OnceCell<HashMap<String, GrantId>>,
    /// A pause found a grant: read them, whoever the owner is.
    wanted: AtomicBool,
}

impl RunGrants {
    /// Whether the run's pause must check its calls' grants in its write:
    /// the run neither read them nor was told to.
    pub(crate) fn unread(&self) -> bool {
        !self.read.initialized() && !self.wanted.load(Ordering::Relaxed)
    }

    /// A pause found a grant for a call it waits on (or could not check):
    /// the run goes again and reads the grants at its first call that needs approval.
    pub(crate) fn want(&self) {
        self.wanted.store(true, Ordering::Relaxed);
    }
}

/// Tools whose approval the owner granted run without asking.
struct Granted {
    inner: Arc<dyn Tools>,
    owner: Principal,
    /// The toolkit whose endpoint the run is on: grants given for another
    /// toolkit do not apply.
    endpoint: Option<ToolkitName>,
    store: Arc<dyn GrantStore>,
    holders: Arc<Holders>,
    run: Arc<RunGrants>,
}

/// The one rule: a grant turns "needs approval" into "runs", by that grant;
/// nothing else changes.
fn with_grant(policy: Policy, grant: Option<&GrantId>) -> Policy {
    match (policy, grant) {
        (Policy::NeedsApproval { .. }, Some(grant)) => Policy::Run { by: Allowance::Grant(grant.as_str().to_owned()) },
        (other, _) => other,
    }
}

#[async_trait]
impl Tools for Granted {
    // A grant skips the question, never the check: an invalid call fails as it would without one.
    fn validate(&self, path: &str, args: &Value) -> Result<(), String> {
        self.inner.validate(path, args)
    }

    fn policy(&self, call: &PolicyCall<'_>) -> Policy {
        let grant = self.run.read.get().and_then(|tools| tools.get(call.path));
        with_grant(self.inner.policy(call), grant)
    }

    fn effect(&self, path: &str) -> Option<Effect> {
        self.inner.effect(path)
    }

    /// Read the owner's grants, unless the pause's write is to check them
    /// ([`RunGrants`]). If they cannot be read, none applies: the call asks
    /// for approval, as it would without a grant.
    async fn prepare_approvals(&self) {
        if !self.run.wanted.load(Ordering::Relaxed) && !self.holders.holds(&self.owner) {
            return;
        }
        self.run
            .read
            .get_or_init(|| async {
                match self.store.list_grants(&self.owner).await {
                    Ok(grants) => {
                        self.holders.note(&self.owner, !grants.is_empty());
                        let live = grants.into_iter().filter(|g| g.applies_on(self.endpoint.as_ref()));
                        live.map(|g| (g.tool, g.id)).collect()
                    }
                    Err(error) => {
                        tracing::warn!(%error, "grants could not be read; calls that need approval ask for it");
                        HashMap::new()
                    }
                }
            })
            .await;
    }

    async fn prepare_for(&self, owner: &Principal) {
        self.inner.prepare_for(owner).await;
    }

    async fn call(&self, path: &str, args: Value, ctx: &CallContext) -> ToolOutcome {
        self.inner.call(path, args, ctx).await
    }

    async fn call_with_status(&self, path: &str, args: Value, ctx: &CallContext) -> Result<ToolSuccess, ToolError> {
        self.inner.call_with_status(path, args, ctx).await
    }

    async fn search(&self, request: Value) -> ToolOutcome {
        self.inner.search(request).await
    }

    async fn describe(&self, request: Value) -> ToolOutcome {
        self.inner.describe(request).await
    }

    // The view it wraps decides what it is and what it shows.
    fn toolkit(&self) -> Option<&ToolkitName> {
        self.inner.toolkit()
    }

    fn offers(&self, path: &str) -> bool {
        self.inner.offers(path)
    }

    async fn search_visible(&self, request: Value, visible: &PathFilter<'_>) -> ToolOutcome {
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

#[cfg(test)]
mod tests {
    use executor_core::SystemClock;
    use executor_store::EmbeddedStore;
    use serde_json::json;

    use super::*;

    /// A toolkit's view where every call needs approval.
    struct Strict(ToolkitName);

    #[async_trait]
    impl Tools for Strict {
        fn validate(&self, _: &str, args: &Value) -> Result<(), String> {
            if args.get("bad").is_some() { Err("unknown argument `bad`".into()) } else { Ok(()) }
        }

        fn policy(&self, call: &PolicyCall<'_>) -> Policy {
            Policy::NeedsApproval { message: format!("{}?", call.path), rule: "strict".into() }
        }

        fn effect(&self, _: &str) -> Option<Effect> {
            Some(Effect::Write)
        }

        async fn call(&self, _: &str, _: Value, _: &CallContext) -> ToolOutcome {
            Ok(Value::Null)
        }

        async fn search(&self, _: Value) -> ToolOutcome {
            Ok(Value::Null)
        }

        async fn describe(&self, _: Value) -> ToolOutcome {
            Ok(Value::Null)
        }

        fn toolkit(&self) -> Option<&ToolkitName> {
            Some(&self.0)
        }
    }

    #[tokio::test]
    async fn a_granted_view_stays_its_toolkit_and_reads_grants_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let owner = Principal::parse("alice").unwrap();
        let grants = Grants::new(store, Arc::new(SystemClock), Duration::from_secs(60));
        let (strict, other) = (ToolkitName::parse("strict").unwrap(), ToolkitName::parse("other").unwrap());
        grants.remember(&owner, None, ["w.create"], GrantedBy::ApprovalPage).await.unwrap();
        grants.remember(&owner, Some(&strict), ["w.update"], GrantedBy::OwnerApi).await.unwrap();
        grants.remember(&owner, Some(&other), ["w.delete"], GrantedBy::OwnerApi).await.unwrap();
        let tools = grants.tools_for(&owner, Some(&strict), Arc::new(Strict(strict.clone())));
        // Its executions are the toolkit's: they continue in its view.
        assert_eq!(tools.toolkit(), Some(&strict));
        let asks = Policy::NeedsApproval { message: "w.create?".into(), rule: "strict".into() };
        assert_eq!(tools.policy(&PolicyCall::new("w.create", &json!({}))), asks);
        tools.prepare_approvals().await;
        let by_grant = |tools: &Arc<dyn Tools>, path: &str| match tools.policy(&PolicyCall::new(path, &json!({}))) {
            Policy::Run { by: Allowance::Grant(id) } => Some(id),
            _ => None,
        };
        let ids: HashMap<String, String> =
            grants.list(&owner).await.unwrap().into_iter().map(|g| (g.tool, g.id.as_str().to_owned())).collect();
        assert_eq!(
            by_grant(&tools, "w.create").as_ref(),
            ids.get("w.create"),
            "granted on /mcp, once read, by its grant"
        );
        let invalid = tools.validate("w.create", &json!({"bad": 1}));
        assert_eq!(invalid, Err("unknown argument `bad`".into()), "a grant skips the question, never the check");
        assert_eq!(by_grant(&tools, "w.update").as_ref(), ids.get("w.update"), "granted on this toolkit");
        assert!(
            matches!(tools.policy(&PolicyCall::new("w.delete", &json!({}))), Policy::NeedsApproval { .. }),
            "another toolkit's"
        );
        // On /mcp, only the grant given there applies.
        let mcp = grants.tools_for(&owner, None, Arc::new(Strict(strict.clone())));
        mcp.prepare_approvals().await;
        assert_eq!(by_grant(&mcp, "w.create").as_ref(), ids.get("w.create"));
        assert!(
            matches!(mcp.policy(&PolicyCall::new("w.update", &json!({}))), Policy::NeedsApproval { .. }),
            "a toolkit's grant"
        );
    }

    /// A grant this process did not see made is not read until a pause of
    /// the run asks for it; read, it makes its owner known here, so the
    /// owner's later runs read their grants before they pause.
    #[tokio::test]
    async fn grants_are_read_for_owners_known_to_hold_them_or_when_a_pause_asks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let owner = Principal::parse("alice").unwrap();
        let now = SystemClock.now();
        let id = GrantId::parse("g1").unwrap();
        let made_elsewhere =
            Grant::new(id.clone(), owner.clone(), "w.create", GrantedBy::OwnerApi, now, Duration::from_secs(60));
        store.create_grant(&made_elsewhere).await.unwrap();
        let grants = Grants::new(store, Arc::new(SystemClock), Duration::from_secs(60));
        let strict = ToolkitName::parse("strict").unwrap();
        let call = json!({});
        let runs =
            |tools: &Arc<dyn Tools>| matches!(tools.policy(&PolicyCall::new("w.create", &call)), Policy::Run { .. });

        let run = Arc::new(RunGrants::default());
        let tools = grants.tools_of_run(&owner, None, Arc::new(Strict(strict.clone())), run.clone());
        tools.prepare_approvals().await;
        assert!(!runs(&tools) && run.unread(), "not read: the pause's write is to check them");
        run.want();
        assert!(!run.unread(), "asked for: the pause no longer checks them");
        tools.prepare_approvals().await;
        assert!(runs(&tools), "read at the next preparation");

        let next = Arc::new(RunGrants::default());
        let tools = grants.tools_of_run(&owner, None, Arc::new(Strict(strict)), next.clone());
        tools.prepare_approvals().await;
        assert!(runs(&tools) && !next.unread(), "the owner is known here to hold one: read at once");
    }

    #[test]
    fn a_grant_turns_only_approval_into_run() {
        let approve = || Policy::NeedsApproval { message: "create?".into(), rule: "r".into() };
        let block = || Policy::Blocked { reason: "off".into(), rule: "r".into() };
        let run = Policy::run_by_default;
        let grant = GrantId::parse("g1").unwrap();
        let by_grant = Policy::Run { by: Allowance::Grant("g1".into()) };
        let cases = [
            (run(), None, run()),
            (run(), Some(&grant), run()),
            (approve(), None, approve()),
            (approve(), Some(&grant), by_grant),
            (block(), None, block()),
            (block(), Some(&grant), block()),
        ];
        for (policy, grant, expected) in cases {
            assert_eq!(with_grant(policy.clone(), grant), expected, "{policy:?} grant={grant:?}");
        }
    }
}
